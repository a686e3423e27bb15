//! The background writer thread: takes messages off the ring, applies each lane's op (decided by
//! `autoreset` on the caller's side) to its rows and episodes, seals column chunks (compressing
//! them here, off the caller's thread) and appends records to the shard, rolling over to a new
//! shard past the size limit.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::autoreset::{op, row_sources, LaneOp, RowKind};
use super::compact;
use super::config::{Durability, RecorderConfig};
use super::lane::{ChunkLimit, ColumnBuffer, EndedEpisode, Lane, OpenEpisode};
use super::message::{self, EntryKind, EntryRef, Message, MessageKind, Slot};
use super::release::FreedPages;
use super::shard::{now_ns, ShardWriter};
use super::timelog::{self, Clock, Stage};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::chunks::{PendingChunk, CHUNK_REPEAT};
use crate::format::codec::Encoder;
use crate::format::episode::{
    EpisodeSummary, FLAG_COMPLETE, FLAG_CONTINUES, FLAG_DISCARDED, FLAG_TERMINATED, FLAG_TRUNCATED,
};
use crate::format::metrics::{self, MetricsAcc};
use crate::schema::{ColumnId, ColumnSpec, Timeline};

const IDLE_SLEEP: Duration = Duration::from_millis(1);
/// Timelog samples (about a second each) stored per Timelog record.
const TIMELOG_BATCH: usize = 60;

/// State the caller's thread and the writer thread share; everything here is cheap to poll.
#[derive(Default)]
pub struct Shared {
    /// Set when the writer thread stopped on an error; `error` says why.
    pub dead: AtomicBool,
    pub error: Mutex<Option<String>>,
    /// The last flush ticket the writer completed.
    pub flushed: AtomicU64,
    pub steps: AtomicU64,
    pub episodes: AtomicU64,
    pub bytes_raw: AtomicU64,
    pub bytes_written: AtomicU64,
    pub ring_waits: AtomicU64,
    /// Steps that waited because the writer was more than the pacing limit behind.
    pub backlog_waits: AtomicU64,
    /// Messages taken off the ring so far (the producer paces itself by how fast this moves).
    pub handled: AtomicU64,
    pub shard_paths: Mutex<Vec<PathBuf>>,
    /// Closed shards rewritten without the flush timer's small chunks, and the bytes that saved.
    pub shards_compacted: AtomicU64,
    pub bytes_compacted: AtomicU64,
    /// Why a closed shard could not be compacted (it was left as it was, every row in it).
    pub compaction_error: Mutex<Option<String>>,
    /// Per-second timings of the writer thread (see `timelog`).
    pub timelog: timelog::Live,
}

impl Shared {
    pub fn fail(&self, why: String) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(why);
        self.dead.store(true, Ordering::Release);
    }

    pub fn error_message(&self) -> String {
        let slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.clone().unwrap_or_else(|| "the writer thread has stopped".into())
    }
}

pub struct WriterThread {
    config: RecorderConfig,
    durability: Durability,
    columns: Vec<ColumnSpec>,
    /// Per column: bytes a row (None for str), cached because the step path asks per row.
    row_bytes: Vec<Option<usize>>,
    /// Per column: when a lane's buffered rows seal a chunk.
    chunk_limit: Vec<ChunkLimit>,
    /// Per column: its dtype if episode metrics are kept for it (numeric scalar, masked: info
    /// entries and custom data).
    metric_dtype: Vec<Option<DType>>,
    /// Value (non-mask) columns of the obs and of the step timeline: what a row of each holds.
    row_columns: [Vec<usize>; 2],
    meta_json: Vec<u8>,
    recording_id: [u8; 16],
    /// The recording's directory, where new shards go.
    dir: PathBuf,
    shard_seq: u64,
    /// Set once closing starts: no more rollover.
    closing: bool,
    shard: Option<ShardWriter>,
    lanes: Vec<Lane>,
    /// Ended episodes no call can change any more, in the order they ended: written next cycle.
    pending: VecDeque<EndedEpisode>,
    /// The number the next episode to start gets.
    next_episode_id: u64,
    reward: ColumnId,
    /// Per column: whether a reset gave it a value (same-step autoreset routing, see
    /// `autoreset::row_sources`).
    seen_at_reset: Vec<bool>,
    /// Taken by `run_inner` for the thread's lifetime.
    consumer: Option<rtrb::Consumer<u8>>,
    shared: Arc<Shared>,
    /// Entries of the current message by column and slot.
    lookup: Vec<[Vec<u32>; 2]>,
    str_offsets: Vec<Vec<usize>>,
    seal_wanted: bool,
    /// Timelog samples not yet in the file.
    timelog_unwritten: Vec<timelog::Sample>,
    encoder: Encoder,
    /// Value bytes taken since the counter in `shared` was last updated (one atomic per message).
    raw_bytes_seen: u64,
    /// Messages taken off the ring so far.
    messages_handled: u64,
    /// Stage times of the timelog sample being filled.
    clock: Clock,
    freed_pages: FreedPages,
    /// Threads compacting closed shards (`compact_closed`).
    compactions: Vec<std::thread::JoinHandle<()>>,
}

pub struct WriterSetup {
    pub config: RecorderConfig,
    pub columns: Vec<ColumnSpec>,
    pub meta_json: Vec<u8>,
    pub recording_id: [u8; 16],
    pub shard: ShardWriter,
    pub reward: ColumnId,
}

impl WriterThread {
    pub fn new(setup: WriterSetup, consumer: rtrb::Consumer<u8>, shared: Arc<Shared>) -> Result<Self> {
        let durability = setup.config.durability()?;
        let lanes = (0..setup.config.num_envs).map(Lane::new).collect();
        shared.shard_paths.lock().unwrap_or_else(|p| p.into_inner()).push(setup.shard.path().to_path_buf());
        let mut me = WriterThread {
            durability,
            columns: Vec::new(),
            row_bytes: Vec::new(),
            chunk_limit: Vec::new(),
            metric_dtype: Vec::new(),
            row_columns: [Vec::new(), Vec::new()],
            meta_json: setup.meta_json,
            recording_id: setup.recording_id,
            dir: setup.shard.path().parent().map(PathBuf::from).unwrap_or_default(),
            shard_seq: 0,
            closing: false,
            shard: Some(setup.shard),
            lanes,
            pending: VecDeque::new(),
            next_episode_id: 0,
            reward: setup.reward,
            seen_at_reset: Vec::new(),
            consumer: Some(consumer),
            shared,
            lookup: Vec::new(),
            str_offsets: Vec::new(),
            seal_wanted: false,
            timelog_unwritten: Vec::new(),
            raw_bytes_seen: 0,
            messages_handled: 0,
            encoder: Encoder::default(),
            clock: Clock::new(now_ns()),
            freed_pages: FreedPages::default(),
            compactions: Vec::new(),
            config: setup.config,
        };
        for spec in setup.columns {
            me.install_column(spec);
        }
        Ok(me)
    }

    /// Runs until a Close message has been handled or an error stops it. A panic is caught and
    /// reported like an error, so the caller's waits end and say why.
    pub fn run(mut self) {
        let shared = self.shared.clone();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_inner())) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => shared.fail(e.to_string()),
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into());
                shared.fail(format!("the writer thread panicked: {why}"));
            }
        }
    }

    fn run_inner(&mut self) -> Result<()> {
        let mut consumer = self.consumer.take().ok_or_else(|| Error::WriterStopped("the ring is gone".into()))?;
        let interval = self.config.flush_interval();
        let mut next_cycle = Instant::now() + interval;
        let mut scratch = Vec::new();
        let capacity = consumer.buffer().capacity().max(1) as f64;
        loop {
            let mut handled = 0;
            self.clock.note_ring_fill(consumer.slots() as f64 / capacity);
            while handled < 1024 {
                let Some(len) = next_message_len(&mut consumer) else { break };
                let (started, nested) = (Instant::now(), self.clock.nested());
                // The producer commits whole messages, so all of it is there.
                let chunk = consumer.read_chunk(len).map_err(|e| Error::WriterStopped(format!("ring: {e}")))?;
                let (a, b) = chunk.as_slices();
                // Decode in place unless the message wraps around the ring's end (rare).
                let bytes: &[u8] = if b.is_empty() {
                    a
                } else {
                    scratch.clear();
                    scratch.extend_from_slice(a);
                    scratch.extend_from_slice(b);
                    &scratch
                };
                handled += 1;
                let msg = message::decode(bytes, self.lanes.len()).map_err(Error::WriterStopped)?;
                let closed = self.handle(msg)?;
                self.messages_handled += 1;
                self.shared.handled.store(self.messages_handled, Ordering::Release);
                chunk.commit_all();
                if closed {
                    return Ok(()); // its last timelog sample was taken in `close`
                }
                // What the message sealed or wrote (a flush) is timed in its own stage.
                let copied = started.elapsed().saturating_sub(self.clock.nested().saturating_sub(nested));
                self.clock.add(Stage::Copy, copied);
                self.shared.bytes_raw.fetch_add(std::mem::take(&mut self.raw_bytes_seen), Ordering::Relaxed);
                if self.seal_wanted {
                    self.write_chunks(false)?;
                }
                if Instant::now() >= next_cycle {
                    break;
                }
            }
            if Instant::now() >= next_cycle {
                self.cycle()?;
                next_cycle = Instant::now() + interval;
            }
            if self.clock.due(Instant::now()) {
                self.end_timelog_sample(consumer.slots() as f64 / capacity);
            }
            if handled == 0 {
                if consumer.is_abandoned() && consumer.is_empty() {
                    // The recorder was dropped without close (its owner crashed): finish the file.
                    self.close()?;
                    return Ok(());
                }
                // Sleep a whole millisecond: the ring holds what arrives meanwhile, and waking
                // per message would steal the env loop's core on small machines.
                self.clock.time(Stage::Idle, || std::thread::sleep(IDLE_SLEEP));
            }
        }
    }

    /// Ends the timelog sample being filled and publishes it.
    fn end_timelog_sample(&mut self, ring_fill: f64) {
        let s = &self.shared;
        let totals = timelog::Totals {
            messages: self.messages_handled,
            steps: s.steps.load(Ordering::Relaxed),
            bytes_raw: s.bytes_raw.load(Ordering::Relaxed),
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            ring_waits: s.ring_waits.load(Ordering::Relaxed),
            backlog_waits: s.backlog_waits.load(Ordering::Relaxed),
            producer_wait_ns: s.timelog.producer_wait_ns.load(Ordering::Relaxed),
        };
        let sample = self.clock.close(Instant::now(), now_ns(), totals, ring_fill);
        self.on_timelog_sample(sample);
    }

    /// Every timelog sample passes here once: it is published live (`Recorder::timelog`,
    /// `stats()["timelog"]` in Python) and, unless the config says not to, kept for the file.
    fn on_timelog_sample(&mut self, sample: timelog::Sample) {
        self.shared.timelog.push(sample);
        if self.config.timelog {
            self.timelog_unwritten.push(sample);
        }
    }

    /// The samples not in the file yet go in a Timelog record, about once a minute (a record per
    /// sample would cost a header each) and always before a shard is finished.
    fn append_timelog(&mut self, now: bool) {
        if self.timelog_unwritten.len() >= TIMELOG_BATCH || (now && !self.timelog_unwritten.is_empty()) {
            if let Some(shard) = self.shard.as_mut() {
                let samples = std::mem::take(&mut self.timelog_unwritten);
                self.clock.time(Stage::Encode, || shard.append_timelog(&samples));
            }
        }
    }

    /// Applies one message; true when it was Close.
    fn handle(&mut self, mut msg: Message) -> Result<bool> {
        self.inject_faults(&msg);
        if msg.time_ns == 0 {
            // The caller leaves the clock to us (it costs the step path); we lag it by ~1 ms.
            msg.time_ns = now_ns();
        }
        match msg.kind {
            MessageKind::Step | MessageKind::Reset => {
                self.index_entries(&msg);
                if msg.kind == MessageKind::Reset {
                    self.note_reset_columns(&msg);
                }
                self.apply_ops(msg.ops, Some(&msg), true)?;
                if msg.kind == MessageKind::Step {
                    self.shared.steps.fetch_add(1, Ordering::Relaxed);
                }
            }
            MessageKind::AddColumn => {
                let entry = msg.entries.first().ok_or_else(|| Error::WriterStopped("AddColumn without spec".into()))?;
                let spec: ColumnSpec = serde_json::from_slice(entry.data)
                    .map_err(|e| Error::WriterStopped(format!("column spec: {e}")))?;
                if let Some(shard) = self.shard.as_mut() {
                    shard.add_column(&spec)?;
                }
                self.install_column(spec);
            }
            MessageKind::SetMetadata => {
                let entry = msg.entries.first().ok_or_else(|| Error::WriterStopped("metadata without JSON".into()))?;
                let Ok(Value::Object(update)) = serde_json::from_slice::<Value>(entry.data) else {
                    return Err(Error::WriterStopped("episode metadata is not a JSON object".into()));
                };
                self.set_metadata(msg.env as usize, msg.arg == 1, update)?;
            }
            MessageKind::Ops => {
                // Time only: no rows, and what ended at the last step stays reachable.
                let timed = Message { entries: Vec::new(), ..msg };
                self.apply_ops(timed.ops, Some(&timed), false)?;
            }
            MessageKind::Flush => {
                self.apply_ops(msg.ops, None, true)?;
                self.cycle()?;
                self.shared.flushed.store(msg.arg, Ordering::Release);
            }
            MessageKind::Close => {
                self.apply_ops(msg.ops, None, true)?;
                self.close()?;
                self.shared.flushed.store(msg.arg, Ordering::Release);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Test-only faults from the config (`test_faults`): a panic at the n-th step, a slow writer.
    fn inject_faults(&self, msg: &Message) {
        let faults = &self.config.test_faults;
        if msg.kind == MessageKind::Step {
            let steps = self.shared.steps.load(Ordering::Relaxed) + 1;
            if faults.panic_at_step == Some(steps) {
                panic!("test fault: panic at step {steps}");
            }
            if faults.slow_step_ms > 0 {
                std::thread::sleep(Duration::from_millis(faults.slow_step_ms));
            }
        }
    }

    /// Applies every lane's op (decided by `autoreset::Splitter` on the caller's side) in the
    /// documented order, each phase across all lanes so episodes are listed in the order they
    /// ended. `msg` carries the rows (Step, Reset); `settle` writes what the previous row
    /// message ended (Step, Reset, Flush, Close: the caller counts on exactly these).
    fn apply_ops(&mut self, ops: Option<&[u8]>, msg: Option<&Message>, settle: bool) -> Result<()> {
        let n = self.lanes.len();
        let lane_op = |lane| message::lane_op(ops, lane);
        for lane in 0..n {
            let o = lane_op(lane);
            if o & !op::ALL != 0 || (msg.is_none() && o & (op::STEP | op::BEGIN) != 0) {
                return Err(internal(lane, o, "invalid op"));
            }
            if o & op::DROP_HELD != 0 {
                self.lanes[lane].held = None;
            }
        }
        if settle {
            for lane in 0..n {
                if let Some(ended) = self.lanes[lane].held.take() {
                    self.pending.push_back(ended);
                }
            }
            // Nothing is held now: the moment to start a new shard, before this message's rows.
            if msg.is_some() {
                self.roll_over_if_full()?;
            }
        }
        let time_ns = msg.map_or_else(now_ns, |m| m.time_ns);
        for lane in 0..n {
            let o = lane_op(lane);
            if o & op::DROP_OPEN != 0 {
                if let Some(dropped) = self.lanes[lane].open.take() {
                    if dropped.parts_written {
                        // Its earlier parts are in finished shards: say it is gone.
                        let notice = self.summary_of(lane, &dropped, FLAG_DISCARDED, time_ns);
                        self.pending.push_back(EndedEpisode {
                            summary: notice,
                            metadata: Map::new(),
                            metrics: Vec::new(),
                        });
                    }
                }
            }
            if o & op::END_OPEN != 0 {
                if let Some(ended) = self.end_open(lane, 0, time_ns) {
                    self.pending.push_back(ended);
                }
            }
        }
        let Some(msg) = msg else { return Ok(()) };
        for lane in 0..n {
            let o = lane_op(lane);
            if o & op::STEP != 0 {
                if self.lanes[lane].open.is_none() {
                    return Err(internal(lane, o, "a step without a running episode"));
                }
                self.step(lane, o, msg)?;
            }
            if o & op::BEGIN != 0 {
                let row = if o & op::FINAL_SLOT != 0 { RowKind::SameStepReset } else { RowKind::Regular };
                self.begin(lane, row, msg)?;
            }
        }
        Ok(())
    }

    /// A transition of the lane's open episode; with `END` in `o` the episode ends (held).
    fn step(&mut self, lane: usize, o: LaneOp, msg: &Message) -> Result<()> {
        if self.lanes[lane].open.as_ref().is_some_and(|ep| ep.length == 0) {
            self.write_reset_row(lane);
        }
        let reward = match self.value(msg, self.reward, Slot::Regular, lane)? {
            Some(v) => f64::from_le_bytes(v.try_into().unwrap_or([0; 8])),
            None => 0.0,
        };
        self.append_row(lane, Timeline::Step, RowKind::Regular, msg)?;
        let row = if o & op::FINAL_SLOT != 0 { RowKind::SameStepFinal } else { RowKind::Regular };
        self.append_row(lane, Timeline::Obs, row, msg)?;
        if let Some(ep) = self.lanes[lane].open.as_mut() {
            ep.length += 1;
            ep.episode_return += reward;
            ep.piece_return += reward;
        }
        if o & op::END != 0 {
            let flags = FLAG_COMPLETE
                | if o & op::TERMINATED != 0 { FLAG_TERMINATED } else { 0 }
                | if o & op::TRUNCATED != 0 { FLAG_TRUNCATED } else { 0 };
            self.lanes[lane].held = self.end_open(lane, flags, msg.time_ns);
        }
        Ok(())
    }

    /// Starts an episode in the lane; its reset row is stashed until the first step.
    fn begin(&mut self, lane: usize, row: RowKind, msg: &Message) -> Result<()> {
        let mut stash = std::mem::take(&mut self.lanes[lane].reset_row);
        stash.clear();
        for &column in &self.row_columns[Timeline::Obs as usize] {
            stash.push(self.row_value(msg, column, lane, row)?);
        }
        let episode_id = self.next_episode_id;
        self.next_episode_id += 1;
        let l = &mut self.lanes[lane];
        l.reset_row = stash;
        l.open = Some(OpenEpisode {
            episode_id,
            obs_first_row: 0,
            step_first_row: 0,
            length: 0,
            episode_return: 0.0,
            start_ns: msg.time_ns,
            metadata: Map::new(),
            piece_obs_first_row: 0,
            piece_step_first_row: 0,
            piece_return: 0.0,
            first_shard_seq: 0,
            parts_written: false,
            metrics: MetricsAcc::default(),
        });
        Ok(())
    }

    /// Columns a reset gave values: same-step autoreset keeps them on the new episode's row.
    fn note_reset_columns(&mut self, msg: &Message) {
        for e in &msg.entries {
            let given = match e.kind {
                EntryKind::Masked => e.mask.is_some_and(|m| m.iter().any(|&b| b != 0)),
                EntryKind::Dense | EntryKind::PerEnv => true,
            };
            if let (true, Some(seen)) = (given, self.seen_at_reset.get_mut(e.column as usize)) {
                *seen = true;
            }
        }
    }

    fn install_column(&mut self, spec: ColumnSpec) {
        let id = spec.id as usize;
        debug_assert_eq!(id, self.columns.len(), "column ids are dense");
        let limit = ChunkLimit::of(&spec, self.config.chunk_bytes);
        for lane in &mut self.lanes {
            lane.buffers.push(ColumnBuffer::starting_at(lane.rows_of(spec.timeline), &limit));
        }
        self.row_bytes.push(spec.row_bytes());
        self.chunk_limit.push(limit);
        self.metric_dtype.push(metrics::keeps_metrics(&spec));
        if spec.mask_of.is_none() {
            // A mask column is written along with the column it masks.
            self.row_columns[spec.timeline as usize].push(id);
        }
        self.columns.push(spec);
        self.lookup.push([Vec::new(), Vec::new()]);
        self.seen_at_reset.push(false);
    }

    fn index_entries(&mut self, msg: &Message) {
        for slots in &mut self.lookup {
            slots[0].clear();
            slots[1].clear();
        }
        self.str_offsets.clear();
        for (i, e) in msg.entries.iter().enumerate() {
            if let Some(slots) = self.lookup.get_mut(e.column as usize) {
                slots[e.slot as usize].push(i as u32);
            }
            // Str rows are length-prefixed; find where each starts once per message.
            let is_str = self.row_bytes.get(e.column as usize) == Some(&None);
            self.str_offsets.push(if is_str { str_row_starts(e.data) } else { Vec::new() });
        }
    }

    /// The bytes of `column` for `lane` in this message, if the message has them.
    fn value<'m>(&self, msg: &'m Message, column: ColumnId, slot: Slot, lane: usize) -> Result<Option<&'m [u8]>> {
        let row_bytes = self.row_bytes[column as usize];
        for &i in &self.lookup[column as usize][slot as usize] {
            let e: &EntryRef = &msg.entries[i as usize];
            let row = match e.kind {
                EntryKind::Dense => lane,
                EntryKind::Masked if e.mask.is_some_and(|m| m.get(lane) == Some(&1)) => lane,
                EntryKind::Masked => continue,
                EntryKind::PerEnv if e.env as usize == lane => 0,
                EntryKind::PerEnv => continue,
            };
            let bytes = match row_bytes {
                Some(n) => e.data.get(row * n..(row + 1) * n),
                None => {
                    let starts = &self.str_offsets[i as usize];
                    starts.get(row).and_then(|&s| {
                        let len = u32::from_le_bytes(e.data.get(s..s + 4)?.try_into().ok()?) as usize;
                        e.data.get(s + 4..s + 4 + len)
                    })
                }
            };
            return match bytes {
                Some(b) => Ok(Some(b)),
                None => Err(Error::WriterStopped(format!(
                    "column '{}': entry too short for env {lane}",
                    self.columns[column as usize].name
                ))),
            };
        }
        Ok(None)
    }

    /// The value of `column` for `lane` in the row `row` of `msg`, per `autoreset::row_sources`.
    fn row_value<'m>(&self, msg: &'m Message, column: usize, lane: usize, row: RowKind) -> Result<Option<&'m [u8]>> {
        let info = self.columns[column].mask.is_some();
        for slot in row_sources(row, info, self.seen_at_reset[column]).into_iter().flatten() {
            if let Some(v) = self.value(msg, column as ColumnId, slot, lane)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Appends one row on `timeline` to `lane`: each column's value from the message, or zeros
    /// (and a false mask) where the message has none.
    fn append_row(&mut self, lane: usize, timeline: Timeline, row: RowKind, msg: &Message) -> Result<()> {
        for k in 0..self.row_columns[timeline as usize].len() {
            let column = self.row_columns[timeline as usize][k];
            let value = self.row_value(msg, column, lane, row)?;
            self.push_value(lane, column, value);
        }
        self.advance(lane, timeline);
        Ok(())
    }

    /// Writes the open episode's stashed reset row: its first observation row.
    fn write_reset_row(&mut self, lane: usize) {
        let stash = std::mem::take(&mut self.lanes[lane].reset_row);
        for k in 0..self.row_columns[Timeline::Obs as usize].len() {
            let column = self.row_columns[Timeline::Obs as usize][k];
            self.push_value(lane, column, stash.get(k));
        }
        let seq = self.shard_seq;
        let l = &mut self.lanes[lane];
        if let Some(ep) = l.open.as_mut() {
            ep.obs_first_row = l.obs_rows;
            ep.step_first_row = l.step_rows;
            ep.piece_obs_first_row = l.obs_rows;
            ep.piece_step_first_row = l.step_rows;
            ep.first_shard_seq = seq;
        }
        l.reset_row = stash;
        self.advance(lane, Timeline::Obs);
    }

    /// Buffers one value (or zeros and a false mask) of `column` in `lane`.
    fn push_value(&mut self, lane: usize, column: usize, value: Option<&[u8]>) {
        if let (Some(dtype), Some(v)) = (self.metric_dtype[column], value) {
            if let (Some(x), Some(ep)) = (metrics::scalar(dtype, v), self.lanes[lane].open.as_mut()) {
                ep.metrics.add(column as u32, x);
            }
        }
        let (row_bytes, mask) = (self.row_bytes[column], self.columns[column].mask);
        let buffers = &mut self.lanes[lane].buffers;
        let buffer = &mut buffers[column];
        match (value, row_bytes) {
            (Some(v), Some(_)) => buffer.push_fixed(v),
            (Some(v), None) => buffer.push_str(v),
            (None, _) => buffer.push_zeros(row_bytes),
        }
        let mut full = buffer.is_full(&self.chunk_limit[column]);
        if let Some(mask) = mask {
            let mask_buffer = &mut buffers[mask as usize];
            mask_buffer.push_fixed(&[value.is_some() as u8]);
            full |= mask_buffer.is_full(&self.chunk_limit[mask as usize]);
        }
        self.seal_wanted |= full;
        self.raw_bytes_seen += value.map_or(0, |v| v.len() as u64);
    }

    fn advance(&mut self, lane: usize, timeline: Timeline) {
        let lane = &mut self.lanes[lane];
        match timeline {
            Timeline::Obs => lane.obs_rows += 1,
            Timeline::Step => lane.step_rows += 1,
        }
    }

    /// Ends the lane's open episode with summary `flags`; an episode without a step is dropped
    /// (its reset row was never written).
    fn end_open(&mut self, lane: usize, flags: u32, time_ns: u64) -> Option<EndedEpisode> {
        let ep = self.lanes[lane].open.take()?;
        if ep.length == 0 {
            return None;
        }
        let summary = self.summary_of(lane, &ep, flags, time_ns);
        let metrics = metrics::encode(&summary.metrics);
        Some(EndedEpisode { summary, metadata: ep.metadata, metrics })
    }

    /// The record of `ep` (ended, a part of it at a rollover, or its discard notice).
    fn summary_of(&self, lane: usize, ep: &OpenEpisode, flags: u32, time_ns: u64) -> EpisodeSummary {
        EpisodeSummary {
            lane: lane as u32,
            flags,
            obs_first_row: ep.obs_first_row,
            step_first_row: ep.step_first_row,
            length: ep.length,
            episode_return: ep.episode_return,
            start_ns: ep.start_ns,
            end_ns: time_ns,
            episode_id: ep.episode_id,
            record_offset: 0,
            position: 0,
            metadata_len: 0,
            metrics_len: 0,
            piece_obs_first_row: ep.piece_obs_first_row,
            piece_step_first_row: ep.piece_step_first_row,
            piece_return: ep.piece_return,
            first_shard_seq: ep.first_shard_seq,
            metrics: ep.metrics.metrics(),
        }
    }

    fn set_metadata(&mut self, lane: usize, held: bool, update: Map<String, Value>) -> Result<()> {
        let l = self
            .lanes
            .get_mut(lane)
            .ok_or_else(|| Error::WriterStopped(format!("internal error: metadata for lane {lane}")))?;
        // The caller checked that the episode exists; if it does not, that is a bug to report.
        let target =
            if held { l.held.as_mut().map(|e| &mut e.metadata) } else { l.open.as_mut().map(|e| &mut e.metadata) };
        match target {
            Some(target) => {
                target.extend(update);
                Ok(())
            }
            None => Err(Error::WriterStopped(format!("internal error: lane {lane} has no episode for metadata"))),
        }
    }

    /// Seals full buffers (or all, with `all`), appends them as one Chunks record, and starts a
    /// new shard if this one is full.
    fn write_chunks(&mut self, all: bool) -> Result<()> {
        self.seal_chunks(all)?;
        self.roll_over_if_full()
    }

    fn seal_chunks(&mut self, all: bool) -> Result<()> {
        let mut chunks = Vec::new();
        for lane in &mut self.lanes {
            for ((buffer, spec), limit) in lane.buffers.iter_mut().zip(&self.columns).zip(&self.chunk_limit) {
                if all || buffer.is_full(limit) {
                    let encoder = &mut self.encoder;
                    chunks.extend(self.clock.time(Stage::Compress, || buffer.seal(lane.index, spec, encoder)));
                }
            }
        }
        self.seal_wanted = false;
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
        Ok(())
    }

    /// Everything buffered goes to the file: chunks, then the records of the ended episodes no
    /// call can change any more, then maybe an index checkpoint or a new shard.
    fn cycle(&mut self) -> Result<()> {
        self.seal_chunks(true)?;
        self.shard.as_ref().ok_or_else(|| Error::WriterStopped("no open shard".into()))?.check_still_there()?;
        self.append_timelog(false);
        self.write_pending_episodes()?;
        self.roll_over_if_full()?;
        self.freed_pages.release();
        Ok(())
    }

    /// The records of the ended episodes waiting (after the chunks holding their rows).
    fn write_pending_episodes(&mut self) -> Result<()> {
        let shard = self.shard.as_mut().ok_or_else(|| Error::WriterStopped("no open shard".into()))?;
        let before = shard.size();
        let batch: Vec<(EpisodeSummary, Vec<u8>, Vec<u8>)> = self
            .pending
            .drain(..)
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
        let index_interval = self.config.index_interval_bytes;
        self.clock.time(Stage::Encode, || {
            shard.append_episodes(&batch);
            shard.maybe_checkpoint(index_interval);
        });
        self.shared.episodes.fetch_add(listed as u64, Ordering::Relaxed);
        self.clock.time_write(|| shard.flush_to_os())?;
        self.shared.bytes_written.fetch_add(shard.size() - before, Ordering::Relaxed);
        Ok(())
    }

    /// Past the size limit, finishes the current shard and starts the next one, so that every
    /// shard stands on its own: all buffered rows and every ended episode go into the shard
    /// being finished, each running episode gets a part record there (`FLAG_CONTINUES`), and the
    /// new shard starts with a repeat of each running episode's last observation row, the first
    /// row of its part there. Lane row numbers run on. Waits while an ended episode is still
    /// reachable by `discard`/metadata (until the next row message), and never while closing
    /// (that would start a shard holding nothing but its schema).
    fn roll_over_if_full(&mut self) -> Result<()> {
        let full = self.shard.as_ref().is_some_and(|s| s.size() >= self.config.max_shard_bytes);
        if !full || self.closing || self.lanes.iter().any(|l| l.held.is_some()) {
            return Ok(());
        }
        self.seal_chunks(true)?;
        let now = now_ns();
        let mut repeats = Vec::new();
        for lane in 0..self.lanes.len() {
            let Some(ep) = self.lanes[lane].open.as_ref() else { continue };
            if ep.length == 0 {
                continue; // its reset row is still stashed: it starts in the next shard
            }
            // A part with no step in this shard would add nothing to the one before it.
            if ep.length > ep.piece_step_first_row - ep.step_first_row {
                let part = self.summary_of(lane, ep, FLAG_CONTINUES, now);
                let metrics = metrics::encode(&part.metrics);
                self.pending.push_back(EndedEpisode { summary: part, metadata: Map::new(), metrics });
            }
            repeats.extend(self.repeat_last_obs_row(lane));
        }
        self.append_timelog(true);
        self.write_pending_episodes()?;
        if let Some(old) = self.shard.take() {
            let path = self.clock.time_write(|| old.finish())?;
            self.compact_closed(&path);
        }
        self.shard_seq += 1;
        let shard = self.clock.time_write(|| {
            ShardWriter::create(
                &self.dir,
                self.recording_id,
                self.shard_seq,
                &self.meta_json,
                &self.columns,
                self.durability,
            )
        })?;
        self.shared.shard_paths.lock().unwrap_or_else(|p| p.into_inner()).push(shard.path().to_path_buf());
        self.shard = Some(shard);
        self.append_chunks(repeats)?;
        for l in &mut self.lanes {
            let (obs_rows, step_rows) = (l.obs_rows, l.step_rows);
            if let Some(ep) = l.open.as_mut().filter(|ep| ep.length > 0) {
                ep.piece_obs_first_row = obs_rows - 1;
                ep.piece_step_first_row = step_rows;
                ep.piece_return = 0.0;
                ep.parts_written = true;
            }
        }
        Ok(())
    }

    /// One-row chunks (`CHUNK_REPEAT`) of every observation-timeline column's last row in `lane`,
    /// for the next shard: the first row of the running episode's part there.
    fn repeat_last_obs_row(&self, lane: usize) -> Vec<PendingChunk> {
        let l = &self.lanes[lane];
        let row = l.obs_rows - 1;
        let mut out = Vec::new();
        for (spec, buffer) in self.columns.iter().zip(&l.buffers) {
            // A column made after that row has none of it (it reads as missing, as before).
            if spec.timeline != Timeline::Obs || buffer.end_row() != l.obs_rows {
                continue;
            }
            let row_bytes = self.row_bytes[spec.id as usize];
            let Some(bytes) = buffer.last_row(row_bytes) else { continue };
            let data = match row_bytes {
                Some(_) => bytes,
                None => {
                    // A str chunk of one row: offsets 0 and len, then the text.
                    let mut raw = Vec::with_capacity(16 + bytes.len());
                    raw.extend_from_slice(&0u64.to_le_bytes());
                    raw.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                    raw.extend_from_slice(&bytes);
                    raw
                }
            };
            out.push(PendingChunk {
                lane: lane as u32,
                column: spec.id,
                first_row: row,
                n_rows: 1,
                codec: 0,
                raw_len: data.len() as u64,
                data,
                flags: CHUNK_REPEAT,
            });
        }
        out
    }

    /// Writes everything, then the episodes still running (incomplete, last), the index and End.
    fn close(&mut self) -> Result<()> {
        self.closing = true;
        for lane in 0..self.lanes.len() {
            if let Some(ended) = self.lanes[lane].held.take() {
                self.pending.push_back(ended);
            }
        }
        self.cycle()?;
        let now = now_ns();
        for lane in 0..self.lanes.len() {
            if let Some(ended) = self.end_open(lane, 0, now) {
                self.pending.push_back(ended);
            }
        }
        self.cycle()?;
        // The last sample goes in the file too (it leaves out the final index and End record).
        self.end_timelog_sample(0.0);
        self.append_timelog(true);
        if let Some(shard) = self.shard.take() {
            let before = shard.size();
            let path = self.clock.time_write(|| shard.finish())?;
            let after = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(before);
            self.shared.bytes_written.fetch_add(after.saturating_sub(before), Ordering::Relaxed);
            self.compact_closed(&path);
        }
        self.join_compactions();
        Ok(())
    }

    /// Rewrites the shard just closed at `path` without the small chunks the flush timer cut
    /// (`compact`), on a thread of its own so the rows arriving meanwhile are not held up; `close`
    /// waits for every such thread. A failure leaves the shard as it was, every row in it, and is
    /// reported in the stats: only its size is not what it could be.
    fn compact_closed(&mut self, path: &Path) {
        if !self.config.compact_shards {
            return;
        }
        let settings = compact::Settings {
            default_chunk_bytes: self.config.chunk_bytes,
            index_interval_bytes: self.config.index_interval_bytes,
            durability: self.durability,
        };
        // Those already done are joined now: a long recording rolls over many shards.
        let (done, running) = std::mem::take(&mut self.compactions).into_iter().partition(|h| h.is_finished());
        self.compactions = running;
        self.join_each(done);
        let (shared, owned) = (self.shared.clone(), path.to_path_buf());
        let spawned = std::thread::Builder::new().name("trajcore-compact".into()).spawn(move || {
            note_compaction(&shared, &owned, compact::compact(&owned, &settings, &mut Encoder::default()))
        });
        match spawned {
            Ok(handle) => self.compactions.push(handle),
            Err(e) => note_compaction(&self.shared, path, Err(Error::io(path, e))),
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

fn internal(lane: usize, o: LaneOp, why: &str) -> Error {
    Error::WriterStopped(format!("internal error: lane {lane}: {why} (op {o:#x})"))
}

/// Start offsets of the length-prefixed rows of a str entry.
fn str_row_starts(data: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at + 4 <= data.len() {
        starts.push(at);
        at += 4 + u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
    }
    starts
}

/// The length of the next message in the ring, if a whole one is there.
fn next_message_len(consumer: &mut rtrb::Consumer<u8>) -> Option<usize> {
    if consumer.slots() < 4 {
        return None;
    }
    let chunk = consumer.read_chunk(4).ok()?;
    let (a, b) = chunk.as_slices();
    let mut len = [0u8; 4];
    len[..a.len()].copy_from_slice(a);
    len[a.len()..].copy_from_slice(b);
    Some(u32::from_le_bytes(len) as usize)
}
