"""Minari export: a dataset that ``minari.load_dataset(dataset_id)`` opens, written episode by
episode through Minari's own storage API (its HDF5 storage, Minari's default format).

What goes where:

- the observation and action spaces, and the env spec when the env id is registered here;
- one Minari episode per trajcore episode with at least one step (episodes of no step, which
  Minari cannot store, are skipped and counted): observations (T+1 rows), actions, rewards,
  terminations, truncations as recorded; images stored raw, not JPEG (which would change them);
- ``infos``: the episode's infos as ``ep.infos`` gives them (T+1 rows, the reset's first, each
  key with its ``_key`` mask, nested dicts nested), plus the custom data under
  ``infos["trajcore_data"]``, aligned the same way (data of step t at row t + 1, row 0 masked);
- dataset metadata: ``dataset_id``, ``minari_version``, a ``description``, and ``trajcore``:
  the dataset metadata, env id and source path;
- per-episode metadata: ``trajcore/index``, ``trajcore/env_index``, ``trajcore/complete``,
  ``trajcore/terminated``, ``trajcore/truncated``, ``trajcore/episode_return``,
  ``trajcore/start_ns``, ``trajcore/end_ns`` and ``trajcore/metadata`` (the episode metadata
  as a JSON string); Minari gives them back nested under ``"trajcore"``.

`trajcore.formats.from_minari` reads all of it back.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from trajcore._deps import require
from trajcore.errors import InvalidArgumentError
from trajcore.formats._read import Progress, plan_of
from trajcore.read.dataset import Dataset
from trajcore.read.episode import Episode
from trajcore.read.records.meta import rebuild_space

__all__ = ["DATA_KEY", "episode_infos", "minari_module", "write_minari"]

DATA_KEY = "trajcore_data"
"""The info key custom data is stored under."""


def minari_module(purpose: str) -> Any:
    """minari, with the packages its HDF5 storage imports (h5py, Pillow).

    Raises:
        MissingDependencyError: one of them is not installed.
    """
    minari = require("minari", purpose)
    require("h5py", purpose)
    require("PIL", purpose, pip="pillow")
    return minari


def episode_infos(ep: Episode) -> dict[str, Any]:
    """The infos of an episode as stored in Minari: ``ep.infos`` plus the custom data, shifted
    to the info rows (see the module docstring)."""
    infos = dict(ep.infos)
    data = ep.data
    if data:
        shifted: dict[str, Any] = {}
        for name, values in data.items():
            if isinstance(values, list):
                shifted[name] = ["", *values]
            else:
                pad = np.zeros((1, *values.shape[1:]), dtype=values.dtype)
                shifted[name] = np.concatenate([pad, values])
        infos[DATA_KEY] = shifted
    return infos


def _episode_metadata(ep: Episode) -> dict[str, Any]:
    return {
        "trajcore/index": ep.index,
        "trajcore/env_index": ep.env_index,
        **(
            {} if ep.agent is None else {"trajcore/agent": ep.agent, "trajcore/env_episode": json.dumps(ep.env_episode)}
        ),
        "trajcore/complete": ep.complete,
        "trajcore/terminated": ep.terminated,
        "trajcore/truncated": ep.truncated,
        "trajcore/episode_return": ep.episode_return,
        "trajcore/start_ns": ep.start_ns,
        "trajcore/end_ns": ep.end_ns,
        "trajcore/metadata": json.dumps(ep.metadata),
    }


def _env_spec(env_id: str | None) -> Any:
    if not env_id:
        return None
    import gymnasium as gym

    try:
        return gym.spec(env_id)
    except gym.error.Error:
        return None  # recorded from an env that is not registered here: spaces only


def _recordings_of(ds: Dataset, indices: Sequence[int]) -> list[int]:
    """The recordings the episodes come from (all, for none), ascending."""
    if not len(indices):
        return list(range(ds.num_recordings))
    return sorted(set(np.unique(ds._reads.summary()["recording"][np.asarray(indices, dtype=np.int64)]).tolist()))


def _check_spaces(ds: Dataset, used: Sequence[int]) -> None:
    # Minari has no multi-agent format: one agent's episodes (or agents of the same spaces)
    # export as a dataset of their own.
    first = (ds.meta(used[0]).get("user") or {}) if used else {}
    for r in used[1:]:
        user = ds.meta(r).get("user") or {}
        for key in ("observation_space", "action_space"):
            if user.get(key) != first.get(key):
                raise InvalidArgumentError(
                    f"recording {r} has another {key.replace('_', ' ')} than recording {used[0]}: a Minari dataset "
                    f"has one; export them apart (select recording={used[0]}, then recording={r}; or select one agent)"
                )


def _spaces(ds: Dataset, r: int) -> tuple[Any, Any]:
    """The observation and action spaces of recording `r`, rebuilt from its Meta record."""
    user = ds.meta(r).get("user") or {}
    columns = ds._core.columns(r)
    where = f"{ds.path}: recording {r}'s Meta record"
    return (
        rebuild_space(user.get("observation_space"), columns, "obs", "obs", where),
        rebuild_space(user.get("action_space"), columns, "action", "step", where),
    )


def _check_keys(ds: Dataset, indices: Sequence[int]) -> None:
    # Minari's HDF5 storage turns a key into a group path: a '/' inside a Dict key or an info key
    # would split it in two and the dataset would not read back.
    for leaf in plan_of(ds, indices).leaves:
        for part in leaf.path:
            if "/" in part:
                raise InvalidArgumentError(
                    f"{leaf.name}: the key {part!r} holds a '/', which Minari's HDF5 storage reads as a path; "
                    "such a dataset cannot be written as Minari (export it as parquet instead)"
                )


def write_minari(
    ds: Dataset, indices: Sequence[int], data_path: str, dataset_id: str, progress: Progress | None = None
) -> dict[str, int]:
    """Writes the given episodes as a Minari dataset whose data directory is `data_path`
    (``<datasets root>/<dataset_id>/data`` once in place).

    Returns:
        ``{"episodes": written, "steps": written, "skipped": episodes of no step}``.

    Raises:
        MissingDependencyError: minari, h5py or Pillow is not installed.
        InvalidArgumentError: recordings with different spaces, or a key holding a '/'.
    """
    minari = minari_module("Minari export")
    from minari.dataset.minari_storage import MinariStorage

    used = _recordings_of(ds, indices)
    _check_spaces(ds, used)
    _check_keys(ds, indices)
    user = (ds.meta(used[0]).get("user") or {}) if used else {}
    observation_space, action_space = _spaces(ds, used[0]) if used else (ds.observation_space, ds.action_space)
    options: dict[str, Any] = {}
    if "jpeg_encoding" in inspect.signature(MinariStorage.new).parameters:
        options["jpeg_encoding"] = False  # lossy JPEG would change image observations
    os.makedirs(data_path)
    storage = MinariStorage.new(
        data_path,
        observation_space=observation_space,
        action_space=action_space,
        env_spec=_env_spec(user.get("env_id")),
        data_format="hdf5",
        **options,
    )
    storage.update_metadata(
        {
            "dataset_id": dataset_id,
            "minari_version": str(minari.__version__),
            "description": f"Exported by trajcore from {ds.path}",
            "trajcore": {"metadata": ds.metadata, "env_id": user.get("env_id"), "source": ds.path},
        }
    )
    counts = {"episodes": 0, "steps": 0, "skipped": 0}
    episode_metadata: list[dict[str, Any]] = []

    def buffers() -> Iterator[Any]:
        from minari.data_collector import EpisodeBuffer

        for index in indices:
            ep = Episode(ds, int(index))
            if ep.length == 0:
                counts["skipped"] += 1
                continue
            yield EpisodeBuffer(
                observations=ep.observations,
                actions=ep.actions,
                rewards=ep.rewards,
                terminations=ep.terminations,
                truncations=ep.truncations,
                infos=episode_infos(ep),
            )
            episode_metadata.append(_episode_metadata(ep))
            counts["episodes"] += 1
            counts["steps"] += ep.length
            if progress is not None:
                progress(ep.length)

    storage.update_episodes(buffers())
    if episode_metadata:
        storage.update_episode_metadata(episode_metadata, range(len(episode_metadata)))
    return counts
