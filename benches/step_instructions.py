r"""The vector recorder call alone, for counting its instructions where the machine has no
hardware counters (valgrind's count is the same at any load): N vector steps of 16 CartPole
sub-envs recorded by `RecordVectorEpisodes`, with `RecordEpisodeStatistics` infos (`res`) or
CartPole's own empty ones (`none`):

    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=step.cg \
        --toggle-collect='*PyRecorder::__pymethod_step__*' \
        python3.11 benches/step_instructions.py 2000 none

(the interpreter's binary, not a pyenv shim: valgrind follows no child). The env loop's thread
is `step.cg-01`: its `summary:` line divided by N is the instructions per vector call, and
`callgrind_annotate --inclusive=yes step.cg-01` splits them by function (the writer thread's
files count nothing: it runs outside the call).
"""

from __future__ import annotations

import os
import sys
import tempfile

# As conftest.py: OpenBLAS's spinning worker threads would take the writer thread's core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium as gym
import trajcore
from gymnasium.wrappers.vector import RecordEpisodeStatistics


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000
    env = gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="sync")
    if len(sys.argv) > 2 and sys.argv[2] == "res":
        env = RecordEpisodeStatistics(env)
    env.action_space.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        recorded = trajcore.RecordVectorEpisodes(env, tmp + "/r")
        recorded.reset(seed=0)
        for _ in range(steps):
            recorded.step(recorded.action_space.sample())
        recorded.close()


if __name__ == "__main__":
    main()
