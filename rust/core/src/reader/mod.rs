//! Reading shards and datasets.
//!
//! - `shard`: one shard file: header check, its bytes (`source`: memory map or positioned reads), the clean path (End -> Index chain) and
//!   the recovery path (hopping record headers forward), and what damage was found.
//! - `dataset`: a directory of shards (or one shard): recordings, their columns, merged chunk
//!   lists per (recording, lane, column), the episode list, `refresh` for files still being written.
//! - `rows`: reading rows of a column into a buffer, across chunks, through the cache.
//! - `cache`: the byte-bounded cache of decoded chunks and the set of checksum-verified records.
//! - `steps`: the global step index (prefix sums of episode lengths) and episode subsets with
//!   their own step and window numbering.
//! - `gather`: batched reads of many (episode, step) windows into caller-owned buffers.
//! - `scan`: bulk reads of consecutive steps (a run per episode instead of a window per step).
//! - `lane_scan`: the file's order of a set of episodes (by recording, lane and row), in which a
//!   bulk read copies whole chunks instead of a piece per episode.
//! - `metrics`: the episodes' stored metrics as arrays by column name.
//! - `sampling`: reproducible uniform sampling of steps and windows from a seed.
//! - `plan`: the fields behind a batch's output keys; `request`: which windows a batch holds
//!   (and the one rule for negative indexes); `batch`: a batch read whole into caller outputs;
//!   `pool`: where those outputs lie in one block, and the pool of large blocks.
//! - `verify`: every record checksummed and every chunk decoded, damage mapped to episodes
//!   (`damage`); `integrity`: listings left out after a verification, episodes left out at open;
//!   `lenient`: training reads that leave damaged episodes out and go on; `salvage`: what of each
//!   episode still reads (the plan `recover` writes).
//!
//! Everything read from a file is untrusted: every offset and length is bounds-checked with
//! checked arithmetic, and damage becomes a `Problem` (or `Error::Corrupt`), never a panic.

mod batch;
mod bulk;
mod cache;
mod chunk_bytes;
mod column_names;
mod damage;
mod dataset;
mod frames_of;
mod gather;
mod integrity;
mod lane_scan;
mod lenient;
mod metrics;
pub(crate) mod no_shard;
mod parts;
mod plan;
mod pool;
mod request;
mod rows;
mod salvage;
mod sampling;
mod scan;
mod shard;
mod shared_chunks;
mod source;
mod steps;
mod stream;
mod tail;
mod unfinished;
mod verify;

use std::path::{Path, PathBuf};

pub use batch::BatchOut;
pub use bulk::{set_scan_block_bytes, IndexOut};
pub use dataset::{ColumnStats, Dataset, EpisodeRef, Recording, SkippedRecord};
pub use frames_of::FrameTable;
pub use gather::{
    max_threads, set_gather_hold_bytes, set_max_threads, set_parallel_thresholds, Field, Out, Run, Window,
};
pub use metrics::{episode_metrics, episode_summaries, MetricColumn, Values};
pub use plan::{BatchPlan, PlanCache, DEFAULT_KEYS};
pub use pool::{ArenaLayout, BlockPool, BATCH_BLOCKS};
pub use request::{resolve_index, Request};
pub use rows::{ColumnData, RowsView};
pub use sampling::{sample_steps, sample_windows, SplitMix64};
pub use scan::RangeRead;
pub use shared_chunks::{available_memory, cache_plan, CachePlan, CacheStats, CACHE_AUTO, CACHE_FLOOR, RAM_SHARE};
pub use steps::{EpisodeSet, StepIndex, WindowIndex};
pub use stream::set_stream_from_bytes;

pub use damage::Damage;
pub(crate) use dataset::episode_span;
pub use integrity::{EpisodeKey, Exclusions};
pub use lenient::{Draw, Redraw, WindowKind};
pub use salvage::{Salvage, SalvagePlan};
pub use verify::{open_verified, verify, verify_path, VerifyReport};

pub use crate::format::episode::EpisodeSummary;

/// Asks the CPU to start loading the cache line at `p`. Random rows of a large dataset are
/// memory misses; issuing them all before copying overlaps their latencies (the copy loop
/// alone keeps only a few in flight).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the address, and changes
    // nothing the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

pub use crate::format::SHARD_EXTENSION;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// Raise `Error::Corrupt` on any damage instead of keeping what is intact and listing a `Problem`.
    pub strict: bool,
    /// Upper bound on the bytes of decoded (decompressed) chunks kept in memory; `CACHE_AUTO`
    /// (the default): sized from the dataset and the memory available (see `cache_plan`).
    pub cache_bytes: usize,
    /// Read shards through memory maps (raw chunks viewed without a copy). Without: positioned
    /// reads through the cache, so a file truncated by another process gives an error, never
    /// a SIGBUS.
    pub mmap: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { strict: false, cache_bytes: CACHE_AUTO, mmap: true }
    }
}

/// Damage found while opening (or refreshing): what was left out, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub offset: u64,
    pub why: String,
}

impl Problem {
    /// (file, byte offset, why): how the bindings hand a problem out.
    pub fn parts(&self) -> (String, u64, String) {
        (self.file.display().to_string(), self.offset, self.why.clone())
    }
}

/// As its `parts`, a (file, byte offset, why) list.
impl serde::Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.parts().serialize(s)
    }
}

/// A path as reports hand it out: its text, lossy where it is not UTF-8 (serde's own refuses
/// such a path, and a report must not fail for a file's name).
pub(crate) fn path_text<S: serde::Serializer>(path: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(&path.display())
}

/// `path_text` of each path.
pub(crate) fn paths_text<S: serde::Serializer>(paths: &[PathBuf], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.display().to_string()))
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: byte offset {}: {}", self.file.display(), self.offset, self.why)
    }
}

impl Problem {
    pub(crate) fn new(file: impl Into<PathBuf>, offset: u64, why: impl Into<String>) -> Self {
        Problem { file: file.into(), offset, why: why.into() }
    }

    pub(crate) fn to_error(&self) -> crate::Error {
        crate::Error::corrupt(&self.file, self.offset, &self.why)
    }
}
