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
    InvalidArgumentError,
    TrajcoreError,
    TrajcoreFileNotFoundError,
    TrajcoreIOError,
    TrajcoreWarning,
)

__all__ = ["prior_shards", "refuse_shared_prefix"]


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
    one). A store that fails is not taken for an empty prefix.

    Raises:
        TrajcoreIOError: the store failed (after its retries), naming the URL and why.
    """
    if staging is None:
        directory = Path(path)
        if not directory.is_dir() or not any(directory.glob(f"*.{_core.SHARD_EXTENSION}")):
            return []
    from trajcore.read.dataset import open as open_dataset

    if staging is not None and recover:
        recover_store(os.fspath(path))
    try:
        with open_dataset(path) as existing:
            agents = [(existing.meta(r).get("user") or {}).get("agent") for r in range(existing.num_recordings)]
            steps = existing._core.shard_steps
            shards = zip(existing.shards, steps, strict=True)
            # Annotation sidecars hold no transitions of their own: never counted, never deleted.
            return [
                (file if staging is None else os.path.join(staging, file.rsplit("/", 1)[-1]), n)
                for file, (r, n) in shards
                if agents[r] == agent and not file.endswith(f".{_core.ANNOTATION_EXTENSION}")
            ]
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


def refuse_shared_prefix(who: str, url: str, capacity_steps: object) -> None:
    """Refuses `capacity_steps` where several recorders (Ray actors, RLlib EnvRunners, the
    agents of a multi-agent env) would record into the one store prefix `url`: a store has no
    lock a live writer holds (a directory's shard lock tells a recorder still writing from a
    stopped one), so a recorder could not tell the shards it may count and delete from those of
    another that is still writing; and each would put its own eviction log over the others'
    (a directory's log is changed under a lock; a store has none).

    Raises:
        InvalidArgumentError: naming `who`, the URL and the option.
    """
    if capacity_steps is not None:
        raise InvalidArgumentError(
            f"{who}: capacity_steps with the store URL {url} is refused: several recorders would share one prefix, "
            "whose shards and eviction log a store gives no lock to share; record into a (shared) directory, or bound "
            "a single recorder's prefix"
        )
