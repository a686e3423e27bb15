//! The Chunks record: a table of column chunks, then their data. Each chunk holds consecutive
//! rows of one column of one lane. Raw (codec 0) data starts on a 64-byte file offset so a memory
//! map can be viewed as an array in place; encoded data only needs 8 bytes, which saves padding
//! on the many small chunks a flush timer makes.
//!
//! Payload: `n u32, reserved u32`, then `n` entries of 48 bytes
//! (`lane u32, column u32, first_row u64, n_rows u32, codec u32, data_offset u64, stored_len u64,
//! raw_len u64`, `data_offset` counted from the payload start), then the data.

use super::record::RECORD_HEADER_LEN;
use super::{align_up, u32_at, u64_at, DATA_ALIGN};

pub const ENTRY_LEN: usize = 48;
/// A chunk reference as the index stores it: the entry plus where its record starts.
pub const REF_LEN: usize = 56;

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
    }

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
}

/// Builds the payload of a Chunks record that will start at file offset `record_offset`, and the
/// references the index will hold.
pub fn encode(record_offset: u64, chunks: &[PendingChunk]) -> (Vec<u8>, Vec<ChunkRef>) {
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut pos = 8 + (chunks.len() * ENTRY_LEN) as u64;
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
        });
        pos = data_offset + c.data.len() as u64;
    }
    let mut payload = Vec::with_capacity(pos as usize);
    payload.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    payload.extend_from_slice(&0u32.to_le_bytes());
    for r in &refs {
        payload.extend_from_slice(&r.lane.to_le_bytes());
        payload.extend_from_slice(&r.column.to_le_bytes());
        payload.extend_from_slice(&r.first_row.to_le_bytes());
        payload.extend_from_slice(&r.n_rows.to_le_bytes());
        payload.extend_from_slice(&r.codec.to_le_bytes());
        payload.extend_from_slice(&(r.data_offset - payload_start).to_le_bytes());
        payload.extend_from_slice(&r.stored_len.to_le_bytes());
        payload.extend_from_slice(&r.raw_len.to_le_bytes());
    }
    for (c, r) in chunks.iter().zip(&refs) {
        payload.resize((r.data_offset - payload_start) as usize, 0);
        payload.extend_from_slice(&c.data);
    }
    (payload, refs)
}

/// Reads the table of a Chunks record whose payload starts at file offset `payload_start`.
/// Every entry's data must lie inside the payload.
pub fn decode(payload: &[u8], record_offset: u64) -> Result<Vec<ChunkRef>, String> {
    if payload.len() < 8 {
        return Err("chunks record shorter than its table header".into());
    }
    let n = u32_at(payload, 0) as usize;
    let table_end = n.checked_mul(ENTRY_LEN).and_then(|t| t.checked_add(8)).filter(|&t| t <= payload.len());
    let Some(table_end) = table_end else {
        return Err(format!("chunks record claims {n} entries, more than its {} bytes hold", payload.len()));
    };
    let payload_start = record_offset + RECORD_HEADER_LEN as u64;
    let mut refs = Vec::with_capacity(n);
    for i in 0..n {
        let e = &payload[8 + i * ENTRY_LEN..8 + (i + 1) * ENTRY_LEN];
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
        });
    }
    Ok(refs)
}
