"""LeRobot v3.0 import (``trajcore.from_lerobot``, ``trajcore import-lerobot``): a LeRobot dataset on
this machine (Parquet and MP4, read with pyarrow and PyAV: LeRobot itself is not needed) written
as a trajcore dataset, so it gets trajcore's random access, sampling, cache and tools.

Each LeRobot episode of L frames becomes one trajcore episode of L steps (`trajcore.Writer`):

- observations: a Dict space keyed by the feature names after ``observation.`` (``state``,
  ``images.cam``): numbers as Box of the feature's dtype and shape, images and videos as uint8
  (H, W, C) frames (videos decoded frame by frame); LeRobot keeps no observation after an
  episode's last frame, so the final observation (row L) is a copy of row L - 1 (a
  `TrajcoreWarning` says so; metadata ``lerobot.final_observation`` = ``"copy of the last frame"``);
- actions: the ``action`` feature (a Box of its dtype and shape);
- rewards: ``next.reward``; terminations and truncations: ``next.done`` and ``next.truncated``
  (terminated = done and not truncated). A dataset without them (most robot datasets) gets
  rewards 0 and no flags (its episodes are incomplete, as far as trajcore can tell), listed in
  metadata ``lerobot.absent`` and in a warning;
- other numeric features (``complementary_info.*``, ...): the step's custom data
  (``ep.data[name]``); texts and images outside ``observation.`` are not read (named in the
  warning and the result's ``unread``);
- the episode's task: episode metadata ``task`` (its text) and ``lerobot`` (``episode_index``,
  ``tasks``); an episode whose frames name several tasks is refused (InvalidArgumentError);
- dataset metadata ``lerobot``: the repo directory, fps, robot type, codebase version, the
  features as info.json gives them, and ``features``: each trajcore value's LeRobot feature, the
  mapping `trajcore.to_lerobot` uses by default, so a round trip gives back the same features.

Non-video values are kept exactly (dtypes as stored); video frames are what the MP4 decodes to.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore._deps import require
from trajcore.errors import InvalidArgumentError, TrajcoreFileNotFoundError, TrajcoreWarning
from trajcore.formats._read import Progress
from trajcore.formats.to_lerobot import INFO_PATH, METADATA_KEY, TASKS_PATH
from trajcore.record.manual import Writer
from trajcore.spaces import escape_key
from trajcore.tools.output import staged
from trajcore.video import av_module

__all__ = ["from_lerobot"]

_INDEX = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_STEP = ("action", "next.reward", "next.done", "next.truncated")
_OBS = "observation."


def _spaces() -> Any:
    from gymnasium import spaces

    return spaces


def _box(spaces: Any, ft: Mapping[str, Any]) -> Any:
    shape = tuple(int(d) for d in ft["shape"])
    if ft["dtype"] in ("image", "video"):
        return spaces.Box(0, 255, shape, np.uint8)
    dtype = np.dtype(ft["dtype"])
    if dtype == np.bool_:
        return spaces.MultiBinary(list(shape))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return spaces.Box(info.min, info.max, shape, dtype)
    return spaces.Box(-np.inf, np.inf, shape, dtype)


class _Videos:
    """Reads episodes' frames out of LeRobot's MP4 files: one decoder per camera, kept open while
    the next episode follows in the same file (episodes lie one after another there), reopened
    for another file or an episode that starts before where the decoder is."""

    def __init__(self, root: str, template: str) -> None:
        self.av = av_module("reading LeRobot videos")
        self.root, self.template = root, template
        # key -> (path, container, frame iterator, time of the next frame it gives)
        self.open: dict[str, tuple[str, Any, Iterator[Any], float]] = {}

    def frames(self, key: str, chunk: int, file: int, start: float, n: int, fps: float) -> npt.NDArray[np.uint8]:
        """The `n` frames of `key`'s file (`chunk`, `file`) from `start` seconds on.

        Raises:
            TrajcoreFileNotFoundError: the file is missing.
            InvalidArgumentError: it has fewer frames from `start` on.
        """
        path = os.path.join(self.root, self.template.format(video_key=key, chunk_index=chunk, file_index=file))
        half = 0.5 / fps  # a frame's time may be off by rounding: it is the one nearest
        current = self.open.get(key)
        if current is None or current[0] != path or start < current[3] - half:
            self.close(key)
            if not os.path.exists(path):
                raise TrajcoreFileNotFoundError(f"LeRobot video {path} is missing")
            container = self.av.open(path)
            current = (path, container, container.decode(video=0), 0.0)
        out: list[npt.NDArray[np.uint8]] = []
        after = current[3]
        for frame in current[2]:
            after = float(frame.time) + 1.0 / fps
            if float(frame.time) < start - half:
                continue
            out.append(frame.to_ndarray(format="rgb24"))
            if len(out) == n:
                break
        self.open[key] = (current[0], current[1], current[2], after)
        if len(out) < n:
            raise InvalidArgumentError(f"{path}: {len(out)} frames from {start:.4f} s on, the episode has {n}")
        return np.stack(out)

    def close(self, key: str | None = None) -> None:
        for k in [key] if key is not None else list(self.open):
            if k in self.open:
                self.open.pop(k)[1].close()


def _images(pil: Any, root: str, cells: list[Any], name: str) -> npt.NDArray[np.uint8]:
    out = []
    for cell in cells:
        data = (cell or {}).get("bytes")
        if data is None and (cell or {}).get("path"):
            with open(os.path.join(root, cell["path"]), "rb") as f:
                data = f.read()
        if data is None:
            raise InvalidArgumentError(f"LeRobot image {name!r}: a row has neither bytes nor a path")
        out.append(np.asarray(pil.open(io.BytesIO(data)).convert("RGB")))
    return np.stack(out)


def from_lerobot(
    root: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    force: bool = False,
    zstd_level: int | None = 3,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Writes the local LeRobot v3.0 dataset `root` as a trajcore dataset at `dst` (see the
    module docstring).

    Args:
        root: the LeRobot dataset's directory (holding ``meta/info.json``).
        dst: the trajcore dataset directory to create (written beside it, renamed into place).
        force: replace `dst` if it exists.
        zstd_level: zstd level of every column (None: raw).
        progress: called with the steps of each episode once written.

    Returns:
        ``{"episodes", "steps", "features": {trajcore value: LeRobot feature}, "absent": [step
        features not in the dataset], "unread": [features not read]}``.

    Raises:
        TrajcoreFileNotFoundError: `root` has no ``meta/info.json``, or a file it names is missing.
        InvalidArgumentError: not a v3 dataset, an episode of several tasks or of no frame,
            frames a video does not have, or `dst` exists (without `force`).
        MissingDependencyError: pyarrow, PyAV (videos) or Pillow (images) is not installed.
    """
    pa = require("pyarrow", "import-lerobot", pip='"trajcore[lerobot]"')
    pq = require("pyarrow.parquet", "import-lerobot", pip='"trajcore[lerobot]"')
    root = os.fspath(root)
    info_path = os.path.join(root, INFO_PATH)
    if not os.path.isfile(info_path):
        raise TrajcoreFileNotFoundError(f"{root} is not a LeRobot dataset: {INFO_PATH} is missing")
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v3"):
        raise InvalidArgumentError(
            f"{root} is a LeRobot {version or 'unknown-version'} dataset; import-lerobot reads v3.0 (LeRobot's "
            "convert_dataset_v21_to_v30 converts older ones)"
        )
    features: dict[str, dict[str, Any]] = info["features"]
    fps = float(info["fps"])
    spaces = _spaces()
    # What trajcore cannot hold as it is: texts, and images outside the observation (named, not read).
    unread = [
        k
        for k, ft in features.items()
        if not _readable(ft) or (ft["dtype"] in ("image", "video") and not k.startswith(_OBS))
    ]
    obs_features = {k: ft for k, ft in features.items() if k.startswith(_OBS) and k not in unread}
    data_features = {
        k: ft for k, ft in features.items() if k not in obs_features and k not in _INDEX + _STEP and k not in unread
    }
    if "action" not in features:
        raise InvalidArgumentError(f"{root}: no 'action' feature (features: {', '.join(features)})")
    if not obs_features:
        raise InvalidArgumentError(f"{root}: no observation feature (features: {', '.join(features)})")
    obs_space = spaces.Dict({k[len(_OBS) :]: _box(spaces, ft) for k, ft in obs_features.items()})
    action_space = _box(spaces, features["action"])
    named = {"obs/" + escape_key(k[len(_OBS) :]): k for k in obs_features}
    named["action"] = "action"
    named.update({"data/" + escape_key(k): k for k in data_features})
    mapping: dict[str, str | None] = dict(named)
    absent = [name for name in ("next.reward", "next.done", "next.truncated") if name not in features]
    mapping["reward"] = "next.reward" if "next.reward" in features else None
    mapping["terminated"] = "next.done" if "next.done" in features else None
    # Both flags make next.done; the export writes next.truncated beside it when truncated is mapped too.
    mapping["truncated"] = "next.done" if "next.truncated" in features else None
    metadata = {
        METADATA_KEY: {
            "repo_dir": os.path.basename(os.path.normpath(root)),
            "fps": info["fps"],
            "robot_type": info.get("robot_type"),
            "codebase_version": version,
            "info_features": features,
            "features": mapping,
            "absent": absent,
            "final_observation": "copy of the last frame",
        }
    }
    tasks_table = pq.read_table(os.path.join(root, TASKS_PATH)).to_pylist()
    task_text = {int(r["task_index"]): str(r.get("__index_level_0__", r.get("task", ""))) for r in tasks_table}
    episodes = _episodes_table(pa, pq, root)
    videos = (
        _Videos(root, str(info.get("video_path") or ""))
        if any(ft["dtype"] == "video" for ft in features.values())
        else None
    )
    pil = (
        require("PIL.Image", "import-lerobot (image features)", pip='"trajcore[lerobot]"')
        if any(ft["dtype"] == "image" for ft in features.values())
        else None
    )
    steps = 0
    data_cache: dict[str, Any] = {}
    try:
        with (
            staged(os.fspath(dst), force) as tmp,
            Writer(
                tmp,
                obs_space,
                action_space,
                metadata,
                env_id=f"lerobot/{metadata[METADATA_KEY]['repo_dir']}",
                zstd_level=zstd_level,
            ) as w,
        ):
            for ep in episodes:
                rows = _episode_rows(pq, root, info, ep, data_cache)
                length = len(rows["frame_index"])
                if length == 0:
                    raise InvalidArgumentError(f"{root}: episode {ep['episode_index']} has no frame")
                task_indices = set(np.asarray(rows["task_index"]).tolist())
                if len(task_indices) > 1:
                    raise InvalidArgumentError(
                        f"{root}: episode {ep['episode_index']} has frames of {len(task_indices)} tasks "
                        f"({sorted(task_indices)}); trajcore keeps one task an episode"
                    )
                obs: dict[str, Any] = {}
                for name, ft in obs_features.items():
                    if ft["dtype"] == "video" and videos is not None:  # (there is one when a feature is video)
                        values: Any = videos.frames(
                            name,
                            int(ep[f"videos/{name}/chunk_index"]),
                            int(ep[f"videos/{name}/file_index"]),
                            float(ep[f"videos/{name}/from_timestamp"]),
                            length,
                            fps,
                        )
                    elif ft["dtype"] == "image":
                        values = _images(pil, root, rows[name], name)
                    else:
                        values = _column(rows[name], ft)
                    obs[name[len(_OBS) :]] = np.concatenate([values, values[-1:]])
                done = (
                    _column(rows["next.done"], features["next.done"]).reshape(length)
                    if "next.done" in rows
                    else np.zeros(length, np.bool_)
                )
                truncated = (
                    _column(rows["next.truncated"], features["next.truncated"]).reshape(length)
                    if "next.truncated" in rows
                    else np.zeros(length, np.bool_)
                )
                rewards = (
                    _column(rows["next.reward"], features["next.reward"]).reshape(length).astype(np.float64)
                    if "next.reward" in rows
                    else np.zeros(length)
                )
                data = {k: _column(rows[k], ft) for k, ft in data_features.items()}
                task = task_text.get(int(task_indices.pop()), "")
                w.add_episode(
                    observations=obs,
                    actions=_column(rows["action"], features["action"]),
                    rewards=rewards,
                    terminations=done & ~truncated,
                    truncations=truncated,
                    data=data or None,
                    metadata={
                        "task": task,
                        METADATA_KEY: {
                            "episode_index": int(ep["episode_index"]),
                            "tasks": list(ep.get("tasks") or [task]),
                        },
                    },
                )
                steps += length
                if progress is not None:
                    progress(length)
    finally:
        if videos is not None:
            videos.close()
    notes = [f"{len(episodes)} final observation(s) are copies of each episode's last frame (LeRobot keeps none)"]
    if absent:
        notes.append(f"not in the dataset: {', '.join(absent)} (rewards 0, flags False; metadata lerobot.absent)")
    if unread:
        notes.append(f"features not read: {', '.join(unread)} (texts, or images outside the observation)")
    warnings.warn("LeRobot import: " + "; ".join(notes), TrajcoreWarning, stacklevel=2)
    return {"episodes": len(episodes), "steps": steps, "features": mapping, "absent": absent, "unread": unread}


def _readable(ft: Mapping[str, Any]) -> bool:
    if ft["dtype"] in ("image", "video"):
        return True
    try:
        return np.dtype(ft["dtype"]).kind in "biuf"
    except TypeError:
        return False


def _column(values: Any, ft: Mapping[str, Any]) -> npt.NDArray[Any]:
    shape = tuple(int(d) for d in ft["shape"])
    array = np.asarray(values, dtype=np.dtype(ft["dtype"]))
    return array.reshape(len(array), *shape)


def _episodes_table(pa: Any, pq: Any, root: str) -> list[dict[str, Any]]:
    folder = os.path.join(root, "meta", "episodes")
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".parquet"))
    if not paths:
        raise TrajcoreFileNotFoundError(f"{root}: no episodes table under meta/episodes")
    rows: list[dict[str, Any]] = []
    for path in paths:
        table = pq.read_table(path)
        keep = [c for c in table.column_names if not c.startswith("stats/")]
        rows += table.select(keep).to_pylist()
    return sorted(rows, key=lambda r: int(r["episode_index"]))


def _episode_rows(pq: Any, root: str, info: Mapping[str, Any], ep: Mapping[str, Any], cache: dict[str, Any]) -> Any:
    """The episode's rows of its data file, in frame order, as columns (name -> list or array)."""
    path = os.path.join(
        root,
        str(info["data_path"]).format(chunk_index=int(ep["data/chunk_index"]), file_index=int(ep["data/file_index"])),
    )
    if cache.get("path") != path:
        if not os.path.exists(path):
            raise TrajcoreFileNotFoundError(f"LeRobot data file {path} is missing")
        cache.clear()
        cache["path"], cache["table"] = path, pq.read_table(path)
        cache["episode"] = cache["table"].column("episode_index").to_numpy()
    where = np.flatnonzero(cache["episode"] == int(ep["episode_index"]))
    table = cache["table"].take(where)
    order = np.argsort(table.column("frame_index").to_numpy(), kind="stable")
    table = table.take(order)
    return {name: _values(table.column(name)) for name in table.column_names}


def _values(column: Any) -> Any:
    """A Parquet column as numpy (numbers, vectors as (rows, n)) or a list (images, nested lists)."""
    kind = str(column.type)
    if kind.startswith("fixed_size_list") and kind.count("list") == 1:
        flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(column), -1)
    if kind.startswith("struct"):
        return column.to_pylist()  # images: {"bytes", "path"}
    if "list" in kind:
        return np.asarray(column.to_pylist())
    return column.to_numpy()
