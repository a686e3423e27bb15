"""`trajcore.verify` and `trajcore.recover`: damage found by tools, not by training."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from trajcore import _core
from trajcore._store import configure, is_store_url, recover_store
from trajcore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from trajcore.read.dataset import Dataset

__all__ = ["Damage", "VerifyReport", "recover", "verify"]


@dataclass(frozen=True)
class Damage:
    """One damaged spot: the file, the byte offset, what is wrong, the listed episodes (dataset
    indexes, as `trajcore.open` lists them without `verify`) whose data lies there, and how many
    episodes it took out of the listing (``unlisted``: a damaged Episode record's, as its own
    header counts them)."""

    file: str
    offset: int
    why: str
    episodes: tuple[int, ...]
    unlisted: int = 0


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` found. ``damage`` lists what opening found first, then what the checksums
    and decoding found, in file order."""

    path: str
    damage: tuple[Damage, ...]
    shards: int
    bytes: int
    records: int
    chunks: int
    decoded_bytes: int
    seconds: float

    @property
    def intact(self) -> bool:
        return not self.damage

    @property
    def damaged_episodes(self) -> list[int]:
        """Every episode some damage affects, ascending."""
        return sorted({e for d in self.damage for e in d.episodes})

    @property
    def episodes_lost(self) -> int:
        """Episodes lost to the damage: the listed ones it affects and those no longer listed."""
        return len(self.damaged_episodes) + sum(d.unlisted for d in self.damage)

    @property
    def mb_per_s(self) -> float:
        """File bytes checked per second, in MB (10^6 bytes)."""
        return self.bytes / 1e6 / max(self.seconds, 1e-9)


def _report(path: str, raw: dict[str, Any], seconds: float = 0.0) -> VerifyReport:
    damage = tuple(
        Damage(d["file"], int(d["offset"]), d["why"], tuple(int(e) for e in d["episodes"]), int(d.get("unlisted", 0)))
        for d in raw["damage"]
    )
    return VerifyReport(
        path=path,
        damage=damage,
        shards=int(raw["shards"]),
        bytes=int(raw["bytes"]),
        records=int(raw["records"]),
        chunks=int(raw["chunks"]),
        decoded_bytes=int(raw["decoded_bytes"]),
        seconds=seconds,
    )


def verify(path: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> VerifyReport:
    """Checks a dataset (directory or shard file) byte by byte: every record's checksum, every
    chunk decoded with its lengths, str offsets and UTF-8 checked. Runs on a few threads with
    the GIL released; memory stays at a chunk per thread beyond the memory map. `path` may be
    a URL, as `trajcore.open` takes it (with its `storage_options`).

    Returns:
        A `VerifyReport`; a file that is not a trajcore file is damage at its byte 0.

    Raises:
        TrajcoreFileNotFoundError: `path` does not exist.
        CorruptFileError: a file of another major format version.
        TrajcoreIOError: a store failed (after its retries) while checking: its error, naming the
            URL (a chunk the store did not give is no damage).
    """
    p = os.fspath(path)
    configure(p, storage_options)
    start = time.perf_counter()  # opening included
    ds = _opened(p)
    if ds is None:  # what opening trips on, the core's verification reports
        return _report(p, _core.verify(p), time.perf_counter() - start)
    with ds:  # opened once: the checks and the spaces' check read the same listing
        report = _report(p, ds._core.report("verify"), time.perf_counter() - start)
        return dataclasses.replace(report, damage=report.damage + _space_damage(p, ds))


def _opened(path: str) -> Dataset | None:
    """The dataset at `path`, or None when it does not open (a file that is not a trajcore file,
    a shard of another version...)."""
    from trajcore.errors import TrajcoreError
    from trajcore.read.dataset import Dataset

    try:
        return Dataset(path)
    except TrajcoreError:
        return None


def _space_damage(path: str, ds: Dataset) -> tuple[Damage, ...]:
    """The recordings whose observation or action space, as their Meta record describes it, does
    not match the columns the files hold (a shard cut right after its Meta record, a Column record
    rewritten with valid checksums): damage a reader trips on at `ds.observation_space`, which the
    checksums and chunk decoding cannot see. Named at the recording's Meta record, with its
    episodes."""
    invalid = _invalid_spaces(ds)
    if not invalid:
        return ()
    recording_of = ds.summaries()["recording"] if ds.num_episodes else np.zeros(0, np.int64)
    return tuple(Damage(path, 0, why, tuple(int(i) for i in np.flatnonzero(recording_of == r))) for r, why in invalid)


def _invalid_spaces_at(path: str) -> list[tuple[int, str]]:
    """`_invalid_spaces` of the dataset at `path`; none when it does not open (what opening trips
    on, the core's verification or open reports)."""
    ds = _opened(path)
    if ds is None:
        return []
    with ds:
        return _invalid_spaces(ds)


def _invalid_spaces(ds: Dataset) -> list[tuple[int, str]]:
    """(recording, why) for each recording whose Meta record describes a space its columns
    contradict (see `_space_damage`)."""
    from trajcore.errors import CorruptFileError
    from trajcore.read.records.meta import rebuild_space

    found = []
    for r in range(ds.num_recordings):
        user = ds.meta(r).get("user")
        for key, prefix, timeline in (("observation_space", "obs", "obs"), ("action_space", "action", "step")):
            desc = user.get(key) if isinstance(user, dict) else None
            if desc is None:
                continue
            try:
                rebuild_space(desc, ds._core.columns(r), prefix, timeline, f"recording {r}'s Meta record")
            except CorruptFileError as e:
                found.append((r, str(e)))
                break
    return found


def recover(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None = None,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Writes what of a damaged dataset still reads into a new dataset `dst`: every intact
    episode whole, and of each damaged one the steps before its first unreadable row (in any
    column), marked incomplete. `src` is only read; `dst` is written beside its final place and
    renamed into it when complete, and verifies intact. Episode metadata, env indexes, flags of
    whole episodes and custom data are kept; as with `convert`, the Meta record's autoreset mode
    becomes "disabled" (the original's, its env steps asked, the source and the time are kept
    in ``ds.meta()["user"]["recovered_from"]``) and recordings come out one after another.

    Without `dst`, `src` is a store prefix (``s3://bucket/run``) a recorder was killed while
    recording to: each shard it was writing is made, in the store, of the segments it uploaded
    (every whole record up to about a flush interval before the kill; docs/object-storage.md),
    and they are removed. Returns ``{"shards": [dicts: url, segments, bytes, already_up,
    left_out]}``; a store that fails raises `TrajcoreIOError` naming the URL.

    Args:
        src: the damaged dataset (directory or shard file).
        dst: the new dataset directory; it must not exist, or be empty.
        storage_options: the store's options (see `trajcore.open`), without `dst`.

    Returns:
        ``{"whole": int, "cut": int, "lost": int, "steps": int, "shards": [paths],
        "recordings_lost": [(file, offset, why)], "source": VerifyReport}``: episodes written
        whole, written as their intact prefix, and of which no step reads; recordings left out
        (their Meta record or column descriptions are lost, or their space descriptions
        contradict their columns).

    Raises:
        TrajcoreFileNotFoundError: `src` does not exist.
        CorruptFileError: `src` is one file that is not a trajcore file.
        InvalidArgumentError: `dst` exists and is not empty; or nothing of `src` reads (no
            episode has an intact step): no `dst` is written.
    """
    s = os.fspath(src)
    if dst is None:
        if not is_store_url(s):
            raise InvalidArgumentError(f"recover {s}: name the new dataset directory (only a store URL needs none)")
        return {"shards": recover_store(s, storage_options)}
    if is_store_url(s):
        configure(s, storage_options)
    out: dict[str, Any] = _core.recover(s, os.fspath(dst), _invalid_spaces_at(s))
    out["source"] = _report(s, out["source"])
    out["recordings_lost"] = [tuple(p) for p in out["recordings_lost"]]
    return out
