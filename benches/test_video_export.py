"""The mp4 export (`trajcore.export(..., format="mp4")`) on 84x84 Atari frames: frames per second
with one encoder thread (the target: at least real time, 30 fps, on one core), and the bytes a
frame takes in the MP4 against trajcore's lossless files.

Workloads: ALE Breakout as agents see it (`AtariPreprocessing` + 4-frame stacks, captured once,
see `workloads.atari_stream`) and the drawn pixel env (`workloads.pixel_stream`), 8 sub-envs.
Each is recorded twice: the (4, 84, 84) stacks as an agent records them, and their newest
frames alone (84, 84), the same pictures the video holds. The export writes every episode's
``obs`` (a stack gives its newest frame) as one MP4 an episode, through `write_videos` with
``threads=1`` (what `trajcore.export` does, with one encoder thread); the encoder alone
(`write_mp4` on frames already in memory) is timed too, for its share. PSNR: the decoded frames
against the recorded ones, mean over every frame.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from trajcore.formats.to_mp4 import write_videos
from trajcore.video import write_mp4
from workloads import Stream, StreamVectorEnv, atari_missing, atari_stream, dir_bytes, pixel_stream

VECTOR_STEPS = 400  # x 8 sub-envs: 3,200 transitions, about 3,200 frames
REPEATS = 3
REAL_TIME_FPS = 30.0


def _frames_only(stream: Stream) -> Stream:
    """The stream with each observation's newest frame alone."""
    return dataclasses.replace(
        stream,
        reset_obs=np.ascontiguousarray(stream.reset_obs[:, -1]),
        obs=np.ascontiguousarray(stream.obs[:, :, -1]),
        observation_space=spaces.Box(0, 255, stream.obs.shape[-2:], np.uint8),
    )


def _record(stream: Stream, path: Path) -> None:
    envs = trajcore.RecordVectorEpisodes(StreamVectorEnv(stream), path)
    envs.reset(seed=0)
    for t in range(stream.steps):
        envs.step(stream.actions[t])
    envs.close()


def _psnr(path: Path, want: np.ndarray) -> float:
    import av

    with av.open(str(path)) as c:
        got = np.stack([f.to_ndarray(format="gray") for f in c.decode(video=0)])
    mse = float(np.mean((got.astype(np.float64) - want.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


@pytest.mark.parametrize("workload", ["atari", "pixels"])
def test_video_export_speed_and_size(
    benchmark: Any, report: list[dict[str, Any]], workload: str, tmp_path: Path
) -> None:
    if workload == "atari" and (why := atari_missing()):
        pytest.skip(why)
    stream = atari_stream(VECTOR_STEPS) if workload == "atari" else pixel_stream(VECTOR_STEPS)
    _record(stream, tmp_path / "stacks")
    _record(_frames_only(stream), tmp_path / "frames")
    ds = trajcore.open(tmp_path / "stacks")
    indices = list(range(ds.num_episodes))
    frames = sum(ds.episodes[i].length + 1 for i in indices)
    in_memory = [ds.episodes[i].observations[:, -1, :, :, None] for i in indices]

    def measure() -> dict[str, Any]:
        export_s, encode_s = [], []
        for k in range(REPEATS):
            start = time.perf_counter()
            out = write_videos(ds, indices, str(tmp_path / f"mp4-{k}"), ["obs"], threads=1)
            export_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            for n, pictures in enumerate(in_memory):
                write_mp4(str(tmp_path / f"enc-{k}-{n}.mp4"), np.ascontiguousarray(pictures), threads=1)
            encode_s.append(time.perf_counter() - start)
        export, encode = statistics.median(export_s), statistics.median(encode_s)
        mp4_bytes = dir_bytes(tmp_path / "mp4-0")
        psnr = statistics.fmean(
            _psnr(tmp_path / "mp4-0" / name, in_memory[i][..., 0]) for i, name in enumerate(out["files"])
        )
        return {
            "group": "video export",
            "name": f"{workload} 84x84, mp4, 1 encoder thread",
            "episodes": len(indices),
            "frames": frames,
            "export_frames_per_s": frames / export,
            "x_real_time_30fps": frames / export / REAL_TIME_FPS,
            "encoder_only_frames_per_s": frames / encode,
            "mp4_bytes_per_frame": mp4_bytes / frames,
            "trajcore_frames_bytes_per_frame": dir_bytes(tmp_path / "frames") / frames,
            "trajcore_stacks_bytes_per_row": dir_bytes(tmp_path / "stacks") / frames,
            "mp4_vs_trajcore_frames": mp4_bytes / dir_bytes(tmp_path / "frames"),
            "raw_bytes_per_frame": 84 * 84,
            "psnr_db": psnr,
        }

    row = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(row)
    report.append(row)
    assert row["export_frames_per_s"] > 0 and row["psnr_db"] > 30
