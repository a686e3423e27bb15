"""Makes the hostile shards in this directory from the fuzz seeds (rust/fuzz/seeds/reader):
cut short, bytes flipped, and records whose payload is damaged but whose checksums were fixed
so the damage reaches the payload parsers.

    python tests/fuzz_regressions/make_hostile.py
"""

from __future__ import annotations

import struct
from pathlib import Path

HERE = Path(__file__).parent
SEEDS = HERE.parents[1] / "rust" / "fuzz" / "seeds" / "reader"
HEADER_LEN = 64
RECORD_HEADER_LEN = 24
KINDS = {1: "meta", 2: "column", 3: "chunks", 4: "episode", 5: "index", 6: "end"}


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def records(buf: bytes) -> list[tuple[int, int, int]]:
    """(offset, kind, payload length) of each record, trusting the lengths."""
    out = []
    at = HEADER_LEN
    while at + RECORD_HEADER_LEN <= len(buf):
        kind, _, length = struct.unpack_from("<IIQ", buf, at)
        if at + RECORD_HEADER_LEN + length > len(buf):
            break
        out.append((at, kind, length))
        at = (at + RECORD_HEADER_LEN + length + 7) // 8 * 8
    return out


def reseal(buf: bytearray, at: int) -> None:
    kind, _, length = struct.unpack_from("<IIQ", buf, at)
    payload = bytes(buf[at + RECORD_HEADER_LEN : at + RECORD_HEADER_LEN + length])
    struct.pack_into("<IIQ", buf, at, kind, _crc32c(payload), length)
    struct.pack_into("<I", buf, at + 20, _crc32c(bytes(buf[at : at + 20])))


def main() -> None:
    seed = (SEEDS / "nested.trj").read_bytes()
    (HERE / "cut-mid-record.trj").write_bytes(seed[: len(seed) * 2 // 3])
    (HERE / "cut-in-header.trj").write_bytes(seed[:40])
    flipped = bytearray(seed)
    for at in range(HEADER_LEN + 100, len(flipped), 997):
        flipped[at] ^= 0x5A
    (HERE / "flipped-bytes.trj").write_bytes(bytes(flipped))
    for kind_wanted in (2, 3, 4, 5):
        damaged = bytearray(seed)
        for at, kind, length in records(seed):
            if kind == kind_wanted and length >= 16:
                start = at + RECORD_HEADER_LEN
                for i in range(start, start + length, max(1, length // 7)):
                    damaged[i] = 0xFF
                reseal(damaged, at)
        (HERE / f"resealed-garbage-{KINDS[kind_wanted]}.trj").write_bytes(bytes(damaged))


if __name__ == "__main__":
    main()
