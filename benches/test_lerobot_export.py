"""The LeRobot v3.0 export (`trajcore.to_lerobot`) against LeRobot's own writer on the same frames:
export speed (frames a second, every camera of a row counted once) and bytes, beside trajcore's
own lossless shards of those frames.

Workload: a robot-like recording of two 96x96 RGB cameras (lit, textured scenes with moving
blocks: brightness carries the detail, as in camera images) and a 7-joint state, 20 episodes of
100 steps (2,000 rows, 4,000 camera frames), written by `trajcore.Writer`. Exported four ways:
video (H.264, yuv444p: the default; yuv420p), PNG images in the rows (``video=False``, lossless).
LeRobot 0.4.4's writer (``LeRobotDataset.create`` + ``add_frame`` + ``save_episode`` +
``finalize``, in its own venv: .ci/lerobot-venv) writes the same rows with its default codec
(libsvtav1) and with h264, timed inside its process (imports excluded). PSNR: every decoded frame
against the recorded one, the mean and the worst frame.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from workloads import dir_bytes

EPISODES, STEPS, SIDE = 20, 100, 96
PROBE = Path(__file__).resolve().parent.parent / "tests" / "lerobot_probe.py"
LEROBOT_PYTHON = os.environ.get("TRAJCORE_LEROBOT_PYTHON") or str(
    Path.home() / ".cache" / "trajcore" / "lerobot-venv" / "bin" / "python"
)


def _camera(rows: int, seed: int) -> np.ndarray:
    y, x = np.mgrid[0:SIDE, 0:SIDE].astype(np.float64)
    tint = np.random.default_rng(seed).uniform(0.6, 1.0, 3)
    out = np.empty((rows, SIDE, SIDE, 3), np.uint8)
    for t in range(rows):
        light = 0.55 + 0.35 * np.sin((x + 1.5 * t + seed) / 7.0) * np.cos((y - t) / 9.0)
        frame = light[..., None] * tint * 230 + 12
        bx, by = (5 + 2 * t) % (SIDE - 16), 20 + seed % 40
        frame[by : by + 16, bx : bx + 16] = (200, 60 + seed % 100, 40)
        out[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return out


def _record(path: Path) -> dict[str, np.ndarray]:
    """Writes the recording; returns its rows as LeRobot features (what LeRobot's writer gets)."""
    obs_space = spaces.Dict(
        {
            "cam_a": spaces.Box(0, 255, (SIDE, SIDE, 3), np.uint8),
            "cam_b": spaces.Box(0, 255, (SIDE, SIDE, 3), np.uint8),
            "joints": spaces.Box(-np.pi, np.pi, (7,), np.float32),
        }
    )
    rng = np.random.default_rng(0)
    rows: dict[str, list[np.ndarray]] = {}
    with trajcore.Writer(path, obs_space, spaces.Box(-1, 1, (7,), np.float32)) as w:
        for e in range(EPISODES):
            obs = {
                "cam_a": _camera(STEPS + 1, e),
                "cam_b": _camera(STEPS + 1, 100 + e)[:, ::-1],
                "joints": rng.uniform(-np.pi, np.pi, (STEPS + 1, 7)).astype(np.float32),
            }
            actions = rng.uniform(-1, 1, (STEPS, 7)).astype(np.float32)
            rewards = rng.normal(size=STEPS).astype(np.float32)
            done = np.arange(STEPS) == STEPS - 1
            w.add_episode(obs, actions, rewards, done, np.zeros(STEPS, bool), metadata={"task": "pick"})
            for name, value in (
                ("observation.images.cam_a", obs["cam_a"][:-1]),
                ("observation.images.cam_b", obs["cam_b"][:-1]),
                ("observation.state", obs["joints"][:-1]),
                ("action", actions),
                ("next.reward", rewards[:, None]),
                ("next.done", done[:, None]),
            ):
                rows.setdefault(name, []).append(value)
    return {k: np.concatenate(v) for k, v in rows.items()}


def _psnr(root: Path, info_path: Path, key: str, want: np.ndarray) -> tuple[float, float]:
    import av

    info = json.loads(info_path.read_text())
    files = sorted((root / "videos" / key).rglob("*.mp4"))
    got = []
    for f in files:
        with av.open(str(f)) as c:
            got += [fr.to_ndarray(format="rgb24") for fr in c.decode(video=0)]
    assert len(got) == len(want), (len(got), len(want), info["features"][key])
    mse = ((np.stack(got).astype(np.float64) - want) ** 2).reshape(len(want), -1).mean(axis=1)
    db = 10 * np.log10(255.0**2 / np.maximum(mse, 1e-12))
    return float(db.mean()), float(db.min())


def test_lerobot_export_speed_and_size(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    if not Path(LEROBOT_PYTHON).exists():
        pytest.skip(f"no LeRobot venv at {LEROBOT_PYTHON}: bash .ci/lerobot-venv")
    rows = _record(tmp_path / "rec")
    n = len(rows["action"])
    cams = [k for k in rows if k.startswith("observation.images.")]
    features = {
        k: {
            "dtype": "video" if k in cams else ("bool" if k == "next.done" else "float32"),
            "shape": list(v.shape[1:]),
            "names": ["height", "width", "channels"] if k in cams else None,
        }
        for k, v in rows.items()
    }
    np.savez(
        tmp_path / "spec.npz",
        features=np.array(json.dumps(features)),
        tasks=np.array(json.dumps(["pick"] * EPISODES)),
        episode_ends=np.arange(1, EPISODES + 1) * STEPS,
        fps=np.array(30),
        **rows,
    )
    trajcore_bytes = dir_bytes(tmp_path / "rec")

    def measure() -> dict[str, Any]:
        out: dict[str, Any] = {"group": "lerobot export", "name": f"2 cameras {SIDE}x{SIDE}, {n} rows"}
        # Warm-up: the first export imports pyarrow, PyAV and Pillow (LeRobot's writer's imports are
        # not timed either).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trajcore.to_lerobot(trajcore.open(tmp_path / "rec").episodes[:1], tmp_path / "warm", repo_id="bench/warm")
        for label, options in (
            ("yuv444p", {"pix_fmt": "yuv444p"}),
            ("yuv420p", {"pix_fmt": "yuv420p"}),
            ("png", {"video": False}),
        ):
            root = tmp_path / f"trajcore-{label}"
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trajcore.to_lerobot(tmp_path / "rec", root, repo_id="bench/robot", fps=30, **options)
            seconds = time.perf_counter() - start
            out[f"trajcore_{label}_rows_per_s"] = n / seconds
            out[f"trajcore_{label}_bytes"] = dir_bytes(root)
            if label != "png":
                mean, worst = _psnr(root, root / "meta" / "info.json", cams[0], rows[cams[0]])
                out[f"trajcore_{label}_psnr_mean_db"], out[f"trajcore_{label}_psnr_min_db"] = mean, worst
        for vcodec in ("libsvtav1", "h264"):
            root = tmp_path / f"lerobot-{vcodec}"
            command = [LEROBOT_PYTHON, str(PROBE), "write", "bench/robot", str(root), str(tmp_path / "spec.npz")]
            env = dict(os.environ, HF_HUB_OFFLINE="1")
            done = subprocess.run([*command, "1", vcodec], capture_output=True, text=True, env=env, timeout=1800)
            assert done.returncode == 0, done.stderr[-3000:]
            seconds = float(done.stdout.rsplit("seconds=", 1)[1])
            out[f"lerobot_{vcodec}_rows_per_s"] = n / seconds
            out[f"lerobot_{vcodec}_bytes"] = dir_bytes(root)
            mean, worst = _psnr(root, root / "meta" / "info.json", cams[0], rows[cams[0]])
            out[f"lerobot_{vcodec}_psnr_mean_db"], out[f"lerobot_{vcodec}_psnr_min_db"] = mean, worst
        out["trajcore_lossless_bytes"] = trajcore_bytes
        out["raw_frame_bytes"] = n * len(cams) * SIDE * SIDE * 3
        out["speed_vs_lerobot_h264"] = out["trajcore_yuv444p_rows_per_s"] / out["lerobot_h264_rows_per_s"]
        out["speed_vs_lerobot_default"] = out["trajcore_yuv444p_rows_per_s"] / out["lerobot_libsvtav1_rows_per_s"]
        out["bytes_vs_trajcore_lossless"] = out["trajcore_yuv444p_bytes"] / trajcore_bytes
        return out

    row = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(row)
    report.append(row)
    assert row["trajcore_yuv444p_psnr_min_db"] >= 40 and not math.isnan(row["speed_vs_lerobot_h264"])
