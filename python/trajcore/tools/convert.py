"""`trajcore.convert`: rewrite a dataset with other per-column codecs and chunk sizes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from trajcore import _core
from trajcore._store import is_store_url
from trajcore.read.dataset import Dataset, members
from trajcore.read.episodes import Episodes
from trajcore.record.options import Codec, _check_codec
from trajcore.tools.to_store import shards_under, written_to_store

__all__ = ["convert"]


def convert(
    src: str | os.PathLike[str] | Dataset | Episodes,
    dst: str | os.PathLike[str],
    *,
    codecs: Mapping[str, Codec] | Literal["raw"] | None = None,
    chunk_bytes: int | None = None,
    max_shard_bytes: int | None = None,
    storage_options: Mapping[str, str] | None = None,
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

    Args:
        src: a dataset (path or URL, `Dataset`) or a selection of its episodes (`Episodes`,
            e.g. from `Dataset.select`: only those are copied).
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

    Returns:
        ``{"episodes": int, "steps": int, "shards": [paths or URLs]}``.

    Raises:
        InvalidArgumentError: `dst` is not empty (a prefix that holds shards), or an option is
            invalid.
        CorruptFileError: the source is damaged where a copied episode needs it.
        TrajcoreIOError: an upload to `dst` failed, naming the URL.
    """
    episodes: list[int] | None = None
    if isinstance(src, Episodes):
        episodes = src.indices
        dataset = members(src)[0]
    elif isinstance(src, Dataset):
        dataset = src
    else:
        dataset = Dataset(src, storage_options=storage_options if is_store_url(src) else None)
    rules: dict[str, Any] | None = None
    if codecs == "raw":
        rules = {"default": {"delta": False, "zstd_level": None}}
    elif codecs is not None:
        rules = {str(k): _check_codec(str(k), v) for k, v in codecs.items()}
    rules_json = None if rules is None else json.dumps(rules)
    out = os.fspath(dst)
    if not is_store_url(out):
        result: dict[str, Any] = _core.convert(dataset._core, out, rules_json, chunk_bytes, max_shard_bytes, episodes)
        return result
    with written_to_store(out, storage_options) as local:
        result = _core.convert(dataset._core, local, rules_json, chunk_bytes, max_shard_bytes, episodes)
    return {**result, "shards": shards_under(out, result["shards"])}
