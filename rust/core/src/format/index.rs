//! The Index record: everything a reader needs about the records written since the previous
//! Index record, so a closed file opens by reading its index chain and nothing else.
//!
//! Payload: `prev_index u64` (u64::MAX for the first), `n_other u32, n_chunks u32,
//! n_episodes u32, reserved u32`, then `n_other` u64 offsets of Meta and Column records, then
//! `n_chunks` 56-byte chunk references, then `n_episodes` u64 offsets of Episode records.

use super::chunks::{ChunkRef, REF_LEN};
use super::{u32_at, u64_at};

pub const NO_PREVIOUS: u64 = u64::MAX;
const FIXED_LEN: usize = 24;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexDelta {
    pub prev_index: u64,
    /// Offsets of Meta and Column records, in file order.
    pub other_records: Vec<u64>,
    pub chunks: Vec<ChunkRef>,
    /// Offsets of Episode records (each a batch of episodes).
    pub episode_records: Vec<u64>,
}

impl IndexDelta {
    pub fn is_empty(&self) -> bool {
        self.other_records.is_empty() && self.chunks.is_empty() && self.episode_records.is_empty()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            FIXED_LEN + self.other_records.len() * 8 + self.chunks.len() * REF_LEN + self.episode_records.len() * 8,
        );
        out.extend_from_slice(&self.prev_index.to_le_bytes());
        out.extend_from_slice(&(self.other_records.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.episode_records.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for o in &self.other_records {
            out.extend_from_slice(&o.to_le_bytes());
        }
        for c in &self.chunks {
            c.encode_ref(&mut out);
        }
        for o in &self.episode_records {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out
    }

    pub fn decode(payload: &[u8]) -> Result<Self, String> {
        if payload.len() < FIXED_LEN {
            return Err("index record shorter than its header".into());
        }
        let n_other = u32_at(payload, 8) as usize;
        let n_chunks = u32_at(payload, 12) as usize;
        let n_episodes = u32_at(payload, 16) as usize;
        let expected =
            FIXED_LEN as u128 + n_other as u128 * 8 + n_chunks as u128 * REF_LEN as u128 + n_episodes as u128 * 8;
        if expected != payload.len() as u128 {
            return Err(format!("index record is {} bytes, its counts say {expected}", payload.len()));
        }
        let mut at = FIXED_LEN;
        let other_records = (0..n_other).map(|i| u64_at(payload, at + i * 8)).collect();
        at += n_other * 8;
        let chunks = (0..n_chunks).map(|i| ChunkRef::decode_ref(&payload[at + i * REF_LEN..])).collect();
        at += n_chunks * REF_LEN;
        let episode_records = (0..n_episodes).map(|i| u64_at(payload, at + i * 8)).collect();
        Ok(IndexDelta { prev_index: u64_at(payload, 0), other_records, chunks, episode_records })
    }
}
