//! The Index record: everything a reader needs about the records written since the previous
//! Index record, so a closed file opens by reading its index chain and nothing else.
//!
//! Payload: a header (`prev_index u64` (u64::MAX for the first), `header_len u16`,
//! `other_entry_len u16, chunk_ref_len u16, episode_entry_len u16`, `n_other u32, n_chunks u32,
//! n_episodes u32, reserved u32`), then `n_other` entries (`kind u32, reserved u32, offset u64`:
//! Meta and Column records, and records of kinds a reader may not know), `n_chunks` chunk
//! references, `n_episodes` Episode record offsets. Every part has its size in the header, so a
//! later minor version can lengthen any of them and older readers skip the bytes they do not know.

use super::chunks::{ChunkRef, REF_LEN};
use super::{u32_at, u64_at};

pub const NO_PREVIOUS: u64 = u64::MAX;
const HEADER_LEN: usize = 32;
const OTHER_LEN: usize = 16;
const EPISODE_LEN: usize = 8;

/// A record listed by the index that is neither chunks nor episodes: Meta, Column, or a kind a
/// newer writer added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherRecord {
    pub kind: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexDelta {
    pub prev_index: u64,
    /// Meta, Column and unknown-kind records, in file order.
    pub other_records: Vec<OtherRecord>,
    pub chunks: Vec<ChunkRef>,
    /// Offsets of Episode records (each a batch of episodes).
    pub episode_records: Vec<u64>,
}

/// Entry sizes an encoder writes; larger than this version's are what a newer writer would do.
#[derive(Debug, Clone, Copy)]
pub struct EntrySizes {
    pub header: usize,
    pub other: usize,
    pub chunk_ref: usize,
    pub episode: usize,
}

impl Default for EntrySizes {
    fn default() -> Self {
        EntrySizes { header: HEADER_LEN, other: OTHER_LEN, chunk_ref: REF_LEN, episode: EPISODE_LEN }
    }
}

impl IndexDelta {
    pub fn is_empty(&self) -> bool {
        self.other_records.is_empty() && self.chunks.is_empty() && self.episode_records.is_empty()
    }

    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(EntrySizes::default())
    }

    /// Encodes with the given entry sizes (at least this version's); extra bytes are filler.
    pub fn encode_with(&self, sizes: EntrySizes) -> Vec<u8> {
        let d = EntrySizes::default();
        assert!(sizes.header >= d.header && sizes.other >= d.other);
        assert!(sizes.chunk_ref >= d.chunk_ref && sizes.episode >= d.episode);
        let mut out = Vec::with_capacity(
            sizes.header
                + self.other_records.len() * sizes.other
                + self.chunks.len() * sizes.chunk_ref
                + self.episode_records.len() * sizes.episode,
        );
        out.extend_from_slice(&self.prev_index.to_le_bytes());
        for size in [sizes.header, sizes.other, sizes.chunk_ref, sizes.episode] {
            out.extend_from_slice(&(size as u16).to_le_bytes());
        }
        out.extend_from_slice(&(self.other_records.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.episode_records.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        pad_to(&mut out, sizes.header);
        for o in &self.other_records {
            let start = out.len();
            out.extend_from_slice(&o.kind.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&o.offset.to_le_bytes());
            pad_to(&mut out, start + sizes.other);
        }
        for c in &self.chunks {
            let start = out.len();
            c.encode_ref(&mut out);
            pad_to(&mut out, start + sizes.chunk_ref);
        }
        for o in &self.episode_records {
            let start = out.len();
            out.extend_from_slice(&o.to_le_bytes());
            pad_to(&mut out, start + sizes.episode);
        }
        out
    }

    pub fn decode(payload: &[u8]) -> Result<Self, String> {
        if payload.len() < HEADER_LEN {
            return Err("index record shorter than its header".into());
        }
        let u16_at = |at: usize| u16::from_le_bytes([payload[at], payload[at + 1]]) as usize;
        let (header, other, chunk_ref, episode) = (u16_at(8), u16_at(10), u16_at(12), u16_at(14));
        if header < HEADER_LEN || other < OTHER_LEN || chunk_ref < REF_LEN || episode < EPISODE_LEN {
            return Err(format!(
                "index record with entry sizes {header}/{other}/{chunk_ref}/{episode}, smaller than this version's \
                 {HEADER_LEN}/{OTHER_LEN}/{REF_LEN}/{EPISODE_LEN} (a pre-1.0 development file, or damage)"
            ));
        }
        let n_other = u32_at(payload, 16) as usize;
        let n_chunks = u32_at(payload, 20) as usize;
        let n_episodes = u32_at(payload, 24) as usize;
        let expected = header as u128
            + n_other as u128 * other as u128
            + n_chunks as u128 * chunk_ref as u128
            + n_episodes as u128 * episode as u128;
        if expected != payload.len() as u128 {
            return Err(format!("index record is {} bytes, its counts say {expected}", payload.len()));
        }
        let mut at = header;
        let other_records = (0..n_other)
            .map(|i| {
                let e = at + i * other;
                OtherRecord { kind: u32_at(payload, e), offset: u64_at(payload, e + 8) }
            })
            .collect();
        at += n_other * other;
        let chunks = (0..n_chunks).map(|i| ChunkRef::decode_ref(&payload[at + i * chunk_ref..])).collect();
        at += n_chunks * chunk_ref;
        let episode_records = (0..n_episodes).map(|i| u64_at(payload, at + i * episode)).collect();
        Ok(IndexDelta { prev_index: u64_at(payload, 0), other_records, chunks, episode_records })
    }
}

/// Filler up to `len`: what a newer writer's extra fields would be to an older reader.
fn pad_to(out: &mut Vec<u8>, len: usize) {
    out.resize(len, 0xA5);
}
