//! The Episode record: the episodes that ended since the previous one (or, at close, those still
//! running), each with where its rows are, its summary and its metadata.
//!
//! Payload: `count u32, flags u32, body_len u64`, then the body (zstd-compressed when flag bit 0
//! is set, `body_len` bytes once decompressed): `count` fixed parts of 72 bytes
//! (`lane u32, flags u32, obs_first_row u64, step_first_row u64, length u64, return f64,
//! start_ns u64, end_ns u64, episode_id u64, metadata_len u32, reserved u32`), then the metadata
//! JSON texts in the same order, back to back.
//!
//! Why a batch: short episodes are common (CartPole's last ~20 steps), and a record plus an index
//! entry per episode cost more than the episode's data; a batch of similar summaries also
//! compresses several times over.

use super::{f64_at, u32_at, u64_at};

pub const FIXED_LEN: usize = 72;
pub const BATCH_HEADER_LEN: usize = 16;
/// Batch flag: the body is one zstd frame.
pub const BATCH_BODY_ZSTD: u32 = 1;
/// Bodies smaller than this are stored as they are: compressing them saves nothing.
const COMPRESS_FROM: usize = 512;
/// A body may claim at most this many bytes (a damaged length must not make a reader allocate
/// without bound).
const MAX_BODY: u64 = 1 << 32;

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
    /// Place of the episode in its record's batch.
    pub position: u32,
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
            position: 0,
        }
    }

    /// An Episode record holding this episode alone.
    pub fn encode_record(&self, metadata_json: &[u8]) -> Vec<u8> {
        encode_batch(&[(self.clone(), metadata_json)])
    }
}

/// The payload of an Episode record for these episodes and their metadata JSON texts.
pub fn encode_batch(episodes: &[(EpisodeSummary, &[u8])]) -> Vec<u8> {
    let meta_len: usize = episodes.iter().map(|(_, m)| m.len()).sum();
    let mut body = Vec::with_capacity(episodes.len() * FIXED_LEN + meta_len);
    for (summary, meta) in episodes {
        let mut s = summary.clone();
        s.metadata_len = meta.len() as u32;
        s.encode_fixed(&mut body);
    }
    for (_, meta) in episodes {
        body.extend_from_slice(meta);
    }
    let mut flags = 0;
    let mut stored = None;
    if body.len() >= COMPRESS_FROM {
        if let Ok(packed) = zstd::bulk::compress(&body, 3) {
            if packed.len() < body.len() {
                flags |= BATCH_BODY_ZSTD;
                stored = Some(packed);
            }
        }
    }
    let stored = stored.as_deref().unwrap_or(&body);
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + stored.len());
    out.extend_from_slice(&(episodes.len() as u32).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(stored);
    out
}

/// Decodes an Episode record payload: each episode (with `record_offset` and `position` set)
/// and its metadata JSON bytes. Every length is checked; errors say what does not hold.
pub fn decode_batch(payload: &[u8], record_offset: u64) -> Result<Vec<(EpisodeSummary, Vec<u8>)>, String> {
    if payload.len() < BATCH_HEADER_LEN {
        return Err(format!(
            "episode record of {} bytes, shorter than its {BATCH_HEADER_LEN}-byte header",
            payload.len()
        ));
    }
    let count = u32_at(payload, 0) as usize;
    let flags = u32_at(payload, 4);
    let body_len = u64_at(payload, 8);
    let fixed = (count as u64).checked_mul(FIXED_LEN as u64).filter(|&f| f <= body_len);
    let Some(fixed) = fixed else {
        return Err(format!("episode record claims {count} episodes in a body of {body_len} bytes"));
    };
    if body_len > MAX_BODY {
        return Err(format!("episode record body of {body_len} bytes is implausibly large"));
    }
    let stored = &payload[BATCH_HEADER_LEN..];
    let body: std::borrow::Cow<[u8]> = if flags & BATCH_BODY_ZSTD != 0 {
        // The frame must state its size, so nothing is allocated on a damaged claim.
        match zstd::zstd_safe::get_frame_content_size(stored) {
            Ok(Some(n)) if n == body_len => {}
            _ => return Err("episode record body: zstd frame size does not match the record".into()),
        }
        zstd::bulk::decompress(stored, body_len as usize).map_err(|e| format!("episode record body: zstd: {e}"))?.into()
    } else {
        stored.into()
    };
    if body.len() as u64 != body_len {
        return Err(format!("episode record body is {} bytes, the record says {body_len}", body.len()));
    }
    let mut out = Vec::with_capacity(count);
    let mut meta_at = fixed as usize;
    for i in 0..count {
        let mut s = EpisodeSummary::decode_fixed(&body[i * FIXED_LEN..], record_offset);
        s.position = i as u32;
        let end = meta_at.checked_add(s.metadata_len as usize).filter(|&e| e <= body.len());
        let Some(end) = end else {
            return Err(format!("episode {i} of the record: metadata runs past the record"));
        };
        out.push((s, body[meta_at..end].to_vec()));
        meta_at = end;
    }
    if meta_at != body.len() {
        return Err(format!("episode record has {} bytes after its last metadata", body.len() - meta_at));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(i: u64) -> EpisodeSummary {
        EpisodeSummary {
            lane: i as u32 % 3,
            flags: FLAG_COMPLETE,
            obs_first_row: 10 * i,
            step_first_row: 9 * i,
            length: 9,
            episode_return: i as f64 * 0.5,
            start_ns: 1_000 + i,
            end_ns: 2_000 + i,
            episode_id: i,
            record_offset: 0,
            position: 0,
            metadata_len: 0,
        }
    }

    #[test]
    fn batches_round_trip_compressed_or_not() {
        for n in [0u64, 1, 3, 200] {
            let metas: Vec<String> =
                (0..n).map(|i| if i % 2 == 0 { String::new() } else { format!("{{\"i\":{i}}}") }).collect();
            let items: Vec<(EpisodeSummary, &[u8])> =
                (0..n).map(|i| (summary(i), metas[i as usize].as_bytes())).collect();
            let payload = encode_batch(&items);
            let back = decode_batch(&payload, 4096).unwrap();
            assert_eq!(back.len(), n as usize);
            for (i, (s, m)) in back.iter().enumerate() {
                let mut want = summary(i as u64);
                want.record_offset = 4096;
                want.position = i as u32;
                want.metadata_len = metas[i].len() as u32;
                assert_eq!(s, &want);
                assert_eq!(m, metas[i].as_bytes());
            }
            if n == 200 {
                assert!(payload.len() < 200 * FIXED_LEN / 2, "similar summaries compress");
            }
        }
    }

    #[test]
    fn damaged_batches_are_errors_not_panics() {
        let metas = ["{}"; 50];
        let items: Vec<(EpisodeSummary, &[u8])> = (0..50).map(|i| (summary(i), metas[i as usize].as_bytes())).collect();
        let payload = encode_batch(&items);
        for cut in 0..payload.len() {
            let _ = decode_batch(&payload[..cut], 0);
        }
        for at in 0..payload.len() {
            let mut bad = payload.clone();
            bad[at] ^= 0x5a;
            let _ = decode_batch(&bad, 0);
        }
    }
}
