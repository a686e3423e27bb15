"""Datasets in object storage: the options of a URL's store, handed to the core (which keeps them
for the process: every later open of the same bucket or host uses them), recording to a store
through a local staging directory (`StoreStaging`: the core's writer uploads), and the shards
made of what a killed recorder left there (`recover_store`)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from trajcore import _core
from trajcore.errors import InvalidArgumentError

__all__ = ["StoreStaging", "configure", "is_store_url", "local_only", "recover_store"]

_STORE_SCHEMES = ("s3://", "s3a://", "http://", "https://")


def is_store_url(path: str | os.PathLike[str]) -> bool:
    return isinstance(path, str) and path.lower().startswith(_STORE_SCHEMES)


def configure(path: str, storage_options: Mapping[str, str] | None, *, check: bool = False) -> None:
    """Sets `storage_options` for the store `path` (a URL) is in; nothing without options, unless
    `check`: then the client the store's options so far and the environment make is checked (as
    options are when given), for a caller that would otherwise make its first request late (a
    recorder, at its first upload).

    Raises:
        InvalidArgumentError: `path` is not an s3:// or http(s):// URL, an option is unknown or
            its value bad, or an S3 endpoint is plain HTTP without ``allow_http``.
    """
    if storage_options or check:
        _core.configure_store(path, [(str(k), str(v)) for k, v in (storage_options or {}).items()])


class StoreStaging:
    """Where a recording to the store prefix `url` is written first: a local staging directory
    (``trajcore-staging-<url>-*`` under the temporary directory), whose shards the core's writer
    puts up as it writes them (see the core's `objstore::uploads`: the open shard's new records
    as segments about every flush interval, each sealed shard whole). The store's options are
    set now, so a bad URL or option fails when the recorder is made.

    `done` removes the staging directory once the recorder closed with every shard up; after a
    failed close it stays (its shards are whole), and the recorder's error names it."""

    def __init__(self, url: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        configure(self.url, storage_options, check=True)  # a bad store fails now, not at close()
        slug = re.sub(r"[^A-Za-z0-9.-]+", "_", self.url.split("://", 1)[-1])[:80]
        self.staging = tempfile.mkdtemp(prefix=f"trajcore-staging-{slug}-")

    def done(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def recover_store(
    url: str, storage_options: Mapping[str, str] | None = None, *, skip_live: bool = False
) -> list[dict[str, Any]]:
    """Makes shards in the store of the segments a killed recorder left under the prefix `url`
    (see the core's `segments::recover_segments`), through files in a temporary directory
    removed after; what was done, per shard: url, segments, bytes, already_up, left_out. With
    `skip_live`, the segments of recordings that hold a fresh lease in the prefix (recorders
    still writing there: the core's `objstore::leases`) are left alone.

    Raises:
        TrajcoreIOError: the store failed (after its retries), naming the URL and why.
    """
    configure(url, storage_options)
    with tempfile.TemporaryDirectory(prefix="trajcore-recover-") as staging:
        return _core.recover_segments(url.rstrip("/"), staging, skip_live)


def local_only(path: str | os.PathLike[str] | None, what: str) -> None:
    """Refuses a store URL where `what` (``"the output"``, ``"import-minari's SOURCE"``) must be
    a local path.

    Raises:
        InvalidArgumentError: `path` is an s3:// or http(s):// URL; the message names it.
    """
    if path is not None and is_store_url(path):
        raise InvalidArgumentError(f"{path}: {what} needs a local path, not a store URL")
