//! A recording's uploads to a store, made on a thread of their own from what the writer thread
//! says it did (it knows; nothing here guesses from file names or times): each shard it opens
//! and each flush of records to it, and each shard it seals, once its compaction (which rewrites
//! it) is done.
//!
//! - About once an interval, the new whole records of each shard that was flushed to go up as
//!   a segment (`segments::put_segment`), so a recorder killed mid-shard loses from the store
//!   only its last interval or so; `segments::recover_segments` makes a shard of them.
//! - A sealed shard goes up whole (one 8 MiB part in memory at a time), then its segments are
//!   removed. An object appears only once its upload is complete.
//! - Sealed shards go up in the order the writer opened them (`next_up`), although their
//!   compactions, each on a thread of its own, may finish in another: a reader of the prefix
//!   never lists a shard without the one before it. A shard's repeat of the last row of the one
//!   before (`CHUNK_REPEAT`) fills in for a shard the reader lacks, so the one before, listed at
//!   a later refresh, would overlap it; and the missing shard would read as damage meanwhile.
//! - The writer never waits on the network: what it says goes into a `backlog` (under a lock
//!   held for no request), which the thread takes whole between requests. A failure (after the
//!   store client's retries) leaves what failed to be tried again at the next interval; the
//!   first failure of an outage is handed out once (`failure`, which the recorder turns into a
//!   warning at its next call; the outage ends when a request of the kind that failed goes
//!   through: a store refusing deletions while it takes uploads is one outage), and `close`
//!   retries what is left and fails by name, the staging directory named (its shards are
//!   whole, and kept).
//!
//! - A bounded recording (`capacity_steps`) says which shards it evicted, with its eviction log:
//!   the log goes up first (a reader of the prefix learns of the evictions before the objects
//!   vanish), then the shards' objects and segments are deleted. A shard still waiting for its
//!   upload is not uploaded. What fails is tried again at the next interval, as an upload is.
//!
//! - Deletions the store refused (evicted shards, the segments of a shard up whole) are tried
//!   again at each interval, and at `close` for a few seconds more (`close_retries`), so a store
//!   that recovers meanwhile is left with no object the recording meant to delete. What it still
//!   refuses then does not fail the close (every shard is up): it is handed out once
//!   (`deletions_left`), naming the prefix, what stays and why.
//!
//! - Every recording holds a lease in the prefix (`leases`), bounded or not, so that a bounded
//!   recorder sharing the prefix leaves its objects alone: the thread puts it first (nothing
//!   of the recording goes up before it), again every `LeaseTimes::renew`, and deletes it at
//!   close, once everything is up.
//!
//! Memory: the thread holds the names of the shards not yet up whole, of the evicted shards not
//! yet deleted (and of those whose segments are), and one upload part; the backlog holds what the thread has not taken, bounded
//! as `backlog` says (for a bounded recording, a few entries per shard its capacity keeps,
//! however long the run, however many evictions a slow store answers late).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::backlog::{Backlog, ShardEvent};
use super::close_retries;
use super::leases::{self, LeaseTimes};
use super::segments;
use super::url::locate;
use crate::error::{Error, Result};

/// What the writer said and the thread has not taken, and the thread's wake-up.
#[derive(Default)]
struct Pending {
    backlog: Mutex<Backlog>,
    wake: Condvar,
    /// The most entries the backlog held at once.
    peak: AtomicUsize,
}

impl Pending {
    fn backlog(&self) -> MutexGuard<'_, Backlog> {
        self.backlog.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `say` into the backlog, and the thread woken.
    fn say(&self, say: impl FnOnce(&mut Backlog)) {
        let mut backlog = self.backlog();
        say(&mut backlog);
        self.peak.fetch_max(backlog.len(), Ordering::Relaxed);
        drop(backlog);
        self.wake.notify_one();
    }
}

/// What the writer holds: where it says what it did. Saying never waits on the network.
#[derive(Clone)]
pub struct UploadQueue(Arc<Pending>);

impl std::fmt::Debug for UploadQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UploadQueue")
    }
}

impl UploadQueue {
    pub fn opened(&self, shard: &Path) {
        self.0.say(|b| b.opened(shard.to_path_buf()));
    }

    pub fn flushed(&self) {
        self.0.say(Backlog::flushed);
    }

    pub fn sealed(&self, shard: &Path) {
        self.0.say(|b| b.sealed(shard.to_path_buf()));
    }

    /// The capacity evicted `shards`, which the eviction log at `log` names already.
    pub fn evicted(&self, shards: &[PathBuf], log: &Path) {
        self.0.say(|b| b.evicted(shards.to_vec(), log.to_path_buf()));
    }

    fn close(&self) {
        self.0.say(|b| b.close = true);
    }
}

/// What the caller's side reads of the uploads while they run.
#[derive(Default)]
struct Status {
    bytes: AtomicU64,
    /// Set with `failure`: a failure nobody was told of yet.
    unreported: AtomicBool,
    failure: Mutex<Option<String>>,
    /// The kind of request (`Request as u8`) whose failure began the outage now, 0 for none:
    /// an outage is said once, not at every interval it lasts, and ends when a request of that
    /// kind goes through (a store may refuse deletions while it takes uploads: those going
    /// through end nothing).
    failing: AtomicU8,
}

/// The kinds of request an outage is told apart by.
#[derive(Clone, Copy)]
enum Request {
    /// Segments, shards, the eviction log.
    Put = 1,
    /// Evicted shards and segments removed.
    Delete = 2,
}

impl Status {
    fn note(&self, kind: Request, why: String) {
        if self.failing.compare_exchange(0, kind as u8, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        self.unreported.store(true, Ordering::Release);
    }

    fn went_through(&self, kind: Request) {
        let _ = self.failing.compare_exchange(kind as u8, 0, Ordering::AcqRel, Ordering::Acquire);
    }
}

pub struct Uploads {
    url: String,
    staging: PathBuf,
    queue: UploadQueue,
    status: Arc<Status>,
    thread: Option<JoinHandle<Result<Option<String>>>>,
    /// Set by `close`: what of the deletions the store still refused (see `deletions_left`).
    deletions_left: Option<String>,
}

impl Uploads {
    /// Starts uploading the shards the recording `recording_id` writes in `staging` to the
    /// store prefix `url`, segments about every `interval`, under a lease with the timings
    /// `lease` (put by the thread first: starting makes no request). The URL is checked now (a
    /// bad one fails here, not at the first upload).
    ///
    /// Errors: `Invalid` (not a store URL, or an HTTP(S) one: plain HTTP has no uploads),
    /// `Io` (the thread could not be started).
    pub fn start(
        url: &str,
        staging: &Path,
        interval: Duration,
        recording_id: [u8; 16],
        lease: LeaseTimes,
    ) -> Result<Uploads> {
        let url = url.trim_end_matches('/').to_string();
        locate(&url)?;
        if !url.to_ascii_lowercase().starts_with("s3") {
            return Err(Error::Invalid(format!("{url}: recording needs an s3:// store (HTTP(S) URLs are read-only)")));
        }
        let pending = Arc::new(Pending::default());
        let status = Arc::new(Status::default());
        let mut worker = Worker {
            url: url.clone(),
            status: status.clone(),
            open: BTreeMap::new(),
            sealed: Vec::new(),
            opened: Vec::new(),
            evicting: Evicting::default(),
            segments_left: Vec::new(),
            lease: Lease { id: recording_id, times: lease, up: false, next: Instant::now() },
            closing: false,
            interval,
        };
        let thread = std::thread::Builder::new()
            .name("trajcore-upload".into())
            .spawn({
                let pending = pending.clone();
                move || worker.run(&pending, interval)
            })
            .map_err(|e| Error::io(staging, e))?;
        let queue = UploadQueue(pending);
        Ok(Uploads { url, staging: staging.to_path_buf(), queue, status, thread: Some(thread), deletions_left: None })
    }

    pub fn queue(&self) -> UploadQueue {
        self.queue.clone()
    }

    /// The most entries the backlog of what the writer said held at once (see `backlog` for
    /// its bound).
    pub fn backlog_peak(&self) -> usize {
        self.queue.0.peak.load(Ordering::Relaxed)
    }

    /// Bytes sent so far (segments and whole shards).
    pub fn bytes_uploaded(&self) -> u64 {
        self.status.bytes.load(Ordering::Relaxed)
    }

    /// The first upload failure of an outage (one since the last upload that went through),
    /// once (`None` almost always: one atomic load). The upload is tried again at the next
    /// interval.
    pub fn failure(&self) -> Option<String> {
        if !self.status.unreported.swap(false, Ordering::AcqRel) {
            return None;
        }
        let why = self.status.failure.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        Some(format!("{}: an upload failed, and is tried again at the next flush interval: {why}", self.url))
    }

    /// Once the writer has sealed every shard: uploads what is left, whole, and stops the
    /// thread. Deletions the store still refuses after `close_retries` do not fail it (every
    /// shard is up): `deletions_left` says them. Idempotent.
    ///
    /// Errors: `Upload`, naming the URL, why, and the staging directory (its shards are whole,
    /// and kept).
    pub fn close(&mut self) -> Result<()> {
        let Some(thread) = self.thread.take() else { return Ok(()) };
        self.queue.close();
        let done = thread.join().unwrap_or_else(|_| Err(Error::Invalid("the upload thread panicked".into())));
        match done {
            Ok(left) => {
                self.deletions_left = left;
                Ok(())
            }
            Err(e) => Err(Error::Upload {
                url: self.url.clone(),
                why: format!("uploading the shards failed ({e}); they are in {}", self.staging.display()),
            }),
        }
    }

    /// After `close`, once: what of the deletions the store still refused (the evicted shards
    /// whose objects stay and whether the eviction log went up; the shards up whole whose
    /// segments stay; why), naming the prefix; `None` when everything went.
    pub fn deletions_left(&mut self) -> Option<String> {
        self.deletions_left.take()
    }
}

impl Drop for Uploads {
    fn drop(&mut self) {
        // A recorder dropped without close: the thread ends after one last try.
        self.queue.close();
    }
}

/// The upload thread's state: the shards not yet up whole.
struct Worker {
    url: String,
    status: Arc<Status>,
    /// Shards written and not yet up whole: (file identity, where the records uploaded end,
    /// flushed since).
    open: BTreeMap<PathBuf, (u64, u64, bool)>,
    /// Shards sealed and not yet up whole (a failed upload stays here), in order.
    sealed: Vec<PathBuf>,
    /// Shards not yet up whole (nor evicted), in the order the writer opened them: the order
    /// they go up in (see `next_up`).
    opened: Vec<PathBuf>,
    evicting: Evicting,
    /// Shards up whole whose segments the store has not deleted yet (it refused): tried again
    /// at each tick, and at close (an evicted one's go with its object instead).
    segments_left: Vec<PathBuf>,
    lease: Lease,
    /// Set by `finish`.
    closing: bool,
    /// Between segments; also how long evicted objects stay after the log that names them.
    interval: Duration,
}

/// The recording's lease in the prefix (see `leases`).
struct Lease {
    id: [u8; 16],
    times: LeaseTimes,
    /// Put at least once: the recording's objects may go up.
    up: bool,
    /// When to put it (again).
    next: Instant,
}

/// Evictions not yet done in the store.
#[derive(Default)]
struct Evicting {
    /// The eviction log to put (again: it changed) before any deletion.
    log: Option<PathBuf>,
    /// Shard files whose objects (and segments) are to be deleted, oldest first, with when the
    /// log that names each went up (`None`: not yet).
    shards: Vec<(PathBuf, Option<Instant>)>,
}

impl Worker {
    /// Takes the backlog whole whenever it holds anything (or at the next interval, or lease
    /// renewal), and does what it says; so what the writer says while a request is under way
    /// waits in the backlog, coalesced.
    fn run(&mut self, pending: &Pending, interval: Duration) -> Result<Option<String>> {
        let mut next = Instant::now() + interval;
        let mut current: Option<PathBuf> = None;
        loop {
            let wake = next.min(self.lease.next);
            let taken = {
                let mut backlog = pending.backlog();
                loop {
                    let left = wake.saturating_duration_since(Instant::now());
                    if backlog.len() > 0 || backlog.close || left.is_zero() {
                        break backlog.take();
                    }
                    backlog = pending.wake.wait_timeout(backlog, left).unwrap_or_else(|p| p.into_inner()).0;
                }
            };
            let evicted = !taken.evicted.is_empty() || taken.log.is_some();
            self.take_in(taken.shards, &mut current);
            self.take_in_evictions(taken.evicted, taken.log, &mut current);
            if taken.close {
                return self.finish();
            }
            if evicted {
                let _ = self.evict(); // a failure is noted, and tried again at the next tick
            }
            // Checked after every backlog too: a writer that keeps saying delays neither.
            if Instant::now() >= self.lease.next {
                let _ = self.put_lease(); // a failure is noted, and tried again soon
            }
            if Instant::now() >= next {
                self.tick();
                next = Instant::now() + interval;
            }
        }
    }

    /// What the writer said of its shards, in order; `current` is the shard it writes.
    fn take_in(&mut self, events: Vec<ShardEvent>, current: &mut Option<PathBuf>) {
        for event in events {
            match event {
                ShardEvent::Opened(path) => {
                    self.open.insert(path.clone(), (0, 0, false));
                    self.opened.push(path.clone());
                    *current = Some(path);
                }
                ShardEvent::Flushed => {
                    if let Some(entry) = current.as_ref().and_then(|p| self.open.get_mut(p)) {
                        entry.2 = true;
                    }
                }
                ShardEvent::Sealed(path) => {
                    if !self.sealed.contains(&path) {
                        self.sealed.push(path);
                    }
                }
            }
        }
    }

    /// Shards the capacity evicted, after every shard event the backlog held (an evicted shard
    /// was sealed before: none of them is about it), and the newest eviction log.
    fn take_in_evictions(&mut self, shards: Vec<PathBuf>, log: Option<PathBuf>, current: &mut Option<PathBuf>) {
        self.sealed.retain(|p| !shards.contains(p));
        self.open.retain(|p, _| !shards.contains(p));
        self.opened.retain(|p| !shards.contains(p));
        if current.as_ref().is_some_and(|c| shards.contains(c)) {
            *current = None;
        }
        self.segments_left.retain(|p| !shards.contains(p));
        for shard in shards {
            if !self.evicting.shards.iter().any(|(p, _)| *p == shard) {
                self.evicting.shards.push((shard, None));
            }
        }
        if log.is_some() {
            self.evicting.log = log;
        }
    }

    fn shard_url(&self, path: &Path) -> String {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("{}/{name}", self.url)
    }

    /// The flushed records of each shard as segments, then the sealed shards whole, then the
    /// evictions. Failures are noted (`outcome`) and tried again at the next tick. Nothing goes
    /// up before the lease: a recorder that lists one of this recording's objects finds it.
    fn tick(&mut self) {
        if !self.lease.up {
            return;
        }
        let flushed: Vec<PathBuf> = self.open.iter().filter(|(_, e)| e.2).map(|(p, _)| p.clone()).collect();
        for path in flushed {
            let _ = self.put_segment(&path);
        }
        let _ = self.put_sealed();
        let _ = self.remove_segments_left();
        let _ = self.evict();
    }

    /// Puts the lease (again), next a renewal interval after this put began, or, failed, an
    /// upload interval after (at most a renewal interval): the ttl covers a failed renewal.
    fn put_lease(&mut self) -> Result<()> {
        let began = Instant::now();
        let done = self.outcome(Request::Put, leases::put(&self.url, &self.lease.id, self.lease.times.ttl));
        let renew = self.lease.times.renew;
        self.lease.next = began + if done.is_ok() { renew } else { renew.min(self.interval) };
        self.lease.up |= done.is_ok();
        done
    }

    /// `done`, the result of a request of `kind`, noted: a failure begins an outage (said
    /// once), a success ends one that a request of its kind began.
    fn outcome<T>(&self, kind: Request, done: Result<T>) -> Result<T> {
        match &done {
            Ok(_) => self.status.went_through(kind),
            Err(e) => self.status.note(kind, e.to_string()),
        }
        done
    }

    /// The eviction log up, then, an interval later, each evicted shard's object and segments
    /// deleted; the first failure stops (what is left goes at the next interval). The log
    /// always goes first: a reader of the prefix that finds a shard gone finds it in the log,
    /// and one that refreshes at least once an interval learns of it before the object goes (a
    /// reader has no open file to keep reading it, as a local one has).
    fn evict(&mut self) -> Result<()> {
        if !self.lease.up {
            return Ok(()); // at a tick after the lease is up
        }
        if let Some(log) = self.evicting.log.clone() {
            let name = log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            self.outcome(Request::Put, segments::upload(&log, &format!("{}/{name}", self.url)))?;
            self.evicting.log = None;
            let now = Instant::now();
            for (_, up) in &mut self.evicting.shards {
                up.get_or_insert(now);
            }
        }
        while let Some((path, Some(up))) = self.evicting.shards.first().cloned() {
            let grace = (up + self.interval).saturating_duration_since(Instant::now());
            if !grace.is_zero() {
                if !self.closing {
                    return Ok(()); // at a later tick
                }
                std::thread::sleep(grace); // at close: at most an interval
            }
            let url = self.shard_url(&path);
            self.outcome(Request::Delete, super::remote::delete(&url).and_then(|()| segments::remove_segments(&url)))?;
            self.evicting.shards.remove(0);
        }
        Ok(())
    }

    fn put_segment(&mut self, path: &Path) -> Result<()> {
        let url = self.shard_url(path);
        let Some(&(identity, from, _)) = self.open.get(path) else { return Ok(()) };
        let (end, now) = match segments::put_segment(path, identity, from, &url) {
            Err(_) if self.evicted_locally(path) => return Ok(()),
            done => self.outcome(Request::Put, done)?,
        };
        self.status.bytes.fetch_add(end - from, Ordering::Relaxed);
        // A file replaced since (compacted: sealed) keeps the identity of the one its segments
        // come from, so it never mixes with them: it goes up only whole.
        self.open.insert(path.to_path_buf(), (if identity == 0 { now } else { identity }, end, false));
        Ok(())
    }

    /// Each sealed shard up whole (in the order opened: `next_up`), its segments then to be
    /// removed (`remove_segments_left`); the first failure stops the round (the rest go at the
    /// next).
    fn put_sealed(&mut self) -> Result<()> {
        while let Some(path) = next_up(&self.opened, &self.sealed).cloned() {
            let url = self.shard_url(&path);
            match segments::upload(&path, &url) {
                // The capacity deleted it just now: its `Evicted` is on the way, not a failure.
                Err(_) if self.evicted_locally(&path) => return Ok(()),
                done => self.outcome(Request::Put, done)?,
            }
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            self.status.bytes.fetch_add(size, Ordering::Relaxed);
            if self.open.remove(&path).is_some_and(|(_, end, _)| end > 0) {
                self.segments_left.push(path.clone());
            }
            self.sealed.retain(|p| *p != path);
            self.opened.retain(|p| *p != path);
        }
        Ok(())
    }

    /// The segments of the shards up whole, removed, oldest first; the first failure stops
    /// (what is left goes at the next tick: a store refusing deletions holds up no upload).
    fn remove_segments_left(&mut self) -> Result<()> {
        while let Some(path) = self.segments_left.first() {
            let url = self.shard_url(path);
            self.outcome(Request::Delete, segments::remove_segments(&url))?;
            self.segments_left.remove(0);
        }
        Ok(())
    }

    /// Whether the shard file at `path`, which failed to go up, is gone before close: a bounded
    /// recording's capacity deleted it, and its `Evicted` is the next event (it is sent before
    /// the deletion). At close every event is in, so a file gone then is a failure.
    fn evicted_locally(&self, path: &Path) -> bool {
        !self.closing && !path.exists()
    }

    /// At close: every shard goes up whole (the writer sealed each by now; one it could not,
    /// having failed, goes up as it is); one that fails again fails the close. Then the
    /// evictions, tried again as `close_retries` says: returns what the store still refused.
    fn finish(&mut self) -> Result<Option<String>> {
        self.closing = true;
        if !self.lease.up {
            self.put_lease()?;
        }
        let unsealed: Vec<PathBuf> = self.open.keys().filter(|p| !self.sealed.contains(p)).cloned().collect();
        self.sealed.extend(unsealed);
        self.put_sealed()?;
        let left = self.evict_at_close();
        // Everything is up: the recording is stopped, its shards any later recorder's to count.
        // A lease left by a failure here goes stale (its ttl), as a killed recorder's does.
        let _ = leases::delete(&self.url, &self.lease.id, self.lease.times.ttl);
        Ok(left)
    }

    /// The segments left and the evictions (`evict`), tried again with backoff until they go
    /// through or `close_retries`' deadline: `None` when they went through, else what is left
    /// and why. A try that got something through starts the tries afresh: a store that answers,
    /// however slowly (a long outage leaves many deletions), is not cut short; one that refuses
    /// everything is, and there is only so much to delete.
    fn evict_at_close(&mut self) -> Option<String> {
        let (mut failed, mut total) = (0, 0);
        let mut first_failure: Option<Instant> = None;
        loop {
            let before = self.deletions_pending();
            let segments = self.remove_segments_left();
            let evicted = self.evict();
            let why = match segments.and(evicted) {
                Ok(()) => return None,
                Err(why) => why,
            };
            if self.deletions_pending() < before {
                (failed, first_failure) = (0, None);
            }
            (failed, total) = (failed + 1, total + 1);
            let since = first_failure.get_or_insert_with(Instant::now).elapsed();
            match close_retries::next_try(failed, since) {
                Some(wait) => std::thread::sleep(wait),
                None => return Some(self.what_is_left(&why, total, since)),
            }
        }
    }

    /// The requests still to go through of the deletions: the log (which goes first), evicted
    /// shards, shards whose segments are left.
    fn deletions_pending(&self) -> usize {
        usize::from(self.evicting.log.is_some()) + self.evicting.shards.len() + self.segments_left.len()
    }

    /// What the store refused of the deletions, after `tries` (the last `since` apart), said for
    /// the user.
    fn what_is_left(&self, why: &Error, tries: u32, since: Duration) -> String {
        let tried = format!("tried {tries} times at close, the last {:.1} s in vain", since.as_secs_f64());
        let mut left = Vec::new();
        if let Some((first, _)) = self.evicting.shards.first() {
            let (shards, first) = (self.evicting.shards.len(), self.shard_url(first));
            left.push(if self.evicting.log.is_some() {
                format!(
                    "the recording's eviction log did not go up, so the {shards} evicted shards from {first} on \
                     stay in the store, and readers still list them"
                )
            } else {
                format!(
                    "{shards} evicted shards from {first} on could not be deleted: they stay in the store, readers \
                     leave them out (the eviction log names them), and the next bounded recording on the prefix \
                     deletes them"
                )
            });
        }
        if let Some(first) = self.segments_left.first() {
            let (shards, first) = (self.segments_left.len(), self.shard_url(first));
            left.push(format!(
                "the segments of {shards} shards up whole, from {first} on, could not be deleted: no reader lists \
                 them, and `trajcore recover` removes them"
            ));
        }
        format!("{}: {} ({tried}): {why}", self.url, left.join("; "))
    }
}

/// The sealed shard to put up next, of `sealed` (in the order sealed): the first shard of
/// `opened` (those not up yet, in the order the writer opened them) once it is sealed, so the
/// store lists each shard only after the ones before it; `None` while it is not. A shard
/// sealed that was never said opened holds nothing up and waits for nothing.
fn next_up<'a>(opened: &[PathBuf], sealed: &'a [PathBuf]) -> Option<&'a PathBuf> {
    let first = opened.first();
    sealed.iter().find(|&p| Some(p) == first || !opened.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_shards_go_up_in_the_order_opened() {
        let p = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        // (opened and not up yet, sealed, the one that goes up next)
        type Case = (&'static str, &'static [&'static str], &'static [&'static str], Option<&'static str>);
        let cases: &[Case] = &[
            ("the first opened is sealed", &["a", "b", "c"], &["a"], Some("a")),
            ("a later one sealed first waits for the one before", &["a", "b", "c"], &["b"], None),
            ("then goes once that one is sealed", &["a", "b", "c"], &["b", "a"], Some("a")),
            ("and after it is up", &["b", "c"], &["b"], Some("b")),
            ("the open shard holds nothing up", &["a", "b"], &["a"], Some("a")),
            ("nothing sealed", &["a", "b"], &[], None),
            ("a shard never said opened", &["a", "b"], &["x", "b"], Some("x")),
            ("nothing opened (all up or evicted)", &[], &["x"], Some("x")),
            ("nothing at all", &[], &[], None),
        ];
        for &(name, opened, sealed, want) in cases {
            let sealed = p(sealed);
            assert_eq!(next_up(&p(opened), &sealed), want.map(PathBuf::from).as_ref(), "{name}");
        }
    }

    /// An outage is said once, and ends only when a request of the kind that began it goes
    /// through: a store refusing deletions while it takes uploads is one outage.
    #[test]
    fn an_outage_is_said_once_and_ends_with_its_kind() {
        let status = Status::default();
        let said = |status: &Status| status.unreported.swap(false, Ordering::AcqRel);
        // (what happens, whether a failure is said by it)
        let steps: &[(&str, Request, bool)] = &[
            ("fail", Request::Delete, true),
            ("through", Request::Put, false),
            ("fail", Request::Delete, false),
            ("fail", Request::Put, false),
            ("through", Request::Delete, false),
            ("fail", Request::Put, true),
            ("through", Request::Put, false),
            ("fail", Request::Put, true),
        ];
        for (k, &(what, kind, want)) in steps.iter().enumerate() {
            if what == "fail" {
                status.note(kind, format!("failure {k}"));
            } else {
                status.went_through(kind);
            }
            assert_eq!(said(&status), want, "step {k}: {what} {}", kind as u8);
        }
    }
}
