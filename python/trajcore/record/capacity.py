"""A bounded recording (`capacity_steps`) started on a directory (or store prefix) that already
holds shards counts them: the closed shards there, oldest first, with their transitions, as the
core's writer takes them (`prior_shards` of its config). The writer decides what to delete
(`writer::files::capacity` in the core); this only reads what is there."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from trajcore import _core
from trajcore._store import recover_store
from trajcore.errors import (
    TrajcoreError,
    TrajcoreFileNotFoundError,
    TrajcoreIOError,
    TrajcoreWarning,
)

__all__ = ["prior_shards"]


def prior_shards(
    path: str | os.PathLike[str], agent: str | None, staging: str | None = None, *, recover: bool = True
) -> list[tuple[str, int]]:
    """The shards in `path` (of `agent`'s recordings, for a multi-agent recorder; of
    single-agent recordings otherwise) and the transitions each holds, in the reader's order
    (oldest first). Empty for a new directory; a directory that cannot be read is counted as
    empty, with a `TrajcoreWarning` (its shards are then never deleted).

    `path` may be a store prefix (`s3://...`) recorded through the local directory `staging`:
    its shards are named as files of `staging` (the core's uploads delete the object of each
    evicted one by its name). The segments a killed recorder left there are made into its shard
    first (as `trajcore recover URL` does), so the capacity counts them as a killed local
    recording's last shard is counted (unless not `recover`: the caller did it before any of its
    recorders wrote, as the multi-agent recorders do, whose agents' recorders start one by
    one). The shards and segments of recordings that hold a fresh lease in the prefix (recorders
    still writing there, bounded or not: Ray actors, other processes; the core's `objstore::leases`)
    are left to them, as a directory's recorder leaves those of a recording whose shard lock is
    held. A store that fails is not taken for an empty prefix.

    Raises:
        TrajcoreIOError: the store failed (after its retries), naming the URL and why.
    """
    if staging is None:
        directory = Path(path)
        if not directory.is_dir() or not any(directory.glob(f"*.{_core.SHARD_EXTENSION}")):
            return []
    from trajcore.read.dataset import open as open_dataset

    if staging is not None and recover:
        recover_store(os.fspath(path), skip_live=True)
    try:
        with open_dataset(path) as existing:
            agents = [(existing.meta(r).get("user") or {}).get("agent") for r in range(existing.num_recordings)]
            steps = existing._core.shard_steps
            # Annotation sidecars hold no transitions of their own: never counted, never deleted.
            shards = [
                (file, n)
                for file, (r, n) in zip(existing.shards, steps, strict=True)
                if agents[r] == agent and not file.endswith(f".{_core.ANNOTATION_EXTENSION}")
            ]
        if staging is None:
            return shards
        # Asked after the listing: a recording whose shard was listed put its lease before it.
        names = [file.rsplit("/", 1)[-1] for file, _ in shards]
        live = _core.live_store_shards(os.fspath(path), names) if names else []
        kept = zip(names, shards, live, strict=True)
        return [(os.path.join(staging, name), n) for name, (_, n), alive in kept if not alive]
    except TrajcoreError as e:
        if staging is not None and isinstance(e, TrajcoreFileNotFoundError):
            return []  # a prefix with no shard yet
        if staging is not None and isinstance(e, TrajcoreIOError):
            raise
        warnings.warn(
            f"trajcore: cannot count the transitions already in {os.fspath(path)} for capacity_steps: {e}",
            TrajcoreWarning,
            stacklevel=4,
        )
        return []

