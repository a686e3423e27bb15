"""The joint view of a multi-agent dataset (`Dataset.env_episodes`): the agents of one env episode
aligned on the env's steps, for centralised methods (a critic over every agent's observation, a
mixer over their rewards).

Each agent's episode says at which env step (Parallel) or turn (AEC) it took each action
(``ep.data["env_step"]``, FORMAT.md "Agents"); `EnvEpisode` puts every agent's values at those
rows, with a mask per agent of the rows where it acted, and `order` says who acted at each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from trajcore.errors import InvalidArgumentError, SchemaError, TrajcoreIndexError
from trajcore.read.episode import Episode
from trajcore.read.multiagent.agents import ENV_STEP
from trajcore.read.multiagent.joint_plan import JointPlan, joint_plan
from trajcore.read.reads import EpisodeSource

__all__ = ["EnvEpisode", "EnvEpisodes"]


class EnvEpisode:
    """The episodes of every agent of one env episode, aligned on its `length` env steps (or AEC
    turns): for each agent, row k holds what it did at env step k, where ``acted[agent][k]``."""

    def __init__(self, env_episode: Any, episodes: dict[str, Episode]) -> None:
        self.id = env_episode
        """The id the agents' episodes share (`Episode.env_episode`)."""
        self.episodes = episodes
        """agent -> its `Episode` (whole, as recorded)."""
        self._steps: dict[str, npt.NDArray[np.int64]] = {}
        for agent, ep in episodes.items():
            steps = ep.data.get(ENV_STEP)
            if steps is None:
                raise InvalidArgumentError(
                    f"episode {ep.index} ({agent}) has no data/env_step column: it was not written by a multi-agent "
                    "recorder, so its steps cannot be aligned with the other agents'"
                )
            self._steps[agent] = np.asarray(steps, dtype=np.int64)
        last = [int(s.max()) for s in self._steps.values() if len(s)]
        self.length = max(last) + 1 if last else 0
        """Env steps (AEC: turns) of the env episode that some agent's action was taken at, + 1."""

    @property
    def agents(self) -> list[str]:
        return list(self.episodes)

    @property
    def acted(self) -> dict[str, npt.NDArray[np.bool_]]:
        """agent -> `length` bools: True at the env steps where it acted."""
        out = {}
        for agent, steps in self._steps.items():
            mask = np.zeros(self.length, dtype=np.bool_)
            mask[steps] = True
            out[agent] = mask
        return out

    @property
    def order(self) -> list[list[str]]:
        """For each env step, the agents that acted at it (AEC: one each, the turn order)."""
        out: list[list[str]] = [[] for _ in range(self.length)]
        for agent, steps in self._steps.items():
            for k in steps.tolist():
                out[k].append(agent)
        return out

    def _aligned(self, values: dict[str, Any]) -> dict[str, Any]:
        return {agent: _scatter(v, self._steps[agent], self.length) for agent, v in values.items()}

    @property
    def observations(self) -> dict[str, Any]:
        """agent -> the observation it acted on at each env step (zeros where it did not act)."""
        return self._aligned({a: _rows(ep.observations, slice(0, ep.length)) for a, ep in self.episodes.items()})

    @property
    def next_observations(self) -> dict[str, Any]:
        """agent -> the observation that followed its action at each env step."""
        return self._aligned({a: _rows(ep.observations, slice(1, ep.length + 1)) for a, ep in self.episodes.items()})

    @property
    def actions(self) -> dict[str, Any]:
        return self._aligned({a: ep.actions for a, ep in self.episodes.items()})

    @property
    def rewards(self) -> dict[str, npt.NDArray[np.float64]]:
        """agent -> the reward that followed its action at each env step (0 where it did not act)."""
        return self._aligned({a: ep.rewards for a, ep in self.episodes.items()})

    @property
    def terminations(self) -> dict[str, npt.NDArray[np.bool_]]:
        return self._aligned({a: ep.terminations for a, ep in self.episodes.items()})

    @property
    def truncations(self) -> dict[str, npt.NDArray[np.bool_]]:
        return self._aligned({a: ep.truncations for a, ep in self.episodes.items()})

    def transitions(self) -> dict[str, Any]:
        """The joint transitions of the env episode: every aligned field above, with ``acted``,
        keyed like a batch (``observations``, ``actions``, ...: each agent -> `length` rows)."""
        return {
            "observations": self.observations,
            "actions": self.actions,
            "rewards": self.rewards,
            "next_observations": self.next_observations,
            "terminations": self.terminations,
            "truncations": self.truncations,
            "acted": self.acted,
        }

    def __repr__(self) -> str:
        return f"<trajcore.EnvEpisode {self.id!r}: {len(self.episodes)} agents, {self.length} env steps>"


def _rows(tree: Any, rows: slice) -> Any:
    if isinstance(tree, dict):
        return {k: _rows(v, rows) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_rows(v, rows) for v in tree)
    return tree[rows]


def _scatter(tree: Any, at: npt.NDArray[np.int64], length: int) -> Any:
    """`tree`'s rows put at rows `at` of `length` (zeros, or "" for str, elsewhere)."""
    if isinstance(tree, dict):
        return {k: _scatter(v, at, length) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_scatter(v, at, length) for v in tree)
    if isinstance(tree, list):
        out_list = [""] * length
        for k, value in zip(at.tolist(), tree, strict=True):
            out_list[k] = value
        return out_list
    a = np.asarray(tree)
    out = np.zeros((length, *a.shape[1:]), dtype=a.dtype)
    out[at] = a
    return out


class EnvEpisodes(Sequence[EnvEpisode]):
    """The env episodes of a multi-agent dataset (or of a selection of its episodes), in the order
    their first episode comes; each an `EnvEpisode`. Which episodes make each env episode, and
    where each agent acted in it, is planned once per dataset (`trajcore.read.multiagent.joint_plan`: each
    episode's metadata and env steps read once, again after `Dataset.refresh`)."""

    def __init__(self, dataset: EpisodeSource, indices: Sequence[int]) -> None:
        self._dataset = dataset
        self._plan = joint_plan(dataset._reads, indices)

    def __len__(self) -> int:
        return len(self._plan.ids)

    def _env_episode(self, k: int) -> EnvEpisode:
        members = self._plan.members[k]
        return EnvEpisode(self._plan.ids[k], {a: Episode(self._dataset, i) for a, i in members.items()})

    @overload
    def __getitem__(self, k: int) -> EnvEpisode: ...
    @overload
    def __getitem__(self, k: slice) -> list[EnvEpisode]: ...
    def __getitem__(self, k: int | slice) -> EnvEpisode | list[EnvEpisode]:
        if isinstance(k, slice):
            return [self._env_episode(i) for i in range(len(self))[k]]
        if not -len(self) <= k < len(self):
            raise TrajcoreIndexError(f"env episode {k} out of range ({len(self)} env episodes)")
        return self._env_episode(k % len(self))

    def __iter__(self) -> Iterator[EnvEpisode]:
        for k in range(len(self)):
            yield self._env_episode(k)

    def sample_transitions(self, n: int, seed: int | None = None) -> dict[str, Any]:
        """`n` joint transitions drawn uniformly with replacement over every env step of these env
        episodes (the same `seed`, the same batch): each key of `EnvEpisode.transitions` with
        every agent's rows stacked ([n, ...], zeros where it did not act, see ``acted``), plus
        ``env_episode`` (indexes into these env episodes) and ``env_step``. Each agent's rows
        are one gather of the (episode, step) pairs it acted at.

        Raises:
            InvalidArgumentError: no env step to draw from.
        """
        plan = self._plan
        total = plan.num_rows
        if total == 0:
            raise InvalidArgumentError("sample_transitions: these env episodes hold no env step")
        drawn = np.random.default_rng(seed).integers(0, total, size=int(n))
        which = plan.env_episode_of_row[drawn].astype(np.int64)
        numbers = plan.number_table[:, drawn]  # a row per agent
        acted = numbers >= 0
        got = self._read(plan, numbers, acted, drawn)
        out: dict[str, Any] = {key: {} for key in _JOINT_KEYS}
        for k, agent in enumerate(plan.agents):
            for key in _JOINT_KEYS[:-1]:
                out[key][agent] = _spread(got[k][key], acted[k])
            out["acted"][agent] = acted[k]
        out["env_episode"] = which
        out["env_step"] = (drawn - plan.starts[which]).astype(np.int64)
        return out

    def _read(
        self, plan: JointPlan, numbers: npt.NDArray[np.signedinteger[Any]], acted: npt.NDArray[np.bool_], drawn: Ints
    ) -> list[dict[str, Any]]:
        """Each agent's transitions at the joint rows drawn where it acted (`numbers`: the
        dataset's step numbers, a row per agent): one gather for every agent where their
        columns agree, else one gather each (agents of different spaces)."""
        reads = self._dataset._reads
        if plan.together is not False:
            try:
                batch = reads.every.gather(numbers[acted].astype(np.int64))  # agent by agent, as plan.agents
            except SchemaError:
                plan.together = False
            else:
                plan.together = True
                bounds = np.cumsum([0, *acted.sum(axis=1).tolist()]).tolist()
                parts = [slice(bounds[k], bounds[k + 1]) for k in range(len(plan.agents))]
                return [{key: _rows(v, part) for key, v in batch.items()} for part in parts]
        out = []
        for k, agent in enumerate(plan.agents):
            steps = plan.step_table[k][drawn][acted[k]].astype(np.int64)
            if agent not in plan.selections:
                plan.selections[agent] = reads.core.selection(plan.episodes[agent])
            # An agent that acted at none of the rows drawn: one of its steps read for the shapes.
            wanted = steps if len(steps) else np.zeros(1, dtype=np.int64)
            one = plan.selections[agent].gather(wanted)
            out.append(one if len(steps) else {key: _rows(v, slice(0, 0)) for key, v in one.items()})
        return out

    def __repr__(self) -> str:
        return f"<trajcore.EnvEpisodes: {len(self)} env episodes>"


Ints = npt.NDArray[np.int64]
_JOINT_KEYS = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations", "acted")


def _spread(tree: Any, acted: npt.NDArray[np.bool_]) -> Any:
    """`tree`'s rows put at the rows where `acted` (zeros, or "" for str, elsewhere)."""
    if acted.all():  # an agent that acted at every row drawn: its rows as read
        return tree
    if isinstance(tree, dict):
        return {k: _spread(v, acted) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_spread(v, acted) for v in tree)
    if isinstance(tree, list):
        out_list = [""] * len(acted)
        for k, value in zip(np.flatnonzero(acted).tolist(), tree, strict=True):
            out_list[k] = value
        return out_list
    a = np.asarray(tree)
    out = np.zeros((len(acted), *a.shape[1:]), dtype=a.dtype)
    out[acted] = a
    return out
