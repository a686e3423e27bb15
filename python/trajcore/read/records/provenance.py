"""Where recordings and episodes came from, as the recorders stored it (`trajcore.record.provenance`):
a recording's provenance in its Meta record (``meta(r)["user"]["provenance"]``), an episode's
reset seed and options and the policy behind it in its metadata; and `select`'s filters on the
policy (`policy_keep`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import InvalidArgumentError
from trajcore.read.reads import DatasetReads
from trajcore.read.records.provenance_keys import POLICY_KEY, RESET_KEY

__all__ = [
    "episode_provenance",
    "policy_counts",
    "policy_label",
    "policy_keep",
    "recording_provenance",
]


def recording_provenance(reads: DatasetReads, recording: int) -> dict[str, Any]:
    """A recording's provenance (env, vector, host, versions, command, git: the parts recorded),
    with the env id it was recorded under; empty for recordings made without it."""
    user = reads.meta(recording).get("user") or {}
    stored = user.get("provenance")
    out: dict[str, Any] = dict(stored) if isinstance(stored, dict) else {}
    if user.get("env_id") is not None:
        out.setdefault("env_id", user["env_id"])
    return out


def episode_provenance(reads: DatasetReads, index: int, recording: int) -> dict[str, Any]:
    """An episode's provenance: its recording's, then the seed and options of the reset that
    started it and the policy behind it, where they were recorded."""
    out = recording_provenance(reads, recording)
    metadata = reads.stored_episode_metadata(index)
    reset = metadata.get(RESET_KEY)
    if isinstance(reset, dict):
        out.update({f"reset_{key}": value for key, value in reset.items()})
    if POLICY_KEY in metadata:
        out[POLICY_KEY] = metadata[POLICY_KEY]
    return out


def _policy_of(metadata: dict[str, Any]) -> dict[str, Any]:
    policy = metadata.get(POLICY_KEY)
    return policy if isinstance(policy, dict) else {}


def check_policy_filters(policy: Any, policy_step: Any) -> None:
    """Raises:
    InvalidArgumentError: `policy` is not a name or a list of names, or `policy_step` not a
        pair of inclusive int bounds (None for an open end)."""
    if policy is not None and not (
        isinstance(policy, str) or (isinstance(policy, Sequence) and all(isinstance(p, str) for p in policy))
    ):
        raise InvalidArgumentError(f"select: policy must be a name or a list of names, got {policy!r}")
    if policy_step is not None:
        ok = isinstance(policy_step, Sequence) and not isinstance(policy_step, str) and len(policy_step) == 2
        if not ok or not all(b is None or _is_int(b) for b in policy_step):
            raise InvalidArgumentError(
                f"select: policy_step must be (low, high), inclusive int bounds (None for an open end), "
                f"got {policy_step!r}"
            )


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def policy_keep(
    reads: DatasetReads, candidates: npt.NDArray[np.int64], policy: Any, policy_step: Any
) -> npt.NDArray[np.bool_]:
    """Which `candidates` (dataset indexes) were recorded under a policy of that name (one, or
    any of a list) and with a step within the inclusive bounds ``(low, high)``: exactly, so an
    episode with no policy, or no step, passes neither filter.

    Raises:
        InvalidArgumentError: as `check_policy_filters`.
    """
    check_policy_filters(policy, policy_step)
    names = None if policy is None else {policy} if isinstance(policy, str) else set(policy)
    low, high = (None, None) if policy_step is None else policy_step
    keep = np.zeros(len(candidates), dtype=np.bool_)
    for k, i in enumerate(candidates.tolist()):
        p = _policy_of(reads.episode_metadata(i))
        if names is not None and p.get("name") not in names:
            continue
        if policy_step is not None:
            step = p.get("step")
            if not _is_int(step) or (low is not None and step < low) or (high is not None and step > high):
                continue
        keep[k] = True
    return keep


def policy_counts(reads: DatasetReads) -> list[dict[str, Any]]:
    """The policies behind the episodes (reads every episode's metadata): for each name, in order
    of first appearance, its episode count and the range of its steps (None without steps)."""
    found: dict[Any, dict[str, Any]] = {}
    for i in range(reads.num_episodes):
        p = _policy_of(reads.episode_metadata(i))
        if not p:
            continue
        entry = found.setdefault(p.get("name"), {"name": p.get("name"), "episodes": 0, "steps": None})
        entry["episodes"] += 1
        step = p.get("step")
        if isinstance(step, int) and not isinstance(step, bool):  # JSON's ints
            low, high = entry["steps"] or (step, step)
            entry["steps"] = [min(low, step), max(high, step)]
    return list(found.values())


def policy_label(metadata: dict[str, Any]) -> str:
    """An episode's policy in a few characters (``name@step``; empty without one), for listings."""
    p = _policy_of(metadata)
    if not p:
        return ""
    name = str(p.get("name", "?"))
    return f"{name}@{p['step']}" if "step" in p else name
