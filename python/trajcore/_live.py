"""The recorders of this process, by the directory they write: a `Dataset.refresh` of that
directory flushes them first (at most once per `MIN_FLUSH_INTERVAL`), so a learner in the
recording process samples every transition whose step returned more than twice that before its
refresh, running episodes included (the flush writes a progress part of each; see
docs/replay-buffer.md). Another process sees them at the recorder's own flushes."""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Protocol

__all__ = ["MIN_FLUSH_INTERVAL", "flush_recorders", "key", "register", "unregister"]

# Half the freshness promised (100 ms): a flush at most this long ago covers every step that
# returned 100 ms before the refresh.
MIN_FLUSH_INTERVAL = 0.05


class _Flushable(Protocol):
    def _flush_for_readers(self) -> None: ...


_lock = threading.Lock()
_recorders: dict[str, weakref.WeakSet[_Flushable]] = {}
_last_flush: dict[str, float] = {}


def key(path: str | os.PathLike[str]) -> str:
    """What recorders of the directory `path` are registered under (a reader computes it once:
    resolving the path at every refresh would cost more than the refresh)."""
    return os.path.realpath(os.fspath(path))


def register(path: str | os.PathLike[str], recorder: _Flushable) -> None:
    """`recorder` writes into the directory `path` (until `unregister`)."""
    with _lock:
        _recorders.setdefault(key(path), weakref.WeakSet()).add(recorder)


def unregister(path: str | os.PathLike[str], recorder: _Flushable) -> None:
    with _lock:
        _recorders.get(key(path), weakref.WeakSet()).discard(recorder)


def flush_recorders(directory_key: str) -> None:
    """Flushes the recorders of this process writing into the directory whose `key` this is,
    unless that was done less than `MIN_FLUSH_INTERVAL` ago."""
    with _lock:
        now = time.monotonic()
        if now - _last_flush.get(directory_key, -1e9) < MIN_FLUSH_INTERVAL:
            return
        recorders = list(_recorders.get(directory_key, ()))
        if not recorders:
            return
        _last_flush[directory_key] = now
    for recorder in recorders:
        recorder._flush_for_readers()
