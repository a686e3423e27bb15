"""An I/O error on the writer thread (here: the file-size limit, as a full disk would) surfaces
as a RecorderError on a later call or on close, and what was written before stays readable; a
bad argument to `Writer.add_episode` is a trajcore error naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore

CHILD = """
import resource, signal, sys
import gymnasium as gym
import trajcore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG from write() instead of a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), sys.argv[1], flush_interval=0.05)
env.reset(seed=0)
try:
    for _ in range(2_000_000):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
except trajcore.RecorderError as e:
    print("step:", e)
try:
    env.close()
    print("closed without error")
except trajcore.RecorderError as e:
    print("close:", e)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_write_error_surfaces_and_earlier_data_stays_readable(tmp_path: Path) -> None:
    path = tmp_path / "full"
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("step: "), out.stdout
    assert "writer thread stopped" in lines[0] and ".trj" in lines[0], lines[0]
    assert lines[1].startswith("close: "), out.stdout  # close reports the same failure
    with pytest.warns(trajcore.TrajcoreWarning, match="unfinished record"):
        ds = trajcore.open(path)  # the write cut a record short: reported, everything before kept
    with ds:
        assert len(ds.problems) == 1
        assert ds.num_episodes > 10
        for ep in ds.episodes:
            assert ep.observations.shape == (ep.length + 1, 4)
            assert ep.rewards.sum() == ep.episode_return


def _episode(n: int = 3) -> dict[str, Any]:
    return {
        "observations": np.zeros((n + 1, 2), np.float32),
        "actions": np.zeros(n, np.int64),
        "rewards": np.ones(n),
        "terminations": np.array([False] * (n - 1) + [True]),
        "truncations": np.zeros(n, bool),
    }


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"rewards": ["a", "b", "c"]}, trajcore.SchemaError, r"rewards must be numbers, got <U1"),
        ({"rewards": [{}, {}, {}]}, trajcore.SchemaError, r"rewards must be numbers, got object"),
        ({"rewards": {"a": 1}}, trajcore.InvalidArgumentError, r"rewards must be 3 values .*got 1"),
        ({"rewards": np.ones(3) * (1 + 2j)}, trajcore.SchemaError, r"rewards must be numbers, got complex128"),
        (
            {"rewards": np.ones(2)},
            trajcore.InvalidArgumentError,
            r"rewards must be 3 values \(T = 3 as actions, .*\), got 2",
        ),
        ({"rewards": np.ones(4)}, trajcore.InvalidArgumentError, r"rewards must be 3 values .*got 4"),
        (
            {"observations": np.zeros((3, 2), np.float32)},
            trajcore.InvalidArgumentError,
            r"observations has 3 rows, expected T\+1 = 4",
        ),
        ({"actions": np.zeros(5, np.int64)}, trajcore.InvalidArgumentError, r"actions has 5 rows, expected T = 3"),
        ({"terminations": ["no", "no", "yes"]}, trajcore.SchemaError, r"terminations must be bools"),
        ({"truncations": [0, 0, 2]}, trajcore.SchemaError, r"truncations must be bools \(or 0 and 1\)"),
        ({"data": [1, 2]}, trajcore.InvalidArgumentError, r"data must be a mapping of name -> T rows, got list"),
        (
            {"actions": np.array([0, 7, 0])},
            trajcore.SchemaError,
            r"step 1: column 'action': value 7 is not in Discrete\(3\)",
        ),
    ],
)
def test_add_episode_names_the_argument_at_fault(
    tmp_path: Path, change: dict[str, Any], error: type[Exception], match: str
) -> None:
    """Issue 33, point 13: every bad input to `Writer.add_episode` is a trajcore error naming the
    argument at fault (a wrong-length rewards is blamed on rewards, not on the observations),
    never a plain ValueError, TypeError or AttributeError; nothing of the episode is listed."""
    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    with trajcore.Writer(tmp_path / "w", space, gym.spaces.Discrete(3)) as w:
        with pytest.raises(error, match=match) as raised:
            w.add_episode(**{**_episode(), **change})
        assert isinstance(raised.value, trajcore.TrajcoreError)
        w.add_episode(**_episode())  # the writer goes on
    with trajcore.open(tmp_path / "w") as ds:
        assert ds.num_episodes == 1 and ds.episodes[0].length == 3
