"""An independent decoder of the trajcore file format, written from docs/FORMAT.md alone.

Pure Python (struct, json) plus `zstandard` and numpy; it never imports trajcore, so the tests
that compare it with trajcore's reader check the specification and the code against each other.
It is strict where the document is precise (checksums, sizes, alignment) and raises
`FormatError` on anything it does not expect; it is not meant to be fast.

    ds = DecodedDataset("runs/cartpole")         # a directory of shards, or one shard file
    ds.episodes[i]                               # DecodedEpisode: lane, rows, summary, metadata
    ds.read(i, "obs")                            # numpy array (or list of str) of one column
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zstandard

MAGIC = b"TRAJCORE"
HEADER_LEN = 64
RECORD_HEADER_LEN = 24
MAX_PAYLOAD = 1 << 40
NO_PREVIOUS = 0xFFFF_FFFF_FFFF_FFFF
DATA_ALIGN = 64

KIND_META, KIND_COLUMN, KIND_CHUNKS, KIND_EPISODE, KIND_INDEX, KIND_END, KIND_TIMELOG = 1, 2, 3, 4, 5, 6, 7
KIND_OPENING_COPIES = 8
KIND_NAMES: dict[int, str] = {
    1: "Meta",
    2: "Column",
    3: "Chunks",
    4: "Episode",
    5: "Index",
    6: "End",
    7: "Timelog",
    8: "OpeningCopies",
}
#: The fields of a Timelog entry, in order: (name, struct code).
TIMELOG_FIELDS = (
    ("t_s", "d"), ("dt_s", "d"), ("time_ns", "Q"), ("copy_s", "d"), ("encode_s", "d"), ("compress_s", "d"),
    ("write_s", "d"), ("fsync_s", "d"), ("idle_s", "d"), ("messages", "Q"), ("steps", "Q"), ("bytes_raw", "Q"),
    ("bytes_written", "Q"), ("ring_fill", "d"), ("ring_fill_max", "d"), ("ring_waits", "Q"),
    ("backlog_waits", "Q"), ("producer_wait_s", "d"),
)  # fmt: skip

CODEC_ZSTD, CODEC_DELTA, CODEC_STACK = 1, 2, 3
STACK_KEEP, STACK_SHIFT = 0, 1

#: File header required flag: Chunks and Index records may pack their tables; and the record
#: required flag (on those two kinds) saying this one does.
FILE_PACKED_TABLES = 1
#: File header required flag: the file is an annotation sidecar (FORMAT.md "Annotations").
FILE_ANNOTATION = 2
RECORD_PACKED_TABLE = 1
#: A packed table decodes to at most this many bytes per stored byte, plus 1 MiB.
PACKED_MAX_RATIO = 1024

FLAG_COMPLETE, FLAG_TERMINATED, FLAG_TRUNCATED, FLAG_CONTINUES, FLAG_DISCARDED = 1, 2, 4, 8, 16
CHUNK_REPEAT = 1
#: Chunk flag: the entry's bytes 52..56 hold the chunk's own checksum (a later addition).
CHUNK_CHECKSUM = 2

DTYPE_SIZES = {
    "bool": 1, "uint8": 1, "int8": 1,
    "uint16": 2, "int16": 2, "float16": 2,
    "uint32": 4, "int32": 4, "float32": 4,
    "uint64": 8, "int64": 8, "float64": 8,
}  # fmt: skip


class FormatError(ValueError):
    """The bytes do not follow docs/FORMAT.md."""


# --- CRC-32C (Castagnoli), table-driven -----------------------------------------------------


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc_table()


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C: reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def align_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


# --- Structures -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileHeader:
    version_major: int
    version_minor: int
    compat_flags: int
    recording_id: bytes
    shard_seq: int
    created_ns: int
    required_flags: int


@dataclass(frozen=True)
class Record:
    offset: int
    kind: int
    payload_crc: int
    payload_len: int
    required_flags: int
    compat_flags: int
    payload_ok: bool
    #: Offset of the next record (offset + align8(24 + payload_len)).
    next: int
    padding_zero: bool

    @property
    def payload_start(self) -> int:
        return self.offset + RECORD_HEADER_LEN


@dataclass(frozen=True)
class ChunkRef:
    lane: int
    column: int
    first_row: int
    n_rows: int
    codec: int
    record_offset: int
    #: Absolute file offset of the chunk's data.
    data_offset: int
    stored_len: int
    raw_len: int
    flags: int = 0
    #: With CHUNK_CHECKSUM: crc32c of the identity (lane, column, first_row, n_rows, codec,
    #: raw_len, flags) and the stored bytes.
    crc: int = 0

    @property
    def end_row(self) -> int:
        return self.first_row + self.n_rows

    @property
    def repeat(self) -> bool:
        return bool(self.flags & CHUNK_REPEAT)


@dataclass(frozen=True)
class EpisodeFixed:
    record_offset: int
    lane: int
    flags: int
    obs_first_row: int
    step_first_row: int
    length: int
    episode_return: float
    start_ns: int
    end_ns: int
    episode_id: int
    metadata_len: int
    metrics_len: int
    piece_obs_first_row: int
    piece_step_first_row: int
    piece_return: float
    first_shard_seq: int

    @property
    def continues(self) -> bool:
        return bool(self.flags & FLAG_CONTINUES)

    @property
    def discarded(self) -> bool:
        return bool(self.flags & FLAG_DISCARDED)

    def as_piece(self) -> EpisodeFixed:
        """The part of the episode in its record's shard."""
        skipped = self.piece_step_first_row - self.step_first_row
        return dataclasses.replace(
            self,
            flags=self.flags & ~FLAG_COMPLETE,  # a part is not a complete episode
            obs_first_row=self.piece_obs_first_row,
            step_first_row=self.piece_step_first_row,
            length=self.length - skipped,
            episode_return=self.piece_return,
        )

    @property
    def complete(self) -> bool:
        return bool(self.flags & FLAG_COMPLETE)

    @property
    def terminated(self) -> bool:
        return bool(self.flags & FLAG_TERMINATED)

    @property
    def truncated(self) -> bool:
        return bool(self.flags & FLAG_TRUNCATED)


@dataclass
class IndexDelta:
    offset: int
    prev_index: int
    #: (kind, offset) of Meta, Column and unknown-kind records.
    other_records: list[tuple[int, int]]
    chunks: list[ChunkRef]
    episode_records: list[int]


def check_opening_copies(buf: bytes, rec: Record) -> list[int]:
    """An Opening Copies record (format 1.2): `count u32, entry_len u16, reserved u16`, entries
    (`offset u64, len u64`, `entry_len` bytes each), then the copied records' bytes in order. Each
    copy must be the bytes of an Episode or Index record at its offset in this file; returns the
    offsets."""
    p = payload(buf, rec)
    count, entry_len = struct.unpack_from("<IH", p, 0)
    at = 8 + count * entry_len
    offsets = []
    for i in range(count):
        offset, n = struct.unpack_from("<QQ", p, 8 + i * entry_len)
        copy = p[at : at + n]
        original = frame(buf, offset)
        kind_ok = original is not None and original.kind in (KIND_EPISODE, KIND_INDEX)
        if len(copy) != n or original is None or not kind_ok or buf[offset : original.next] != copy:
            raise FormatError(f"episode copy {i} does not match the Episode record at {offset}")
        offsets.append(offset)
        at += n
    if at != len(p):
        raise FormatError(f"episode copies record has {len(p) - at} bytes after its copies")
    return offsets


def decode_timelog(buf: bytes, rec: Record) -> list[dict[str, float]]:
    """A Timelog record: ``n u32, entry_len u32``, then entries of the `TIMELOG_FIELDS` (8 bytes
    each); an entry may be longer than this decoder knows (the rest is skipped)."""
    p = payload(buf, rec)
    n, entry_len = struct.unpack_from("<II", p, 0)
    fmt = "<" + "".join(code for _, code in TIMELOG_FIELDS)
    if entry_len < struct.calcsize(fmt) or len(p) != 8 + n * entry_len:
        raise FormatError(f"timelog record at {rec.offset}: {len(p)} bytes for {n} entries of {entry_len}")
    names = [name for name, _ in TIMELOG_FIELDS]
    return [dict(zip(names, struct.unpack_from(fmt, p, 8 + i * entry_len), strict=True)) for i in range(n)]


# --- Parsing one shard ----------------------------------------------------------------------


def parse_header(buf: bytes) -> FileHeader:
    if len(buf) < 8 or buf[:8] != MAGIC:
        raise FormatError("bad magic")
    if len(buf) < HEADER_LEN:
        raise FormatError("file shorter than its 64-byte header")
    major, minor, compat = struct.unpack_from("<HHI", buf, 8)
    if major != 1:
        raise FormatError(f"major version {major}, this decoder reads 1")
    (crc,) = struct.unpack_from("<I", buf, 60)
    if crc32c(buf[0:60]) != crc:
        raise FormatError("file header checksum mismatch")
    (required,) = struct.unpack_from("<I", buf, 48)
    if required & ~(FILE_PACKED_TABLES | FILE_ANNOTATION):
        raise FormatError(f"the file needs format features {required:#x} this decoder does not know")
    shard_seq, created_ns = struct.unpack_from("<QQ", buf, 32)
    return FileHeader(major, minor, compat, bytes(buf[16:32]), shard_seq, created_ns, required)


def frame(buf: bytes, offset: int) -> Record | None:
    """The record at `offset`, or None if its header is cut short, damaged or runs past the end."""
    if offset + RECORD_HEADER_LEN > len(buf):
        return None
    kind, payload_crc, payload_len, required, compat, header_crc = struct.unpack_from("<IIQHHI", buf, offset)
    if crc32c(buf[offset : offset + 20]) != header_crc or payload_len > MAX_PAYLOAD:
        return None
    start = offset + RECORD_HEADER_LEN
    nxt = offset + align_up(RECORD_HEADER_LEN + payload_len, 8)
    if nxt > len(buf):
        return None
    payload_ok = crc32c(buf[start : start + payload_len]) == payload_crc
    padding_zero = not any(buf[start + payload_len : nxt])
    return Record(offset, kind, payload_crc, payload_len, required, compat, payload_ok, nxt, padding_zero)


def hop(buf: bytes) -> tuple[list[Record], int | None]:
    """Every record from offset 64 on, by their headers; and where the hop stopped short of the
    end of the file (None if it reached it, or an End record)."""
    records: list[Record] = []
    at = HEADER_LEN
    while at < len(buf):
        rec = frame(buf, at)
        if rec is None:
            return records, at
        records.append(rec)
        at = rec.next
        if rec.kind == KIND_END and rec.payload_ok and rec.payload_len == 8:
            return records, (None if at == len(buf) else at)
    return records, None


def payload(buf: bytes, rec: Record) -> bytes:
    return buf[rec.payload_start : rec.payload_start + rec.payload_len]


def unpack_table(stored: bytes, n: int, entry_len: int) -> bytes:
    """A packed table: one zstd frame of the `n` entries' bytes plane by plane (byte j of every
    entry, then byte j + 1, ...), returned as entries back to back."""
    size = n * entry_len
    if size > PACKED_MAX_RATIO * len(stored) + (1 << 20):
        raise FormatError(f"packed table of {n} entries of {entry_len} bytes in {len(stored)} bytes")
    try:
        declared = zstandard.get_frame_parameters(stored).content_size
        if declared != size:
            raise FormatError(f"packed table declares {declared} bytes, {n} entries need {size}")
        planes = zstandard.ZstdDecompressor().decompress(stored, max_output_size=size)
    except zstandard.ZstdError as e:
        raise FormatError(f"packed table: {e}") from e
    if len(planes) != size:
        raise FormatError("packed table decodes to another size")
    return np.frombuffer(planes, np.uint8).reshape(entry_len, n).T.tobytes()


def _packed(rec: Record) -> bool:
    """Whether a Chunks or Index record packs its table; other required flags are refused."""
    if rec.required_flags & ~RECORD_PACKED_TABLE:
        raise FormatError(f"record at {rec.offset} needs features {rec.required_flags:#x}")
    return bool(rec.required_flags & RECORD_PACKED_TABLE)


def decode_chunk_refs(buf: bytes, rec: Record) -> list[ChunkRef]:
    """The table of a Chunks record, with data offsets made absolute. Entries may be longer
    than the 56 bytes this decoder knows: the rest is skipped. A packed table (record flag 1)
    follows the data, which starts after a 16-byte header."""
    p = payload(buf, rec)
    packed = _packed(rec)
    head = 16 if packed else 8
    if len(p) < head:
        raise FormatError(f"chunks record at {rec.offset} shorter than its table header")
    n, entry = struct.unpack_from("<IH", p, 0)
    if entry < 56:
        raise FormatError(f"chunks record at {rec.offset}: entries of {entry} bytes")
    if packed:
        (table_len,) = struct.unpack_from("<Q", p, 8)
        if table_len > len(p) - head:
            raise FormatError(f"chunks record at {rec.offset}: packed table of {table_len} bytes does not fit")
        data_start, data_end = head, len(p) - table_len
        table = unpack_table(p[data_end:], n, entry)
    else:
        data_start, data_end = head + entry * n, len(p)
        if data_start > len(p):
            raise FormatError(f"chunks record at {rec.offset}: {n} entries do not fit")
        table = p[head:data_start]
    refs = []
    for i in range(n):
        lane, column, first_row, n_rows, codec, rel, stored_len, raw_len, flags, crc = struct.unpack_from(
            "<IIQIIQQQII", table, entry * i
        )
        if rel < data_start or rel + stored_len > data_end:
            raise FormatError(f"chunk {i} of record {rec.offset} points outside its payload")
        refs.append(
            ChunkRef(
                lane,
                column,
                first_row,
                n_rows,
                codec,
                rec.offset,
                rec.payload_start + rel,
                stored_len,
                raw_len,
                flags,
                crc,
            )
        )
    return refs


EPISODE_FIXED = "<IIQQQdQQQIIQQdQ"  # the 104 bytes this decoder knows of a fixed part


def _episode_fixed(b: bytes, at: int, record_offset: int) -> EpisodeFixed:
    return EpisodeFixed(record_offset, *struct.unpack_from(EPISODE_FIXED, b, at))


def decode_episodes(buf: bytes, rec: Record) -> list[tuple[EpisodeFixed, Any]]:
    """An Episode record: a batch of (fixed part, metadata) in order."""
    p = payload(buf, rec)
    if len(p) < 16:
        raise FormatError(f"episode record at {rec.offset} shorter than its 16-byte header")
    count, fixed_len, required, body_len = struct.unpack_from("<IHHQ", p, 0)
    if fixed_len < struct.calcsize(EPISODE_FIXED):
        raise FormatError(f"episode record at {rec.offset}: fixed parts of {fixed_len} bytes")
    if required & ~1:
        raise FormatError(f"episode record at {rec.offset} needs features {required:#x}")
    body = p[16:]
    if required & 1:
        body = zstandard.ZstdDecompressor().decompress(body, max_output_size=body_len)
    if len(body) != body_len or count * fixed_len > body_len:
        raise FormatError(f"episode record at {rec.offset}: body length does not match")
    fixed = [_episode_fixed(body, i * fixed_len, rec.offset) for i in range(count)]
    at = count * fixed_len
    metas = []
    for ep in fixed:
        text = body[at : at + ep.metadata_len]
        at += ep.metadata_len
        metas.append(json.loads(text.decode("utf-8")) if ep.metadata_len else {})
    at += sum(ep.metrics_len for ep in fixed)
    if at != len(body):
        raise FormatError(f"episode record at {rec.offset}: metadata and metrics lengths do not add up")
    return list(zip(fixed, metas, strict=True))


def decode_index(buf: bytes, rec: Record) -> IndexDelta:
    """An Index record; every part may be longer than this decoder knows (the rest is skipped)."""
    p = payload(buf, rec)
    if len(p) < 32:
        raise FormatError(f"index record at {rec.offset} shorter than 32 bytes")
    prev, head, other, ref, epi, n_other, n_chunks, n_episodes = struct.unpack_from("<QHHHHIII", p, 0)
    if head < 32 or other < 16 or ref < 64 or epi < 8:
        raise FormatError(f"index record at {rec.offset}: entry sizes {head}/{other}/{ref}/{epi}")
    rest = head + other * n_other + epi * n_episodes
    packed = _packed(rec)
    refs_len = len(p) - rest if packed else ref * n_chunks
    if len(p) != rest + refs_len or refs_len < 0:
        raise FormatError(f"index record at {rec.offset}: length does not match its counts")
    at = head
    others = []
    for _ in range(n_other):
        kind, _, offset = struct.unpack_from("<IIQ", p, at)
        others.append((kind, offset))
        at += other
    refs = unpack_table(p[at : at + refs_len], n_chunks, ref) if packed else p[at : at + refs_len]
    chunks = [ChunkRef(*struct.unpack_from("<IIQIIQQQQII", refs, i * ref)) for i in range(n_chunks)]
    at += refs_len
    episode_records = []
    for _ in range(n_episodes):
        episode_records.append(struct.unpack_from("<Q", p, at)[0])
        at += epi
    return IndexDelta(rec.offset, prev, others, chunks, episode_records)


def index_chain(buf: bytes) -> list[IndexDelta] | None:
    """The clean path: the Index deltas from the End record back, returned oldest first; None
    when the file has no valid End record. Raises FormatError on a broken chain."""
    if len(buf) < HEADER_LEN + 32:
        return None
    end_at = len(buf) - 32
    end = frame(buf, end_at)
    if end is None or end.kind != KIND_END or end.payload_len != 8 or not end.payload_ok or end.next != len(buf):
        return None
    (at,) = struct.unpack("<Q", payload(buf, end))
    limit = end_at
    deltas = []
    while at != NO_PREVIOUS:
        if not HEADER_LEN <= at < limit:
            raise FormatError(f"index chain points to {at}, outside {HEADER_LEN}..{limit}")
        rec = frame(buf, at)
        if rec is None or rec.kind != KIND_INDEX or rec.next > limit or not rec.payload_ok:
            raise FormatError(f"index chain: no valid Index record at {at}")
        delta = decode_index(buf, rec)
        deltas.append(delta)
        limit = at
        at = delta.prev_index
    deltas.reverse()
    return deltas


@dataclass
class DecodedShard:
    path: str
    buf: bytes
    header: FileHeader
    #: Records found by hopping headers, in file order.
    records: list[Record]
    #: Where the hop stopped short (damage or a cut), or None.
    stopped_at: int | None
    #: The Index deltas of a closed file (oldest first), or None without an End record.
    chain: list[IndexDelta] | None
    meta: Any = None
    columns: dict[int, dict[str, Any]] = field(default_factory=dict)
    chunks: list[ChunkRef] = field(default_factory=list)
    #: (fixed part, metadata), in record order.
    episodes: list[tuple[EpisodeFixed, Any]] = field(default_factory=list)
    #: (offset, kind) of records of kinds this decoder does not know, skipped.
    skipped: list[tuple[int, int]] = field(default_factory=list)
    #: Timelog samples, in file order.
    timelog: list[dict[str, float]] = field(default_factory=list)
    #: File offsets of the records an Opening Copies record copies (each checked equal).
    copied: list[int] = field(default_factory=list)


def open_shard(path: str | os.PathLike[str], *, use_index: bool = True) -> DecodedShard:
    """Decodes one shard: by its index chain when it is closed (and `use_index`), else (the
    recovery path) by hopping headers and decoding every record after the last valid Index."""
    with open(path, "rb") as f:
        buf = f.read()
    header = parse_header(buf)
    records, stopped_at = hop(buf)
    chain = index_chain(buf)
    shard = DecodedShard(os.fspath(path), buf, header, records, stopped_at, chain)
    by_offset = {r.offset: r for r in records}

    def take_other(offset: int) -> None:
        rec = by_offset.get(offset) or frame(buf, offset)
        if rec is None or not rec.payload_ok:
            raise FormatError(f"record at {offset} is damaged")
        if rec.kind not in KIND_NAMES:
            shard.skipped.append((offset, rec.kind))  # a newer writer's kind: skipped
            return
        text = payload(buf, rec).decode("utf-8") if rec.kind in (KIND_META, KIND_COLUMN) else ""
        if rec.kind == KIND_META:
            if shard.meta is None:
                shard.meta = json.loads(text)
        elif rec.kind == KIND_COLUMN:
            spec = json.loads(text)
            shard.columns[spec["id"]] = spec
        elif rec.kind == KIND_TIMELOG:
            shard.timelog.extend(decode_timelog(buf, rec))
        elif rec.kind == KIND_OPENING_COPIES:
            shard.copied.extend(check_opening_copies(buf, rec))
        else:
            raise FormatError(f"index lists a {KIND_NAMES.get(rec.kind)} record as meta/column at {offset}")

    def take_delta(delta: IndexDelta) -> None:
        for _, offset in delta.other_records:
            take_other(offset)
        shard.chunks.extend(delta.chunks)
        for offset in delta.episode_records:
            rec = by_offset.get(offset) or frame(buf, offset)
            if rec is None or rec.kind != KIND_EPISODE or not rec.payload_ok:
                raise FormatError(f"no valid Episode record at {offset}")
            shard.episodes.extend(decode_episodes(buf, rec))

    if chain is not None and use_index:
        for delta in chain:
            take_delta(delta)
        return shard

    pending: list[Record] = []
    for rec in records:
        if rec.kind == KIND_INDEX and rec.payload_ok:
            take_delta(decode_index(buf, rec))
            pending.clear()
        elif rec.kind in (KIND_META, KIND_COLUMN, KIND_CHUNKS, KIND_EPISODE, KIND_TIMELOG):
            pending.append(rec)
        elif rec.kind not in KIND_NAMES:
            shard.skipped.append((rec.offset, rec.kind))
    for rec in pending:
        if not rec.payload_ok:
            continue  # damaged on its own: left out
        if rec.kind in (KIND_META, KIND_COLUMN, KIND_TIMELOG):
            take_other(rec.offset)
        elif rec.kind == KIND_CHUNKS:
            shard.chunks.extend(decode_chunk_refs(buf, rec))
        else:
            shard.episodes.extend(decode_episodes(buf, rec))
    return shard


# --- Chunk data -----------------------------------------------------------------------------


def row_bytes(spec: dict[str, Any]) -> int | None:
    if spec["dtype"] == "str":
        return None
    n = DTYPE_SIZES[spec["dtype"]]
    for d in spec["shape"]:
        n *= d
    return n


def codec_ids(codec: int) -> list[int]:
    ids = []
    for i in range(4):
        b = (codec >> (8 * i)) & 0xFF
        if b == 0:
            break
        ids.append(b)
    return ids


def chunk_crc(ref: ChunkRef, data: bytes) -> int:
    """crc32c of a chunk's identity, then its stored bytes (FORMAT.md, Chunks)."""
    identity = struct.pack(
        "<IIQIIQI", ref.lane, ref.column, ref.first_row, ref.n_rows, ref.codec, ref.raw_len, ref.flags
    )
    return crc32c(identity + bytes(data))


def decode_chunk(buf: bytes, ref: ChunkRef, spec: dict[str, Any], *, verified: bool = False) -> bytes:
    """The decoded bytes of one chunk. Its own checksum (CHUNK_CHECKSUM), else its Chunks
    record's, is checked first, unless the caller did (`verified`)."""
    data = buf[ref.data_offset : ref.data_offset + ref.stored_len]
    if len(data) != ref.stored_len:
        raise FormatError("chunk data outside the file")
    if not verified and ref.flags & CHUNK_CHECKSUM:
        if chunk_crc(ref, data) != ref.crc:
            raise FormatError(f"chunk at {ref.data_offset} fails its checksum")
    elif not verified:
        rec = frame(buf, ref.record_offset)
        if rec is None or rec.kind != KIND_CHUNKS or not rec.payload_ok:
            raise FormatError(f"chunks record at {ref.record_offset} is damaged")
    rb = row_bytes(spec)
    for cid in reversed(codec_ids(ref.codec)):
        if cid == CODEC_ZSTD:
            # The frame-stack filter's output (undone after zstd) is longer by at most its header
            # and a byte a row.
            limit = ref.raw_len + (4 + ref.n_rows if CODEC_STACK in codec_ids(ref.codec) else 0)
            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=limit)
        elif cid == CODEC_DELTA:
            if not rb:
                raise FormatError("delta on a variable-length column")
            rows = np.frombuffer(data, np.uint8).reshape(-1, rb)
            # A running sum down the rows, wrapping mod 256, undoes the byte-wise difference.
            data = np.cumsum(rows, axis=0, dtype=np.uint8).tobytes()
        elif cid == CODEC_STACK:
            if not rb:
                raise FormatError("frame-stack codec on a variable-length column")
            data = _unstack(bytes(data), rb, ref.n_rows)
        else:
            raise FormatError(f"unknown codec id {cid}")
    if len(data) != ref.raw_len:
        raise FormatError(f"chunk decoded to {len(data)} bytes, expected {ref.raw_len}")
    return bytes(data)


def _unstack(data: bytes, rb: int, n_rows: int) -> bytes:
    """Undoes the frame-stack filter: `stack u32`, a kind byte a row, then each row whole (keep)
    or only its last frame (shift: the previous row's frames 1.. come first)."""
    if len(data) < 4 + n_rows:
        raise FormatError("frame-stack data shorter than its row kinds")
    (stack,) = struct.unpack_from("<I", data, 0)
    if stack < 2 or rb % stack:
        raise FormatError(f"{rb}-byte rows do not split into {stack} frames")
    frame = rb // stack
    kinds, at, rows = data[4 : 4 + n_rows], 4 + n_rows, []
    for r, kind in enumerate(kinds):
        if kind == STACK_KEEP:
            rows.append(data[at : at + rb])
            at += rb
        elif kind == STACK_SHIFT and r > 0:
            rows.append(rows[-1][frame:] + data[at : at + frame])
            at += frame
        else:
            raise FormatError(f"row {r}: frame-stack row kind {kind}")
        if len(rows[-1]) != rb or at > len(data):
            raise FormatError("frame-stack rows cut short")
    if at != len(data):
        raise FormatError("frame-stack data past the last row")
    return b"".join(rows)


def chunk_rows(raw: bytes, ref: ChunkRef, spec: dict[str, Any]) -> list[Any]:
    """A decoded chunk as a list of rows: bytes for fixed-size columns, str for str columns."""
    rb = row_bytes(spec)
    if rb is not None:
        if len(raw) != rb * ref.n_rows:
            raise FormatError("fixed-size chunk of the wrong length")
        return [raw[i * rb : (i + 1) * rb] for i in range(ref.n_rows)]
    n = ref.n_rows
    offsets = struct.unpack_from(f"<{n + 1}Q", raw, 0)
    text = raw[8 * (n + 1) :]
    if offsets[0] != 0 or offsets[-1] != len(text) or list(offsets) != sorted(offsets):
        raise FormatError("str chunk offsets are inconsistent")
    return [text[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]


# --- A dataset ------------------------------------------------------------------------------


@dataclass
class DecodedEpisode:
    recording: bytes
    shard: int
    fixed: EpisodeFixed
    metadata: Any


class DecodedDataset:
    """A shard file or a directory of `*.trj` shards, grouped by recording id."""

    def __init__(self, path: str | os.PathLike[str], *, use_index: bool = True) -> None:
        path = os.fspath(path)
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.endswith(".trj"))
            paths = [os.path.join(path, n) for n in names]
        else:
            paths = [path]
        self.shards = [open_shard(p, use_index=use_index) for p in paths]
        #: recording id -> {"meta", "columns": {id: spec}, "shards": {seq: index}}
        self.recordings: dict[bytes, dict[str, Any]] = {}
        #: (recording id, lane, column id) -> [(ChunkRef, shard index)], sorted by first row
        self.chunks: dict[tuple[bytes, int, int], list[tuple[ChunkRef, int]]] = {}
        self.episodes: list[DecodedEpisode] = []
        self._decoded: dict[tuple[int, int], list[Any]] = {}
        records: list[tuple[bytes, int, int, EpisodeFixed, Any]] = []
        for i, s in enumerate(self.shards):
            rid = s.header.recording_id
            r = self.recordings.setdefault(rid, {"meta": None, "columns": {}, "shards": {}})
            if s.header.shard_seq in r["shards"]:
                raise FormatError(f"two shards {s.header.shard_seq} of one recording")
            r["shards"][s.header.shard_seq] = i
            for cid, spec in s.columns.items():
                if r["columns"].setdefault(cid, spec) != spec:
                    raise FormatError(f"column {cid} described differently in two shards")
            for ref in s.chunks:
                self.chunks.setdefault((rid, ref.lane, ref.column), []).append((ref, i))
            for at, (ep, meta) in enumerate(s.episodes):
                records.append((rid, i, at, ep, meta))
        for r in self.recordings.values():
            first = self.shards[r["shards"][min(r["shards"])]]
            r["meta"] = first.meta
        for key, lst in self.chunks.items():
            # Repeated rows fill in only for a shard this dataset lacks.
            lst.sort(key=lambda x: (x[0].repeat, x[0].first_row))
            kept: list[tuple[ChunkRef, int]] = []
            for ref, i in lst:
                clash = any(k.first_row < ref.end_row and ref.first_row < k.end_row for k, _ in kept)
                if clash and not ref.repeat:
                    raise FormatError("overlapping chunks")
                if not clash:
                    kept.append((ref, i))
            self.chunks[key] = sorted(kept, key=lambda x: x[0].first_row)
        self._list(records)

    def _list(self, records: list[tuple[bytes, int, int, EpisodeFixed, Any]]) -> None:
        """Episodes in record order; the parts of an episode that ran over a rollover are merged
        into one listing when every shard from its first to its last record is here, else each
        part is listed on its own (FORMAT.md, "A dataset of shards")."""
        discarded = {(rid, ep.episode_id) for rid, _, _, ep, _ in records if ep.discarded}
        groups: dict[tuple[bytes, int], list[tuple[int, EpisodeFixed, Any]]] = {}
        position: dict[tuple[bytes, int], tuple[int, int]] = {}  # of its latest record: shard, place in it
        for rid, i, at, ep, meta in records:
            if (rid, ep.episode_id) not in discarded and not ep.discarded:
                groups.setdefault((rid, ep.episode_id), []).append((i, ep, meta))
                position[(rid, ep.episode_id)] = max(position.get((rid, ep.episode_id), (i, at)), (i, at))
        # Listed where its latest record is: shard by shard, in file order within a shard (the
        # episodes of one Episode record in their order there).
        order = sorted(groups, key=lambda k: position[k])
        for rid, episode_id in order:
            parts = sorted(groups[(rid, episode_id)], key=lambda x: self.shards[x[0]].header.shard_seq)
            last_shard, last, meta = parts[-1]
            seqs = self.recordings[rid]["shards"]
            last_seq = self.shards[last_shard].header.shard_seq
            if all(q in seqs for q in range(last.first_shard_seq, last_seq + 1)):
                self.episodes.append(DecodedEpisode(rid, last_shard, last, meta))
            else:
                # Of several parts in one shard (progress parts), the latest holds what the others do.
                latest = {i: (i, ep, m) for i, ep, m in parts}
                for i, ep, m in latest.values():
                    piece = ep.as_piece()
                    if piece.length > 0:  # a part without a step holds only a repeated row
                        self.episodes.append(DecodedEpisode(rid, i, piece, m))

    def column_names(self, recording: bytes) -> list[str]:
        cols = self.recordings[recording]["columns"]
        return [cols[i]["name"] for i in sorted(cols)]

    def spec(self, recording: bytes, name: str) -> dict[str, Any]:
        columns: dict[int, dict[str, Any]] = self.recordings[recording]["columns"]
        for spec in columns.values():
            if spec["name"] == name:
                return spec
        raise KeyError(name)

    def rows(self, recording: bytes, lane: int, spec: dict[str, Any], first: int, n: int) -> list[Any]:
        """Rows first..first+n of a column of a lane; rows no chunk covers are zeros / ""."""
        rb = row_bytes(spec)
        out: list[Any] = ["" if rb is None else bytes(rb)] * n
        for ref, shard in self.chunks.get((recording, lane, spec["id"]), []):
            lo, hi = max(ref.first_row, first), min(ref.end_row, first + n)
            if lo >= hi:
                continue
            key = (shard, ref.data_offset)
            if key not in self._decoded:
                s = self.shards[shard]
                ok = any(r.offset == ref.record_offset and r.kind == KIND_CHUNKS and r.payload_ok for r in s.records)
                raw = decode_chunk(s.buf, ref, spec, verified=ok)
                self._decoded[key] = chunk_rows(raw, ref, spec)
            rows = self._decoded[key]
            out[lo - first : hi - first] = rows[lo - ref.first_row : hi - ref.first_row]
        return out

    def read(self, episode: int, name: str) -> np.ndarray | list[str]:
        """One column of one episode: T+1 rows on the obs timeline, T on the step timeline."""
        e = self.episodes[episode]
        spec = self.spec(e.recording, name)
        if spec["timeline"] == "obs":
            first, n = e.fixed.obs_first_row, e.fixed.length + 1
        else:
            first, n = e.fixed.step_first_row, e.fixed.length
        rows = self.rows(e.recording, e.fixed.lane, spec, first, n)
        if spec["dtype"] == "str":
            return rows
        dtype = np.dtype(spec["dtype"]).newbyteorder("<")
        arr = np.frombuffer(b"".join(rows), dtype=dtype)
        return arr.reshape((n, *spec["shape"]))

    def read_info(self, episode: int, name: str) -> tuple[Any, np.ndarray]:
        """A masked column of one episode with its mask, merged with the columns that widen it
        (FORMAT.md, "Widened columns"): each row from the column whose mask holds it, every row
        in the last column's dtype."""
        e = self.episodes[episode]
        columns: dict[int, dict[str, Any]] = self.recordings[e.recording]["columns"]
        chain = [self.spec(e.recording, name)]
        while True:
            later = [c for c in columns.values() if c.get("widens") == chain[-1]["id"]]
            if not later:
                break
            chain.append(later[0])
        values: Any = None
        mask = np.zeros(0, dtype=bool)
        for spec in chain:
            v = np.asarray(self.read(episode, spec["name"]))
            m = np.asarray(self.read(episode, columns[spec["mask"]]["name"])).astype(bool)
            if values is None:
                values, mask = v, m
            else:
                values = values.astype(v.dtype)
                values[m] = v[m]
                mask = mask | m
        return values, mask
