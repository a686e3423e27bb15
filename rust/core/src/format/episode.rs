//! The Episode record: where an episode's rows are and its summary, written when it ends (or at
//! close, for one still running). Payload: a fixed 72-byte part, then the episode metadata JSON.
//!
//! `lane u32, flags u32, obs_first_row u64, step_first_row u64, length u64, return f64,
//! start_ns u64, end_ns u64, episode_id u64, metadata_len u32, reserved u32`.

use super::{f64_at, u32_at, u64_at};

pub const FIXED_LEN: usize = 72;
/// An index entry: the record offset, then the fixed part.
pub const ENTRY_LEN: usize = 8 + FIXED_LEN;

pub const FLAG_COMPLETE: u32 = 1;
pub const FLAG_TERMINATED: u32 = 2;
pub const FLAG_TRUNCATED: u32 = 4;

#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeSummary {
    /// The sub-env index (0 for a single env).
    pub lane: u32,
    pub flags: u32,
    /// The episode's T+1 observation-timeline rows start here in its lane.
    pub obs_first_row: u64,
    /// The episode's T step-timeline rows start here in its lane.
    pub step_first_row: u64,
    /// T, the number of steps.
    pub length: u64,
    pub episode_return: f64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Count of episodes ended before this one in the recording.
    pub episode_id: u64,
    /// File offset of the Episode record (its metadata lives there).
    pub record_offset: u64,
    pub metadata_len: u32,
}

impl EpisodeSummary {
    pub fn complete(&self) -> bool {
        self.flags & FLAG_COMPLETE != 0
    }
    pub fn terminated(&self) -> bool {
        self.flags & FLAG_TERMINATED != 0
    }
    pub fn truncated(&self) -> bool {
        self.flags & FLAG_TRUNCATED != 0
    }

    fn encode_fixed(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.lane.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.obs_first_row.to_le_bytes());
        out.extend_from_slice(&self.step_first_row.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&self.episode_return.to_le_bytes());
        out.extend_from_slice(&self.start_ns.to_le_bytes());
        out.extend_from_slice(&self.end_ns.to_le_bytes());
        out.extend_from_slice(&self.episode_id.to_le_bytes());
        out.extend_from_slice(&self.metadata_len.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
    }

    fn decode_fixed(b: &[u8], record_offset: u64) -> Self {
        EpisodeSummary {
            lane: u32_at(b, 0),
            flags: u32_at(b, 4),
            obs_first_row: u64_at(b, 8),
            step_first_row: u64_at(b, 16),
            length: u64_at(b, 24),
            episode_return: f64_at(b, 32),
            start_ns: u64_at(b, 40),
            end_ns: u64_at(b, 48),
            episode_id: u64_at(b, 56),
            metadata_len: u32_at(b, 64),
            record_offset,
        }
    }

    /// The Episode record payload.
    pub fn encode_record(&self, metadata_json: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED_LEN + metadata_json.len());
        let mut me = self.clone();
        me.metadata_len = metadata_json.len() as u32;
        me.encode_fixed(&mut out);
        out.extend_from_slice(metadata_json);
        out
    }

    /// Decodes an Episode record payload; returns the summary and the metadata JSON bytes.
    pub fn decode_record(payload: &[u8], record_offset: u64) -> Result<(Self, &[u8]), String> {
        if payload.len() < FIXED_LEN {
            return Err(format!("episode record of {} bytes, shorter than {FIXED_LEN}", payload.len()));
        }
        let s = Self::decode_fixed(payload, record_offset);
        let meta = &payload[FIXED_LEN..];
        if meta.len() != s.metadata_len as usize {
            return Err(format!("episode metadata is {} bytes, the record says {}", meta.len(), s.metadata_len));
        }
        Ok((s, meta))
    }

    pub fn encode_entry(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.record_offset.to_le_bytes());
        self.encode_fixed(out);
    }

    pub fn decode_entry(b: &[u8]) -> Self {
        Self::decode_fixed(&b[8..], u64_at(b, 0))
    }
}
