//! Reading shards and datasets, in rooms. No module imports another that imports it back
//! (`.ci/import_cycles.py` checks it), and the object storage wing (`crate::objstore`) imports
//! nothing of the reader. The rooms, roughly from the bytes up (a room may still use a type of a
//! later one: the catalog takes the store's scans, and lists episodes as `reads::steps` sets):
//! - `store/`: every byte read. Shard files found in a directory or under a store prefix
//!   (`find_shards`), opened and scanned as they grow (`shard`, with record `framing` and the
//!   `tail` rule for an unfinished last record), read through a `source` (a memory map,
//!   positioned reads, or a remote object), a store's shard opened from its `opening_copies`
//!   and its chunks fetched together (`remote_reads`), a closed shard's compacted rewrite
//!   switched to (`compacted`); decoded chunks in `decoded/` (the per-process `cache`, the
//!   `joined` runs of small chunks for sampling, `shared_chunks`: one copy per machine for
//!   data-loader workers), their bytes (`chunk_bytes`) and the Chunks records whose checksum
//!   passed (`checksummed`).
//! - `catalog/`: recordings, chunk lists (`chunk_list`) and episodes, built without I/O from
//!   the records the store's scans decode; its decisions are pure functions with table tests:
//!   `trust` (is a chunk sane, do a column and its mask agree, which rows no chunk holds),
//!   `parts` (episodes over a shard rollover), `rewrite` (a shard's entries swapped for its
//!   compacted rewrite's), `evicted`, `column_names`, `metrics` (per-episode values
//!   from the index, for filters and tables).
//! - `reads/`: `rows` (a column's rows, one walk over the chunks of `[a, b)`), `gather`
//!   (batched windows into caller buffers, copying `pieces`), `scan/` (consecutive steps: a
//!   range, as runs, in the file's order), `frames_of` (frame tables for device stacking),
//!   `batch` (a batch whole: `plan` keys -> fields, `request` -> windows), `steps` (step and
//!   window numbering, the one rule for negative indexes), `sampling`, `pool` (batch blocks),
//!   `stream` (non-temporal stores into outputs larger than the caches), `among`.
//! - `integrity/`: damage. `problem` (what opening left out), `verify` (every checksum, every
//!   chunk decoded) and `unfinished` (a shard without its End), `damage` (which episodes a
//!   damaged spot affects), `exclusions` (listings left out after a verification), `lenient`
//!   and `found_damage` (training reads that leave damaged episodes out and go on), `salvage`
//!   (what of each episode still reads: the plan `recover` writes).
//! - `dataset` (the façade users hold: open, refresh, the listing) hands out a `DatasetView`
//!   (`dataset_view`) of its store and catalog: every read is a method of the view; `report`
//!   answers what it says about itself (the listing, the cache, a recording's Meta), by name;
//!   `shared` holds it for readers on several threads, with their batch plans.
//!
//! Everything read from a file is untrusted: every offset and length is bounds-checked with
//! checked arithmetic, and damage becomes a `Problem` (or `Error::Corrupt`), never a panic.

mod catalog;
mod dataset;
mod dataset_view;
mod int_map;
mod integrity;
mod live;
mod pin;
mod reads;
mod report;
mod shared;
pub(crate) mod store;

use std::path::{Path, PathBuf};

pub use crate::reader::catalog::annotations::AnnotationFile;
pub use crate::reader::catalog::metrics::{episode_metrics, episode_summaries, MetricColumn, Values};
pub use crate::reader::reads::among::Subset;
pub use crate::reader::reads::batch::BatchOut;
pub use crate::reader::reads::frames_of::FrameTable;
pub use crate::reader::reads::gather::{
    max_threads, set_gather_hold_bytes, set_max_threads, set_parallel_thresholds, Field, Out, Run, Window,
};
pub use crate::reader::reads::plan::{BatchPlan, OutputSpec, PlanCache, DEFAULT_KEYS, INDEX_KEYS};
pub use crate::reader::reads::pool::{ArenaLayout, BlockPool, BATCH_BLOCKS};
pub use crate::reader::reads::request::Request;
pub use crate::reader::reads::rows::{ColumnData, ColumnRows, RowsView};
pub use crate::reader::reads::sampling::{sample_steps, sample_windows, SplitMix64};
pub use crate::reader::reads::scan::runs::{set_scan_block_bytes, IndexOut};
pub use crate::reader::reads::scan::RangeRead;
pub use crate::reader::reads::steps::{resolve_index, EpisodeSet, StepIndex, WindowIndex};
pub use crate::reader::reads::stream::set_stream_from_bytes;
pub use crate::reader::store::decoded::shared_chunks::{
    available_memory, cache_plan, CachePlan, CacheStats, CACHE_AUTO, CACHE_FLOOR, RAM_SHARE,
};
pub use dataset::{ColumnStats, Dataset, EpisodeRef, OpenOptions, Recording, SkippedRecord};
pub use dataset_view::DatasetView;
pub use pin::EpisodePin;
pub use report::Report;
pub use shared::SharedDataset;

pub(crate) use crate::reader::catalog::trust::episode_span;
pub use crate::reader::integrity::damage::Damage;
pub use crate::reader::integrity::exclusions::{EpisodeKey, Exclusions};
pub use crate::reader::integrity::lenient::{Draw, Redraw};
pub use crate::reader::integrity::problem::Problem;
pub use crate::reader::integrity::salvage::{Salvage, SalvagePlan};
pub use crate::reader::integrity::verify::{
    open_verified, verify, verify_dataset, verify_path, verify_store, VerifyReport,
};
pub use crate::reader::reads::steps::WindowKind;

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
