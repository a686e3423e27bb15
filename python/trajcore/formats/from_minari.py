"""Minari import: a local Minari dataset rewritten as a trajcore dataset, so a Minari user gets
trajcore's training reads (sampling, sequences, zero-copy views) on the data they have.

Each Minari episode becomes one trajcore episode (a single env, env index 0), recorded step by
step through `RecordEpisodes` from an env that plays the episode back: observations, actions,
rewards, terminations, truncations and infos (a key with a ``_key`` mask is given only where its
mask is true, as trajcore exports them; without a mask, at every row). A dataset trajcore
exported comes back whole: its custom data (``infos["trajcore_data"]``), dataset metadata and
episode metadata are restored. Other datasets get ``{"minari": {...}}`` metadata: the dataset's
(id, algorithm, author, ...) and each episode's (id, seed, options). Nothing is downloaded: the
dataset must be on this machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from trajcore.errors import InvalidArgumentError, TrajcoreFileNotFoundError
from trajcore.formats._fields import given_at
from trajcore.formats._output import staged
from trajcore.formats._read import Progress
from trajcore.formats.to_minari import DATA_KEY, minari_module
from trajcore.recorder import RecordEpisodes

__all__ = ["import_minari", "value_row"]


def _decoded(v: Any) -> Any:
    # Minari's HDF5 storage gives str values back as bytes.
    return v.decode("utf-8") if isinstance(v, bytes) else v


def value_row(tree: Any, t: int) -> Any:
    """Row t of a (nested) Minari column: dicts and tuples kept, str decoded."""
    if isinstance(tree, Mapping):
        return {k: value_row(v, t) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(value_row(v, t) for v in tree)
    return _decoded(tree[t])


def _jsonable(value: Any) -> Any:
    """Metadata as JSON values: sets as sorted lists, numpy values as Python ones, anything
    else JSON cannot hold (spaces, specs) left out."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            j = _jsonable(v)
            if j is not _SKIP:
                out[str(k)] = j
        return out
    if isinstance(value, set | frozenset):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return _SKIP


_SKIP = object()


def _open(minari: Any, name_or_path: str) -> Any:
    if os.path.isdir(name_or_path):
        data = os.path.join(name_or_path, "data")
        return minari.MinariDataset(data if os.path.isdir(data) else name_or_path)
    try:
        return minari.load_dataset(name_or_path)
    except FileNotFoundError:
        raise TrajcoreFileNotFoundError(
            f"{name_or_path!r} is neither a directory nor a Minari dataset id found locally "
            f"(under {minari.storage.get_dataset_path()}); trajcore does not download datasets"
        ) from None
    except ValueError as e:
        raise InvalidArgumentError(f"{name_or_path!r}: {e}") from None


def _dataset_metadata(dataset: Any) -> Any:
    meta = dict(dataset.storage.metadata)
    ours = meta.get("trajcore")
    if isinstance(ours, Mapping) and "metadata" in ours:
        return ours["metadata"]
    meta.pop("observation_space", None)
    meta.pop("action_space", None)
    return {"minari": _jsonable(meta)}


def _episode_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    ours = meta.get("trajcore")
    if isinstance(ours, Mapping) and "metadata" in ours:
        restored = json.loads(str(ours["metadata"]))
        return restored if isinstance(restored, dict) else {"value": restored}
    return {"minari": _jsonable(meta)}


def import_minari(
    name_or_path: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    force: bool = False,
    zstd_level: int | None = 3,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Writes a local Minari dataset as a trajcore dataset (see the module docstring).

    Args:
        name_or_path: a Minari dataset id found under Minari's local datasets root
            (``MINARI_DATASETS_PATH`` or ``~/.minari/datasets``), or the dataset's directory (or
            its ``data`` directory).
        dst: the trajcore dataset directory to create; written beside it and renamed into place
            when complete.
        force: replace `dst` if it exists.
        zstd_level: zstd level of every column (None: raw).
        progress: called with the steps of each episode once written.

    Returns:
        ``{"episodes": int, "steps": int, "shards": [paths]}``.

    Raises:
        MissingDependencyError: minari, h5py or Pillow is not installed.
        TrajcoreFileNotFoundError: no such local dataset.
        InvalidArgumentError: `dst` exists and `force` is False.
        SchemaError: a space trajcore cannot record (Sequence, Graph).
    """
    minari = minari_module("import-minari")
    dataset = _open(minari, os.fspath(name_or_path))
    out = os.fspath(dst)
    replay = _Replay(dataset)
    episodes = steps = 0
    with (
        staged(out, force) as tmp,
        RecordEpisodes(replay, tmp, _dataset_metadata(dataset), zstd_level=zstd_level) as rec,
    ):
        metas = dataset.storage.get_episode_metadata(dataset.episode_indices)
        for ep, meta in zip(dataset.iterate_episodes(), metas, strict=True):
            replay.load(ep)
            rec.reset()
            rec.set_episode_metadata(_episode_metadata(meta))
            for t in range(replay.length):
                rec.record(**given_at(replay.data, t + 1, _decoded))
                rec.step(value_row(ep.actions, t))
            episodes += 1
            steps += replay.length
            if progress is not None:
                progress(replay.length)
        names = [os.path.basename(p) for p in rec.shard_paths]
    return {"episodes": episodes, "steps": steps, "shards": [os.path.join(out, n) for n in names]}


class _Replay(gym.Env[Any, Any]):
    """An env that plays back one Minari episode at a time, so the import records through
    `RecordEpisodes` like any env (the action given to `step` is the recorded one)."""

    def __init__(self, dataset: Any) -> None:
        self.observation_space = dataset.observation_space
        self.action_space = dataset.action_space
        self.spec = dataset.env_spec  # its id is stored as the recording's env id
        self.length = 0
        self.data: dict[str, Any] = {}
        self._ep: Any = None
        self._infos: dict[str, Any] = {}
        self._t = 0

    def load(self, ep: Any) -> None:
        """The episode the next `reset` starts; its custom data is taken out of the infos."""
        self._ep = ep
        self._infos = dict(ep.infos or {})
        self.data = self._infos.pop(DATA_KEY, None) or {}
        self.length = len(ep.rewards)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._t = 0
        return value_row(self._ep.observations, 0), given_at(self._infos, 0, _decoded)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        t = self._t
        self._t += 1
        ep = self._ep
        return (
            value_row(ep.observations, t + 1),
            float(ep.rewards[t]),
            bool(ep.terminations[t]),
            bool(ep.truncations[t]),
            given_at(self._infos, t + 1, _decoded),
        )
