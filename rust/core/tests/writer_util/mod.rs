//! Shared by the `writer_*` tests: a harness that drives the real `Recorder` the way the Python
//! bindings do (one message per reset/step, entries built as `writer::entries::call_values` builds
//! them) and, beside it, a plain model of which per-env episodes those calls should produce.
//! The model is written from the documented semantics, not from the writer thread's code, so
//! comparing the two checks the writer.
#![allow(dead_code)]

use std::path::Path;

use serde_json::{json, Value};
use trajcore_core::reader::{ColumnData, Dataset, OpenOptions};
use trajcore_core::writer::{
    AutoresetMode, EntryKind, EntryRef, MessageKind, NewColumn, Recorder, RecorderConfig, Slot,
};
use trajcore_core::{CodecSpec, ColumnId, DType, Timeline};

pub const OBS_DIM: usize = 3;
pub type Obs = [f32; OBS_DIM];

/// A recorder config with an `obs` float32[3] column and an `action` int64 column; `extra` is
/// merged over the defaults (as the Python side sends options).
pub fn config(num_envs: u32, batched: bool, mode: &str, extra: Value) -> RecorderConfig {
    let mut c = json!({
        "num_envs": num_envs,
        "batched": batched,
        "autoreset_mode": mode,
        "columns": [
            {"id": 0, "name": "obs", "dtype": "float32", "shape": [OBS_DIM], "timeline": "obs",
             "codec": {"delta": true, "zstd_level": 3}},
            {"id": 0, "name": "action", "dtype": "int64", "shape": [], "timeline": "step",
             "codec": {"zstd_level": null}},
        ],
        "observation": {"leaf": "obs"},
        "action": {"leaf": "action"},
        "metadata": {"suite": "writer"},
        "chunk_bytes": 256,
        "flush_interval_s": 30.0,
    });
    for (k, v) in extra.as_object().expect("extra is an object") {
        c[k] = v.clone();
    }
    RecorderConfig::from_json(&c.to_string()).expect("valid config")
}

/// What one env gives at one step (or reset).
#[derive(Debug, Clone, Default)]
pub struct EnvStep {
    pub obs: Obs,
    pub action: i64,
    pub reward: f64,
    pub terminated: bool,
    pub truncated: bool,
    pub info_n: Option<i32>,
    pub info_s: Option<String>,
    /// Same-step autoreset: the final observation / info of the episode that ended at this step.
    pub final_obs: Option<Obs>,
    pub final_info_n: Option<i32>,
}

/// An episode as the reader should list it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpEpisode {
    pub lane: u32,
    pub obs: Vec<Obs>,
    pub info_n: Vec<Option<i32>>,
    pub info_s: Vec<Option<String>>,
    pub actions: Vec<i64>,
    pub rewards: Vec<f64>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    pub complete: bool,
    pub end_terminated: bool,
    pub end_truncated: bool,
    pub metadata: serde_json::Map<String, Value>,
    /// Its number: episodes are numbered in the order they start (also those that never step).
    pub id: u64,
}

impl ExpEpisode {
    pub fn len(&self) -> usize {
        self.actions.len()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum LaneModel {
    Idle,
    Running(Box<ExpEpisode>),
    Ended,
    Skipping,
}

/// The model: episodes per env from the documented semantics of the autoreset modes.
pub struct Model {
    mode: AutoresetMode,
    lanes: Vec<LaneModel>,
    /// Finished episodes in the order they ended (the order the reader lists them); `None`
    /// for one discarded after it ended.
    pub finished: Vec<Option<ExpEpisode>>,
    /// Per lane: the episode (in `finished`) that ended at the last reset or step call, which
    /// `discard` and metadata reach until the next call.
    held: Vec<Option<usize>>,
    /// Whether a reset ever gave info/n, info/s: with same-step autoreset, an info the reset
    /// never gives describes the ending step (its final row), not the new episode.
    seen_at_reset: [bool; 2],
    next_id: u64,
}

impl Model {
    fn new(n: usize, mode: AutoresetMode) -> Self {
        Model {
            mode,
            lanes: vec![LaneModel::Idle; n],
            finished: Vec::new(),
            held: vec![None; n],
            seen_at_reset: [false; 2],
            next_id: 0,
        }
    }

    /// Any reset or step: what ended at the previous one is settled.
    fn settle(&mut self) {
        self.held.iter_mut().for_each(|h| *h = None);
    }

    fn begin(&mut self, lane: usize, obs: Obs, info_n: Option<i32>, info_s: Option<String>) {
        let id = self.next_id;
        self.next_id += 1;
        let ep = ExpEpisode {
            id,
            lane: lane as u32,
            obs: vec![obs],
            info_n: vec![info_n],
            info_s: vec![info_s],
            ..Default::default()
        };
        self.lanes[lane] = LaneModel::Running(Box::new(ep));
    }

    /// Ends the lane's running episode; returns its place in `finished` (none without a step).
    fn finish(&mut self, lane: usize, complete: bool, terminated: bool, truncated: bool) -> Option<usize> {
        if let LaneModel::Running(mut ep) = std::mem::replace(&mut self.lanes[lane], LaneModel::Ended) {
            if ep.len() > 0 {
                ep.complete = complete;
                ep.end_terminated = terminated;
                ep.end_truncated = truncated;
                self.finished.push(Some(*ep));
                return Some(self.finished.len() - 1);
            }
        }
        None
    }

    fn reset(&mut self, lane: usize, s: &EnvStep) {
        self.finish(lane, false, false, false);
        if s.info_n.is_some() {
            self.seen_at_reset[0] = true;
        }
        if s.info_s.is_some() {
            self.seen_at_reset[1] = true;
        }
        self.begin(lane, s.obs, s.info_n, s.info_s.clone());
    }

    fn step(&mut self, lane: usize, s: &EnvStep) {
        let done = s.terminated || s.truncated;
        let same_step = self.mode == AutoresetMode::SameStep;
        let [n_at_reset, s_at_reset] = self.seen_at_reset;
        match &mut self.lanes[lane] {
            LaneModel::Running(ep) => {
                ep.actions.push(s.action);
                ep.rewards.push(s.reward);
                ep.terminated.push(s.terminated);
                ep.truncated.push(s.truncated);
                if done && same_step {
                    ep.obs.push(s.final_obs.unwrap_or_default());
                    // final_info first; a step info (never given at reset) also belongs here.
                    ep.info_n.push(s.final_info_n.or(if n_at_reset { None } else { s.info_n }));
                    ep.info_s.push(if s_at_reset { None } else { s.info_s.clone() });
                } else {
                    ep.obs.push(s.obs);
                    ep.info_n.push(s.info_n);
                    ep.info_s.push(s.info_s.clone());
                }
                if done {
                    self.held[lane] = self.finish(lane, true, s.terminated, s.truncated);
                    if same_step {
                        let info_n = if n_at_reset { s.info_n } else { None };
                        let info_s = if s_at_reset { s.info_s.clone() } else { None };
                        self.begin(lane, s.obs, info_n, info_s);
                    }
                }
            }
            LaneModel::Ended if self.mode == AutoresetMode::NextStep => {
                self.begin(lane, s.obs, s.info_n, s.info_s.clone());
            }
            LaneModel::Skipping if done => {
                self.lanes[lane] = LaneModel::Ended;
                if same_step {
                    let info_n = if n_at_reset { s.info_n } else { None };
                    let info_s = if s_at_reset { s.info_s.clone() } else { None };
                    self.begin(lane, s.obs, info_n, info_s);
                }
            }
            _ => {}
        }
    }

    fn abort(&mut self, lane: usize) {
        if matches!(self.lanes[lane], LaneModel::Running(_)) {
            self.finish(lane, false, false, false);
            self.lanes[lane] = LaneModel::Skipping;
        }
    }

    fn discard(&mut self, lane: usize) {
        if let Some(i) = self.held[lane].take() {
            self.finished[i] = None;
        } else if matches!(self.lanes[lane], LaneModel::Running(_)) {
            self.lanes[lane] = LaneModel::Skipping;
        }
    }

    fn set_metadata(&mut self, lane: usize, update: &serde_json::Map<String, Value>) {
        if let Some(i) = self.held[lane] {
            self.finished[i].as_mut().expect("held").metadata.extend(update.clone());
        } else if let LaneModel::Running(ep) = &mut self.lanes[lane] {
            ep.metadata.extend(update.clone());
        } else {
            panic!("the model has no episode in lane {lane} for metadata");
        }
    }

    /// Episodes as the reader lists them.
    pub fn listed(&self) -> Vec<ExpEpisode> {
        self.finished.iter().flatten().cloned().collect()
    }

    fn close(&mut self) {
        for lane in 0..self.lanes.len() {
            self.finish(lane, false, false, false);
        }
    }

    pub fn is_running(&self, lane: usize) -> bool {
        matches!(self.lanes[lane], LaneModel::Running(_))
    }

    pub fn running_len(&self, lane: usize) -> usize {
        match &self.lanes[lane] {
            LaneModel::Running(ep) => ep.len(),
            _ => 0,
        }
    }
}

/// The real recorder and the model, driven together.
pub struct Harness {
    pub rec: Recorder,
    pub model: Model,
    pub n: usize,
    batched: bool,
    pub info_n: Option<ColumnId>,
    pub info_s: Option<ColumnId>,
    obs_col: ColumnId,
    action_col: ColumnId,
    roles: [ColumnId; 3],
    time_ns: u64,
}

fn str_row(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// One entry's owned bytes, before borrowing into `EntryRef`s.
struct Owned {
    column: ColumnId,
    kind: EntryKind,
    slot: Slot,
    env: u32,
    mask: Option<Vec<u8>>,
    data: Vec<u8>,
}

impl Harness {
    pub fn new(dir: &Path, config: RecorderConfig) -> Self {
        let n = config.num_envs as usize;
        let batched = config.batched;
        let mode = config.autoreset_mode;
        let rec = Recorder::create(dir, config).expect("recorder");
        let roles = rec.role_columns();
        let (obs_col, action_col) = (rec.column_id("obs").unwrap(), rec.column_id("action").unwrap());
        Harness {
            rec,
            model: Model::new(n, mode),
            n,
            batched,
            info_n: None,
            info_s: None,
            obs_col,
            action_col,
            roles,
            time_ns: 1_000,
        }
    }

    /// Adds the info columns (`info/n` int32 and `info/s` str, each with its mask).
    pub fn add_info_columns(&mut self) {
        let new = |name: &str, dtype| NewColumn {
            name: name.into(),
            dtype,
            shape: vec![],
            timeline: Timeline::Obs,
            masked: true,
            codec: CodecSpec::default(),
            widens: None,
        };
        self.info_n = Some(self.rec.add_column(new("info/n", DType::I32)).unwrap());
        self.info_s = Some(self.rec.add_column(new("info/s", DType::Utf8)).unwrap());
    }

    /// Entries for one fixed-size column over the envs `which` selects: Dense when every env
    /// has a value (or the recorder is unbatched), Masked otherwise, nothing when none has.
    fn fixed_entry(&self, column: ColumnId, slot: Slot, rows: Vec<Option<Vec<u8>>>, row_len: usize) -> Option<Owned> {
        if rows.iter().all(Option::is_none) {
            return None;
        }
        let mask: Vec<u8> = rows.iter().map(|r| r.is_some() as u8).collect();
        let mut data = Vec::new();
        for r in &rows {
            match r {
                Some(b) => data.extend_from_slice(b),
                None => data.resize(data.len() + row_len, 0),
            }
        }
        let all = mask.iter().all(|&m| m == 1);
        let (kind, mask) =
            if all || !self.batched { (EntryKind::Dense, None) } else { (EntryKind::Masked, Some(mask)) };
        Some(Owned { column, kind, slot, env: 0, mask, data })
    }

    fn str_entry(&self, column: ColumnId, rows: Vec<Option<String>>) -> Option<Owned> {
        if rows.iter().all(Option::is_none) {
            return None;
        }
        let mask: Vec<u8> = rows.iter().map(|r| r.is_some() as u8).collect();
        let mut data = Vec::new();
        for r in &rows {
            str_row(&mut data, r.as_deref().unwrap_or(""));
        }
        let all = mask.iter().all(|&m| m == 1);
        let (kind, mask) =
            if all || !self.batched { (EntryKind::Dense, None) } else { (EntryKind::Masked, Some(mask)) };
        Some(Owned { column, kind, slot: Slot::Regular, env: 0, mask, data })
    }

    fn obs_entries(&self, envs: &[EnvStep], out: &mut Vec<Owned>) {
        let obs: Vec<Option<Vec<u8>>> = envs.iter().map(|e| Some(obs_bytes(&e.obs))).collect();
        out.extend(self.fixed_entry(self.obs_col, Slot::Regular, obs, OBS_DIM * 4));
        if let Some(col) = self.info_n {
            let rows = envs.iter().map(|e| e.info_n.map(|v| v.to_le_bytes().to_vec())).collect();
            out.extend(self.fixed_entry(col, Slot::Regular, rows, 4));
        }
        if let Some(col) = self.info_s {
            out.extend(self.str_entry(col, envs.iter().map(|e| e.info_s.clone()).collect()));
        }
    }

    fn send(&mut self, kind: MessageKind, head_mask: Option<&[u8]>, owned: &[Owned]) {
        self.time_ns += 1_000;
        self.model.settle();
        let entries: Vec<EntryRef> = owned
            .iter()
            .map(|o| EntryRef {
                column: o.column,
                kind: o.kind,
                slot: o.slot,
                env: o.env,
                mask: o.mask.as_deref(),
                data: &o.data,
            })
            .collect();
        let len = match kind {
            MessageKind::Reset => self.rec.plan_reset(&entries, head_mask).unwrap(),
            _ => self.rec.plan_step(&entries).unwrap(),
        };
        self.rec.wait_for_space(len).unwrap();
        self.rec.send_planned(&entries, self.time_ns).unwrap();
    }

    /// What the model should see: no info values while the info columns do not exist.
    fn visible(&self, envs: &[EnvStep]) -> Vec<EnvStep> {
        let mut v = envs.to_vec();
        for e in &mut v {
            if self.info_n.is_none() {
                (e.info_n, e.final_info_n) = (None, None);
            }
            if self.info_s.is_none() {
                e.info_s = None;
            }
        }
        v
    }

    /// Episode `k` of one env: `1 + (k * 7) % 23` steps after `tick`, the last terminated, then
    /// a reset (lengths 1..23, most running over a rollover of small shards); returns its length.
    pub fn one_env_episode(&mut self, k: u64, tick: &mut u64) -> u64 {
        let len = 1 + (k * 7) % 23;
        for t in 1..=len {
            *tick += 1;
            let mut s = env_step(0, *tick);
            s.terminated = t == len;
            self.step(&[s]);
        }
        *tick += 1;
        self.reset(&[env_step(0, *tick)], None);
        len
    }

    /// Resets every env (`mask` None) or the masked ones; `envs` has one entry per env.
    pub fn reset(&mut self, envs: &[EnvStep], mask: Option<&[bool]>) {
        assert_eq!(envs.len(), self.n);
        let envs = &self.visible(envs);
        let mut owned = Vec::new();
        self.obs_entries(envs, &mut owned);
        let head_mask: Option<Vec<u8>> = mask.map(|m| m.iter().map(|&b| b as u8).collect());
        self.send(MessageKind::Reset, head_mask.as_deref(), &owned);
        for (lane, e) in envs.iter().enumerate() {
            if mask.is_none_or(|m| m[lane]) {
                self.model.reset(lane, e);
            }
        }
    }

    pub fn step(&mut self, envs: &[EnvStep]) {
        assert_eq!(envs.len(), self.n);
        let envs = &self.visible(envs);
        let mut owned = Vec::new();
        let actions = envs.iter().map(|e| Some(e.action.to_le_bytes().to_vec())).collect();
        owned.extend(self.fixed_entry(self.action_col, Slot::Regular, actions, 8));
        self.obs_entries(envs, &mut owned);
        let [r, te, tr] = self.roles;
        owned.extend(self.fixed_entry(
            r,
            Slot::Regular,
            envs.iter().map(|e| Some(e.reward.to_le_bytes().to_vec())).collect(),
            8,
        ));
        owned.extend(self.fixed_entry(
            te,
            Slot::Regular,
            envs.iter().map(|e| Some(vec![e.terminated as u8])).collect(),
            1,
        ));
        owned.extend(self.fixed_entry(
            tr,
            Slot::Regular,
            envs.iter().map(|e| Some(vec![e.truncated as u8])).collect(),
            1,
        ));
        // Same-step autoreset: final observations one env at a time, final infos masked.
        for (env, e) in envs.iter().enumerate() {
            if let Some(obs) = e.final_obs {
                let data = obs_bytes(&obs);
                owned.push(Owned {
                    column: self.obs_col,
                    kind: EntryKind::PerEnv,
                    slot: Slot::Final,
                    env: env as u32,
                    mask: None,
                    data,
                });
            }
        }
        if let Some(col) = self.info_n {
            let rows = envs.iter().map(|e| e.final_info_n.map(|v| v.to_le_bytes().to_vec())).collect();
            owned.extend(self.fixed_entry(col, Slot::Final, rows, 4));
        }
        self.send(MessageKind::Step, None, &owned);
        for (lane, e) in envs.iter().enumerate() {
            self.model.step(lane, e);
        }
    }

    pub fn abort(&mut self, env: Option<u32>) {
        self.rec.abort(env.map(Into::into)).unwrap();
        match env {
            Some(e) => self.model.abort(e as usize),
            None => (0..self.n).for_each(|l| self.model.abort(l)),
        }
    }

    pub fn discard(&mut self, env: u32) {
        self.rec.discard(env.into()).unwrap();
        self.model.discard(env as usize);
    }

    pub fn set_metadata(&mut self, env: u32, update: Value) {
        self.rec.set_episode_metadata(env.into(), &update.to_string()).unwrap();
        self.model.set_metadata(env as usize, update.as_object().unwrap());
    }

    /// Closes the recorder; returns the episodes the reader should list, in order.
    pub fn close(mut self) -> Vec<ExpEpisode> {
        self.rec.close().unwrap();
        self.model.close();
        self.model.listed()
    }
}

pub fn obs_bytes(obs: &Obs) -> Vec<u8> {
    obs.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A deterministic "env": values that differ per (lane, tick) so any misplaced row shows.
pub fn env_step(lane: usize, tick: u64) -> EnvStep {
    let base = (tick * 16 + lane as u64) as f32;
    EnvStep {
        obs: [base, -base, base * 0.5 + 0.25],
        action: (tick as i64) * 100 + lane as i64,
        reward: 0.5 + tick as f64 * 0.001 + lane as f64,
        info_n: (tick % 3 != 1).then_some((tick * 10 + lane as u64) as i32),
        info_s: (tick % 4 != 2).then(|| format!("t{tick}é{}", "x".repeat(lane + (tick % 5) as usize))),
        ..Default::default()
    }
}

/// Per-lane episode clocks for the mixed recordings of several tests: lane `l`'s episode ends at
/// its step `length(l, tick)` (terminated on even ticks, truncated on odd), and its next step is
/// the lane's autoreset step (next-step mode).
pub struct EpisodeClocks {
    steps: Vec<usize>,
    resetting: Vec<bool>,
}

impl EpisodeClocks {
    pub fn new(lanes: usize) -> Self {
        EpisodeClocks { steps: vec![0; lanes], resetting: vec![false; lanes] }
    }

    /// The env steps of `tick` (`env_step`), with the episodes that end there flagged.
    pub fn steps(&mut self, tick: u64, length: impl Fn(usize, u64) -> usize) -> Vec<EnvStep> {
        let mut envs: Vec<EnvStep> = (0..self.steps.len()).map(|l| env_step(l, tick)).collect();
        for (lane, s) in envs.iter_mut().enumerate() {
            if std::mem::take(&mut self.resetting[lane]) {
                self.steps[lane] = 0;
                continue;
            }
            self.steps[lane] += 1;
            if self.steps[lane] >= length(lane, tick) {
                (s.terminated, s.truncated) = (tick.is_multiple_of(2), !tick.is_multiple_of(2));
                self.resetting[lane] = true;
            }
        }
        envs
    }

    /// The lane's episode was ended from outside (an abort): its next step resets it.
    pub fn ended(&mut self, lane: usize) {
        self.resetting[lane] = true;
    }
}

pub fn open(path: &Path) -> Dataset {
    Dataset::open(path, OpenOptions::default()).expect("open")
}

fn fixed(data: ColumnData) -> (Vec<usize>, Vec<u8>) {
    match data {
        ColumnData::Fixed { shape, bytes, .. } => (shape, bytes),
        ColumnData::Strings(_) => panic!("expected a fixed-size column"),
    }
}

fn strings(data: ColumnData) -> Vec<String> {
    match data {
        ColumnData::Strings(s) => s,
        ColumnData::Fixed { .. } => panic!("expected a str column"),
    }
}

/// Checks that the dataset has no problems and lists exactly `expected`, value by value.
pub fn check(ds: &Dataset, expected: &[ExpEpisode]) {
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    check_listed(ds, expected);
}

/// Checks every listed episode against the model, value by value, in order.
pub fn check_listed(ds: &Dataset, expected: &[ExpEpisode]) {
    let listed = ds.episodes();
    assert_eq!(listed.len(), expected.len(), "episode count");
    assert_eq!(ds.num_steps(), expected.iter().map(|e| e.len() as u64).sum::<u64>());
    for (i, (got, exp)) in listed.iter().zip(expected).enumerate() {
        let s = &got.summary;
        let t = exp.len();
        assert_eq!((s.lane, s.length as usize), (exp.lane, t), "episode {i}: lane, length");
        assert_eq!(
            (s.complete(), s.terminated(), s.truncated()),
            (exp.complete, exp.end_terminated, exp.end_truncated),
            "episode {i}: flags"
        );
        assert_eq!(s.episode_id, exp.id, "episode {i}: id");
        let sum = exp.rewards.iter().fold(0.0f64, |a, r| a + r);
        assert_eq!(s.episode_return.to_bits(), sum.to_bits(), "episode {i}: return");
        assert!(s.start_ns <= s.end_ns);

        let (shape, bytes) = fixed(ds.view().read_episode_column(i, "obs").unwrap());
        assert_eq!(shape, vec![t + 1, OBS_DIM], "episode {i}: obs shape");
        assert_eq!(bytes, exp.obs.iter().flat_map(obs_bytes).collect::<Vec<_>>(), "episode {i}: obs");
        let (shape, bytes) = fixed(ds.view().read_episode_column(i, "action").unwrap());
        assert_eq!(shape, vec![t]);
        assert_eq!(bytes, exp.actions.iter().flat_map(|a| a.to_le_bytes()).collect::<Vec<_>>(), "episode {i}: action");
        let (_, bytes) = fixed(ds.view().read_episode_column(i, "reward").unwrap());
        assert_eq!(bytes, exp.rewards.iter().flat_map(|r| r.to_le_bytes()).collect::<Vec<_>>(), "episode {i}: reward");
        let (_, bytes) = fixed(ds.view().read_episode_column(i, "terminated").unwrap());
        assert_eq!(bytes, exp.terminated.iter().map(|&b| b as u8).collect::<Vec<_>>(), "episode {i}: terminated");
        let (_, bytes) = fixed(ds.view().read_episode_column(i, "truncated").unwrap());
        assert_eq!(bytes, exp.truncated.iter().map(|&b| b as u8).collect::<Vec<_>>(), "episode {i}: truncated");

        if ds.column_id(got.recording, "info/n").is_some() {
            let (shape, bytes) = fixed(ds.view().read_episode_column(i, "info/n").unwrap());
            assert_eq!(shape, vec![t + 1]);
            let want: Vec<u8> = exp.info_n.iter().flat_map(|v| v.unwrap_or(0).to_le_bytes()).collect();
            assert_eq!(bytes, want, "episode {i}: info/n");
            let (_, mask) = fixed(ds.view().read_episode_column(i, "info/_n").unwrap());
            assert_eq!(mask, exp.info_n.iter().map(|v| v.is_some() as u8).collect::<Vec<_>>(), "episode {i}: info/_n");
            let text = strings(ds.view().read_episode_column(i, "info/s").unwrap());
            let want: Vec<String> = exp.info_s.iter().map(|v| v.clone().unwrap_or_default()).collect();
            assert_eq!(text, want, "episode {i}: info/s");
            let (_, mask) = fixed(ds.view().read_episode_column(i, "info/_s").unwrap());
            assert_eq!(mask, exp.info_s.iter().map(|v| v.is_some() as u8).collect::<Vec<_>>(), "episode {i}: info/_s");
        } else {
            assert!(exp.info_n.iter().all(Option::is_none), "episode {i}: info/n missing from the file");
        }

        let meta: Value = serde_json::from_str(&ds.view().episode_metadata(i).unwrap()).unwrap();
        assert_eq!(meta, Value::Object(exp.metadata.clone()), "episode {i}: metadata");
    }
}
