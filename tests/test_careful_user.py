"""Smaller things a careful user trips on (issue 23, point 5): a folder with no shard, what a
converted or recovered copy says of its recording, an env without an id, leftovers of a killed
compaction, and what `info` says of the steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import trajcore
from trajcore.plots import _title


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trajcore", *args], capture_output=True, text=True, timeout=300)


def record(path: Path, steps: int = 200, num_envs: int = 4) -> None:
    done = run("record", "CartPole-v1", "--num-envs", str(num_envs), "--steps", str(steps), str(path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("command", ["verify", "info", "ls"])
def test_a_folder_without_shards_is_no_dataset(tmp_path: Path, command: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run(command, str(empty))
    assert done.returncode == 2, done.stdout
    assert "no trajcore shard" in done.stderr and "intact" not in done.stdout


def test_open_of_a_folder_without_shards_raises(tmp_path: Path) -> None:
    with pytest.raises(trajcore.TrajcoreFileNotFoundError, match="no trajcore shard"):
        trajcore.open(tmp_path)
    with pytest.raises(FileNotFoundError):
        trajcore.recover(tmp_path, tmp_path / "out")


def test_the_parent_folder_of_several_datasets_names_them(tmp_path: Path) -> None:
    record(tmp_path / "a", 20, 1)
    record(tmp_path / "b", 20, 1)
    done = run("verify", str(tmp_path))
    assert done.returncode == 2
    assert "parent folder of 2 datasets (a, b)" in done.stderr
    with pytest.raises(trajcore.TrajcoreFileNotFoundError, match="parent folder of 2 datasets"):
        trajcore.open(tmp_path)


def _info(path: Path) -> tuple[dict[str, Any], str]:
    as_json = run("info", "--json", str(path))
    text = run("info", str(path))
    assert as_json.returncode == 0 and text.returncode == 0, as_json.stderr + text.stderr
    return json.loads(as_json.stdout), text.stdout


def test_copies_describe_the_original_recording(tmp_path: Path) -> None:
    record(tmp_path / "src", 300, 4)
    trajcore.convert(tmp_path / "src", tmp_path / "raw", codecs="raw")
    trajcore.recover(tmp_path / "raw", tmp_path / "rec")
    original, _ = _info(tmp_path / "src")
    assert original["env_steps_asked"] == 1200
    for copy, how, source in (("raw", "converted", "src"), ("rec", "recovered", "raw")):
        report, text = _info(tmp_path / copy)
        assert report["autoreset_modes"] == ["next_step"]
        assert report["env_ids"] == ["CartPole-v1"]
        assert report["num_envs"] == [4]
        assert report["metadata"] == original["metadata"]
        assert report["env_steps_asked"] == 1200
        assert report["env_steps"] == original["env_steps"]
        assert f"{how} from {tmp_path / source} on " in text
        origin = report["copied_from"][0]
        assert origin["path"] == str(tmp_path / source) and abs(origin["at_ns"] / 1e9 - time.time()) < 600


def test_info_says_asked_stored_and_why_in_one_line(tmp_path: Path) -> None:
    record(tmp_path / "run", 300, 4)
    report, text = _info(tmp_path / "run")
    lines = [line for line in text.splitlines() if line.strip().startswith("steps:")]
    assert len(lines) == 1
    stored = report["steps"]
    assert lines[0].strip() == (
        f"steps: 1,200 env steps asked, {stored:,} stored (transitions): the {1200 - stored:,} others only reset "
        "a sub-env under NEXT_STEP autoreset: an env step without a transition"
    )


def test_an_env_without_an_id_is_null_and_left_out_of_titles(tmp_path: Path) -> None:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1").unwrapped for _ in range(2)])
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "run")
    rec.reset(seed=0)
    for _ in range(50):
        rec.step(rec.action_space.sample())
    rec.close()
    report, text = _info(tmp_path / "run")
    assert report["env_ids"] == [None]
    assert "None" not in text.splitlines()[1]
    with trajcore.open(tmp_path / "run") as ds:
        assert _title(ds) == "run"


def _leftover(directory: Path, age_s: float) -> Path:
    path = directory / "shard-x.trj.compacting"
    path.write_bytes(b"")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_compaction_leftovers_are_removed_by_the_next_recorder_and_by_recover(tmp_path: Path) -> None:
    record(tmp_path / "run", 20, 1)
    old = _leftover(tmp_path / "run", 60)
    record(tmp_path / "run", 20, 1)  # a second recorder in the same directory
    assert not old.exists()
    old = _leftover(tmp_path / "run", 60)
    trajcore.recover(tmp_path / "run", tmp_path / "out")
    assert not old.exists()
    # One made just now may be a compaction that has not locked its file yet: it stays.
    new = _leftover(tmp_path / "run", 0)
    record(tmp_path / "run", 20, 1)
    assert new.exists()
