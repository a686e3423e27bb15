"""What a read task does: open the dataset (once per worker process), find the episodes it was
given, and turn their rows into batches of numpy columns.

Column names follow the step tables of the exports (`trajcore.formats._columns`): ``episode``,
``env_index``, ``step``, then one column per leaf, named by group and path (``obs/pos``,
``next_obs/pos``, ``action``, ``reward``, ``info/episode/r``, ``data/logp``), arrays kept whole
(a row of ``obs`` is the whole observation). A leaf that may be missing at a row (infos, custom
data) has a bool column beside it, ``mask/<name>``, True where the value was given; where it is
False the value reads as zeros (or ``""``).
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from trajcore._store import configure
from trajcore.formats._columns import INDEX_COLUMNS, Leaf, Plan
from trajcore.formats._read import iter_batches, open_for_pass, plan_of, read_episode
from trajcore.formats.summaries import METRIC_STATS, SUMMARY_FIELDS, metric_column, summary_columns
from trajcore.ray._plan import Keys, TaskPlan, key_arrays, locate
from trajcore.read.dataset import Dataset
from trajcore.read.records.provenance_keys import RESET_KEY

__all__ = [
    "EPISODE_FIELDS",
    "EPISODE_LEFT_OUT",
    "MASK_PREFIX",
    "Kind",
    "ReadSpec",
    "column_names",
    "episode_columns",
    "read_batches",
    "transition_columns",
]

Kind = Literal["transitions", "episodes"]

MASK_PREFIX = "mask/"
"""``mask/info/lives``: where ``info/lives`` was given. No leaf name starts with it."""

EPISODE_FIELDS = ("continued", "continues", "metadata")
"""Per-episode columns of `read_episodes` besides the summaries: whether the rows are a part of
an episode (`Episode.continued`, `Episode.continues`) and its metadata as JSON text."""

EPISODE_LEFT_OUT = ("next_obs", "terminated", "truncated")
"""Step-table groups `read_episodes` has no column for: an episode's ``obs`` holds every
observation, and its per-step flags are False but at its last step, where they are the summary's
``terminated`` and ``truncated``."""

Columns = dict[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class ReadSpec:
    """What every task of one read shares.

    Attributes:
        path: the dataset (a directory of shards, or one shard file).
        strict: open it with ``strict=True``.
        token: names the files the read was planned over (`datasource.files_token`): the tasks
            of reads of the same files share an opened dataset in a worker process.
        kind: "transitions" (a row per step) or "episodes" (a row per episode).
        leaves: the leaves read, in table order (the same for every task: one schema).
        block_steps: steps per block (about the block size Ray Data aims at).
        metrics: episodes: the metric names planned (columns ``metrics/<name>/<stat>``).
        cache_bytes: the chunk cache a task's worker opens the dataset with (`pass_cache_bytes`
            of the dataset as planned; 0: `open_for_pass` works it out).
        recordings: the recordings of the episodes read, when not all (one agent's).
        storage_options: for a URL, its store's options (the worker's process is configured
            with them before it opens the dataset).
    """

    path: str
    strict: bool
    token: str
    kind: Kind
    leaves: tuple[Leaf, ...]
    block_steps: int
    metrics: tuple[str, ...] = ()
    cache_bytes: int = 0
    recordings: tuple[int, ...] | None = None  # the read's episodes' (None: all), whose columns count
    storage_options: tuple[tuple[str, str], ...] = ()


def mask_name(leaf: Leaf) -> str:
    return MASK_PREFIX + leaf.name


def column_names(
    kind: Kind, leaves: Sequence[Leaf], metric_names: Sequence[str] = (), agents: bool = False
) -> list[str]:
    """The columns a read gives, in order (the metric columns only for episodes; ``agent``
    after the index columns for a multi-agent dataset)."""
    names: list[str] = list(INDEX_COLUMNS) if kind == "transitions" else []
    if kind == "episodes":
        names += ["episode", *SUMMARY_FIELDS]
    if agents:
        names.append("agent")
    if kind == "episodes":
        names += [metric_column(m, stat) for m in metric_names for stat in METRIC_STATS]
        names += EPISODE_FIELDS
    for leaf in leaves:
        names.append(leaf.name)
        if leaf.mask is not None:
            names.append(mask_name(leaf))
    return names


class _Opened:
    """A dataset opened for one read in a worker process, with what its tasks look up: the
    step-table plan and, per shard, the episodes listed there."""

    def __init__(self, spec: ReadSpec) -> None:
        configure(spec.path, dict(spec.storage_options))
        # Its tasks read in dataset order: a cache that holds the chunks such a read has in use.
        if spec.cache_bytes:
            self.ds = Dataset(spec.path, strict=spec.strict, cache_bytes=spec.cache_bytes)
        else:
            self.ds = open_for_pass(spec.path, strict=spec.strict)
        self.plan = plan_of(self.ds, among=spec.recordings)  # which columns each recording has, as opened here
        self._shard_names = [os.path.basename(p) for p in self.ds.shards]
        self._listed: dict[str, Keys] = {}

    def locate(self, task: TaskPlan) -> list[int]:
        listed = self._listed.get(task.shard)
        if listed is None:
            summary = self.ds._reads.summary()
            at = self._shard_names.index(task.shard) if task.shard in self._shard_names else -1
            among = np.flatnonzero(summary["shard"] == at)  # none if the shard is gone (at -1)
            listed = self._listed[task.shard] = key_arrays(self._shard_names, summary, among)
        return locate(task, listed, self.ds.path)


_OPENED: OrderedDict[tuple[str, bool, str, int], _Opened] = OrderedDict()
_OPENED_LOCK = threading.Lock()
_KEEP_OPENED = 2  # datasets a worker process keeps open between tasks


def _opened(spec: ReadSpec) -> _Opened:
    """The dataset of this read, opened once per worker process: opening reads every shard's
    index, and locating a task's episodes lists its shard's, so the tasks that run in one worker
    share both, those of later reads of the same files too (see `ReadSpec.token`)."""
    key = (spec.path, spec.strict, spec.token, spec.cache_bytes)
    with _OPENED_LOCK:
        opened = _OPENED.get(key)
        if opened is None:
            opened = _OPENED[key] = _Opened(spec)
            while len(_OPENED) > _KEEP_OPENED:
                _OPENED.popitem(last=False)[1].ds.close()
        _OPENED.move_to_end(key)
        return opened


def read_batches(spec: ReadSpec, task: TaskPlan) -> Iterator[Columns]:
    """The task's rows as numpy batches of about `spec.block_steps` steps each.

    Raises:
        TrajcoreIOError: the dataset changed since the read was planned (see `locate`).
        CorruptFileError: an episode's data is damaged.
    """
    opened = _opened(spec)
    ds, plan = opened.ds, opened.plan
    current = opened.locate(task)
    planned: list[int] = task.episodes.index.tolist()
    if spec.kind == "transitions":
        renumber = None if current == planned else dict(zip(current, planned, strict=True))
        for batch in iter_batches(ds, current, plan, spec.leaves, spec.block_steps):
            episode = batch.episode
            if renumber is not None:
                episode = np.fromiter((renumber[int(e)] for e in episode), dtype=np.int64, count=len(episode))
            yield transition_columns(
                episode, batch.env_index, batch.step, spec.leaves, batch.values, batch.masks, batch.agent
            )
        return
    start, lengths = 0, task.episodes.length.tolist()
    while start < len(current):
        stop, steps = start, 0
        while stop < len(current) and (stop == start or steps + lengths[stop] <= spec.block_steps):
            steps += lengths[stop]
            stop += 1
        yield episode_columns(ds, current[start:stop], planned[start:stop], spec, plan)
        start = stop


def _values(values: Any) -> npt.NDArray[Any]:
    """A leaf's rows as one numpy array (str values as an object array of str)."""
    return np.array(values, dtype=object) if isinstance(values, list) else np.asarray(values)


def transition_columns(
    episode: npt.NDArray[np.int64],
    env_index: npt.NDArray[np.int64],
    step: npt.NDArray[np.int64],
    leaves: Sequence[Leaf],
    values: dict[str, Any],
    masks: dict[str, npt.NDArray[np.bool_]],
    agent: npt.NDArray[Any] | None = None,
) -> Columns:
    """A step-table batch as named numpy columns (see the module docstring); `agent`: each
    row's agent, for a multi-agent dataset."""
    out: Columns = {"episode": episode, "env_index": env_index, "step": step}
    if agent is not None:
        out["agent"] = agent
    for leaf in leaves:
        out[leaf.name] = _values(values[leaf.name])
        if leaf.mask is not None:
            out[mask_name(leaf)] = masks[leaf.name]
    return out


def _per_episode(rows: list[Any]) -> npt.NDArray[Any]:
    """One cell per episode: an object array whose items are the episodes' arrays."""
    out = np.empty(len(rows), dtype=object)
    for i, r in enumerate(rows):
        out[i] = _values(r)
    return out


def _metadata_json(ds: Dataset, index: int) -> str:
    """The episode's metadata as `Episode.metadata` has it (the reset's provenance is in
    `Episode.provenance`), as JSON text: the stored text itself when it holds no such key."""
    text = ds._core.episode_metadata_json(index)
    if RESET_KEY not in text:
        return text
    return json.dumps(ds._reads.episode_metadata(index))


def episode_columns(ds: Dataset, current: Sequence[int], planned: Sequence[int], spec: ReadSpec, plan: Plan) -> Columns:
    """Episodes as rows: their summaries, metrics, part flags and metadata, then per leaf the
    episode's whole column (T + 1 rows for observations and infos, T for the steps)."""
    summaries = summary_columns(ds, current)
    out: Columns = {"episode": np.asarray(planned, dtype=np.int64)}
    out.update((name, summaries[name]) for name in SUMMARY_FIELDS)
    if "agent" in summaries:
        out["agent"] = summaries["agent"]
    for name in spec.metrics:
        for stat in METRIC_STATS:
            column = metric_column(name, stat)
            # A metric no episode here has (a recording added since the read was planned has
            # more): count 0 and NaN, as `Dataset.metrics` gives it for an episode without it.
            absent = np.zeros(len(current), np.int64) if stat == "count" else np.full(len(current), np.nan)
            out[column] = summaries.get(column, absent)
    summary = ds._reads.summary()
    out["continued"] = summary["continued"][list(current)]
    out["continues"] = summary["continues"][list(current)]
    out["metadata"] = np.array([_metadata_json(ds, i) for i in current], dtype=object)
    rows = [read_episode(ds, i, plan, spec.leaves, whole=True) for i in current]
    for leaf in spec.leaves:
        out[leaf.name] = _per_episode([r.values[leaf.name] for r in rows])
        if leaf.mask is not None:
            out[mask_name(leaf)] = _per_episode([r.masks[leaf.name] for r in rows])
    return out
