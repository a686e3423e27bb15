"""trajcore.tools.bench.measure_overhead and `python -m trajcore bench` (tiny runs: keys and sanity)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import trajcore
from trajcore.cli import main
from trajcore.tools.bench import make_env, measure_overhead, peak_rss_bytes, rss_bytes

SPREAD = ("median", "min", "max")


def _check(r: dict[str, Any], num_envs: int, steps: int) -> None:
    assert r["num_envs"] == num_envs
    assert r["steps"] == steps
    for key in (
        "env_steps_per_s_without",
        "env_steps_per_s_with",
        "overhead_us_per_vector_step",
        "overhead_us_per_env_step",
        "overhead_pct",
        "call_us_per_vector_step",
        "call_us_per_env_step",
    ):
        assert set(r[key]) == set(SPREAD), key
        assert r[key]["min"] <= r[key]["median"] <= r[key]["max"], key
    assert r["env_steps_per_s_without"]["min"] > 0
    assert r["env_steps_per_s_with"]["min"] > 0
    # Per env step is per vector step shared by the sub-envs.
    per_vector = r["overhead_us_per_vector_step"]["median"]
    assert r["overhead_us_per_env_step"]["median"] == pytest.approx(per_vector / num_envs)
    assert r["bytes_written"] > 0
    assert r["bytes_raw"] > 0
    assert r["compression_ratio"] == pytest.approx(r["bytes_raw"] / r["bytes_written"])
    assert r["episodes"] > 0
    # In bytes, and bounded: the recorder's ring and the writer's buffers for these tiny runs (a
    # unit mixed up, KiB for bytes or a count of pages, or a recorder that kept its steps, is far
    # above). It is never negative by construction (`max(0, ...)`): nothing to check there.
    assert r["peak_rss_growth_bytes"] < 256 << 20
    json.dumps(r)  # plain numbers only


def test_vector_sync() -> None:
    seen: list[tuple[int, int]] = []
    r = measure_overhead(
        "CartPole-v1", num_envs=4, vectorization="sync", steps=600, repeats=3, progress=lambda d, t: seen.append((d, t))
    )
    _check(r, 4, 600)
    assert r["vectorization"] == "sync"
    # CartPole steps: at least one 4-byte float per obs value in the raw bytes.
    assert r["bytes_raw"] >= 600 * 4 * 4 * 4
    assert seen[-1] == (1200, 1200)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_single_env_with_a_policy_and_record_options(tmp_path: Path) -> None:
    calls = []

    def policy(obs: Any) -> int:
        calls.append(1)
        return int(obs[2] > 0)

    out = tmp_path / "rec"
    r = measure_overhead(
        "CartPole-v1", steps=500, repeats=2, policy=policy, record_kwargs={"zstd_level": None}, path=out
    )
    _check(r, 1, 500)
    assert r["vectorization"] is None
    assert len(calls) >= 1000  # both loops used the policy
    # Stored raw: nothing to gain, and the recording stays where it was asked to go.
    assert r["compression_ratio"] < 1.2
    with trajcore.open(out) as ds:
        assert ds.num_steps > 500


def _factory() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1")


def test_module_callable_env_and_make_env() -> None:
    env = make_env(f"{__name__}:_factory", 2)  # tests/ is on sys.path (conftest.py)
    try:
        assert env.num_envs == 2
    finally:
        env.close()
    r = measure_overhead(_factory, num_envs=2, steps=200, repeats=2)
    _check(r, 2, 200)
    assert r["env"] == "_factory"


def test_invalid_arguments() -> None:
    with pytest.raises(trajcore.InvalidArgumentError):
        measure_overhead("CartPole-v1", steps=0)
    with pytest.raises(trajcore.InvalidArgumentError):
        make_env("CartPole-v1", 2, "threads")  # type: ignore[arg-type]
    with pytest.raises(trajcore.InvalidArgumentError):
        make_env("no_such_module_xyz:make", 1)


def test_memory_probes() -> None:
    assert rss_bytes() > 0
    assert peak_rss_bytes() >= rss_bytes()


def test_cli_bench_writes_json_and_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    code = main(
        ["bench", "--env", "CartPole-v1", "--num-envs", "2", "--steps", "300", "--repeats", "3", "--json", str(out)]
    )
    assert code == 0
    r = json.loads(out.read_text())
    _check(r, 2, 300)
    assert r["vectorization"] == "sync"
    text = capsys.readouterr()
    assert "overhead per vector step (us)" in text.out
    assert "median" in text.out
    assert "bench CartPole-v1 x2 (sync)" in text.err


def test_cli_bench_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--env", "CartPole-v1", "--num-envs", "2", "--vectorization", "none"]) == 2
    assert "--vectorization none takes --num-envs 1" in capsys.readouterr().err
    assert main(["bench", "--env", "CartPole-v1", "--repeats", "0"]) == 2
    assert "--steps and --repeats must be >= 1" in capsys.readouterr().err
