//! The Chunks record: a table of column chunks, then their data. Each chunk holds consecutive
//! rows of one column of one lane. Raw (codec 0) data starts on a 64-byte file offset so a memory
//! map can be viewed as an array in place; encoded data only needs 8 bytes, which saves padding
//! on the many small chunks a flush timer makes.
//!
//! Payload: `n u32, entry_size u16, reserved u16`, then `n` entries of `entry_size` bytes, of
//! which this version knows the first 56 (`lane u32, column u32, first_row u64, n_rows u32,
//! codec u32, data_offset u64, stored_len u64, raw_len u64, flags u32, crc u32` (`crc`: a later
//! addition, reserved before, see `CHUNK_CHECKSUM`),
//! `data_offset` counted from the payload start) and skips the rest, then the data. With
//! `record::PACKED_TABLE` (a later addition): `n u32, entry_size u16, reserved u16, table_len u64`,
//! the data, then the same entries packed (`format::packed`) in the last `table_len` bytes.

use std::borrow::Cow;

use super::packed;
use super::record::RECORD_HEADER_LEN;
use super::{align_up, u32_at, u64_at, DATA_ALIGN};

/// The entry fields this version writes and reads; a later minor version may write longer
/// entries (readers skip the bytes they do not know).
pub const ENTRY_LEN: usize = 56;
/// A chunk reference as the index stores it: the entry plus where its record starts.
pub const REF_LEN: usize = 64;
const TABLE_HEADER_LEN: usize = 8;
/// A packed table's header: the 1.0 header, then `table_len u64`.
const PACKED_HEADER_LEN: usize = 16;

/// Chunk flag: the rows repeat rows an earlier shard of the recording already holds (the last
/// observation row of an episode running at rollover, so the new shard's part of it stands on
/// its own). A reader that has that shard ignores the chunk.
pub const CHUNK_REPEAT: u32 = 1;

/// Chunk flag (a later addition): the entry's checksum field holds the chunk's checksum (`Identity::crc`), so
/// the chunk is checked on its own and damage elsewhere in its record does not touch it. Readers
/// that do not know the flag ignore it (and check the whole record, as before).
pub const CHUNK_CHECKSUM: u32 = 2;

/// The bytes a chunk's checksum covers besides its data: what says where its rows go and how to
/// decode them, so a damaged entry is caught like damaged data.
const IDENTITY_LEN: usize = 36;

/// What a chunk's checksum covers besides its data.
struct Identity {
    lane: u32,
    column: u32,
    first_row: u64,
    n_rows: u32,
    codec: u32,
    raw_len: u64,
    flags: u32,
}

impl Identity {
    /// crc32c of the identity (`lane u32, column u32, first_row u64, n_rows u32, codec u32,
    /// raw_len u64, flags u32`, flags with `CHUNK_CHECKSUM` set) followed by the stored bytes.
    fn crc(&self, data: &[u8]) -> u32 {
        let mut id = [0u8; IDENTITY_LEN];
        id[0..4].copy_from_slice(&self.lane.to_le_bytes());
        id[4..8].copy_from_slice(&self.column.to_le_bytes());
        id[8..16].copy_from_slice(&self.first_row.to_le_bytes());
        id[16..20].copy_from_slice(&self.n_rows.to_le_bytes());
        id[20..24].copy_from_slice(&self.codec.to_le_bytes());
        id[24..32].copy_from_slice(&self.raw_len.to_le_bytes());
        id[32..36].copy_from_slice(&(self.flags | CHUNK_CHECKSUM).to_le_bytes());
        crc32c::crc32c_append(crc32c::crc32c(&id), data)
    }
}

/// Where one chunk's bytes are and how to turn them back into rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkRef {
    pub lane: u32,
    pub column: u32,
    pub first_row: u64,
    pub n_rows: u32,
    pub codec: u32,
    /// File offset of the Chunks record holding this chunk (its checksum covers the data).
    pub record_offset: u64,
    /// Absolute file offset of the chunk's data.
    pub data_offset: u64,
    pub stored_len: u64,
    pub raw_len: u64,
    /// `CHUNK_REPEAT`, `CHUNK_CHECKSUM` or 0; unknown bits are ignored.
    pub flags: u32,
    /// With `CHUNK_CHECKSUM`: the chunk's checksum, `Identity::crc` (0 and unused without it).
    pub crc: u32,
}

impl ChunkRef {
    /// Whether the chunk carries its own checksum.
    pub fn has_checksum(&self) -> bool {
        self.flags & CHUNK_CHECKSUM != 0
    }

    /// Where the checksum that vouches for this chunk sits: its own data (a chunk with its own
    /// checksum) or its Chunks record (the record's payload checksum covers it).
    pub fn checked_at(&self) -> u64 {
        if self.has_checksum() {
            self.data_offset
        } else {
            self.record_offset
        }
    }

    /// Whether `data` (the chunk's stored bytes) and this reference are what the writer wrote.
    pub fn checksum_matches(&self, data: &[u8]) -> bool {
        let Self { lane, column, first_row, n_rows, codec, raw_len, flags, .. } = *self;
        self.crc == Identity { lane, column, first_row, n_rows, codec, raw_len, flags }.crc(data)
    }

    pub fn end_row(&self) -> u64 {
        self.first_row + self.n_rows as u64
    }

    pub fn encode_ref(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.lane.to_le_bytes());
        out.extend_from_slice(&self.column.to_le_bytes());
        out.extend_from_slice(&self.first_row.to_le_bytes());
        out.extend_from_slice(&self.n_rows.to_le_bytes());
        out.extend_from_slice(&self.codec.to_le_bytes());
        out.extend_from_slice(&self.record_offset.to_le_bytes());
        out.extend_from_slice(&self.data_offset.to_le_bytes());
        out.extend_from_slice(&self.stored_len.to_le_bytes());
        out.extend_from_slice(&self.raw_len.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    pub fn is_repeat(&self) -> bool {
        self.flags & CHUNK_REPEAT != 0
    }

    /// Decodes the first `REF_LEN` bytes of an index chunk reference.
    pub fn decode_ref(b: &[u8]) -> Self {
        ChunkRef {
            lane: u32_at(b, 0),
            column: u32_at(b, 4),
            first_row: u64_at(b, 8),
            n_rows: u32_at(b, 16),
            codec: u32_at(b, 20),
            record_offset: u64_at(b, 24),
            data_offset: u64_at(b, 32),
            stored_len: u64_at(b, 40),
            raw_len: u64_at(b, 48),
            flags: u32_at(b, 56),
            crc: u32_at(b, 60),
        }
    }
}

/// One chunk ready to be written.
#[derive(Debug, Clone)]
pub struct PendingChunk {
    pub lane: u32,
    pub column: u32,
    pub first_row: u64,
    pub n_rows: u32,
    pub codec: u32,
    pub raw_len: u64,
    pub data: Vec<u8>,
    pub flags: u32,
}

/// The parts of a Chunks payload that will start at file offset `record_offset`: `head`, then for
/// each chunk `gaps` zero bytes and its data, then `tail`. The writer sends the data from the
/// buffer it was sealed in instead of copying it into one payload.
pub struct Table {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    /// The references the index will hold.
    pub refs: Vec<ChunkRef>,
    /// Whether the table is packed (the record then needs `record::PACKED_TABLE`).
    pub packed: bool,
}

/// A 1.0 Chunks payload: the table, then the data.
pub fn encode(record_offset: u64, chunks: &[PendingChunk]) -> (Vec<u8>, Vec<ChunkRef>) {
    encode_with_entry_size(record_offset, chunks, ENTRY_LEN)
}

/// `encode` with entries of `entry_size` bytes (at least `ENTRY_LEN`; the extra bytes are what
/// a later version would add: tests write them to check readers skip them).
pub fn encode_with_entry_size(
    record_offset: u64,
    chunks: &[PendingChunk],
    entry_size: usize,
) -> (Vec<u8>, Vec<ChunkRef>) {
    let table = plain(record_offset, chunks, entry_size);
    (payload(record_offset, chunks, &table), table.refs)
}

/// A Chunks payload as a 1.0 writer wrote it: no chunk carries a checksum of its own (only the
/// record's covers them). For tests of files written before `CHUNK_CHECKSUM`.
pub fn encode_without_checksums(record_offset: u64, chunks: &[PendingChunk]) -> (Vec<u8>, Vec<ChunkRef>) {
    let mut table = plain(record_offset, chunks, ENTRY_LEN);
    for r in &mut table.refs {
        r.flags &= !CHUNK_CHECKSUM;
        r.crc = 0;
    }
    let mut head = table_header(chunks.len(), ENTRY_LEN);
    head.extend_from_slice(&entries(&table.refs, ENTRY_LEN));
    table.head = head;
    (payload(record_offset, chunks, &table), table.refs)
}

/// A payload with a packed table (header, data, packed table), whatever its size.
pub fn encode_packed(record_offset: u64, chunks: &[PendingChunk], entry_size: usize) -> (Vec<u8>, Vec<ChunkRef>) {
    let table = packed(record_offset, chunks, entry_size);
    (payload(record_offset, chunks, &table), table.refs)
}

fn payload(record_offset: u64, chunks: &[PendingChunk], table: &Table) -> Vec<u8> {
    let mut payload = table.head.clone();
    for (c, gap) in chunks.iter().zip(gaps(record_offset, table.head.len(), &table.refs)) {
        payload.resize(payload.len() + gap, 0);
        payload.extend_from_slice(&c.data);
    }
    payload.extend_from_slice(&table.tail);
    payload
}

/// The table the writer writes: packed when that is smaller than the 1.0 table.
pub fn table(record_offset: u64, chunks: &[PendingChunk]) -> Table {
    let packed = packed(record_offset, chunks, ENTRY_LEN);
    if packed.head.len() + packed.tail.len() < TABLE_HEADER_LEN + chunks.len() * ENTRY_LEN {
        packed
    } else {
        plain(record_offset, chunks, ENTRY_LEN)
    }
}

/// The 1.0 layout: `n u32, entry_size u16, reserved u16`, the entries, then the data.
fn plain(record_offset: u64, chunks: &[PendingChunk], entry_size: usize) -> Table {
    let refs = place(record_offset, chunks, TABLE_HEADER_LEN + chunks.len() * entry_size);
    let mut head = table_header(chunks.len(), entry_size);
    head.extend_from_slice(&entries(&refs, entry_size));
    Table { head, tail: Vec::new(), refs, packed: false }
}

/// The packed layout: `n u32, entry_size u16, reserved u16, table_len u64`, the data, then the
/// entries packed (`format::packed`) in the payload's last `table_len` bytes.
fn packed(record_offset: u64, chunks: &[PendingChunk], entry_size: usize) -> Table {
    let refs = place(record_offset, chunks, PACKED_HEADER_LEN);
    let tail = packed::pack(&entries(&refs, entry_size), entry_size);
    let mut head = table_header(chunks.len(), entry_size);
    head.extend_from_slice(&(tail.len() as u64).to_le_bytes());
    Table { head, tail, refs, packed: true }
}

fn table_header(n: usize, entry_size: usize) -> Vec<u8> {
    assert!(entry_size >= ENTRY_LEN && entry_size <= u16::MAX as usize);
    let mut head = Vec::with_capacity(PACKED_HEADER_LEN + n * entry_size);
    head.extend_from_slice(&(n as u32).to_le_bytes());
    head.extend_from_slice(&(entry_size as u16).to_le_bytes());
    head.extend_from_slice(&0u16.to_le_bytes());
    head
}

/// Where each chunk's data goes when the data starts `data_start` bytes into the payload: raw
/// data on a 64-byte file offset, encoded data on an 8-byte one.
fn place(record_offset: u64, chunks: &[PendingChunk], data_start: usize) -> Vec<ChunkRef> {
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut pos = data_start as u64;
    let mut refs = Vec::with_capacity(chunks.len());
    for c in chunks {
        let align = if c.codec == 0 { DATA_ALIGN } else { 8 };
        let data_offset = align_up(payload_start + pos, align) - payload_start;
        let flags = c.flags | CHUNK_CHECKSUM;
        refs.push(ChunkRef {
            lane: c.lane,
            column: c.column,
            first_row: c.first_row,
            n_rows: c.n_rows,
            codec: c.codec,
            record_offset,
            data_offset: payload_start + data_offset,
            stored_len: c.data.len() as u64,
            raw_len: c.raw_len,
            flags,
            crc: Identity {
                lane: c.lane,
                column: c.column,
                first_row: c.first_row,
                n_rows: c.n_rows,
                codec: c.codec,
                raw_len: c.raw_len,
                flags,
            }
            .crc(&c.data),
        });
        pos = data_offset + c.data.len() as u64;
    }
    refs
}

/// The table entries of `refs`, `entry_size` bytes each, data offsets counted from the payload.
fn entries(refs: &[ChunkRef], entry_size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(refs.len() * entry_size);
    for r in refs {
        let start = out.len();
        let payload_start = r.record_offset + RECORD_HEADER_LEN as u64;
        out.extend_from_slice(&r.lane.to_le_bytes());
        out.extend_from_slice(&r.column.to_le_bytes());
        out.extend_from_slice(&r.first_row.to_le_bytes());
        out.extend_from_slice(&r.n_rows.to_le_bytes());
        out.extend_from_slice(&r.codec.to_le_bytes());
        out.extend_from_slice(&(r.data_offset - payload_start).to_le_bytes());
        out.extend_from_slice(&r.stored_len.to_le_bytes());
        out.extend_from_slice(&r.raw_len.to_le_bytes());
        out.extend_from_slice(&r.flags.to_le_bytes());
        out.extend_from_slice(&r.crc.to_le_bytes());
        // What a later version may add: bytes this version does not know (tests set them).
        out.resize(start + entry_size, 0xA5);
    }
    out
}

/// The zero bytes (alignment) before each chunk's data, after a head of `head_len` bytes.
pub fn gaps(record_offset: u64, head_len: usize, refs: &[ChunkRef]) -> impl Iterator<Item = usize> + '_ {
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut end = head_len as u64;
    refs.iter().map(move |r| {
        let at = r.data_offset - payload_start;
        let gap = at - end;
        end = at + r.stored_len;
        gap as usize
    })
}

/// Bytes of a Chunks payload a reader needs to find where chunk data may lie (`data_area`).
pub const HEAD_LEN: usize = PACKED_HEADER_LEN;

/// Where chunk data may lie in a Chunks payload of `payload_len` bytes whose first bytes (up to
/// `HEAD_LEN`) are `head`: after the table (1.0) or the header (packed), before the packed table.
pub fn data_area(head: &[u8], payload_len: u64, packed: bool) -> Result<(u64, u64), String> {
    let header_len = if packed { PACKED_HEADER_LEN } else { TABLE_HEADER_LEN };
    if head.len() < header_len || payload_len < header_len as u64 {
        return Err("chunks record shorter than its table header".into());
    }
    let n = u32_at(head, 0) as u64;
    let entry_size = u16::from_le_bytes([head[4], head[5]]) as u64;
    if (entry_size as usize) < ENTRY_LEN {
        return Err(format!(
            "chunks record with {entry_size}-byte entries (at least {ENTRY_LEN}; 0 is a pre-1.0 development file)"
        ));
    }
    let area = if packed {
        let table_len = u64_at(head, 8);
        payload_len.checked_sub(table_len).filter(|&end| end >= header_len as u64).map(|end| (header_len as u64, end))
    } else {
        n.checked_mul(entry_size)
            .and_then(|t| t.checked_add(header_len as u64))
            .filter(|&start| start <= payload_len)
            .map(|start| (start, payload_len))
    };
    area.ok_or_else(|| format!("chunks record claims a table of {n} entries larger than its {payload_len} bytes"))
}

/// Reads the table of a Chunks record that starts at file offset `record_offset` (`packed`: the
/// record has `record::PACKED_TABLE`). Every entry's data must lie inside the payload, after the
/// table (1.0) or the header, and before a packed table.
pub fn decode(payload: &[u8], record_offset: u64, packed: bool) -> Result<Vec<ChunkRef>, String> {
    let (data_start, data_end) = data_area(payload, payload.len() as u64, packed)?;
    let n = u32_at(payload, 0) as usize;
    let entry_size = u16::from_le_bytes([payload[4], payload[5]]) as usize;
    let table = if packed {
        // Every chunk holds at least a byte: a count beyond the data area's is damage.
        if n as u64 > data_end - data_start {
            return Err(format!(
                "chunks record claims {n} entries, more than its {} bytes of data hold",
                data_end - data_start
            ));
        }
        Cow::Owned(packed::unpack(&payload[data_end as usize..], n, entry_size)?)
    } else {
        Cow::Borrowed(&payload[TABLE_HEADER_LEN..data_start as usize])
    };
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut refs = Vec::with_capacity(n);
    for (i, e) in table.chunks_exact(entry_size).enumerate() {
        let rel = u64_at(e, 24);
        let stored_len = u64_at(e, 32);
        let end = rel.checked_add(stored_len);
        if rel < data_start || end.is_none_or(|end| end > data_end) {
            return Err(format!("chunk {i} points outside its record (offset {rel}, length {stored_len})"));
        }
        refs.push(ChunkRef {
            lane: u32_at(e, 0),
            column: u32_at(e, 4),
            first_row: u64_at(e, 8),
            n_rows: u32_at(e, 16),
            codec: u32_at(e, 20),
            record_offset,
            data_offset: payload_start + rel,
            stored_len,
            raw_len: u64_at(e, 40),
            flags: u32_at(e, 48),
            crc: u32_at(e, 52),
        });
    }
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pending() -> impl Strategy<Value = Vec<PendingChunk>> {
        let chunk =
            (0u32..8, 0u32..20, 0u64..1 << 40, 1u32..500, prop_oneof![Just(0u32), Just(1), Just(0x103)], 1usize..90)
                .prop_map(|(lane, column, first_row, n_rows, codec, len)| PendingChunk {
                    lane,
                    column,
                    first_row,
                    n_rows,
                    codec,
                    raw_len: n_rows as u64 * 8,
                    data: (0..len).map(|i| (i as u32 * 31 + column) as u8).collect(),
                    flags: column % 2,
                });
        proptest::collection::vec(chunk, 1..120)
    }

    proptest! {
        /// Whichever table the writer picks, a reader gets back the references it wrote, and each
        /// chunk's bytes where they say.
        #[test]
        fn tables_round_trip(chunks in pending(), record_offset in (8u64..1 << 30).prop_map(|o| o * 8)) {
            let table = table(record_offset, &chunks);
            let mut payload = table.head.clone();
            for (c, gap) in chunks.iter().zip(gaps(record_offset, table.head.len(), &table.refs)) {
                payload.resize(payload.len() + gap, 0);
                payload.extend_from_slice(&c.data);
            }
            payload.extend_from_slice(&table.tail);
            let refs = decode(&payload, record_offset, table.packed).unwrap();
            prop_assert_eq!(&refs, &table.refs);
            let start = record_offset + RECORD_HEADER_LEN as u64;
            for (r, c) in refs.iter().zip(&chunks) {
                let at = (r.data_offset - start) as usize;
                prop_assert_eq!(&payload[at..at + r.stored_len as usize], &c.data[..]);
                let align = if r.codec == 0 { DATA_ALIGN } else { 8 };
                prop_assert_eq!(r.data_offset % align, 0);
            }
            // Read as the other layout, the same bytes are an error or other references, never
            // a panic.
            let _ = decode(&payload, record_offset, !table.packed);
            let (packed, packed_refs) = encode_packed(record_offset, &chunks, ENTRY_LEN + 8);
            prop_assert_eq!(&decode(&packed, record_offset, true).unwrap(), &packed_refs);
        }
    }

    proptest! {
        /// A packed record with bytes flipped anywhere reads as references inside the payload or
        /// as an error (damage), never a panic.
        #[test]
        fn flipped_bytes_are_damage_or_bounded(chunks in pending(), flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..6)) {
            let (mut payload, _) = encode_packed(4096, &chunks, ENTRY_LEN);
            for (at, x) in flips {
                let at = at % payload.len();
                payload[at] ^= x;
            }
            if let Ok(refs) = decode(&payload, 4096, true) {
                for r in refs {
                    prop_assert!(r.data_offset + r.stored_len <= 4096 + 24 + payload.len() as u64);
                }
            }
        }
    }

    #[test]
    fn many_chunks_pack() {
        let chunk = |column: u32| PendingChunk {
            lane: column % 8,
            column: column / 8,
            first_row: 1000,
            n_rows: 190,
            codec: 1,
            raw_len: 1520,
            data: vec![column as u8; 20],
            flags: 0,
        };
        let many: Vec<PendingChunk> = (0..104).map(chunk).collect();
        let t = table(4096, &many);
        assert!(t.packed);
        assert!(t.head.len() + t.tail.len() < (8 + 104 * ENTRY_LEN) / 4, "{}", t.tail.len());
        let one = table(4096, &[chunk(0)]);
        assert_eq!(one.packed, one.head.len() + one.tail.len() < 8 + ENTRY_LEN, "packed only when smaller");
    }

    #[test]
    fn a_packed_table_that_does_not_fit_is_damage() {
        let chunks = [PendingChunk {
            lane: 0,
            column: 0,
            first_row: 0,
            n_rows: 1,
            codec: 1,
            raw_len: 8,
            data: vec![1; 9],
            flags: 0,
        }];
        let (mut payload, _) = encode_packed(64, &chunks, ENTRY_LEN);
        let len = payload.len() as u64;
        payload[8..16].copy_from_slice(&len.to_le_bytes());
        assert!(decode(&payload, 64, true).is_err());
        let (mut payload, _) = encode_packed(64, &chunks, ENTRY_LEN);
        payload[0..4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(decode(&payload, 64, true).unwrap_err().contains("1000 entries"));
    }
}
