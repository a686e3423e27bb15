"""`trajcore.convert`: rewrite a dataset with other per-column codecs and chunk sizes."""

from __future__ import annotations

import json
import operator
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from trajcore import _core
from trajcore._store import is_store_url
from trajcore.errors import InvalidArgumentError
from trajcore.read.dataset import Dataset, members
from trajcore.read.episodes import Episodes
from trajcore.record.options import Codec, _check_codec
from trajcore.tools.to_store import shards_under, written_to_store

__all__ = ["convert"]


Source = str | os.PathLike[str] | Dataset | Episodes


def convert(
    src: Source | Sequence[Source],
    dst: str | os.PathLike[str],
    *,
    codecs: Mapping[str, Codec] | Literal["raw"] | None = None,
    chunk_bytes: int | None = None,
    max_shard_bytes: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    select: Mapping[str, Any] | None = None,
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Writes a copy of a dataset with other storage: e.g. recorded compressed, converted to raw
    columns for training (raw columns are read as zero-copy views and sampled without decoding).

    Every episode is kept with its order, env index, complete/terminated/truncated flags,
    return, start and end times, metadata, observations, actions, rewards, infos and custom
    data with their masks; each recording of the source becomes one recording of the copy
    (recordings written at the same time come out one after the other). What changes: the
    codecs and chunk sizes asked for, shard boundaries, and the Meta record's
    ``autoreset_mode`` (now "disabled", as the copy is replayed episode by episode). How the data
    was recorded is kept in ``ds.meta()["user"]["converted_from"]``: the original's autoreset
    mode, sub-envs and env steps asked, with the source path and when it was copied (``trajcore
    info`` shows them). Mask columns keep the writer's default codec.
    The copy is written next to `dst` and renamed into place when complete; to a store URL
    (``s3://bucket/prefix``), into a local temporary directory whose shards are uploaded once
    it is complete.

    Several sources (a list) are merged into one dataset: each source's recordings become
    recordings of the copy, in the order given, with their metadata and provenance. Sources
    whose observation or action spaces differ are refused (a dataset of both could not be
    sampled as one), unless `keys` chooses values they share. To merge without copying, put
    the shard files of several recordings in one directory: `trajcore.open` reads them as one
    dataset.

    Args:
        src: a dataset (path or URL, `Dataset`) or a selection of its episodes (`Episodes`,
            e.g. from `Dataset.select`: only those are copied); or a list of them.
        dst: the new dataset directory; it must not exist, or be empty. Or a store prefix
            that holds no shard yet.
        codecs: ``"raw"`` (every column uncompressed), or per-column storage keyed like the
            recorders' `codecs` (column name or '/'-bounded prefix, "info", "data", "reward",
            "default"), e.g. ``{"obs": {"zstd_level": None}}``. Columns no key matches keep
            their codec.
        chunk_bytes: target size of a chunk (raw bytes); None keeps the writer's default (1 MiB).
        max_shard_bytes: a new shard file starts past this size (default 1 GiB).
        storage_options: options of the store of `src` (a URL) and of `dst` (a URL), over
            those of the environment (see `trajcore.open`).
        select: filters of `Dataset.select` (``{"complete": True, "policy": "ppo"}``) applied
            to each source: only the episodes they keep are copied.
        keys: the values to keep, by column name or '/'-bounded prefix (``["obs/pos",
            "action", "info"]``); reward, terminated and truncated are always kept. The copy's
            observation and action spaces lose the Dict entries no key keeps (a key may not keep
            part of a Tuple). Sources whose spaces differ merge when what the keys keep of them
            is the same. Default: every value.

    Returns:
        ``{"episodes": int, "steps": int, "shards": [paths or URLs]}``.

    Raises:
        InvalidArgumentError: `dst` is not empty (a prefix that holds shards), an option is
            invalid, the sources' spaces differ (naming both; `keys` can choose values they
            share), or `keys` keep no observation or no action value, or part of a Tuple.
        CorruptFileError: the source is damaged where a copied episode needs it.
        TrajcoreIOError: an upload to `dst` failed, naming the URL.
    """
    sources: list[Source] = list(src) if isinstance(src, list | tuple) else [cast(Source, src)]
    if not sources:
        raise InvalidArgumentError("convert: no source given")
    picked = [_episodes_of(one, storage_options, select) for one in sources]
    kept = _checked_keys(keys)
    if kept is None:
        _check_same_spaces(sources, [dataset for dataset, _ in picked])
    rules: dict[str, Any] | None = None
    if codecs == "raw":
        rules = {"default": {"delta": False, "zstd_level": None}}
    elif codecs is not None:
        rules = {str(k): _check_codec(str(k), v) for k, v in codecs.items()}
    options = {"codecs": rules, "chunk_bytes": chunk_bytes, "max_shard_bytes": max_shard_bytes, "keys": kept}
    out = os.fspath(dst)

    def write(target: str) -> dict[str, Any]:
        if len(picked) == 1:
            ((dataset, episodes),) = picked
            return _convert(dataset, target, options, episodes)
        return _merge(sources, picked, target, options)

    if not is_store_url(out):
        return write(out)
    with written_to_store(out, storage_options) as local:
        result = write(local)
    return {**result, "shards": shards_under(out, result["shards"])}


def _episodes_of(
    src: Source, storage_options: Mapping[str, str] | None, select: Mapping[str, Any] | None
) -> tuple[Dataset, list[int] | None]:
    """The dataset of a source and the episodes of it to copy (None: all)."""
    episodes: list[int] | None = None
    if isinstance(src, Episodes):
        episodes = src.indices
        dataset = members(src)[0]
    elif isinstance(src, Dataset):
        dataset = src
    else:
        dataset = Dataset(src, storage_options=storage_options if is_store_url(src) else None)
    if select:
        kept = (dataset.episodes if episodes is None else Episodes(dataset, episodes)).select(**select)
        episodes = kept.indices
    return dataset, episodes


def _check_same_spaces(sources: list[Any], datasets: list[Dataset]) -> None:
    """Refuses sources whose recordings have other spaces than the first source's (the agents of
    a multi-agent dataset are compared agent by agent)."""
    first: dict[Any, tuple[Any, Any]] = {}
    for src, dataset in zip(sources, datasets, strict=True):
        for r in range(dataset.num_recordings):
            user = dataset.meta(r).get("user") or {}
            spaces = (user.get("observation_space"), user.get("action_space"))
            seen = first.setdefault(user.get("agent"), (spaces, src))
            if seen[0] != spaces:
                raise InvalidArgumentError(
                    f"convert: {_name(src)} holds recordings of other spaces than {_name(seen[1])} "
                    f"({spaces[0]}, {spaces[1]} there; {seen[0][0]}, {seen[0][1]} here): a dataset of both "
                    "could not be sampled as one; keys=[...] chooses the values to keep (those they share)"
                )


def _name(src: Any) -> str:
    if isinstance(src, Episodes):
        src = members(src)[0]
    return str(src.path) if isinstance(src, Dataset) else os.fspath(src)


def _checked_keys(keys: Sequence[str] | None) -> list[str] | None:
    if keys is None:
        return None
    if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
        raise InvalidArgumentError(f"convert: keys={keys!r}: give a list of column names or prefixes")
    return list(keys)


def _convert(dataset: Dataset, out: str, options: Mapping[str, Any], episodes: list[int] | None) -> dict[str, Any]:
    """The core's conversion of `episodes` (None: all) of `dataset` into `out` with `options`
    (its JSON: ints such as numpy's as Python ints)."""
    result: dict[str, Any] = _core.convert(
        dataset._core, out, json.dumps({**options, "episodes": episodes}, default=operator.index)
    )
    return result


def _merge(
    sources: list[Source], picked: list[tuple[Dataset, list[int] | None]], out: str, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Converts each source into a part of a sibling temporary directory, moves the parts'
    shards together and renames it into place at `out` (which must not exist, or be empty).
    With `keys`, the parts' spaces (what the keys kept) must agree."""
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidArgumentError(f"convert: {out} exists and is not an empty directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.merging-", dir=target.parent))
    try:
        episodes = steps = 0
        names: list[str] = []
        parts: list[Dataset] = []
        for i, (dataset, chosen) in enumerate(picked):
            part = staging / f"part-{i}"
            result = _convert(dataset, str(part), options, chosen)
            if options["keys"] is not None:
                parts.append(Dataset(part))
                _check_same_spaces(sources[: len(parts)], parts)
            episodes += result["episodes"]
            steps += result["steps"]
            for shard in result["shards"]:
                name = os.path.basename(shard)
                os.replace(shard, staging / name)
                names.append(name)
            shutil.rmtree(part)
        for opened in parts:
            opened.close()
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
    except BaseException:
        for opened in parts:
            opened.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"episodes": episodes, "steps": steps, "shards": [str(target / name) for name in names]}
