//! Test helpers: shard files built by hand with the format encoders, and a small recording
//! simulator that knows what every row should read back as.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use trajcore_core::format::chunks::{self, ChunkRef, PendingChunk};
use trajcore_core::format::codec;
use trajcore_core::format::episode::{self, EpisodeSummary, FLAG_COMPLETE, FLAG_TERMINATED};
use trajcore_core::format::header::FileHeader;
use trajcore_core::format::index::{IndexDelta, OtherRecord, NO_PREVIOUS};
use trajcore_core::format::record::{padding_after, RecordHeader, RecordKind};
use trajcore_core::reader::{ColumnData, Dataset};
use trajcore_core::{CodecSpec, ColumnSpec, DType, Role, Timeline};

/// Writes one shard record by record, keeping the index delta a writer would keep.
pub struct ShardBuilder {
    pub buf: Vec<u8>,
    delta: IndexDelta,
    last_index: u64,
    /// (offset, end) of every record, in file order.
    pub records: Vec<(u64, u64)>,
}

impl ShardBuilder {
    pub fn new(recording_id: [u8; 16], shard_seq: u64) -> Self {
        let header = FileHeader::new(recording_id, shard_seq, 1_700_000_000_000_000_000 + shard_seq);
        ShardBuilder {
            buf: header.encode().to_vec(),
            delta: IndexDelta { prev_index: NO_PREVIOUS, ..Default::default() },
            last_index: NO_PREVIOUS,
            records: Vec::new(),
        }
    }

    pub fn offset(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Appends a framed record of any kind; returns its offset.
    pub fn record(&mut self, kind: u32, payload: &[u8]) -> u64 {
        let at = self.offset();
        let header = RecordHeader::new_raw(kind, payload);
        self.buf.extend_from_slice(&header.encode());
        self.buf.extend_from_slice(payload);
        self.buf.resize(self.buf.len() + padding_after(payload.len() as u64), 0);
        self.records.push((at, self.offset()));
        at
    }

    pub fn meta(&mut self, json: &str) -> u64 {
        let at = self.record(RecordKind::Meta as u32, json.as_bytes());
        self.delta.other_records.push(OtherRecord { kind: RecordKind::Meta as u32, offset: at });
        at
    }

    pub fn column(&mut self, spec: &ColumnSpec) -> u64 {
        let at = self.record(RecordKind::Column as u32, &serde_json::to_vec(spec).unwrap());
        self.delta.other_records.push(OtherRecord { kind: RecordKind::Column as u32, offset: at });
        at
    }

    pub fn chunks(&mut self, pending: &[PendingChunk], own_checksums: bool) -> Vec<ChunkRef> {
        let at = self.offset();
        let (payload, refs) =
            if own_checksums { chunks::encode(at, pending) } else { chunks::encode_without_checksums(at, pending) };
        self.record(RecordKind::Chunks as u32, &payload);
        self.delta.chunks.extend(refs.iter().copied());
        refs
    }

    pub fn episode(&mut self, summary: &EpisodeSummary, metadata: &str) -> u64 {
        let mut summary = summary.clone();
        summary.record_offset = self.offset();
        summary.metadata_len = metadata.len() as u32;
        let payload = episode::encode_batch(&[(summary.clone(), metadata.as_bytes(), &[][..])]);
        let at = self.record(RecordKind::Episode as u32, &payload);
        self.delta.episode_records.push(at);
        at
    }

    /// An Index record of everything since the previous one (a 1.0 one: references not packed).
    pub fn index(&mut self) -> u64 {
        let payload = self.delta.encode_with(Default::default());
        let at = self.record(RecordKind::Index as u32, &payload);
        self.last_index = at;
        self.delta = IndexDelta { prev_index: at, ..Default::default() };
        at
    }

    /// A final Index, then the End record.
    pub fn end(&mut self) {
        self.index();
        self.record(RecordKind::End as u32, &self.last_index.to_le_bytes());
    }
}

pub fn spec(id: u32, name: &str, dtype: &str, shape: &[u64], timeline: Timeline, codec: CodecSpec) -> ColumnSpec {
    ColumnSpec {
        id,
        name: name.into(),
        dtype: dtype.into(),
        shape: shape.to_vec(),
        timeline,
        mask_of: None,
        mask: None,
        role: None,
        codec,
        widens: None,
    }
}

pub const RAW: CodecSpec = CodecSpec { delta: false, zstd_level: None, chunk_bytes: None, frame_stack: true };
pub const ZSTD: CodecSpec = CodecSpec { delta: false, zstd_level: Some(3), chunk_bytes: None, frame_stack: true };
pub const DELTA_ZSTD: CodecSpec = CodecSpec { delta: true, zstd_level: Some(3), chunk_bytes: None, frame_stack: true };

/// The columns most tests use: every codec, fixed and str, both timelines, a masked info.
pub fn standard_columns() -> Vec<ColumnSpec> {
    let mut reward = spec(3, "reward", "float64", &[], Timeline::Step, RAW);
    reward.role = Some(Role::Reward);
    let mut terminated = spec(4, "terminated", "bool", &[], Timeline::Step, RAW);
    terminated.role = Some(Role::Terminated);
    let mut msg = spec(5, "info/msg", "str", &[], Timeline::Obs, ZSTD);
    msg.mask = Some(6);
    let mut msg_mask = spec(6, "info/_msg", "bool", &[], Timeline::Obs, RAW);
    msg_mask.mask_of = Some(5);
    vec![
        spec(0, "obs", "float32", &[3], Timeline::Obs, ZSTD),
        spec(1, "obs/img", "uint8", &[4, 4], Timeline::Obs, DELTA_ZSTD),
        spec(2, "action", "int64", &[], Timeline::Step, RAW),
        reward,
        terminated,
        msg,
        msg_mask,
    ]
}

/// The bytes of row `row` of a fixed-size column: slowly varying, so zstd and delta pay off.
pub fn fixed_row(spec: &ColumnSpec, lane: u32, row: u64) -> Vec<u8> {
    let n = spec.row_bytes().unwrap();
    if spec.dtype == "bool" {
        return vec![((row + lane as u64) % 3 == 1) as u8; n];
    }
    (0..n).map(|j| ((row / 3) as u8).wrapping_add(j as u8).wrapping_add((lane * 17 + spec.id * 5) as u8)).collect()
}

pub fn str_row(spec: &ColumnSpec, lane: u32, row: u64) -> String {
    format!("l{lane} c{} r{row}{}", spec.id, "é".repeat((row % 4) as usize))
}

#[derive(Debug, Clone)]
pub struct SimEpisode {
    pub lane: u32,
    pub obs_first_row: u64,
    pub step_first_row: u64,
    pub length: u64,
    pub metadata: String,
    pub shard: usize,
    /// (shard, start, end) of every record this episode needs to be listed and read.
    pub deps: Vec<(usize, u64, u64)>,
    pub ended: bool,
}

#[derive(Default, Clone, Copy)]
struct LaneState {
    obs_rows: u64,
    step_rows: u64,
    /// (obs_first_row, step_first_row, steps) of the running episode.
    /// (obs first row, step first row, length, shard of the first rows)
    open: Option<(u64, u64, u64, u64)>,
}

/// A pending (unsealed) run of rows of one column of one lane.
#[derive(Clone, Copy)]
struct Pending {
    first_row: u64,
    rows: u32,
}

/// Records episodes like a writer would (chunks sealed by size or on `flush`, Episode records
/// only after their rows are written), and knows every value.
pub struct Sim {
    pub id: [u8; 16],
    pub columns: Vec<ColumnSpec>,
    /// First row from which a column holds values, per (lane, column); 0 if absent.
    start_rows: HashMap<(u32, u32), u64>,
    lanes: Vec<LaneState>,
    pending: HashMap<(u32, u32), Pending>,
    sealed: Vec<PendingChunk>,
    queued: Vec<(usize, EpisodeSummary)>,
    pub chunk_rows: u32,
    /// Largest chunks record, in chunks.
    pub max_chunks_per_record: usize,
    /// Whether chunks carry their own checksums (`CHUNK_CHECKSUM`, as today's writer writes
    /// them); false writes them as a 1.0 writer did.
    pub own_checksums: bool,
    pub shards: Vec<ShardBuilder>,
    /// (shard, lane, column, first_row, end_row, record start, record end).
    chunk_log: Vec<(usize, u32, u32, u64, u64, u64, u64)>,
    /// (shard, end offset) of the last Meta/Column record of each shard start.
    schema_end: Vec<u64>,
    pub episodes: Vec<SimEpisode>,
    pub codecs: std::collections::BTreeSet<u32>,
    next_episode_id: u64,
}

impl Sim {
    pub fn new(id: u8, lanes: usize, columns: Vec<ColumnSpec>, chunk_rows: u32) -> Sim {
        let mut sim = Sim {
            id: [id; 16],
            columns,
            start_rows: HashMap::new(),
            lanes: vec![LaneState::default(); lanes],
            pending: HashMap::new(),
            sealed: Vec::new(),
            queued: Vec::new(),
            chunk_rows,
            max_chunks_per_record: 16,
            own_checksums: true,
            shards: Vec::new(),
            chunk_log: Vec::new(),
            schema_end: Vec::new(),
            episodes: Vec::new(),
            codecs: Default::default(),
            next_episode_id: 0,
        };
        sim.start_shard();
        sim
    }

    fn start_shard(&mut self) {
        let mut b = ShardBuilder::new(self.id, self.shards.len() as u64);
        b.meta(&format!(r#"{{"metadata": {{"sim": {}}}, "layout": {{}}}}"#, self.id[0]));
        for c in &self.columns {
            b.column(c);
        }
        self.schema_end.push(b.offset());
        self.shards.push(b);
    }

    pub fn cur(&mut self) -> &mut ShardBuilder {
        self.shards.last_mut().unwrap()
    }

    fn cur_index(&self) -> usize {
        self.shards.len() - 1
    }

    /// Adds a column mid-recording (like a new info key); earlier rows read as zeros.
    pub fn add_column(&mut self, mut spec: ColumnSpec) -> u32 {
        spec.id = self.columns.len() as u32;
        for (lane, state) in self.lanes.iter().enumerate() {
            let rows = match spec.timeline {
                Timeline::Obs => state.obs_rows,
                Timeline::Step => state.step_rows,
            };
            self.start_rows.insert((lane as u32, spec.id), rows);
        }
        self.cur().column(&spec);
        self.columns.push(spec);
        self.columns.len() as u32 - 1
    }

    /// Adds a masked column and its mask mid-recording (a new info key).
    pub fn add_masked(&mut self, name: &str, dtype: &str, shape: &[u64], timeline: Timeline, codec: CodecSpec) {
        let id = self.columns.len() as u32;
        let mut value = spec(id, name, dtype, shape, timeline, codec);
        value.mask = Some(id + 1);
        let (head, key) = name.rsplit_once('/').unwrap();
        let mut mask = spec(id + 1, &format!("{head}/_{key}"), "bool", &[], timeline, RAW);
        mask.mask_of = Some(id);
        self.add_column(value);
        self.add_column(mask);
    }

    fn push_row(&mut self, lane: u32, timeline: Timeline) {
        let state = &mut self.lanes[lane as usize];
        let row = match timeline {
            Timeline::Obs => &mut state.obs_rows,
            Timeline::Step => &mut state.step_rows,
        };
        let this_row = *row;
        *row += 1;
        let ids: Vec<u32> = self.columns.iter().filter(|c| c.timeline == timeline).map(|c| c.id).collect();
        for col in ids {
            let start = self.start_rows.get(&(lane, col)).copied().unwrap_or(0);
            if this_row < start {
                continue;
            }
            let p = self.pending.entry((lane, col)).or_insert(Pending { first_row: this_row, rows: 0 });
            p.rows += 1;
            if p.rows >= self.chunk_rows {
                self.seal(lane, col);
            }
        }
    }

    fn seal(&mut self, lane: u32, col: u32) {
        let Some(p) = self.pending.remove(&(lane, col)) else { return };
        if p.rows == 0 {
            return;
        }
        let spec = &self.columns[col as usize];
        let raw = raw_rows(spec, lane, p.first_row, p.rows as u64);
        let (codec, data) = codec::encode(&spec.codec, spec.row_layout(), &raw);
        self.codecs.insert(codec);
        self.sealed.push(PendingChunk {
            lane,
            column: col,
            first_row: p.first_row,
            n_rows: p.rows,
            codec,
            raw_len: raw.len() as u64,
            data,
            flags: 0,
        });
        self.pending.insert((lane, col), Pending { first_row: p.first_row + p.rows as u64, rows: 0 });
        if self.sealed.len() >= self.max_chunks_per_record {
            self.write_sealed();
        }
    }

    fn write_sealed(&mut self) {
        if self.sealed.is_empty() {
            return;
        }
        let sealed = std::mem::take(&mut self.sealed);
        let shard = self.cur_index();
        let own_checksums = self.own_checksums;
        let refs = self.cur().chunks(&sealed, own_checksums);
        let (start, end) = *self.cur().records.last().unwrap();
        for r in refs {
            self.chunk_log.push((shard, r.lane, r.column, r.first_row, r.end_row(), start, end));
        }
    }

    /// One step in `lane`; starts an episode (with its reset row) if none runs.
    pub fn step(&mut self, lane: u32) {
        if self.lanes[lane as usize].open.is_none() {
            let s = self.lanes[lane as usize];
            let shard = self.cur_index() as u64;
            self.lanes[lane as usize].open = Some((s.obs_rows, s.step_rows, 0, shard));
            self.push_row(lane, Timeline::Obs);
        }
        self.push_row(lane, Timeline::Step);
        self.push_row(lane, Timeline::Obs);
        if let Some(open) = &mut self.lanes[lane as usize].open {
            open.2 += 1;
        }
    }

    pub fn steps(&mut self, lane: u32, n: u64) {
        for _ in 0..n {
            self.step(lane);
        }
    }

    /// Ends the episode running in `lane`; its record is written at the next `flush`.
    pub fn end_episode(&mut self, lane: u32, metadata: &str) {
        let (obs_first_row, step_first_row, length, first_shard) =
            self.lanes[lane as usize].open.take().expect("no episode");
        let summary = EpisodeSummary {
            lane,
            flags: FLAG_COMPLETE | FLAG_TERMINATED,
            obs_first_row,
            step_first_row,
            length,
            episode_return: length as f64 * 0.5,
            start_ns: 10,
            end_ns: 20 + length,
            episode_id: self.next_episode_id,
            record_offset: 0,
            metadata_len: 0,
            position: 0,
            metrics_len: 0,
            piece_obs_first_row: obs_first_row,
            piece_step_first_row: step_first_row,
            piece_return: length as f64 * 0.5,
            first_shard_seq: first_shard,
            metrics: Vec::new(),
        };
        self.next_episode_id += 1;
        self.episodes.push(SimEpisode {
            lane,
            obs_first_row,
            step_first_row,
            length,
            metadata: metadata.into(),
            shard: usize::MAX,
            deps: Vec::new(),
            ended: false,
        });
        self.queued.push((self.episodes.len() - 1, summary));
    }

    /// Seals every buffered row into chunks, writes them, then the queued Episode records.
    pub fn flush(&mut self) {
        let mut keys: Vec<(u32, u32)> = self.pending.keys().copied().collect();
        keys.sort();
        for (lane, col) in keys {
            self.seal(lane, col);
        }
        self.write_sealed();
        let shard = self.cur_index();
        for (i, summary) in std::mem::take(&mut self.queued) {
            let meta = self.episodes[i].metadata.clone();
            let at = self.cur().episode(&summary, &meta);
            let end = self.cur().offset();
            let e = &mut self.episodes[i];
            e.shard = shard;
            e.ended = true;
            e.deps.push((shard, at, end));
        }
    }

    pub fn index(&mut self) {
        self.cur().index();
    }

    /// Closes the current shard (flush, Index, End) and starts the next one.
    pub fn next_shard(&mut self) {
        self.flush();
        self.cur().end();
        self.start_shard();
    }

    /// Flushes and closes the last shard (`clean`: Index + End; otherwise left as a killed
    /// writer leaves it). Returns the shard files' bytes.
    pub fn finish(&mut self, clean: bool) -> Vec<Vec<u8>> {
        self.flush();
        if clean {
            self.cur().end();
        }
        self.compute_deps();
        self.shards.iter().map(|s| s.buf.clone()).collect()
    }

    fn compute_deps(&mut self) {
        for e in &mut self.episodes {
            if !e.ended {
                continue;
            }
            e.deps.truncate(1);
            e.deps.push((e.shard, 0, self.schema_end[e.shard]));
            for &(shard, lane, col, first, end, a, b) in &self.chunk_log {
                let spec = &self.columns[col as usize];
                let (lo, n) = match spec.timeline {
                    Timeline::Obs => (e.obs_first_row, e.length + 1),
                    Timeline::Step => (e.step_first_row, e.length),
                };
                if lane == e.lane && first < lo + n && lo < end {
                    e.deps.push((shard, a, b));
                }
            }
        }
    }

    /// Written episodes, in the order a reader lists them (shard by shard, record order).
    pub fn listed(&self) -> Vec<&SimEpisode> {
        let mut v: Vec<&SimEpisode> = self.episodes.iter().filter(|e| e.ended).collect();
        v.sort_by_key(|e| (e.shard, e.deps[0].1));
        v
    }

    /// What a column of an episode should read as.
    pub fn expected(&self, e: &SimEpisode, spec: &ColumnSpec) -> ColumnData {
        let (first, n) = match spec.timeline {
            Timeline::Obs => (e.obs_first_row, e.length + 1),
            Timeline::Step => (e.step_first_row, e.length),
        };
        let start = self.start_rows.get(&(e.lane, spec.id)).copied().unwrap_or(0);
        if spec.dtype == "str" {
            return ColumnData::Strings(
                (first..first + n).map(|r| if r < start { String::new() } else { str_row(spec, e.lane, r) }).collect(),
            );
        }
        let mut bytes = Vec::new();
        for r in first..first + n {
            if r < start {
                bytes.resize(bytes.len() + spec.row_bytes().unwrap(), 0);
            } else {
                bytes.extend(fixed_row(spec, e.lane, r));
            }
        }
        let mut shape = vec![n as usize];
        shape.extend(spec.shape.iter().map(|&d| d as usize));
        ColumnData::Fixed { dtype: DType::from_name(&spec.dtype).unwrap(), shape, bytes }
    }

    /// Expected data of a column the reader does not know (its Column record was lost or not
    /// yet written): only acceptable when every row of the episode predates the column.
    pub fn predates(&self, e: &SimEpisode, spec: &ColumnSpec) -> bool {
        let (first, n) = match spec.timeline {
            Timeline::Obs => (e.obs_first_row, e.length + 1),
            Timeline::Step => (e.step_first_row, e.length),
        };
        first + n <= self.start_rows.get(&(e.lane, spec.id)).copied().unwrap_or(0)
    }
}

/// Raw chunk bytes of rows `first..first+n` (str: offsets then text).
pub fn raw_rows(spec: &ColumnSpec, lane: u32, first: u64, n: u64) -> Vec<u8> {
    if spec.dtype == "str" {
        let texts: Vec<String> = (first..first + n).map(|r| str_row(spec, lane, r)).collect();
        let mut raw = Vec::new();
        let mut end = 0u64;
        raw.extend_from_slice(&0u64.to_le_bytes());
        for t in &texts {
            end += t.len() as u64;
            raw.extend_from_slice(&end.to_le_bytes());
        }
        for t in &texts {
            raw.extend_from_slice(t.as_bytes());
        }
        raw
    } else {
        (first..first + n).flat_map(|r| fixed_row(spec, lane, r)).collect()
    }
}

/// Checks every episode the dataset lists against the simulator, value by value, in order.
/// `listed` are the simulator episodes expected, in dataset order.
pub fn check_values(ds: &Dataset, sim: &Sim, listed: &[&SimEpisode]) {
    assert_eq!(ds.episodes().len(), listed.len(), "episode count; problems: {:?}", ds.problems());
    for (i, e) in listed.iter().enumerate() {
        let got = &ds.episodes()[i].summary;
        assert_eq!((got.lane, got.obs_first_row, got.length), (e.lane, e.obs_first_row, e.length), "episode {i}");
        for spec in &sim.columns {
            match ds.column_id(ds.episodes()[i].recording, &spec.name) {
                Some(_) => {
                    let data = ds.view().read_episode_column(i, &spec.name).unwrap();
                    assert_eq!(data, sim.expected(e, spec), "episode {i} column {}", spec.name);
                }
                None => assert!(sim.predates(e, spec), "episode {i}: column {} unknown", spec.name),
            }
        }
        let meta = ds.view().episode_metadata(i).unwrap();
        assert_eq!(meta, if e.metadata.is_empty() { "{}" } else { &e.metadata });
    }
}

/// Like `check_values`, but a listed episode may fail to read with `Corrupt` (damage the open
/// could not see): what reads must read right. Returns whether a read failed.
pub fn check_values_or_corrupt(ds: &Dataset, sim: &Sim) -> bool {
    let mut failed = false;
    for (i, got) in ds.episodes().iter().enumerate() {
        let s = &got.summary;
        let e = sim
            .episodes
            .iter()
            .find(|e| {
                e.ended
                    && (e.lane, e.obs_first_row, e.step_first_row, e.length)
                        == (s.lane, s.obs_first_row, s.step_first_row, s.length)
            })
            .unwrap_or_else(|| panic!("episode {i} ({s:?}) was never written"));
        for spec in &sim.columns {
            if ds.column_id(got.recording, &spec.name).is_none() {
                continue;
            }
            match ds.view().read_episode_column(i, &spec.name) {
                Ok(data) => assert_eq!(data, sim.expected(e, spec), "episode {i} column {}", spec.name),
                Err(trajcore_core::Error::Corrupt { .. }) => failed = true,
                Err(other) => panic!("episode {i} column {}: unexpected error {other}", spec.name),
            }
        }
    }
    failed
}

pub fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

/// A small recording: one lane, a few short episodes, chunks spanning episode boundaries,
/// a mid-file index checkpoint and a column added midway.
pub fn small_sim(clean: bool) -> (Sim, Vec<u8>) {
    let mut sim = Sim::new(7, 1, standard_columns(), 4);
    sim.max_chunks_per_record = 3;
    for (i, len) in [3u64, 1, 5].into_iter().enumerate() {
        sim.steps(0, len);
        sim.end_episode(0, if i == 1 { "" } else { r#"{"i": 1}"# });
    }
    sim.flush();
    sim.index();
    sim.add_masked("info/extra", "int16", &[2], Timeline::Obs, RAW);
    sim.steps(0, 2);
    sim.end_episode(0, r#"{"last": true}"#);
    let shards = sim.finish(clean);
    (sim, shards.into_iter().next().unwrap())
}
