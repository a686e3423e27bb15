"""Where each env step of a multi-agent dataset's env episodes is, for each agent: the plan that
`EnvEpisodes` groups and samples by, made once per dataset (and selection) and kept until
`Dataset.refresh` or `close` (`DatasetReads.joint_plans`).

The plan lays the env episodes end to end on one axis of "joint rows" (env episode k holds rows
``starts[k] .. starts[k] + lengths[k]``); for each agent, the step it took at each joint row
(-1 where it did not act), numbered as the selection of its episodes numbers steps (agents'
spaces may differ, so each is read through its own selection). Drawing a joint transition is
then drawing a joint row, and reading it one gather per agent: no env episode is rebuilt.

`plan_joint` takes plain values (no dataset, no file), so a table test covers it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import InvalidArgumentError
from trajcore.read.multiagent.agents import ENV_EPISODE_KEY, ENV_STEP, agent_names

if TYPE_CHECKING:
    from trajcore.read.reads import DatasetReads

__all__ = ["JointPlan", "joint_plan", "plan_joint"]

Ints = npt.NDArray[np.int64]


@dataclass(eq=False)
class JointPlan:
    """The env episodes of a set of episodes, and where every agent acted in them.

    Attributes:
        ids: each env episode's id (`Episode.env_episode`), in the order its first episode comes.
        members: for each env episode, agent -> its episode's index in the dataset.
        agents: every agent, in the order it first appears.
        starts, lengths: each env episode's first joint row and its env steps (the last env step
            some agent acted at, + 1).
        episodes: agent -> its episodes, ascending (the selection `steps` numbers steps in).
        steps: agent -> the step it took at each joint row, as a step number of the selection of
            its `episodes` (-1: it did not act there).
        numbers: agent -> the same steps as the dataset numbers them (-1: it did not act).
        step_table, number_table: `steps` and `numbers` as one array each, a row per agent in
            the order of `agents` (the dicts' values are views of their rows): a batch's rows are
            picked for every agent at once. In int32 where the numbers fit: a batch picks rows
            at random, and half the bytes is half the cache lines.
    """

    ids: list[Any]
    members: list[dict[str, int]]
    agents: list[str]
    starts: Ints
    lengths: Ints
    episodes: dict[str, Ints]
    steps: dict[str, npt.NDArray[np.signedinteger[Any]]]
    numbers: dict[str, npt.NDArray[np.signedinteger[Any]]]
    step_table: npt.NDArray[np.signedinteger[Any]]
    number_table: npt.NDArray[np.signedinteger[Any]]
    # How the rows are read (`EnvEpisodes.sample_transitions`), settled at the first read:
    together: bool | None = None
    """Every agent's rows in one gather over the dataset (their columns agree), or one each."""
    selections: dict[str, Any] = field(default_factory=dict)
    """agent -> the core's selection of its `episodes` (when not `together`)."""

    @functools.cached_property
    def env_episode_of_row(self) -> npt.NDArray[np.signedinteger[Any]]:
        """The env episode of each joint row (a lookup where a search of `starts` would take
        a few cache misses per row drawn)."""
        return _narrow(np.repeat(np.arange(len(self.lengths), dtype=np.int64), self.lengths))

    @property
    def num_rows(self) -> int:
        return int(self.lengths.sum())


def plan_joint(
    members: Sequence[dict[str, int]], ids: list[Any], env_steps: dict[int, Ints], dataset_firsts: Ints
) -> JointPlan:
    """The plan of env episodes given by their agents' episodes.

    Args:
        members: for each env episode, agent -> episode index.
        ids: each env episode's id.
        env_steps: episode index -> the env step of each of its steps (``data/env_step``).
        dataset_firsts: each dataset episode's first step number in the dataset.

    Raises:
        InvalidArgumentError: an episode's env steps are missing, or two of its steps share one
            env step (a joint row holds one step per agent).
    """
    agents = list(dict.fromkeys(a for m in members for a in m))
    lengths = np.zeros(len(members), dtype=np.int64)
    for k, m in enumerate(members):
        for index in m.values():
            listed = env_steps[index]
            if len(listed):
                lengths[k] = max(lengths[k], int(listed.max()) + 1)
    starts = np.cumsum(lengths) - lengths
    total = int(lengths.sum())
    episodes = {a: np.array(sorted(m[a] for m in members if a in m), dtype=np.int64) for a in agents}
    first_step: dict[int, int] = {}  # episode -> its first step's number in its agent's selection
    for own in episodes.values():
        counts = np.array([len(env_steps[int(e)]) for e in own], dtype=np.int64)
        first_step.update(zip(own.tolist(), (np.cumsum(counts) - counts).tolist(), strict=True))
    step_table = np.full((len(agents), total), -1, dtype=np.int64)
    number_table = np.full((len(agents), total), -1, dtype=np.int64)
    steps = dict(zip(agents, step_table, strict=True))
    numbers = dict(zip(agents, number_table, strict=True))
    for k, m in enumerate(members):
        for agent, index in m.items():
            at = starts[k] + env_steps[index]
            if len(np.unique(at)) != len(at):
                raise InvalidArgumentError(
                    f"episode {index} ({agent}) lists one env step twice in data/{ENV_STEP}: its steps cannot be "
                    "aligned on the env's"
                )
            rows = np.arange(len(at), dtype=np.int64)
            steps[agent][at] = first_step[index] + rows
            numbers[agent][at] = dataset_firsts[index] + rows
    step_table, number_table = _narrow(step_table), _narrow(number_table)
    steps = dict(zip(agents, step_table, strict=True))
    numbers = dict(zip(agents, number_table, strict=True))
    return JointPlan(ids, list(members), agents, starts, lengths, episodes, steps, numbers, step_table, number_table)


def _narrow(values: Ints) -> npt.NDArray[np.signedinteger[Any]]:
    """`values` as int32 where they fit."""
    fits = not values.size or int(values.max()) < np.iinfo(np.int32).max
    return values.astype(np.int32) if fits else values


def group_env_episodes(episodes: Iterable[tuple[int, str | None, Any]]) -> tuple[list[Any], list[dict[str, int]]]:
    """The env episodes of `episodes` ((index, agent, env episode id), in dataset order): each id
    once, in the order its first episode comes, with its agents' episodes. An episode of no agent
    or of no env episode is in none."""
    groups: dict[Any, dict[str, int]] = {}
    ids: dict[Any, Any] = {}
    for index, agent, key in episodes:
        if agent is None or key is None:
            continue
        hashable = key if not isinstance(key, list | dict) else repr(key)
        ids.setdefault(hashable, key)
        groups.setdefault(hashable, {})[agent] = int(index)
    return list(ids.values()), list(groups.values())


def joint_plan(reads: DatasetReads, indices: Sequence[int]) -> JointPlan:
    """The plan of the env episodes among `indices` (dataset order), from the dataset's cache
    (`DatasetReads.joint_plans`) or made now: each episode's metadata and env steps are read once
    per dataset."""
    # Every episode (a range) is the common case: keyed without hashing an array of them.
    key = (indices.start, indices.stop, indices.step) if isinstance(indices, range) else np.asarray(indices).tobytes()
    cached = reads.joint_plans.get(key)
    if cached is not None:
        return cached
    names = agent_names(reads)
    rows = [] if names is None else [(int(i), names[i], _env_episode_id(reads, int(i))) for i in indices]
    ids, members = group_env_episodes(row for row in rows if row[1] is not None)
    lengths = reads.summary()["length"].astype(np.int64)
    env_steps = _env_steps(reads, [i for m in members for i in m.values()])
    plan = plan_joint(members, ids, env_steps, np.cumsum(lengths) - lengths)
    reads.joint_plans[key] = plan
    return plan


def _env_episode_id(reads: DatasetReads, index: int) -> Any:
    text = reads.core.episode_metadata_json(index)
    value = json.loads(text) if text else {}
    return value.get(ENV_EPISODE_KEY) if isinstance(value, dict) else None


def _env_steps(reads: DatasetReads, episodes: list[int]) -> dict[int, Ints]:
    """Each episode's ``data/env_step``, read for all of them in bulk (a run per episode)."""
    if not episodes:
        return {}
    order = np.sort(np.asarray(episodes, dtype=np.int64))
    summary = reads.summary()
    lengths = summary["length"][order].astype(np.int64)
    column = f"data/{ENV_STEP}"
    recordings = summary["recording"][order]
    for recording in np.unique(recordings).tolist():
        if column not in reads.recording(int(recording)).column_names:
            index = int(order[np.argmax(recordings == recording)])
            raise InvalidArgumentError(
                f"episode {index} has no {column} column: it was not written by a multi-agent recorder, so its "
                "steps cannot be aligned with the other agents'"
            )
    starts = np.repeat(order, lengths)
    steps = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    values = reads.every.gather((starts, steps), keys=[column])[column]
    split = np.split(np.asarray(values, dtype=np.int64), np.cumsum(lengths)[:-1])
    return dict(zip(order.tolist(), split, strict=True))
