"""File size against recording pace (issue 14): the Atari steps of `test_read_peers.py` recorded
from the live env (its own pace) and replayed (as fast as the recorder goes), with trajcore's
defaults; prints seconds, transitions, bytes and bytes per step of each, and the ratio.

    python benches/pace_sizes.py OUT_DIR [live] [replayed]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import trajcore
from test_read_peers import VECTOR_STEPS, _record
from workloads import StreamVectorEnv, atari_stream, atari_vector, dir_bytes


def main() -> None:
    out = Path(sys.argv[1])
    which = sys.argv[2:] or ["live", "replayed"]
    stream = atari_stream(VECTOR_STEPS)
    per_step = {}
    for name in which:
        path = out / name
        shutil.rmtree(path, ignore_errors=True)
        env = atari_vector(stream.num_envs) if name == "live" else StreamVectorEnv(stream)
        seconds = _record(env, path, stream.actions)
        with trajcore.open(path) as ds:
            steps = ds.num_steps
        per_step[name] = dir_bytes(path) / steps
        print(f"{name}: {seconds:.1f} s, {steps} transitions, {dir_bytes(path)} B, {per_step[name]:.2f} B/step")
    if len(per_step) == 2:
        print(f"live / replayed: {per_step['live'] / per_step['replayed']:.3f}")


if __name__ == "__main__":
    main()
