"""The recorders of this process, by the directory they write: a `Dataset.refresh` of that
directory asks them to flush first, so a learner in the recording process samples every
transition whose step returned 100 ms before its refresh, running episodes included (the flush
writes a progress part of each; see docs/replay-buffer.md). The core decides when a refresh asks
for a flush and when it waits for one (`reader_flush.rs`). Another process sees them at the
recorder's own flushes."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol

__all__ = ["flush_recorders", "key", "register", "unregister"]


class _Flushable(Protocol):
    def _flush_for_readers(self) -> None: ...


_lock = threading.Lock()
# Weak references (a recorder dropped without `close` is not kept alive), replaced whole under
# the lock so that `flush_recorders`, called at every refresh, reads them without it.
_recorders: dict[str, tuple[weakref.ref[_Flushable], ...]] = {}


def key(path: str | os.PathLike[str]) -> str:
    """What recorders of the directory `path` are registered under (a reader computes it once:
    resolving the path at every refresh would cost more than the refresh)."""
    return os.path.realpath(os.fspath(path))


def _replace(path: str | os.PathLike[str], recorder: _Flushable, add: bool) -> None:
    """The directory's recorders less `recorder` (and those gone), plus it again with `add`."""
    with _lock:
        k = key(path)
        kept = tuple(r for r in _recorders.get(k, ()) if (o := r()) is not None and o is not recorder)
        _recorders[k] = (*kept, weakref.ref(recorder)) if add else kept


def register(path: str | os.PathLike[str], recorder: _Flushable) -> None:
    """`recorder` writes into the directory `path` (until `unregister`)."""
    _replace(path, recorder, add=True)


def unregister(path: str | os.PathLike[str], recorder: _Flushable) -> None:
    _replace(path, recorder, add=False)


def flush_recorders(directory_key: str) -> None:
    """Lets the recorders of this process writing into the directory whose `key` this is flush
    as a refresh needs (waiting only when the newest flush written is too old)."""
    for ref in _recorders.get(directory_key, ()):
        recorder = ref()
        if recorder is not None:
            recorder._flush_for_readers()
