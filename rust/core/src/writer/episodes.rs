//! What the writer does to episodes when a message arrives: its lane ops (decided by `autoreset`
//! on the caller's side) become rows in each lane's column buffers, episodes that start, step and
//! end, their summaries and metadata. Nothing here does I/O: the writer thread (`thread`) hands
//! in decoded messages, and the sink (`sink`) seals the buffered rows and writes the ended
//! episodes this module queues, so table-driven tests cover every case without threads or files.
//!
//! A message's ops are applied in two halves, because a new shard may only start between them
//! (when nothing is held, before the message's rows): `settle` (drop or settle what the previous
//! row message ended), then `apply` (drop or end running episodes, then steps and new episodes,
//! each phase across all lanes so episodes are listed in the order they ended).

use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::autoreset::{op, LaneOp};
use super::lane::{ChunkLimit, ColumnBuffer, EndedEpisode, HeldEpisode, Lane, OpenEpisode};
use super::message::{self, EntryKind, EntryRef, Message, Slot};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::chunks::{PendingChunk, CHUNK_REPEAT};
use crate::format::episode::{
    EpisodeSummary, FLAG_COMPLETE, FLAG_CONTINUES, FLAG_DISCARDED, FLAG_TERMINATED, FLAG_TRUNCATED,
};
use crate::format::metrics::{self, MetricsAcc};
use crate::schema::{ColumnId, ColumnSpec, Timeline};

/// Where a lane's observation-timeline value comes from, per row the writer appends.
///
/// Same-step autoreset merges two rows into one step: the regular slot holds the reset
/// observation and the reset info of the new episode, the final slot (`final_obs`,
/// `final_info`) the last row of the ended one. Wrappers over the vector env (gymnasium's
/// `RecordEpisodeStatistics`) add entries about the ending step to the top-level infos too. So a
/// regular-slot info column goes to the ended episode's final row unless it is a column the env
/// gives at reset (seen in a `Reset` message), and then not to the new episode's first row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// An ordinary observation row (also every row outside same-step autoreset).
    Regular,
    /// The final row of an episode that ended at a same-step autoreset step.
    SameStepFinal,
    /// The first row of the episode that starts at a same-step autoreset step.
    SameStepReset,
}

/// The slots a row takes a column's value from, in order of preference (`None`: no value).
/// `info` says the column is an info entry, `seen_at_reset` that a reset ever gave it.
pub fn row_sources(row: RowKind, info: bool, seen_at_reset: bool) -> [Option<Slot>; 2] {
    let step_info = info && !seen_at_reset;
    match row {
        RowKind::Regular => [Some(Slot::Regular), None],
        RowKind::SameStepFinal if step_info => [Some(Slot::Final), Some(Slot::Regular)],
        RowKind::SameStepFinal => [Some(Slot::Final), None],
        RowKind::SameStepReset if step_info => [None, None],
        RowKind::SameStepReset => [Some(Slot::Regular), None],
    }
}

/// Every lane's rows and episodes, and the ended episodes waiting to be written.
pub struct Episodes {
    columns: Vec<ColumnSpec>,
    /// Per column: bytes a row (None for str), cached because the step path asks per row.
    row_bytes: Vec<Option<usize>>,
    /// Per column: when a lane's buffered rows seal a chunk.
    chunk_limit: Vec<ChunkLimit>,
    /// The chunk size of columns that declare none.
    default_chunk_bytes: usize,
    /// Per column: its dtype if episode metrics are kept for it (numeric scalar, masked: info
    /// entries and custom data).
    metric_dtype: Vec<Option<DType>>,
    /// Value (non-mask) columns of the obs and of the step timeline: what a row of each holds.
    row_columns: [Vec<usize>; 2],
    /// Per column: whether a reset gave it a value (same-step autoreset routing, see
    /// `row_sources`).
    seen_at_reset: Vec<bool>,
    lanes: Vec<Lane>,
    /// Ended episodes no call can change any more, in the order they ended: written next cycle.
    pending: VecDeque<EndedEpisode>,
    /// The number the next episode to start gets.
    next_episode_id: u64,
    reward: ColumnId,
    /// The shard rows go to now: an episode's first rows are in it.
    shard_seq: u64,
    /// Entries of the current message by column and slot.
    lookup: Vec<[Vec<u32>; 2]>,
    str_offsets: Vec<Vec<usize>>,
    /// A buffer filled up: the sink should seal the full ones.
    seal_wanted: bool,
    /// Value bytes taken since `take_raw_bytes` was last called.
    raw_bytes_seen: u64,
    /// The metadata every episode begun from now on starts with (`set_defaults`: the policy
    /// behind the episodes); episodes already running keep what they began with.
    defaults: Map<String, Value>,
}

impl Episodes {
    /// `num_envs` idle lanes with `columns`; `reward` is the column episode returns sum.
    pub fn new(num_envs: u32, columns: Vec<ColumnSpec>, reward: ColumnId, default_chunk_bytes: usize) -> Self {
        let mut me = Episodes {
            columns: Vec::new(),
            row_bytes: Vec::new(),
            chunk_limit: Vec::new(),
            default_chunk_bytes,
            metric_dtype: Vec::new(),
            row_columns: [Vec::new(), Vec::new()],
            seen_at_reset: Vec::new(),
            lanes: (0..num_envs).map(Lane::new).collect(),
            pending: VecDeque::new(),
            next_episode_id: 0,
            reward,
            shard_seq: 0,
            lookup: Vec::new(),
            str_offsets: Vec::new(),
            seal_wanted: false,
            raw_bytes_seen: 0,
            defaults: Map::new(),
        };
        for spec in columns {
            me.install_column(spec);
        }
        me
    }

    pub fn columns(&self) -> &[ColumnSpec] {
        &self.columns
    }

    pub fn num_lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Step-timeline rows (transitions) taken in so far, over every lane: what a shard holds is
    /// the difference between its end and its start.
    pub fn step_rows(&self) -> u64 {
        self.lanes.iter().map(|l| l.step_rows).sum()
    }

    /// Whether a buffer filled up since the last `for_each_buffer`.
    pub fn seal_wanted(&self) -> bool {
        self.seal_wanted
    }

    /// Value bytes taken since the last call.
    pub fn take_raw_bytes(&mut self) -> u64 {
        std::mem::take(&mut self.raw_bytes_seen)
    }

    /// Whether an ended episode is still reachable by `discard` or metadata.
    pub fn any_held(&self) -> bool {
        self.lanes.iter().any(|l| l.held.is_some())
    }

    /// The ended episodes (and parts, and discard notices) waiting to be written, oldest first.
    pub fn take_pending(&mut self) -> impl Iterator<Item = EndedEpisode> + '_ {
        self.pending.drain(..)
    }

    /// The waiting records, oldest first, up to the first whose rows are not all in sealed
    /// chunks yet: they may be written now, right after those chunks, rather than at the next
    /// flush cycle (so a file cut short keeps the episodes whose rows lie before the cut, even
    /// when a fast writer fills a shard within one cycle).
    pub fn take_sealed(&mut self) -> Vec<EndedEpisode> {
        let mut out = Vec::new();
        while self.pending.front().is_some_and(|e| self.rows_sealed(&e.summary)) {
            out.extend(self.pending.pop_front());
        }
        out
    }

    /// Whether every row of `s` lies before its lane's buffers (in chunks already sealed).
    fn rows_sealed(&self, s: &EpisodeSummary) -> bool {
        let Some(lane) = self.lanes.get(s.lane as usize) else { return false };
        lane.buffers.iter().zip(&self.columns).all(|(buffer, spec)| {
            let end = match spec.timeline {
                Timeline::Obs => s.obs_first_row + s.length + 1,
                Timeline::Step => s.step_first_row + s.length,
            };
            buffer.first_row >= end
        })
    }

    /// Calls `f` with every lane's buffer of every column (the lane's index, the buffer, its
    /// column and seal limit): the sink seals them.
    pub fn for_each_buffer(&mut self, mut f: impl FnMut(u32, &mut ColumnBuffer, &ColumnSpec, &ChunkLimit)) {
        for lane in &mut self.lanes {
            for ((buffer, spec), limit) in lane.buffers.iter_mut().zip(&self.columns).zip(&self.chunk_limit) {
                f(lane.index, buffer, spec, limit);
            }
        }
        self.seal_wanted = false;
    }

    /// A new column from now on: each lane's rows of it start at the lane's next row.
    pub fn install_column(&mut self, spec: ColumnSpec) {
        let id = spec.id as usize;
        debug_assert_eq!(id, self.columns.len(), "column ids are dense");
        let limit = ChunkLimit::of(&spec, self.default_chunk_bytes);
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

    /// The first half of a message's ops: checks them, drops held episodes (`DROP_HELD`) and,
    /// with `settle`, queues what the previous row message ended. `rows`: the message carries
    /// rows (Step, Reset), the only ones that may step or begin episodes.
    pub fn settle(&mut self, ops: Option<&[u8]>, rows: bool, settle: bool) -> Result<()> {
        for lane in 0..self.lanes.len() {
            let o = message::lane_op(ops, lane);
            if o & !op::ALL != 0 || (!rows && o & (op::STEP | op::BEGIN) != 0) {
                return Err(internal(lane, o, "invalid op"));
            }
            if o & op::DROP_HELD != 0 {
                if let Some(dropped) = self.lanes[lane].held.take().filter(|h| h.parts_written) {
                    // Its earlier parts are in the files: say it is gone.
                    let notice = EpisodeSummary { flags: FLAG_DISCARDED, ..dropped.ended.summary };
                    self.pending.push_back(EndedEpisode { summary: notice, metadata: Map::new(), metrics: Vec::new() });
                }
            }
        }
        if settle {
            self.settle_held();
        }
        Ok(())
    }

    /// Queues every held episode: no call can reach it any more.
    pub fn settle_held(&mut self) {
        for lane in &mut self.lanes {
            if let Some(held) = lane.held.take() {
                self.pending.push_back(held.ended);
            }
        }
    }

    /// The second half of a message's ops (after `settle`), at `time_ns`: running episodes
    /// dropped or ended, then the steps and new episodes of `rows` (a Step or Reset message).
    pub fn apply(&mut self, ops: Option<&[u8]>, rows: Option<&Message>, time_ns: u64) -> Result<()> {
        let n = self.lanes.len();
        for lane in 0..n {
            let o = message::lane_op(ops, lane);
            if o & op::DROP_OPEN != 0 {
                if let Some(dropped) = self.lanes[lane].open.take() {
                    if dropped.parts_written {
                        // Its earlier parts are in finished shards: say it is gone.
                        let notice = summary_of(lane, &dropped, FLAG_DISCARDED, time_ns);
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
        let Some(msg) = rows else { return Ok(()) };
        self.index_entries(msg);
        for lane in 0..n {
            let o = message::lane_op(ops, lane);
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

    /// Columns a reset gave values: same-step autoreset keeps them on the new episode's row.
    pub fn note_reset_columns(&mut self, msg: &Message) {
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

    /// Merges `update` into the metadata of the lane's held (`held`) or running episode.
    pub fn set_metadata(&mut self, lane: usize, held: bool, update: Map<String, Value>) -> Result<()> {
        let l = self
            .lanes
            .get_mut(lane)
            .ok_or_else(|| Error::WriterStopped(format!("internal error: metadata for lane {lane}")))?;
        // The caller checked that the episode exists; if it does not, that is a bug to report.
        let target = if held {
            l.held.as_mut().map(|h| &mut h.ended.metadata)
        } else {
            l.open.as_mut().map(|e| &mut e.metadata)
        };
        match target {
            Some(target) => {
                target.extend(update);
                Ok(())
            }
            None => Err(Error::WriterStopped(format!("internal error: lane {lane} has no episode for metadata"))),
        }
    }

    /// The lane's running episode is a part whose start is lost (`MessageKind::StartLost`).
    pub fn mark_start_lost(&mut self, lane: usize) -> Result<()> {
        match self.lanes.get_mut(lane).and_then(|l| l.open.as_mut()) {
            Some(ep) => {
                ep.start_lost = true;
                Ok(())
            }
            None => {
                Err(Error::WriterStopped(format!("internal error: lane {lane} has no episode whose start is lost")))
            }
        }
    }

    /// Merges `update` into the metadata every episode begun after this message starts with.
    pub fn set_defaults(&mut self, update: Map<String, Value>) {
        self.defaults.extend(update);
    }

    /// Closing: every running episode ends, incomplete, at `time_ns`, and is queued.
    pub fn end_all_open(&mut self, time_ns: u64) {
        for lane in 0..self.lanes.len() {
            if let Some(ended) = self.end_open(lane, 0, time_ns) {
                self.pending.push_back(ended);
            }
        }
    }

    /// A shard is being finished (all buffers sealed, nothing held): queues a part record
    /// (`FLAG_CONTINUES`) of each running episode that stepped in it, and returns the chunks that
    /// start the next shard: a repeat of each running episode's last observation row.
    pub fn parts_at_rollover(&mut self, time_ns: u64) -> Vec<PendingChunk> {
        let mut repeats = Vec::new();
        for lane in 0..self.lanes.len() {
            let Some(ep) = self.lanes[lane].open.as_mut() else { continue };
            if ep.length == 0 {
                continue; // its reset row is still stashed: it starts in the next shard
            }
            // A part with no step in this shard would add nothing to the one before it.
            if ep.length > ep.piece_step_first_row - ep.step_first_row {
                ep.listed_length = ep.length;
                let part = summary_of(lane, ep, FLAG_CONTINUES, time_ns);
                let metrics = metrics::encode(&part.metrics);
                self.pending.push_back(EndedEpisode { summary: part, metadata: Map::new(), metrics });
            }
            repeats.extend(self.repeat_last_obs_row(lane));
        }
        repeats
    }

    /// A flush (timed or called) is about to write every buffered row: queues a progress part
    /// (`FLAG_CONTINUES`, in the same shard) of each running episode that stepped since its last
    /// part, so that readers in any process, and an open after a crash, list the steps of
    /// running episodes too (a replay buffer samples transitions, not finished episodes). A
    /// reader lists the latest part; the episode's end lists it whole in its place; a closed
    /// shard's compaction drops the parts a later record supersedes.
    /// An episode that ended at the last step, held while `discard` and metadata reach it, gets
    /// one too (its steps are transitions like any other; its final record follows).
    pub fn progress_parts(&mut self, time_ns: u64) {
        for lane in 0..self.lanes.len() {
            if let Some(held) = self.lanes[lane].held.as_mut().filter(|h| !h.listed) {
                held.listed = true;
                held.parts_written = true;
                let ended = &held.ended.summary;
                // How it ended stays on the part, as on any part (`as_piece`).
                let flags = FLAG_CONTINUES | (ended.flags & (FLAG_TERMINATED | FLAG_TRUNCATED));
                let part = EpisodeSummary { flags, end_ns: time_ns, ..ended.clone() };
                let metrics = held.ended.metrics.clone();
                self.pending.push_back(EndedEpisode { summary: part, metadata: Map::new(), metrics });
            }
            let Some(ep) = self.lanes[lane].open.as_mut() else { continue };
            if ep.length == 0 || ep.length == ep.listed_length {
                continue;
            }
            ep.listed_length = ep.length;
            ep.parts_written = true;
            let part = summary_of(lane, ep, FLAG_CONTINUES, time_ns);
            let metrics = metrics::encode(&part.metrics);
            self.pending.push_back(EndedEpisode { summary: part, metadata: Map::new(), metrics });
        }
    }

    /// Shard `shard_seq` started with the chunks `parts_at_rollover` returned: each running
    /// episode's part there starts at its repeated row. Lane row numbers run on.
    pub fn start_parts(&mut self, shard_seq: u64) {
        self.shard_seq = shard_seq;
        for l in &mut self.lanes {
            let (obs_rows, step_rows) = (l.obs_rows, l.step_rows);
            if let Some(ep) = l.open.as_mut().filter(|ep| ep.length > 0) {
                ep.piece_obs_first_row = obs_rows - 1;
                ep.piece_step_first_row = step_rows;
                ep.piece_return = 0.0;
                ep.parts_written = true;
            }
        }
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
            // A part whose start is lost ends as its episode did, but is no whole episode.
            let whole = !self.lanes[lane].open.as_ref().is_some_and(|ep| ep.start_lost);
            let flags = if whole { FLAG_COMPLETE } else { 0 }
                | if o & op::TERMINATED != 0 { FLAG_TERMINATED } else { 0 }
                | if o & op::TRUNCATED != 0 { FLAG_TRUNCATED } else { 0 };
            self.lanes[lane].held = self.hold(lane, flags, msg.time_ns);
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
        let metadata = self.defaults.clone();
        let l = &mut self.lanes[lane];
        l.reset_row = stash;
        l.open = Some(OpenEpisode {
            episode_id,
            obs_first_row: 0,
            step_first_row: 0,
            length: 0,
            episode_return: 0.0,
            start_ns: msg.time_ns,
            metadata,
            piece_obs_first_row: 0,
            piece_step_first_row: 0,
            piece_return: 0.0,
            first_shard_seq: 0,
            parts_written: false,
            start_lost: false,
            listed_length: 0,
            metrics: MetricsAcc::default(),
        });
        Ok(())
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

    /// The value of `column` for `lane` in the row `row` of `msg`, per `row_sources`.
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
    /// Ends the lane's open episode with `flags`, held (see `HeldEpisode`).
    fn hold(&mut self, lane: usize, flags: u32, time_ns: u64) -> Option<HeldEpisode> {
        let parts_written = self.lanes[lane].open.as_ref().is_some_and(|ep| ep.parts_written);
        // Its last step came with its end: no part lists that one yet.
        let ended = self.end_open(lane, flags, time_ns)?;
        Some(HeldEpisode { ended, parts_written, listed: false })
    }

    fn end_open(&mut self, lane: usize, flags: u32, time_ns: u64) -> Option<EndedEpisode> {
        let ep = self.lanes[lane].open.take()?;
        if ep.length == 0 {
            return None;
        }
        let summary = summary_of(lane, &ep, flags, time_ns);
        let metrics = metrics::encode(&summary.metrics);
        Some(EndedEpisode { summary, metadata: ep.metadata, metrics })
    }
}

/// The record of `ep` (ended, a part of it at a rollover, or its discard notice).
fn summary_of(lane: usize, ep: &OpenEpisode, flags: u32, time_ns: u64) -> EpisodeSummary {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Role;
    use crate::writer::autoreset::op::*;
    use crate::writer::message::MessageKind;

    fn column(id: ColumnId, name: &str, dtype: &str, timeline: Timeline) -> ColumnSpec {
        ColumnSpec {
            id,
            name: name.into(),
            dtype: dtype.into(),
            shape: vec![],
            timeline,
            mask_of: None,
            mask: None,
            role: None,
            codec: Default::default(),
            widens: None,
        }
    }

    /// obs (0), reward (1), terminated (2), truncated (3), an info entry `info/x` (4) and its mask (5).
    fn episodes(n: u32) -> Episodes {
        let mut reward = column(1, "reward", "float64", Timeline::Step);
        reward.role = Some(Role::Reward);
        let mut info = column(4, "info/x", "float64", Timeline::Obs);
        info.mask = Some(5);
        let mut mask = column(5, "info/_x", "bool", Timeline::Obs);
        mask.mask_of = Some(4);
        let columns = vec![
            column(0, "obs", "float64", Timeline::Obs),
            reward,
            column(2, "terminated", "bool", Timeline::Step),
            column(3, "truncated", "bool", Timeline::Step),
            info,
            mask,
        ];
        Episodes::new(n, columns, 1, 1 << 20)
    }

    fn f64s(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// What a message does, given per lane: its op, its observation (the final one in `final_obs`
    /// for `FINAL_SLOT` lanes) and reward.
    struct Msg {
        kind: MessageKind,
        ops: Vec<LaneOp>,
        obs: Vec<f64>,
        final_obs: Vec<f64>,
        reward: Vec<f64>,
    }

    /// Applies `msg` as the writer thread does (settle, then apply) and drains what it queued:
    /// (lane, length, return, flags) per episode record.
    fn send(e: &mut Episodes, msg: &Msg, time_ns: u64) -> Vec<(u32, u64, f64, u32)> {
        let mut ops = Vec::new();
        message::ops_bytes(&msg.ops, &mut ops);
        let (obs, final_obs, reward) = (f64s(&msg.obs), f64s(&msg.final_obs), f64s(&msg.reward));
        let dense = |column, slot, data| EntryRef { column, kind: EntryKind::Dense, slot, env: 0, mask: None, data };
        let rows = matches!(msg.kind, MessageKind::Step | MessageKind::Reset);
        let mut entries = vec![dense(0, Slot::Regular, &obs[..])];
        if msg.kind == MessageKind::Step {
            entries.push(dense(1, Slot::Regular, &reward[..]));
        }
        if !final_obs.is_empty() {
            entries.push(dense(0, Slot::Final, &final_obs[..]));
        }
        let m = Message { kind: msg.kind, env: 0, time_ns, arg: 0, ops: Some(&ops), entries };
        let settle = msg.kind != MessageKind::Ops;
        e.settle(m.ops, rows, settle).unwrap();
        e.apply(m.ops, rows.then_some(&m), time_ns).unwrap();
        e.take_pending()
            .map(|x| (x.summary.lane, x.summary.length, x.summary.episode_return, x.summary.flags))
            .collect()
    }

    fn msg(kind: MessageKind, ops: &[LaneOp], obs: &[f64], reward: &[f64]) -> Msg {
        Msg { kind, ops: ops.to_vec(), obs: obs.to_vec(), final_obs: Vec::new(), reward: reward.to_vec() }
    }

    fn reset(ops: &[LaneOp], obs: &[f64]) -> Msg {
        msg(MessageKind::Reset, ops, obs, &[])
    }

    fn step(ops: &[LaneOp], obs: &[f64], reward: &[f64]) -> Msg {
        msg(MessageKind::Step, ops, obs, reward)
    }

    fn control(kind: MessageKind, ops: &[LaneOp]) -> Msg {
        msg(kind, ops, &[], &[])
    }

    /// The obs rows buffered in `lane`.
    fn obs_rows(e: &Episodes, lane: usize) -> Vec<f64> {
        e.lanes[lane].buffers[0].data.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    const DONE_T: LaneOp = STEP | END | TERMINATED;
    const DONE_SAME: LaneOp = STEP | END | TRUNCATED | FINAL_SLOT | BEGIN;
    const COMPLETE_T: u32 = FLAG_COMPLETE | FLAG_TERMINATED;

    #[test]
    fn ops_become_episodes() {
        // (message, the records it queues): lane, length, return, flags.
        type Case = (Msg, Vec<(u32, u64, f64, u32)>);
        let cases: Vec<Case> = vec![
            (reset(&[BEGIN, BEGIN], &[0.0, 10.0]), vec![]),
            (step(&[STEP, STEP], &[1.0, 11.0], &[1.0, 2.0]), vec![]),
            // An end is held until the next row message (discard and metadata reach it).
            (step(&[DONE_T, STEP], &[2.0, 12.0], &[1.0, 2.0]), vec![]),
            (step(&[BEGIN, STEP], &[20.0, 13.0], &[9.0, 2.0]), vec![(0, 2, 2.0, COMPLETE_T)]),
            // A reset mid-episode ends it incomplete; an episode that never stepped leaves nothing.
            (reset(&[END_OPEN | BEGIN, END_OPEN | BEGIN], &[30.0, 40.0]), vec![(1, 3, 6.0, 0)]),
            (step(&[STEP, 0], &[31.0, 0.0], &[0.5, 0.0]), vec![]),
            (control(MessageKind::Close, &[END_OPEN, END_OPEN]), vec![(0, 1, 0.5, 0)]),
        ];
        let mut e = episodes(2);
        for (i, (msg, want)) in cases.iter().enumerate() {
            assert_eq!(&send(&mut e, msg, i as u64), want, "message {i}");
        }
        // Lane 0's rows: reset, 2 steps; reset (its episode never stepped: no row); reset, a step.
        assert_eq!(obs_rows(&e, 0), vec![0.0, 1.0, 2.0, 30.0, 31.0]);
        assert_eq!(obs_rows(&e, 1), vec![10.0, 11.0, 12.0, 13.0]);
    }

    #[test]
    fn a_same_step_end_takes_the_final_slot_and_begins_from_the_regular_one() {
        let mut e = episodes(1);
        send(&mut e, &reset(&[BEGIN], &[0.0]), 0);
        send(&mut e, &step(&[STEP], &[1.0], &[1.0]), 1);
        let end = Msg { final_obs: vec![2.0], ..step(&[DONE_SAME], &[100.0], &[1.0]) };
        assert_eq!(send(&mut e, &end, 2), vec![]);
        assert_eq!(
            send(&mut e, &step(&[STEP], &[101.0], &[1.0]), 3),
            vec![(0, 2, 2.0, FLAG_COMPLETE | FLAG_TRUNCATED)]
        );
        assert_eq!(obs_rows(&e, 0), vec![0.0, 1.0, 2.0, 100.0, 101.0]);
    }

    #[test]
    fn an_episode_whose_start_is_lost_ends_incomplete_with_its_flags() {
        // (lane marked, ops of its last step) -> its record's flags.
        let cases: &[(bool, LaneOp, u32)] = &[
            (false, DONE_T, COMPLETE_T),
            (true, DONE_T, FLAG_TERMINATED),
            (true, STEP | END | TRUNCATED, FLAG_TRUNCATED),
            (true, STEP | END | TERMINATED | TRUNCATED, FLAG_TERMINATED | FLAG_TRUNCATED),
        ];
        for &(lost, last, flags) in cases {
            let mut e = episodes(1);
            assert!(e.mark_start_lost(0).is_err(), "no running episode");
            send(&mut e, &reset(&[BEGIN], &[0.0]), 0);
            if lost {
                e.mark_start_lost(0).unwrap();
            }
            send(&mut e, &step(&[STEP], &[1.0], &[1.0]), 1);
            send(&mut e, &step(&[last], &[2.0], &[1.0]), 2);
            assert_eq!(send(&mut e, &control(MessageKind::Flush, &[0]), 3), vec![(0, 2, 2.0, flags)], "{lost} {last}");
            // The next episode of the lane is whole again.
            send(&mut e, &reset(&[BEGIN], &[0.0]), 4);
            send(&mut e, &step(&[DONE_T], &[1.0], &[1.0]), 5);
            assert_eq!(send(&mut e, &control(MessageKind::Flush, &[0]), 6), vec![(0, 1, 1.0, COMPLETE_T)]);
        }
    }

    #[test]
    fn drops_metadata_and_flushes() {
        let mut e = episodes(2);
        send(&mut e, &reset(&[BEGIN, BEGIN], &[0.0, 0.0]), 0);
        send(&mut e, &step(&[DONE_T, STEP], &[1.0, 1.0], &[1.0, 1.0]), 1);
        // Metadata reaches the held episode of lane 0 and the running one of lane 1.
        let tag = |v: i64| Map::from_iter([("tag".to_string(), Value::from(v))]);
        e.set_metadata(0, true, tag(1)).unwrap();
        e.set_metadata(1, false, tag(2)).unwrap();
        assert!(e.set_metadata(1, true, tag(3)).is_err(), "lane 1 holds nothing");
        // A flush settles the held episode; an Ops message drops the running one.
        assert_eq!(send(&mut e, &control(MessageKind::Flush, &[0, 0]), 2), vec![(0, 1, 1.0, COMPLETE_T)]);
        assert_eq!(send(&mut e, &control(MessageKind::Ops, &[0, DROP_OPEN]), 3), vec![]);
        assert!(e.lanes[1].open.is_none());
        // A held episode dropped (discard after its end) is never queued.
        send(&mut e, &reset(&[BEGIN, BEGIN], &[0.0, 0.0]), 4);
        send(&mut e, &step(&[DONE_T, DONE_T], &[1.0, 1.0], &[1.0, 1.0]), 5);
        assert_eq!(send(&mut e, &control(MessageKind::Flush, &[DROP_HELD, 0]), 6), vec![(1, 1, 1.0, COMPLETE_T)]);
        assert!(!e.any_held());
    }

    #[test]
    fn a_timed_flush_lists_running_and_held_episodes_once_per_new_step() {
        let drain = |e: &mut Episodes| -> Vec<(u32, u64, u32)> {
            e.take_pending().map(|x| (x.summary.lane, x.summary.length, x.summary.flags)).collect()
        };
        let mut e = episodes(2);
        send(&mut e, &reset(&[BEGIN, BEGIN], &[0.0, 0.0]), 0);
        e.progress_parts(1);
        assert_eq!(drain(&mut e), vec![], "nothing stepped yet");
        send(&mut e, &step(&[STEP, STEP], &[1.0, 1.0], &[1.0, 1.0]), 2);
        e.progress_parts(3);
        assert_eq!(drain(&mut e), vec![(0, 1, FLAG_CONTINUES), (1, 1, FLAG_CONTINUES)]);
        e.progress_parts(4);
        assert_eq!(drain(&mut e), vec![], "no step since");
        // Lane 0 ends (held: discard and metadata still reach it), lane 1 steps on.
        send(&mut e, &step(&[DONE_T, STEP], &[2.0, 2.0], &[1.0, 1.0]), 5);
        e.progress_parts(6);
        assert_eq!(drain(&mut e), vec![(0, 2, FLAG_CONTINUES | FLAG_TERMINATED), (1, 2, FLAG_CONTINUES)]);
        e.progress_parts(7);
        assert_eq!(drain(&mut e), vec![]);
        // Its final record follows when it settles; discarded instead, a notice says so.
        assert_eq!(send(&mut e, &control(MessageKind::Flush, &[0, 0]), 8), vec![(0, 2, 2.0, COMPLETE_T)]);
        send(&mut e, &reset(&[BEGIN, 0], &[0.0, 0.0]), 9);
        send(&mut e, &step(&[DONE_T, STEP], &[1.0, 3.0], &[1.0, 1.0]), 10);
        e.progress_parts(11);
        assert_eq!(drain(&mut e), vec![(0, 1, FLAG_CONTINUES | FLAG_TERMINATED), (1, 3, FLAG_CONTINUES)]);
        let dropped = send(&mut e, &control(MessageKind::Flush, &[DROP_HELD, 0]), 12);
        assert_eq!(dropped, vec![(0, 1, 1.0, FLAG_DISCARDED)]);
        // Lane 1's end: a part with its last step too.
        send(&mut e, &step(&[0, DONE_T], &[0.0, 4.0], &[0.0, 1.0]), 13);
        e.progress_parts(14);
        assert_eq!(drain(&mut e), vec![(1, 4, FLAG_CONTINUES | FLAG_TERMINATED)]);
    }

    #[test]
    fn defaults_reach_the_episodes_begun_after_them_only() {
        let mut e = episodes(2);
        let policy = |v: i64| Map::from_iter([("policy".to_string(), Value::from(v))]);
        send(&mut e, &reset(&[BEGIN, 0], &[0.0, 0.0]), 0);
        e.set_defaults(policy(1));
        let meta = |e: &Episodes, lane: usize| e.lanes[lane].open.as_ref().map(|o| o.metadata.clone());
        assert_eq!(meta(&e, 0), Some(Map::new()), "lane 0 began before the defaults: it keeps none");
        send(&mut e, &reset(&[0, BEGIN], &[0.0, 0.0]), 1);
        assert_eq!(meta(&e, 1), Some(policy(1)));
        // A later call replaces the key for the episodes begun after it; running ones keep theirs.
        e.set_defaults(policy(2));
        send(&mut e, &step(&[DONE_T, STEP], &[1.0, 1.0], &[1.0, 1.0]), 2);
        send(&mut e, &reset(&[BEGIN, 0], &[0.0, 0.0]), 3);
        assert_eq!(meta(&e, 0), Some(policy(2)));
        assert_eq!(meta(&e, 1), Some(policy(1)));
    }

    #[test]
    fn invalid_ops_are_refused() {
        let mut e = episodes(1);
        assert!(e.settle(Some(&[0xff, 0xff]), true, true).is_err(), "unknown bits");
        assert!(e.settle(Some(&(STEP).to_le_bytes()), false, true).is_err(), "a step without rows");
        let m = Message { kind: MessageKind::Step, env: 0, time_ns: 0, arg: 0, ops: None, entries: vec![] };
        let ops = STEP.to_le_bytes();
        assert!(e.apply(Some(&ops), Some(&m), 0).is_err(), "a step without a running episode");
    }

    #[test]
    fn a_rollover_writes_parts_and_repeats_the_last_row() {
        let mut e = episodes(2);
        send(&mut e, &reset(&[BEGIN, BEGIN], &[0.0, 5.0]), 0);
        send(&mut e, &step(&[STEP, 0], &[1.0, 0.0], &[3.0, 0.0]), 1);
        e.for_each_buffer(|lane, buffer, spec, _| {
            buffer.seal(lane, spec, &mut crate::format::codec::Encoder::default());
        });
        let repeats = e.parts_at_rollover(7);
        // Lane 1's episode has not stepped: its reset row starts it in the next shard.
        let parts: Vec<_> = e
            .take_pending()
            .map(|x| (x.summary.lane, x.summary.length, x.summary.episode_return, x.summary.flags))
            .collect();
        assert_eq!(parts, vec![(0, 1, 3.0, FLAG_CONTINUES)]);
        let repeated: Vec<_> = repeats.iter().map(|c| (c.lane, c.column, c.first_row, c.flags)).collect();
        assert_eq!(repeated, vec![(0, 0, 1, CHUNK_REPEAT), (0, 4, 1, CHUNK_REPEAT), (0, 5, 1, CHUNK_REPEAT)]);
        assert_eq!(repeats[0].data, 1.0f64.to_le_bytes());
        e.start_parts(1);
        let ep = e.lanes[0].open.as_ref().unwrap();
        assert_eq!(
            (ep.piece_obs_first_row, ep.piece_step_first_row, ep.piece_return, ep.parts_written),
            (1, 1, 0.0, true)
        );
        // Its end: the whole episode, with the part in the new shard.
        send(&mut e, &step(&[DONE_T, STEP], &[2.0, 6.0], &[1.0, 1.0]), 2);
        send(&mut e, &control(MessageKind::Flush, &[0, 0]), 3);
        let ep = e.lanes[1].open.as_ref().unwrap();
        assert_eq!((ep.first_shard_seq, ep.length), (1, 1));
    }

    #[test]
    fn row_sources_table() {
        use RowKind::*;
        let r = Some(Slot::Regular);
        let f = Some(Slot::Final);
        let cases = [
            // (row, info, seen at reset) -> sources
            ((Regular, true, false), [r, None]),
            ((Regular, false, true), [r, None]),
            ((SameStepFinal, false, true), [f, None]), // observation: final_obs only
            ((SameStepFinal, true, true), [f, None]),  // reset info key: final_info only
            ((SameStepFinal, true, false), [f, r]),    // step info (episode statistics)
            ((SameStepReset, true, true), [r, None]),
            ((SameStepReset, true, false), [None, None]),
            ((SameStepReset, false, true), [r, None]),
        ];
        for ((row, info, seen), want) in cases {
            assert_eq!(row_sources(row, info, seen), want, "{row:?} info={info} seen={seen}");
        }
    }
}
