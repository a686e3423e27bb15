//! The Episode record: the episodes that ended since the previous one (or, at close, those still
//! running, or at a shard rollover the parts of those running), each with where its rows are, its
//! summary, its metadata and its metrics.
//!
//! Payload: `count u32, fixed_len u16, required_flags u16, body_len u64`, then the body
//! (zstd-compressed when required flag bit 0 is set, `body_len` bytes once decompressed):
//! `count` fixed parts of `fixed_len` bytes (this version knows the first `FIXED_LEN`, see
//! `EpisodeSummary`; readers skip the rest), then the metadata JSON texts in the same order, back
//! to back, then the metrics blobs likewise.
//!
//! Why a batch: short episodes are common (CartPole's last ~20 steps), and a record plus an index
//! entry per episode cost more than the episode's data; a batch of similar summaries also
//! compresses several times over.
//!
//! An episode that runs over a shard rollover is written in parts: at the rollover, a record with
//! `FLAG_CONTINUES` in the shard being finished (the episode so far), then its final record in a
//! later shard. Every part describes the episode from its start up to the part's end (the rows
//! from `obs_first_row`, possibly in earlier shards) and its own rows in its shard (from
//! `piece_obs_first_row`), so a reader with all the shards lists the whole episode and a reader
//! of one shard lists the part it holds.

use super::metrics::Metric;
use super::{f64_at, u32_at, u64_at};

pub const FIXED_LEN: usize = 104;
pub const BATCH_HEADER_LEN: usize = 16;
/// Batch required flag: the body is one zstd frame.
pub const BATCH_BODY_ZSTD: u16 = 1;
/// The batch required flags this version understands.
pub const KNOWN_BATCH_FLAGS: u16 = BATCH_BODY_ZSTD;
/// Bodies smaller than this are stored as they are: compressing them saves nothing.
const COMPRESS_FROM: usize = 512;
/// A body may claim at most this many bytes (a damaged length must not make a reader allocate
/// without bound).
const MAX_BODY: u64 = 1 << 32;

pub const FLAG_COMPLETE: u32 = 1;
pub const FLAG_TERMINATED: u32 = 2;
pub const FLAG_TRUNCATED: u32 = 4;
/// The episode goes on in a later shard (this record is a part, written at a rollover).
pub const FLAG_CONTINUES: u32 = 8;
/// The episode was discarded after parts of it were written: readers drop every part of it.
pub const FLAG_DISCARDED: u32 = 16;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct EpisodeSummary {
    /// The sub-env index (0 for a single env).
    pub lane: u32,
    pub flags: u32,
    /// The episode's T+1 observation-timeline rows start here in its lane.
    pub obs_first_row: u64,
    /// The episode's T step-timeline rows start here in its lane.
    pub step_first_row: u64,
    /// T, the number of steps (of a part: from the episode's start to the part's end).
    pub length: u64,
    /// The sum of those steps' rewards.
    pub episode_return: f64,
    pub start_ns: u64,
    /// When it ended (of a part: the rollover).
    pub end_ns: u64,
    /// The episode's number in its recording, in the order episodes started (unique, and shared
    /// by the parts of one episode).
    pub episode_id: u64,
    /// File offset of the Episode record (its metadata lives there).
    pub record_offset: u64,
    /// Place of the episode in its record's batch.
    pub position: u32,
    pub metadata_len: u32,
    pub metrics_len: u32,
    /// The first observation-timeline row of the episode in this record's shard (the episode's
    /// first row, or for a later part the repeated last row of the part before).
    pub piece_obs_first_row: u64,
    /// The first step-timeline row of the episode in this record's shard.
    pub piece_step_first_row: u64,
    /// The sum of the rewards of the steps from `piece_step_first_row` on.
    pub piece_return: f64,
    /// The shard (`shard_seq`) holding the episode's first rows.
    pub first_shard_seq: u64,
    /// Its metrics (decoded from the record's metrics blob; see `format::metrics`).
    pub metrics: Vec<Metric>,
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
    pub fn continues(&self) -> bool {
        self.flags & FLAG_CONTINUES != 0
    }
    pub fn discarded(&self) -> bool {
        self.flags & FLAG_DISCARDED != 0
    }

    /// Steps of the part in this record's shard.
    pub fn piece_length(&self) -> u64 {
        self.length.saturating_sub(self.piece_step_first_row.saturating_sub(self.step_first_row))
    }

    /// The same episode seen as the part its shard holds: rows from the piece's first rows. A
    /// part is not a complete episode (its terminated/truncated flags still say how it ended).
    pub fn as_piece(&self) -> EpisodeSummary {
        EpisodeSummary {
            flags: self.flags & !FLAG_COMPLETE,
            obs_first_row: self.piece_obs_first_row,
            step_first_row: self.piece_step_first_row,
            length: self.piece_length(),
            episode_return: self.piece_return,
            ..self.clone()
        }
    }

    fn encode_fixed(&self, out: &mut Vec<u8>, fixed_len: usize) {
        let start = out.len();
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
        out.extend_from_slice(&self.metrics_len.to_le_bytes());
        out.extend_from_slice(&self.piece_obs_first_row.to_le_bytes());
        out.extend_from_slice(&self.piece_step_first_row.to_le_bytes());
        out.extend_from_slice(&self.piece_return.to_le_bytes());
        out.extend_from_slice(&self.first_shard_seq.to_le_bytes());
        // What a later version may add: bytes this version does not know (tests set them).
        out.resize(start + fixed_len, 0xA5);
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
            metrics_len: u32_at(b, 68),
            piece_obs_first_row: u64_at(b, 72),
            piece_step_first_row: u64_at(b, 80),
            piece_return: f64_at(b, 88),
            first_shard_seq: u64_at(b, 96),
            metrics: Vec::new(),
            record_offset,
            position: 0,
        }
    }
}

/// One episode to encode: its summary, metadata JSON and metrics blob.
pub type EpisodeItem<'a> = (EpisodeSummary, &'a [u8], &'a [u8]);

/// The payload of an Episode record for these episodes.
pub fn encode_batch(episodes: &[EpisodeItem]) -> Vec<u8> {
    encode_batch_with(episodes, FIXED_LEN)
}

/// `encode_batch` with fixed parts of `fixed_len` bytes (at least `FIXED_LEN`).
pub fn encode_batch_with(episodes: &[EpisodeItem], fixed_len: usize) -> Vec<u8> {
    assert!(fixed_len >= FIXED_LEN && fixed_len <= u16::MAX as usize);
    let extra: usize = episodes.iter().map(|(_, m, x)| m.len() + x.len()).sum();
    let mut body = Vec::with_capacity(episodes.len() * fixed_len + extra);
    for (summary, meta, metrics) in episodes {
        let mut s = summary.clone();
        s.metadata_len = meta.len() as u32;
        s.metrics_len = metrics.len() as u32;
        s.encode_fixed(&mut body, fixed_len);
    }
    for (_, meta, _) in episodes {
        body.extend_from_slice(meta);
    }
    for (_, _, metrics) in episodes {
        body.extend_from_slice(metrics);
    }
    let mut flags = 0u16;
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
    out.extend_from_slice(&(fixed_len as u16).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(stored);
    out
}

/// A decoded episode: its summary (with `record_offset` and `position` set), metadata JSON
/// bytes and metrics blob.
pub type DecodedEpisode = (EpisodeSummary, Vec<u8>, Vec<u8>);

/// The number of episodes a (damaged) Episode record's header claims, when it is plausible
/// (at least one, their fixed parts fitting the body it claims): what a lost record cost.
pub fn claimed_count(payload: &[u8]) -> Option<u64> {
    if payload.len() < BATCH_HEADER_LEN {
        return None;
    }
    let count = u32::from_le_bytes(payload[0..4].try_into().ok()?) as u64;
    let fixed_len = u16::from_le_bytes(payload[4..6].try_into().ok()?) as u64;
    let body_len = u64::from_le_bytes(payload[8..16].try_into().ok()?);
    let plausible = count >= 1
        && fixed_len >= FIXED_LEN as u64
        && count.checked_mul(fixed_len).is_some_and(|b| b <= body_len.min(MAX_BODY));
    plausible.then_some(count)
}

/// Decodes an Episode record payload. Every length is checked; errors say what does not hold.
pub fn decode_batch(payload: &[u8], record_offset: u64) -> Result<Vec<DecodedEpisode>, String> {
    if payload.len() < BATCH_HEADER_LEN {
        return Err(format!(
            "episode record of {} bytes, shorter than its {BATCH_HEADER_LEN}-byte header",
            payload.len()
        ));
    }
    let count = u32_at(payload, 0) as usize;
    let fixed_len = u16::from_le_bytes([payload[4], payload[5]]) as usize;
    let flags = u16::from_le_bytes([payload[6], payload[7]]);
    let body_len = u64_at(payload, 8);
    if fixed_len < FIXED_LEN {
        return Err(format!(
            "episode record with {fixed_len}-byte entries (at least {FIXED_LEN}; 0 is a pre-1.0 development file)"
        ));
    }
    if flags & !KNOWN_BATCH_FLAGS != 0 {
        return Err(format!(
            "episode record needs format feature flag(s) {:#x} this trajcore does not know (a newer writer)",
            flags & !KNOWN_BATCH_FLAGS
        ));
    }
    let fixed = (count as u64).checked_mul(fixed_len as u64).filter(|&f| f <= body_len);
    let Some(fixed) = fixed else {
        return Err(format!("episode record claims {count} episodes in a body of {body_len} bytes"));
    };
    let stored = &payload[BATCH_HEADER_LEN..];
    // Summaries and metadata compress well, but not without bound: a damaged or hostile size
    // claim must not make a reader allocate gigabytes.
    let plausible =
        if flags & BATCH_BODY_ZSTD != 0 { (1 << 20) + 512 * stored.len() as u64 } else { stored.len() as u64 };
    if body_len > MAX_BODY || body_len > plausible {
        return Err(format!(
            "episode record body of {body_len} bytes from {} stored bytes is implausibly large",
            stored.len()
        ));
    }
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
    let mut out: Vec<DecodedEpisode> = Vec::with_capacity(count);
    let mut at = fixed as usize;
    let mut take = |len: usize, what: &str, i: usize| -> Result<Vec<u8>, String> {
        let end = at.checked_add(len).filter(|&e| e <= body.len());
        let Some(end) = end else {
            return Err(format!("episode {i} of the record: {what} runs past the record"));
        };
        let bytes = body[at..end].to_vec();
        at = end;
        Ok(bytes)
    };
    let summaries: Vec<EpisodeSummary> = (0..count)
        .map(|i| {
            let mut s = EpisodeSummary::decode_fixed(&body[i * fixed_len..], record_offset);
            s.position = i as u32;
            s
        })
        .collect();
    let metas: Vec<Vec<u8>> = summaries
        .iter()
        .enumerate()
        .map(|(i, s)| take(s.metadata_len as usize, "metadata", i))
        .collect::<Result<_, _>>()?;
    let metrics: Vec<Vec<u8>> = summaries
        .iter()
        .enumerate()
        .map(|(i, s)| take(s.metrics_len as usize, "metrics", i))
        .collect::<Result<_, _>>()?;
    if at != body.len() {
        return Err(format!("episode record has {} bytes after its last metrics", body.len() - at));
    }
    for ((mut s, m), x) in summaries.into_iter().zip(metas).zip(metrics) {
        s.metrics = super::metrics::decode(&x).map_err(|e| format!("episode {}: {e}", s.position))?;
        out.push((s, m, x));
    }
    Ok(out)
}

/// Which of a shard's episode records (their `episode_id`s, in file order) a later record of
/// the same episode in the same shard supersedes: a flush writes a progress part of a running
/// episode at each interval, and each part (or the final record, or a discard notice) describes
/// the episode from its start, so the latest holds what the earlier ones did. A closed shard's
/// compaction leaves the superseded ones out.
pub fn superseded(episode_ids: &[u64]) -> Vec<bool> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<bool> = episode_ids.iter().rev().map(|id| !seen.insert(*id)).collect();
    out.reverse();
    out
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
            metrics_len: 0,
            piece_obs_first_row: 10 * i + 1,
            piece_step_first_row: 9 * i + 1,
            piece_return: i as f64 * 0.25,
            first_shard_seq: i / 7,
            metrics: Vec::new(),
        }
    }

    #[test]
    fn batches_round_trip_compressed_or_not() {
        for n in [0u64, 1, 3, 200] {
            let metas: Vec<String> =
                (0..n).map(|i| if i % 2 == 0 { String::new() } else { format!("{{\"i\":{i}}}") }).collect();
            let metric =
                |i: u64| super::super::metrics::Metric { column: i as u32, count: 2, sum: 1.5, min: 0.5, max: 1.0 };
            let metrics: Vec<Vec<u8>> =
                (0..n).map(|i| super::super::metrics::encode(&vec![metric(i); (i % 3) as usize])).collect();
            let items: Vec<EpisodeItem> =
                (0..n).map(|i| (summary(i), metas[i as usize].as_bytes(), &metrics[i as usize][..])).collect();
            for fixed_len in [FIXED_LEN, FIXED_LEN + 24] {
                let payload = encode_batch_with(&items, fixed_len);
                let back = decode_batch(&payload, 4096).unwrap();
                assert_eq!(back.len(), n as usize);
                for (i, (s, m, x)) in back.iter().enumerate() {
                    let mut want = summary(i as u64);
                    want.record_offset = 4096;
                    want.position = i as u32;
                    want.metadata_len = metas[i].len() as u32;
                    want.metrics_len = metrics[i].len() as u32;
                    want.metrics = vec![metric(i as u64); i % 3];
                    assert_eq!(s, &want);
                    assert_eq!(m, metas[i].as_bytes());
                    assert_eq!(x, &metrics[i]);
                }
            }
            let payload = encode_batch(&items);
            if n == 200 {
                assert!(payload.len() < 200 * FIXED_LEN / 2, "similar summaries compress");
            }
        }
    }

    #[test]
    fn damaged_batches_are_errors_not_panics() {
        let metas = ["{}"; 50];
        let items: Vec<EpisodeItem> = (0..50).map(|i| (summary(i), metas[i as usize].as_bytes(), &[][..])).collect();
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

    #[test]
    fn a_later_record_of_an_episode_supersedes_the_earlier_ones_of_its_shard() {
        // (episode ids in file order) -> superseded
        let cases: Vec<(&[u64], Vec<bool>)> = vec![
            (&[], vec![]),
            // Episodes that ended without a progress part.
            (&[0, 1, 2], vec![false, false, false]),
            // Progress parts of 0 and 1, then 0's end, then another part of 1 (or its rollover part).
            (&[0, 1, 0, 1, 2], vec![true, true, false, false, false]),
            // Three progress parts, then a discard notice: only the notice stays.
            (&[5, 5, 5, 5], vec![true, true, true, false]),
        ];
        for (ids, expected) in cases {
            assert_eq!(superseded(ids), expected, "{ids:?}");
        }
    }
}
