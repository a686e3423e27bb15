"""Where an export or a viewer page writes: never over an existing path without `force`, and never a half-written
file at the destination (a sibling temporary path is renamed into place once complete)."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from trajcore._store import local_only
from trajcore.errors import InvalidArgumentError

__all__ = ["check_destination", "staged"]


def check_destination(out: str, force: bool) -> None:
    """Refuses an existing destination unless `force`.

    Raises:
        InvalidArgumentError: `out` exists and `force` is False, or is a store URL.
    """
    local_only(out, "the output")
    if os.path.lexists(out) and not force:
        raise InvalidArgumentError(f"{out} already exists; pass force=True (--force) to overwrite it")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


@contextmanager
def staged(out: str, force: bool) -> Iterator[str]:
    """Yields a temporary path beside `out` to write to; when the block succeeds it replaces
    `out` (a file or a directory), when it fails it is removed and `out` is left as it was.

    Raises:
        InvalidArgumentError: `out` exists and `force` is False.
    """
    check_destination(out, force)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(out)}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        yield tmp
        if os.path.lexists(out) and (os.path.isdir(tmp) or os.path.isdir(out)):
            _remove(out)  # os.replace swaps files atomically, but cannot put anything over a directory
        os.replace(tmp, out)
    finally:
        _remove(tmp)
