"""`trajcore.verify` and `trajcore.recover`: damage found by tools, not by training."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from trajcore import _core

__all__ = ["Damage", "VerifyReport", "recover", "verify"]


@dataclass(frozen=True)
class Damage:
    """One damaged spot: the file, the byte offset, what is wrong, and the listed episodes
    (dataset indexes, as `trajcore.open` lists them without `verify`) whose data lies there."""

    file: str
    offset: int
    why: str
    episodes: tuple[int, ...]


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
    def mb_per_s(self) -> float:
        """File bytes checked per second, in MB (10^6 bytes)."""
        return self.bytes / 1e6 / max(self.seconds, 1e-9)


def _report(path: str, raw: dict[str, Any], seconds: float = 0.0) -> VerifyReport:
    damage = tuple(
        Damage(d["file"], int(d["offset"]), d["why"], tuple(int(e) for e in d["episodes"])) for d in raw["damage"]
    )
    return VerifyReport(
        path=path,
        damage=damage,
        shards=int(raw["shards"]),
        bytes=int(raw["bytes"]),
        records=int(raw["records"]),
        chunks=int(raw["chunks"]),
        decoded_bytes=int(raw["decoded_bytes"]),
        seconds=float(raw.get("seconds", seconds)),
    )


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Checks a dataset (directory or shard file) byte by byte: every record's checksum, every
    chunk decoded with its lengths, str offsets and UTF-8 checked. Runs on a few threads with
    the GIL released; memory stays at a chunk per thread beyond the memory map.

    Returns:
        A `VerifyReport`; a file that is not a trajcore file is damage at its byte 0.

    Raises:
        TrajcoreFileNotFoundError: `path` does not exist.
        CorruptFileError: a file of another major format version.
    """
    p = os.fspath(path)
    return _report(p, _core.verify(p))


def recover(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> dict[str, Any]:
    """Writes what of a damaged dataset still reads into a new dataset `dst`: every intact
    episode whole, and of each damaged one the steps before its first unreadable row (in any
    column), marked incomplete. `src` is only read; `dst` is written beside its final place and
    renamed into it when complete, and verifies intact. Episode metadata, env indexes, flags of
    whole episodes and custom data are kept; as with `convert`, the Meta record's autoreset mode
    becomes "disabled" (the original's, its env steps asked, the source and the time are kept
    in ``ds.meta()["user"]["recovered_from"]``) and recordings come out one after another.

    Args:
        src: the damaged dataset (directory or shard file).
        dst: the new dataset directory; it must not exist, or be empty.

    Returns:
        ``{"whole": int, "cut": int, "lost": int, "steps": int, "shards": [paths],
        "recordings_lost": [(file, offset, why)], "source": VerifyReport}``: episodes written
        whole, written as their intact prefix, and of which no step reads; recordings left out
        (their Meta record or column descriptions are lost).

    Raises:
        TrajcoreFileNotFoundError: `src` does not exist.
        CorruptFileError: `src` is one file that is not a trajcore file.
        InvalidArgumentError: `dst` exists and is not empty.
    """
    s = os.fspath(src)
    out: dict[str, Any] = _core.recover(s, os.fspath(dst))
    out["source"] = _report(s, out["source"])
    out["recordings_lost"] = [tuple(p) for p in out["recordings_lost"]]
    return out
