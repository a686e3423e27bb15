"""A bounded recording (`capacity_steps`) started on a directory that already holds shards
counts them: the closed shards there, oldest first, with their transitions, as the core's
writer takes them (`prior_shards` of its config). The writer decides what to delete
(`writer::files::capacity` in the core); this only reads what is there."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from trajcore import _core
from trajcore.errors import InvalidArgumentError, TrajcoreError, TrajcoreWarning

__all__ = ["prior_shards", "refuse_filled_prefix", "refuse_shared_prefix"]


def prior_shards(path: str | os.PathLike[str], agent: str | None) -> list[tuple[str, int]]:
    """The shards in `path` (of `agent`'s recordings, for a multi-agent recorder; of
    single-agent recordings otherwise) and the transitions each holds, in the reader's order
    (oldest first). Empty for a new directory; a directory that cannot be read is counted as
    empty, with a `TrajcoreWarning` (its shards are then never deleted)."""
    directory = Path(path)
    if not directory.is_dir() or not any(directory.glob(f"*.{_core.SHARD_EXTENSION}")):
        return []
    from trajcore.read.dataset import open as open_dataset

    try:
        with open_dataset(directory) as existing:
            agents = [(existing.meta(r).get("user") or {}).get("agent") for r in range(existing.num_recordings)]
            steps = existing._core.shard_steps
            shards = zip(existing.shards, steps, strict=True)
            # Annotation sidecars hold no transitions of their own: never counted, never deleted.
            return [
                (file, n)
                for file, (r, n) in shards
                if agents[r] == agent and not file.endswith(f".{_core.ANNOTATION_EXTENSION}")
            ]
    except TrajcoreError as e:
        warnings.warn(
            f"trajcore: cannot count the transitions already in {directory} for capacity_steps: {e}",
            TrajcoreWarning,
            stacklevel=4,
        )
        return []


def refuse_filled_prefix(url: str) -> None:
    """Refuses a bounded recording into a store prefix that already holds shards: the writer
    counts (and deletes) only the shards it wrote, so a prefix's older shards would stay beyond
    the capacity (a local directory's are counted, `prior_shards`).

    Raises:
        InvalidArgumentError: the prefix holds shards; the message names it.
        TrajcoreIOError: the store failed (after its retries), naming the URL and why.
    """
    from trajcore.read.dataset import holds_shards

    if not holds_shards(url):
        return
    raise InvalidArgumentError(
        f"capacity_steps: {url} already holds shards, which a bounded recording into a store does not count: record "
        "into a new prefix (trajcore removes nothing from a store it did not write)"
    )


def refuse_shared_prefix(who: str, url: str, capacity_steps: object) -> None:
    """Refuses `capacity_steps` where several recorders (Ray actors, RLlib EnvRunners) would
    record into the one store prefix `url`: each would put its own eviction log over the
    others' (a directory's log is shared under a lock; a store has none).

    Raises:
        InvalidArgumentError: naming `who`, the URL and the option.
    """
    if capacity_steps is not None:
        raise InvalidArgumentError(
            f"{who}: capacity_steps with the store URL {url} is refused: several recorders would write one prefix's "
            "eviction log; record into a (shared) directory, or bound a single recorder's prefix"
        )
