"""The harnesses of `test_recording_round2.py::test_infos_call` (16 CartPole sub-envs replayed,
recorded replay minus replay alone, with and without `RecordEpisodeStatistics` infos, rounds
interleaved) and `test_infos_call_real_env` (the same call on a real env loop, each call timed
by itself), with a choice of clock and of how many captured steps the replay cycles through:

    python benches/infos_call_clocks.py [ROUNDS] [wall|thread] [CAPTURED_STEPS|real]

`thread` times the env loop's thread only (CPU time: a shared machine's other load and the
writer thread drop out). With 1,000 captured steps (the benchmark's) every replayed array and
dict is out of this core's cache when the recorder reads it; with 60 they stay in it, as a real
env's fresh arrays do; `real` runs the real env loop. Prints the medians (µs per vector step)
and the median of per-round ratios.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

# As conftest.py: OpenBLAS's spinning worker threads would take the writer thread's core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from test_recording_round2 import _replayed, real_env_calls, recorder_calls
from trajcore.tools import bench


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 41
    clock = time.thread_time if len(sys.argv) > 2 and sys.argv[2] == "thread" else time.perf_counter
    captured = sys.argv[3] if len(sys.argv) > 3 else "1000"
    if captured == "real":
        call = real_env_calls(rounds, clock=clock)
    else:
        bench.time.perf_counter = clock  # type: ignore[attr-defined]  # the clock EnvLoop.run reads
        loops = {"none": _replayed(False, int(captured)), "res": _replayed(True, int(captured))}
        call = recorder_calls(loops, rounds)
        for _, recorded in loops.values():
            recorded.env.close()
    for name, c in call.items():
        print(f"{name}: {statistics.median(c):.2f} us ({min(c):.2f}..{max(c):.2f})")
    for base in (b for b in call if b != "res"):
        ratio = statistics.median(a / b for a, b in zip(call["res"], call[base], strict=True))
        print(f"ratio res / {base}: {ratio:.2f}")


if __name__ == "__main__":
    main()
