"""The command line as a user meets it: the console script, --version, help with defaults and
examples, one-line errors with exit status 2, ls (and ls | head), export, import-minari and
convert."""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import trajcore
from trajcore.cli import _parser


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trajcore", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_console_script_version_and_usage_name() -> None:
    try:
        importlib.metadata.distribution("trajcore")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("trajcore is imported from the source tree, not installed: there is no console script")
    script = Path(sys.executable).parent / "trajcore"
    assert script.exists(), "the trajcore console script is installed with the package"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0
    assert version.stdout.strip() == f"trajcore {trajcore.__version__} (file format 1.2)"
    usage = subprocess.run([str(script), "info"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: trajcore info ")
    assert run("info").stderr.startswith("usage: python -m trajcore info ")


def test_every_option_has_help_with_its_default_and_every_command_examples() -> None:
    parser = _parser("trajcore")
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == {
        "record",
        "info",
        "ls",
        "view",
        "plot",
        "export",
        "import-minari",
        "import-lerobot",
        "convert",
        "annotate",
        "verify",
        "recover",
        "card",
        "bench",
    }
    for name, sub in commands.items():
        text = sub.format_help()
        assert "examples:\n  trajcore " + name in text, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.dest}: no help"
            if action.option_strings:
                shown = sub._get_formatter()._get_help_string(action)  # type: ignore[attr-defined]
                if action.required:
                    assert "required" in shown, f"{name} {action.option_strings}"
                else:
                    assert "default" in shown, f"{name} {action.option_strings}: default not shown"
                    assert "default: None" not in shown % {"default": action.default}, f"{name} {action.option_strings}"
    top = parser.format_help()
    assert "examples:" in top and "--version" in top


def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(run("record", "NoSuchEnv-v0", str(tmp_path / "r")), "cannot make env 'NoSuchEnv-v0'")
    assert_one_line_error(run("record", "CartPole-v1", str(tmp_path / "r"), "--metadata", "{oops"), "--metadata")
    assert_one_line_error(run("record", "CartPole-v1", str(tmp_path / "r"), "--metadata", "[1]"), "JSON object")
    assert_one_line_error(run("record", "CartPole-v1", str(tmp_path / "r"), "--policy", "nomodule:act"), "--policy")
    assert_one_line_error(run("record", "CartPole-v1", str(tmp_path / "r"), "--policy", "os:nothing"), "no attribute")
    assert_one_line_error(run("record", "CartPole-v1", str(tmp_path / "r"), "--policy", "os.path:sep"), "not callable")
    assert_one_line_error(run("record", "CartPole-v1", str(tmp_path / "r"), "--num-envs", "0"), "--num-envs")
    assert not (tmp_path / "r").exists()
    assert_one_line_error(run("ls", str(tmp_path / "missing")), "TrajcoreFileNotFoundError", "missing")
    assert_one_line_error(run("export", str(tmp_path / "missing"), str(tmp_path / "o.csv")), "missing")
    assert_one_line_error(run("bench", "--env", "NoSuchEnv-v0", "--steps", "10"), "NoSuchEnv")
    try:
        import minari  # noqa: F401

        missing = "nothing"  # the source is named
    except ImportError:
        missing = "pip install minari"  # the optional package is named, on one line too
    assert_one_line_error(run("import-minari", str(tmp_path / "nothing"), str(tmp_path / "dst")), missing)


def test_ls_table_json_and_select(recorded: Callable[[str], Path]) -> None:
    path = str(recorded("vector"))
    table = run("ls", path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    with trajcore.open(path) as ds:
        metrics = ["metrics", "(mean)"] if ds.metrics() else []
        assert lines[0].split() == ["index", "env", "length", "return", "complete", "end", *metrics, "metadata"]
        assert len(lines) == 1 + ds.num_episodes
        first = ds.episodes[0]
        fields = lines[1].split(maxsplit=6)
        assert fields[:3] == ["0", str(first.env_index), str(first.length)]
        assert json.loads(lines[1].rsplit("  ", 1)[1]) == first.metadata
        for name, stats in first.metrics.items():
            assert f"{name}={stats['mean']:.5g}" in lines[1]
        chosen = ds.select(env_index=1, complete=True).indices
        rows = [json.loads(line) for line in run("ls", path, "--json").stdout.splitlines()]
        assert [r["episode"] for r in rows] == list(range(ds.num_episodes))
        assert rows[2]["metadata"] == ds.episodes[2].metadata
        assert rows[2]["length"] == ds.episodes[2].length
    sel = run("ls", path, "--json", "--select", "env_index=1", "--select", "complete=true")
    assert [json.loads(line)["episode"] for line in sel.stdout.splitlines()] == chosen
    meta = run("ls", path, "--json", "--select", "metadata.env=2")
    assert {json.loads(line)["env_index"] for line in meta.stdout.splitlines()} == {2}
    assert_one_line_error(run("ls", path, "--select", "colour=red"), "unknown key 'colour'")


def test_ls_into_head_stops_quietly(tmp_path: Path) -> None:
    path = tmp_path / "many"
    made = run("record", "CartPole-v1", "--num-envs", "16", "--steps", "3000", str(path))
    assert made.returncode == 0, made.stderr
    for extra in ([], ["--json"]):
        command = [sys.executable, "-m", "trajcore", "ls", str(path), *extra]
        pipeline = subprocess.run(
            " ".join(f"'{c}'" for c in command) + " | head -1", shell=True, capture_output=True, text=True, timeout=120
        )
        assert pipeline.stdout.count("\n") == 1
        assert pipeline.stderr == "", pipeline.stderr  # no BrokenPipeError, no traceback


def test_export_every_format_from_the_command_line(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    path = str(recorded("vector"))
    with trajcore.open(path) as ds:
        steps, episodes = ds.num_steps, ds.num_episodes
        complete = len(ds.select(complete=True))
    out = tmp_path / "v.csv"
    done = run("export", path, str(out), "--columns", "obs,reward,data")
    assert done.returncode == 0, done.stderr
    assert f"exported {episodes:,} episodes, {steps:,} steps to {out} (csv)" in done.stderr
    with open(out, newline="") as f:
        header = next(csv.reader(f))
    assert header == ["episode", "env_index", "step", "obs_0", "obs_1", "obs_2", "reward", "data/logp", "data/count"]
    assert_one_line_error(run("export", path, str(out)), "already exists", "--force")
    assert run("export", path, str(out), "--force", "--select", "complete=true").returncode == 0
    assert len({row[0] for row in list(csv.reader(out.open()))[1:]}) == complete
    done = run("export", path, str(tmp_path / "v.jsonl"))
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "v.jsonl").read_text().splitlines()) == episodes
    assert_one_line_error(run("export", path, str(tmp_path / "v.data")), "cannot tell the format")
    assert_one_line_error(
        run("export", path, str(tmp_path / "v.jsonl"), "--force", "--columns", "obs"), "--columns applies"
    )


def test_export_parquet_from_the_command_line(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is optional: Parquet export needs it")
    path = str(recorded("nested"))
    out = tmp_path / "n.pq"
    done = run("export", path, str(out))
    assert done.returncode == 0, done.stderr
    with trajcore.open(path) as ds:
        assert pq.read_table(out).num_rows == ds.num_steps


def test_minari_round_trip_from_the_command_line(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    pytest.importorskip("minari", reason="minari is optional: Minari export needs it")
    pytest.importorskip("h5py", reason="h5py is optional: Minari's HDF5 storage needs it")
    env = {"MINARI_DATASETS_PATH": str(tmp_path / "minari")}
    path = str(recorded("cartpole"))
    done = run("export", path, "trajcore/cartpole/test-v0", "--format", "minari", env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "minari" / "trajcore" / "cartpole" / "test-v0" / "data").is_dir()
    back = tmp_path / "back"
    done = run("import-minari", "trajcore/cartpole/test-v0", str(back), env=env)
    assert done.returncode == 0, done.stderr
    with trajcore.open(path) as a, trajcore.open(back) as b:
        assert b.num_steps == a.num_steps
        np.testing.assert_array_equal(b.episodes[-1].observations, a.episodes[-1].observations)
        assert [ep.metadata for ep in b.episodes] == [ep.metadata for ep in a.episodes if ep.length]
    assert_one_line_error(run("import-minari", "trajcore/cartpole/test-v0", str(back), env=env), "already exists")


def test_convert_from_the_command_line(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    path = str(recorded("vector"))
    done = run("convert", path, str(tmp_path / "raw"), "--codecs", "raw", "--select", "env_index=0")
    assert done.returncode == 0, done.stderr
    with trajcore.open(path) as a, trajcore.open(tmp_path / "raw") as b:
        want = a.select(env_index=0)
        assert b.num_episodes == len(want)
        np.testing.assert_array_equal(b.episodes[0].observations, want[0].observations)
        # Every value column raw (masks keep the writer's default codec, as convert documents).
        assert all(c["codec"]["zstd_level"] is None for c in b._core.columns(0) if c.get("mask_of") is None)
    assert_one_line_error(run("convert", path, str(tmp_path / "x"), "--codecs", "{nope"), "--codecs")


def test_apply_select(recorded: Callable[[str], Path]) -> None:
    from trajcore.read.select.selection import apply_select, parse_select

    with trajcore.open(recorded("vector")) as ds:
        n = ds.num_episodes
        assert apply_select(ds, parse_select(["episodes=2:8:2"])).indices == [2, 4, 6]
        assert apply_select(ds, parse_select(["episodes=-2:"])).indices == [n - 2, n - 1]
        assert apply_select(ds, parse_select(["episodes=5,1,-1"])).indices == [1, 5, n - 1]
        assert apply_select(ds, parse_select(["recording=0"])).indices == list(range(n))
        assert apply_select(ds, parse_select(["recording=1"])).indices == []
        both = apply_select(ds, parse_select(["episodes=0:10", "complete=true", "metadata.env=0"]))
        assert both.indices == [
            i for i in range(10) if ds.episodes[i].complete and ds.episodes[i].metadata.get("env") == 0
        ]
        assert apply_select(ds, parse_select(["metadata.env=true"])).indices == []  # True is not the number 1
        with pytest.raises(trajcore.InvalidArgumentError, match="out of range"):
            apply_select(ds, parse_select([f"episodes={n}"]))
