//! The Index record: everything a reader needs about the records written since the previous
//! Index record, so a closed file opens by reading its index chain and nothing else.
//!
//! Payload: a header (`prev_index u64` (u64::MAX for the first), `header_len u16`,
//! `other_entry_len u16, chunk_ref_len u16, episode_entry_len u16`, `n_other u32, n_chunks u32,
//! n_episodes u32, reserved u32`), then `n_other` entries (`kind u32, reserved u32, offset u64`:
//! Meta and Column records, and records of kinds a reader may not know), `n_chunks` chunk
//! references, `n_episodes` Episode record offsets. Every part has its size in the header, so a
//! later minor version can lengthen any of them and older readers skip the bytes they do not know.
//! With `record::PACKED_TABLE` (a later addition) the chunk references are packed
//! (`format::packed`): they take the bytes the other parts leave.

use std::borrow::Cow;

use super::chunks::{ChunkRef, REF_LEN};
use super::packed;
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

    /// The payload the writer writes, and whether its chunk references are packed (when that is
    /// smaller).
    pub fn encode(&self) -> (Vec<u8>, bool) {
        let sizes = EntrySizes::default();
        let plain_refs = self.chunks.len() * sizes.chunk_ref;
        let packed_refs = packed::pack(&self.refs(sizes.chunk_ref), sizes.chunk_ref);
        if packed_refs.len() < plain_refs {
            (self.encode_parts(sizes, &packed_refs), true)
        } else {
            (self.encode_with(sizes), false)
        }
    }

    /// Encodes with the given entry sizes (at least this version's); extra bytes are filler.
    pub fn encode_with(&self, sizes: EntrySizes) -> Vec<u8> {
        self.encode_parts(sizes, &self.refs(sizes.chunk_ref))
    }

    /// `encode_with`, the chunk references packed (whatever their size).
    pub fn encode_packed_with(&self, sizes: EntrySizes) -> Vec<u8> {
        self.encode_parts(sizes, &packed::pack(&self.refs(sizes.chunk_ref), sizes.chunk_ref))
    }

    fn refs(&self, chunk_ref: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.chunks.len() * chunk_ref);
        for c in &self.chunks {
            let start = out.len();
            c.encode_ref(&mut out);
            pad_to(&mut out, start + chunk_ref);
        }
        out
    }

    /// The header, the other records, `refs` (the chunk references, plain or packed), the
    /// Episode records.
    fn encode_parts(&self, sizes: EntrySizes, refs: &[u8]) -> Vec<u8> {
        let d = EntrySizes::default();
        assert!(sizes.header >= d.header && sizes.other >= d.other);
        assert!(sizes.chunk_ref >= d.chunk_ref && sizes.episode >= d.episode);
        let mut out = Vec::with_capacity(
            sizes.header
                + self.other_records.len() * sizes.other
                + refs.len()
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
        out.extend_from_slice(refs);
        for o in &self.episode_records {
            let start = out.len();
            out.extend_from_slice(&o.to_le_bytes());
            pad_to(&mut out, start + sizes.episode);
        }
        out
    }

    /// Decodes an Index payload (`packed`: the record has `record::PACKED_TABLE`).
    pub fn decode(payload: &[u8], packed: bool) -> Result<Self, String> {
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
        let others = header as u128 + n_other as u128 * other as u128 + n_episodes as u128 * episode as u128;
        let plain_refs = n_chunks as u128 * chunk_ref as u128;
        let refs_len = if packed {
            if others > payload.len() as u128 {
                return Err(format!("index record is {} bytes, its counts say at least {others}", payload.len()));
            }
            (payload.len() as u128 - others) as usize
        } else {
            if others + plain_refs != payload.len() as u128 {
                return Err(format!("index record is {} bytes, its counts say {}", payload.len(), others + plain_refs));
            }
            plain_refs as usize
        };
        let mut at = header;
        let other_records = (0..n_other)
            .map(|i| {
                let e = at + i * other;
                OtherRecord { kind: u32_at(payload, e), offset: u64_at(payload, e + 8) }
            })
            .collect();
        at += n_other * other;
        let stored = &payload[at..at + refs_len];
        let refs =
            if packed { Cow::Owned(packed::unpack(stored, n_chunks, chunk_ref)?) } else { Cow::Borrowed(stored) };
        let chunks = refs.chunks_exact(chunk_ref).map(ChunkRef::decode_ref).collect();
        at += refs_len;
        let episode_records = (0..n_episodes).map(|i| u64_at(payload, at + i * episode)).collect();
        Ok(IndexDelta { prev_index: u64_at(payload, 0), other_records, chunks, episode_records })
    }
}

/// Filler up to `len`: what a newer writer's extra fields would be to an older reader.
fn pad_to(out: &mut Vec<u8>, len: usize) {
    out.resize(len, 0xA5);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chunk_ref() -> impl Strategy<Value = ChunkRef> {
        (0u32..16, 0u32..30, any::<u32>(), 1u32..1000, 0u64..1 << 30, 1u64..1 << 20).prop_map(
            |(lane, column, first_row, n_rows, offset, len)| ChunkRef {
                lane,
                column,
                first_row: first_row as u64,
                n_rows,
                codec: 1,
                record_offset: offset * 8,
                data_offset: offset * 8 + 40,
                stored_len: len,
                raw_len: len * 3,
                flags: 0,
                crc: 0,
            },
        )
    }

    proptest! {
        /// Plain or packed, with this version's sizes or a later one's, a delta reads back as written.
        #[test]
        fn deltas_round_trip(
            chunks in proptest::collection::vec(chunk_ref(), 0..300),
            others in proptest::collection::vec((1u32..9, any::<u64>()), 0..5),
            episodes in proptest::collection::vec(any::<u64>(), 0..5),
            prev in any::<u64>(),
        ) {
            let delta = IndexDelta {
                prev_index: prev,
                other_records: others.into_iter().map(|(kind, offset)| OtherRecord { kind, offset }).collect(),
                chunks,
                episode_records: episodes,
            };
            let (payload, packed) = delta.encode();
            prop_assert_eq!(&IndexDelta::decode(&payload, packed).unwrap(), &delta);
            let later = EntrySizes { header: 40, other: 24, chunk_ref: 72, episode: 16 };
            prop_assert_eq!(&IndexDelta::decode(&delta.encode_packed_with(later), true).unwrap(), &delta);
            prop_assert_eq!(&IndexDelta::decode(&delta.encode_with(later), false).unwrap(), &delta);
            // The other layout's reading of the same bytes is an error or another delta, no panic.
            let _ = IndexDelta::decode(&payload, !packed);
        }
    }

    #[test]
    fn many_references_pack() {
        let chunks = (0..500u64)
            .map(|i| ChunkRef {
                lane: (i % 8) as u32,
                column: (i / 8 % 13) as u32,
                first_row: i / 104 * 190,
                n_rows: 190,
                codec: 1,
                record_offset: 4096 + i / 104 * 9000,
                data_offset: 4200 + i * 40,
                stored_len: 30 + i % 7,
                raw_len: 1520,
                flags: 0,
                crc: 0,
            })
            .collect();
        let delta = IndexDelta { prev_index: NO_PREVIOUS, chunks, ..Default::default() };
        let (payload, packed) = delta.encode();
        assert!(packed && payload.len() < 500 * REF_LEN / 5, "{}", payload.len());
        assert!(!IndexDelta { prev_index: NO_PREVIOUS, ..Default::default() }.encode().1);
    }
}
