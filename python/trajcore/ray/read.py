"""Reading a trajcore dataset as a `ray.data.Dataset`: `read_transitions` (a row per step) and
`read_episodes` (a row per episode).

Columns (the step-table names of the exports, arrays kept whole):

- transitions: ``episode`` (its index in ``trajcore.open(path)``), ``env_index``, ``step`` (0 ..
  T-1), ``obs/...`` (the observation the action was chosen on), ``next_obs/...`` (the one the
  step returned), ``action/...``, ``reward``, ``terminated``, ``truncated``, ``info/...`` (the
  info the step returned) and ``data/...`` (custom data recorded with the step);
- episodes: ``episode``, the summaries (``recording``, ``shard``, ``env_index``, ``episode_id``,
  ``length``, ``episode_return``, ``complete``, ``terminated``, ``truncated``, ``start_ns``,
  ``end_ns``), the metrics (``metrics/<name>/<stat>``), ``continued`` and ``continues`` (a part
  of an episode, see `Episode.is_part`), ``metadata`` (JSON text), then one column per leaf
  holding the episode's whole column: ``obs/...`` and ``info/...`` T + 1 rows, ``action/...``,
  ``reward``, ``terminated``, ``truncated``, ``data/...`` T rows.

A Dict or Tuple space is flattened to one column per leaf (``obs/pos``, ``action/0``; Dict keys
escaped, ``/`` as ``%2F``); an info or custom-data leaf comes with ``mask/<name>``, True where the
value was given (elsewhere the value reads as zeros, or ``""``). Rendered frames are left out,
as in the exports. Text leaves are str columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import ray.data

from trajcore.ray.datasource import TrajcoreDatasource
from trajcore.read.dataset import Dataset
from trajcore.read.episodes import Episodes

__all__ = ["read_episodes", "read_transitions"]

Source = str | os.PathLike[str] | Dataset | Episodes


def read_transitions(
    source: Source,
    *,
    columns: Iterable[str] | None = None,
    strict: bool = False,
    storage_options: Mapping[str, str] | None = None,
    **read_args: Any,
) -> ray.data.Dataset:
    """A `ray.data.Dataset` of transitions, one row per step, read by one task per shard (or per
    run of episodes of a big shard). Each episode is read whole by one task, even one that runs
    over several shards, so the rows are exactly those of ``trajcore.open(path)``, in dataset
    order within each task.

    Args:
        source: a dataset path or URL (``s3://bucket/prefix``), a `Dataset`, or `Episodes`
            (``ds.select(complete=True)``).
        columns: the leaves wanted, by name or '/'-bounded prefix (``["obs", "next_obs",
            "action", "reward", "terminated"]``); default all. ``episode``, ``env_index`` and
            ``step`` are always there.
        strict: damage raises `CorruptFileError` instead of warning.
        storage_options: for a URL, options of its store over the environment's (see
            `trajcore.open`), handed to every read task (a `Dataset` carries its own).
        **read_args: passed to `ray.data.read_datasource` (``override_num_blocks``,
            ``concurrency``, ``ray_remote_args``, ...).

    Raises:
        TrajcoreFileNotFoundError: the path does not exist.
        InvalidArgumentError: `columns` names no leaf; recordings of other spaces in one dataset.
    """
    datasource = TrajcoreDatasource(source, columns=columns, strict=strict, storage_options=storage_options)
    return _read(datasource, read_args)


def read_episodes(
    source: Source,
    *,
    columns: Iterable[str] | None = None,
    strict: bool = False,
    storage_options: Mapping[str, str] | None = None,
    **read_args: Any,
) -> ray.data.Dataset:
    """A `ray.data.Dataset` of episodes, one row per episode (see the module docstring for its
    columns); arguments as `read_transitions`. Each cell of a leaf column is the episode's whole
    column, so rows differ in length (Ray Data's variable-shaped tensors)."""
    datasource = TrajcoreDatasource(
        source, kind="episodes", columns=columns, strict=strict, storage_options=storage_options
    )
    return _read(datasource, read_args)


def _read(source: TrajcoreDatasource, read_args: dict[str, Any]) -> ray.data.Dataset:
    # Without a number of tasks from the caller, the datasource's: Ray's would be one per MiB.
    if read_args.get("override_num_blocks") is None and read_args.get("parallelism", -1) == -1:
        read_args = {**read_args, "override_num_blocks": source.default_tasks()}
        read_args.pop("parallelism", None)
    return ray.data.read_datasource(source, **read_args)
