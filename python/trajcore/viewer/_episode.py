"""Reads one `Episode` into the plain values the viewer page is decided from (`EpisodeArrays`)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from trajcore.read.records.meta import render_fps
from trajcore.viewer._content import EpisodeArrays, Leaf

if TYPE_CHECKING:
    from trajcore.read.episode import Episode

__all__ = ["read_episode"]


def _leaves(tree: Any, prefix: str) -> list[Leaf]:
    """Every leaf of a nested observation or action, names joined by '/'."""
    if isinstance(tree, dict):
        return [leaf for k, sub in tree.items() for leaf in _leaves(sub, f"{prefix}/{k}")]
    if isinstance(tree, tuple):
        return [leaf for i, sub in enumerate(tree) for leaf in _leaves(sub, f"{prefix}/{i}")]
    return [Leaf(prefix, tree)]


def _masked_leaves(values: dict[str, Any], masks: dict[str, Any], prefix: str) -> list[Leaf]:
    """Info or custom-data leaves (nested dicts of values, and of masks alike)."""
    out: list[Leaf] = []
    for key, value in values.items():
        name = f"{prefix}/{key}"
        mask = masks.get(key)
        if isinstance(value, dict):
            out += _masked_leaves(value, mask if isinstance(mask, dict) else {}, name)
        else:
            out.append(Leaf(name, value, mask if isinstance(mask, np.ndarray) else None))
    return out


def read_episode(ep: Episode) -> EpisodeArrays:
    """Every value of `ep` the page shows, read (frames too: the whole episode is in memory)."""
    meta = ep._reads.meta(ep.recording)
    env_id = (meta.get("user") or {}).get("env_id")
    start = datetime.datetime.fromtimestamp(ep.start_ns / 1e9, tz=datetime.UTC)
    summary = {
        "episode": ep.index,
        "env": env_id,
        "env_index": ep.env_index,
        "length": ep.length,
        "return": ep.episode_return,
        "complete": ep.complete,
        "terminated": ep.terminated,
        "truncated": ep.truncated,
        "started": start.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "metadata": ep.metadata,
        "provenance": ep.provenance,  # a section of its own on the page
    }
    title = f"{env_id or 'episode'} #{ep.index} (env {ep.env_index}): {ep.length} steps, return {ep.episode_return:g}"
    if ep.agent is not None:  # an agent's part of an env episode: say whose, and of which
        summary = {"agent": ep.agent, "env_episode": ep.env_episode, **summary}
        title = f"{ep.agent}: {title}"
    info_values, info_masks = ep._values_and_masks("infos")
    data_values, data_masks = ep._values_and_masks("data")
    return EpisodeArrays(
        title=title,
        summary=summary,
        observations=_leaves(ep.observations, "observation"),
        actions=_leaves(ep.actions, "action"),
        rewards=ep.rewards,
        terminations=ep.terminations,
        truncations=ep.truncations,
        infos=_masked_leaves(info_values, info_masks, "info"),
        data=_masked_leaves(data_values, data_masks, "data"),
        frames=ep.frames,
        frame_mask=ep.frame_mask,
        fps=render_fps(meta),
    )
