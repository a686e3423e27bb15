"""An I/O error on the writer thread (here: the file-size limit, as a full disk would) surfaces
as a RecorderError on a later call or on close, and what was written before stays readable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
