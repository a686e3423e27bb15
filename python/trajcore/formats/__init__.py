"""Getting data out (``trajcore.export``, ``trajcore.to_pandas``, ``trajcore.summaries_frame``,
``trajcore.import_minari``, ``trajcore.from_lerobot``).

`export` writes a dataset (or a selection of its episodes) as CSV, JSON Lines in RLlib's shape,
Parquet, a Minari dataset or MP4 videos, streaming episode by episode (a LeRobot v3.0 dataset:
`trajcore.to_lerobot`, with its card); `import_minari` and `from_lerobot` read a Minari or
LeRobot dataset back into trajcore;
`to_pandas` and `summaries_frame` give a dataset's steps and episodes as pandas tables.

One module per format (`to_csv`, `to_jsonl`, `to_parquet`, `to_minari`, `from_minari`, `to_mp4`,
`to_lerobot`, `from_lerobot`, with LeRobot's statistics in `lerobot_stats`), pandas
views in `frames`, and one rule for naming and aligning table columns in `_columns` (used by
pandas, CSV and Parquet alike).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trajcore._store import configure, is_store_url
from trajcore.errors import InvalidArgumentError, TrajcoreWarning
from trajcore.formats._columns import DEFAULT_MAX_VALUES, choose
from trajcore.formats._read import EXPORT_CACHE_BYTES, Progress, StepTable, opened_for_pass, plan_of
from trajcore.formats.frames import left_out_note, summaries_frame, to_pandas
from trajcore.formats.from_minari import import_minari
from trajcore.read.dataset import Dataset
from trajcore.read.episodes import Episodes
from trajcore.tools.output import staged

if TYPE_CHECKING:
    from trajcore.formats.from_lerobot import from_lerobot

__all__ = [
    "DEFAULT_MAX_VALUES",
    "EXPORT_CACHE_BYTES",
    "FORMATS",
    "export",
    "format_of",
    "from_lerobot",
    "import_minari",
    "summaries_frame",
    "to_pandas",
]

FORMATS = ("csv", "jsonl", "parquet", "minari", "mp4")

_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def __getattr__(name: str) -> Any:
    # `from_lerobot` is imported when first asked for (see `trajcore._LAZY`). Its module has its
    # name: the function takes the module's place as the package's attribute, as an import at the
    # top of this file did.
    if name == "from_lerobot":
        from trajcore.formats.from_lerobot import from_lerobot as function

        globals()[name] = function
        return function
    raise AttributeError(f"module 'trajcore.formats' has no attribute {name!r}")


def format_of(out: str, format: str | None) -> str:
    """The format asked for, or the one `out`'s extension names.

    Raises:
        InvalidArgumentError: an unknown format, or none given and none implied.
    """
    if format is not None:
        if format == "lerobot":
            raise InvalidArgumentError(
                "a LeRobot dataset is written by trajcore.to_lerobot(src, root, repo_id=...) (with its card), "
                "or `trajcore export PATH OUT --format lerobot`"
            )
        if format not in FORMATS:
            raise InvalidArgumentError(f"unknown export format {format!r} (formats: {', '.join(FORMATS)})")
        return format
    implied = _SUFFIXES.get(os.path.splitext(out)[1].lower())
    if implied is None:
        raise InvalidArgumentError(
            f"cannot tell the format from {out!r}: give one of {', '.join(FORMATS)} "
            "(or name the file .csv, .jsonl, .parquet)"
        )
    return implied


def export(
    src: str | os.PathLike[str] | Dataset | Episodes,
    dst: str | os.PathLike[str],
    format: str | None = None,
    *,
    columns: Sequence[str] | None = None,
    max_values: int = DEFAULT_MAX_VALUES,
    force: bool = False,
    batch_rows: int | None = None,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
    keys: Sequence[str] | None = None,
    fps: float | None = None,
    grid: bool = False,
) -> dict[str, Any]:
    """Writes a dataset, or a selection of its episodes, in another format, one episode (or one
    batch of rows) at a time: memory stays bounded whatever the size of the dataset.

    Args:
        src: a dataset (path or URL, or `Dataset`), or `Episodes` (e.g.
            ``ds.select(complete=True)``).
        dst: the file to write (csv, jsonl, parquet; a local path), for minari the dataset id
            (``namespace/name-v0``) created under Minari's local datasets root
            (``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``), for mp4 the directory the
            videos are written into (a LeRobot dataset: `trajcore.to_lerobot`).
        format: ``"csv"``, ``"jsonl"``, ``"parquet"``, ``"minari"`` or ``"mp4"``; None: from
            `dst`'s extension.
        columns: csv and parquet only: the values wanted, by name or '/'-bounded prefix
            (``["obs", "action", "reward"]``); default every value of at most `max_values`
            elements for csv, every value for parquet.
        max_values: csv: arrays with more elements (images) are left out, with a
            `TrajcoreWarning` naming them, unless `columns` names them.
        force: replace `dst` if it exists (otherwise refused).
        batch_rows: csv: rows formatted per write; parquet: rows per row group. Default: about
            8 MiB of values (at most 16k rows) for csv, 32 MiB (at most 64k rows) for parquet.
        progress: called with the number of steps written, as they are.
        storage_options: options of `src`'s store (a URL) over the environment's (see
            `trajcore.open`).
        keys: mp4 only: the image values to write as video (``"obs"``, ``"obs/camera"``,
            ``"render/frame"``); default every uint8 image observation leaf and the rendered
            frames (see `trajcore.formats.to_mp4`).
        fps: mp4 only: frames per second (default the recording's ``render_fps``, else 30).
        grid: mp4 only: one video per key tiling the sub-envs (``grid.<key>.mp4``) instead of
            one per episode and key (``episode-<index>.<key>.mp4``).

    Returns:
        ``{"format", "out", "episodes", "steps", "left_out": [leaf names], "skipped": episodes
        not written (minari: episodes of no step; mp4: episode videos of a key their recording
        has not)}``; mp4 adds ``"files"``, the names written in `dst`.

    Raises:
        InvalidArgumentError: `dst` exists and `force` is False or is a URL, an unknown format, `columns`
            given for jsonl or minari or naming no value, recordings with different spaces.
        MissingDependencyError: pyarrow (parquet), or minari, h5py, Pillow (minari), or PyAV
            (mp4: ``pip install "trajcore[video]"``) missing.
    """
    fmt = format_of(os.fspath(dst), format)
    if columns is not None and fmt in ("jsonl", "minari", "mp4"):
        raise InvalidArgumentError(f"columns apply to csv and parquet; {fmt} exports take keys (mp4) or every value")
    if fmt != "mp4" and (keys is not None or fps is not None or grid):
        raise InvalidArgumentError(f"keys, fps and grid apply to mp4 exports, not {fmt}")
    if batch_rows is not None and batch_rows < 1:
        raise InvalidArgumentError(f"batch_rows must be >= 1, got {batch_rows}")
    if not isinstance(src, Dataset | Episodes) and is_store_url(src):
        configure(os.fspath(src), storage_options)
    # A path opens with a chunk cache that holds the chunks a read in dataset order has in use at once.
    with opened_for_pass(src) as (ds, indices):
        result: dict[str, Any] = {"format": fmt, "out": os.fspath(dst), "episodes": len(indices), "left_out": []}
        result["skipped"] = 0
        if fmt == "minari":
            result.update(_minari(ds, indices, os.fspath(dst), force, progress))
            return result
        if fmt == "mp4":
            from trajcore.formats.to_mp4 import write_videos
            from trajcore.video import av_module

            av_module("the mp4 export")  # before anything is made
            out = os.path.normpath(os.fspath(dst))  # "out/" is the directory "out"
            with staged(out, force) as tmp:
                result.update(write_videos(ds, indices, tmp, keys, fps=fps, grid=grid, progress=progress))
            result["out"] = out
            return result
        with staged(os.fspath(dst), force) as tmp:
            if fmt == "jsonl":
                from trajcore.formats.to_jsonl import write_jsonl

                with open(tmp, "w", encoding="utf-8") as f:
                    result["steps"] = write_jsonl(ds, indices, f, progress)
                return result
            plan = plan_of(ds, indices)
            leaves, left_out = choose(plan.leaves, columns, max_values if fmt == "csv" else 1 << 62)
            if left_out:
                warnings.warn(left_out_note(left_out, max_values, "columns (--columns)"), TrajcoreWarning, stacklevel=2)
            result["left_out"] = [leaf.name for leaf in left_out]
            table = StepTable(ds, indices, plan, leaves, progress)
            if fmt == "csv":
                from trajcore.formats.to_csv import write_csv

                result["steps"] = write_csv(table, tmp, batch_rows)
            else:
                from trajcore.formats.to_parquet import write_parquet

                result["steps"] = write_parquet(table, tmp, batch_rows)
        return result


def _minari(
    ds: Dataset, indices: Sequence[int], dataset_id: str, force: bool, progress: Progress | None
) -> dict[str, Any]:
    from trajcore.formats.to_minari import minari_module, write_minari

    minari_module("Minari export")
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.namespace import create_namespace, list_local_namespaces
    from minari.storage import get_dataset_path

    try:
        namespace = parse_dataset_id(dataset_id)[0]
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
    target = str(get_dataset_path(dataset_id))
    with staged(target, force) as tmp:
        counts = write_minari(ds, indices, os.path.join(tmp, "data"), dataset_id, progress)
    if namespace is not None and namespace not in list_local_namespaces():
        create_namespace(namespace)
    return {"path": target, "episodes": counts["episodes"], "steps": counts["steps"], "skipped": counts["skipped"]}
