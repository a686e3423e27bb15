"""Datasets in object storage: the options of a URL's store, handed to the core (which keeps them
for the process: every later open of the same bucket or host uses them), and recording to a
store through a local staging directory (`ShardUploader`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Mapping

from trajcore import _core
from trajcore.errors import RecorderError

__all__ = ["ShardUploader", "configure", "is_store_url"]

_STORE_SCHEMES = ("s3://", "s3a://", "http://", "https://")


def is_store_url(path: str | os.PathLike[str]) -> bool:
    return isinstance(path, str) and path.lower().startswith(_STORE_SCHEMES)


def configure(path: str, storage_options: Mapping[str, str] | None) -> None:
    """Sets `storage_options` for the store `path` (a URL) is in; nothing without options.

    Raises:
        InvalidArgumentError: `path` is not an s3:// or http(s):// URL, an option is unknown or
            its value bad.
    """
    if storage_options:
        _core.configure_store(path, [(str(k), str(v)) for k, v in storage_options.items()])


class ShardUploader:
    """Copies the shards a recorder writes into a local staging directory up to `url` (a store
    prefix): every `interval` seconds, each shard the writer has moved on from (all but the
    newest: names sort by creation) and not uploaded as it is now; at `close`, all of them. An
    object appears only when its upload is complete (see the core's `remote::upload`), so the
    store never shows part of a shard. What a kill -9 of the recorder loses from the store is
    the shard being written (it stays in the staging directory, which `close` removes only after
    every shard is up)."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url.rstrip("/")
        self.staging = tempfile.mkdtemp(prefix="trajcore-staging-")
        self._interval = interval
        self._uploaded: dict[str, tuple[int, int]] = {}
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="trajcore-upload", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._upload(final=False)
            except BaseException as e:  # kept for `close` to raise
                self._error = e
                return

    def _upload(self, final: bool) -> None:
        with self._lock:
            names = sorted(n for n in os.listdir(self.staging) if n.endswith(f".{_core.SHARD_EXTENSION}"))
            for name in names if final else names[:-1]:
                path = os.path.join(self.staging, name)
                st = os.stat(path)
                if self._uploaded.get(name) != (st.st_size, st.st_mtime_ns):
                    _core.upload_file(path, f"{self.url}/{name}")
                    self._uploaded[name] = (st.st_size, st.st_mtime_ns)

    def close(self) -> None:
        """Uploads what is left (the recorder is closed: every shard is sealed) and removes the
        staging directory.

        Raises:
            RecorderError: an upload failed (after the store's retries); the message names the
                URL and why. The staging directory is kept: its shards are whole.
        """
        self._stop.set()
        self._thread.join()
        try:
            if self._error is not None:
                raise self._error
            self._upload(final=True)
        except Exception as e:
            raise RecorderError(f"{self.url}: uploading the shards failed ({e}); they are in {self.staging}") from e
        shutil.rmtree(self.staging, ignore_errors=True)
