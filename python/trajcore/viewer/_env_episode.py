"""Reads the agents of one env episode (`trajcore.read.multiagent.env_episodes.EnvEpisode`) into the plain values
of its page: each agent's episode read as `read_episode` reads it, then put at the env's steps.

Rows of the page are the env steps (AEC: turns) 0 .. L-1 and a last row L. An agent's step i goes
to row ``env_step[i]`` (``ep.data["env_step"]``, FORMAT.md "Agents"), the observation it acted on
with it; its final observation goes to the row after its last step. Everything of an agent at
the other rows is missing (masked), so the page shows "—" there, not a zero.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from trajcore.read.multiagent.agents import ENV_STEP
from trajcore.viewer._content import EpisodeArrays, Leaf
from trajcore.viewer._episode import read_episode

if TYPE_CHECKING:
    from trajcore.read.multiagent.env_episodes import EnvEpisode

__all__ = ["read_env_episode"]


def _scatter(values: Any, at: npt.NDArray[np.int64], length: int) -> Any:
    """A column's rows put at rows `at` of `length`: zeros (an array) or "" (a list of str)
    elsewhere. (`trajcore.read.multiagent.env_episodes` has its own for whole trees; importing it from here would
    close an import circle: episode -> viewer -> env_episodes -> episode.)"""
    if isinstance(values, list):
        placed = dict(zip(at.tolist(), values, strict=True))
        return [placed.get(k, "") for k in range(length)]
    column = np.asarray(values)
    out = np.zeros((length, *column.shape[1:]), dtype=column.dtype)
    out[at] = column
    return out


def _at(mask: npt.NDArray[np.bool_] | None, at: npt.NDArray[np.int64], length: int) -> npt.NDArray[np.bool_]:
    """A leaf's mask (None: every row given) put at rows `at` of `length`, False elsewhere."""
    out = np.zeros(length, dtype=np.bool_)
    out[at] = True if mask is None else mask
    return out


def _leaves(leaves: list[Leaf], at: npt.NDArray[np.int64], length: int) -> list[Leaf]:
    return [Leaf(leaf.name, _scatter(leaf.values, at, length), _at(leaf.mask, at, length)) for leaf in leaves]


def _aligned(arrays: EpisodeArrays, agent: str, steps: npt.NDArray[np.int64], env_steps: int) -> EpisodeArrays:
    """One agent's episode put at the env-step rows (`env_steps` steps, `env_steps` + 1 rows)."""
    rows = env_steps + 1
    observed = np.append(steps, steps[-1] + 1 if len(steps) else 0)  # the final one after its last step
    frames = frame_mask = None
    if arrays.frames is not None:
        frames = _scatter(arrays.frames, observed, rows)
        frame_mask = _at(arrays.frame_mask, observed, rows)
    return dataclasses.replace(
        arrays,
        observations=_leaves(arrays.observations, observed, rows),
        actions=_leaves(arrays.actions, steps, env_steps),
        rewards=_scatter(arrays.rewards, steps, env_steps),
        terminations=_scatter(arrays.terminations, steps, env_steps),
        truncations=_scatter(arrays.truncations, steps, env_steps),
        infos=_leaves(arrays.infos, observed, rows),
        # Its env-step column is the page's row now: shown, it would only repeat the row.
        data=_leaves([leaf for leaf in arrays.data if leaf.name != f"data/{ENV_STEP}"], steps, env_steps),
        frames=frames,
        frame_mask=frame_mask,
        agent=agent,
        step_mask=_at(None, steps, env_steps),
    )


def read_env_episode(joint: EnvEpisode) -> tuple[list[EpisodeArrays], str, dict[str, Any]]:
    """Every agent's values of an env episode, aligned on its env steps; the page's title and
    summary (which episode of the dataset each agent's part is)."""
    parts = []
    for agent, ep in joint.episodes.items():
        steps = np.asarray(ep.data[ENV_STEP], dtype=np.int64)
        parts.append(_aligned(read_episode(ep), agent, steps, joint.length))
    first = next(iter(joint.episodes.values()))
    env_id = (first._reads.meta(first.recording).get("user") or {}).get("env_id")
    summary: dict[str, Any] = {"env_episode": joint.id, "env": env_id, "env_steps": joint.length}
    for agent, ep in joint.episodes.items():  # which episode of the dataset each agent's part is
        summary[agent] = f"episode {ep.index}, {ep.length} steps, return {ep.episode_return:g}"
    title = f"{env_id or 'env episode'} env episode {joint.id}: {len(parts)} agents, {joint.length} env steps"
    return parts, title, summary
