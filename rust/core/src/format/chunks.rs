//! The Chunks record: a table of column chunks, then their data. Each chunk holds consecutive
//! rows of one column of one lane. Raw (codec 0) data starts on a 64-byte file offset so a memory
//! map can be viewed as an array in place; encoded data only needs 8 bytes, which saves padding
//! on the many small chunks a flush timer makes.
//!
//! Payload: `n u32, entry_size u16, reserved u16`, then `n` entries of `entry_size` bytes, of
//! which this version knows the first 56 (`lane u32, column u32, first_row u64, n_rows u32,
//! codec u32, data_offset u64, stored_len u64, raw_len u64, flags u32, reserved u32`,
//! `data_offset` counted from the payload start) and skips the rest, then the data.

use super::record::RECORD_HEADER_LEN;
use super::{align_up, u32_at, u64_at, DATA_ALIGN};

/// The entry fields this version writes and reads; a later minor version may write longer
/// entries (readers skip the bytes they do not know).
pub const ENTRY_LEN: usize = 56;
/// A chunk reference as the index stores it: the entry plus where its record starts.
pub const REF_LEN: usize = 64;
const TABLE_HEADER_LEN: usize = 8;

/// Chunk flag: the rows repeat rows an earlier shard of the recording already holds (the last
/// observation row of an episode running at rollover, so the new shard's part of it stands on
/// its own). A reader that has that shard ignores the chunk.
pub const CHUNK_REPEAT: u32 = 1;

/// Where one chunk's bytes are and how to turn them back into rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// `CHUNK_REPEAT` or 0; unknown bits are ignored.
    pub flags: u32,
}

impl ChunkRef {
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
        out.extend_from_slice(&0u32.to_le_bytes());
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
        }
    }
}

/// One chunk ready to be written.
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

/// Builds the payload of a Chunks record that will start at file offset `record_offset`, and the
/// references the index will hold.
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
    let (mut payload, refs) = table_with_entry_size(record_offset, chunks, entry_size);
    let gaps: Vec<usize> = gaps(record_offset, payload.len(), &refs).collect();
    for (c, gap) in chunks.iter().zip(gaps) {
        payload.resize(payload.len() + gap, 0);
        payload.extend_from_slice(&c.data);
    }
    (payload, refs)
}

/// The start of a Chunks payload that will start at file offset `record_offset`: the table
/// (whose entries say where each chunk's data goes) and the references the index will hold. The
/// rest of the payload is, for each chunk, `gaps` zero bytes then its data: the writer sends the
/// data from the buffer it was sealed in instead of copying it into one payload.
pub fn table(record_offset: u64, chunks: &[PendingChunk]) -> (Vec<u8>, Vec<ChunkRef>) {
    table_with_entry_size(record_offset, chunks, ENTRY_LEN)
}

fn table_with_entry_size(record_offset: u64, chunks: &[PendingChunk], entry_size: usize) -> (Vec<u8>, Vec<ChunkRef>) {
    assert!(entry_size >= ENTRY_LEN && entry_size <= u16::MAX as usize);
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut pos = (TABLE_HEADER_LEN + chunks.len() * entry_size) as u64;
    let mut refs = Vec::with_capacity(chunks.len());
    for c in chunks {
        let align = if c.codec == 0 { DATA_ALIGN } else { 8 };
        let data_offset = align_up(payload_start + pos, align) - payload_start;
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
            flags: c.flags,
        });
        pos = data_offset + c.data.len() as u64;
    }
    let mut table = Vec::with_capacity(TABLE_HEADER_LEN + chunks.len() * entry_size);
    table.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    table.extend_from_slice(&(entry_size as u16).to_le_bytes());
    table.extend_from_slice(&0u16.to_le_bytes());
    for r in &refs {
        let start = table.len();
        table.extend_from_slice(&r.lane.to_le_bytes());
        table.extend_from_slice(&r.column.to_le_bytes());
        table.extend_from_slice(&r.first_row.to_le_bytes());
        table.extend_from_slice(&r.n_rows.to_le_bytes());
        table.extend_from_slice(&r.codec.to_le_bytes());
        table.extend_from_slice(&(r.data_offset - payload_start).to_le_bytes());
        table.extend_from_slice(&r.stored_len.to_le_bytes());
        table.extend_from_slice(&r.raw_len.to_le_bytes());
        table.extend_from_slice(&r.flags.to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        // What a later version may add: bytes this version does not know (tests set them).
        table.resize(start + entry_size, 0xA5);
    }
    (table, refs)
}

/// The zero bytes (alignment) before each chunk's data, after a table of `table_len` bytes.
pub fn gaps(record_offset: u64, table_len: usize, refs: &[ChunkRef]) -> impl Iterator<Item = usize> + '_ {
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut end = table_len as u64;
    refs.iter().map(move |r| {
        let at = r.data_offset - payload_start;
        let gap = at - end;
        end = at + r.stored_len;
        gap as usize
    })
}

/// Reads the table of a Chunks record that starts at file offset `record_offset`. Every entry's
/// data must lie inside the payload, after the table.
pub fn decode(payload: &[u8], record_offset: u64) -> Result<Vec<ChunkRef>, String> {
    if payload.len() < TABLE_HEADER_LEN {
        return Err("chunks record shorter than its table header".into());
    }
    let n = u32_at(payload, 0) as usize;
    let entry_size = u16::from_le_bytes([payload[4], payload[5]]) as usize;
    if entry_size < ENTRY_LEN {
        return Err(format!(
            "chunks record with {entry_size}-byte entries (at least {ENTRY_LEN}; 0 is a pre-1.0 development file)"
        ));
    }
    let table_end =
        n.checked_mul(entry_size).and_then(|t| t.checked_add(TABLE_HEADER_LEN)).filter(|&t| t <= payload.len());
    let Some(table_end) = table_end else {
        return Err(format!("chunks record claims {n} entries, more than its {} bytes hold", payload.len()));
    };
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut refs = Vec::with_capacity(n);
    for i in 0..n {
        let e = &payload[TABLE_HEADER_LEN + i * entry_size..TABLE_HEADER_LEN + i * entry_size + ENTRY_LEN];
        let rel = u64_at(e, 24);
        let stored_len = u64_at(e, 32);
        let end = rel.checked_add(stored_len);
        if rel < table_end as u64 || end.is_none_or(|end| end > payload.len() as u64) {
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
        });
    }
    Ok(refs)
}
