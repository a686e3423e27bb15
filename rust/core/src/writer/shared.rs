//! What the caller's thread and the writer thread share: counters, the writer's error, the
//! flush tickets done and the shard paths. Everything here is cheap to poll.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::timelog;

#[derive(Default)]
pub struct Shared {
    /// Set when the writer thread stopped on an error; `error` says why.
    pub dead: AtomicBool,
    pub error: Mutex<Option<String>>,
    /// The last flush ticket the writer completed.
    pub flushed: AtomicU64,
    pub steps: AtomicU64,
    pub episodes: AtomicU64,
    pub bytes_raw: AtomicU64,
    pub bytes_written: AtomicU64,
    pub ring_waits: AtomicU64,
    /// Steps that waited because the writer was more than the pacing limit behind.
    pub backlog_waits: AtomicU64,
    /// Messages taken off the ring so far (the producer paces itself by how fast this moves).
    pub handled: AtomicU64,
    pub shard_paths: Mutex<Vec<PathBuf>>,
    /// Closed shards rewritten without the flush timer's small chunks, and the bytes that saved.
    pub shards_compacted: AtomicU64,
    pub bytes_compacted: AtomicU64,
    /// Why a closed shard could not be compacted (it was left as it was, every row in it).
    pub compaction_error: Mutex<Option<String>>,
    /// Transitions in the shards a bounded recording deleted (`capacity`), and why an eviction
    /// failed (the shards stayed).
    pub evicted_steps: AtomicU64,
    pub eviction_error: Mutex<Option<String>>,
    /// Per-second timings of the writer thread (see `timelog`).
    pub timelog: timelog::Live,
}

impl Shared {
    pub fn fail(&self, why: String) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(why);
        self.dead.store(true, Ordering::Release);
    }

    pub fn error_message(&self) -> String {
        let slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.clone().unwrap_or_else(|| "the writer thread has stopped".into())
    }
}
