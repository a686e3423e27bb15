//! The caller's side of recording: owns the producer end of the ring and the schema, and starts
//! and stops the writer thread. One `push` per (vector) step: one copy into the ring, no syscall.

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rtrb::CopyToUninit;

use super::autoreset::{op, EpisodeEnd, Refusal, Splitter, Tally, Target};
use super::config::RecorderConfig;
use super::message::{self, EntryKind, EntryRef, MessageHead, MessageKind, Slot};
use super::reader_flush::{ReaderFlush, ReaderFlushes, Requested};
use super::shared::Shared;
use super::thread::{Faults, WriterSetup, WriterThread};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::objstore::uploads::Uploads;
use crate::schema::{CodecSpec, ColumnId, ColumnSpec, Role, Timeline, MAX_CHUNK_BYTES};
use crate::writer::entries::reading::fit::Fit;
use crate::writer::entries::ring_fit;
use crate::writer::entries::skips::unrecorded_warning;
use crate::writer::files::shard::{new_recording_id, now_ns, ShardWriter};

/// A column the caller adds once recording runs (an info key seen for the first time).
pub struct NewColumn {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub timeline: Timeline,
    /// Rows may be missing: a boolean mask column `<parent>/_<leaf>` is kept beside it.
    pub masked: bool,
    pub codec: CodecSpec,
    /// The column this one continues with a wider type (see `widen`).
    pub widens: Option<ColumnId>,
}

/// Counters for progress reports and benchmarks; serialized, what Python's `stats()` returns.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    pub steps: u64,
    pub episodes: u64,
    pub bytes_raw: u64,
    pub bytes_written: u64,
    pub ring_capacity: u64,
    pub ring_waits: u64,
    pub backlog_waits: u64,
    /// Closed shards rewritten without the flush timer's small chunks, and the bytes saved
    /// (`bytes_written` counts the files as they are after it).
    pub shards_compacted: u64,
    pub bytes_compacted: u64,
    /// Why a closed shard was left uncompacted (all its rows still in it).
    pub compaction_error: Option<String>,
    /// Transitions in the shards a bounded recording (`capacity_steps`) deleted, and why an
    /// eviction failed (those shards stayed; for a store, what it still refused to delete at
    /// close, the segments of shards up whole included).
    pub evicted_steps: u64,
    pub eviction_error: Option<String>,
    /// Steps of envs with no running episode (see `skips::unrecorded_warning`).
    pub steps_not_recorded: u64,
    /// Values of dynamic columns left out, by column name: the caller adds them (it holds the
    /// dynamic columns' `Skips`).
    pub values_not_recorded: std::collections::BTreeMap<String, u64>,
    /// The writer's timelog so far (see `timelog`).
    pub timelog: Vec<super::timelog::Sample>,
    /// Recording to a store: the bytes sent so far (each recorded byte goes up about twice: as
    /// a segment, then in its sealed shard); absent else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_uploaded: Option<u64>,
}

pub struct Recorder {
    producer: rtrb::Producer<u8>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    config: RecorderConfig,
    columns: Vec<ColumnSpec>,
    by_name: HashMap<String, ColumnId>,
    roles: [ColumnId; 3],
    /// Which row belongs to which episode, decided here, applied by the writer thread.
    splitter: Splitter,
    /// The running episodes' lengths and returns, and the episodes the last message ended: kept
    /// only for a caller that reads them (`report_ended`), since the count costs every step.
    tally: Option<Tally>,
    /// The kind of the message planned by `plan_reset`/`plan_step` and not sent yet.
    planned: Option<MessageKind>,
    /// The planned message's lane ops as bytes (reused).
    ops_bytes: Vec<u8>,
    /// `ops_bytes` holds the steady plan (all `STEP`).
    ops_bytes_steady: bool,
    /// AddColumn messages (column spec JSON) not sent yet: they go out, in order, right before
    /// the next message, so adding a column never waits for ring space.
    queued_columns: Vec<Vec<u8>>,
    next_ticket: u64,
    /// Set once the Close message is in the ring (a close interrupted while waiting resumes).
    close_sent: Option<u64>,
    closed: bool,
    /// Whether the warning about steps of envs with no running episode was given.
    warned_unrecorded: bool,
    /// The process that made the recorder: its writer thread exists in no other (a fork).
    owner_pid: u32,
    /// Called every `POLL_EVERY` while a call waits (ring space, a flush, close); an error ends
    /// the wait with it. The bindings check for signals here (Ctrl-C while waiting).
    interrupt: Option<Interrupt>,
    /// What the interrupt check returned when it last ended a wait.
    interrupted: Option<Box<dyn Any + Send>>,
    /// Messages pushed so far (the writer counts the same way, see `Shared::written_through`).
    pushed: u64,
    pace: Pace,
    /// The uploads of a recording to a store (`RecorderConfig::upload_to`).
    uploads: Option<Uploads>,
    /// The flushes refreshes of this process asked for, timed from `made`.
    reader_flushes: ReaderFlushes,
    made: std::time::Instant,
}

/// At most this many bytes of the ring are prefetched after a message (see `prefetch_next`).
const PREFETCH_MAX: usize = 16 << 10;

/// Keeps the durability promise when the writer cannot keep up (a slow codec, big frames): a
/// step waits while the writer would need more than half a flush interval to get through what
/// is in the ring, so rows reach the file within about 1.5 flush intervals plus one seal, not
/// after the whole ring. The writer's speed is measured while it has work (messages taken off
/// the ring per second, smoothed); the clock is read every `PACE_EVERY` steps only.
#[derive(Default)]
struct Pace {
    steps: u32,
    /// (time, messages handled) when last measured.
    last: Option<(std::time::Instant, u64)>,
    /// Messages per second the writer takes off the ring, smoothed; 0 before it is known.
    rate: f64,
    /// While set, the step waits until the writer has handled this many messages.
    wait_for: Option<u64>,
}

const PACE_EVERY: u32 = 64;

/// See `Recorder::set_interrupt_check`: what an interrupting check returns is the caller's own
/// (in Python, the signal's exception), kept for `take_interrupt`.
pub type Interrupt = Box<dyn FnMut() -> std::result::Result<(), Box<dyn Any + Send>> + Send>;

/// How often a waiting call runs the interrupt check.
const POLL_EVERY: Duration = Duration::from_millis(20);

impl Recorder {
    /// Validates the configuration, creates the directory and the first shard (so a bad path
    /// fails here, not later on the writer thread) and starts the writer thread.
    pub fn create(dir: &Path, config: RecorderConfig) -> Result<Self> {
        Self::create_with_faults(dir, config, Faults::default())
    }

    /// `create`, with a writer thread that fails as a test asks (`Faults`).
    pub fn create_with_faults(dir: &Path, config: RecorderConfig, faults: Faults) -> Result<Self> {
        config.validate()?;
        let mut columns: Vec<ColumnSpec> = Vec::new();
        let mut by_name = HashMap::new();
        let fixed = [
            ("reward", "float64", Role::Reward),
            ("terminated", "bool", Role::Terminated),
            ("truncated", "bool", Role::Truncated),
        ];
        let mut given = config.columns.clone();
        for (name, dtype, role) in fixed {
            if given.iter().any(|c| c.name == name) {
                return Err(Error::schema(name, "this column name is reserved for the core"));
            }
            given.push(ColumnSpec {
                id: 0,
                name: name.into(),
                dtype: dtype.into(),
                shape: vec![],
                timeline: Timeline::Step,
                mask_of: None,
                mask: None,
                role: Some(role),
                codec: config.flags_codec.clone(),
                widens: None,
            });
        }
        let chunk_limit = (config.chunk_bytes as u64).min(MAX_CHUNK_BYTES);
        for mut spec in given {
            spec.id = columns.len() as ColumnId;
            // Every column states the chunk size it is sealed at: readers bound what a chunk may
            // decode to by it.
            spec.declare_chunk_bytes(spec.codec.chunk_bytes.unwrap_or(chunk_limit));
            spec.validate()?;
            if spec.mask.is_some() || spec.mask_of.is_some() {
                return Err(Error::schema(&spec.name, "mask columns are made by the core, not given"));
            }
            if by_name.insert(spec.name.clone(), spec.id).is_some() {
                return Err(Error::schema(&spec.name, "two columns have this name"));
            }
            columns.push(spec);
        }
        for (key, tree) in [("observation", &config.observation), ("action", &config.action)] {
            check_layout(tree, &by_name, key)?;
        }
        let roles = [by_name["reward"], by_name["terminated"], by_name["truncated"]];
        let meta = serde_json::json!({
            "metadata": config.metadata,
            "layout": {"observation": config.observation, "action": config.action},
            "user": config.user,
            "num_envs": config.num_envs,
            "batched": config.batched,
            "autoreset_mode": config.autoreset_mode.name(),
            "trajcore_version": if config.writer_version.is_empty() { env!("CARGO_PKG_VERSION") } else { &config.writer_version },
        });
        let meta_json = serde_json::to_vec(&meta).map_err(|e| Error::Invalid(format!("metadata: {e}")))?;

        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        crate::writer::files::leftovers::remove_leftovers(dir);
        let recording_id = new_recording_id();
        let shard = ShardWriter::create(dir, recording_id, 0, &meta_json, &columns, config.durability()?)?;
        let uploads = match &config.upload_to {
            Some(url) => Some(Uploads::start(url, dir, config.flush_interval(), recording_id, config.lease_times()?)?),
            None => None,
        };
        let (producer, consumer) = rtrb::RingBuffer::new(config.ring_bytes);
        let shared = Arc::new(Shared::default());
        let setup = WriterSetup {
            config: config.clone(),
            columns: columns.clone(),
            meta_json,
            recording_id,
            shard,
            reward: roles[0],
            faults,
            uploads: uploads.as_ref().map(Uploads::queue),
        };
        let writer = WriterThread::new(setup, consumer, shared.clone())?;
        let thread = std::thread::Builder::new()
            .name("trajcore-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| Error::WriterStopped(format!("cannot start the writer thread: {e}")))?;
        let splitter = Splitter::new(config.num_envs as usize, config.autoreset_mode);
        Ok(Recorder {
            producer,
            shared,
            thread: Some(thread),
            config,
            columns,
            by_name,
            roles,
            tally: None,
            splitter,
            planned: None,
            ops_bytes: Vec::new(),
            ops_bytes_steady: false,
            queued_columns: Vec::new(),
            next_ticket: 1,
            close_sent: None,
            closed: false,
            warned_unrecorded: false,
            owner_pid: crate::process::current_pid(),
            interrupt: None,
            interrupted: None,
            pushed: 0,
            pace: Pace::default(),
            uploads,
            reader_flushes: ReaderFlushes::default(),
            made: std::time::Instant::now(),
        })
    }

    /// Installs a check that waiting calls run every 20 ms (with no lock of the recorder's
    /// caller held): an error it returns ends the wait. A wait for ring space that ends so
    /// refuses its step (see `Splitter::refuse`).
    pub fn set_interrupt_check(&mut self, check: Interrupt) {
        self.interrupt = Some(check);
    }

    /// With `on`, counts the episodes' lengths and returns from now on, for `episodes_ended`
    /// (always empty without it). Call it before the first message, so the counts start with
    /// the episodes.
    pub fn report_ended(&mut self, on: bool) {
        self.tally = on.then(|| Tally::new(self.splitter.num_envs()));
    }

    /// What the interrupt check returned when it ended the last wait (`Error::Interrupted`).
    pub fn take_interrupt(&mut self) -> Option<Box<dyn Any + Send>> {
        self.interrupted.take()
    }

    pub fn config(&self) -> &RecorderConfig {
        &self.config
    }

    pub fn columns(&self) -> &[ColumnSpec] {
        &self.columns
    }

    pub fn column(&self, id: ColumnId) -> &ColumnSpec {
        &self.columns[id as usize]
    }

    /// How values fit column `id`: its type and rows, and a discrete space's bounds where the
    /// configuration gives them (`value_bounds`, which names only fixed columns).
    pub fn fit(&self, id: ColumnId) -> Result<Fit> {
        let column = self.column(id);
        Ok(Fit { bounds: self.config.value_bounds.get(&column.name).cloned(), ..Fit::of(column)? })
    }

    pub fn column_id(&self, name: &str) -> Option<ColumnId> {
        self.by_name.get(name).copied()
    }

    /// Ids of the reward, terminated and truncated columns.
    pub fn role_columns(&self) -> [ColumnId; 3] {
        self.roles
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Adds a column (and its mask column) from now on; earlier rows read as missing.
    pub fn add_column(&mut self, new: NewColumn) -> Result<ColumnId> {
        self.check()?;
        if self.by_name.contains_key(&new.name) {
            return Err(Error::schema(&new.name, "a column of this name exists already"));
        }
        let id = self.columns.len() as ColumnId;
        let mask_name = new.masked.then(|| mask_name(&new.name));
        let chunk_limit = (self.config.chunk_bytes as u64).min(MAX_CHUNK_BYTES);
        let requested = new.codec.chunk_bytes.unwrap_or(chunk_limit);
        let mut spec = ColumnSpec {
            id,
            name: new.name,
            dtype: new.dtype.name().into(),
            shape: new.shape,
            timeline: new.timeline,
            mask_of: None,
            mask: mask_name.as_ref().map(|_| id + 1),
            role: None,
            codec: new.codec,
            widens: new.widens,
        };
        spec.declare_chunk_bytes(requested);
        spec.validate()?;
        let mut specs = vec![spec.clone()];
        if let Some(mask_name) = mask_name {
            if self.by_name.contains_key(&mask_name) {
                return Err(Error::schema(&mask_name, "a column of this name exists already"));
            }
            specs.push(ColumnSpec {
                id: id + 1,
                name: mask_name,
                dtype: "bool".into(),
                shape: vec![],
                timeline: spec.timeline,
                mask_of: Some(id),
                mask: None,
                role: None,
                codec: CodecSpec { chunk_bytes: Some(chunk_limit), ..CodecSpec::default() },
                widens: None,
            });
        }
        let capacity = self.producer.buffer().capacity();
        let mut described = Vec::with_capacity(specs.len());
        for s in &specs {
            let json = serde_json::to_vec(s).map_err(|e| Error::Invalid(e.to_string()))?;
            let what = format!(
                "the description of column '{}'",
                crate::writer::entries::reading::values::short_text(s.name.clone())
            );
            ring_fit::check_fits(&what, control_len(json.len()), capacity)?;
            described.push(json);
        }
        for (s, json) in specs.into_iter().zip(described) {
            self.queued_columns.push(json);
            self.by_name.insert(s.name.clone(), s.id);
            self.columns.push(s);
        }
        spec.id = id;
        Ok(id)
    }

    /// The writer thread's error, if it stopped (or the recorder is closed, or this is another
    /// process than the one that made it).
    pub fn check(&self) -> Result<()> {
        self.check_process()?;
        if self.closed {
            return Err(Error::WriterStopped("the recorder is closed".into()));
        }
        self.check_writer()
    }

    fn check_process(&self) -> Result<()> {
        crate::process::check_owner(self.owner_pid)
    }

    /// The writer thread is alive: not stopped on an error, not gone some other way (a panic is
    /// caught and reported; this also covers a thread that ended without saying why).
    fn check_writer(&self) -> Result<()> {
        if self.shared.dead.load(Ordering::Acquire) {
            return Err(Error::WriterStopped(self.shared.error_message()));
        }
        if self.close_sent.is_none() && self.thread.as_ref().is_none_or(|t| t.is_finished()) {
            // Read the flag again: the thread may have set it just before finishing.
            if self.shared.dead.load(Ordering::Acquire) {
                return Err(Error::WriterStopped(self.shared.error_message()));
            }
            self.shared.fail("the writer thread ended unexpectedly".into());
            return Err(Error::WriterStopped(self.shared.error_message()));
        }
        Ok(())
    }

    /// Waits (sleeping, backing off to 1 ms) while `blocked`; fails when the writer stops or
    /// the interrupt check says so.
    fn wait_while(&mut self, mut blocked: impl FnMut(&Self) -> bool) -> Result<()> {
        let mut pause = Duration::from_micros(20);
        let mut last_poll = std::time::Instant::now();
        while blocked(self) {
            self.check_process()?;
            self.check_writer()?;
            if last_poll.elapsed() >= POLL_EVERY {
                last_poll = std::time::Instant::now();
                if let Some(Err(payload)) = self.interrupt.as_mut().map(|check| check()) {
                    self.interrupted = Some(payload);
                    return Err(Error::Interrupted("the interrupt check ended the wait".into()));
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Steps of envs with no running episode are not recorded: the warning to give the first
    /// time there are some (`skips::unrecorded_warning`), `None` after.
    pub fn unrecorded_warning(&mut self) -> Option<String> {
        if self.warned_unrecorded {
            return None;
        }
        let warning = unrecorded_warning(&self.splitter, false)?;
        self.warned_unrecorded = true;
        Some(warning)
    }

    /// The warnings to give after a step, each once: `unrecorded_warning`, then an upload that
    /// failed (`upload_failure`: it is tried again). Lazy, so a warning the caller turned into
    /// an error leaves the next one for the next step.
    pub fn step_warnings(&mut self) -> impl Iterator<Item = String> + '_ {
        let unrecorded = self.unrecorded_warning();
        unrecorded.into_iter().chain(std::iter::once_with(|| self.upload_failure()).flatten())
    }

    /// The warnings to give at close: the steps not recorded in all, a shard left uncompacted.
    pub fn close_warnings(&self) -> Vec<String> {
        let unrecorded = unrecorded_warning(&self.splitter, self.warned_unrecorded);
        let compaction = self.shared.compaction_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let compaction = compaction.map(|why| format!("trajcore: {why}"));
        let eviction = self.shared.eviction_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let eviction = eviction.map(|why| format!("trajcore: {why}"));
        unrecorded.into_iter().chain(compaction).chain(eviction).collect()
    }

    /// Plans a reset of every env, or of those where `mask` is non-zero, carrying `entries`
    /// (the reset observation and info). Returns the message length to wait for (see `send_planned`).
    pub fn plan_reset(&mut self, entries: &[EntryRef], mask: Option<&[u8]>) -> Result<usize> {
        self.check()?;
        if let Some(m) = mask {
            if m.len() != self.splitter.num_envs() {
                return Err(Error::Invalid(format!(
                    "the reset mask has {} values for {} envs",
                    m.len(),
                    self.splitter.num_envs()
                )));
            }
        }
        self.splitter.plan_reset(mask);
        self.planned = Some(MessageKind::Reset);
        self.planned_len(entries)
    }

    /// Plans a (vector) step from its entries: the terminated and truncated entries decide which
    /// episodes end; a lane they give no value for takes no part in the step. Returns the message
    /// length to wait for (see `send_planned`).
    pub fn plan_step(&mut self, entries: &[EntryRef]) -> Result<usize> {
        self.check()?;
        let [_, terminated, truncated] = self.roles;
        let n = self.splitter.num_envs();
        let only_dense = |column: ColumnId| -> Option<&[u8]> {
            let mut found = entries.iter().filter(|e| e.column == column && e.slot == Slot::Regular);
            match (found.next(), found.next()) {
                (Some(e), None) if e.kind == EntryKind::Dense => Some(e.data),
                _ => None,
            }
        };
        match (only_dense(terminated), only_dense(truncated)) {
            // The bindings' case: one dense byte per lane each.
            (Some(a), Some(b)) => {
                if a.len() != n || b.len() != n {
                    return Err(Error::Invalid(format!(
                        "a step needs one terminated and truncated flag per env ({n})"
                    )));
                }
                let none_done = all_zero(a) && all_zero(b);
                if !(none_done && self.splitter.plan_steady_step()) {
                    self.splitter.plan_step(|lane| Some((a[lane] != 0, b[lane] != 0)));
                }
            }
            _ => {
                let flag = |column: ColumnId, lane: usize| -> Option<bool> {
                    entries
                        .iter()
                        .filter(|e| e.column == column && e.slot == Slot::Regular)
                        .find_map(|e| entry_row(e, lane, 1))
                        .map(|row| row[0] != 0)
                };
                self.splitter.plan_step(|lane| Some((flag(terminated, lane)?, flag(truncated, lane)?)));
            }
        }
        self.planned = Some(MessageKind::Step);
        if let Err(e) = self.check_final_observations(entries) {
            self.planned = None;
            return Err(e);
        }
        self.planned_len(entries)
    }

    /// Same-step autoreset: a sub-env that ended must come with its final observation, or the
    /// episode's last row would be zeros.
    fn check_final_observations(&self, entries: &[EntryRef]) -> Result<()> {
        if self.splitter.planned_steady() {
            return Ok(());
        }
        for (lane, &o) in self.splitter.ops().iter().enumerate() {
            if o & op::FINAL_SLOT == 0 {
                continue;
            }
            let observation_columns = self
                .columns
                .iter()
                .filter(|c| c.timeline == Timeline::Obs && c.mask.is_none() && c.mask_of.is_none() && c.role.is_none());
            for column in observation_columns {
                let row_bytes = column.row_bytes().unwrap_or(0);
                let given = entries
                    .iter()
                    .any(|e| e.column == column.id && e.slot == Slot::Final && entry_row(e, lane, row_bytes).is_some());
                if !given {
                    return Err(Error::schema(
                        &column.name,
                        format!(
                            "sub-env {lane} ended at this step (same-step autoreset) but infos['final_obs'] \
                             has no final observation for it"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The length of the planned message with `entries`; a message that can never fit the ring
    /// is refused (and ends what it touched, see `Splitter::refuse`).
    fn planned_len(&mut self, entries: &[EntryRef]) -> Result<usize> {
        // The steady plan's bytes are the same every step: encode them once.
        if !(self.splitter.planned_steady() && self.ops_bytes_steady) {
            message::ops_bytes(self.splitter.ops(), &mut self.ops_bytes);
            self.ops_bytes_steady = self.splitter.planned_steady();
        }
        let head = MessageHead { kind: MessageKind::Step, env: 0, time_ns: 0, arg: 0, ops: Some(&self.ops_bytes) };
        let len = message::encoded_len(&head, entries);
        let capacity = self.producer.buffer().capacity();
        // Room for the queued AddColumn messages too: they go first.
        let len = len + self.queued_columns.iter().map(|j| control_len(j.len())).sum::<usize>();
        let step_alone = len - self.queued_columns.iter().map(|j| control_len(j.len())).sum::<usize>();
        if let Err(e) = ring_fit::check_fits("one step", step_alone, capacity) {
            return Err(self.refuse_planned(e));
        }
        if len > capacity {
            // The new columns' descriptions and the step fit one at a time: send the descriptions
            // first (a short wait), so that the step alone is left to wait for.
            if let Err(e) = self.send_queued_columns() {
                return Err(self.refuse_planned(e));
            }
            return Ok(step_alone);
        }
        Ok(len)
    }

    /// The planned message could not be sent: its rows are lost, so the episodes it touched end
    /// incomplete. Returns `why`, saying which.
    fn refuse_planned(&mut self, why: Error) -> Error {
        if self.planned.take().is_none() {
            return why;
        }
        let ended = self.splitter.refuse();
        if ended.is_empty() {
            return why;
        }
        let detail = format!("; the running episodes of env(s) {ended:?} were ended as incomplete");
        match why {
            Error::Invalid(m) => Error::Invalid(m + &detail),
            Error::RingFull { capacity, .. } => Error::RingFull { capacity, detail },
            other => other,
        }
    }

    /// Whether a message of `len` bytes fits in the ring right now.
    pub fn fits_now(&self, len: usize) -> bool {
        self.producer.slots() >= len
    }

    /// Whether the planned message of `len` bytes can be sent without waiting: it fits, and the
    /// writer is not too far behind (see `Pace`). Otherwise call `wait_for_space`.
    pub fn ready(&mut self, len: usize) -> bool {
        self.fits_now(len) && self.paced()
    }

    /// Checks the writer's backlog every `PACE_EVERY` steps; false if the next step must wait.
    fn paced(&mut self) -> bool {
        if !self.config.block_when_full || self.planned != Some(MessageKind::Step) {
            return true;
        }
        self.pace.steps += 1;
        if self.pace.steps < PACE_EVERY {
            return true;
        }
        self.pace.steps = 0;
        let now = std::time::Instant::now();
        let handled = self.shared.handled.load(Ordering::Acquire);
        let backlog = self.pushed.saturating_sub(handled);
        match self.pace.last {
            Some((at, before)) => {
                let dt = now.duration_since(at).as_secs_f64();
                if dt >= 0.02 {
                    // Only while the writer had work all along is its progress its speed.
                    if backlog > 0 && handled > before {
                        let rate = (handled - before) as f64 / dt;
                        self.pace.rate = if self.pace.rate == 0.0 { rate } else { 0.7 * self.pace.rate + 0.3 * rate };
                    }
                    self.pace.last = Some((now, handled));
                }
            }
            None => self.pace.last = Some((now, handled)),
        }
        if self.pace.rate == 0.0 {
            return true;
        }
        let half = self.config.flush_interval().as_secs_f64() / 2.0;
        if backlog as f64 > self.pace.rate * half {
            // Wait until half of that is left.
            let allowed = (self.pace.rate * half / 2.0) as u64;
            self.pace.wait_for = Some(self.pushed.saturating_sub(allowed));
            return false;
        }
        true
    }

    fn pace_blocks(&self) -> bool {
        self.pace.wait_for.is_some_and(|n| self.shared.handled.load(Ordering::Acquire) < n)
    }

    /// Waits until `len` bytes are free for the planned message (and, for a step, until the
    /// writer is no longer too far behind), or fails if the writer stopped or blocking is off
    /// (then the planned message is refused). Bindings call this with the GIL released.
    pub fn wait_for_space(&mut self, len: usize) -> Result<()> {
        let started = std::time::Instant::now();
        let waited = self.wait_for_space_inner(len);
        self.shared.timelog.add_producer_wait(started.elapsed());
        waited
    }

    fn wait_for_space_inner(&mut self, len: usize) -> Result<()> {
        if self.pace_blocks() {
            self.shared.backlog_waits.fetch_add(1, Ordering::Relaxed);
            self.wait_while(|me| me.pace_blocks()).map_err(|e| self.refuse_planned(e))?;
        }
        self.pace.wait_for = None;
        if self.fits_now(len) {
            return Ok(());
        }
        if !self.config.block_when_full {
            let e = Error::RingFull { capacity: self.producer.buffer().capacity(), detail: String::new() };
            return Err(self.refuse_planned(e));
        }
        self.wait_until_fits(len).map_err(|e| self.refuse_planned(e))
    }

    /// Waits, whatever `block_when_full` says, until `len` bytes are free or the writer stops.
    fn wait_until_fits(&mut self, len: usize) -> Result<()> {
        if self.fits_now(len) {
            return Ok(());
        }
        self.shared.ring_waits.fetch_add(1, Ordering::Relaxed);
        self.wait_while(|me| !me.fits_now(len))
    }

    /// Sends the queued AddColumn messages (waiting for room if needed).
    fn send_queued_columns(&mut self) -> Result<()> {
        if self.queued_columns.is_empty() {
            return Ok(());
        }
        for json in std::mem::take(&mut self.queued_columns) {
            let entries = [control_entry(&json, 0)];
            let head = MessageHead { kind: MessageKind::AddColumn, env: 0, time_ns: now_ns(), arg: 0, ops: None };
            let len = message::encoded_len(&head, &entries);
            ring_fit::check_fits("a column description", len, self.producer.buffer().capacity())?;
            self.wait_until_fits(len)?;
            self.push(&head, &entries)?;
        }
        Ok(())
    }

    /// Sends the planned message with `entries` (the same entries it was planned with, after
    /// `wait_for_space` with the length the plan returned) and makes its plan the sub-envs'
    /// state. `time_ns` 0 lets the writer thread stamp it (the clock is not free on the step path).
    pub fn send_planned(&mut self, entries: &[EntryRef], time_ns: u64) -> Result<()> {
        let Some(kind) = self.planned else {
            return Err(Error::Invalid("internal error: no message was planned".into()));
        };
        if let Err(e) = self.send_queued_columns() {
            return Err(self.refuse_planned(e));
        }
        let ops = std::mem::take(&mut self.ops_bytes);
        let head = MessageHead { kind, env: 0, time_ns, arg: 0, ops: Some(&ops) };
        let pushed = self.push(&head, entries);
        self.ops_bytes = ops;
        match pushed {
            Ok(()) => {
                self.planned = None;
                self.tally_sent(entries);
                self.splitter.commit();
                Ok(())
            }
            Err(e) => Err(self.refuse_planned(e)),
        }
    }

    /// Counts the sent message's ops (before `commit`, while they are the splitter's plan), with
    /// the rewards of its `entries`.
    fn tally_sent(&mut self, entries: &[EntryRef]) {
        let Some(tally) = self.tally.as_mut() else { return };
        let reward = self.roles[0];
        let is_reward = |e: &EntryRef| e.column == reward && e.slot == Slot::Regular;
        // Found once per message: each lane then starts at the reward's entries, not at the top.
        let from = entries.iter().position(is_reward).unwrap_or(entries.len());
        let entries = &entries[from..];
        let reward_of = |lane: usize| -> f64 {
            let mut given = entries.iter().filter(|e| is_reward(e));
            given
                .find_map(|e| entry_row(e, lane, 8))
                .map_or(0.0, |b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        };
        tally.apply(self.splitter.ops(), self.splitter.planned_steady(), reward_of);
    }

    /// The episodes the last message sent ended complete (a step's, in env order), with the
    /// length and return their summaries in the file hold.
    pub fn episodes_ended(&self) -> &[EpisodeEnd] {
        self.tally.as_ref().map_or(&[], Tally::ended)
    }

    /// Copies a message into the ring if it fits now (callers wait for `message::encoded_len`
    /// bytes first), else fails with `RingFull`.
    fn push(&mut self, head: &MessageHead, entries: &[EntryRef]) -> Result<()> {
        // Callers planned or waited after `check`: not checked again on the step path.
        let len = message::encoded_len(head, entries);
        let capacity = self.producer.buffer().capacity();
        let mut chunk =
            self.producer.write_chunk_uninit(len).map_err(|_| Error::RingFull { capacity, detail: String::new() })?;
        let (first, second) = chunk.as_mut_slices();
        let mut at = 0usize;
        let mut copy = |src: &[u8]| {
            let mut src = src;
            while !src.is_empty() {
                let dst = if at < first.len() { &mut first[at..] } else { &mut second[at - first.len()..] };
                let n = src.len().min(dst.len());
                src[..n].copy_to_uninit(&mut dst[..n]);
                src = &src[n..];
                at += n;
            }
        };
        // Headers are tiny: gather them in a stack buffer so each costs no call into memmove.
        let mut staged = [0u8; 256];
        let mut staged_len = 0usize;
        message::encode(head, entries, len, |bytes| {
            if bytes.len() <= 64 {
                if staged_len + bytes.len() > staged.len() {
                    copy(&staged[..staged_len]);
                    staged_len = 0;
                }
                staged[staged_len..staged_len + bytes.len()].copy_from_slice(bytes);
                staged_len += bytes.len();
            } else {
                copy(&staged[..staged_len]);
                staged_len = 0;
                copy(bytes);
            }
        });
        copy(&staged[..staged_len]);
        assert_eq!(at, len, "encode wrote a different length than encoded_len computed");
        self.pushed += 1;
        // SAFETY: `encode` wrote exactly `len` bytes (checked just above), so every slot of the
        // chunk is initialized.
        unsafe { chunk.commit_all() };
        self.prefetch_next(len);
        Ok(())
    }

    /// Asks the CPU to bring the ring's next `len` bytes (the next message, if it is like this
    /// one) into this core's cache for writing, while the env steps. The writer thread read
    /// them last, a ring ago, so they sit in another core's cache or L3: copying the next
    /// message into them would wait for each line (measured: a third of a CartPole step call).
    /// A hint only: nothing is written or committed.
    fn prefetch_next(&mut self, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
            const LINE: usize = 64;
            let len = len.min(PREFETCH_MAX).min(self.producer.slots());
            let Ok(mut chunk) = self.producer.write_chunk_uninit(len) else { return };
            let (first, second) = chunk.as_mut_slices();
            for part in [first, second] {
                for at in (0..part.len()).step_by(LINE) {
                    // SAFETY: a prefetch of an address inside the ring's buffer; it reads and
                    // writes nothing.
                    unsafe { _mm_prefetch::<_MM_HINT_ET0>(part[at..].as_ptr().cast()) };
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = len;
    }

    /// A small control message, with the pending lane ops. It waits for ring space whatever
    /// `block_when_full` says: control messages are rare and small.
    fn push_control(&mut self, kind: MessageKind, env: u32, arg: u64, data: &[u8], time_ns: u64) -> Result<()> {
        self.send_queued_columns()?;
        let entries = [control_entry(data, env)];
        let with_ops = matches!(kind, MessageKind::Flush | MessageKind::Close | MessageKind::Ops);
        if with_ops {
            self.splitter.plan_control();
            message::ops_bytes(self.splitter.ops(), &mut self.ops_bytes);
            self.ops_bytes_steady = false;
        }
        let ops = std::mem::take(&mut self.ops_bytes);
        let head = MessageHead { kind, env, time_ns, arg, ops: with_ops.then_some(&ops[..]) };
        let len = message::encoded_len(&head, &entries);
        let what = match kind {
            MessageKind::SetMetadata => "episode metadata",
            MessageKind::SetDefaults => "episode defaults",
            _ => "a control message",
        };
        let pushed = ring_fit::check_fits(what, len, self.producer.buffer().capacity())
            .and_then(|()| self.wait_until_fits(len))
            .and_then(|()| self.push(&head, &entries));
        self.ops_bytes = ops;
        pushed?;
        if let (true, Some(tally)) = (with_ops, self.tally.as_mut()) {
            tally.apply(self.splitter.ops(), false, |_| 0.0);
        }
        match kind {
            MessageKind::Flush => self.splitter.commit_flush(),
            MessageKind::Close | MessageKind::Ops => self.splitter.commit(),
            _ => {}
        }
        Ok(())
    }

    /// Merges a JSON object into the metadata of an episode of `env`: the one that ended at the
    /// last step while no step or reset followed, else the running one.
    ///
    /// Every call that names an env takes its index as the caller gave it (Python's int) and
    /// checks it (`env_index`), so the bindings only forward it.
    pub fn set_episode_metadata(&mut self, env: i64, metadata_json: &str) -> Result<()> {
        self.check()?;
        let env = self.env_index(env)?;
        check_json_object(metadata_json, "episode metadata")?;
        let target = self.splitter.metadata_target(env as usize).map_err(|r| refusal(env, r, "set metadata of"))?;
        let held = (target == Target::Held) as u64;
        self.push_control(MessageKind::SetMetadata, env, held, metadata_json.as_bytes(), now_ns())
    }

    /// The running episode of `env` is a part whose start is lost (a copy of a part listed on
    /// its own, see `convert`): when its last step ends it, it is written incomplete, keeping its
    /// terminated/truncated flags, instead of as a whole episode.
    ///
    /// Errors: `OutOfRange`, `Invalid` (`env` has no running episode), and those of a stopped writer.
    pub fn mark_start_lost(&mut self, env: i64) -> Result<()> {
        self.check()?;
        let env = self.env_index(env)?;
        if self.splitter.metadata_target(env as usize) != Ok(Target::Open) {
            return Err(Error::Invalid(format!("env {env} has no running episode whose start could be lost")));
        }
        self.push_control(MessageKind::StartLost, env, 0, &[], now_ns())
    }

    /// Merges a JSON object into the metadata every episode that begins after this call starts
    /// with, in every env (the policy behind the episodes); running episodes keep theirs.
    pub fn set_episode_defaults(&mut self, metadata_json: &str) -> Result<()> {
        self.check()?;
        check_json_object(metadata_json, "episode defaults")?;
        self.push_control(MessageKind::SetDefaults, 0, 0, metadata_json.as_bytes(), now_ns())
    }

    /// Drops an episode of `env`: the one that ended at the last step while no step or reset
    /// followed, else the running one (the env's rows are then ignored until that episode ends).
    pub fn discard(&mut self, env: i64) -> Result<()> {
        self.check()?;
        let env = self.env_index(env)?;
        self.splitter.discard(env as usize).map_err(|r| refusal(env, r, "discard"))
    }

    /// Ends running episodes as incomplete (one env, or all with `None`); the env's rows are
    /// ignored until its env ends that episode. Takes effect with the next message.
    pub fn abort(&mut self, env: Option<i64>) -> Result<()> {
        let env = env.map(|e| self.env_index(e)).transpose()?;
        self.planned = None;
        self.splitter.abort(env.map(|e| e as usize));
        Ok(())
    }

    /// Sends the pending lane ops (`discard`, `abort`) now instead of with the next message, so
    /// they take effect at `time_ns` (an aborted episode's end time).
    pub fn send_ops(&mut self, time_ns: u64) -> Result<()> {
        self.check()?;
        self.push_control(MessageKind::Ops, 0, 0, &[], if time_ns == 0 { now_ns() } else { time_ns })
    }

    /// An env index as the caller gave it, checked against the env count.
    ///
    /// Errors: `OutOfRange`.
    pub fn env_index(&self, env: i64) -> Result<u32> {
        match u32::try_from(env) {
            Ok(e) if e < self.config.num_envs => Ok(e),
            _ => Err(Error::OutOfRange(format!(
                "env_index {env} is out of range: this recorder has {} envs",
                self.config.num_envs
            ))),
        }
    }

    /// Blocks until everything pushed so far is written (and synced, if the durability says so),
    /// running episodes listed up to it (see `Episodes::progress_parts`).
    pub fn flush(&mut self) -> Result<()> {
        self.check()?;
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.push_control(MessageKind::Flush, 0, ticket, &[], now_ns())?;
        self.wait_ticket(ticket)
    }

    /// What a refresh of this directory in this process needs (see `reader_flush`): asks for a
    /// flush every 50 ms and waits only when no written flush covers the steps 100 ms old.
    pub fn flush_for_readers(&mut self) -> Result<()> {
        self.check()?;
        let at_ns = self.made.elapsed().as_nanos() as u64;
        let flushed = self.shared.flushed.load(Ordering::Acquire);
        let wait_for = match self.reader_flushes.decide(at_ns, flushed) {
            ReaderFlush::Nothing => return Ok(()),
            ReaderFlush::WaitFor(ticket) => ticket,
            decision @ (ReaderFlush::Request | ReaderFlush::RequestAndWait) => {
                let ticket = self.next_ticket;
                self.next_ticket += 1;
                self.push_control(MessageKind::Flush, 0, ticket, &[], now_ns())?;
                self.reader_flushes.requested(Requested { ticket, at_ns }, flushed);
                if decision == ReaderFlush::Request {
                    return Ok(());
                }
                ticket
            }
        };
        self.wait_ticket(wait_for)
    }

    fn wait_ticket(&mut self, ticket: u64) -> Result<()> {
        self.wait_while(|me| me.shared.flushed.load(Ordering::Acquire) < ticket)
    }

    /// Writes incomplete episodes, the index and the end record, and stops the writer thread.
    /// Idempotent; reports the writer thread's error if it failed at any point. A close whose
    /// wait was interrupted can be called again to finish waiting.
    pub fn close(&mut self) -> Result<()> {
        self.check_process()?;
        if self.closed {
            return Ok(());
        }
        if self.close_sent.is_none() && !self.shared.dead.load(Ordering::Acquire) {
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            // Failing here means the writer stopped: reported below.
            if self.push_control(MessageKind::Close, 0, ticket, &[], now_ns()).is_ok() {
                self.close_sent = Some(ticket);
            }
        }
        if let Some(ticket) = self.close_sent {
            // Any other failure means the writer stopped: reported below.
            if let Err(Error::Interrupted(why)) = self.wait_ticket(ticket) {
                return Err(Error::Interrupted(why));
            }
        }
        self.closed = true;
        let joined = self.thread.take().map(|t| t.join());
        if let Some(Err(_)) = joined {
            self.shared.fail("the writer thread panicked".into());
        }
        if self.shared.dead.load(Ordering::Acquire) {
            return Err(Error::WriterStopped(self.shared.error_message()));
        }
        // Every shard is sealed now: the uploads put up what is left, whole.
        let Some(uploads) = self.uploads.as_mut() else { return Ok(()) };
        let closed = uploads.close();
        // Deletions the store refused past the close's retries: kept, and said once at close.
        if let Some(left) = uploads.deletions_left() {
            self.shared.eviction_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(left);
        }
        closed
    }

    /// The first upload failure since the last call, once, for the caller to warn of (the upload
    /// is tried again); `None` when the recording does not go to a store or nothing failed.
    pub fn upload_failure(&self) -> Option<String> {
        self.uploads.as_ref().and_then(Uploads::failure)
    }

    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            steps: s.steps.load(Ordering::Relaxed),
            episodes: s.episodes.load(Ordering::Relaxed),
            bytes_raw: s.bytes_raw.load(Ordering::Relaxed),
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            ring_capacity: self.producer.buffer().capacity() as u64,
            ring_waits: s.ring_waits.load(Ordering::Relaxed),
            backlog_waits: s.backlog_waits.load(Ordering::Relaxed),
            shards_compacted: s.shards_compacted.load(Ordering::Relaxed),
            bytes_compacted: s.bytes_compacted.load(Ordering::Relaxed),
            compaction_error: s.compaction_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            evicted_steps: s.evicted_steps.load(Ordering::Relaxed),
            eviction_error: s.eviction_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            steps_not_recorded: self.splitter.unrecorded_total(),
            values_not_recorded: Default::default(),
            timelog: self.timelog(),
            bytes_uploaded: self.uploads.as_ref().map(Uploads::bytes_uploaded),
        }
    }

    /// The writer's timelog so far: one sample per second of recording, oldest first (see
    /// `timelog`; neighbours are merged once there are `timelog::MAX_SAMPLES`).
    pub fn timelog(&self) -> Vec<super::timelog::Sample> {
        self.shared.timelog.samples()
    }

    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.shared.shard_paths.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.check_process().is_err() {
            // A forked child's copy: the writer thread and the file belong to the parent.
            if let Some(thread) = self.thread.take() {
                std::mem::forget(thread);
            }
            return;
        }
        self.interrupt = None; // no Python to ask while dropping
        let _ = self.close();
    }
}

/// Whether every byte is 0, eight at a time.
fn all_zero(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    words.all(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// The bytes of `lane`'s row in an entry of rows of `row_bytes` bytes (fixed-size columns), if
/// the entry gives that lane a value.
fn entry_row<'a>(e: &EntryRef<'a>, lane: usize, row_bytes: usize) -> Option<&'a [u8]> {
    let row = match e.kind {
        EntryKind::Dense => lane,
        EntryKind::Masked if e.mask.is_some_and(|m| m.get(lane) == Some(&1)) => lane,
        EntryKind::PerEnv if e.env as usize == lane => 0,
        EntryKind::Masked | EntryKind::PerEnv => return None,
    };
    e.data.get(row * row_bytes..(row + 1) * row_bytes)
}

fn control_entry(data: &[u8], env: u32) -> EntryRef<'_> {
    EntryRef { column: 0, kind: EntryKind::Dense, slot: Slot::Regular, env, mask: None, data }
}

/// The length of a control message (no ops) carrying `data_len` bytes.
fn control_len(data_len: usize) -> usize {
    message::HEADER_LEN + message::ENTRY_HEADER_LEN + data_len
}

fn refusal(env: u32, why: Refusal, what: &str) -> Error {
    Error::Invalid(match why {
        Refusal::AlreadyFlushed => format!(
            "cannot {what} the episode env {env} ended at the last step: flush() already wrote it \
             (call it before flush())"
        ),
        Refusal::NoEpisode => format!("cannot {what} an episode of env {env}: none is running or just ended"),
    })
}

/// `info/episode/r` -> `info/episode/_r`.
pub fn mask_name(name: &str) -> String {
    match name.rsplit_once('/') {
        Some((parent, leaf)) => format!("{parent}/_{leaf}"),
        None => format!("_{name}"),
    }
}

/// Every leaf of a layout tree must name a column.
fn check_layout(tree: &serde_json::Value, columns: &HashMap<String, ColumnId>, what: &str) -> Result<()> {
    crate::layout::Layout::parse(tree, &|name| columns.contains_key(name))
        .map(drop)
        .map_err(|why| Error::schema(what, format!("layout: {why}")))
}

/// Refuses (`Invalid`) JSON that is not an object: what episode metadata must be.
fn check_json_object(json: &str, what: &str) -> Result<()> {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(Error::Invalid(format!("{what} must be a JSON object"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::entries::reading::bounds::IntBounds;

    #[test]
    fn fixed_columns_fit_within_their_configured_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({
            "columns": [
                {"id": 0, "name": "obs/x", "dtype": "float32", "shape": [2], "timeline": "obs"},
                {"id": 0, "name": "action/a", "dtype": "int64", "shape": [], "timeline": "step"},
            ],
            "observation": {"leaf": "obs/x"},
            "action": {"leaf": "action/a"},
            "value_bounds": {"action/a": {"low": [0], "high": [2], "space": "Discrete(3)"}},
        });
        let rec = Recorder::create(dir.path(), RecorderConfig::from_json(&config.to_string()).unwrap()).unwrap();
        let (obs, action) = (rec.column_id("obs/x").unwrap(), rec.column_id("action/a").unwrap());
        let bounds = IntBounds { low: vec![0], high: vec![2], space: "Discrete(3)".into() };
        // (the column, how its values fit)
        let table = [
            (obs, Fit { dtype: DType::F32, shape: vec![2], bounds: None }),
            (action, Fit { dtype: DType::I64, shape: vec![], bounds: Some(bounds) }),
        ];
        for (id, want) in table {
            assert_eq!(rec.fit(id).unwrap(), want, "{id}");
        }
    }
}
