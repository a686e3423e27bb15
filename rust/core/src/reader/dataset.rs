//! A dataset: one shard file, or every `.trj` shard in a directory. A façade over two parts:
//! the `Store` (the files, their bytes, the cache of decoded chunks: all I/O) and the `Catalog`
//! (recordings, chunk lists and episodes, built from the records the store's scans decode).
//! Reads (`rows`, `gather`, `scan`, `bulk`, ...) look up the catalog and read through the store.

use std::path::{Path, PathBuf};

use super::catalog::Catalog;
use super::dataset_view::DatasetView;
use super::integrity::problem::Problem;
use super::live::Live;
use super::store::Store;
use super::CacheStats;
use super::CACHE_AUTO;
use crate::error::Result;
use crate::reader::integrity::exclusions::Exclusions;
use crate::reader::integrity::found_damage::ReadDamage;
use crate::reader::reads::steps::EpisodeSet;
use crate::reader::store::decoded::cache::ChunkCache;
use crate::schema::ColumnId;

pub use super::catalog::{ColumnStats, EpisodeRef, Recording, SkippedRecord};

/// How a dataset is opened.
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

pub struct Dataset {
    path: PathBuf,
    is_dir: bool,
    opts: OpenOptions,
    pub(super) store: Store,
    pub(super) catalog: Catalog,
    /// Damage reads found (lenient reads leave its episodes out).
    read_damage: ReadDamage,
    /// Shard problems, the catalog's and the exclusions', gathered after every open/refresh.
    problems: Vec<Problem>,
    /// The episodes a bounded recording's buffer holds (a refresh per training step must not
    /// walk the dataset: see `live`).
    live: Live,
}

impl Dataset {
    /// Opens a shard file or a directory of shards (`*.trj`; other files are ignored).
    ///
    /// Errors: `NotFound` (no such path), `NotTrajcore` (a file that is not a trajcore shard:
    /// the file named, or a `.trj` file in the directory), `Version` (a newer major version),
    /// `Corrupt` (damage, with `strict`), `Io`.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Dataset> {
        Dataset::open_with(path, opts, Exclusions::default())
    }

    /// `open`, with what is known of damage beyond the files (see `integrity`).
    pub(super) fn open_with(path: &Path, opts: OpenOptions, exclusions: Exclusions) -> Result<Dataset> {
        let path = crate::objstore::url::local_path(path);
        let is_dir = crate::reader::store::find_shards::is_dir(path)?;
        let mut ds = Dataset {
            path: path.to_path_buf(),
            is_dir,
            store: Store::new(ChunkCache::new(opts.cache_bytes)),
            catalog: Catalog::new(path, is_dir, exclusions),
            read_damage: ReadDamage::default(),
            opts,
            problems: Vec::new(),
            live: Live::default(),
        };
        ds.update()?;
        let (lru_bytes, store) =
            crate::reader::store::decoded::shared_chunks::plan_for(&ds.catalog, &ds.store.shards, ds.opts.cache_bytes);
        ds.store.cache = ChunkCache::with_store(lru_bytes, store);
        Ok(ds)
    }

    /// Opens like `open`, leaving out the listings `exclusions` names and listing its problems
    /// with the dataset's.
    ///
    /// Errors: as `open`.
    pub fn open_excluding(path: &Path, opts: OpenOptions, exclusions: Exclusions) -> Result<Dataset> {
        Dataset::open_with(path, opts, exclusions)
    }

    /// Opens leaving out what `exclusions_json` names (an earlier verification's listing, as
    /// `Exclusions::to_json` gave it: a dataset pickled into a worker), else verifying first with
    /// `verify` (see `open_verified`), else as `open`.
    ///
    /// Errors: `Invalid` (malformed `exclusions_json`); those of `open` and `open_verified`.
    pub fn open_choosing(
        path: &Path,
        opts: OpenOptions,
        verify: bool,
        exclusions_json: Option<&str>,
    ) -> Result<Dataset> {
        let ds = match exclusions_json.map(Exclusions::from_json).transpose()? {
            Some(exclusions) => Dataset::open_excluding(path, opts, exclusions),
            None if verify => super::open_verified(path, opts).map(|(ds, _)| ds),
            None => Dataset::open(path, opts),
        }?;
        crate::reader::store::no_shard::check_dataset(&ds)?;
        Ok(ds)
    }

    /// The dataset as reads see it (see `dataset_view`).
    /// The dataset as reads see it: every read (rows, batches, scans, frame tables, damage,
    /// salvage) is a method of the view, which borrows the dataset.
    pub fn view(&self) -> DatasetView<'_> {
        DatasetView {
            root: &self.path,
            catalog: &self.catalog,
            store: &self.store,
            read_damage: &self.read_damage,
            opts: &self.opts,
        }
    }

    /// Uses the shared store of the process that handed over `fd` (taking ownership of it)
    /// instead of this one's, when laid out for the same chunks; else closes it. Returns
    /// whether it was adopted.
    ///
    /// # Safety
    /// `fd` must be an open descriptor this process owns and uses nowhere else.
    pub unsafe fn adopt_shared_chunks(&mut self, fd: i32) -> bool {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.store.adopt_shared_chunks(&self.catalog, fd) }
    }

    /// Finds new shard files, scans what grew, and takes in what was found.
    fn update(&mut self) -> Result<()> {
        let (opened, problems) = self.store.open_new(&self.path, self.is_dir, &self.opts)?;
        self.catalog.own_problems.extend(problems);
        let changed = self.store.check_changed(&self.path);
        if self.is_dir {
            self.store.check_evicted_in_store(&self.path)?;
        }
        self.catalog.own_problems.extend(changed);
        let catalog = &mut self.catalog;
        let (found, failed) = self.store.scan(opened, |facts| catalog.register(facts));
        let gone = self.store.evicted();
        let gone_rows_found = found.iter().any(|(s, f)| gone.get(*s) == Some(&true) && !f.chunks.is_empty());
        self.catalog.take_in(found, self.store.first_damage(), &mut self.store.verified);
        if let Some(e) = failed {
            return Err(e);
        }
        self.switch_to_rewrites();
        let log = std::cell::OnceCell::new();
        let is_dir = self.is_dir;
        self.catalog.report_missing_shards(|id, seq| {
            let log = log.get_or_init(|| {
                let read = is_dir.then(|| crate::writer::files::capacity::EvictionLog::read(&self.path).ok()).flatten();
                read.unwrap_or_default()
            });
            log.evicted_seqs.contains(&(*id, seq))
        });
        let regrown = std::mem::take(&mut self.catalog.regrown);
        let gone = self.store.evicted();
        if self.live.update(&self.catalog, gone.clone(), &regrown, gone_rows_found) {
            // Sampling reads them no more: their decoded chunks make room for the new ones.
            self.store.cache.forget_shards(&gone);
        }
        // Then lets go of those nothing handed out reads (see `pin`).
        let released = self.store.release_unpinned();
        if !released.is_empty() {
            let mut now = vec![false; self.store.shards.len()];
            released.iter().for_each(|&s| now[s] = true);
            self.store.verified.forget_shards(&now);
            let all: Vec<bool> = self.store.shards.iter().map(|s| s.released).collect();
            self.catalog.release_shards(&now, &all);
        }
        self.problems = self.store.problems().cloned().collect();
        self.problems.extend(self.catalog.own_problems.iter().cloned());
        self.problems.extend(self.catalog.exclusions.problems.iter().cloned());
        match self.problems.first() {
            Some(p) if self.opts.strict => Err(p.to_error()),
            _ => Ok(()),
        }
    }

    /// Switches the closed shards its writer compacted under the reader to their rewrites
    /// (see `store::compacted`): the same rows, in the chunks a fresh open finds.
    fn switch_to_rewrites(&mut self) {
        for (shard, new, found) in self.store.rewrites(self.opts.mmap) {
            // The old file's record ids first: the rewrite's records lie at other offsets,
            // some at those of the old file's.
            let mut mask = vec![false; self.store.shards.len()];
            mask[shard] = true;
            self.store.verified.forget_shards(&mask);
            match self.catalog.switch_shard(shard, &found, &mut self.store.verified) {
                Ok(()) => {
                    self.store.switch_to(shard, new);
                    self.read_damage.forget_checked();
                }
                Err(why) => self.store.refuse_rewrite(shard, &why),
            }
        }
    }

    /// Re-scans shards that grew and picks up new shard files (reading while a recorder writes).
    /// New episodes are appended after those already listed. Returns how many were added.
    pub fn refresh(&mut self) -> Result<usize> {
        let before = self.catalog.episodes.len();
        self.update()?;
        Ok(self.catalog.episodes.len() - before)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn options(&self) -> &OpenOptions {
        &self.opts
    }

    /// Damage found so far: what was left out, and where.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Episodes the problems took out of the listing (damaged Episode records, as their own
    /// headers count them, and episodes whose rows a damaged record took): lost, and in no
    /// listing.
    pub fn episodes_unlisted(&self) -> u64 {
        self.problems.iter().map(|p| p.unlisted).sum()
    }

    /// The writer's timelog of `recording` stored in its shards (a sample per second of
    /// recording, in order), and the damage that left samples out (a damaged record loses its
    /// minute or so of samples; the rest are read).
    pub fn timelog(&self, recording: usize) -> (Vec<crate::format::timelog::Sample>, Vec<Problem>) {
        self.store.timelog(self.catalog.recordings.get(recording).map_or(&[][..], |r| &r.shards[..]))
    }

    /// Shard files replaced (renamed over) or deleted since they were opened: not damage (the
    /// dataset goes on reading the files it opened), but news a reader of a live directory wants.
    pub fn notices(&self) -> &[Problem] {
        &self.store.notices
    }

    /// Episodes with rows in shards a bounded recording (`capacity_steps`) deleted since this
    /// dataset opened them, and those discarded after a refresh listed them running, ascending:
    /// still readable (the dataset reads the files it opened), but no longer in the buffer, so
    /// sampling leaves them out.
    pub fn evicted_episodes(&self) -> &[usize] {
        &self.live.evicted
    }

    /// The episodes sampling draws from: every episode less `evicted_episodes`, with their own
    /// step numbering; `None` while none is evicted (then `all_episodes`). Kept up to date by
    /// `refresh` at the cost of what it found (see `live`).
    pub fn live_episodes(&self) -> Option<&std::sync::Arc<EpisodeSet>> {
        self.live.set.as_ref()
    }

    /// The recordings `live_episodes` come from, when not all (see
    /// `DatasetView::recordings_among`), kept as the set is.
    pub fn live_recordings(&self) -> Option<Vec<bool>> {
        self.live.among(self.catalog.recordings.len())
    }

    /// Transitions the bounded recordings of this directory deleted, as their eviction log
    /// says (0 for a file, or a directory or store prefix no bounded recording wrote).
    ///
    /// Errors: `Corrupt` (a log that does not parse), `Io` (for a prefix: the store).
    pub fn evicted_steps(&self) -> Result<u64> {
        if !self.is_dir {
            return Ok(0);
        }
        Ok(crate::writer::files::capacity::EvictionLog::read(&self.path)?.evicted_steps)
    }

    /// Transitions (step rows) stored in each shard, in `shard_paths` order, with the
    /// recording it belongs to: what a bounded recording started on this directory counts.
    pub fn shard_steps(&self) -> Vec<(usize, u64)> {
        self.catalog.shard_steps()
    }

    /// Records of kinds this version does not know, skipped (a newer minor version wrote them).
    pub fn skipped_records(&self) -> &[SkippedRecord] {
        &self.catalog.skipped
    }

    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.store.shards.iter().map(|s| s.path.clone()).collect()
    }

    pub fn recordings(&self) -> &[Recording] {
        &self.catalog.recordings
    }

    pub fn episodes(&self) -> &[EpisodeRef] {
        &self.catalog.episodes
    }

    /// Per (recording, column): chunks, raw bytes and stored bytes over every chunk listed
    /// (rows of discarded episodes included: they are in the file too), ordered by recording and
    /// column id. Read from the index: nothing is decoded.
    pub fn column_stats(&self) -> Vec<ColumnStats> {
        self.catalog.column_stats()
    }

    /// The sum of episode lengths.
    pub fn num_steps(&self) -> u64 {
        self.catalog.all.num_steps()
    }

    /// Every episode, in `episodes()` order, with the global step index: step `g` of the
    /// dataset is step `g - first_step(k)` of the episode `k` holding it. `refresh` extends it.
    pub fn all_episodes(&self) -> &EpisodeSet {
        &self.catalog.all
    }

    /// (episode, step within it) of global step `step`.
    pub fn locate_step(&self, step: u64) -> Result<(usize, u64)> {
        self.catalog.all.locate_step(step)
    }

    /// Errors: `OutOfRange`.
    pub fn recording(&self, recording: usize) -> Result<&Recording> {
        self.catalog.recording(recording)
    }

    pub fn column_id(&self, recording: usize, name: &str) -> Option<ColumnId> {
        self.catalog.column_id(recording, name)
    }

    /// The rows an episode spans in a column: (first row, number of rows). T+1 rows on the
    /// observation timeline, T on the step timeline.
    pub fn episode_rows(&self, episode: usize, column: ColumnId) -> Result<(u64, u64)> {
        self.catalog.episode_rows(episode, column)
    }

    // The reads, each documented where it is built (see `dataset_view`).

    /// How this process keeps the decoded chunks (see `CacheStats`).
    pub fn cache_stats(&self) -> CacheStats {
        self.store.cache_stats()
    }

    /// The shared store's descriptor, for a spawned process to `adopt_shared_chunks`.
    pub fn shared_chunks_fd(&self) -> Option<i32> {
        self.store.shared_chunks_fd()
    }

    /// The listings this dataset was opened without (see `open_excluding`).
    /// The listings this dataset was opened without (see `open_excluding`).
    pub fn exclusions(&self) -> &Exclusions {
        &self.catalog.exclusions
    }

    /// Changes whenever a batch plan made before may no longer hold (`PlanCache::get_or_make_at`
    /// makes it again): what plans are made of changed (recordings, their Meta records and
    /// columns), or the id of an annotation column did (a refresh found a new version, or a
    /// recording still recorded added a column of its own). Both counts only grow, so their sum
    /// changes whenever either does.
    pub fn plan_generation(&self) -> u64 {
        self.catalog.schema_generation() + self.catalog.columns_generation
    }

    /// The annotation sidecars found beside the shards (see `crate::annotation`), in the order
    /// found, whether readers take each and, if not, why.
    pub fn annotations(&self) -> Vec<super::catalog::annotations::AnnotationFile> {
        self.catalog.annotation_files()
    }

    /// Every sidecar whose name and version are known (see `annotation::next_version`).
    pub fn annotation_candidates(&self) -> Vec<crate::annotation::Candidate> {
        self.catalog.annotation_candidates()
    }

    /// Each shard's size in bytes, in `shard_paths` order (an object's as its store listed it).
    pub fn shard_sizes(&self) -> Vec<u64> {
        self.store.shards.iter().map(|s| s.source.len()).collect()
    }
}
