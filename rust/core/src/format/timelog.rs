//! Timelog records: the writer thread's timings (see `writer::timelog`), stored in the file as
//! the recording goes, so they can be plotted after the fact.
//!
//! Payload: a `format::table` of entries of at least `ENTRY_LEN` bytes: the fields of `Sample` in
//! declaration order, each 8 bytes little-endian (u64 or f64); readers skip the bytes after those
//! they know.

use serde::Serialize;

use super::{f64_at, table, u64_at};

/// One stretch of a recording: seconds per stage, counts, and the ring's state.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Sample {
    /// Seconds from the recorder's start to the start of this sample.
    pub t_s: f64,
    /// Seconds this sample covers.
    pub dt_s: f64,
    /// Unix time of the sample's start, in ns.
    pub time_ns: u64,
    pub copy_s: f64,
    pub encode_s: f64,
    pub compress_s: f64,
    pub write_s: f64,
    pub fsync_s: f64,
    pub idle_s: f64,
    /// Messages (steps, resets, control messages) taken off the ring.
    pub messages: u64,
    pub steps: u64,
    /// Value bytes taken off the ring, and bytes appended to shard files.
    pub bytes_raw: u64,
    pub bytes_written: u64,
    /// Fraction of the ring in use at the sample's end, and the most seen during it.
    pub ring_fill: f64,
    pub ring_fill_max: f64,
    /// Steps that waited for ring space, or because the writer was too far behind (pacing).
    pub ring_waits: u64,
    pub backlog_waits: u64,
    /// Seconds the producer spent in those waits.
    pub producer_wait_s: f64,
}

impl Sample {
    /// Two consecutive samples as one: times and counts add up, the fill at the end is the
    /// later one's, the most is the larger.
    pub fn merge(&self, later: &Sample) -> Sample {
        Sample {
            t_s: self.t_s,
            dt_s: self.dt_s + later.dt_s,
            time_ns: self.time_ns,
            copy_s: self.copy_s + later.copy_s,
            encode_s: self.encode_s + later.encode_s,
            compress_s: self.compress_s + later.compress_s,
            write_s: self.write_s + later.write_s,
            fsync_s: self.fsync_s + later.fsync_s,
            idle_s: self.idle_s + later.idle_s,
            messages: self.messages + later.messages,
            steps: self.steps + later.steps,
            bytes_raw: self.bytes_raw + later.bytes_raw,
            bytes_written: self.bytes_written + later.bytes_written,
            ring_fill: later.ring_fill,
            ring_fill_max: self.ring_fill_max.max(later.ring_fill_max),
            ring_waits: self.ring_waits + later.ring_waits,
            backlog_waits: self.backlog_waits + later.backlog_waits,
            producer_wait_s: self.producer_wait_s + later.producer_wait_s,
        }
    }
}

/// Writes `Sample` fields in order (`u64` or `f64`), and reads them back, from one list.
macro_rules! sample_fields {
    ($m:ident) => {
        $m!(t_s: f64, dt_s: f64, time_ns: u64, copy_s: f64, encode_s: f64, compress_s: f64, write_s: f64,
            fsync_s: f64, idle_s: f64, messages: u64, steps: u64, bytes_raw: u64, bytes_written: u64,
            ring_fill: f64, ring_fill_max: f64, ring_waits: u64, backlog_waits: u64, producer_wait_s: f64)
    };
}

macro_rules! count_fields {
    ($($f:ident: $t:ty),*) => { [$(stringify!($f)),*].len() };
}

/// Bytes of one entry as this version writes it.
pub const ENTRY_LEN: usize = 8 * sample_fields!(count_fields);

pub fn encode(samples: &[Sample]) -> Vec<u8> {
    let mut out = table::start(samples.len(), ENTRY_LEN);
    for s in samples {
        macro_rules! put {
            ($($f:ident: $t:ty),*) => { $(out.extend_from_slice(&s.$f.to_le_bytes());)* };
        }
        sample_fields!(put);
    }
    out
}

pub fn decode(payload: &[u8]) -> Result<Vec<Sample>, String> {
    Ok(table::entries(payload, ENTRY_LEN, "timelog record")?
        .map(|e| {
            let mut at = 0;
            let mut next = || {
                at += 8;
                at - 8
            };
            macro_rules! get {
                ($($f:ident: $t:ident),*) => { Sample { $($f: get!(@ $t, next())),* } };
                (@ f64, $at:expr) => { f64_at(e, $at) };
                (@ u64, $at:expr) => { u64_at(e, $at) };
            }
            sample_fields!(get)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_longer_entries() {
        let samples: Vec<Sample> = (0..3)
            .map(|i| Sample {
                t_s: i as f64,
                dt_s: 1.0,
                steps: 10 * i,
                ring_fill_max: 0.5,
                producer_wait_s: 0.25,
                ..Default::default()
            })
            .collect();
        let bytes = encode(&samples);
        assert_eq!(bytes.len(), 8 + 3 * ENTRY_LEN);
        assert_eq!(decode(&bytes).unwrap(), samples);
        // A newer writer's longer entries: the known fields still read.
        let mut longer = Vec::new();
        longer.extend_from_slice(&3u32.to_le_bytes());
        longer.extend_from_slice(&((ENTRY_LEN + 16) as u32).to_le_bytes());
        for e in bytes[8..].chunks(ENTRY_LEN) {
            longer.extend_from_slice(e);
            longer.extend_from_slice(&[7; 16]);
        }
        assert_eq!(decode(&longer).unwrap(), samples);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[]).is_err());
    }
}
