//! Where the rows and episodes of `episodes` go: sealing the lanes' buffered rows into
//! compressed chunks (here, off the caller's thread), appending them and the ended episodes'
//! records to the shard, handing bytes to the OS (and fsync, as the durability says), rolling
//! over to a new shard past the size limit, compacting closed shards on threads of their own, and
//! the timelog records. When the recording goes up to a store, it tells the uploads what it did
//! (a shard opened, records flushed, a shard sealed and compacted): it knows, so nothing guesses.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::capacity::{self, Capacity};
use super::compact;
use super::release::FreedPages;
use super::shard::{now_ns, ShardWriter};
use crate::error::{Error, Result};
use crate::format::chunks::PendingChunk;
use crate::format::codec::Encoder;
use crate::format::episode::{EpisodeSummary, FLAG_CONTINUES, FLAG_DISCARDED};
use crate::objstore::uploads::UploadQueue;
use crate::schema::ColumnSpec;
use crate::writer::config::{Durability, RecorderConfig};
use crate::writer::episodes::Episodes;
use crate::writer::lane::EndedEpisode;
use crate::writer::shared::Shared;
use crate::writer::timelog;
use crate::writer::timelog::{Clock, Stage};

/// Timelog samples (about a second each) stored per Timelog record.
const TIMELOG_BATCH: usize = 60;

pub struct Sink {
    max_shard_bytes: u64,
    index_interval_bytes: u64,
    compact_shards: bool,
    /// Store the timelog in the file (it is published live either way).
    timelog: bool,
    compaction: compact::Settings,
    durability: Durability,
    meta_json: Vec<u8>,
    recording_id: [u8; 16],
    /// The recording's directory, where new shards go.
    dir: PathBuf,
    shard_seq: u64,
    /// Set once closing starts: no more rollover.
    closing: bool,
    shard: Option<ShardWriter>,
    encoder: Encoder,
    freed_pages: FreedPages,
    /// Threads compacting closed shards (`compact_closed`).
    compactions: Vec<std::thread::JoinHandle<()>>,
    /// Timelog samples not yet in the file.
    timelog_unwritten: Vec<timelog::Sample>,
    /// Stage times of the timelog sample being filled (the writer thread times its own stages
    /// here too).
    pub clock: Clock,
    shared: Arc<Shared>,
    uploads: Option<UploadQueue>,
    /// With `capacity_steps`: the closed shards it counts (shared with the compaction threads,
    /// which say when the writer is finished with a file).
    capacity: Option<Arc<Mutex<Capacity>>>,
    /// A bounded recording rolls over at this many transitions in a shard (`u64::MAX`: never).
    shard_steps_limit: u64,
    /// `Episodes::step_rows` when the open shard started.
    shard_first_step: u64,
}

impl Sink {
    /// A sink appending to `shard` (the recording's first), as `config` says.
    pub fn new(
        config: &RecorderConfig,
        meta_json: Vec<u8>,
        recording_id: [u8; 16],
        shard: ShardWriter,
        shared: Arc<Shared>,
        uploads: Option<UploadQueue>,
    ) -> Result<Self> {
        let durability = config.durability()?;
        let dir = shard.path().parent().map(PathBuf::from).unwrap_or_default();
        let capacity = match config.capacity_steps {
            Some(limit) => {
                let capacity = Capacity::new(limit, &dir, &config.prior_shards)?;
                Some(Arc::new(Mutex::new(evicting_objects(capacity, &uploads, &config.upload_to, &recording_id)?)))
            }
            None => None,
        };
        shared.shard_paths.lock().unwrap_or_else(|p| p.into_inner()).push(shard.path().to_path_buf());
        if let Some(uploads) = &uploads {
            uploads.opened(shard.path());
        }
        Ok(Sink {
            max_shard_bytes: config.max_shard_bytes,
            index_interval_bytes: config.index_interval_bytes,
            compact_shards: config.compact_shards,
            timelog: config.timelog,
            compaction: compact::Settings {
                default_chunk_bytes: config.chunk_bytes,
                index_interval_bytes: config.index_interval_bytes,
                durability,
            },
            durability,
            meta_json,
            recording_id,
            dir,
            shard_seq: 0,
            closing: false,
            shard: Some(shard),
            encoder: Encoder::default(),
            freed_pages: FreedPages::default(),
            compactions: Vec::new(),
            timelog_unwritten: Vec::new(),
            clock: Clock::new(now_ns()),
            shared,
            uploads,
            shard_steps_limit: config.capacity_steps.map_or(u64::MAX, capacity::shard_steps_limit),
            capacity,
            shard_first_step: 0,
        })
    }

    fn shard_mut(&mut self) -> Result<&mut ShardWriter> {
        self.shard.as_mut().ok_or_else(|| Error::WriterStopped("no open shard".into()))
    }

    /// A column added while recording: the shard's schema says so from here on.
    pub fn add_column(&mut self, spec: &ColumnSpec) -> Result<()> {
        self.shard_mut()?.add_column(spec)
    }

    /// Every timelog sample passes here once: it is published live (`Recorder::timelog`,
    /// `stats()["timelog"]` in Python) and, unless the config says not to, kept for the file.
    pub fn keep_timelog_sample(&mut self, sample: timelog::Sample) {
        self.shared.timelog.push(sample);
        if self.timelog {
            self.timelog_unwritten.push(sample);
        }
    }

    /// The samples not in the file yet go in a Timelog record, about once a minute (a record per
    /// sample would cost a header each) and always before a shard is finished.
    pub fn append_timelog(&mut self, now: bool) {
        if self.timelog_unwritten.len() >= TIMELOG_BATCH || (now && !self.timelog_unwritten.is_empty()) {
            if let Some(shard) = self.shard.as_mut() {
                let samples = std::mem::take(&mut self.timelog_unwritten);
                self.clock.time(Stage::Encode, || shard.append_timelog(&samples));
            }
        }
    }

    /// Seals full buffers (or all, with `all`), appends them as one Chunks record, and starts a
    /// new shard if this one is full.
    pub fn write_chunks(&mut self, episodes: &mut Episodes, all: bool) -> Result<()> {
        self.seal_chunks(episodes, all)?;
        let sealed = episodes.take_sealed();
        if !sealed.is_empty() {
            self.write_episodes(sealed)?;
        }
        self.roll_over_if_full(episodes)
    }

    fn seal_chunks(&mut self, episodes: &mut Episodes, all: bool) -> Result<()> {
        let mut chunks = Vec::new();
        let (encoder, clock) = (&mut self.encoder, &mut self.clock);
        episodes.for_each_buffer(|lane, buffer, spec, limit| {
            if all || buffer.is_full(limit) {
                chunks.extend(clock.time(Stage::Compress, || buffer.seal(lane, spec, encoder)));
            }
        });
        self.append_chunks(chunks)
    }

    fn append_chunks(&mut self, chunks: Vec<PendingChunk>) -> Result<()> {
        if chunks.is_empty() {
            return Ok(());
        }
        let shard = self.shard.as_mut().ok_or_else(|| Error::WriterStopped("no open shard".into()))?;
        let before = shard.size();
        self.clock.time(Stage::Encode, || shard.append_chunks(chunks));
        self.clock.time_write(|| shard.flush_to_os())?;
        self.shared.bytes_written.fetch_add(shard.size() - before, Ordering::Relaxed);
        self.flushed();
        Ok(())
    }

    /// Everything buffered goes to the file: chunks, then the records of the ended episodes no
    /// call can change any more, then maybe an index checkpoint or a new shard.
    pub fn cycle(&mut self, episodes: &mut Episodes) -> Result<()> {
        self.seal_chunks(episodes, true)?;
        self.shard_mut()?.check_still_there()?;
        self.append_timelog(false);
        self.write_pending_episodes(episodes)?;
        self.roll_over_if_full(episodes)?;
        self.freed_pages.release();
        Ok(())
    }

    /// The records of the ended episodes waiting (after the chunks holding their rows).
    fn write_pending_episodes(&mut self, episodes: &mut Episodes) -> Result<()> {
        let pending: Vec<EndedEpisode> = episodes.take_pending().collect();
        self.write_episodes(pending)
    }

    /// Episode records of `ended` (whose rows are in chunks written already), then maybe an
    /// index checkpoint.
    fn write_episodes(&mut self, ended: Vec<EndedEpisode>) -> Result<()> {
        let shard = self.shard.as_mut().ok_or_else(|| Error::WriterStopped("no open shard".into()))?;
        let before = shard.size();
        let batch: Vec<(EpisodeSummary, Vec<u8>, Vec<u8>)> = ended
            .into_iter()
            .map(|ended| {
                let metadata = if ended.metadata.is_empty() {
                    Vec::new() // reads back as {}
                } else {
                    serde_json::to_vec(&ended.metadata).unwrap_or_else(|_| b"{}".to_vec())
                };
                (ended.summary, metadata, ended.metrics)
            })
            .collect();
        let listed = batch.iter().filter(|(s, _, _)| s.flags & (FLAG_CONTINUES | FLAG_DISCARDED) == 0).count();
        let index_interval = self.index_interval_bytes;
        self.clock.time(Stage::Encode, || {
            shard.append_episodes(&batch);
            shard.maybe_checkpoint(index_interval);
        });
        self.shared.episodes.fetch_add(listed as u64, Ordering::Relaxed);
        self.clock.time_write(|| shard.flush_to_os())?;
        self.shared.bytes_written.fetch_add(shard.size() - before, Ordering::Relaxed);
        self.flushed();
        Ok(())
    }

    /// Past the size limit, finishes the current shard and starts the next one, so that every
    /// shard stands on its own: all buffered rows and every ended episode go into the shard
    /// being finished, each running episode gets a part record there (`FLAG_CONTINUES`), and the
    /// new shard starts with a repeat of each running episode's last observation row, the first
    /// row of its part there (see `Episodes::parts_at_rollover`). Waits while an ended episode
    /// is still reachable by `discard`/metadata (until the next row message), and never while
    /// closing (that would start a shard holding nothing but its schema).
    pub fn roll_over_if_full(&mut self, episodes: &mut Episodes) -> Result<()> {
        let steps = episodes.step_rows() - self.shard_first_step;
        let full =
            self.shard.as_ref().is_some_and(|s| s.size() >= self.max_shard_bytes) || steps >= self.shard_steps_limit;
        if !full || self.closing || episodes.any_held() {
            return Ok(());
        }
        self.seal_chunks(episodes, true)?;
        let repeats = episodes.parts_at_rollover(now_ns());
        self.append_timelog(true);
        self.write_pending_episodes(episodes)?;
        // The next shard is made (and locked) before the old one is finished: a recording being
        // written always holds a shard's lock, so a bounded recorder starting in the directory
        // never takes it for a dead one whose shards are its to count (`Capacity::new`).
        let old_seq = self.shard_seq;
        self.shard_seq += 1;
        let shard = self
            .clock
            .time_write(|| {
                ShardWriter::create(
                    &self.dir,
                    self.recording_id,
                    self.shard_seq,
                    &self.meta_json,
                    episodes.columns(),
                    self.durability,
                )
            })
            .inspect_err(|_| self.shard_seq = old_seq)?;
        if let Some(old) = self.shard.take() {
            let path = self.clock.time_write(|| old.finish())?;
            self.flushed();
            self.count_closed(&path, episodes.step_rows(), old_seq);
            self.compact_closed(&path);
        }
        self.shared.shard_paths.lock().unwrap_or_else(|p| p.into_inner()).push(shard.path().to_path_buf());
        if let Some(uploads) = &self.uploads {
            uploads.opened(shard.path());
        }
        self.shard = Some(shard);
        self.shard_first_step = episodes.step_rows();
        self.append_chunks(repeats)?;
        episodes.start_parts(self.shard_seq);
        Ok(())
    }

    /// The first half of closing: everything is written, then the episodes still running
    /// (incomplete, last). No rollover from here on.
    pub fn write_all(&mut self, episodes: &mut Episodes) -> Result<()> {
        self.closing = true;
        episodes.settle_held();
        self.cycle(episodes)?;
        episodes.end_all_open(now_ns());
        self.cycle(episodes)
    }

    /// The second half of closing (after the last timelog sample was kept): the timelog, the
    /// index and the End record, then the compactions finish.
    pub fn finish(&mut self, episodes: &Episodes) -> Result<()> {
        self.append_timelog(true);
        if let Some(shard) = self.shard.take() {
            let before = shard.size();
            let path = self.clock.time_write(|| shard.finish())?;
            let after = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(before);
            self.shared.bytes_written.fetch_add(after.saturating_sub(before), Ordering::Relaxed);
            self.flushed();
            self.count_closed(&path, episodes.step_rows(), self.shard_seq);
            self.compact_closed(&path);
        }
        self.join_compactions();
        Ok(())
    }

    /// Rewrites the shard just closed at `path` without the small chunks the flush timer cut
    /// (`compact`), on a thread of its own so the rows arriving meanwhile are not held up; `finish`
    /// waits for every such thread. A failure leaves the shard as it was, every row in it, and is
    /// reported in the stats: only its size is not what it could be.
    /// Then (compacted or not) it is sealed: the uploads take it whole.
    fn compact_closed(&mut self, path: &Path) {
        if !self.compact_shards {
            if let Some(uploads) = &self.uploads {
                uploads.sealed(path);
            }
            release_for_capacity(&self.shared, self.capacity.as_deref(), path);
            return;
        }
        let settings = self.compaction;
        // Those already done are joined now: a long recording rolls over many shards.
        let (done, running) = std::mem::take(&mut self.compactions).into_iter().partition(|h| h.is_finished());
        self.compactions = running;
        self.join_each(done);
        let (shared, owned, uploads) = (self.shared.clone(), path.to_path_buf(), self.uploads.clone());
        let capacity = self.capacity.clone();
        let spawned = std::thread::Builder::new().name("trajcore-compact".into()).spawn(move || {
            note_compaction(&shared, &owned, compact::compact(&owned, &settings, &mut Encoder::default()));
            if let Some(uploads) = uploads {
                uploads.sealed(&owned);
            }
            release_for_capacity(&shared, capacity.as_deref(), &owned);
        });
        match spawned {
            Ok(handle) => self.compactions.push(handle),
            Err(e) => {
                note_compaction(&self.shared, path, Err(Error::io(path, e)));
                if let Some(uploads) = &self.uploads {
                    uploads.sealed(path);
                }
                release_for_capacity(&self.shared, self.capacity.as_deref(), path);
            }
        }
    }

    /// A bounded recording counts the shard just closed at `path` (its transitions: those taken
    /// in since it started, `step_rows` now); it may be deleted once the writer is done with it.
    fn count_closed(&mut self, path: &Path, step_rows: u64, seq: u64) {
        if let Some(capacity) = &self.capacity {
            let steps = step_rows - self.shard_first_step;
            let mut capacity = capacity.lock().unwrap_or_else(|p| p.into_inner());
            capacity.sealed(path, steps, self.recording_id, seq);
        }
    }

    /// Records went to the OS: the uploads may send them as a segment.
    fn flushed(&self) {
        if let Some(uploads) = &self.uploads {
            uploads.flushed();
        }
    }

    /// Waits for the compactions under way.
    fn join_compactions(&mut self) {
        let all = std::mem::take(&mut self.compactions);
        self.join_each(all);
    }

    /// Waits for each of `handles`, noting a panic as a compaction error.
    fn join_each(&self, handles: Vec<std::thread::JoinHandle<()>>) {
        for handle in handles {
            if handle.join().is_err() {
                let mut slot = self.shared.compaction_error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert("a shard's compaction panicked (the shard was left as it was)".into());
            }
        }
    }
}

/// The writer is done with the closed shard at `path` (compacted, or not to be): a bounded
/// recording deletes the oldest shards it no longer holds, counting them in the stats, or says
/// why it could not (the shards stay; a later release tries again).
fn release_for_capacity(shared: &Shared, capacity: Option<&Mutex<Capacity>>, path: &Path) {
    let Some(capacity) = capacity else { return };
    match capacity.lock().unwrap_or_else(|p| p.into_inner()).released(path) {
        Ok(steps) => {
            shared.evicted_steps.fetch_add(steps, Ordering::Relaxed);
        }
        Err(e) => {
            let mut slot = shared.eviction_error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(format!("shards not evicted: {e}"));
        }
    }
}

/// Counts what a compaction of `path` saved, or says why it failed.
fn note_compaction(shared: &Shared, path: &Path, outcome: Result<Option<compact::Compacted>>) {
    match outcome {
        Ok(Some(done)) => {
            shared.shards_compacted.fetch_add(1, Ordering::Relaxed);
            let saved = done.bytes_before.saturating_sub(done.bytes_after);
            shared.bytes_compacted.fetch_add(saved, Ordering::Relaxed);
            shared.bytes_written.fetch_sub(saved, Ordering::Relaxed);
        }
        Ok(None) => {}
        Err(e) => {
            let mut slot = shared.compaction_error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(format!("{}: not compacted: {e}", path.display()));
        }
    }
}

/// The capacity of a recording to a store also evicts the store's objects (its uploads delete
/// them). Without the `remote` feature an `UploadQueue` cannot exist, so the first arm is dead.
#[cfg_attr(not(feature = "remote"), allow(unused_variables, unreachable_code))]
fn evicting_objects(
    capacity: Capacity,
    uploads: &Option<UploadQueue>,
    url: &Option<String>,
    recording_id: &[u8; 16],
) -> Result<Capacity> {
    match (uploads, url) {
        (Some(uploads), Some(url)) => capacity.uploading_to(uploads.clone(), url, recording_id),
        _ => Ok(capacity),
    }
}
