"""Minari import: a local Minari dataset rewritten as a trajcore dataset, so a Minari user gets
trajcore's training reads (sampling, sequences, zero-copy views) on the data they have.

Each Minari episode becomes one trajcore episode (a single env, env index 0), recorded step by
step through `RecordEpisodes` from an env that plays the episode back (`trajcore.record.replay`):
observations, actions, rewards, terminations, truncations and infos (a key with a ``_key`` mask
is given only where its mask is true, as trajcore exports them; without a mask, at every row). A dataset trajcore
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

import numpy as np

from trajcore._store import is_store_url, local_only
from trajcore.errors import InvalidArgumentError, TrajcoreFileNotFoundError
from trajcore.formats._fields import given_at
from trajcore.formats._read import Progress
from trajcore.formats.to_minari import DATA_KEY, minari_module
from trajcore.record.env_wrapper import RecordEpisodes
from trajcore.record.replay import PlaybackEnv, replay, value_row
from trajcore.tools.output import staged
from trajcore.tools.to_store import shards_under, written_to_store

__all__ = ["import_minari"]


def _decoded(v: Any) -> Any:
    # Minari's HDF5 storage gives str values back as bytes.
    return v.decode("utf-8") if isinstance(v, bytes) else v


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


def _start_lost(meta: Mapping[str, Any]) -> bool:
    """Whether a trajcore export says the episode was a part listed on its own (incomplete, yet
    ended by the env): imported as such, not as a whole episode."""
    ours = meta.get("trajcore")
    if not isinstance(ours, Mapping) or "complete" not in ours:
        return False
    return not bool(ours["complete"]) and (bool(ours.get("terminated")) or bool(ours.get("truncated")))


def import_minari(
    name_or_path: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    force: bool = False,
    zstd_level: int | None = 3,
    progress: Progress | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Writes a local Minari dataset as a trajcore dataset (see the module docstring).

    Args:
        name_or_path: a Minari dataset id found under Minari's local datasets root
            (``MINARI_DATASETS_PATH`` or ``~/.minari/datasets``), or the dataset's directory (or
            its ``data`` directory).
        dst: the trajcore dataset directory to create; written beside it and renamed into place
            when complete. Or a store prefix holding no shard yet (``s3://bucket/prefix``):
            written locally, its shards uploaded once complete.
        force: replace `dst` if it exists (a directory; a store's shards are never replaced).
        zstd_level: zstd level of every column (None: raw).
        progress: called with the steps of each episode once written.
        storage_options: options of `dst`'s store over the environment's (see `trajcore.open`).

    Returns:
        ``{"episodes": int, "steps": int, "shards": [paths or URLs]}``.

    Raises:
        MissingDependencyError: minari, h5py or Pillow is not installed.
        TrajcoreFileNotFoundError: no such local dataset.
        InvalidArgumentError: `dst` exists and `force` is False, or is a prefix holding shards;
            `name_or_path` is a URL (Minari's datasets are local).
        TrajcoreIOError: an upload to `dst` failed, naming the URL.
        SchemaError: a space trajcore cannot record (Sequence, Graph).
    """
    local_only(os.fspath(name_or_path), "a Minari dataset to import")
    minari = minari_module("import-minari")
    dataset = _open(minari, os.fspath(name_or_path))
    out = os.fspath(dst)
    playback = PlaybackEnv(dataset.observation_space, dataset.action_space, dataset.env_spec)
    episodes = steps = 0
    with (
        written_to_store(out, storage_options) if is_store_url(out) else staged(out, force) as tmp,
        RecordEpisodes(playback, tmp, _dataset_metadata(dataset), zstd_level=zstd_level) as rec,
    ):
        metas = dataset.storage.get_episode_metadata(dataset.episode_indices)
        for ep, meta in zip(dataset.iterate_episodes(), metas, strict=True):
            played = _MinariEpisode(ep)
            replay(rec, playback, played, _episode_metadata(meta), start_lost=_start_lost(meta))
            episodes += 1
            steps += played.length
            if progress is not None:
                progress(played.length)
        shards = shards_under(out, rec.shard_paths)
    return {"episodes": episodes, "steps": steps, "shards": shards}


class _MinariEpisode:
    """A Minari episode as the rows `replay` plays back (a `PlayedEpisode`); its custom data
    is taken out of the infos."""

    def __init__(self, ep: Any) -> None:
        self._ep = ep
        self._infos = dict(ep.infos or {})
        self._data = self._infos.pop(DATA_KEY, None) or {}
        self.length = len(ep.rewards)

    def observation(self, t: int) -> Any:
        return value_row(self._ep.observations, t)

    def info(self, t: int) -> dict[str, Any]:
        return given_at(self._infos, t, _decoded)

    def action(self, t: int) -> Any:
        return value_row(self._ep.actions, t)

    def reward(self, t: int) -> float:
        return float(self._ep.rewards[t])

    def terminated(self, t: int) -> bool:
        return bool(self._ep.terminations[t])

    def truncated(self, t: int) -> bool:
        return bool(self._ep.truncations[t])

    def data(self, t: int) -> dict[str, Any]:
        # Exported custom data of step t sits at info row t + 1.
        return given_at(self._data, t + 1, _decoded)
