//! A dataset: one shard file, or every `.trj` shard in a directory. A façade over two parts:
//! the `Store` (the files, their bytes, the cache of decoded chunks: all I/O) and the `Catalog`
//! (recordings, chunk lists and episodes, built from the records the store's scans decode).
//! Reads (`rows`, `gather`, `scan`, `bulk`, ...) look up the catalog and read through the store.

use std::fs;
use std::path::{Path, PathBuf};

use super::cache::ChunkCache;
use super::catalog::Catalog;
use super::integrity::Integrity;
use super::steps::EpisodeSet;
use super::store::Store;
use super::{OpenOptions, Problem};
use crate::error::{Error, Result};
use crate::schema::ColumnId;

pub(crate) use super::catalog::hex;
pub use super::catalog::{ColumnStats, EpisodeRef, Recording, SkippedRecord};
pub(crate) use super::catalog::{EpisodeLoc, ListKey, Located};
pub(crate) use super::checks::{episode_span, is_required};

pub struct Dataset {
    path: PathBuf,
    is_dir: bool,
    opts: OpenOptions,
    pub(super) store: Store,
    pub(super) catalog: Catalog,
    /// Shard problems, the catalog's and the exclusions', gathered after every open/refresh.
    problems: Vec<Problem>,
}

impl Dataset {
    /// Opens a shard file or a directory of shards (`*.trj`; other files are ignored).
    ///
    /// Errors: `NotFound` (no such path), `NotTrajcore` (a file that is not a trajcore shard:
    /// the file named, or a `.trj` file in the directory), `Version` (a newer major version),
    /// `Corrupt` (damage, with `strict`), `Io`.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Dataset> {
        Dataset::open_with(path, opts, Integrity::default())
    }

    /// `open`, with what is known of damage beyond the files (see `integrity`).
    pub(super) fn open_with(path: &Path, opts: OpenOptions, integrity: Integrity) -> Result<Dataset> {
        let is_dir = fs::metadata(path).map_err(|e| Error::io(path, e))?.is_dir();
        let mut ds = Dataset {
            path: path.to_path_buf(),
            is_dir,
            store: Store::new(ChunkCache::new(opts.cache_bytes)),
            catalog: Catalog::new(path, is_dir, integrity),
            opts,
            problems: Vec::new(),
        };
        ds.update()?;
        let (lru_bytes, store) = super::shared_chunks::plan_for(&ds);
        ds.store.cache = ChunkCache::with_store(lru_bytes, store);
        Ok(ds)
    }

    /// Finds new shard files, scans what grew, and takes in what was found.
    fn update(&mut self) -> Result<()> {
        let (opened, problems) = self.store.open_new(&self.path, self.is_dir, &self.opts)?;
        self.catalog.own_problems.extend(problems);
        let changed = self.store.check_changed();
        self.catalog.own_problems.extend(changed);
        let catalog = &mut self.catalog;
        let (found, failed) = self.store.scan(opened, |facts| catalog.register(facts));
        self.catalog.take_in(found, self.store.first_damage(), &mut self.store.verified);
        if let Some(e) = failed {
            return Err(e);
        }
        self.catalog.report_missing_shards();
        self.problems = self.store.problems().cloned().collect();
        self.problems.extend(self.catalog.own_problems.iter().cloned());
        self.problems.extend(self.catalog.integrity.exclusions.problems.iter().cloned());
        match self.problems.first() {
            Some(p) if self.opts.strict => Err(p.to_error()),
            _ => Ok(()),
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

    /// A subset of the episodes (dataset indexes, in the order given; repeats allowed) to sample
    /// from, with its own step numbering. It does not follow `refresh`.
    pub fn episode_set(&self, episodes: &[usize]) -> Result<EpisodeSet> {
        let lengths =
            episodes.iter().map(|&i| self.episode(i).map(|e| e.summary.length)).collect::<Result<Vec<_>>>()?;
        Ok(EpisodeSet::subset(episodes.to_vec(), lengths))
    }

    /// (episode, step within it) of global step `step`.
    pub fn locate_step(&self, step: u64) -> Result<(usize, u64)> {
        self.catalog.all.locate_step(step)
    }

    pub(super) fn episode(&self, episode: usize) -> Result<&EpisodeRef> {
        self.catalog.episode(episode)
    }

    /// Errors: `OutOfRange`.
    pub fn recording(&self, recording: usize) -> Result<&Recording> {
        self.catalog.recording(recording)
    }

    /// The episode's metadata JSON ("{}" if none), read from its Episode record.
    pub fn episode_metadata(&self, episode: usize) -> Result<String> {
        let e = self.episode(episode)?;
        self.store.episode_metadata(e.shard, &e.summary)
    }

    pub fn column_id(&self, recording: usize, name: &str) -> Option<ColumnId> {
        self.catalog.column_id(recording, name)
    }

    /// The rows an episode spans in a column: (first row, number of rows). T+1 rows on the
    /// observation timeline, T on the step timeline.
    pub fn episode_rows(&self, episode: usize, column: ColumnId) -> Result<(u64, u64)> {
        self.catalog.episode_rows(episode, column)
    }
}
