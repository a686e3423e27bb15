"""Episodes as video: one MP4 per episode and image key, or with `grid` one MP4 per key that
tiles the sub-envs of a vector recording side by side. H.264 through PyAV (``pip install
"trajcore[video]"``), written by `trajcore.video`.

What a file holds:

- one video frame per observation row: T + 1 frames for an episode of T steps (the reset's
  first), at the recording's ``render_fps`` (else 30) unless `fps` is given;
- image keys: uint8 observation leaves of shape (H, W, 3), (H, W), (H, W, 1), (H, W, 4) (alpha
  dropped) or (C, H, W) frame stacks of grey frames (their newest frame, the last one), and the
  rendered frames ``render/frame`` (``render_frames=True``); a row without a frame (its mask
  False) is a black frame, counted in the ``trajcore_frames_missing`` tag;
- an odd height or width gets its last row or column repeated once (`trajcore.video`);
- tags (MP4 metadata, read back by ``av.open(path).metadata``): ``title``, ``comment`` (the
  episode, its length and return in words) and ``trajcore_episode``, ``trajcore_env_index``,
  ``trajcore_length``, ``trajcore_return`` (``repr`` of the float64), ``trajcore_key``,
  ``trajcore_frames``, ``trajcore_frames_missing``; a grid video has ``trajcore_tiles`` (the
  tiles' ``[recording, env_index]`` in order, row by row) and ``trajcore_episodes`` (per
  episode ``[index, tile, first frame, length, return]``, JSON).

Lossy: H.264 at `trajcore.video.CRF` keeps smooth images above 35 dB PSNR; the dataset keeps
every frame exactly (this is for looking and sharing).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import InvalidArgumentError, TrajcoreWarning
from trajcore.formats._columns import Plan
from trajcore.formats._read import Progress, plan_of
from trajcore.images import image_shape, pictures
from trajcore.read.dataset import Dataset
from trajcore.read.records.meta import render_fps
from trajcore.record.frames import FRAME_COLUMN, FRAME_MASK
from trajcore.video import Encoder, av_module, episode_tags, write_mp4

__all__ = ["ImageKey", "episode_pictures", "image_keys", "write_videos"]


@dataclass(frozen=True)
class ImageKey:
    """A value exported as video: its name (``obs``, ``obs/camera``, ``render/frame``), the
    column and mask column it reads, and its `image_shape` layout."""

    name: str
    column: str
    mask: str | None
    layout: str


def _columns(ds: Dataset, recordings: Sequence[int]) -> dict[str, dict[str, Any]]:
    """The column specs of `recordings`, by name (the first recording's where they differ)."""
    specs: dict[str, dict[str, Any]] = {}
    for r in recordings:
        for spec in ds._core.columns(r):
            specs.setdefault(str(spec["name"]), spec)
    return specs


def _layout(spec: dict[str, Any]) -> str | None:
    dtype = np.dtype(str(spec["dtype"])) if spec["dtype"] != "str" else None
    if dtype != np.uint8:
        return None
    return image_shape(tuple(int(d) for d in spec["shape"]), np.dtype(np.uint8))


def image_keys(
    ds: Dataset, indices: Sequence[int], keys: Sequence[str] | None = None, *, plan: Plan | None = None
) -> list[ImageKey]:
    """The image keys to export: `keys`, checked, or by default every image observation leaf
    (uint8, see the module docstring) and the rendered frames when recorded.

    Args:
        plan: the episodes' step-table plan, when the caller has it (`plan_of`).

    Raises:
        InvalidArgumentError: a key names no observation leaf nor ``render/frame``, or names a
            value that is not a uint8 image (the message says its shape and dtype).
    """
    recordings = sorted({int(r) for r in ds._reads.summary()["recording"][np.asarray(indices, dtype=np.int64)]})
    specs = _columns(ds, recordings or range(ds.num_recordings))
    leaves = (plan or plan_of(ds, indices)).leaves
    candidates = {leaf.name: leaf.column for leaf in leaves if leaf.group == "obs"}
    if FRAME_COLUMN in specs:
        candidates[FRAME_COLUMN] = FRAME_COLUMN

    def key(name: str) -> ImageKey | None:
        column = candidates[name]
        layout = _layout(specs[column])
        return (
            None if layout is None else ImageKey(name, column, FRAME_MASK if column == FRAME_COLUMN else None, layout)
        )

    if keys is None:
        return [k for name in candidates if (k := key(name)) is not None]
    out = []
    for name in keys:
        name = str(name).strip().strip("/")
        if name not in candidates:
            raise InvalidArgumentError(
                f"key {name!r} names no observation value or rendered frames of this dataset (keys: "
                f"{', '.join(candidates)})"
            )
        k = key(name)
        if k is None:
            spec = specs[candidates[name]]
            shape = "x".join(map(str, spec["shape"])) or "scalar"
            raise InvalidArgumentError(
                f"key {name!r} is {shape} {spec['dtype']}, not an image: a video key is uint8 of shape (H, W, 3), "
                "(H, W), (H, W, 1), (H, W, 4) or a stack (C, H, W) of grey frames"
            )
        out.append(k)
    return out


def _file_name(key: str) -> str:
    return key.replace("/", ".")


def episode_pictures(
    ds: Dataset, index: int, key: ImageKey
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]] | None:
    """The T + 1 pictures of `key` in episode `index` and where they are present, or None when
    its recording has no such column (frames not recorded there)."""
    recording = int(ds._reads.summary()["recording"][index])
    values = ds._reads.optional_column(index, recording, key.column)
    if values is None:
        return None
    mask = ds._reads.optional_column(index, recording, key.mask) if key.mask else None
    present = np.ones(len(values), dtype=np.bool_) if mask is None else np.asarray(mask, dtype=np.bool_)
    return pictures(np.asarray(values), key.layout), present


def _episode_video(ds: Dataset, index: int, key: ImageKey, path: str, fps: float, threads: int) -> bool:
    """Writes `key` of episode `index` as one MP4 with the episode's tags; False (nothing written)
    when its recording has no such column."""
    read = episode_pictures(ds, index, key)
    if read is None:
        return False
    frames, present = read
    summary = ds._reads.summary()
    length, ret = int(summary["length"][index]), float(summary["episode_return"][index])
    env_index = int(summary["env_index"][index])
    title = f"{os.path.basename(ds.path.rstrip('/'))} episode {index} {key.name}"
    tags = episode_tags(title, index, env_index, length, ret, key.name, present)
    write_mp4(path, frames, present, fps=fps, tags=tags, threads=threads)
    return True


def write_videos(
    ds: Dataset,
    indices: Sequence[int],
    out_dir: str,
    keys: Sequence[str] | None = None,
    *,
    fps: float | None = None,
    grid: bool = False,
    progress: Progress | None = None,
    threads: int = 0,
) -> dict[str, Any]:
    """Writes the episodes' image keys as MP4 files into the directory `out_dir` (made here):
    ``episode-<index>.<key>.mp4`` (``/`` in a key written ``.``), or with `grid`
    ``grid.<key>.mp4``.

    Returns:
        ``{"files": [names], "steps": steps read, "skipped": episodes of a key's recording
        without that key (rendered frames not recorded there)}``.

    Raises:
        MissingDependencyError: PyAV is not installed.
        InvalidArgumentError: a key is not an image (see `image_keys`), or none is to export.
    """
    av_module("the mp4 export")
    if not len(indices):
        raise InvalidArgumentError(f"{ds.path}: no episode to export as video")
    chosen = image_keys(ds, indices, keys)
    if not chosen:
        raise InvalidArgumentError(
            f"{ds.path}: no image to export as video (no uint8 image observation, no rendered frames); "
            "record with render_frames=True, or name a key"
        )
    names: dict[str, str] = {}
    for k in chosen:
        other = names.setdefault(_file_name(k.name), k.name)
        if other != k.name:
            raise InvalidArgumentError(
                f"keys {other!r} and {k.name!r} would share the file name {_file_name(k.name)!r}; export them apart"
            )
    rate = fps if fps is not None else render_fps(ds.meta(int(ds._reads.summary()["recording"][indices[0]])))
    os.makedirs(out_dir)
    if grid:
        return _write_grids(ds, indices, out_dir, chosen, rate, progress, threads)
    files: list[str] = []
    skipped = 0
    steps = 0
    summary = ds._reads.summary()
    for index in indices:
        index = int(index)
        for key in chosen:
            name = f"episode-{index:06d}.{_file_name(key.name)}.mp4"
            if _episode_video(ds, index, key, os.path.join(out_dir, name), rate, threads):
                files.append(name)
            else:
                skipped += 1
        steps += int(summary["length"][index])
        if progress is not None:
            progress(int(summary["length"][index]))
    if skipped:
        warnings.warn(
            f"{skipped} episode videos not written: their recordings have no such column "
            f"({', '.join(k.name for k in chosen)})",
            TrajcoreWarning,
            stacklevel=3,
        )
    return {"files": files, "steps": steps, "skipped": skipped}


def _tile_stream(
    ds: Dataset, indices: list[int], key: ImageKey, progress: Progress | None
) -> Iterator[npt.NDArray[np.uint8] | None]:
    """A tile's episodes' pictures one after another, read one episode at a time (None where a
    row has no frame)."""
    for index in indices:
        read = episode_pictures(ds, index, key)
        if read is not None:
            frames, present = read
            for i in range(len(frames)):
                yield frames[i] if present[i] else None
        if progress is not None:
            progress(int(ds._reads.summary()["length"][index]))


def _write_grids(
    ds: Dataset,
    indices: Sequence[int],
    out_dir: str,
    keys: list[ImageKey],
    fps: float,
    progress: Progress | None,
    threads: int,
) -> dict[str, Any]:
    """One video per key: a tile per sub-env (per recording and env_index), its episodes played
    one after another, black where it has no frame; tiles row by row, ceil(sqrt(n)) a row."""
    summary = ds._reads.summary()
    members: dict[tuple[int, int], list[int]] = {}
    for index in indices:
        tile = (int(summary["recording"][index]), int(summary["env_index"][index]))
        members.setdefault(tile, []).append(int(index))
    members = dict(sorted(members.items()))
    cols = math.ceil(math.sqrt(len(members)))
    rows = math.ceil(len(members) / cols)
    files = []
    for n_key, key in enumerate(keys):
        h, w, c = _tile_shape(ds, sorted({r for r, _ in members}), key)
        # Where each episode plays (known before any frame is read: the tags go in first).
        placed: list[list[Any]] = []
        for t, tile_members in enumerate(members.values()):
            first = 0
            for index in tile_members:
                has = key.column in ds._reads.recording(int(summary["recording"][index])).column_names
                length = int(summary["length"][index])
                placed.append([index, t, first if has else None, length, float(summary["episode_return"][index])])
                first += length + 1 if has else 0
        name = f"grid.{_file_name(key.name)}.mp4"
        tags = {
            "title": f"{os.path.basename(ds.path.rstrip('/'))} {key.name}, {len(members)} sub-envs",
            "comment": f"trajcore: {len(indices)} episodes of {len(members)} sub-envs, one tile each",
            "trajcore_key": key.name,
            "trajcore_tiles": json.dumps([list(t) for t in members]),
            "trajcore_episodes": json.dumps(placed),
        }
        canvas = np.zeros((rows * h, cols * w, c), dtype=np.uint8)
        streams = [_tile_stream(ds, m, key, progress if n_key == 0 else None) for m in members.values()]
        enc = Encoder(os.path.join(out_dir, name), canvas.shape[0], canvas.shape[1], fps, tags, threads)
        try:
            while True:
                live = False
                for t, stream in enumerate(streams):
                    y, x = divmod(t, cols)
                    area = canvas[y * h : (y + 1) * h, x * w : (x + 1) * w]
                    picture = next(stream, _DONE)
                    live = live or picture is not _DONE
                    if isinstance(picture, np.ndarray):
                        area[:] = picture
                    else:
                        area[:] = 0  # no frame at this row, or the sub-env's episodes are over
                if not live:
                    break
                enc.add(canvas)
        finally:
            enc.close()
        files.append(name)
    steps = int(sum(int(summary["length"][i]) for i in indices))
    return {"files": files, "steps": steps, "skipped": 0}


_DONE: Any = object()


def _tile_shape(ds: Dataset, recordings: Sequence[int], key: ImageKey) -> tuple[int, int, int]:
    """The picture shape of `key`, the same in every recording that has it.

    Raises:
        InvalidArgumentError: two recordings have pictures of different shapes.
    """
    shapes = {}
    for r in recordings:
        for spec in ds._core.columns(r):
            if spec["name"] == key.column:
                zero = np.zeros((1, *(int(d) for d in spec["shape"])), dtype=np.uint8)
                shapes[r] = tuple(int(d) for d in pictures(zero, key.layout).shape[1:])
    if len(set(shapes.values())) > 1:
        raise InvalidArgumentError(
            f"{key.name} has pictures of different shapes in different recordings ({shapes}): one grid cannot "
            "tile them; export them apart (select recording=...)"
        )
    h, w, c = next(iter(shapes.values()))
    return h, w, c
