"""`trajcore.annotate`: a column added to a recorded dataset without rewriting it, as a sidecar
file beside its shards (the core's `annotation`: the format, which rows each value goes to,
which version readers take). Readers see it as custom per-step data: ``ep.data[name]``,
``keys=["data/<name>"]`` in sampling, every export, and `convert` copies it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from trajcore import _core
from trajcore.errors import InvalidArgumentError
from trajcore.read.dataset import Dataset, open

__all__ = ["annotate", "annotations_of"]

# Numeric and bool values of a fixed shape: what a column of the format holds as rows.
_KINDS = "biuf"


def annotate(
    dataset: Dataset | str | os.PathLike[str],
    name: str,
    values: Sequence[Any],
    *,
    per: Literal["step", "episode"] | None = None,
) -> list[str]:
    """Adds the column ``data/<name>`` to a dataset directory without touching its shards.

    The values are written to a sidecar file per recording annotated, beside the shards, in the
    dataset's own file format (checksummed, indexed); readers join it to each episode by its
    recording, env index (lane) and first step row. Annotating the same name again writes the
    next version, which readers take instead (earlier files stay as they were). An open
    `Dataset` given is refreshed, so it reads the new column at once; other open datasets read
    it after their `refresh`.

    Args:
        dataset: a dataset directory, or an open `Dataset` of one.
        name: 1 to 64 of ``A-Z a-z 0-9 _ . -``, starting with a letter or digit.
        values: one entry per episode, in ``ds.episodes`` order: an array of the episode's
            length (one row per step, any fixed row shape), or one value (a scalar, or an array
            with ``per="episode"``) stored on each of the episode's steps; ``None`` leaves an
            episode without a value (its mask reads False).
        per: ``"step"`` (the first axis is the episode's steps), ``"episode"`` (one value per
            episode); by default ``"episode"`` when every entry is a scalar, else ``"step"``.

    Returns:
        The sidecar files written.

    Raises:
        InvalidArgumentError: not one entry per episode; an entry of another length than its
            episode's steps (naming the episode and both lengths), another row shape than the
            others, or a dtype that is not numeric or bool; a bad name; a name the recording
            records itself; a dataset that is not a local directory.
        TrajcoreIndexError: an episode the dataset does not have.
    """
    if isinstance(dataset, Dataset):
        ds, own = dataset, False
    else:
        ds, own = open(dataset), True
    try:
        written = _write(ds, name, values, per)
    finally:
        if own:
            ds.close()
    if not own:
        ds.refresh()
    return written


def _write(ds: Dataset, name: str, values: Sequence[Any], per: str | None) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidArgumentError(f"annotation {name!r}: values must be a sequence, one entry per episode")
    if len(values) != ds.num_episodes:
        raise InvalidArgumentError(
            f"annotation {name!r}: {len(values)} entries for the dataset's {ds.num_episodes} episodes "
            "(one per episode, in ds.episodes order; None for an episode without a value)"
        )
    given = [(i, np.asarray(v)) for i, v in enumerate(values) if v is not None]
    if per is None:
        per = "episode" if all(a.ndim == 0 for _, a in given) else "step"
    if per not in ("step", "episode"):
        raise InvalidArgumentError(f"annotation {name!r}: per={per!r}: use 'step' or 'episode'")
    # One dtype for every entry, as given: a promotion could change values (int64 to float64).
    dtype = given[0][1].dtype if given else np.dtype(np.float64)
    if dtype.kind not in _KINDS:
        raise InvalidArgumentError(f"annotation {name!r}: dtype {dtype} is not numeric or bool")
    lengths = ds._reads.summary()["length"]
    shape: tuple[int, ...] | None = None
    episodes: list[int] = []
    rows: list[bytes] = []
    for i, a in given:
        if a.dtype != dtype:
            raise InvalidArgumentError(
                f"annotation {name!r} of episode {i}: dtype {a.dtype} differs from the first entry's {dtype}"
            )
        if per == "episode":
            a = np.broadcast_to(a, (int(lengths[i]), *a.shape))
        elif a.ndim == 0:
            raise InvalidArgumentError(
                f"annotation {name!r} of episode {i}: one value for its {int(lengths[i])} steps; "
                "pass per='episode' to store one value per episode"
            )
        if shape is None:
            shape = a.shape[1:]
        elif a.shape[1:] != shape:
            raise InvalidArgumentError(
                f"annotation {name!r} of episode {i}: rows of shape {a.shape[1:]}, the others' are {shape}"
            )
        episodes.append(i)
        rows.append(np.ascontiguousarray(a, dtype=dtype.newbyteorder("<")).tobytes())
    written = _core.annotate(
        str(Path(ds.path)), name, dtype.name, list(shape or ()), per == "episode", episodes, rows
    )
    return [str(p) for p in written]


def annotations_of(dataset: Dataset) -> list[dict[str, Any]]:
    """The annotation sidecars beside a dataset's shards: dicts of ``recording``, ``name``,
    ``version``, ``per``, ``episodes`` (how many it holds values of), ``path``, ``taken`` (the
    version readers read) and ``problem`` (why it is not read, else None)."""
    found: list[dict[str, Any]] = dataset._core.report("annotations")
    return found
