"""What trajcore reads from, and writes into, an RLlib episode (new API stack,
`SingleAgentEpisode`).

Reading: an episode an EnvRunner completes may have been returned in chunks by earlier
``sample()`` calls (RLlib cuts running episodes at the end of each call); `RLlibEpisode` joins
the chunks (``prev_episode_chunks`` of ``on_episode_end``, then the last one) into the rows
`trajcore.record.replay.replay` records: observations and infos 0 .. T, actions, rewards and extra
model outputs 0 .. T-1, and the custom data and metadata a user's callback gave.

Writing: `record_step` and `set_episode_metadata` keep the user's per-step ("running") and
per-episode ("final") values in ``episode.custom_data["trajcore"]``, which RLlib copies into
every later chunk of the episode, so the last chunk holds all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from trajcore.errors import InvalidArgumentError, SchemaError
from trajcore.record.options import to_json
from trajcore.record.replay import value_row

__all__ = ["CUSTOM_DATA_KEY", "MODULE_ACTION", "RLlibEpisode", "record_step", "set_episode_metadata"]

CUSTOM_DATA_KEY = "trajcore"
"""The key of ``episode.custom_data`` holding what `record_step` and `set_episode_metadata` gave."""

MODULE_ACTION = "module_action"
"""Custom-data name of the action as the RLModule computed it, recorded when RLlib changed it
before the env got it (``normalize_actions`` / ``clip_actions`` on a Box action space)."""

RESERVED_METADATA_KEY = "rllib"
"""The episode metadata key trajcore fills (episode id, sub-env, EnvRunner)."""


def _store(episode: Any) -> dict[str, Any]:
    data = episode.custom_data
    store = data.get(CUSTOM_DATA_KEY)
    if store is None:
        store = data[CUSTOM_DATA_KEY] = {"steps": {}, "metadata": {}}
    return store  # type: ignore[no-any-return]


def record_step(episode: Any, **values: Any) -> None:
    """Custom per-step data for the step the episode just took (call it from ``on_episode_step``
    or ``on_episode_end`` of your RLlib callback); recorded as ``ep.data["<name>"]`` with that
    step. A name not given at some step reads back as not given there (``ep.data["_<name>"]``
    False).

    Raises:
        InvalidArgumentError: the episode has taken no step yet, or a name is empty, starts with
            ``_``, or is one trajcore records itself (RLlib's extra model outputs such as
            ``action_logp``, and ``module_action``).
        SchemaError: a value cannot be recorded (not a number, bool, str or fixed-shape array).
    """
    step = int(episode.t) - 1  # the episode's step count, over all its chunks
    if step < 0:
        raise InvalidArgumentError("record_step: the episode has taken no step yet (call it from on_episode_step)")
    taken = set(episode.extra_model_outputs) | {MODULE_ACTION}
    for name, value in values.items():
        if not name or name.startswith("_"):
            raise InvalidArgumentError(f"custom data name {name!r} must be non-empty and not start with '_'")
        if name in taken:
            raise InvalidArgumentError(
                f"custom data name {name!r} is taken: trajcore records RLlib's {name!r} under it; pick another name"
            )
        if not isinstance(value, str | bytes) and np.asarray(value).dtype == object:
            raise SchemaError(
                f"data/{name}: {type(value).__name__} cannot be recorded (a number, bool, str or fixed-shape array can)"
            )
    _store(episode)["steps"].setdefault(step, {}).update(values)


def set_episode_metadata(episode: Any, metadata: Mapping[str, Any] | None = None, /, **kv: Any) -> None:
    """Merges JSON-able values into the metadata trajcore records with the episode (read back as
    ``ep.metadata``): per-episode ("final") custom data. Call it from any callback of the
    episode, ``on_episode_end`` included.

    Raises:
        InvalidArgumentError: a value is not JSON, or the key ``"rllib"`` (trajcore's own) is used.
    """
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"episode metadata must be a mapping, got {type(metadata).__name__}")
    merged = {**(metadata or {}), **kv}
    if RESERVED_METADATA_KEY in merged:
        raise InvalidArgumentError(f"episode metadata key {RESERVED_METADATA_KEY!r} is trajcore's own; pick another")
    to_json(merged, "episode metadata")  # refuses what cannot be stored, now rather than at the episode's end
    _store(episode)["metadata"].update(merged)


def _rows(batch: Any, n: int) -> list[Any]:
    """The n rows of a chunk's column: a list (a chunk not yet numpy'ized) or a batched value."""
    if isinstance(batch, list):
        return batch
    return [value_row(batch, i) for i in range(n)]


WEIGHTS_SEQ_NO = "weights_seq_no"  # RLlib's extra model output: the weights' version at each step


def _first_weights_seq_no(chunks: Sequence[Any]) -> int | None:
    """The version of the weights (RLlib's ``weights_seq_no``) that took the episode's first
    action, or None where the EnvRunner gave none."""
    for chunk in chunks:
        if len(chunk) == 0 or WEIGHTS_SEQ_NO not in chunk.extra_model_outputs:
            continue
        value = _rows(chunk.get_extra_model_outputs(WEIGHTS_SEQ_NO), len(chunk))[0]
        try:
            return int(value)
        except (TypeError, ValueError):
            return None
    return None


def policy_of(episode: RLlibEpisode, module_id: Any) -> dict[str, Any]:
    """What `set_policy` gets for an RLlib episode: the module's id as the name, and the
    version of its weights at the first step (``weights_seq_no``: the algorithm raises it at
    each weight sync, about once a training iteration) as the step."""
    name = module_id if isinstance(module_id, str) else str(module_id)
    return {"name": name} if episode.weights_seq_no is None else {"name": name, "step": episode.weights_seq_no}


class RLlibEpisode:
    """A finished RLlib episode as the rows `replay` records (a `trajcore.record.replay.PlayedEpisode`).

    Args:
        chunks: the episode's chunks in order (``prev_episode_chunks`` then the last one).
        env_action: maps the action RLlib stored (the RLModule's) to the one the env got, when
            RLlib changes it on the way (None: unchanged); the stored one is then also recorded
            as `MODULE_ACTION` custom data.
        extra_model_outputs: record RLlib's extra model outputs (``action_logp``,
            ``action_dist_inputs``, ``weights_seq_no``, ...) as custom data of their names.

    Raises:
        InvalidArgumentError: the chunks do not join into one whole episode (one is missing, or
            they belong to two episodes).
    """

    def __init__(
        self,
        chunks: Sequence[Any],
        env_action: Callable[[Any], Any] | None = None,
        extra_model_outputs: bool = True,
    ) -> None:
        _check_chunks(chunks)
        last = chunks[-1]
        self.id = str(last.id_)
        self._observations: list[Any] = []
        self._infos: list[dict[str, Any]] = []
        self._actions: list[Any] = []
        self._rewards: list[float] = []
        extras: dict[str, list[Any]] = {}
        for k, chunk in enumerate(chunks):
            n = len(chunk)
            first = 0 if k == 0 else 1  # a later chunk starts with its predecessor's last observation
            self._observations += _rows(chunk.get_observations(), n + 1)[first:]
            self._infos += list(chunk.get_infos())[first:]
            self._actions += _rows(chunk.get_actions(), n)
            self._rewards += [float(r) for r in chunk.get_rewards()]
            for key in chunk.extra_model_outputs if extra_model_outputs else ():
                column = extras.setdefault(str(key), [None] * (len(self._rewards) - n))
                column += _rows(chunk.get_extra_model_outputs(key), n)
            for column in extras.values():  # a key a chunk lacks: not given at its steps
                column += [None] * (len(self._rewards) - len(column))
        self.length = len(self._rewards)
        self.weights_seq_no = _first_weights_seq_no(chunks)
        self.is_terminated = bool(last.is_terminated)
        self.is_truncated = bool(last.is_truncated)
        self.return_ = float(sum(self._rewards))
        store = last.custom_data.get(CUSTOM_DATA_KEY) or {}
        self.metadata: dict[str, Any] = dict(store.get("metadata") or {})
        self._user_steps: Mapping[int, Mapping[str, Any]] = store.get("steps") or {}
        self._extras = extras
        self._env_action = env_action

    def observation(self, t: int) -> Any:
        return self._observations[t]

    def info(self, t: int) -> dict[str, Any]:
        return self._infos[t] or {}

    def action(self, t: int) -> Any:
        action = self._actions[t]
        return action if self._env_action is None else self._env_action(action)

    def reward(self, t: int) -> float:
        return self._rewards[t]

    def terminated(self, t: int) -> bool:
        return self.is_terminated and t == self.length - 1

    def truncated(self, t: int) -> bool:
        return self.is_truncated and t == self.length - 1

    def data(self, t: int) -> dict[str, Any]:
        out = {name: column[t] for name, column in self._extras.items() if column[t] is not None}
        if self._env_action is not None:
            out[MODULE_ACTION] = self._actions[t]
        out.update(self._user_steps.get(t, {}))
        return out


def _check_chunks(chunks: Sequence[Any]) -> None:
    if not chunks:
        raise InvalidArgumentError("an RLlib episode with no chunk")
    ids = {str(c.id_) for c in chunks}
    if len(ids) != 1:
        raise InvalidArgumentError(f"chunks of several RLlib episodes given as one: {sorted(ids)}")
    expected = 0
    for c in chunks:
        if int(c.t_started) != expected:
            raise InvalidArgumentError(
                f"RLlib episode {c.id_}: a chunk starts at step {c.t_started}, but the chunks before it end at step "
                f"{expected} (a chunk is missing): the episode cannot be recorded whole"
            )
        expected = int(c.t)
