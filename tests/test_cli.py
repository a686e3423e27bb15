"""python -m trajcore record / info (the other commands: test_cli_commands.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import trajcore


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajcore", *args], capture_output=True, text=True, timeout=300)


def test_record_then_info(tmp_path: Path) -> None:
    path = tmp_path / "cp4"
    done = run("record", "CartPole-v1", "--num-envs", "4", "--steps", "500", "--seed", "3", str(path))
    assert done.returncode == 0, done.stderr
    assert "recorded 2000 env steps" in done.stderr

    with trajcore.open(path) as ds:
        s = ds.summaries()
        assert ds.metadata == {"env_id": "CartPole-v1", "num_envs": 4, "seed": 3, "policy": "random"}
        assert ds.meta(0)["num_envs"] == 4
        assert sorted(set(s["env_index"].tolist())) == [0, 1, 2, 3]
        assert int(np.sum(~s["complete"])) == 4
        episodes, steps = ds.num_episodes, ds.num_steps

    info = run("info", str(path), "--json")
    assert info.returncode == 0, info.stderr
    report = json.loads(info.stdout)
    assert report["episodes"] == episodes
    assert report["steps"] == steps
    assert report["env_ids"] == ["CartPole-v1"]
    assert report["num_envs"] == [4]
    assert report["autoreset_modes"] == ["next_step"]
    assert report["bytes_on_disk"] > 0
    assert report["bytes_raw"] > 0
    assert report["length"]["complete"]["max"] <= 500
    assert report["return"]["complete"]["mean"] > 0
    assert report["complete_episodes"] + report["incomplete_episodes"] == episodes
    assert report["incomplete_episodes"] == 4  # one still running per sub-env
    # 500 vector steps x 4 sub-envs = 2000 env steps, of which the NEXT_STEP resets are not stored.
    assert report["env_steps"]["min"] <= 2000 <= report["env_steps"]["max"]
    assert report["env_steps"]["min"] == steps + episodes - 4
    names = {c["name"] for c in report["columns"]}
    assert {"obs", "action", "reward", "terminated", "truncated"} <= names
    assert report["observation_space"].startswith("Box(")

    text = run("info", str(path))
    assert text.returncode == 0, text.stderr
    assert f"episodes: {episodes}" in text.stdout
    assert "CartPole-v1" in text.stdout
    assert "on disk:" in text.stdout
    assert f"{steps:,} stored (transitions)" in text.stdout
    assert "under NEXT_STEP autoreset" in text.stdout
    assert "return (complete)" in text.stdout and "return (incomplete)" in text.stdout


def test_record_with_a_policy_and_same_step(tmp_path: Path) -> None:
    (tmp_path / "mypolicy.py").write_text(
        "import numpy as np\ndef act(obs):\n    return (obs[:, 2] > 0).astype(np.int64)\n"
    )
    path = tmp_path / "pol"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajcore",
            "record",
            "CartPole-v1",
            "--num-envs",
            "2",
            "--steps",
            "200",
            "--autoreset",
            "same_step",
            "--policy",
            "mypolicy:act",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
    )
    assert done.returncode == 0, done.stderr
    with trajcore.open(path) as ds:
        assert ds.metadata["policy"] == "mypolicy:act"
        assert ds.num_steps == 400  # same-step autoreset: every vector step is a transition
        for ep in ds.episodes:
            assert_policy = (ep.observations[:-1, 2] > 0).astype(np.int64)
            np.testing.assert_array_equal(ep.actions, assert_policy)


def test_info_on_missing_path_fails_cleanly(tmp_path: Path) -> None:
    done = run("info", str(tmp_path / "nothing"))
    assert done.returncode == 2
    assert "TrajcoreFileNotFoundError" in done.stderr
    assert "nothing" in done.stderr
    assert "Traceback" not in done.stderr
