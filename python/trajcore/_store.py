"""Datasets in object storage: the options of a URL's store, handed to the core (which keeps them
for the process: every later open of the same bucket or host uses them), and recording to a
store through a local staging directory (`ShardUploader`), and the shards made of what a killed
recorder left there (`recover_store`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

from trajcore import _core
from trajcore.errors import InvalidArgumentError, RecorderError

__all__ = ["ShardUploader", "configure", "is_store_url", "local_only", "recover_store"]

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


class ShardUploader:
    """Copies the shards a recorder writes into a local staging directory up to `url` (a store
    prefix), configured with `storage_options` (see `configure`).

    Every `interval` seconds: first the open shard's new whole records (those the writer has
    handed to the OS) go up as a *segment* (see the core's `segments`: an object under
    ``<shard>.open/``, which a listing never shows as a shard); then each shard the writer has
    moved on from (all but the newest: names sort by creation) goes up whole, unless it is up as
    it is now, and its segments are removed. At `close`, every shard goes up whole. An object
    appears only when its upload is complete, so the store never shows part of a shard.

    What a kill -9 of the recorder loses from the store is what the writer wrote in the last
    interval or so (the records since the last segment): `trajcore recover URL` makes a shard
    of the segments. The staging directory (``trajcore-staging-<url>-*`` under the temporary
    directory) still holds every shard whole; `close` removes it only after every shard is up.

    Memory: one upload part (8 MiB) at a time, whatever the shard's or segment's size; the files
    are read as they go up. Bandwidth: each byte recorded goes up about twice (as a segment,
    then in its sealed shard); `bytes_uploaded` counts it."""

    def __init__(self, url: str, interval: float, storage_options: Mapping[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        configure(self.url, storage_options, check=True)  # a bad store fails now, not at close()
        slug = re.sub(r"[^A-Za-z0-9.-]+", "_", self.url.split("://", 1)[-1])[:80]
        self.staging = tempfile.mkdtemp(prefix=f"trajcore-staging-{slug}-")
        self.bytes_uploaded = 0
        self._interval = interval
        self._uploaded: dict[str, tuple[int, int]] = {}
        # Per shard with segments: (the file's identity, where its uploaded records end).
        self._segments: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="trajcore-upload", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            # A store that fails past its retries is tried again at the next interval, and at
            # `close`, which raises what it finds then: an outage of a few minutes costs nothing.
            with contextlib.suppress(Exception):
                self._upload(final=False)

    def _upload(self, final: bool) -> None:
        with self._lock:
            names = sorted(n for n in os.listdir(self.staging) if n.endswith(f".{_core.SHARD_EXTENSION}"))
            if not final:
                # The open shard's new records, and the last ones of a shard sealed since.
                for name in names[-1:] + [n for n in names[:-1] if n in self._segments and n not in self._uploaded]:
                    self._put_segment(name)
            for name in names if final else names[:-1]:
                path = os.path.join(self.staging, name)
                st = os.stat(path)
                if self._uploaded.get(name) != (st.st_size, st.st_mtime_ns):
                    _core.upload_file(path, f"{self.url}/{name}")
                    self.bytes_uploaded += st.st_size
                    self._uploaded[name] = (st.st_size, st.st_mtime_ns)
                if name in self._segments:
                    _core.remove_segments(f"{self.url}/{name}")
                    del self._segments[name]

    def _put_segment(self, name: str) -> None:
        identity, start = self._segments.get(name, (0, 0))
        end, now = _core.put_segment(os.path.join(self.staging, name), identity, start, f"{self.url}/{name}")
        self.bytes_uploaded += end - start
        # A file replaced since (compacted: finished) is not the one the segments come from: the
        # identity kept never matches it, so it goes up only whole.
        self._segments[name] = (identity or now, end)

    def close(self) -> None:
        """Uploads what is left (the recorder is closed: every shard is sealed) and removes the
        staging directory.

        Raises:
            RecorderError: an upload failed (after the store's retries); the message names the
                URL and why, and ends with the staging directory: its shards are whole, and kept.
        """
        self._stop.set()
        self._thread.join()
        try:
            self._upload(final=True)
        except Exception as e:
            raise RecorderError(f"{self.url}: uploading the shards failed ({e}); they are in {self.staging}") from e
        shutil.rmtree(self.staging, ignore_errors=True)


def recover_store(url: str, storage_options: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Makes shards in the store of the segments a killed recorder left under the prefix `url`
    (see the core's `segments::recover_segments`), through files in a temporary directory
    removed after; what was done, per shard: url, segments, bytes, already_up, left_out.

    Raises:
        TrajcoreIOError: the store failed (after its retries), naming the URL and why.
    """
    configure(url, storage_options)
    with tempfile.TemporaryDirectory(prefix="trajcore-recover-") as staging:
        return _core.recover_segments(url.rstrip("/"), staging)


def local_only(path: str | os.PathLike[str] | None, what: str) -> None:
    """Refuses a store URL where `what` (``"the output"``, ``"import-minari's SOURCE"``) must be
    a local path.

    Raises:
        InvalidArgumentError: `path` is an s3:// or http(s):// URL; the message names it.
    """
    if path is not None and is_store_url(path):
        raise InvalidArgumentError(f"{path}: {what} needs a local path, not a store URL")
