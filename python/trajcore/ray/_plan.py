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

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajcore.errors import TrajcoreIOError

__all__ = ["EpisodeKey", "ShardIndex", "TaskPlan", "episode_keys", "locate", "plan_tasks", "shard_index"]


@dataclass(frozen=True, slots=True)  # slots: a plan holds one per episode
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


@dataclass(frozen=True)
class TaskPlan:
    """What one read task reads: consecutive episodes listed at one shard."""

    shard: str
    episodes: tuple[EpisodeKey, ...]

    @property
    def steps(self) -> int:
        return sum(e.length for e in self.episodes)


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
    # Whole arrays, then Python ints once (`tolist`), not a numpy scalar per field and episode:
    # a dataset lists tens of thousands of episodes, and every read (and task) plans them.
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
    names = [shard_names[s] for s in shards.tolist()]
    columns = (index.tolist(), names, ids.tolist(), occurrence.tolist(), summaries["length"][index].tolist())
    return [EpisodeKey(*fields) for fields in zip(*columns, strict=True)]


def plan_tasks(episodes: Sequence[EpisodeKey], parallelism: int, max_steps: int) -> list[TaskPlan]:
    """Read tasks over `episodes`: at least one per shard, more where a shard holds more steps
    than a task should read.

    Args:
        episodes: the episodes to read, in the order the dataset lists them.
        parallelism: the number of tasks asked for (Ray's read parallelism; < 1: no wish).
        max_steps: the most steps a task reads (about its memory), unless one episode has more.

    Returns:
        Tasks in dataset order of their first episode; within a task, dataset order.
    """
    total = sum(e.length for e in episodes)
    per_task = max_steps if parallelism < 1 else math.ceil(total / parallelism)
    per_task = max(1, min(per_task, max_steps))
    by_shard: dict[str, list[EpisodeKey]] = {}
    for e in episodes:
        by_shard.setdefault(e.shard, []).append(e)
    tasks: list[TaskPlan] = []
    for shard, listed in by_shard.items():
        run: list[EpisodeKey] = []
        steps = 0
        for e in listed:
            if run and steps + e.length > per_task:
                tasks.append(TaskPlan(shard, tuple(run)))
                run, steps = [], 0
            run.append(e)
            steps += e.length
        tasks.append(TaskPlan(shard, tuple(run)))
    tasks.sort(key=lambda t: t.episodes[0].index)
    return tasks


ShardIndex = dict[tuple[int, int], EpisodeKey]
"""The episodes listed at one shard by (episode id, occurrence)."""


def shard_index(keys: Iterable[EpisodeKey]) -> ShardIndex:
    """`keys` (those of one shard) by (episode id, occurrence), for `locate`."""
    return {(k.episode_id, k.occurrence): k for k in keys}


def locate(task: TaskPlan, listed: ShardIndex, path: str) -> list[int]:
    """The dataset indexes the planned episodes have in the dataset as opened now.

    Args:
        task: the planned episodes.
        listed: the episodes the dataset lists now at the task's shard (`shard_index`).
        path: the dataset, for the message.

    Raises:
        TrajcoreIOError: a planned episode is gone or changed (its recording went on past a
            rollover, so it is now listed whole elsewhere; or its shard was deleted).
    """
    out = []
    for planned in task.episodes:
        current = listed.get((planned.episode_id, planned.occurrence))
        if current is None or current.length != planned.length:
            what = "is no longer listed" if current is None else f"now has {current.length} steps"
            raise TrajcoreIOError(
                f"{path}: episode {planned.index} (id {planned.episode_id} in shard {planned.shard}, "
                f"{planned.length} steps when the read was planned) {what}: the dataset changed since "
                "(a recorder still writing to it, or shards deleted); read it again"
            )
        out.append(current.index)
    return out
