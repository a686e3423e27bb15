//! The writer's timelog: where the writer thread spends each second of a recording (copying rows
//! off the ring, encoding records, compressing chunks, writing, fsync), how full the ring is and
//! how often and how long the producer (the env loop) waited for it.
//!
//! The writer thread adds up stage times in a `Clock` and closes one `Sample` about every
//! second; samples are published to `Live`, which the caller's side reads (`Recorder::timelog`)
//! and which keeps memory bounded by merging neighbouring samples once it holds `MAX_SAMPLES`
//! (a long run keeps its whole span at a coarser step). The decisions (what a sample holds, how
//! two merge, when the log is compacted) take plain values, so they are table-tested below.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::format::timelog::Sample;

/// Samples kept before neighbours are merged: an hour at one second, then two hours at two, ...
pub const MAX_SAMPLES: usize = 3600;

/// How long a sample covers (until the log is compacted).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Where the writer thread spends its time. Every stage is timed where its work is done, never
/// nested in another, so their sum is the thread's busy time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Taking messages off the ring and copying their rows into the column buffers.
    Copy,
    /// Framing records (chunk tables, episode records, index checkpoints) and their CRC-32C
    /// checksums into the write buffer.
    Encode,
    /// The column codecs: the delta filter and zstd.
    Compress,
    /// Handing bytes to the OS (`write`).
    Write,
    /// `fsync` (with a durability that asks for it).
    Fsync,
    /// Sleeping with nothing to do.
    Idle,
}

const STAGES: usize = 6;

/// Merges neighbours pairwise (the first with the second, ...), halving the count; an odd last
/// sample stays as it is.
pub fn compact(samples: &mut VecDeque<Sample>) {
    let old: Vec<Sample> = samples.drain(..).collect();
    for pair in old.chunks(2) {
        samples.push_back(match pair {
            [a, b] => a.merge(b),
            [a] => *a,
            _ => unreachable!("chunks(2) yields one or two"),
        });
    }
}

/// Counters running totals are kept in (the writer's `Shared`), read at each sample's end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub messages: u64,
    pub steps: u64,
    pub bytes_raw: u64,
    pub bytes_written: u64,
    pub ring_waits: u64,
    pub backlog_waits: u64,
    pub producer_wait_ns: u64,
}

/// The shared half: samples published by the writer thread, and the producer's wait time.
#[derive(Debug, Default)]
pub struct Live {
    samples: Mutex<VecDeque<Sample>>,
    /// Nanoseconds the producer spent waiting for the ring or for the writer (pacing).
    pub producer_wait_ns: AtomicU64,
}

impl Live {
    pub fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if samples.len() >= MAX_SAMPLES {
            compact(&mut samples);
        }
        samples.push_back(sample);
    }

    /// Every sample so far, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect()
    }

    /// Called by the producer after a wait.
    pub fn add_producer_wait(&self, waited: Duration) {
        self.producer_wait_ns.fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
    }
}

thread_local! {
    /// fsync time noted by the shard writer on this thread (see `note_fsync`).
    static FSYNC_NS: Cell<u64> = const { Cell::new(0) };
}

/// Notes time spent in `fsync`. The shard writer calls it where it syncs; the writer thread
/// takes it out of the write stage it is timing (`Clock::time_write`).
pub fn note_fsync(took: Duration) {
    FSYNC_NS.with(|c| c.set(c.get() + took.as_nanos() as u64));
}

fn fsync_ns() -> u64 {
    FSYNC_NS.with(Cell::get)
}

/// The writer thread's half: stage times of the sample being filled.
pub struct Clock {
    started: Instant,
    sample_start: Instant,
    sample_start_ns: u64,
    busy: [Duration; STAGES],
    ring_fill_max: f64,
    last: Totals,
}

impl Clock {
    pub fn new(now_ns: u64) -> Self {
        let now = Instant::now();
        Clock {
            started: now,
            sample_start: now,
            sample_start_ns: now_ns,
            busy: [Duration::ZERO; STAGES],
            ring_fill_max: 0.0,
            last: Totals::default(),
        }
    }

    pub fn add(&mut self, stage: Stage, took: Duration) {
        self.busy[stage as usize] += took;
    }

    /// Runs `f` timed as `stage`.
    pub fn time<T>(&mut self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add(stage, start.elapsed());
        out
    }

    /// Runs `f` (which hands bytes to the OS, and may fsync) timed as `Write`, less the fsync
    /// time it noted, which goes to `Fsync`.
    pub fn time_write<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (start, synced) = (Instant::now(), fsync_ns());
        let out = f();
        let took = start.elapsed();
        let sync = Duration::from_nanos(fsync_ns() - synced).min(took);
        self.add(Stage::Write, took - sync);
        self.add(Stage::Fsync, sync);
        out
    }

    /// Busy time of the stages other than `Copy` and `Idle`, so far: what a timed call that
    /// may seal or write (a flush message) spent there, to leave out of its own stage.
    pub fn nested(&self) -> Duration {
        [Stage::Encode, Stage::Compress, Stage::Write, Stage::Fsync].iter().map(|&s| self.busy[s as usize]).sum()
    }

    pub fn note_ring_fill(&mut self, fill: f64) {
        self.ring_fill_max = self.ring_fill_max.max(fill);
    }

    /// Whether the sample being filled is a second old.
    pub fn due(&self, now: Instant) -> bool {
        now.duration_since(self.sample_start) >= SAMPLE_EVERY
    }

    /// Ends the sample being filled (counts from the running `totals`) and starts the next.
    pub fn close(&mut self, now: Instant, now_ns: u64, totals: Totals, ring_fill: f64) -> Sample {
        let secs = |s: Stage| self.busy[s as usize].as_secs_f64();
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let last = self.last;
        let sample = Sample {
            t_s: self.sample_start.duration_since(self.started).as_secs_f64(),
            dt_s: now.duration_since(self.sample_start).as_secs_f64(),
            time_ns: self.sample_start_ns,
            copy_s: secs(Stage::Copy),
            encode_s: secs(Stage::Encode),
            compress_s: secs(Stage::Compress),
            write_s: secs(Stage::Write),
            fsync_s: secs(Stage::Fsync),
            idle_s: secs(Stage::Idle),
            messages: d(totals.messages, last.messages),
            steps: d(totals.steps, last.steps),
            bytes_raw: d(totals.bytes_raw, last.bytes_raw),
            bytes_written: d(totals.bytes_written, last.bytes_written),
            ring_fill,
            ring_fill_max: self.ring_fill_max.max(ring_fill),
            ring_waits: d(totals.ring_waits, last.ring_waits),
            backlog_waits: d(totals.backlog_waits, last.backlog_waits),
            producer_wait_s: Duration::from_nanos(d(totals.producer_wait_ns, last.producer_wait_ns)).as_secs_f64(),
        };
        self.last = totals;
        self.sample_start = now;
        self.sample_start_ns = now_ns;
        self.busy = [Duration::ZERO; STAGES];
        self.ring_fill_max = 0.0;
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, copy: f64, fill: f64, fill_max: f64, steps: u64) -> Sample {
        Sample {
            t_s: t,
            dt_s: 1.0,
            copy_s: copy,
            ring_fill: fill,
            ring_fill_max: fill_max,
            steps,
            ..Default::default()
        }
    }

    #[test]
    fn merging_adds_times_and_counts_and_keeps_the_later_fill() {
        let a = sample(0.0, 0.25, 0.5, 0.9, 10);
        let b = sample(1.0, 0.5, 0.1, 0.2, 7);
        let m = a.merge(&b);
        assert_eq!((m.t_s, m.dt_s, m.copy_s, m.steps), (0.0, 2.0, 0.75, 17));
        assert_eq!((m.ring_fill, m.ring_fill_max), (0.1, 0.9));
    }

    #[test]
    fn compacting_halves_the_count_and_keeps_the_span() {
        // (samples before, samples after, covered seconds)
        for (n, after) in [(1usize, 1usize), (2, 1), (5, 3), (3600, 1800)] {
            let mut log: VecDeque<Sample> = (0..n).map(|i| sample(i as f64, 0.1, 0.0, 0.0, 1)).collect();
            compact(&mut log);
            assert_eq!(log.len(), after, "{n} samples");
            assert_eq!(log.iter().map(|s| s.dt_s).sum::<f64>(), n as f64);
            assert_eq!(log.iter().map(|s| s.steps).sum::<u64>(), n as u64);
            assert_eq!(log.front().map(|s| s.t_s), Some(0.0));
        }
    }

    #[test]
    fn the_live_log_stays_bounded() {
        let live = Live::default();
        for i in 0..3 * MAX_SAMPLES {
            live.push(sample(i as f64, 0.0, 0.0, 0.0, 1));
        }
        let samples = live.samples();
        assert!(samples.len() <= MAX_SAMPLES);
        assert_eq!(samples.iter().map(|s| s.steps).sum::<u64>(), 3 * MAX_SAMPLES as u64);
        assert!(samples.windows(2).all(|w| w[0].t_s < w[1].t_s), "in time order");
    }

    #[test]
    fn a_sample_counts_what_happened_since_the_last() {
        let mut clock = Clock::new(5);
        clock.add(Stage::Compress, Duration::from_millis(300));
        clock.note_ring_fill(0.75);
        let now = clock.started + Duration::from_secs(1);
        let totals = Totals { steps: 100, producer_wait_ns: 2_000_000_000, ..Default::default() };
        let first = clock.close(now, 1_000_000_005, totals, 0.25);
        assert_eq!((first.t_s, first.dt_s, first.time_ns), (0.0, 1.0, 5));
        assert_eq!((first.compress_s, first.steps, first.producer_wait_s), (0.3, 100, 2.0));
        assert_eq!((first.ring_fill, first.ring_fill_max), (0.25, 0.75));
        let later = now + Duration::from_millis(500);
        let totals = Totals { steps: 130, ..totals };
        let second = clock.close(later, 0, totals, 0.0);
        assert_eq!((second.t_s, second.dt_s, second.steps, second.compress_s), (1.0, 0.5, 30, 0.0));
        assert_eq!((second.ring_fill_max, second.producer_wait_s), (0.0, 0.0));
    }

    #[test]
    fn fsync_is_taken_out_of_the_write_stage() {
        let mut clock = Clock::new(0);
        clock.time_write(|| {
            std::thread::sleep(Duration::from_millis(2));
            note_fsync(Duration::from_millis(1));
        });
        assert_eq!(clock.busy[Stage::Fsync as usize], Duration::from_millis(1));
        assert!(clock.busy[Stage::Write as usize] >= Duration::from_millis(1));
        assert_eq!(clock.nested(), clock.busy[Stage::Write as usize] + Duration::from_millis(1));
    }
}
