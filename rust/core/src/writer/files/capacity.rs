//! A recording with a capacity (`capacity_steps`): its directory keeps at most that many
//! transitions in closed shards, plus the open shard, by deleting the oldest closed shards
//! first (a replay buffer on disk). The decisions (`evictions`, `shard_steps_limit`) are pure
//! functions of shard step counts; `Capacity` applies them as the writer seals shards, and
//! keeps the eviction log (`EVICTION_LOG`) that readers in any process read for the count of
//! evicted transitions and to tell an evicted shard from one deleted by someone else.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::shard;
use crate::error::{Error, Result};
use crate::format::header::{FileHeader, HEADER_LEN};
use crate::format::SHARD_EXTENSION;
use crate::objstore::uploads::UploadQueue;
use std::collections::HashSet;
use std::fs::File;
use std::io::Read;

/// The eviction log's file name, in the recording's directory (not a `.trj`: readers list
/// shards only). The recordings of a directory share it, under a lock; in a store prefix,
/// which has no lock, each recording keeps its own (`store_log_name`) and readers merge them.
pub const EVICTION_LOG: &str = "trajcore-evictions.json";

/// The eviction log object of the recording `recording_id` in a store prefix: its own, so that
/// recorders sharing the prefix never write over each other's (a store has no lock and no
/// atomic read-modify-write); a reader merges every log the prefix holds (`merge`).
pub fn store_log_name(recording_id: &[u8; 16]) -> String {
    let id: String = recording_id.iter().map(|b| format!("{b:02x}")).collect();
    format!("trajcore-evictions-{id}.json")
}

/// Whether the object `name` (the last part of its key) is an eviction log: the shared one of
/// a single recorder before logs were per recording, or a recording's own.
pub fn is_eviction_log(name: &str) -> bool {
    name == EVICTION_LOG || (name.starts_with("trajcore-evictions-") && name.ends_with(".json"))
}

/// The eviction logs of a prefix's recordings as one: every shard once (a shard two logs name,
/// which two recorders that took over one stopped recording's shards both evicted, is counted
/// once), oldest first within each log, the logs in the order given. A log without per-shard
/// counts (written before they were kept) adds its total.
pub fn merge(logs: &[EvictionLog]) -> EvictionLog {
    let mut merged = EvictionLog::default();
    let mut seen: HashSet<&str> = HashSet::new();
    for log in logs {
        let counted = log.evicted_shard_steps.len() == log.evicted_shards.len();
        if !counted {
            merged.evicted_steps = merged.evicted_steps.saturating_add(log.evicted_steps);
        }
        for (i, name) in log.evicted_shards.iter().enumerate() {
            if !seen.insert(name) {
                continue;
            }
            merged.evicted_shards.push(name.clone());
            if counted {
                merged.evicted_steps = merged.evicted_steps.saturating_add(log.evicted_shard_steps[i]);
                merged.evicted_shard_steps.push(log.evicted_shard_steps[i]);
            }
        }
        for id in &log.evicted_seqs {
            if !merged.evicted_seqs.contains(id) {
                merged.evicted_seqs.push(*id);
            }
        }
    }
    if merged.evicted_shard_steps.len() != merged.evicted_shards.len() {
        merged.evicted_shard_steps.clear(); // some counts unknown: only the total holds
    }
    merged
}

/// The shard a capacity-bound recording rolls over at, in transitions: a tenth of the capacity,
/// so that deleting a whole shard never drops more than about a tenth of the buffer.
pub fn shard_steps_limit(capacity: u64) -> u64 {
    capacity.div_ceil(10).max(1)
}

/// How many of the oldest closed shards to delete, given the transitions of each closed shard
/// (oldest first) and the capacity: the fewest that leave at most `capacity` transitions. The
/// newest closed shard is never deleted (a reader of the directory always finds the latest
/// data), even when it alone holds more than the capacity.
pub fn evictions(closed_steps: &[u64], capacity: u64) -> usize {
    let mut total: u64 = closed_steps.iter().fold(0, |sum, &s| sum.saturating_add(s));
    let mut count = 0;
    while total > capacity && count + 1 < closed_steps.len() {
        total -= closed_steps[count];
        count += 1;
    }
    count
}

/// What the recordings of a directory evicted so far: the count readers show, and the shard
/// file names (an evicted shard disappearing under a reader is expected, not news).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvictionLog {
    /// Transitions (step rows) in the shards deleted.
    pub evicted_steps: u64,
    /// File names of the shards deleted, oldest first.
    pub evicted_shards: Vec<String>,
    /// The same shards as (recording id, shard_seq), where known: a reader that never saw them
    /// finds its hole between a recording's shards explained.
    #[serde(default)]
    pub evicted_seqs: Vec<([u8; 16], u64)>,
    /// The transitions of each shard of `evicted_shards` (empty in a log written before they
    /// were kept): what lets `merge` count a shard two logs name once.
    #[serde(default)]
    pub evicted_shard_steps: Vec<u64>,
}

impl EvictionLog {
    /// The log of `dir` (empty when there is none). A store prefix's log is the object its
    /// recording's uploads put there, asked of the store at every call (nothing is cached, so a
    /// failed read ends with its cause).
    ///
    /// Errors: `Corrupt` (a log that does not parse), `Io` (for a prefix: the store, naming the
    /// URL and why).
    pub fn read(dir: &Path) -> Result<EvictionLog> {
        let path = dir.join(EVICTION_LOG);
        if let Some(url) = crate::objstore::url::url_of(dir) {
            return Self::read_store(url.trim_end_matches('/'));
        }
        Self::read_file(&path)
    }

    /// The logs of every recording of the store prefix `url`, merged (`merge`): one listing,
    /// and one request per log object.
    ///
    /// Errors: `Corrupt`, `Io` (the store, naming the URL and why).
    fn read_store(url: &str) -> Result<EvictionLog> {
        let location = crate::objstore::url::locate(url)?;
        let mut logs = Vec::new();
        for (object, _, _) in crate::objstore::remote::list(&location, url)? {
            let name = object.key.rsplit('/').next().unwrap_or_default();
            if !is_eviction_log(name) {
                continue;
            }
            let at = format!("{url}/{name}");
            // A log deleted between the listing and the read (its prefix emptied) holds nothing.
            if let Some(bytes) = crate::objstore::remote::get_whole(&at)? {
                logs.push(Self::parse(&bytes, Path::new(&at))?);
            }
        }
        Ok(merge(&logs))
    }

    /// The log file at `path` (empty when there is none).
    ///
    /// Errors: `Corrupt`, `Io`.
    fn read_file(path: &Path) -> Result<EvictionLog> {
        match std::fs::read(path) {
            Ok(bytes) => Self::parse(&bytes, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(EvictionLog::default()),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    fn parse(bytes: &[u8], path: &Path) -> Result<EvictionLog> {
        serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            why: format!("eviction log: {e}"),
        })
    }

    /// Adds `shards` (path, transitions) to the log `name` of `dir`, each once (a shard logged
    /// before whose deletion failed is not counted twice). Read, changed and written under one
    /// lock of the process (the recorders of a multi-agent env share a directory), whole or not
    /// at all (a temp file renamed over it), so a reader never sees half of it.
    ///
    /// Errors: those of `read`, `Io`.
    fn add<'a>(
        dir: &Path,
        name: &str,
        shards: impl Iterator<Item = (&'a Path, u64, Option<([u8; 16], u64)>)>,
    ) -> Result<()> {
        static LOCK: Mutex<()> = Mutex::new(());
        let _held = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        // And across processes (recorders of Ray actors share a directory): a lock on the
        // directory itself, released when `_dir_lock` closes (or its process dies).
        let _dir_lock = lock_dir(dir)?;
        let mut log = EvictionLog::read_file(&dir.join(name))?;
        // Per-shard counts only where the log had them for every shard (see `merge`).
        let counted = log.evicted_shard_steps.len() == log.evicted_shards.len();
        for (path, steps, id) in shards {
            let shard = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if !log.evicted_shards.contains(&shard) {
                log.evicted_steps = log.evicted_steps.saturating_add(steps);
                log.evicted_shards.push(shard);
                log.evicted_seqs.extend(id);
                if counted {
                    log.evicted_shard_steps.push(steps);
                }
            }
        }
        log.write(dir, name)
    }

    /// Writes the log into `dir` as `name`, whole or not at all (a temp file renamed over the
    /// old one).
    ///
    /// Errors: `Io`.
    fn write(&self, dir: &Path, name: &str) -> Result<()> {
        static TEMP: AtomicU64 = AtomicU64::new(0);
        let path = dir.join(name);
        let temp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), TEMP.fetch_add(1, Ordering::Relaxed)));
        let bytes = serde_json::to_vec(self).map_err(|e| Error::Invalid(format!("eviction log: {e}")))?;
        std::fs::write(&temp, bytes).map_err(|e| Error::io(&temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io(&path, e))
    }
}

/// A closed shard the capacity counts.
#[derive(Debug)]
struct Closed {
    path: PathBuf,
    steps: u64,
    /// The writer has finished with the file (its compaction, which renames a rewrite over it,
    /// is done): only such a file may be deleted.
    released: bool,
    /// (recording id, shard_seq), from its header.
    id: Option<([u8; 16], u64)>,
}

/// The capacity of one recording: its closed shards (and those the directory held when it
/// started), oldest first, and the log of what was evicted.
#[derive(Debug)]
pub struct Capacity {
    limit: u64,
    dir: PathBuf,
    closed: VecDeque<Closed>,
    /// A recording to a store: the uploads delete the evicted shards' objects too.
    uploads: Option<UploadQueue>,
    /// The eviction log's file name in `dir`: `EVICTION_LOG`, or for a store recording its own
    /// (`store_log_name`).
    log_name: String,
}

impl Capacity {
    /// A capacity of `limit` transitions over `dir`, which already holds the closed shards
    /// `prior` (path, transitions), oldest first.
    ///
    /// Errors: `Invalid` (a zero limit).
    pub fn new(limit: u64, dir: &Path, prior: &[(PathBuf, u64)]) -> Result<Capacity> {
        if limit == 0 {
            return Err(Error::Invalid("capacity_steps must be at least 1".into()));
        }
        finish_interrupted_evictions(dir);
        let headers: Vec<Option<FileHeader>> = prior.iter().map(|(path, _)| header_of(path)).collect();
        // Another recorder writing into the directory now (a Ray actor, another EnvRunner)
        // counts and deletes its own shards: those of a recording with a shard being written
        // are not this one's to count. A killed recording's shards are (its lock died with it).
        let mut live: HashSet<[u8; 16]> = prior
            .iter()
            .zip(&headers)
            .filter(|((path, _), _)| File::open(path).is_ok_and(|f| shard::writer_holds_lock(&f)))
            .filter_map(|(_, header)| header.as_ref().map(|h| h.recording_id))
            .collect();
        let listed: HashSet<&Path> = prior.iter().map(|(path, _)| path.as_path()).collect();
        let unknown_writer = appeared_since(dir, &listed, &mut live);
        let closed = prior.iter().zip(headers).filter_map(|((path, steps), header)| {
            let id = header.map(|h| (h.recording_id, h.shard_seq));
            let others = unknown_writer || id.is_some_and(|(recording, _)| live.contains(&recording));
            (!others).then(|| Closed { path: path.clone(), steps: *steps, released: true, id })
        });
        let log_name = EVICTION_LOG.to_string();
        Ok(Capacity { limit, dir: dir.to_path_buf(), closed: closed.collect(), uploads: None, log_name })
    }

    /// The recording `recording_id` goes up to the store prefix `url` through `uploads` (its
    /// directory is the staging directory). The uploads hold its lease there
    /// (`objstore::leases`), as every recording's to a store, so that recorders starting on the
    /// prefix meanwhile leave its shards to it. Each eviction is told to them (they put the
    /// recording's own eviction log up, `store_log_name`, then delete the shards' objects). The
    /// prefix's shards are among the prior ones (the caller listed them, as staging paths: their
    /// files are not here, their objects are). The logs of the prefix's recordings are left as
    /// they are (readers merge them), so the count adds up over recordings, and several
    /// recorders on one prefix never write over each other's log. Shards those logs name and
    /// the prefix still holds, as objects or as segments (a recorder stopped between putting
    /// its log up and deleting them, or whose store refused the deletions until it closed;
    /// readers leave them out already), are deleted now, as a local directory's are
    /// (`finish_interrupted_evictions`), unless their recording holds a fresh lease (live, or
    /// stopped less than its `lease_ttl` ago: its own to delete).
    ///
    /// Errors: `Io` (the store, naming the URL and why; the log could not be written),
    /// `Corrupt` (a log of the prefix does not parse).
    pub fn uploading_to(mut self, uploads: UploadQueue, url: &str, recording_id: &[u8; 16]) -> Result<Capacity> {
        let url = url.trim_end_matches('/');
        self.log_name = store_log_name(recording_id);
        let log = EvictionLog::read(Path::new(url))?;
        if !log.evicted_shards.is_empty() {
            let location = crate::objstore::url::locate(url)?;
            let (objects, folders) = crate::objstore::remote::list_with_folders(&location, url)?;
            let name = |key: &str| key.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_string();
            // A shard's segments are in its folder `<shard>.open/`.
            let segmented = folders.iter().filter_map(|f| name(f).strip_suffix(".open").map(str::to_string));
            let listed: HashSet<String> =
                objects.iter().map(|(object, _, _)| name(&object.key)).chain(segmented).collect();
            let mut left: Vec<String> = log.evicted_shards.into_iter().filter(|name| listed.contains(name)).collect();
            // Those of a recording with a fresh lease are its own to delete (it may be deleting
            // them now): left alone, as its other shards are.
            let mut live = live_recordings_of(url, &left)?.into_iter();
            left.retain(|_| !live.next().unwrap_or(true));
            let left: Vec<PathBuf> = left.iter().map(|name| self.dir.join(name)).collect();
            if !left.is_empty() {
                // The uploads put this recording's log before deleting: an empty one now.
                EvictionLog::default().write(&self.dir, &self.log_name)?;
                uploads.evicted(&left, &self.dir.join(&self.log_name));
            }
        }
        self.uploads = Some(uploads);
        Ok(self)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The shard at `path` (shard `seq` of recording `recording`), holding `steps`
    /// transitions, was closed (it may still be compacting).
    pub fn sealed(&mut self, path: &Path, steps: u64, recording: [u8; 16], seq: u64) {
        self.closed.push_back(Closed { path: path.to_path_buf(), steps, released: false, id: Some((recording, seq)) });
    }

    /// The writer is finished with the shard at `path`: deletes the oldest shards the capacity
    /// no longer holds, as far as the writer is finished with them (in order: first in, first
    /// out). Returns the transitions deleted now. A shard that could not be logged or deleted
    /// stays counted, so a later release tries again.
    ///
    /// Errors: `Io` (the log could not be written, a shard could not be deleted).
    pub fn released(&mut self, path: &Path) -> Result<u64> {
        if let Some(c) = self.closed.iter_mut().find(|c| c.path == path) {
            c.released = true;
        }
        let steps: Vec<u64> = self.closed.iter().map(|c| c.steps).collect();
        let ready = self.closed.iter().take_while(|c| c.released).count();
        let count = evictions(&steps, self.limit).min(ready);
        if count == 0 {
            return Ok(0);
        }
        // Logged before deleting: a reader that sees a shard gone finds it in the log.
        let logged = self.closed.iter().take(count).map(|c| (c.path.as_path(), c.steps, c.id));
        EvictionLog::add(&self.dir, &self.log_name, logged)?;
        if let Some(uploads) = &self.uploads {
            // Before the files go: a shard the uploads find gone is one this names.
            let shards: Vec<PathBuf> = self.closed.iter().take(count).map(|c| c.path.clone()).collect();
            uploads.evicted(&shards, &self.dir.join(&self.log_name));
        }
        let mut deleted = 0;
        for _ in 0..count {
            let Some(c) = self.closed.front() else { break };
            match std::fs::remove_file(&c.path) {
                Ok(()) => {}
                // Someone else deleted it first: gone all the same.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&c.path, e)),
            }
            deleted += c.steps;
            self.closed.pop_front();
        }
        Ok(deleted)
    }
}

/// Which of the shards `names` (the last parts of their keys, under the store prefix `url`)
/// belong to a recording that holds a fresh lease there now (`objstore::leases`): another
/// recorder's, live, that a recording starting on the prefix neither counts nor recovers, as a
/// directory's recorder leaves the shards of a recording whose shard lock is held. Call it
/// after listing `names`: a recording's lease is put before any of its objects, so one whose
/// object was listed has its lease seen here.
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid` (a bad URL).
#[cfg(feature = "remote")]
pub fn of_live_recordings(url: &str, names: &[String]) -> Result<Vec<bool>> {
    let tag_len = 2 * shard::RECORDING_TAG_BYTES;
    let live: HashSet<String> =
        crate::objstore::leases::live_recordings(url)?.into_iter().map(|id| id[..tag_len].to_string()).collect();
    Ok(names.iter().map(|name| shard::recording_tag_of(name).is_some_and(|tag| live.contains(tag))).collect())
}

/// `objstore::segments::recover_segments` of the prefix `url` (the shards a killed recorder left
/// as segments there, made through files in `staging`); with `skip_live`, the shards of
/// recordings that hold a fresh lease there (`of_live_recordings`) are left to their recorders.
///
/// Errors: those of `recover_segments` and `of_live_recordings`.
#[cfg(feature = "remote")]
pub fn recover_store(url: &str, staging: &Path, skip_live: bool) -> Result<Vec<crate::objstore::segments::Rejoined>> {
    let live = |names: &[String]| if skip_live { of_live_recordings(url, names) } else { Ok(vec![false; names.len()]) };
    crate::objstore::segments::recover_segments(url, staging, &live)
}

/// `of_live_recordings`, in every build: without the `remote` feature there is no store, and
/// no recording lives in one.
fn live_recordings_of(url: &str, names: &[String]) -> Result<Vec<bool>> {
    #[cfg(feature = "remote")]
    return of_live_recordings(url, names);
    #[cfg(not(feature = "remote"))]
    {
        let _ = url;
        Ok(vec![false; names.len()])
    }
}

/// `dir` opened and locked (`flock`, exclusive: waits for the other holder, who only reads,
/// changes and renames the log).
///
/// Errors: `Io`.
fn lock_dir(dir: &Path) -> Result<File> {
    use std::os::unix::io::AsRawFd;
    let file = File::open(dir).map_err(|e| Error::io(dir, e))?;
    // SAFETY: the descriptor is open and owned by `file` for the whole call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(dir, std::io::Error::last_os_error()));
    }
    Ok(file)
}

/// Deletes the shards the eviction log of `dir` names that are still there: a recording killed
/// between logging its evictions and deleting them left them (readers leave them out already).
/// Best effort: a shard that cannot be deleted now is tried again by the next recording.
fn finish_interrupted_evictions(dir: &Path) {
    for name in EvictionLog::read(dir).map(|log| log.evicted_shards).unwrap_or_default() {
        let _ = std::fs::remove_file(dir.join(name));
    }
}

/// Adds to `live` the recordings of the shards in `dir` that `listed` lacks (listed after the
/// lock probes): a writer makes and locks its next shard before it lets go of the last, so a
/// recording whose listed shards were all free when probed, and that has a shard since, was
/// rolling over, not dead. Returns whether a locked shard without its header yet (whose
/// recording cannot be told) appeared: then no other recording's shards are counted.
fn appeared_since(dir: &Path, listed: &HashSet<&Path>, live: &mut HashSet<[u8; 16]>) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut unknown_writer = false;
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().is_none_or(|ext| ext != SHARD_EXTENSION) || listed.contains(path.as_path()) {
            continue;
        }
        match header_of(&path) {
            Some(header) => {
                live.insert(header.recording_id);
            }
            None => unknown_writer |= File::open(&path).is_ok_and(|f| shard::writer_holds_lock(&f)),
        }
    }
    unknown_writer
}

/// The header of the shard at `path`, if it reads as one.
fn header_of(path: &Path) -> Option<FileHeader> {
    let mut head = [0u8; HEADER_LEN];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).ok()?;
    FileHeader::decode(&head).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard file of `recording` (its id: 16 times that byte) numbered `seq`: its header only.
    fn shard_file(dir: &Path, recording: u8, seq: u64) -> PathBuf {
        let path = dir.join(format!("r{recording}-{seq}.trj"));
        std::fs::write(&path, FileHeader::new([recording; 16], seq, 1).encode()).unwrap();
        path
    }

    #[test]
    fn evictions_table() {
        // (closed shard steps oldest first, capacity, shards to delete)
        let cases: &[(&[u64], u64, usize)] = &[
            (&[], 10, 0),
            (&[5], 10, 0),
            (&[5, 5], 10, 0),
            (&[5, 5, 1], 10, 1),
            (&[5, 5, 5, 5], 10, 2),
            (&[3, 3, 3, 3], 10, 1),
            (&[4, 4, 4, 4], 8, 2),
            // The newest closed shard stays, even alone over the capacity.
            (&[50], 10, 0),
            (&[5, 50], 10, 1),
            (&[1, 1, 50], 10, 2),
            // Empty shards at the front go with the first one that must.
            (&[0, 0, 6, 6], 10, 3),
            (&[0, 0, 5, 5], 10, 0),
            (&[u64::MAX, 1], 1, 1),
        ];
        for &(steps, capacity, want) in cases {
            assert_eq!(evictions(steps, capacity), want, "{steps:?} capacity {capacity}");
        }
    }

    #[test]
    fn merge_table() {
        let log = |shards: &[(&str, u64)], seqs: &[u64], counted: bool| EvictionLog {
            evicted_steps: shards.iter().map(|s| s.1).sum(),
            evicted_shards: shards.iter().map(|s| s.0.to_string()).collect(),
            evicted_seqs: seqs.iter().map(|&q| ([1; 16], q)).collect(),
            evicted_shard_steps: if counted { shards.iter().map(|s| s.1).collect() } else { Vec::new() },
        };
        // (logs, merged shards, merged steps, per-shard counts kept, merged seqs)
        type Case = (Vec<EvictionLog>, &'static [&'static str], u64, bool, &'static [u64]);
        let cases: Vec<Case> = vec![
            (vec![], &[], 0, true, &[]),
            (vec![log(&[("a", 3)], &[0], true)], &["a"], 3, true, &[0]),
            // Two recorders' logs add up, in the order given.
            (
                vec![log(&[("a", 3)], &[0], true), log(&[("b", 4), ("c", 5)], &[1], true)],
                &["a", "b", "c"],
                12,
                true,
                &[0, 1],
            ),
            // A shard two logs name (both took over a stopped recording's) is counted once.
            (
                vec![log(&[("a", 3), ("b", 4)], &[0, 1], true), log(&[("b", 4), ("c", 5)], &[1, 2], true)],
                &["a", "b", "c"],
                12,
                true,
                &[0, 1, 2],
            ),
            // A log from before per-shard counts adds its total; only the total holds then.
            (vec![log(&[("a", 3)], &[], false), log(&[("b", 4)], &[], true)], &["a", "b"], 7, false, &[]),
        ];
        for (k, (logs, shards, steps, counted, seqs)) in cases.into_iter().enumerate() {
            let merged = merge(&logs);
            assert_eq!(merged.evicted_shards, shards.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "case {k}");
            assert_eq!(merged.evicted_steps, steps, "case {k}");
            assert_eq!(merged.evicted_shard_steps.len() == merged.evicted_shards.len(), counted, "case {k}");
            assert_eq!(merged.evicted_seqs, seqs.iter().map(|&q| ([1; 16], q)).collect::<Vec<_>>(), "case {k}");
        }
        for (name, log) in [
            ("trajcore-evictions.json", true),
            (store_log_name(&[0xab; 16]).as_str(), true),
            ("trajcore-evictions-x.json.tmp", false),
            ("a.trj", false),
        ] {
            assert_eq!(is_eviction_log(name), log, "{name}");
        }
    }

    #[test]
    fn shard_steps_limit_table() {
        for (capacity, want) in [(1, 1), (9, 1), (10, 1), (11, 2), (1000, 100), (1_000_001, 100_001)] {
            assert_eq!(shard_steps_limit(capacity), want, "{capacity}");
        }
    }

    #[test]
    fn released_deletes_in_order_and_logs() {
        let dir = tempfile::tempdir().unwrap();
        let shard = |i: usize| dir.path().join(format!("s{i}.trj"));
        for i in 0..4 {
            std::fs::write(shard(i), b"x").unwrap();
        }
        let mut capacity = Capacity::new(10, dir.path(), &[(shard(0), 6)]).unwrap();
        capacity.sealed(&shard(1), 6, [1; 16], 1);
        capacity.sealed(&shard(2), 6, [1; 16], 2);
        // Shard 1 is still being compacted: nothing is deleted until the writer is done with it.
        assert_eq!(capacity.released(&shard(2)).unwrap(), 6);
        assert!(!shard(0).exists() && shard(1).exists());
        assert_eq!(capacity.released(&shard(1)).unwrap(), 6);
        assert!(!shard(1).exists() && shard(2).exists());
        let log = EvictionLog::read(dir.path()).unwrap();
        let names = vec!["s0.trj".to_string(), "s1.trj".to_string()];
        // s0 is no shard file (its header does not read): known by name only.
        let want = EvictionLog {
            evicted_steps: 12,
            evicted_shards: names,
            evicted_seqs: vec![([1; 16], 1)],
            evicted_shard_steps: vec![6, 6],
        };
        assert_eq!(log, want);
        // A later recording on the same directory adds to the log.
        let mut again = Capacity::new(5, dir.path(), &[(shard(2), 6)]).unwrap();
        again.sealed(&shard(3), 1, [2; 16], 0);
        assert_eq!(again.released(&shard(3)).unwrap(), 6);
        assert_eq!(EvictionLog::read(dir.path()).unwrap().evicted_steps, 18);
        assert!(Capacity::new(0, dir.path(), &[]).is_err());
    }

    #[test]
    fn shards_of_a_recording_another_recorder_is_writing_are_not_counted() {
        use std::os::unix::io::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let shard = |recording: u8, seq: u64| shard_file(dir.path(), recording, seq);
        // Recording 1 is live (its shard 1 is being written), recording 2 was killed.
        let (live_closed, live_open, killed) = (shard(1, 0), shard(1, 1), shard(2, 0));
        let writing = File::open(&live_open).unwrap();
        // SAFETY: the descriptor is open and owned by `writing` for the whole test.
        assert_eq!(unsafe { libc::flock(writing.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        let prior = [(live_closed.clone(), 5), (killed.clone(), 5), (live_open.clone(), 5)];
        let capacity = Capacity::new(1, dir.path(), &prior).unwrap();
        let counted: Vec<&Path> = capacity.closed.iter().map(|c| c.path.as_path()).collect();
        assert_eq!(counted, vec![killed.as_path()]);
        drop(writing); // the writer is gone: all of them are the next recording's to count
        assert_eq!(Capacity::new(1, dir.path(), &prior).unwrap().closed.len(), 3);
    }

    /// A recording caught rolling over: the shards listed before are all free when probed, but
    /// its next shard appeared since (a writer makes it before it lets go of the last), so
    /// they are not counted; a locked shard with no header yet holds back every other one.
    #[test]
    fn shards_of_a_recording_rolling_over_are_not_counted() {
        use std::os::unix::io::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let shard = |recording: u8, seq: u64| shard_file(dir.path(), recording, seq);
        let (rolled, killed) = (shard(1, 0), shard(2, 0));
        let prior = [(rolled.clone(), 5), (killed.clone(), 5)];
        let next = shard(1, 1); // not in `prior`: made after the listing
        let counted = |c: &Capacity| c.closed.iter().map(|c| c.path.clone()).collect::<Vec<_>>();
        assert_eq!(counted(&Capacity::new(1, dir.path(), &prior).unwrap()), vec![killed.clone()]);
        std::fs::remove_file(&next).unwrap();
        let headless = dir.path().join("r3-0.trj");
        let writing = File::create(&headless).unwrap();
        // SAFETY: the descriptor is open and owned by `writing` for the whole test.
        assert_eq!(unsafe { libc::flock(writing.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        assert!(counted(&Capacity::new(1, dir.path(), &prior).unwrap()).is_empty());
        drop(writing); // a headerless file nobody writes (a kill's leftover) holds nothing back
        assert_eq!(counted(&Capacity::new(1, dir.path(), &prior).unwrap()), vec![rolled, killed]);
    }

    #[test]
    fn a_new_recording_deletes_the_logged_shards_a_kill_left() {
        let dir = tempfile::tempdir().unwrap();
        let shard = |i: usize| dir.path().join(format!("s{i}.trj"));
        for i in 0..3 {
            std::fs::write(shard(i), b"x").unwrap();
        }
        // Killed after logging shards 0 and 1, before deleting shard 1.
        let (first, second) = (shard(0), shard(1));
        let logged = [(first.as_path(), 4, None), (second.as_path(), 4, None)];
        EvictionLog::add(dir.path(), EVICTION_LOG, logged.into_iter()).unwrap();
        std::fs::remove_file(shard(0)).unwrap();
        let _capacity = Capacity::new(10, dir.path(), &[(shard(2), 6)]).unwrap();
        assert!(!shard(1).exists() && shard(2).exists());
        assert_eq!(EvictionLog::read(dir.path()).unwrap().evicted_steps, 8); // counted once
    }
}
