"""LeRobot v3.0 export: the dataset's files, which `lerobot.datasets.lerobot_dataset.LeRobotDataset(repo_id,
root=OUT)` loads. `trajcore.to_lerobot` (`trajcore.tools.lerobot`) writes them into a staged
directory with the Hub's card (``README.md``).

What a row is: LeRobot's rows are frames, an observation and the action taken on it, with the
step's outcome under ``next.``: row t of an episode of T steps is observation t, action t, reward
t, flags t. An episode's final observation (after its last step) has no action and no row: it is
not written (a `TrajcoreWarning` says how many).

Features (the default mapping, by trajcore leaf name; `mapping` overrides any of it):

- image observation leaves (uint8 (H, W, 3), or grey (H, W) / (H, W, 1), written as three equal
  channels) and the rendered frames ``render/frame``: ``observation.images.<key>``, the key being
  the leaf's path joined by ``.`` (``obs/cam_a`` -> ``observation.images.cam_a``; a leading
  ``images`` is not repeated; ``render/frame`` -> ``observation.images.render``); a bare image
  observation is ``observation.image``. With `video` they are MP4 files (H.264), else PNG bytes
  in the Parquet rows (lossless, LeRobot's ``image`` dtype);
- the other numeric observation leaves: flattened and concatenated in leaf order into one
  float32 vector ``observation.state`` (``names``: ``<leaf>_<k>``);
- the action leaves: ``action``, float32, the same way;
- ``reward``: ``next.reward`` (float32); ``terminated or truncated``: ``next.done``;
  ``truncated``: ``next.truncated`` (LeRobot's name for it: with both, terminated is
  ``next.done and not next.truncated``);
- LeRobot's own: ``timestamp`` (frame_index / fps, float32), ``frame_index``, ``episode_index``
  (0 .. in export order), ``index`` (the row in the dataset), ``task_index``.

A mapping entry names a LeRobot feature for a leaf (``{"obs/joints": "observation.environment_state"}``)
or None to leave it out; leaves mapped to the same name are concatenated. Leaves of no feature
(infos, custom data, frame stacks, strings) are listed in the result's ``left_out`` and a
`TrajcoreWarning`. A dataset `trajcore.from_lerobot` made maps its leaves back to the features
they came from, with their types, names and fps, its ``image`` features kept as images.

Values: float32, LeRobot's type for states and actions: a value float32 cannot hold exactly
(float64 with more precision, integers past 2^24) is rounded, with a `TrajcoreWarning` naming the
leaf. Video frames are H.264 at `LEROBOT_CRF`, a keyframe every `LEROBOT_GOP` frames (LeRobot's
default: its loader seeks to every frame it reads), `PIX_FMTS`.

Layout: LeRobot's (``meta/info.json`` ``data_path`` / ``video_path``): Parquet data files and one
MP4 per camera per file, episodes one after another; a new file starts once a data file passes
`data_file_mb` or a video `video_file_mb`; 1000 files a chunk directory.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore._deps import require
from trajcore.errors import InvalidArgumentError, TrajcoreWarning
from trajcore.formats._columns import Leaf, Plan
from trajcore.formats._read import Progress, plan_of, read_episode
from trajcore.formats.lerobot_stats import aggregate, feature_stats, image_sample, image_stats, jsonable
from trajcore.formats.to_mp4 import ImageKey, episode_pictures, image_keys
from trajcore.images import pictures
from trajcore.read.dataset import Dataset
from trajcore.read.records.meta import render_fps
from trajcore.record.frames import FRAME_COLUMN
from trajcore.video import Encoder

__all__ = [
    "CODEBASE_VERSION",
    "DATA_PATH",
    "EPISODES_PATH",
    "INFO_PATH",
    "LEROBOT_CRF",
    "LEROBOT_GOP",
    "METADATA_KEY",
    "PIX_FMTS",
    "STATS_PATH",
    "TASKS_PATH",
    "VIDEO_PATH",
    "default_mapping",
    "write_lerobot",
]

CODEBASE_VERSION = "v3.0"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
CHUNKS_SIZE = 1000

LEROBOT_CRF = 12
"""libx264's CRF for LeRobot videos (preset veryfast, tune psnr): with ``yuv444p``, MuJoCo's
rendered frames and camera-like frames keep more than 40 dB PSNR."""

PIX_FMTS = ("yuv444p", "yuv420p")
"""The pixel formats of the export's videos: ``yuv444p`` (the default: colour at full resolution,
above 40 dB; LeRobot's loaders decode it, browsers mostly do not play H.264 4:4:4) or ``yuv420p``
(plays everywhere, the Hub's viewer included; colour at half resolution costs sharp coloured
edges, MuJoCo's floor, about 5 dB)."""

LEROBOT_GOP = 2
"""Frames between keyframes: LeRobot's encoder's ``g=2`` (a read of any frame decodes at most one other)."""

METADATA_KEY = "lerobot"
"""Dataset metadata key `from_lerobot` writes: ``{"features": {leaf: feature}, ...}``, the
mapping back that this export uses by default."""

_INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_FLAGS = ("next.done", "next.truncated")
_NUMERIC = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool")


@dataclass
class _Feature:
    """One LeRobot feature and the trajcore leaves it is made of."""

    name: str
    kind: str  # "image" (images, video or PNG) or "vector"
    leaves: list[Leaf] = field(default_factory=list)
    image: ImageKey | None = None
    # Images: as video (True) or as PNG in the rows (False).
    video: bool = False
    dtype: str = "float32"
    shape: tuple[int, ...] = ()
    names: list[str] | None = None


def _image_name(key: ImageKey) -> str:
    if key.column == FRAME_COLUMN:
        return "observation.images.render"
    path = key.name.split("/")[1:]
    if not path:
        return "observation.image"
    if path[0] == "images" and len(path) > 1:
        path = path[1:]
    return "observation.images." + ".".join(path)


def _is_rgb_or_grey(ds: Dataset, key: ImageKey) -> bool:
    if key.layout == "chw":
        return False
    for r in range(ds.num_recordings):
        for spec in ds._core.columns(r):
            if spec["name"] == key.column:
                shape = tuple(int(d) for d in spec["shape"])
                return len(shape) == 2 or shape[-1] in (1, 3)
    return False


def _imported(ds: Dataset, indices: Sequence[int]) -> dict[str, Any]:
    """What `from_lerobot` recorded of the LeRobot dataset the episodes came from (empty if none)."""
    meta = ds.meta(int(ds._reads.summary()["recording"][indices[0]])) if len(indices) else {}
    metadata = meta.get("metadata")
    imported = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return imported if isinstance(imported, dict) else {}


def default_mapping(ds: Dataset, indices: Sequence[int], plan: Plan | None = None) -> dict[str, str | None]:
    """The default leaf -> feature mapping (the module docstring), or the one a dataset imported
    from LeRobot recorded in its metadata (`plan`: the episodes' `plan_of`, when known)."""
    imported = _imported(ds, indices)
    out: dict[str, str | None] = {}
    plan = plan or plan_of(ds, indices)
    keys = image_keys(ds, indices, plan=plan)
    images = {k.name: k for k in keys if _is_rgb_or_grey(ds, k)}
    # Frame stacks and RGBA: LeRobot has no feature for them (left out, named).
    stacks = {k.name for k in keys if k.name not in images}
    for leaf in plan.leaves:
        if leaf.group == "obs":
            if leaf.name in images:
                out[leaf.name] = _image_name(images[leaf.name])
            else:
                out[leaf.name] = None if leaf.dtype == "str" or leaf.name in stacks else "observation.state"
        elif leaf.group == "action":
            out[leaf.name] = "action"
        elif leaf.group == "reward":
            out[leaf.name] = "next.reward"
        elif leaf.group in ("terminated", "truncated"):
            out[leaf.name] = "next.done"
        elif leaf.group in ("info", "data"):
            out[leaf.name] = None
    if FRAME_COLUMN in images:
        out[FRAME_COLUMN] = _image_name(images[FRAME_COLUMN])
    if isinstance(imported.get("features"), dict):
        out.update({str(k): None if v is None else str(v) for k, v in imported["features"].items() if k in out})
    return out


def _features(
    ds: Dataset, indices: Sequence[int], plan: Plan, mapping: Mapping[str, str | None] | None, video: bool
) -> tuple[list[_Feature], list[str]]:
    """The features to write and the leaves left out."""
    chosen = default_mapping(ds, indices, plan)
    for name, target in (mapping or {}).items():
        if name not in chosen:
            raise InvalidArgumentError(
                f"mapping names {name!r}, no value of this dataset (values: {', '.join(chosen)})"
            )
        chosen[name] = target
    leaves = {leaf.name: leaf for leaf in plan.leaves}
    images = {k.name: k for k in image_keys(ds, indices, plan=plan)}
    features: dict[str, _Feature] = {}
    left_out = [name for name, target in chosen.items() if target is None]
    for name, target in chosen.items():
        if target is None:
            continue
        if target in _INDEX_FEATURES or target == "task" or target == "next.truncated":
            raise InvalidArgumentError(f"mapping {name!r} -> {target!r}: {target} is a name this export writes itself")
        if name in images and (name == FRAME_COLUMN or leaves[name].dtype == "uint8"):
            key = images[name]
            if not _is_rgb_or_grey(ds, key):
                raise InvalidArgumentError(
                    f"{name} ({key.layout} {leaves[name].describe() if name in leaves else ''}) is not an RGB or "
                    f"grey image: LeRobot images are (H, W, 3); leave it out (mapping {name!r}: None)"
                )
            if target in features:
                raise InvalidArgumentError(
                    f"{name} maps to the image feature {target!r}, which another image already fills"
                )
            features[target] = _Feature(target, "image", image=key)
            continue
        leaf = leaves[name]
        if leaf.dtype == "str":
            raise InvalidArgumentError(f"{name} holds strings: LeRobot features are numbers; leave it out (None)")
        feature = features.setdefault(target, _Feature(target, "vector"))
        if feature.kind == "image":
            raise InvalidArgumentError(f"{name} maps to {target!r}, an image feature")
        feature.leaves.append(leaf)
    for feature in features.values():
        if feature.kind == "vector":
            size = sum(leaf.size for leaf in feature.leaves)
            if feature.name in _FLAGS:
                feature.dtype, feature.shape = "bool", (1,)
            else:
                feature.shape = (size,)
                feature.names = [
                    f"{leaf.name.split('/', 1)[-1]}_{k}" if leaf.size > 1 or len(feature.leaves) > 1 else leaf.name
                    for leaf in feature.leaves
                    for k in range(leaf.size)
                ]
    # A dataset imported from LeRobot keeps its features' element names and numeric types, and
    # its images stay images (PNG, lossless) where they were.
    info = _imported(ds, indices).get("info_features") or {}
    names = {k: v.get("names") for k, v in info.items()}
    for feature in features.values():
        if feature.kind == "image":
            feature.video = video and (info.get(feature.name) or {}).get("dtype") != "image"
        dtype = (info.get(feature.name) or {}).get("dtype")
        if feature.kind == "vector" and dtype in _NUMERIC and feature.name not in _FLAGS:
            feature.dtype = str(dtype)
        given = names.get(feature.name)
        if feature.kind == "vector" and isinstance(given, list) and len(given) == feature.shape[0]:
            feature.names = [str(n) for n in given]
    if "next.done" in features:
        truncated = [leaf for leaf in features["next.done"].leaves if leaf.group == "truncated"]
        if truncated:
            features["next.truncated"] = _Feature("next.truncated", "vector", truncated, dtype="bool", shape=(1,))
    return list(features.values()), left_out


def _image_shape(ds: Dataset, key: ImageKey) -> tuple[int, int, int]:
    for r in range(ds.num_recordings):
        for spec in ds._core.columns(r):
            if spec["name"] == key.column:
                zero = np.zeros((1, *(int(d) for d in spec["shape"])), dtype=np.uint8)
                h, w = pictures(zero, key.layout).shape[1:3]
                return int(h), int(w), 3
    raise InvalidArgumentError(f"no recording has {key.name}")


def _rgb(frames: npt.NDArray[np.uint8], layout: str) -> npt.NDArray[np.uint8]:
    out = pictures(frames, layout)
    return np.repeat(out, 3, axis=-1) if out.shape[-1] == 1 else np.ascontiguousarray(out)


def _task_of(ds: Dataset, index: int, task: str | None, task_key: str | None) -> str:
    if task_key is not None:
        value = ds.episodes[index].metadata.get(task_key)
        if value is not None:
            return str(value)
    if task is not None:
        return task
    meta = ds.meta(int(ds._reads.summary()["recording"][index]))
    env = (meta.get("user") or {}).get("env_id") if isinstance(meta.get("user"), dict) else None
    return str(env or meta.get("env_id") or "unknown")


class _Files:
    """The data file and the video files being written: a new file (same index for all) once
    one is past its size."""

    def __init__(
        self,
        root: str,
        features: list[_Feature],
        schema: Any,
        video: bool,
        fps: float,
        data_mb: float,
        video_mb: float,
        pix_fmt: str,
    ) -> None:
        self.pq = require("pyarrow.parquet", "the lerobot export", pip='"trajcore[lerobot]"')
        self.root, self.features, self.schema, self.video, self.fps = root, features, schema, video, fps
        self.data_mb, self.video_mb, self.pix_fmt = data_mb, video_mb, pix_fmt
        self.number = -1
        self.writer: Any = None
        self.encoders: dict[str, Encoder] = {}
        self.frames = 0  # frames in the current video files

    @property
    def chunk_file(self) -> tuple[int, int]:
        return divmod(self.number, CHUNKS_SIZE)

    def path(self, template: str, **kw: Any) -> str:
        chunk, file = self.chunk_file
        path = os.path.join(self.root, template.format(chunk_index=chunk, file_index=file, **kw))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def start(self, ds: Dataset) -> None:
        self.close()
        self.number += 1
        self.writer = self.pq.ParquetWriter(self.path(DATA_PATH), self.schema)
        self.frames = 0
        for f in self.features:
            if f.video and f.image is not None:
                h, w, _ = _image_shape(ds, f.image)
                self.encoders[f.name] = Encoder(
                    self.path(VIDEO_PATH, video_key=f.name),
                    h,
                    w,
                    self.fps,
                    crf=LEROBOT_CRF,
                    gop=LEROBOT_GOP,
                    pix_fmt=self.pix_fmt,
                    tune="psnr",
                )

    def full(self) -> bool:
        if self.writer is None:
            return True
        data = os.path.getsize(self.path(DATA_PATH)) if os.path.exists(self.path(DATA_PATH)) else 0
        videos = [os.path.getsize(e.container.name) for e in self.encoders.values() if os.path.exists(e.container.name)]
        return data > self.data_mb * (1 << 20) or any(v > self.video_mb * (1 << 20) for v in videos)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        for enc in self.encoders.values():
            enc.close()
        self.encoders = {}


def _png(pil: Any, frame: npt.NDArray[np.uint8]) -> bytes:
    """One frame as PNG bytes (lossless), through Pillow."""
    buf = io.BytesIO()
    pil.fromarray(frame).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def write_lerobot(
    ds: Dataset,
    indices: Sequence[int],
    root: str,
    *,
    repo_id: str,
    fps: float | None,
    video: bool,
    pix_fmt: str,
    task: str | None,
    task_key: str | None,
    mapping: Mapping[str, str | None] | None,
    robot_type: str | None,
    data_file_mb: float,
    video_file_mb: float,
    progress: Progress | None,
) -> dict[str, Any]:
    """Writes the episodes `indices` of `ds` as a LeRobot v3.0 dataset in the new directory
    `root` (see the module docstring; `trajcore.to_lerobot` documents the arguments and their
    defaults).

    Returns:
        ``{"episodes", "steps", "features": [names], "left_out": [leaf names], "skipped":
        episodes of no step, "tasks": [texts], "repo_id"}``.
    """
    pa = require("pyarrow", "the lerobot export", pip='"trajcore[lerobot]"')
    pil = require("PIL.Image", "the lerobot export of images (PNG)", pip='"trajcore[lerobot]"')
    summary = ds._reads.summary()
    # LeRobot has no episode of no frame: an episode of no step (a reset, then nothing) has no row.
    empty = sum(1 for i in indices if int(summary["length"][int(i)]) == 0)
    indices = [int(i) for i in indices if int(summary["length"][int(i)]) > 0]
    if not indices:
        raise InvalidArgumentError("no episode of at least one step to export")
    imported_fps = _imported(ds, indices).get("fps")
    if fps is not None:
        rate = float(fps)
    elif isinstance(imported_fps, int | float) and not isinstance(imported_fps, bool):
        rate = float(imported_fps)
    else:
        rate = render_fps(ds.meta(int(summary["recording"][indices[0]])))
    if not (np.isfinite(rate) and rate > 0):
        raise InvalidArgumentError(f"fps must be a positive number, got {fps!r}")
    plan = plan_of(ds, indices)
    features, left_out = _features(ds, indices, plan, mapping, video)
    vector_leaves = list({leaf.name: leaf for f in features for leaf in f.leaves}.values())
    schema = _schema(pa, features)
    os.makedirs(root)
    if pix_fmt not in PIX_FMTS:
        raise InvalidArgumentError(f"pix_fmt must be one of {', '.join(PIX_FMTS)}, got {pix_fmt!r}")
    files = _Files(root, features, schema, video, rate, data_file_mb, video_file_mb, pix_fmt)
    tasks: dict[str, int] = {}
    episode_rows: list[dict[str, Any]] = []
    episode_stats: dict[str, list[dict[str, Any]]] = {}
    rounded: set[str] = set()
    missing_frames = 0
    row = 0
    for episode_index, index in enumerate(int(i) for i in indices):
        if files.full():
            files.start(ds)
        length = int(summary["length"][index])
        values = read_episode(ds, index, plan, vector_leaves)
        text = _task_of(ds, index, task, task_key)
        task_index = tasks.setdefault(text, len(tasks))
        columns: dict[str, Any] = {}
        stats: dict[str, dict[str, Any]] = {}
        meta_row: dict[str, Any] = {"episode_index": episode_index, "tasks": [text], "length": length}
        chunk, file = files.chunk_file
        meta_row.update({"data/chunk_index": chunk, "data/file_index": file})
        meta_row.update({"dataset_from_index": row, "dataset_to_index": row + length})
        for f in features:
            if f.kind == "image" and f.image is not None:
                read = episode_pictures(ds, index, f.image)
                h, w, _ = _image_shape(ds, f.image)
                if read is None:
                    frames, present = np.zeros((length, h, w, 3), np.uint8), np.zeros(length, dtype=np.bool_)
                else:
                    frames, present = _rgb(read[0][:length], f.image.layout), read[1][:length]
                frames = np.where(present[:, None, None, None], frames, np.uint8(0)) if not present.all() else frames
                missing_frames += int((~present).sum())
                if f.video:
                    enc = files.encoders[f.name]
                    meta_row[f"videos/{f.name}/chunk_index"], meta_row[f"videos/{f.name}/file_index"] = chunk, file
                    meta_row[f"videos/{f.name}/from_timestamp"] = files.frames / rate
                    meta_row[f"videos/{f.name}/to_timestamp"] = (files.frames + length) / rate
                    for picture in frames:
                        enc.add(picture)
                else:
                    columns[f.name] = [{"bytes": _png(pil, p), "path": None} for p in frames]
                stats[f.name] = image_stats(frames[image_sample(length)]) if length else {}
                continue
            parts = []
            for leaf in f.leaves:
                v = np.asarray(values.values[leaf.name]).reshape(length, -1)
                if f.name not in _FLAGS:
                    cast = v.astype(f.dtype)
                    if v.dtype != cast.dtype and not np.array_equal(cast, v, equal_nan=v.dtype.kind == "f"):
                        rounded.add(leaf.name)
                    v = cast
                parts.append(v)
            if f.name in _FLAGS:  # terminated or truncated
                stacked = np.logical_or.reduce([p.astype(np.bool_) for p in parts])
            else:
                stacked = np.concatenate(parts, axis=1) if parts else np.zeros((length, 0), f.dtype)
            columns[f.name] = stacked
            stats[f.name] = feature_stats(stacked)
        frame_index = np.arange(length, dtype=np.int64)
        index_values: dict[str, npt.NDArray[Any]] = {
            "timestamp": (frame_index / rate).astype(np.float32),
            "frame_index": frame_index,
            "episode_index": np.full(length, episode_index, np.int64),
            "index": np.arange(row, row + length, dtype=np.int64),
            "task_index": np.full(length, task_index, np.int64),
        }
        columns.update(index_values)
        stats.update({k: feature_stats(v[:, None]) for k, v in index_values.items()})
        if length:
            files.writer.write_table(_table(pa, schema, features, columns, length))
        files.frames += length
        for name, s in stats.items():
            if s:
                episode_stats.setdefault(name, []).append(s)
                meta_row.update({f"stats/{name}/{k}": np.asarray(v).tolist() for k, v in s.items()})
        meta_row["meta/episodes/chunk_index"], meta_row["meta/episodes/file_index"] = 0, 0
        episode_rows.append(meta_row)
        row += length
        if progress is not None:
            progress(length)
    files.close()
    _write_tables(pa, files.pq, root, episode_rows, tasks)
    _write_json(os.path.join(root, STATS_PATH), {k: jsonable(aggregate(v)) for k, v in episode_stats.items()})
    info = _info(
        ds,
        features,
        video,
        rate,
        robot_type,
        len(episode_rows),
        row,
        len(tasks),
        files.number + 1,
        root,
        data_file_mb,
        video_file_mb,
        pix_fmt,
    )
    _write_json(os.path.join(root, INFO_PATH), info)
    _warn(left_out, rounded, missing_frames, len(episode_rows), empty)
    return {
        "episodes": len(episode_rows),
        "steps": row,
        "features": list(info["features"]),
        "left_out": left_out,
        "skipped": empty,
        "tasks": list(tasks),
        "repo_id": repo_id,
    }


def _warn(left_out: list[str], rounded: set[str], missing: int, episodes: int, empty: int) -> None:
    notes = [f"{episodes} final observation(s) (after each episode's last step: LeRobot rows are steps)"]
    if empty:
        notes.append(f"{empty} episode(s) of no step")
    if left_out:
        notes.append(f"the values {', '.join(left_out)} (no LeRobot feature; map them with mapping=)")
    if missing:
        notes.append(f"{missing} rendered frame(s) not recorded (written black)")
    message = "LeRobot export: not written: " + "; ".join(notes)
    if rounded:
        message += f"; rounded to float32 (LeRobot's type): {', '.join(sorted(rounded))}"
    warnings.warn(message, TrajcoreWarning, stacklevel=4)


def _schema(pa: Any, features: list[_Feature]) -> Any:
    fields = []
    for f in features:
        if f.kind == "image":
            if not f.video:
                fields.append(pa.field(f.name, pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
        elif f.shape == (1,):
            fields.append(pa.field(f.name, pa.from_numpy_dtype(np.dtype(f.dtype))))
        else:
            fields.append(pa.field(f.name, pa.list_(pa.from_numpy_dtype(np.dtype(f.dtype)), f.shape[0])))
    fields.append(pa.field("timestamp", pa.float32()))
    fields += [pa.field(name, pa.int64()) for name in _INDEX_FEATURES[1:]]
    return pa.schema(fields)


def _table(pa: Any, schema: Any, features: list[_Feature], columns: dict[str, Any], length: int) -> Any:
    arrays = []
    for fld in schema:
        v = columns[fld.name]
        if pa.types.is_fixed_size_list(fld.type):
            arrays.append(
                pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(v).reshape(-1)), fld.type.list_size)
            )
        elif pa.types.is_struct(fld.type):
            arrays.append(pa.array(v, type=fld.type))
        else:
            arrays.append(pa.array(np.asarray(v).reshape(length)))
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_tables(pa: Any, pq: Any, root: str, episode_rows: list[dict[str, Any]], tasks: dict[str, int]) -> None:
    path = os.path.join(root, EPISODES_PATH.format(chunk_index=0, file_index=0))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(episode_rows), path)
    # The tasks table as pandas writes a frame indexed by the task text (LeRobot reads it with pandas).
    table = pa.table(
        {
            "task_index": pa.array(list(tasks.values()), pa.int64()),
            "__index_level_0__": pa.array(list(tasks), pa.string()),
        }
    )
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": None,
                "field_name": "__index_level_0__",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0",
    }
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    pq.write_table(table, os.path.join(root, TASKS_PATH))


def _write_json(path: str, value: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=4, ensure_ascii=False)


def _info(
    ds: Dataset,
    features: list[_Feature],
    video: bool,
    fps: float,
    robot_type: str | None,
    episodes: int,
    frames: int,
    tasks: int,
    files: int,
    root: str,
    data_mb: float,
    video_mb: float,
    pix_fmt: str,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in features:
        if f.kind == "image" and f.image is not None:
            h, w, c = _image_shape(ds, f.image)
            entry: dict[str, Any] = {
                "dtype": "video" if f.video else "image",
                "shape": [h, w, c],
                "names": ["height", "width", "channels"],
            }
            if f.video:
                entry["info"] = {
                    "video.height": h,
                    "video.width": w,
                    "video.codec": "h264",
                    "video.pix_fmt": pix_fmt,
                    "video.is_depth_map": False,
                    "video.fps": int(fps) if float(fps).is_integer() else fps,
                    "video.channels": c,
                    "has_audio": False,
                }
            out[f.name] = entry
        else:
            out[f.name] = {"dtype": f.dtype, "shape": list(f.shape), "names": f.names}
    out["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
    out.update({name: {"dtype": "int64", "shape": [1], "names": None} for name in _INDEX_FEATURES[1:]})
    has_video = any(f.video for f in features)
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": tasks,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": data_mb,
        "video_files_size_in_mb": video_mb,
        "fps": int(fps) if float(fps).is_integer() else fps,
        "splits": {"train": f"0:{episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if has_video else None,
        "features": out,
    }
