"""Reading multi-agent recordings: which agent each recording holds (its Meta record's
``user.agent``, written by `trajcore.Writer` and the PettingZoo recorders) and the episodes of
some agents. Each agent's part of an env episode is an episode of the dataset; see FORMAT.md,
"Agents"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import InvalidArgumentError
from trajcore.read.reads import DatasetReads
from trajcore.spaces import space_from_json_text

__all__ = [
    "ENV_EPISODE_KEY",
    "ENV_STEP",
    "agent_counts",
    "agent_keep",
    "agent_spaces",
    "agent_names",
    "agents_of",
]

ENV_EPISODE_KEY = "env_episode"
"""The episode metadata key holding the id of the env episode an agent's episode is part of."""

ENV_STEP = "env_step"
"""The custom-data column of each agent step: the env step (Parallel) or turn (AEC) of the action."""


def agents_of(reads: DatasetReads) -> list[str]:
    """The agents of a dataset's recordings, each once, in the order their recordings come."""
    seen: dict[str, None] = {}
    for r in range(reads.num_recordings):
        agent = reads.agent_of_recording(r)
        if agent is not None:
            seen.setdefault(agent)
    return list(seen)


def agent_keep(reads: DatasetReads, agent: str | Sequence[str], recordings: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Per episode (given its recording), whether it is an episode of `agent` (one name or several).

    Raises:
        InvalidArgumentError: a name is no agent of the dataset (the message lists them).
    """
    names = [agent] if isinstance(agent, str) else list(agent)
    known = agents_of(reads)
    unknown = [a for a in names if a not in known]
    if unknown:
        raise InvalidArgumentError(
            f"select: no agent {unknown[0]!r} in this dataset (agents: {', '.join(known) or 'none'})"
        )
    chosen = [r for r in range(reads.num_recordings) if reads.agent_of_recording(r) in names]
    return np.isin(recordings, np.asarray(chosen, dtype=np.int64))


def agent_names(reads: DatasetReads) -> npt.NDArray[np.object_] | None:
    """The agent of every episode of the dataset (str, None where single-agent), in dataset
    order; None when no recording is an agent's (the tables then have no agent column)."""
    names = [reads.agent_of_recording(r) for r in range(reads.num_recordings)]
    if all(n is None for n in names):
        return None
    per_recording = np.array(names, dtype=object)
    out: npt.NDArray[np.object_] = per_recording[reads.summary()["recording"]]
    return out


def agent_counts(reads: DatasetReads) -> dict[str, int]:
    """Each agent's number of episodes, in the order of `agents_of` (empty: single-agent)."""
    names = agent_names(reads)
    if names is None:
        return {}
    return {agent: int(np.count_nonzero(names == agent)) for agent in agents_of(reads)}


def agent_spaces(reads: DatasetReads) -> dict[str, tuple[str, str]]:
    """Each agent's (observation space, action space) as text, from its first recording."""
    out: dict[str, tuple[str, str]] = {}
    for r in range(reads.num_recordings):
        agent = reads.agent_of_recording(r)
        if agent is not None and agent not in out:
            user = reads.meta(r)["user"]
            out[agent] = (
                space_from_json_text(user.get("observation_space")),
                space_from_json_text(user.get("action_space")),
            )
    return out
