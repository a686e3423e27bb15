//! Reading shards and datasets.
//!
//! Layers, each depending only on those below it (no import circle):
//! - `dataset`: the façade users hold: open, refresh, the listing, and one-line forwards to the
//!   reads. It owns a `Store`, a `Catalog` and the damage reads found, and hands reads a
//!   `DatasetView` of them (`dataset_view`): every read is a method of the view.
//! - `store`: all I/O: shard files found in the directory, opened, scanned as they grow and
//!   checked for changes (`shard`, reading through `source`: a memory map or positioned reads),
//!   the cache of decoded chunks (`cache`, `chunk_bytes`, `shared_chunks`: one copy per machine
//!   for data-loader workers) and the checksum-verified records (`verified`).
//! - `catalog`: recordings, chunk lists (`chunk_list`) and episodes, built without I/O from the
//!   records the store's scans decode; its decisions are pure functions with table tests:
//!   `checks` (is a chunk sane, do a column and its mask agree, which rows no chunk holds),
//!   `parts` (episodes over a shard rollover), `tail` (an unfinished record is not damage).
//! - The reads: `rows` (a column's rows, one walk over the chunks of `[a, b)`), `gather`
//!   (batched windows into caller buffers, copying `pieces`), `scan` and `bulk` (consecutive
//!   steps), `lane_scan` (the file's order), `frames_of` (frame tables for device stacking),
//!   `batch` (a batch whole: `plan` keys -> fields, `request` -> windows), `steps` (step and
//!   window numbering, the one rule for negative indexes), `sampling`, `metrics`, `pool`.
//! - Damage: `verify` (every record checksummed, every chunk decoded), `damage` (which episodes
//!   a damaged spot affects), `integrity` (listings left out after a verification),
//!   `read_damage` and `lenient` (training reads that leave damaged episodes out and go on),
//!   `salvage` (what of each episode still reads: the plan `recover` writes).
//!
//! Everything read from a file is untrusted: every offset and length is bounds-checked with
//! checked arithmetic, and damage becomes a `Problem` (or `Error::Corrupt`), never a panic.

mod among;
mod batch;
mod bulk;
mod cache;
mod catalog;
mod checks;
mod chunk_bytes;
mod chunk_list;
mod column_names;
mod damage;
mod dataset;
mod dataset_view;
mod frames_of;
mod gather;
mod int_map;
mod integrity;
mod lane_scan;
mod lenient;
mod listing;
mod metrics;
pub(crate) mod no_shard;
mod opening_copies;
mod parts;
mod pieces;
mod plan;
mod pool;
mod read_damage;
// Object storage, or (without the `remote` feature) URLs refused by name.
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(not(feature = "remote"))]
#[path = "remote_off.rs"]
pub mod remote;
#[cfg(feature = "remote")]
mod remote_cache;
mod remote_reads;
mod request;
mod rows;
mod salvage;
mod sampling;
mod scan;
#[cfg(feature = "remote")]
pub mod segments;
mod shard;
mod shared_chunks;
mod source;
mod steps;
mod store;
mod store_url;
mod stream;
mod tail;
mod unfinished;
mod verified;
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
pub use request::Request;
pub use rows::{ColumnData, RowsView};
pub use sampling::{sample_steps, sample_windows, SplitMix64};
pub use scan::RangeRead;
pub use shared_chunks::{available_memory, cache_plan, CachePlan, CacheStats, CACHE_AUTO, CACHE_FLOOR, RAM_SHARE};
pub use steps::{resolve_index, EpisodeSet, StepIndex, WindowIndex};
pub use stream::set_stream_from_bytes;

pub(crate) use checks::episode_span;
pub use damage::Damage;
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
    /// Episodes this damage took out of the listing: a damaged Episode record's (the count its
    /// own header claims, so approximate), or 1 for an episode left out whose rows are lost.
    pub unlisted: u64,
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

/// A recording id as text.
pub(crate) fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
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
        Problem { file: file.into(), offset, why: why.into(), unlisted: 0 }
    }

    /// A problem that took `unlisted` episodes out of the listing.
    pub(crate) fn unlisting(mut self, unlisted: u64) -> Self {
        self.unlisted = unlisted;
        self
    }

    pub(crate) fn to_error(&self) -> crate::Error {
        crate::Error::corrupt(&self.file, self.offset, &self.why)
    }
}
