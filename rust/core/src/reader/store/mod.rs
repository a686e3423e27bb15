//! The dataset's bytes: its shard files, found in its directory, opened, scanned as they grow
//! and checked for changes under the reader (each read through a `Source`), the cache of decoded
//! chunks (`decoded/`), and the set of checksum-verified records. The catalog (what the records say) does no
//! I/O; everything read from the files goes through here.

pub(in crate::reader) mod checksummed;
pub(in crate::reader) mod chunk_bytes;
pub(in crate::reader) mod closed_checks;
pub(in crate::reader) mod compacted;
pub(in crate::reader) mod decoded;
pub(in crate::reader) mod dir_watch;
pub(in crate::reader) mod find_shards;
pub(in crate::reader) mod framing;
pub(crate) mod no_shard;
pub(in crate::reader) mod opening_copies;
pub(in crate::reader) mod remote_reads;
pub(in crate::reader) mod shard;
pub(in crate::reader) mod source;
pub(in crate::reader) mod tail;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::catalog::{Catalog, ShardFacts};
use super::{OpenOptions, Problem, SHARD_EXTENSION};
use crate::error::{Error, Result};
use crate::format::episode::{DecodedEpisode, EpisodeSummary};
use crate::format::ANNOTATION_EXTENSION;
use crate::reader::store::checksummed::VerifiedRecords;
use crate::reader::store::decoded::cache::ChunkCache;
use crate::reader::store::decoded::shared_chunks::{layout_of, CacheStats, SharedChunks};
use crate::reader::store::dir_watch::DirWatch;
use crate::reader::store::shard::{Found, Opened, Shard};
use crate::writer::files::capacity::EvictionLog;

/// The Episode record decoded last: (shard, record offset) and its episodes.
type EpisodeBatch = ((usize, u64), Arc<Vec<DecodedEpisode>>);

pub(crate) struct Store {
    /// In the order the catalog registered them (its shard indexes are theirs).
    pub shards: Vec<Shard>,
    /// Files opened, or left out for good (a duplicate shard, a file that is not a shard).
    known_files: HashSet<PathBuf>,
    /// Files replaced or deleted under the reader since opening (it reads what it opened).
    pub notices: Vec<Problem>,
    pub cache: ChunkCache,
    pub verified: VerifiedRecords,
    last_episode_record: Mutex<Option<EpisodeBatch>>,
    /// What the last listing of a local directory saw, and the directory held open to read its
    /// time (see `dir_watch`).
    dir_watch: DirWatch,
    dir_handle: Option<fs::File>,
    /// The inode number under each shard or sidecar file name the last listing of a local
    /// directory found (see `dir_watch::look_up_by_name`).
    listed_inos: HashMap<std::ffi::OsString, u64>,
    /// A store prefix's eviction log as its last listing showed it (size and entity tag; `None`:
    /// no log object), and the log last read with the version it was read at (only a log read
    /// whole is kept: a failed read is asked again at the next call).
    store_log: (Option<String>, Option<(String, Arc<EvictionLog>)>),
    /// The last `open_new` listed the directory (it may have changed): `check_changed` looks
    /// the shards up by name only then (a file renamed over or deleted changes the directory).
    dir_listed: bool,
    /// Per shard, the rewrite it does not read (see `compacted`), by file identity.
    refused_rewrites: HashMap<usize, (u64, u64)>,
    /// When a refresh last looked at the closed shards (see `closed_checks`).
    closed_checked: Option<std::time::Instant>,
}

impl Store {
    pub fn new(cache: ChunkCache) -> Store {
        Store {
            shards: Vec::new(),
            known_files: HashSet::new(),
            notices: Vec::new(),
            cache,
            verified: VerifiedRecords::default(),
            last_episode_record: Mutex::new(None),
            dir_watch: DirWatch::default(),
            dir_handle: None,
            listed_inos: HashMap::new(),
            store_log: (None, None),
            dir_listed: true,
            refused_rewrites: HashMap::new(),
            closed_checked: None,
        }
    }

    /// Opens the shard files not opened yet (in file name order). In a directory, a file that is
    /// not a trajcore shard is left out with a problem (one damaged header must not hide the
    /// other shards), unless `strict`.
    /// A local directory is listed only when it may have changed since (see `dir_watch`).
    pub fn open_new(&mut self, root: &Path, is_dir: bool, opts: &OpenOptions) -> Result<(Vec<Shard>, Vec<Problem>)> {
        let (mut opened, mut problems) = (Vec::new(), Vec::new());
        let watched = is_dir && crate::objstore::url::url_of(root).is_none();
        let mtime = if watched { dir_watch::modified(&mut self.dir_handle, root) } else { None };
        let began = std::time::SystemTime::now();
        self.dir_listed = !watched || self.dir_watch.must_list(mtime, began);
        if !self.dir_listed {
            return Ok((opened, problems));
        }
        self.dir_watch = DirWatch::default(); // until this listing is done
        let mut complete = true;
        for path in self.discover(root, is_dir)? {
            match Shard::open(&path, is_dir, opts.mmap) {
                Ok(Opened::Shard(shard)) => opened.push(*shard),
                Ok(Opened::NotStarted) => complete = false,
                // Listed, then evicted by a bounded recording to the store before it was opened.
                Err(Error::NotFound { .. }) if is_dir && !watched && self.logged_evicted(root, &path)? => {
                    self.known_files.insert(path);
                }
                Err(Error::NotTrajcore { why, .. }) if is_dir && !opts.strict => {
                    let why = format!("not a trajcore file ({why}): the file is left out");
                    problems.push(Problem::new(&path, 0, why));
                    self.known_files.insert(path);
                }
                Err(e) => return Err(e),
            }
        }
        if watched {
            self.dir_watch.listed(mtime, began, complete);
        }
        Ok((opened, problems))
    }

    /// Shard files not opened yet, in file name order.
    fn discover(&mut self, root: &Path, is_dir: bool) -> Result<Vec<PathBuf>> {
        if !is_dir {
            let new = self.shards.is_empty() && !self.known_files.contains(root);
            return Ok(if new { vec![root.to_path_buf()] } else { Vec::new() });
        }
        if let Some(url) = crate::objstore::url::url_of(root) {
            let (listed, log_version) = crate::reader::store::find_shards::shards_under(url)?;
            self.store_log.0 = log_version;
            let mut paths: Vec<PathBuf> = listed.into_iter().filter(|p| !self.known_files.contains(p)).collect();
            paths.sort_by_key(|p| p.extension().is_some_and(|ext| ext == ANNOTATION_EXTENSION)); // stable: key order kept
                                                                                                 // The log is read whenever shards are new: a failed read fails the call (and the
                                                                                                 // next call reads it again), so an evicted shard is never taken for a new one.
            if !paths.is_empty() {
                let log = self.store_eviction_log(root)?;
                self.leave_out_logged(&log, &mut paths);
            }
            return Ok(paths);
        }
        let io = |e| Error::io(root, e);
        let mut paths = Vec::new();
        self.listed_inos.clear();
        for entry in fs::read_dir(root).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            let is_shard = path.extension().is_some_and(|ext| ext == SHARD_EXTENSION || ext == ANNOTATION_EXTENSION);
            if !is_shard {
                continue;
            }
            self.listed_inos.insert(entry.file_name(), std::os::unix::fs::DirEntryExt::ino(&entry));
            if !self.known_files.contains(&path) && path.is_file() {
                paths.push(path);
            }
        }
        // Sidecars after the shards: each joins a recording the shards make known.
        paths.sort_by_key(|p| (p.extension().is_some_and(|ext| ext == ANNOTATION_EXTENSION), p.clone()));
        self.leave_out_evicted(root, &mut paths);
        Ok(paths)
    }

    /// A shard the eviction log of `root` names is evicted, even while its file is still there
    /// (its recorder was killed between logging and deleting it; the next bounded recording in
    /// the directory deletes it): left out of `paths`, for good.
    fn leave_out_evicted(&mut self, root: &Path, paths: &mut Vec<PathBuf>) {
        if paths.is_empty() {
            return;
        }
        let log = EvictionLog::read(root).unwrap_or_default();
        self.leave_out_logged(&log, paths);
    }

    /// Leaves the shards `log` names out of `paths`, for good.
    fn leave_out_logged(&mut self, log: &EvictionLog, paths: &mut Vec<PathBuf>) {
        if log.evicted_shards.is_empty() {
            return;
        }
        let evicted: HashSet<&str> = log.evicted_shards.iter().map(String::as_str).collect();
        let known = &mut self.known_files;
        paths.retain(|p| {
            let logged = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| evicted.contains(n));
            if logged {
                known.insert(p.clone());
            }
            !logged
        });
    }

    /// Whether the eviction log of the store prefix `root` names the shard at `path`.
    ///
    /// Errors: those of `EvictionLog::read`.
    fn logged_evicted(&self, root: &Path, path: &Path) -> Result<bool> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(EvictionLog::read(root)?.evicted_shards.contains(&name))
    }

    /// The eviction log of the store prefix `root` as its last listing showed it: read (one
    /// request) only when that listing holds a log whose version was not read yet; empty when
    /// it holds none.
    ///
    /// Errors: those of `EvictionLog::read` (the next call asks again).
    fn store_eviction_log(&mut self, root: &Path) -> Result<Arc<EvictionLog>> {
        let Some(version) = self.store_log.0.clone() else { return Ok(Arc::default()) };
        if let Some((read_at, log)) = &self.store_log.1 {
            if *read_at == version {
                return Ok(log.clone());
            }
        }
        let log = Arc::new(EvictionLog::read(root)?);
        self.store_log.1 = Some((version, log.clone()));
        Ok(log)
    }

    /// Marks evicted the shards the eviction log of the store prefix `root` names: a bounded
    /// recording to the store logged them, and deletes (or deleted) their objects, at least a
    /// flush interval later. There is no file to watch: the listing each refresh makes says
    /// whether the log changed (see `store_eviction_log`).
    ///
    /// Errors: those of `EvictionLog::read` (the next call asks again).
    pub fn check_evicted_in_store(&mut self, root: &Path) -> Result<()> {
        if crate::objstore::url::url_of(root).is_none() || self.shards.iter().all(|s| s.evicted) {
            return Ok(());
        }
        let log = self.store_eviction_log(root)?;
        if log.evicted_shards.is_empty() {
            return Ok(());
        }
        let evicted: HashSet<&str> = log.evicted_shards.iter().map(String::as_str).collect();
        for shard in &mut self.shards {
            let name = shard.path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if evicted.contains(name) {
                shard.evicted = true;
            }
        }
        Ok(())
    }

    /// Files changed under the reader: notices are kept (`notices`), damage is returned. A shard
    /// deleted by a bounded recording (named in the eviction log of `root`) is marked evicted
    /// instead: expected, not news. A closed shard is looked at only now and then (see
    /// `closed_checks`), or when a listing found another file under its name, or none.
    pub fn check_changed(&mut self, root: &Path) -> Vec<Problem> {
        let mut damage = Vec::new();
        let mut log: Option<EvictionLog> = None;
        let now = std::time::Instant::now();
        let closed_too = closed_checks::check_closed(self.closed_checked, now);
        // The time of a look that found closed shards to look at (an open looks at none: its
        // shards are opened after this).
        if closed_too && self.shards.iter().any(|s| s.finished) {
            self.closed_checked = Some(now);
        }
        for shard in &mut self.shards {
            // Looked up only after a listing (hashing every shard's name at each refresh costs).
            let by_name = self.dir_listed && {
                let listed = shard.path.file_name().and_then(|n| self.listed_inos.get(n)).copied();
                dir_watch::look_up_by_name(true, listed, &shard.known_inos())
            };
            if shard.finished && !closed_too && !by_name {
                continue;
            }
            match shard.check_changed(by_name) {
                Some((problem, true)) => damage.push(problem),
                Some((notice, false)) => {
                    if shard.deleted {
                        let name = shard.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                        let logged = |log: &EvictionLog| log.evicted_shards.contains(&name);
                        // The log is written before the deletion: a log read before this file was
                        // deleted may miss it, one read after it was seen gone does not.
                        if !log.as_ref().is_some_and(logged) {
                            log = Some(EvictionLog::read(root).unwrap_or_default());
                        }
                        if log.as_ref().is_some_and(logged) {
                            shard.evicted = true;
                            shard.source.release_pages();
                            continue;
                        }
                    }
                    self.notices.push(notice)
                }
                None => {}
            }
        }
        damage
    }

    /// Lets go of the evicted shards no `EpisodePin` holds (see `Shard::release`), and of their
    /// decoded chunks. Returns those let go of now.
    pub fn release_unpinned(&mut self) -> Vec<usize> {
        let mut released = Vec::new();
        for (i, shard) in self.shards.iter_mut().enumerate() {
            if shard.evicted && !shard.released && Arc::strong_count(&shard.pin) == 1 {
                shard.release();
                released.push(i);
            }
        }
        if !released.is_empty() {
            let mut gone = vec![false; self.shards.len()];
            released.iter().for_each(|&i| gone[i] = true);
            self.cache.forget_shards(&gone);
            let mut last = self.last_episode_record.lock().unwrap_or_else(|p| p.into_inner());
            if last.as_ref().is_some_and(|((shard, _), _)| gone[*shard]) {
                *last = None;
            }
        }
        released
    }

    /// Per shard (in `shards` order), whether a bounded recording deleted it under the reader.
    pub fn evicted(&self) -> Vec<bool> {
        self.shards.iter().map(|s| s.evicted).collect()
    }

    /// Scans the shards still being written, then the ones just `opened`, each taken in if
    /// `register` gives it an index. A scan that fails (an I/O error) leaves its shard as it
    /// was and stops; what the others found is returned with the error, to be taken in.
    pub fn scan(
        &mut self,
        opened: Vec<Shard>,
        mut register: impl FnMut(ShardFacts) -> Option<usize>,
    ) -> (Vec<(usize, Found)>, Option<Error>) {
        let mut found = Vec::new();
        for (i, shard) in self.shards.iter_mut().enumerate() {
            if !shard.finished {
                match shard.scan() {
                    Ok(f) => found.push((i, f)),
                    Err(e) => return (found, Some(e)),
                }
            }
        }
        for mut shard in opened {
            match shard.scan() {
                Ok(f) => {
                    self.known_files.insert(shard.path.clone());
                    let facts = ShardFacts {
                        path: shard.path.clone(),
                        recording_id: shard.header.recording_id,
                        seq: shard.header.shard_seq,
                        annotation: shard.header.required_flags & crate::format::header::ANNOTATION != 0,
                    };
                    if let Some(index) = register(facts) {
                        debug_assert_eq!(index, self.shards.len());
                        self.shards.push(shard);
                        found.push((index, f));
                    }
                }
                Err(e) => return (found, Some(e)),
            }
        }
        (found, None)
    }

    /// Per shard, the offset of the first damage its scans found.
    pub fn first_damage(&self) -> Vec<Option<u64>> {
        self.shards.iter().map(|s| s.problems.iter().chain(&s.tail).map(|p| p.offset).min()).collect()
    }

    /// The damage the shards' scans found, shard by shard.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.shards.iter().flat_map(|s| s.problems.iter().chain(&s.tail))
    }

    /// An episode's metadata JSON ("{}" if none), read from its Episode record. The last record
    /// decoded is kept: an Episode record holds a batch of episodes (one compressed body), and
    /// reading metadata in order (`convert`, filters) would otherwise decode each record once per
    /// episode in it.
    pub fn episode_metadata(&self, shard: usize, summary: &EpisodeSummary) -> Result<String> {
        let file = &self.shards[shard];
        let key = (shard, summary.record_offset);
        let mut last = self.last_episode_record.lock().unwrap_or_else(|p| p.into_inner());
        let batch = match last.as_ref() {
            Some((k, batch)) if *k == key => batch.clone(),
            _ => {
                let batch = Arc::new(file.episode_record(summary.record_offset)?);
                *last = Some((key, batch.clone()));
                batch
            }
        };
        drop(last);
        file.metadata_in(&batch, summary)
    }

    /// The timelog samples stored in `shards` (in order), and the damage that left samples out.
    pub fn timelog(&self, shards: &[usize]) -> (Vec<crate::format::timelog::Sample>, Vec<Problem>) {
        let (mut samples, mut problems) = (Vec::new(), Vec::new());
        for &shard in shards {
            let shard = &self.shards[shard];
            for &offset in &shard.timelog_records {
                match shard.timelog_record(offset) {
                    Ok(s) => samples.extend(s),
                    Err(why) => problems.push(Problem::new(&shard.path, offset, why)),
                }
            }
        }
        (samples, problems)
    }

    pub fn cache_stats(&self) -> CacheStats {
        let shared_bytes = self.cache.store().map_or(0, |s| s.size());
        CacheStats { lru_bytes: self.cache.capacity(), shared_bytes, decodes: self.cache.decodes() }
    }

    /// The shared store's descriptor, for a spawned process to `adopt_shared_chunks`.
    pub fn shared_chunks_fd(&self) -> Option<i32> {
        self.cache.store().map(SharedChunks::fd)
    }

    /// Uses the shared store of the process that handed over `fd` (taking ownership of it)
    /// instead of this one's, when laid out for the same chunks (those `catalog` lists); else
    /// closes it. Returns whether it was adopted.
    ///
    /// # Safety
    /// `fd` must be an open descriptor this process owns and uses nowhere else.
    pub unsafe fn adopt_shared_chunks(&mut self, catalog: &Catalog, fd: i32) -> bool {
        use std::os::fd::FromRawFd;
        // SAFETY: the caller hands over ownership of an open descriptor.
        let file = unsafe { fs::File::from_raw_fd(fd) };
        let layout = || layout_of(catalog, &self.shards);
        match self.cache.store().and_then(|_| SharedChunks::adopt(file, layout())) {
            Some(store) => {
                self.cache = ChunkCache::with_store(self.cache.capacity(), Some(store));
                true
            }
            None => false,
        }
    }
}
