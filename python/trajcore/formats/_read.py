"""Reading step tables out of a dataset: the I/O side of `trajcore.formats._columns` (which
decides the leaves and their rows).

Every exporter streams through `iter_episodes` (formats written per episode: JSONL, Minari) or
`iter_batches` (tables: pandas, CSV, Parquet, Ray Data's read tasks), so memory stays bounded by
one batch plus one episode whatever the size of the dataset. `iter_batches` reads each batch as
one bulk range read of the core (``transitions[a:b]``'s path: a run per episode, chunks decoded
once per read, in parallel), not episode by episode.

A dataset's rows in dataset order come from every sub-env's chunks at once (the episodes of a
vector recording alternate between sub-envs, each sub-env's steps stored apart), so a read in
that order keeps about one chunk per sub-env and column in use: with a smaller chunk cache,
every episode decodes its chunks again. `open_for_pass` opens a dataset with a cache that holds
them (`pass_cache_bytes`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import CorruptFileError
from trajcore.formats._columns import Leaf, Plan, RecordingColumns, make_plan
from trajcore.read.dataset import Dataset, members
from trajcore.read.episodes import Episodes
from trajcore.read.multiagent.agents import agent_names
from trajcore.read.records.infos import widen
from trajcore.read.train.transitions import int64

__all__ = [
    "EXPORT_CACHE_BYTES",
    "PASS_CACHE_MAX_BYTES",
    "Batch",
    "EpisodeRows",
    "Progress",
    "StepTable",
    "iter_batches",
    "iter_episodes",
    "open_for_pass",
    "opened_for_pass",
    "pass_cache_bytes",
    "plan_of",
    "read_episode",
    "recordings_of",
    "row_bytes",
    "rows_per_batch",
]

EXPORT_CACHE_BYTES = 32 << 20
"""The least chunk cache of a dataset opened to be read once in order (`open_for_pass`); the
default, 256 MiB, serves random reads."""

PASS_CACHE_MAX_BYTES = 1 << 30
"""The most chunk cache `open_for_pass` gives a dataset (a recording of very many sub-envs reads
some chunks more than once past it)."""

NEXT_ROW = "next:"
"""Before a column's name in a core read's keys: its row of the next observation."""

Progress = Callable[[int], None]
"""Called with the number of steps just written (for a progress bar)."""

Values = npt.NDArray[Any] | list[str]


def recordings_of(ds: Dataset, indices: Sequence[int] | None) -> tuple[int, ...] | None:
    """The recordings the episodes `indices` come from, ascending (None: every one)."""
    if indices is None or not len(indices):
        return None
    return tuple(np.unique(ds._reads.summary()["recording"][np.asarray(indices, dtype=np.int64)]).tolist())


def plan_of(ds: Dataset, indices: Sequence[int] | None = None, *, among: Sequence[int] | None = None) -> Plan:
    """The step-table plan of a dataset (see `make_plan`), or of the episodes `indices` (or of
    the recordings `among`): only their recordings' columns count (one agent's, in a multi-agent dataset
    of agents with other spaces).

    Raises:
        InvalidArgumentError: recordings differ in their observation or action columns.
        SchemaError: an info or data column has different dtypes or shapes in two recordings.
    """
    recordings = []
    for r in range(ds.num_recordings):
        layout = ds.meta(r).get("layout") or {}
        recordings.append(RecordingColumns(layout.get("observation"), layout.get("action"), ds._core.columns(r)))
    chosen = among if among is not None else recordings_of(ds, indices)
    if chosen:
        used = set(chosen)
        # The others stand in as the first used one: the plan numbers recordings by position.
        stand_in = recordings[min(used)]
        recordings = [rec if r in used else stand_in for r, rec in enumerate(recordings)]
    return make_plan(recordings)


@dataclass
class EpisodeRows:
    """One episode's T rows of the chosen leaves (keyed by leaf name), with the masks of masked
    leaves (True where the value was given) and the episode's summary fields."""

    index: int
    env_index: int
    length: int
    values: dict[str, Values] = field(default_factory=dict)
    masks: dict[str, npt.NDArray[np.bool_]] = field(default_factory=dict)


def _absent(leaf: Leaf, rows: int) -> Values:
    if leaf.dtype == "str":
        return [""] * rows
    return np.zeros((rows, *leaf.shape), dtype=leaf.dtype)


def read_episode(ds: Dataset, index: int, plan: Plan, leaves: Sequence[Leaf], *, whole: bool = False) -> EpisodeRows:
    """The rows of `leaves` for episode `index` (each column read and decompressed once).

    A leaf whose column the episode's recording does not have reads as never given (zeros, mask
    all False).

    Args:
        whole: every row of each leaf's column (T + 1 for the observation timeline: observations
            and infos, T for the steps) instead of the T rows of a step table.

    Raises:
        CorruptFileError: the episode's data is damaged.
    """
    summary = ds._reads.summary()
    length = int(summary["length"][index])
    present = plan.columns_of[int(summary["recording"][index])] if plan.columns_of else frozenset()
    cache: dict[str, Values] = {}

    def rows(column: str, first: int) -> Values | None:
        if column not in present:
            return None
        values = cache.get(column)
        if values is None:
            values = cache[column] = ds._reads.column(index, column)
        return values if whole else values[first : first + length]

    out = EpisodeRows(index, int(summary["env_index"][index]), length)
    for leaf in leaves:
        n = length + 1 if whole and leaf.on_obs_timeline else length
        values = rows(leaf.column, leaf.first_row)
        if values is None:
            out.values[leaf.name] = _absent(leaf, n)
            if leaf.mask is not None:
                out.masks[leaf.name] = np.zeros(n, dtype=np.bool_)
            continue
        mask = rows(leaf.mask, leaf.first_row) if leaf.mask is not None else None
        if leaf.mask is not None and mask is None:
            mask = np.ones(n, dtype=np.bool_)
        wider = [(rows(c, leaf.first_row), rows(m, leaf.first_row) if m else None) for c, m in leaf.wider]
        values, mask = merged(leaf, values, mask, [(v, m) for v, m in wider if v is not None])
        out.values[leaf.name] = values
        if mask is not None:
            out.masks[leaf.name] = np.asarray(mask, dtype=np.bool_)
    return out


def merged(leaf: Leaf, values: Values, mask: Any, wider: Sequence[tuple[Any, Any]]) -> tuple[Values, Any]:
    """A leaf's rows with those of the columns that widen it (`Leaf.wider`, those read), merged
    as the reader merges them (`trajcore.read.records.infos`), all in the leaf's dtype: a recording whose
    values never outgrew the first type reads in the type another recording widened it to.

    Raises:
        CorruptFileError: the columns do not stack (see `_infos`).
    """
    if not leaf.wider:
        return values, mask
    for wider_values, wider_mask in wider:
        w = np.asarray(wider_values)
        if np.can_cast(w.dtype, leaf.dtype, "safe"):
            w = w.astype(leaf.dtype, copy=False)
        values, mask = widen(values, mask, w, wider_mask, leaf.column)
    out = np.asarray(values)
    return (out if out.dtype == leaf.dtype else out.astype(leaf.dtype)), mask


def iter_episodes(
    ds: Dataset, indices: Sequence[int], plan: Plan, leaves: Sequence[Leaf], progress: Progress | None = None
) -> Iterator[EpisodeRows]:
    """`read_episode` for each index in order, reporting each episode's steps to `progress`
    once the caller has taken it."""
    for index in indices:
        rows = read_episode(ds, int(index), plan, leaves)
        yield rows
        if progress is not None:
            progress(rows.length)


@dataclass
class Batch:
    """Consecutive step-table rows (possibly spanning episodes): the index columns, then the
    leaves' values and masks keyed by leaf name."""

    episode: npt.NDArray[np.int64]
    env_index: npt.NDArray[np.int64]
    step: npt.NDArray[np.int64]
    values: dict[str, Values]
    masks: dict[str, npt.NDArray[np.bool_]]
    # Each row's agent (multi-agent datasets: the tables' ``agent`` column), else None.
    agent: npt.NDArray[np.object_] | None = None

    def __len__(self) -> int:
        return len(self.episode)


def _concat(parts: list[Values]) -> Values:
    if parts and isinstance(parts[0], list):
        joined: list[str] = []
        for p in parts:
            joined.extend(p)
        return joined
    return np.concatenate(parts)


class _Pending:
    """Row slices waiting to make a batch."""

    def __init__(self, leaves: Sequence[Leaf]) -> None:
        self.leaves = leaves
        self._reset()

    def _reset(self) -> None:
        leaves = self.leaves
        self.rows = 0
        self.index: list[tuple[int, int, int, int]] = []  # (episode, env, first step, rows)
        self.values: dict[str, list[Values]] = {leaf.name: [] for leaf in leaves}
        self.masks: dict[str, list[npt.NDArray[np.bool_]]] = {leaf.name: [] for leaf in leaves if leaf.mask}

    def add(self, ep: EpisodeRows, start: int, stop: int) -> None:
        self.index.append((ep.index, ep.env_index, start, stop - start))
        for name, v in ep.values.items():
            self.values[name].append(v[start:stop])
        for name, m in ep.masks.items():
            self.masks[name].append(m[start:stop])
        self.rows += stop - start

    def take(self) -> Batch:
        counts = [n for _, _, _, n in self.index]
        batch = Batch(
            episode=np.repeat(np.array([e for e, _, _, _ in self.index], dtype=np.int64), counts),
            env_index=np.repeat(np.array([v for _, v, _, _ in self.index], dtype=np.int64), counts),
            step=np.concatenate([np.arange(s, s + n, dtype=np.int64) for _, _, s, n in self.index])
            if self.index
            else np.zeros(0, dtype=np.int64),
            values={
                leaf.name: _concat(self.values[leaf.name]) if self.index else _absent(leaf, 0) for leaf in self.leaves
            },
            masks={
                name: np.concatenate(parts) if parts else np.zeros(0, dtype=np.bool_)
                for name, parts in self.masks.items()
            },
        )
        self._reset()
        return batch


def iter_batches(
    ds: Dataset,
    indices: Sequence[int],
    plan: Plan,
    leaves: Sequence[Leaf],
    rows: int,
    progress: Progress | None = None,
) -> Iterator[Batch]:
    """Batches of exactly `rows` rows (the last one shorter, none if there is no step), over the
    episodes in order; an episode may be split between two batches. Each batch is one bulk
    read of the core.

    Args:
        rows: rows per batch (a Parquet row group, a CSV write).
        progress: called with the steps of each batch once the caller has taken it.

    Raises:
        CorruptFileError: an episode's data is damaged.
    """
    keys = bulk_keys(plan, leaves)
    batches = (
        _episode_batches(ds, indices, plan, leaves, rows)
        if keys is None
        else _bulk(ds, indices, plan, leaves, keys, rows)
    )
    names = agent_names(ds._reads)
    for batch in batches:
        if names is not None:
            batch.agent = names[batch.episode]
        yield batch
        if progress is not None:
            progress(len(batch))


def _key(column: str, first_row: int) -> str:
    return NEXT_ROW + column if first_row else column


def bulk_keys(plan: Plan, leaves: Sequence[Leaf]) -> list[str] | None:
    """The core read keys of the leaves and their masks, or None where a bulk read would not
    give what `read_episode` gives: a recording without a leaf's column when the leaf has no mask
    (the core refuses it; the table has zeros), or with its column but not its mask (the core
    reads the mask as never given; the table as always given)."""
    keys: dict[str, None] = {}
    for leaf in leaves:
        for present in plan.columns_of:
            if leaf.column not in present and leaf.mask is None and leaf.group in ("info", "data"):
                return None
            if leaf.mask is not None and leaf.column in present and leaf.mask not in present:
                return None
        for column, mask in ((leaf.column, leaf.mask), *leaf.wider):
            keys[_key(column, leaf.first_row)] = None
            if mask is not None:
                keys[_key(mask, leaf.first_row)] = None
    return list(keys)


def _bulk(
    ds: Dataset, indices: Sequence[int], plan: Plan, leaves: Sequence[Leaf], keys: list[str], rows: int
) -> Iterator[Batch]:
    """`iter_batches` by bulk range reads over a selection of `indices`."""
    every = isinstance(indices, range) and indices == range(ds.num_episodes)
    members = int64(indices)
    selection = ds._reads.every if every else ds._core.selection(members)
    summary = ds._reads.summary()
    lengths = summary["length"][members]
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    env_index = summary["env_index"]
    for start in range(0, total, rows):
        stop = min(total, start + rows)
        out = selection.gather(range(start, stop), None, False, keys)
        episode = out["episode_index"]
        # Without `strict`, the core redraws the steps of an episode it finds damaged from intact
        # ones (right for training, wrong for a table): read such an episode alone, which raises.
        first, last = np.searchsorted(ends, [start, stop - 1], side="right")
        expected = np.repeat(members[first : last + 1], _overlap(ends, lengths, first, last, start, stop))
        if not np.array_equal(episode, expected):
            bad = int(expected[np.flatnonzero(episode != expected)[0]])
            read_episode(ds, bad, plan, leaves)
            raise CorruptFileError(f"{ds.path}: episode {bad} is damaged")
        values: dict[str, Values] = {}
        masks: dict[str, npt.NDArray[np.bool_]] = {}
        for leaf in leaves:
            mask = out[_key(leaf.mask, leaf.first_row)] if leaf.mask is not None else None
            wider = [(out[_key(c, leaf.first_row)], out[_key(m, leaf.first_row)] if m else None) for c, m in leaf.wider]
            values[leaf.name], mask = merged(leaf, out[_key(leaf.column, leaf.first_row)], mask, wider)
            if mask is not None:
                masks[leaf.name] = np.asarray(mask, dtype=np.bool_)
        yield Batch(episode, env_index[episode].astype(np.int64), out["step_index"], values, masks)


def _overlap(
    ends: npt.NDArray[Any], lengths: npt.NDArray[Any], first: int, last: int, start: int, stop: int
) -> npt.NDArray[np.int64]:
    """Steps of members `first` .. `last` inside steps `start` .. `stop` (`ends`: cumulative)."""
    begins = ends[first : last + 1] - lengths[first : last + 1]
    steps: npt.NDArray[np.int64] = np.minimum(ends[first : last + 1], stop) - np.maximum(begins, start)
    return steps


def _episode_batches(
    ds: Dataset, indices: Sequence[int], plan: Plan, leaves: Sequence[Leaf], rows: int
) -> Iterator[Batch]:
    """`iter_batches` episode by episode (see `bulk_keys` for when)."""
    pending = _Pending(leaves)
    for index in indices:
        ep = read_episode(ds, int(index), plan, leaves)
        start = 0
        while start < ep.length:
            stop = min(ep.length, start + rows - pending.rows)
            pending.add(ep, start, stop)
            start = stop
            if pending.rows == rows:
                yield pending.take()
    if pending.rows:
        yield pending.take()


def pass_cache_bytes(
    column_stats: Sequence[Mapping[str, Any]], recording: npt.NDArray[Any], env_index: npt.NDArray[Any]
) -> int:
    """The chunk cache a read of a dataset in dataset order needs to decode each chunk about once:
    twice a chunk (on average, decoded) of every column per sub-env of each recording, at least
    `EXPORT_CACHE_BYTES`, at most `PASS_CACHE_MAX_BYTES`.

    Args:
        column_stats: ``recording``, ``chunks`` and ``raw_bytes`` per column of each recording
            (`_core.Dataset.column_stats`).
        recording, env_index: the summaries' fields of every episode.
    """
    lanes: dict[int, int] = {}
    for r in np.unique(recording):
        lanes[int(r)] = len(np.unique(env_index[recording == r]))
    need = 0
    for c in column_stats:
        chunks = int(c["chunks"])
        if chunks:
            need += lanes.get(int(c["recording"]), 0) * -(-int(c["raw_bytes"]) // chunks)
    return int(min(PASS_CACHE_MAX_BYTES, max(EXPORT_CACHE_BYTES, 2 * need)))


def open_for_pass(path: str, *, strict: bool = False) -> Dataset:
    """The dataset at `path`, opened to be read once in dataset order (an export, a Ray read
    task): with the chunk cache `pass_cache_bytes` gives (opening reads only indexes, so opening
    twice costs little next to a pass).

    Raises:
        TrajcoreFileNotFoundError: the path does not exist.
    """
    ds = Dataset(path, strict=strict, cache_bytes=EXPORT_CACHE_BYTES)
    summary = ds._reads.summary()
    need = pass_cache_bytes(ds._core.column_stats(), summary["recording"], summary["env_index"])
    if need <= EXPORT_CACHE_BYTES:
        return ds
    ds.close()
    return Dataset(path, strict=strict, cache_bytes=need)


@contextlib.contextmanager
def opened_for_pass(src: str | os.PathLike[str] | Dataset | Episodes) -> Iterator[tuple[Dataset, list[int]]]:
    """The dataset and the episode indexes an export of `src` reads: those of a `Dataset` or
    `Episodes` as given, or of the dataset at a path, opened with `open_for_pass` for the while
    (and closed after).

    Raises:
        TrajcoreFileNotFoundError: the path does not exist.
    """
    if isinstance(src, Dataset | Episodes):
        yield members(src)
        return
    with open_for_pass(os.fspath(src)) as ds:
        yield members(ds)


@dataclass
class StepTable:
    """The step table of some episodes of a dataset, as the table formats (CSV, Parquet) write
    it: which rows (`indices`, episode by episode), which values (`leaves` of `plan`), and who
    hears how far the writing got."""

    ds: Dataset
    indices: Sequence[int]
    plan: Plan
    leaves: Sequence[Leaf]
    progress: Progress | None = None

    def batches(self, rows: int | None, target_bytes: int, max_rows: int) -> Iterator[Batch]:
        """`iter_batches` of `rows` rows (None: about `target_bytes` of values, see
        `rows_per_batch`)."""
        size = rows or rows_per_batch(self.leaves, target_bytes, max_rows)
        return iter_batches(self.ds, self.indices, self.plan, self.leaves, size, self.progress)


_STR_GUESS = 32  # bytes a str value is assumed to take when sizing batches


def rows_per_batch(leaves: Sequence[Leaf], target_bytes: int, max_rows: int) -> int:
    """Rows that make about `target_bytes` of values, between 256 and `max_rows`: CartPole rows
    make batches of `max_rows`, 64x64x3 images (obs and next_obs) batches of about
    `target_bytes` / 24 KiB rows."""
    return int(min(max_rows, max(256, target_bytes // row_bytes(leaves))))


def row_bytes(leaves: Sequence[Leaf]) -> int:
    """About how many bytes one step-table row of `leaves` takes in memory, index columns and
    masks included (a str value counted as 32 bytes)."""
    row = 24  # index columns
    for leaf in leaves:
        row += (_STR_GUESS if leaf.dtype == "str" else np.dtype(leaf.dtype).itemsize) * leaf.size
        row += 1 if leaf.mask else 0
    return row
