//! Rewriting a dataset with other codecs and chunk sizes (e.g. recorded compressed, converted
//! to raw columns for training, where reads are zero-copy views and random access decodes
//! nothing).
//!
//! Each recording of the source is replayed through a `Recorder`, one episode after another in
//! dataset order: a reset (its first observation-timeline row), its steps (step row t and
//! observation row t + 1), its metadata, and for an episode that did not end (incomplete) an
//! abort. The recorder runs with autoreset disabled and one lane per source lane, each message
//! carrying values for that lane only, so every episode keeps its lane (env index), rows,
//! flags, return, start and end times, metadata, infos and custom data with their masks; and
//! since the writer writes episodes in the order they end, the order is kept too.
//!
//! What changes: codecs and chunk sizes (that is the point), shard boundaries, recording ids,
//! episode ids (episodes are numbered in the order they start, and the replay starts each one
//! after the previous ended),
//! the Meta record's `autoreset_mode` (now "disabled"; the source's is kept in
//! `user.converted_from`), and mask columns, which the writer always stores with its default
//! codec. Recordings are written one after the other, so a source whose recordings were written
//! at the same time (interleaved shards) comes out grouped by recording.
//!
//! The output is written into a sibling temporary directory and renamed into place at the end:
//! a failed conversion leaves no partial dataset behind.
//!
//! `recover` writes through the same replay (`Replay`, `into_place`), from a salvage plan instead
//! of the listing.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::format::episode::EpisodeSummary;
use crate::reader::{episode_span, ColumnData, ColumnRows, Dataset, Recording};
use crate::schema::{CodecSpec, ColumnSpec, Timeline};
use crate::writer::files::shard::now_ns;
use crate::writer::{EntryKind, EntryRef, MessageKind, NewColumn, Recorder, RecorderConfig, Slot};

/// Options of `convert`; from JSON (`ConvertOptions::from_json`), each field optional.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConvertOptions {
    /// Codec rules: (column name, or a prefix of names ending before a '/', or "default"),
    /// codec. The longest matching key wins; "default" applies to columns no other key
    /// matches; columns no rule matches keep their codec. Reward, terminated and truncated
    /// share the codec found for "reward". In JSON, `{"<key>": {"delta": bool, "zstd_level":
    /// int | null}}` (by key: the longest matching key wins, so the order does not matter).
    #[serde(deserialize_with = "codec_rules")]
    pub codecs: Vec<(String, CodecSpec)>,
    /// The chunk size target (raw bytes); `None`: the writer's default.
    pub chunk_bytes: Option<usize>,
    pub max_shard_bytes: Option<u64>,
    /// The episodes to convert (dataset indexes, in dataset order); `None`: all of them.
    pub episodes: Option<Vec<usize>>,
    /// The values to keep (column names or '/'-bounded prefixes, see `kept_keys`); reward and
    /// the done flags are always kept. `None`: every column.
    pub keys: Option<Vec<String>>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Converted {
    pub episodes: usize,
    pub steps: u64,
    #[serde(serialize_with = "crate::reader::paths_text")]
    pub shards: Vec<PathBuf>,
}

impl ConvertOptions {
    /// Options from a JSON object of `ConvertOptions`' fields (each may be left out or null).
    ///
    /// Errors: `Invalid`: what does not parse, named by its option (a codec rule by its key).
    pub fn from_json(text: &str) -> Result<ConvertOptions> {
        let invalid = |what: String| Error::Invalid(format!("convert options: {what}"));
        let fields: serde_json::Map<String, Value> = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        // Each option alone first: serde names a bad value only by its place in the text.
        for (name, value) in &fields {
            let alone = Value::Object([(name.clone(), value.clone())].into_iter().collect());
            let named = |e: serde_json::Error| match e.to_string() {
                why if why.starts_with(name.as_str()) => why,
                why => format!("{name}: {why}"),
            };
            serde_json::from_value::<ConvertOptions>(alone).map_err(|e| invalid(named(e)))?;
        }
        serde_json::from_value(Value::Object(fields)).map_err(|e| invalid(e.to_string()))
    }
}

/// `ConvertOptions::codecs` from a JSON object (or null: none), naming the rule that does not
/// parse.
fn codec_rules<'de, D: serde::Deserializer<'de>>(json: D) -> std::result::Result<Vec<(String, CodecSpec)>, D::Error> {
    let rules: Option<serde_json::Map<String, Value>> = serde::Deserialize::deserialize(json)?;
    let rule = |(key, codec): (String, Value)| match serde_json::from_value(codec) {
        Ok(codec) => Ok((key, codec)),
        Err(e) => Err(serde::de::Error::custom(format!("codecs[{key:?}]: {e}"))),
    };
    rules.unwrap_or_default().into_iter().map(rule).collect()
}

/// The codec `opts` gives a column, or its own.
fn codec_for(opts: &ConvertOptions, spec: &ColumnSpec) -> CodecSpec {
    let name = spec.name.as_str();
    let matches = |key: &str| name == key || (name.starts_with(key) && name.as_bytes().get(key.len()) == Some(&b'/'));
    let best = opts.codecs.iter().filter(|(k, _)| k != "default" && matches(k)).max_by_key(|(k, _)| k.len());
    let chosen = best.or_else(|| opts.codecs.iter().find(|(k, _)| k == "default")).map(|(_, c)| c.clone());
    // The source's own codec, with the chunk size it was asked for (the writer declares it
    // again, multiplied for frame stacks).
    let mut codec =
        chosen.unwrap_or_else(|| CodecSpec { chunk_bytes: spec.requested_chunk_bytes(), ..spec.codec.clone() });
    if spec.row_bytes().is_none() {
        codec.delta = false; // the delta filter needs a fixed row size
    }
    codec
}

/// The observation and action layouts restricted to what `keep` keeps, and the spaces the
/// Meta record's `user` describes (`observation_space`, `action_space`) with them.
///
/// Errors: why they cannot be (no observation or no action value kept; see `kept_keys::trim`).
fn kept_layouts(
    user: &mut Value,
    observation: &Value,
    action: &Value,
    keep: &dyn Fn(&str) -> bool,
) -> std::result::Result<(Value, Value), String> {
    let mut out = Vec::new();
    for (which, layout) in [("observation", observation), ("action", action)] {
        let key = format!("{which}_space");
        let space = user.get(&key).cloned().unwrap_or(Value::Null);
        let (layout, space) =
            crate::kept_keys::trim(layout, &space, keep)?.ok_or_else(|| format!("the keys keep no {which} value"))?;
        if let Some(map) = user.as_object_mut().filter(|m| m.contains_key(&key)) {
            map.insert(key, space);
        }
        out.push(layout);
    }
    let action = out.pop().unwrap_or_default();
    Ok((out.pop().unwrap_or_default(), action))
}

/// Converts `src` into a new dataset directory `dst` (which must not exist, or be empty).
///
/// Errors: `Invalid` (`dst` is not empty; `chunk_bytes` 0; an episode out of range; an episode
/// whose flags disagree with its rows), `Corrupt` (a recording whose Meta record is lost;
/// unreadable rows), `Io`, and any error of the writer.
pub fn convert(src: &Dataset, dst: &Path, opts: &ConvertOptions) -> Result<Converted> {
    if opts.chunk_bytes == Some(0) {
        return Err(Error::Invalid("chunk_bytes must be positive".into()));
    }
    let converted = into_place(dst, "converting", |tmp| write_all(src, tmp, opts))?;
    Ok(Converted { shards: moved(&converted.shards, dst), ..converted })
}

/// Writes a new dataset directory `dst` (which must not exist, or be empty) through `write`,
/// into a sibling temporary directory renamed into place once `write` succeeded: a failure
/// leaves nothing behind, and nothing ever writes into `dst` itself.
///
/// Errors: `Invalid` (`dst` is not empty or has no name), `Io`, and those of `write`.
pub(crate) fn into_place<T>(dst: &Path, doing: &str, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    if dst.exists() {
        let empty = dst.is_dir() && std::fs::read_dir(dst).map_err(|e| Error::io(dst, e))?.next().is_none();
        if !empty {
            return Err(Error::Invalid(format!(
                "{}: the destination exists and is not an empty directory",
                dst.display()
            )));
        }
    }
    let name = dst.file_name().ok_or_else(|| Error::Invalid(format!("{}: not a directory name", dst.display())))?;
    let tmp = dst.with_file_name(format!(".{}.{doing}-{}", name.to_string_lossy(), std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let result = write(&tmp).and_then(|written| {
        if dst.exists() {
            std::fs::remove_dir(dst).map_err(|e| Error::io(dst, e))?;
        }
        std::fs::rename(&tmp, dst).map_err(|e| Error::io(dst, e))?;
        Ok(written)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// The paths `shards` (written in the temporary directory) have in `dst`.
pub(crate) fn moved(shards: &[PathBuf], dst: &Path) -> Vec<PathBuf> {
    shards.iter().filter_map(|p| p.file_name()).map(|n| dst.join(n)).collect()
}

fn write_all(src: &Dataset, dir: &Path, opts: &ConvertOptions) -> Result<Converted> {
    let episodes: Vec<usize> = match &opts.episodes {
        Some(list) => list.clone(),
        None => (0..src.episodes().len()).collect(),
    };
    let mut order: Vec<usize> = Vec::new(); // recordings, by first appearance
    for &i in &episodes {
        let e = src.view().episode(i)?;
        if !order.contains(&e.recording) {
            order.push(e.recording);
        }
    }
    let mut out = Converted { episodes: 0, steps: 0, shards: Vec::new() };
    for recording in order {
        let mine: Vec<usize> = episodes.iter().copied().filter(|&i| src.episodes()[i].recording == recording).collect();
        let mut replay = Replay::start(src, recording, dir, opts, "convert")?;
        for &i in &mine {
            let s = &src.episodes()[i].summary;
            replay.episode(src, recording, s, &src.view().episode_metadata(i)?, &format!("episode {i}"))?;
            out.episodes += 1;
            out.steps += s.length;
        }
        out.shards.extend(replay.finish()?);
    }
    Ok(out)
}

/// A source column and its id in the new recording.
struct Column<'a> {
    spec: &'a ColumnSpec,
    id: u32,
    /// The source mask column of a masked column.
    mask: Option<&'a ColumnSpec>,
}

/// One recording of a source being written again, episode by episode (see the module notes).
pub(crate) struct Replay<'a> {
    recorder: Recorder,
    columns: Vec<Column<'a>>,
    num_envs: u32,
    /// Message bytes, reused; entries are (column, range in `bytes`).
    bytes: Vec<u8>,
    spans: Vec<(u32, usize, usize)>,
}

impl<'a> Replay<'a> {
    /// Starts a recorder in `dir` for the source recording: its columns, layout and metadata.
    ///
    /// Errors: `Corrupt` (its Meta record or column descriptions are lost), `Invalid`, `Io`.
    ///
    /// `how` ("convert", "recover") names the copy in its description (see `copy_origin`).
    pub(crate) fn start(
        src: &'a Dataset,
        recording: usize,
        dir: &Path,
        opts: &ConvertOptions,
        how: &str,
    ) -> Result<Self> {
        let rec: &'a Recording = &src.recordings()[recording];
        let damaged = |why: &str| {
            let file = rec.shards.first().map(|&s| src.shard_paths()[s].clone()).unwrap_or_default();
            Error::corrupt(file, 0, format!("cannot convert recording: {why}"))
        };
        let meta: Value = serde_json::from_str(&rec.meta_json).map_err(|_| damaged("its Meta record is not JSON"))?;
        let layout = meta.get("layout").ok_or_else(|| damaged("its Meta record (layout) is lost"))?;
        let (observation, action) = match (layout.get("observation"), layout.get("action")) {
            (Some(o), Some(a)) => (o.clone(), a.clone()),
            _ => return Err(damaged("its Meta record has no observation/action layout")),
        };
        if let Some(p) = &rec.schema_damage {
            return Err(p.to_error());
        }
        let lanes = src.episodes().iter().filter(|e| e.recording == recording);
        let max_lane = lanes.map(|e| e.summary.lane + 1).max().unwrap_or(1);
        let num_envs = (meta.get("num_envs").and_then(Value::as_u64).unwrap_or(1) as u32).max(max_lane);
        let batched = meta.get("batched").and_then(Value::as_bool).unwrap_or(num_envs > 1) || num_envs > 1;

        let mut user = meta.get("user").cloned().unwrap_or(Value::Null);
        let kept = |name: &str| opts.keys.as_ref().is_none_or(|k| crate::kept_keys::keeps(k, name));
        let (observation, action) = match &opts.keys {
            None => (observation, action),
            Some(keys) => kept_layouts(&mut user, &observation, &action, &kept)
                .map_err(|why| Error::Invalid(format!("convert keys {keys:?}: recording {recording}: {why}")))?,
        };
        let plain = |c: &&ColumnSpec| c.mask.is_none() && c.mask_of.is_none() && c.role.is_none() && kept(&c.name);
        let mut given: Vec<ColumnSpec> = rec.columns.iter().filter(plain).cloned().collect();
        for spec in &mut given {
            spec.codec = codec_for(opts, spec);
            spec.id = 0;
        }
        let reward = rec.columns.iter().find(|c| c.name == "reward").ok_or_else(|| damaged("no reward column"))?;
        let (steps, _) = src.timelog(recording);
        let asked = (!steps.is_empty()).then(|| steps.iter().map(|s| s.steps).sum::<u64>() * u64::from(num_envs));
        let origin = crate::copy_origin::origin(src.path(), &rec.id, &meta, asked, how, now_ns());
        match &mut user {
            Value::Object(map) => {
                map.remove("converted_from");
                map.remove("recovered_from");
                map.insert(crate::copy_origin::key(how), origin);
            }
            Value::Null => user = json!({ crate::copy_origin::key(how): origin }),
            _ => {}
        }
        let mut config = json!({
            "num_envs": num_envs,
            "batched": batched,
            "autoreset_mode": "disabled",
            "columns": given,
            "observation": observation,
            "action": action,
            "metadata": meta.get("metadata").cloned().unwrap_or(Value::Null),
            "user": user,
            "flags_codec": codec_for(opts, reward),
        });
        // The largest step must fit the ring twice over (so a step never waits for itself).
        let row_bytes: usize = rec.columns.iter().map(|c| c.row_bytes().unwrap_or(4096)).sum();
        config["ring_bytes"] = json!((64usize << 20).max(row_bytes.saturating_mul(4)));
        if let Some(c) = opts.chunk_bytes {
            config["chunk_bytes"] = json!(c);
        }
        if let Some(m) = opts.max_shard_bytes {
            config["max_shard_bytes"] = json!(m);
        }
        let config: RecorderConfig =
            serde_json::from_value(config).map_err(|e| Error::Invalid(format!("recorder configuration: {e}")))?;
        let mut recorder = Recorder::create(dir, config)?;

        let mut columns = Vec::new();
        // A copy folds annotations in as custom data of its own; `recover` copies what was
        // recorded (a damaged sidecar must not make it fail, nor cut an episode).
        let copied = if how == "recover" { rec.own_columns() } else { &rec.columns[..] };
        for spec in copied.iter().filter(|c| c.mask_of.is_none() && (c.role.is_some() || kept(&c.name))) {
            let id = match spec.mask {
                None => {
                    recorder.column_id(&spec.name).ok_or_else(|| damaged(&format!("column '{}' lost", spec.name)))?
                }
                Some(_) => recorder.add_column(NewColumn {
                    name: spec.name.clone(),
                    dtype: spec.dtype()?,
                    shape: spec.shape.clone(),
                    timeline: spec.timeline,
                    masked: true,
                    codec: codec_for(opts, spec),
                    // Widened columns follow the columns they widen: those have their new ids.
                    widens: spec.widens.and_then(|w| columns.iter().find(|c: &&Column| c.spec.id == w).map(|c| c.id)),
                })?,
            };
            let mask = spec.mask.and_then(|m| rec.columns.get(m as usize));
            columns.push(Column { spec, id, mask });
        }
        Ok(Replay { recorder, columns, num_envs, bytes: Vec::new(), spans: Vec::new() })
    }

    /// Writes one episode: the rows `s` says (of the source recording `recording`), its
    /// metadata JSON; `label` names it in errors.
    ///
    /// Errors: `Invalid` (its flags disagree with its rows), `Corrupt` (unreadable rows), and the
    /// recorder's.
    pub(crate) fn episode(
        &mut self,
        src: &Dataset,
        recording: usize,
        s: &EpisodeSummary,
        metadata: &str,
        label: &str,
    ) -> Result<()> {
        let lane = s.lane;
        let t_len = s.length as usize;
        // Every column's rows, and for masked ones which rows hold a value.
        let mut data: Vec<(ColumnData, Option<Vec<u8>>)> = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            let values = read_span(src, recording, lane, c.spec, s)?;
            let present = match c.mask {
                Some(mask) => match read_span(src, recording, lane, mask, s)? {
                    ColumnData::Fixed { bytes, .. } => Some(bytes),
                    ColumnData::Strings(_) => None,
                },
                None => None,
            };
            data.push((values, present));
        }
        let flag = |name: &str, t: usize| -> bool {
            self.columns.iter().zip(&data).any(|(c, (d, _))| {
                c.spec.name == name && matches!(d, ColumnData::Fixed { bytes, .. } if bytes.get(t) == Some(&1))
            })
        };
        // A part listed on its own (a shard with its start is missing, pruned or lost) ends as its
        // episode did but is no whole episode: it is copied as an incomplete one with its flags.
        let part = !s.complete() && (s.terminated() || s.truncated());
        for t in 0..t_len {
            let (terminated, truncated) = (flag("terminated", t), flag("truncated", t));
            let last = t + 1 == t_len;
            let expected = if last { (s.terminated(), s.truncated()) } else { (false, false) };
            if (terminated, truncated) != expected || (last && (terminated || truncated) != (s.complete() || part)) {
                return Err(Error::Invalid(format!(
                    "{label}: step {t} has terminated={terminated} truncated={truncated}, which its summary \
                     (complete={} terminated={} truncated={}) contradicts; it cannot be replayed faithfully",
                    s.complete(),
                    s.terminated(),
                    s.truncated()
                )));
            }
        }

        let mut mask = vec![0u8; self.num_envs as usize];
        mask[lane as usize] = 1;
        self.message(&data, lane, MessageKind::Reset, s.start_ns, Some(&mask), |tl| match tl {
            Timeline::Obs => Some(0),
            Timeline::Step => None,
        })?;
        if part && t_len > 0 {
            // Its last step ends it as the episode ended; the copy stays a part (incomplete).
            self.recorder.mark_start_lost(lane.into())?;
        }
        if metadata.trim() != "{}" {
            self.recorder.set_episode_metadata(lane.into(), metadata)?;
        }
        for t in 0..t_len {
            let time = if t + 1 == t_len { s.end_ns } else { s.start_ns };
            self.message(&data, lane, MessageKind::Step, time, None, |tl| match tl {
                Timeline::Obs => Some(t + 1),
                Timeline::Step => Some(t),
            })?;
        }
        if !s.complete() && !part {
            self.recorder.abort(Some(lane.into()))?;
            self.recorder.send_ops(s.end_ns)?;
        }
        Ok(())
    }

    /// Closes the recorder; returns the shards written.
    pub(crate) fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.recorder.close()?;
        Ok(self.recorder.shard_paths())
    }

    /// Sends one message holding, for each column, its row `row(timeline)` (if any, and if the
    /// row holds a value).
    fn message(
        &mut self,
        data: &[(ColumnData, Option<Vec<u8>>)],
        lane: u32,
        kind: MessageKind,
        time_ns: u64,
        mask: Option<&[u8]>,
        row: impl Fn(Timeline) -> Option<usize>,
    ) -> Result<()> {
        self.bytes.clear();
        self.spans.clear();
        for (c, (values, present)) in self.columns.iter().zip(data) {
            let Some(r) = row(c.spec.timeline) else { continue };
            if present.as_ref().is_some_and(|p| p.get(r) != Some(&1)) {
                continue;
            }
            let start = self.bytes.len();
            match values {
                ColumnData::Fixed { bytes, .. } => {
                    let rb = c.spec.row_bytes().unwrap_or(0);
                    self.bytes.extend_from_slice(&bytes[r * rb..(r + 1) * rb]);
                }
                ColumnData::Strings(list) => {
                    let text = list[r].as_bytes();
                    self.bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
                    self.bytes.extend_from_slice(text);
                }
            }
            self.spans.push((c.id, start, self.bytes.len()));
        }
        let entries: Vec<EntryRef> = self
            .spans
            .iter()
            .map(|&(column, a, b)| EntryRef {
                column,
                kind: EntryKind::PerEnv,
                slot: Slot::Regular,
                env: lane,
                mask: None,
                data: &self.bytes[a..b],
            })
            .collect();
        let len = match kind {
            MessageKind::Reset => self.recorder.plan_reset(&entries, mask)?,
            _ => self.recorder.plan_step(&entries)?,
        };
        // As the recorder's own send: the wait (two clock reads and a timelog entry) only when
        // the message cannot go now; asked for every message it was 5% of convert's CPU time.
        if !self.recorder.ready(len) {
            self.recorder.wait_for_space(len)?;
        }
        self.recorder.send_planned(&entries, time_ns)
    }
}

/// The rows of one column of an episode (T+1 on the observation timeline, T on the step
/// timeline), read by row range: only the chunks holding them are read.
fn read_span(src: &Dataset, recording: usize, lane: u32, spec: &ColumnSpec, s: &EpisodeSummary) -> Result<ColumnData> {
    let (first_row, n) = episode_span(s, spec.timeline)
        .ok_or_else(|| Error::Invalid(format!("episode {}: row numbers overflow", s.episode_id)))?;
    let span = ColumnRows { recording, lane, column: spec.id, first_row, n_rows: n };
    let Some(row_bytes) = spec.row_bytes() else {
        return Ok(ColumnData::Strings(src.view().read_strings(span)?));
    };
    let too_large = || Error::Invalid(format!("column '{}': {n} rows are too large to read at once", spec.name));
    let rows = usize::try_from(n).map_err(|_| too_large())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(rows.checked_mul(row_bytes).ok_or_else(too_large)?).map_err(|_| too_large())?;
    bytes.resize(rows * row_bytes, 0);
    src.view().read_rows(span, &mut bytes)?;
    let shape = std::iter::once(Ok(rows))
        .chain(spec.shape.iter().map(|&d| usize::try_from(d).map_err(|_| too_large())))
        .collect::<Result<Vec<_>>>()?;
    Ok(ColumnData::Fixed { dtype: spec.dtype()?, shape, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_codec_rules_in_order_or_name_the_bad_one() {
        let opts = ConvertOptions::from_json(
            r#"{"codecs": {"obs": {"delta": true, "zstd_level": 3}, "default": {"delta": false, "zstd_level": null}},
                "chunk_bytes": 4096, "episodes": [1, 4], "keys": null}"#,
        )
        .unwrap();
        let rules = &opts.codecs;
        let keys: Vec<_> = rules.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["default", "obs"]);
        assert_eq!((rules[1].1.delta, rules[1].1.zstd_level, rules[0].1.zstd_level), (true, Some(3), None));
        assert_eq!(
            (opts.chunk_bytes, opts.max_shard_bytes, opts.episodes, opts.keys),
            (Some(4096), None, Some(vec![1, 4]), None)
        );
        assert!(ConvertOptions::from_json("{}").unwrap().codecs.is_empty());
        let table = [
            (r#"{"codecs": [1]}"#, "convert options: codecs: invalid type"),
            (r#"{"codecs": {"x": {"delta": 1}}}"#, "convert options: codecs[\"x\"]: "),
            (r#"{"chunk_bytes": -1}"#, "convert options: chunk_bytes: invalid value"),
            (r#"{"chunk_bytes": 1.5}"#, "convert options: chunk_bytes: invalid type"),
            (r#"{"episodes": [0, "a"]}"#, "convert options: episodes: invalid type"),
            (r#"{"chunk": 1}"#, "convert options: chunk: unknown field `chunk`"),
            ("[1]", "convert options: invalid type"),
        ];
        for (text, want) in table {
            let why = ConvertOptions::from_json(text).unwrap_err().to_string();
            assert!(why.starts_with(want), "{text}: {why}");
        }
    }

    fn spec(name: &str, dtype: &str) -> ColumnSpec {
        ColumnSpec {
            id: 0,
            name: name.into(),
            dtype: dtype.into(),
            shape: vec![],
            timeline: Timeline::Obs,
            mask_of: None,
            mask: None,
            role: None,
            codec: CodecSpec { delta: true, zstd_level: Some(5), chunk_bytes: None, frame_stack: true },
            widens: None,
        }
    }

    #[test]
    fn codec_rules_longest_key_then_default_then_own() {
        let raw = CodecSpec { delta: false, zstd_level: None, chunk_bytes: None, frame_stack: true };
        let z1 = CodecSpec { delta: false, zstd_level: Some(1), chunk_bytes: None, frame_stack: true };
        let mut opts = ConvertOptions { codecs: vec![("obs".into(), raw.clone())], ..Default::default() };
        assert_eq!(codec_for(&opts, &spec("obs/image", "uint8")), raw);
        assert_eq!(codec_for(&opts, &spec("obs", "uint8")), raw);
        assert_eq!(codec_for(&opts, &spec("observe", "uint8")).zstd_level, Some(5), "not a '/'-bounded prefix");
        opts.codecs.push(("obs/image".into(), z1.clone()));
        opts.codecs.push(("default".into(), raw.clone()));
        assert_eq!(codec_for(&opts, &spec("obs/image", "uint8")), z1);
        assert_eq!(codec_for(&opts, &spec("info/x", "uint8")), raw);
        let text = codec_for(&ConvertOptions::default(), &spec("info/s", "str"));
        assert!(!text.delta, "no delta on strings");
    }
}
