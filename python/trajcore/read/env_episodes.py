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

from trajcore.errors import InvalidArgumentError, TrajcoreIndexError
from trajcore.read.agents import ENV_STEP, agent_names
from trajcore.read.episode import Episode
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
    their first episode comes; each an `EnvEpisode`."""

    def __init__(self, dataset: EpisodeSource, indices: Sequence[int]) -> None:
        names = agent_names(dataset._reads)
        groups: dict[Any, dict[str, Episode]] = {}
        for index in indices:
            agent = None if names is None else names[index]
            if agent is None:
                continue
            ep = Episode(dataset, int(index))
            key = ep.env_episode
            if key is None:
                continue
            groups.setdefault(key if not isinstance(key, list | dict) else repr(key), {})[agent] = ep
        self._groups = list(groups.items())

    def __len__(self) -> int:
        return len(self._groups)

    @overload
    def __getitem__(self, k: int) -> EnvEpisode: ...
    @overload
    def __getitem__(self, k: slice) -> list[EnvEpisode]: ...
    def __getitem__(self, k: int | slice) -> EnvEpisode | list[EnvEpisode]:
        if isinstance(k, slice):
            return [EnvEpisode(key, eps) for key, eps in self._groups[k]]
        try:
            key, eps = self._groups[k]
        except IndexError:
            raise TrajcoreIndexError(f"env episode {k} out of range ({len(self._groups)} env episodes)") from None
        return EnvEpisode(key, eps)

    def __iter__(self) -> Iterator[EnvEpisode]:
        for key, eps in self._groups:
            yield EnvEpisode(key, eps)

    def sample_transitions(self, n: int, seed: int | None = None) -> dict[str, Any]:
        """`n` joint transitions drawn uniformly with replacement over every env step of these env
        episodes (the same `seed`, the same batch): each key of `EnvEpisode.transitions` with
        every agent's rows stacked ([n, ...], zeros where it did not act, see ``acted``), plus
        ``env_episode`` (indexes into these env episodes) and ``env_step``.

        Raises:
            InvalidArgumentError: no env step to draw from.
        """
        lengths = np.array([EnvEpisode(key, eps).length for key, eps in self._groups], dtype=np.int64)
        ends = np.cumsum(lengths)
        if not len(ends) or ends[-1] == 0:
            raise InvalidArgumentError("sample_transitions: these env episodes hold no env step")
        drawn = np.random.default_rng(seed).integers(0, int(ends[-1]), size=int(n))
        which = np.searchsorted(ends, drawn, side="right")
        steps = drawn - (ends[which] - lengths[which])
        agents = list(dict.fromkeys(a for _, eps in self._groups for a in eps))
        rows: dict[int, dict[str, Any]] = {int(k): self[int(k)].transitions() for k in np.unique(which)}
        out: dict[str, Any] = {}
        for key in ("observations", "actions", "rewards", "next_observations", "terminations", "truncations", "acted"):
            out[key] = {}
            for agent in agents:
                # An agent absent from a drawn env episode reads as zeros there (not acted).
                template = next(t[key][agent] for t in rows.values() if agent in t[key])
                picked = [
                    _pick(t[key][agent], s) if agent in t[key] else _pick(template, None)
                    for t, s in ((rows[int(k)], int(s)) for k, s in zip(which, steps, strict=True))
                ]
                out[key][agent] = _stack(picked)
        out["env_episode"] = which.astype(np.int64)
        out["env_step"] = steps.astype(np.int64)
        return out

    def __repr__(self) -> str:
        return f"<trajcore.EnvEpisodes: {len(self)} env episodes>"


def _pick(tree: Any, row: int | None) -> Any:
    """Row `row` of an aligned tree (None: a zero row of its kind)."""
    if isinstance(tree, dict):
        return {k: _pick(v, row) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_pick(v, row) for v in tree)
    if isinstance(tree, list):
        return "" if row is None else tree[row]
    return np.zeros_like(tree[0]) if row is None else tree[row]


def _stack(rows: list[Any]) -> Any:
    first = rows[0]
    if isinstance(first, dict):
        return {k: _stack([r[k] for r in rows]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack([r[i] for r in rows]) for i in range(len(first)))
    if isinstance(first, str):
        return list(rows)
    return np.stack(rows)
