"""(i) Codecs on frame stacks (issue 14): bytes per step and recording time of the same steps
stored with each codec choice, and file size against recording pace, in one run.

Workloads (as in `test_read_peers`): the real Atari frame stacks (ALE Breakout,
`AtariPreprocessing` + `FrameStackObservation(4)`, 8 sub-envs, 2,000 vector steps captured once
and replayed) and the synthetic moving-object frames of `workloads.PixelEnv` (stacks of 4).

- **codecs**: the replayed steps recorded with `RecordVectorEpisodes` under each observation
  codec, rounds interleaved: the default (frame stacks stored a frame each, codec 3), the default
  with ``frame_stack=False`` (what trajcore stored before codec 3), ``delta=True`` (which the
  frame-stack filter overrides in chunks of shifting stacks), ``delta=True, frame_stack=False``
  (the old delta) and the default with 4 MiB observation chunks (about 1 MiB of distinct frames a
  chunk, as many as a 1 MiB chunk of unstacked frames: what sealing frame stacks on the bytes
  zstd sees would give). Figures: bytes per step (files over transitions), microseconds per vector step
  from reset to close (the writer finishing included), median and range over the rounds; EnvLogger
  1.2's bytes per step on the same steps when it imports.
- **pace**: the same Atari steps recorded as fast as the recorder goes and paced to about 10 s
  (a sleep per vector step, as a live env's 7 ms would), at the default `flush_interval` (1 s):
  the paced recording seals every column's buffered rows about ten times. Ratio paced / fast of
  bytes per step, for the default codecs and with ``frame_stack=False``.

    python -m pytest benches/test_codecs.py -p no:cacheprovider --benchmark-only -s [--figures-json f.json]
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import trajcore
from baselines import peer_missing
from test_read_peers import _envlogger_bytes_per_step
from workloads import Stream, StreamVectorEnv, atari_missing, atari_stream, dir_bytes, pixel_stream

VECTOR_STEPS = 2_000  # x 8 sub-envs
ROUNDS = 3
PACED_SECONDS = 10.0
CODECS: dict[str, dict[str, Any] | None] = {
    "default (frame stacks)": None,
    "frame_stack=False (before)": {"obs": {"frame_stack": False}},
    "delta": {"obs": {"delta": True}},
    "delta, frame_stack=False (old delta)": {"obs": {"delta": True, "frame_stack": False}},
    # Frame stacks are sealed on their stored bytes (1 MiB: ~148 Atari stacks a chunk); 256 KiB
    # seals about the 37 stacks a chunk that the rule of before (1 MiB of raw stacks) made.
    "default, obs chunk_bytes=256 KiB (chunks of before)": {"obs": {"chunk_bytes": 256 << 10}},
}
_STREAMS: dict[str, Stream] = {}


def _stream(workload: str) -> Stream:
    if workload not in _STREAMS:
        _STREAMS[workload] = atari_stream(VECTOR_STEPS) if workload == "atari" else pixel_stream(VECTOR_STEPS)
    return _STREAMS[workload]


class _Paced(StreamVectorEnv):
    """A replay that sleeps `pause` seconds a step: a live env's pace at no CPU cost."""

    def __init__(self, stream: Stream, pause: float) -> None:
        super().__init__(stream)
        self.pause = pause

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        time.sleep(self.pause)
        return super().step(actions)


def _record(env: StreamVectorEnv, path: Path, codecs: dict[str, Any] | None) -> tuple[float, float]:
    """(seconds from reset to close, bytes per transition) of `env`'s steps recorded at `path`."""
    stream = env.stream
    start = time.perf_counter()
    rec = trajcore.RecordVectorEpisodes(env, path, codecs=codecs)
    rec.reset(seed=0)
    for a in stream.actions:
        rec.step(a)
    rec.close()
    seconds = time.perf_counter() - start
    with trajcore.open(path) as ds:
        steps = ds.num_steps
    # Every transition (NEXT_STEP autoreset: the step after an episode's end starts the next).
    assert steps == stream.steps * stream.num_envs - int(stream.terminations.sum() + stream.truncations.sum())
    return seconds, dir_bytes(path) / steps


def _spread(values: list[float]) -> str:
    return f"{min(values):,.3g}-{max(values):,.3g}"


@pytest.mark.parametrize("workload", ["atari", "pixels"])
def test_codecs_frame_stacks(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, workload: str) -> None:
    if workload == "atari" and (why := atari_missing()):
        pytest.skip(why)
    stream = _stream(workload)

    def rounds() -> dict[str, list[tuple[float, float]]]:
        out: dict[str, list[tuple[float, float]]] = {name: [] for name in CODECS}
        for r in range(ROUNDS):
            for k, (name, codecs) in enumerate(CODECS.items()):
                out[name].append(_record(StreamVectorEnv(stream), tmp_path / f"r{r}-{k}", codecs))
        return out

    t = benchmark.pedantic(rounds, rounds=1, iterations=1)
    why_not = peer_missing("envlogger")
    envlogger = None if why_not else _envlogger_bytes_per_step(stream, tmp_path / "envlogger")
    if why_not:
        print(f"EnvLogger skipped: {why_not}")
    base = t["frame_stack=False (before)"]
    for name, runs in t.items():
        us = [s / stream.steps * 1e6 for s, _ in runs]
        size = [b for _, b in runs]
        row: dict[str, Any] = {
            "group": f"codecs {workload}",
            "name": name,
            "bytes_per_step": statistics.median(size),
            "us_per_vector_step": statistics.median(us),
            "us_range": _spread(us),
            # Paired round by round: this codec's time and size over the old default's.
            "time / before": statistics.median(a[0] / b[0] for a, b in zip(runs, base, strict=True)),
            "bytes / before": statistics.median(a[1] / b[1] for a, b in zip(runs, base, strict=True)),
        }
        if envlogger is not None:
            row["bytes / EnvLogger"] = row["bytes_per_step"] / envlogger
        report.append(row)
    if envlogger is not None:
        report.append({"group": f"codecs {workload}", "name": "EnvLogger 1.2", "bytes_per_step": envlogger})
    benchmark.extra_info.update({r["name"]: r for r in report if r["group"] == f"codecs {workload}"})


def test_codecs_recording_pace(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    if why := atari_missing():
        pytest.skip(why)
    stream = _stream("atari")
    pause = PACED_SECONDS / stream.steps
    variants = {"default": None, "frame_stack=False": {"obs": {"frame_stack": False}}}

    def both() -> dict[str, dict[str, tuple[float, float]]]:
        return {
            name: {
                "fast": _record(StreamVectorEnv(stream), tmp_path / f"{name}-fast", codecs),
                "paced": _record(_Paced(stream, pause), tmp_path / f"{name}-paced", codecs),
            }
            for name, codecs in variants.items()
        }

    t = benchmark.pedantic(both, rounds=1, iterations=1)
    for name, runs in t.items():
        row = {
            "group": "codecs pace",
            "name": name,
            "fast_s": runs["fast"][0],
            "paced_s": runs["paced"][0],
            "fast_bytes_per_step": runs["fast"][1],
            "paced_bytes_per_step": runs["paced"][1],
            "paced / fast bytes": runs["paced"][1] / runs["fast"][1],
        }
        report.append(row)
        benchmark.extra_info[name] = row
