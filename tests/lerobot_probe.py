"""Run by the venv's python that has the real `lerobot` (tests/test_lerobot.py, benches): loads a
dataset with ``LeRobotDataset(repo_id, root=root)`` offline, or writes one with LeRobot's own
writer, and hands the values back as an .npz file.

    python lerobot_probe.py load REPO_ID ROOT OUT.npz [VIDEO_BACKEND]
    python lerobot_probe.py write REPO_ID ROOT SPEC.npz [VIDEO [VCODEC]]

load: every row's every feature, stacked (images as uint8 (N, H, W, 3)), ``task`` texts, and a
JSON summary (``__meta__``): the dataset's fps, features, counts, stats keys, tasks.
write: LeRobotDataset.create + add_frame + save_episode + finalize from the arrays in SPEC.npz
(``features`` a JSON string of LeRobot features; per feature ``<name>`` rows; ``episode_ends``;
``tasks`` a JSON list of each episode's task), with VCODEC (default h264; LeRobot's own default
is libsvtav1); prints the seconds that took (``seconds=...``).
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np


def load(repo_id: str, root: str, out: str, backend: str | None) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(repo_id, root=root, video_backend=backend)
    columns: dict[str, list] = {}
    for i in range(len(ds)):
        item = ds[i]
        for key, value in item.items():
            if hasattr(value, "numpy"):
                value = value.numpy()
                if key in ds.meta.camera_keys:
                    value = np.round(np.moveaxis(value, 0, -1) * 255.0).astype(np.uint8)
            columns.setdefault(key, []).append(value)
    meta = {
        "fps": ds.fps,
        "num_frames": ds.num_frames,
        "num_episodes": ds.num_episodes,
        "features": {k: dict(v, shape=list(v["shape"])) for k, v in ds.features.items()},
        "camera_keys": list(ds.meta.camera_keys),
        "video_keys": list(ds.meta.video_keys),
        "stats": {k: sorted(v) for k, v in ds.meta.stats.items()},
        "tasks": list(ds.meta.tasks.index),
        "video_backend": ds.video_backend,
    }
    arrays = {k: np.stack(v) if k != "task" else np.array(v) for k, v in columns.items()}
    np.savez(out, __meta__=np.array(json.dumps(meta)), **arrays)


def write(repo_id: str, root: str, spec_path: str, video: bool, vcodec: str) -> None:
    import time

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    spec = np.load(spec_path)
    features = json.loads(str(spec["features"]))
    for ft in features.values():
        ft["shape"] = tuple(ft["shape"])
    tasks = json.loads(str(spec["tasks"]))
    fps = int(spec["fps"])
    columns = {k: spec[k] for k in features}
    start = time.perf_counter()
    ds = LeRobotDataset.create(repo_id, fps=fps, root=root, features=features, use_videos=video, vcodec=vcodec)
    first = 0
    for episode, end in enumerate(spec["episode_ends"].tolist()):
        for t in range(first, end):
            ds.add_frame({**{k: v[t] for k, v in columns.items()}, "task": tasks[episode]})
        ds.save_episode()
        first = end
    ds.finalize()
    print(f"seconds={time.perf_counter() - start}")


if __name__ == "__main__":
    command, repo_id, root, path, *rest = sys.argv[1:]
    if command == "load":
        load(repo_id, root, path, rest[0] if rest else None)
    else:
        write(repo_id, root, path, bool(int(rest[0])) if rest else True, rest[1] if len(rest) > 1 else "h264")
