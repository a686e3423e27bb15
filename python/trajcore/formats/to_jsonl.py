"""JSON Lines export in the shape of RLlib's offline JSON writer (``JsonWriter`` with no column
compressed): one line per episode, a ``SampleBatch`` of its T steps.

Keys per line (each a list of T values unless said otherwise), with the trajcore source:

- ``type``: ``"SampleBatch"`` (a single string);
- ``obs``: observation rows 0 .. T-1 (the observation each action was chosen on);
- ``new_obs``: observation rows 1 .. T (what the step returned);
- ``actions``, ``rewards``, ``terminateds``, ``truncateds``: the steps;
- ``infos``: one dict per step, the info the step returned (info row t + 1), holding only the
  keys the env gave at that step; the reset's info is not written;
- ``t``: the step number in the episode, 0 .. T-1;
- ``eps_id``: the episode's index in the dataset; ``env_id``: its sub-env (``env_index``);
  ``agent_index``: 0 (single-agent);
- one key per custom-data name (``record(logp=...)`` gives ``logp``; a name RLlib already uses
  gets a ``data/`` prefix), null at steps where it was not recorded.

Nested spaces are written as RLlib writes them: a Dict as an object of per-key lists, a Tuple as
a list of per-item lists; arrays as nested lists; Text as strings. Numbers are JSON numbers (a
float32 as the double it converts to exactly); NaN and infinities as ``NaN`` / ``Infinity``, as
Python's ``json`` (and RLlib) write them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from trajcore.formats._fields import given_at
from trajcore.formats._read import Progress
from trajcore.read.dataset import Dataset
from trajcore.read.episode import Episode

__all__ = ["RESERVED_KEYS", "episode_batch", "write_jsonl"]

RESERVED_KEYS = frozenset(
    {
        "type", "obs", "new_obs", "actions", "rewards", "terminateds", "truncateds", "infos", "t", "eps_id",
        "env_id", "agent_index", "unroll_id", "prev_actions", "prev_rewards", "seq_lens",
    }
)  # fmt: skip
"""Keys RLlib's SampleBatch gives a meaning: custom data of such a name is written as ``data/<name>``."""


def _json(tree: Any, rows: slice) -> Any:
    """A (nested) column sequence sliced to `rows`, as JSON values."""
    if isinstance(tree, Mapping):
        return {k: _json(v, rows) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return [_json(v, rows) for v in tree]
    if isinstance(tree, np.ndarray):
        return tree[rows].tolist()
    return list(tree[rows])


def _json_value(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray | np.generic) else v


def episode_batch(ep: Episode) -> dict[str, Any]:
    """One episode as an RLlib ``SampleBatch`` dict of JSON values (see the module docstring)."""
    n = ep.length
    before, after = slice(0, n), slice(1, n + 1)
    infos = ep.infos
    batch: dict[str, Any] = {
        "type": "SampleBatch",
        "obs": _json(ep.observations, before),
        "new_obs": _json(ep.observations, after),
        "actions": _json(ep.actions, before),
        "rewards": ep.rewards.tolist(),
        "terminateds": ep.terminations.tolist(),
        "truncateds": ep.truncations.tolist(),
        "infos": [given_at(infos, t + 1, _json_value) for t in range(n)],
        "t": list(range(n)),
        "eps_id": [ep.index] * n,
        "env_id": [ep.env_index] * n,
        "agent_index": [0] * n,
    }
    if ep.agent is not None:
        # A multi-agent dataset: each agent's episode is a line of its own, named by agent_id.
        batch["agent_id"] = [ep.agent] * n
    data = ep.data
    for name, values in data.items():
        if name.startswith("_") and name[1:] in data:
            continue
        mask = data.get("_" + name)
        column = _json(values, before)
        if mask is not None:
            column = [v if m else None for v, m in zip(column, mask.tolist(), strict=True)]
        batch["data/" + name if name in RESERVED_KEYS else name] = column
    return batch


def write_jsonl(ds: Dataset, indices: Sequence[int], out: TextIO, progress: Progress | None = None) -> int:
    """Writes one line per episode (in order) to `out`.

    Returns:
        The number of steps written.
    """
    steps = 0
    for index in indices:
        ep = Episode(ds, int(index))
        out.write(json.dumps(episode_batch(ep), separators=(",", ":")))
        out.write("\n")
        steps += ep.length
        if progress is not None:
            progress(ep.length)
    return steps
