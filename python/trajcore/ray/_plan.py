"""Which read task reads which episodes: plain values in, plain values out (no Ray, no files).

An episode that ran over a shard rollover is stored in parts, one per shard; a reader that has
every shard merges them and lists the episode once, at the shard of its last part. So every read
task opens the whole directory (which reads only the shards' indexes) and reads the episodes
listed at its shard: each episode is read whole, by exactly one task, and a task never sees a
part of an episode that another task also reads. A shard with many steps is split into several
tasks, each a run of consecutive episodes; an episode is never split.

Episodes are named by keys that do not depend on the order a reader lists them in (the shard's
file name, the episode's id in its recording and, should a shard list one id twice, which of
them), so a task that reopens the directory finds the episodes it was given even if recordings
still running added episodes since.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import TrajcoreIOError

__all__ = [
    "EpisodeKey",
    "Keys",
    "ShardIndex",
    "TaskPlan",
    "episode_keys",
    "key_arrays",
    "locate",
    "plan_tasks",
    "shard_index",
]


@dataclass(frozen=True, slots=True)
class EpisodeKey:
    """One planned episode.

    Attributes:
        index: its index in the dataset as planned (the ``episode`` column).
        shard: file name of the shard holding its last part.
        episode_id: its id in its recording.
        occurrence: how many listed episodes of that shard and id came before it (0 but for a
            recording that lists one id twice).
        length: its steps.
    """

    index: int
    shard: str
    episode_id: int
    occurrence: int
    length: int


Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Keys:
    """Episode keys as columns (the fields of `EpisodeKey`, one array each, `shard` as codes into
    `names`): a plan holds tens of thousands of episodes, which as objects take most of a read's
    planning and of its tasks' pickling."""

    names: tuple[str, ...]
    index: Ints
    shard: Ints
    episode_id: Ints
    occurrence: Ints
    length: Ints

    @classmethod
    def of(cls, keys: Iterable[EpisodeKey]) -> Keys:
        listed = list(keys)
        names = tuple(dict.fromkeys(k.shard for k in listed))
        code = {n: i for i, n in enumerate(names)}

        def column(values: Iterable[int]) -> Ints:
            return np.fromiter(values, dtype=np.int64, count=len(listed))

        return cls(
            names,
            column(k.index for k in listed),
            column(code[k.shard] for k in listed),
            column(k.episode_id for k in listed),
            column(k.occurrence for k in listed),
            column(k.length for k in listed),
        )

    def __len__(self) -> int:
        return len(self.index)

    def __reduce__(self) -> tuple[Any, ...]:
        # A read task carries its keys to a worker: each column in its smallest integer type,
        # the indexes as steps from the first (1 but after a selection's gaps), a few bytes an
        # episode (Ray warns about, and moves slowly, a task of more than 1 MiB).
        steps = np.diff(self.index, prepend=0)
        columns = (steps, self.shard, self.episode_id, self.occurrence, self.length)
        return _unpack, (self.names, *(_small(c) for c in columns))

    def __getitem__(self, at: int) -> EpisodeKey:
        return EpisodeKey(
            int(self.index[at]),
            self.names[self.shard[at]],
            int(self.episode_id[at]),
            int(self.occurrence[at]),
            int(self.length[at]),
        )

    def __iter__(self) -> Iterator[EpisodeKey]:
        return (self[i] for i in range(len(self)))

    def take(self, rows: Any) -> Keys:
        """The keys at `rows` (positions, or a bool mask)."""
        return Keys(
            self.names, *(getattr(self, f)[rows] for f in ("index", "shard", "episode_id", "occurrence", "length"))
        )

    @functools.cached_property
    def _by_id(self) -> tuple[Ints, Ints, Ints]:
        """Positions sorted by (episode id, occurrence), with those ids and occurrences."""
        order = np.lexsort((self.occurrence, self.episode_id))
        return order, self.episode_id[order], self.occurrence[order]

    def find(self, episode_id: Ints, occurrence: Ints) -> Ints:
        """The position of each (episode id, occurrence), -1 where none is: the occurrences of
        an id are 0, 1, 2... (`key_arrays`), so the k-th is k after the first."""
        order, ids, occurrences = self._by_id
        if not len(order):
            return np.full(len(episode_id), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(ids, episode_id) + occurrence, len(order) - 1)
        found = (ids[at] == episode_id) & (occurrences[at] == occurrence)
        return np.where(found, order[at], -1)


def _small(column: Ints) -> npt.NDArray[Any]:
    low, high = (int(column.min()), int(column.max())) if len(column) else (0, 0)
    return column.astype(np.result_type(np.min_scalar_type(low), np.min_scalar_type(high)))


def _unpack(names: tuple[str, ...], steps: Any, *columns: Any) -> Keys:
    wide = (np.asarray(c, dtype=np.int64) for c in columns)
    return Keys(names, np.cumsum(steps, dtype=np.int64), *wide)


@dataclass(frozen=True)
class TaskPlan:
    """What one read task reads: consecutive episodes listed at one shard (`EpisodeKey`s or
    their `Keys`)."""

    shard: str
    episodes: Keys

    def __post_init__(self) -> None:
        given: Keys | Iterable[EpisodeKey] = self.episodes
        if not isinstance(given, Keys):
            object.__setattr__(self, "episodes", Keys.of(given))

    @property
    def steps(self) -> int:
        return int(self.episodes.length.sum())


def key_arrays(shard_names: Sequence[str], summaries: Mapping[str, Any], among: Iterable[int] | None = None) -> Keys:
    """The keys of the dataset's episodes, in dataset order, as columns (see `episode_keys`)."""
    index = np.arange(len(summaries["length"])) if among is None else np.asarray(among, dtype=np.int64).reshape(-1)
    shards, ids = summaries["shard"][index], summaries["episode_id"][index]
    # Occurrence: how many of the listed episodes before it have its shard and id (a stable
    # sort groups them, in list order).
    order = np.lexsort((np.arange(len(index)), ids, shards))
    same = np.zeros(len(index), dtype=bool)
    same[1:] = (shards[order][1:] == shards[order][:-1]) & (ids[order][1:] == ids[order][:-1])
    starts = np.flatnonzero(~same)
    run_start = starts[np.cumsum(~same) - 1] if len(index) else starts
    occurrence = np.empty(len(index), dtype=np.int64)
    occurrence[order] = np.arange(len(index)) - run_start
    return Keys(
        tuple(shard_names),
        index.astype(np.int64),
        shards.astype(np.int64),
        ids.astype(np.int64),
        occurrence,
        summaries["length"][index].astype(np.int64),
    )


def episode_keys(
    shard_names: Sequence[str], summaries: Mapping[str, Any], among: Iterable[int] | None = None
) -> list[EpisodeKey]:
    """The keys of the dataset's episodes, in dataset order.

    Args:
        shard_names: file name of each shard, as the summaries' ``shard`` field indexes them.
        summaries: the dataset's ``shard``, ``episode_id`` and ``length`` arrays.
        among: only these dataset indexes (ascending), which must hold every episode listed at
            their shards (occurrences are counted among them); default all.
    """
    return list(key_arrays(shard_names, summaries, among))


def plan_tasks(episodes: Sequence[EpisodeKey] | Keys, parallelism: int, max_steps: int) -> list[TaskPlan]:
    """Read tasks over `episodes`: at least one per shard, more where a shard holds more steps
    than a task should read, the steps of a shard shared evenly among its tasks.

    Args:
        episodes: the episodes to read, in the order the dataset lists them.
        parallelism: the number of tasks asked for (Ray's read parallelism; < 1: no wish).
        max_steps: about the most steps a task reads (its memory): a task may read up to about
            one episode more, as an episode is never split.

    Returns:
        Tasks in dataset order of their first episode; within a task, dataset order.
    """
    keys = episodes if isinstance(episodes, Keys) else Keys.of(episodes)
    if not len(keys):
        return []
    total = int(keys.length.sum())
    per_task = max_steps if parallelism < 1 else math.ceil(total / parallelism)
    per_task = max(1, min(per_task, max_steps))
    # Positions by shard (a stable sort keeps each shard's list order). A shard of S steps gets
    # k = ceil(S / per_task) tasks, and an episode goes to the task its middle step falls in
    # (S / k steps each): tasks of even size, never one of a few steps left over.
    order = np.argsort(keys.shard, kind="stable")
    shard, length = keys.shard[order], keys.length[order].astype(np.float64)
    first = np.ones(len(order), dtype=bool)
    first[1:] = shard[1:] != shard[:-1]
    run = np.cumsum(first) - 1  # each position's shard run
    ends = np.cumsum(length)
    base = (ends - length)[first][run]  # steps of the shards before
    steps = np.add.reduceat(length, np.flatnonzero(first))[run]
    tasks_of = np.maximum(1, np.ceil(steps / per_task))
    share = np.where(steps > 0, steps / tasks_of, 1.0)
    middle = ends - length / 2 - base
    task_of = np.minimum(tasks_of - 1, np.floor(middle / share))
    cuts = np.flatnonzero(first | np.r_[False, task_of[1:] != task_of[:-1]])[1:]
    runs = np.split(order, cuts)
    tasks = [TaskPlan(keys.names[int(keys.shard[r[0]])], keys.take(r)) for r in runs]
    tasks.sort(key=lambda t: int(t.episodes.index[0]))
    return tasks


ShardIndex = dict[tuple[int, int], EpisodeKey]
"""The episodes listed at one shard by (episode id, occurrence)."""


def shard_index(keys: Iterable[EpisodeKey]) -> ShardIndex:
    """`keys` (those of one shard) by (episode id, occurrence), for `locate`."""
    return {(k.episode_id, k.occurrence): k for k in keys}


def locate(task: TaskPlan, listed: ShardIndex | Keys, path: str) -> list[int]:
    """The dataset indexes the planned episodes have in the dataset as opened now.

    Args:
        task: the planned episodes.
        listed: the episodes the dataset lists now at the task's shard (`key_arrays` of them,
            or `shard_index`).
        path: the dataset, for the message.

    Raises:
        TrajcoreIOError: a planned episode is gone or changed (its recording went on past a
            rollover, so it is now listed whole elsewhere; or its shard was deleted).
    """
    current = listed if isinstance(listed, Keys) else Keys.of(listed.values())
    planned = task.episodes
    at = current.find(planned.episode_id, planned.occurrence)
    found = at >= 0
    now = (
        current.length[at]
        if found.all()
        else np.where(found, current.length[np.maximum(at, 0)] if len(current) else 0, -1)
    )
    bad = np.flatnonzero(now != planned.length)
    if len(bad):
        first = planned[int(bad[0])]
        what = f"now has {now[bad[0]]} steps" if found[bad[0]] else "is no longer listed"
        raise TrajcoreIOError(
            f"{path}: episode {first.index} (id {first.episode_id} in shard {first.shard}, "
            f"{first.length} steps when the read was planned) {what}: the dataset changed since "
            "(a recorder still writing to it, or shards deleted); read it again"
        )
    indexes: list[int] = current.index[at].tolist()
    return indexes
