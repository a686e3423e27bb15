//! The catalog of a dataset: its recordings (shards sharing a recording id, and their columns),
//! the chunk list of each (recording, lane, column), and the episodes listed, built from the
//! records that scans of the shards decoded. It does no I/O: `take_in` is a function of what the
//! scans found (and of the shards' damage), so it is tested with records made in memory.
//!
//! Shards are grouped by recording id; within a recording, lane row numbers run on across
//! shards, so chunk lists are merged per (recording, lane, column) and kept sorted by first row
//! for binary search. Episodes are listed shard by shard (shards sorted by file name, which
//! sorts by start time), and within a shard in record order. A later `take_in` (a refresh)
//! appends what appeared since after the episodes already listed, so indexes handed out stay
//! valid; an episode listed while it went on over a shard rollover is listed again in place when
//! its end arrives (`parts`), so the episodes listed are those a fresh open lists.
//!
//! An episode is listed only if its rows can all be read:
//! - columns that hold a value on every row (neither `mask` nor `mask_of`: observation and
//!   action leaves, reward, terminated, truncated) must have a chunk for each of its rows;
//! - a masked column (or a mask) holds a row for every row from its first one on (the writer
//!   stores "no value" rows too), so a gap after its first chunk in the lane is lost data; rows
//!   before its first chunk may predate the column (added mid-recording: they read as zeros /
//!   False / ""), which is trusted unless damage earlier in the recording may have held them.
//!
//! An episode failing the check lost data to a damaged or missing shard: it is left out with a
//! problem. The check relies on the writer writing an episode's chunks before its Episode record.

pub(in crate::reader) mod annotations;
pub(in crate::reader) mod chunk_list;
pub(in crate::reader) mod column_names;
pub(in crate::reader) mod evicted;
pub(in crate::reader) mod metrics;
pub(in crate::reader) mod parts;
pub(in crate::reader) mod rewrite;
pub(in crate::reader) mod trust;

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::int_map::{IntMap, IntSet};
use super::{hex, Problem};
use crate::error::{Error, Result};
use crate::format::chunks::ChunkRef;
use crate::format::episode::EpisodeSummary;
use crate::reader::catalog::annotations::Sidecar;
use crate::reader::catalog::chunk_list::{place_chunk, ChunkList, Insert, ListKey, Located};
use crate::reader::catalog::parts::{Part, Place};
use crate::reader::catalog::trust::{check_chunk, episode_span, first_gap, is_required, mask_pair_problem};
use crate::reader::integrity::exclusions::{Exclusions, LeftOut};
use crate::reader::reads::steps::EpisodeSet;
use crate::reader::store::checksummed::VerifiedRecords;
use crate::reader::store::shard::Found;
use crate::schema::{ColumnId, ColumnSpec};

#[derive(Debug, Clone)]
pub struct Recording {
    pub id: [u8; 16],
    /// The Meta record of its first shard present ("{}" if none survived). Set by `set_meta`.
    pub meta_json: String,
    /// The "layout" object of `meta_json` (Null if it has none), parsed once: every read of an
    /// episode's observations or actions nests by it, and the whole Meta record is kilobytes.
    pub layouts: Value,
    /// Index = column id. Only a gap-free run of ids from 0 is listed (a problem names a gap).
    pub columns: Vec<ColumnSpec>,
    /// Its shards (indexes into `Dataset::shard_paths`), by shard_seq.
    pub shards: Vec<usize>,
    /// Set when damage hid some of its column descriptions: a read of a column it does not list
    /// is then a corrupt file, not a wrong name.
    pub schema_damage: Option<Problem>,
    /// Columns whose descriptions contradict each other (a mask that is not one): unreadable.
    pub damaged_columns: Vec<(ColumnId, Problem)>,
    /// How many of `columns` are the recording's own: annotations (`annotations`) follow.
    pub own_count: usize,
}

impl Recording {
    /// Takes `json` as its Meta record.
    pub fn set_meta(&mut self, json: String) {
        self.layouts = layouts_of(&json);
        self.meta_json = json;
    }

    /// The columns its shards describe, without those annotations add.
    pub fn own_columns(&self) -> &[ColumnSpec] {
        &self.columns[..self.own_count.min(self.columns.len())]
    }
}

/// The "layout" object of the Meta record `meta_json`; Null when it has none or is not JSON.
pub(crate) fn layouts_of(meta_json: &str) -> Value {
    let mut meta: Value = serde_json::from_str(meta_json).unwrap_or(Value::Null);
    meta.get_mut("layout").map(Value::take).unwrap_or(Value::Null)
}

#[derive(Debug, Clone)]
pub struct EpisodeRef {
    /// Index into `Dataset::recordings`.
    pub recording: usize,
    /// Index into `Dataset::shard_paths`: the shard holding the Episode record.
    pub shard: usize,
    /// Where the listed rows are: the whole episode, or (see `continued`, `continues`) the part
    /// of it the dataset holds.
    pub summary: EpisodeSummary,
    /// The episode began before these rows, in a shard the dataset does not have.
    pub continued: bool,
    /// The episode goes on after these rows: in a shard the dataset does not have (yet).
    pub continues: bool,
}

/// Where an episode's rows are, packed in 32 bytes (one cache line holds two), for the gathers
/// of training reads, which look up hundreds of random episodes per batch.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct EpisodeLoc {
    pub recording: u32,
    pub lane: u32,
    pub obs_first_row: u64,
    pub step_first_row: u64,
    pub length: u64,
}

/// A record of a kind this version does not know (a newer writer's), skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedRecord {
    pub file: PathBuf,
    pub offset: u64,
    pub kind: u32,
}

/// Storage of one column of one recording, summed over its chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ColumnStats {
    pub recording: usize,
    #[serde(skip)]
    pub column: ColumnId,
    /// Its name, or `#<id>` when its description is lost.
    pub name: String,
    pub chunks: u64,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
}

#[derive(Default)]
struct RecordingState {
    /// shard_seq -> shard index.
    seqs: BTreeMap<u64, usize>,
    /// The shard_seq the meta JSON came from.
    meta_seq: Option<u64>,
    /// Every column described, by id (the public list stops at the first gap).
    specs: BTreeMap<ColumnId, ColumnSpec>,
    /// Where each column's first description was read: (shard index, offset).
    spec_at: HashMap<ColumnId, (usize, u64)>,
}

/// What the catalog needs of a shard: its file (named in problems), recording and place in it.
#[derive(Debug, Clone)]
pub(crate) struct ShardFacts {
    pub path: PathBuf,
    pub recording_id: [u8; 16],
    pub seq: u64,
    /// An annotation sidecar (header flag `ANNOTATION`), not a shard of the recording.
    pub annotation: bool,
}

/// The records of one episode found in an update: its key (recording, episode id), its first
/// and last records (indexes into what was found, chained from one to the next) and where the
/// latest of them is (shard, record offset, position).
struct EpisodeGroup {
    key: (usize, u64),
    first: usize,
    last: usize,
    last_at: (usize, u64, u32),
}

/// The end of a chain of an episode's records.
const END: usize = usize::MAX;

/// An episode listed while it goes on in a later shard: its records (shard, record) so far and
/// the dataset indexes of its listings.
#[derive(Default)]
struct ListedParts {
    records: Vec<(usize, EpisodeSummary)>,
    listed: Vec<usize>,
}

pub(crate) struct Catalog {
    /// The dataset's path (named in problems no shard holds).
    root: PathBuf,
    is_dir: bool,
    /// Shards registered, in the order the store holds them.
    pub shards: Vec<ShardFacts>,
    /// The first damage each shard's scans found (see `take_in`).
    shard_damage: Vec<Option<u64>>,
    shard_recording: Vec<usize>,
    pub recordings: Vec<Recording>,
    states: Vec<RecordingState>,
    pub chunk_lists: IntMap<ListKey, ChunkList>,
    pub episodes: Vec<EpisodeRef>,
    /// The same episodes' rows, compactly.
    pub locs: Vec<EpisodeLoc>,
    /// Every episode, with the global step index over them (extended as episodes are listed).
    pub all: EpisodeSet,
    /// Problems found at the dataset level (across shards); never replaced.
    pub own_problems: Vec<Problem>,
    reported: HashSet<String>,
    /// Per shard, the first Chunks record whose chunks were left out (rows may be lost there).
    chunk_damage: HashMap<usize, u64>,
    /// Episodes whose latest record goes on in a later shard (a rollover while a recorder
    /// writes), or whose first shards are not listed: their records so far and where they are
    /// listed, so that the record of their end, or a shard listed late, lists them as a fresh
    /// open would (`parts`).
    listed_parts: IntMap<(usize, u64), ListedParts>,
    /// Episodes discarded after parts of them were written.
    discarded: IntSet<(usize, u64)>,
    /// Listings of episodes discarded after a refresh listed a part of them (a fresh open does
    /// not list them): kept in place, so indexes stay valid, but out of sampling.
    pub dropped: Vec<usize>,
    pub skipped: Vec<SkippedRecord>,
    /// Listings to leave out (see `integrity`).
    pub exclusions: Exclusions,
    /// Episodes left out when listed (some of their rows are lost), for recovery.
    pub left_out: Vec<LeftOut>,
    /// What batch plans are made of, per recording, as last seen (see `schema_generation`).
    schema_seen: Vec<SchemaMark>,
    schema_generation: u64,
    /// Listings that grew in place in the last `take_in` (an episode listed while it ran, then
    /// listed whole), with the length each had before: the step numbering after them moved.
    pub regrown: Vec<(usize, u64)>,
    /// Annotation sidecars found, and the chunk lists their columns were given (`annotations`).
    pub sidecars: Vec<Sidecar>,
    attached: Vec<ListKey>,
    /// Changes whenever an annotation column's id does (see `annotations`).
    pub columns_generation: u64,
}

/// What a recording's batch plans depend on, as `take_in` leaves it: the shard its Meta record
/// came from, its columns listed, those found damaged, and whether descriptions were lost.
/// Column descriptions are never replaced (the first is kept), so counts tell any change.
type SchemaMark = (Option<u64>, usize, usize, bool);

impl Catalog {
    pub fn new(root: &Path, is_dir: bool, exclusions: Exclusions) -> Catalog {
        Catalog {
            root: root.to_path_buf(),
            is_dir,
            shards: Vec::new(),
            shard_damage: Vec::new(),
            shard_recording: Vec::new(),
            recordings: Vec::new(),
            states: Vec::new(),
            chunk_lists: IntMap::default(),
            episodes: Vec::new(),
            locs: Vec::new(),
            all: EpisodeSet::all(),
            own_problems: Vec::new(),
            reported: HashSet::new(),
            chunk_damage: HashMap::new(),
            listed_parts: IntMap::default(),
            discarded: IntSet::default(),
            dropped: Vec::new(),
            skipped: Vec::new(),
            exclusions,
            left_out: Vec::new(),
            sidecars: Vec::new(),
            attached: Vec::new(),
            columns_generation: 0,
            schema_seen: Vec::new(),
            schema_generation: 0,
            regrown: Vec::new(),
        }
    }

    /// A number that changes whenever what batch plans are made of changes (a recording
    /// appeared, its Meta record or its columns changed, or some were found damaged): a reader
    /// keeps its plans across refreshes that leave it unchanged.
    pub fn schema_generation(&self) -> u64 {
        self.schema_generation
    }

    fn note_schema(&mut self) {
        let marks: Vec<SchemaMark> = (self.recordings.iter().zip(&self.states))
            .map(|(r, s)| (s.meta_seq, r.columns.len(), r.damaged_columns.len(), r.schema_damage.is_some()))
            .collect();
        if marks != self.schema_seen {
            self.schema_seen = marks;
            self.schema_generation += 1;
        }
    }

    pub fn episode(&self, episode: usize) -> Result<&EpisodeRef> {
        listed(&self.episodes, episode)
    }

    /// The rows of episode `episode` (see `EpisodeLoc`).
    #[inline]
    pub fn loc(&self, episode: usize) -> Result<&EpisodeLoc> {
        listed(&self.locs, episode)
    }

    pub fn recording(&self, recording: usize) -> Result<&Recording> {
        self.recordings.get(recording).ok_or_else(|| {
            Error::OutOfRange(format!(
                "recording {recording} is out of range (the dataset has {})",
                self.recordings.len()
            ))
        })
    }

    pub fn column_id(&self, recording: usize, name: &str) -> Option<ColumnId> {
        let columns = &self.recordings.get(recording)?.columns;
        columns.iter().position(|c| c.name == name).map(|i| i as ColumnId)
    }

    /// The rows an episode spans in a column: (first row, number of rows).
    pub fn episode_rows(&self, episode: usize, column: ColumnId) -> Result<(u64, u64)> {
        let e = self.episode(episode)?;
        let spec = self.recording(e.recording)?.columns.get(column as usize);
        let spec = spec.ok_or_else(|| Error::Invalid(format!("no column {column} in recording {}", e.recording)))?;
        episode_span(&e.summary, spec.timeline)
            .ok_or_else(|| Error::Invalid(format!("episode {episode}: row numbers overflow")))
    }

    /// Per (recording, column): chunks, raw bytes and stored bytes over every chunk listed.
    pub fn column_stats(&self) -> Vec<ColumnStats> {
        let mut by: BTreeMap<(usize, ColumnId), ColumnStats> = BTreeMap::new();
        for (&(recording, _lane, column), list) in &self.chunk_lists {
            let entry = by.entry((recording, column)).or_insert_with(|| {
                let name = self.recordings[recording].columns.get(column as usize).map(|s| s.name.clone());
                ColumnStats {
                    recording,
                    column,
                    name: name.unwrap_or_else(|| format!("#{column}")),
                    ..Default::default()
                }
            });
            for located in &list.chunks {
                entry.chunks += 1;
                entry.raw_bytes += located.chunk.raw_len;
                entry.stored_bytes += located.chunk.stored_len;
            }
        }
        by.into_values().collect()
    }

    /// The shard a path names (as errors and problems name files).
    pub fn shard_of(&self, file: &Path) -> Option<usize> {
        self.shards.iter().position(|s| s.path == file)
    }

    /// Assigns a new shard to its recording; `None` (and a problem) if that recording already
    /// has a shard with its shard_seq (a copied file): the later file is left out.
    pub fn register(&mut self, shard: ShardFacts) -> Option<usize> {
        let id = shard.recording_id;
        if shard.annotation {
            return self.register_sidecar(shard);
        }
        let recording = match self.recordings.iter().position(|r| r.id == id) {
            Some(r) => r,
            None => {
                self.recordings.push(Recording {
                    id,
                    meta_json: "{}".to_string(),
                    layouts: Value::Null,
                    columns: Vec::new(),
                    shards: Vec::new(),
                    schema_damage: None,
                    damaged_columns: Vec::new(),
                    own_count: 0,
                });
                self.states.push(RecordingState::default());
                self.recordings.len() - 1
            }
        };
        let seq = shard.seq;
        let index = self.shards.len();
        let state = &mut self.states[recording];
        if let Some(&other) = state.seqs.get(&seq) {
            let why = format!(
                "shard {seq} of recording {} is also {}; this file is left out",
                hex(&id),
                self.shards[other].path.display()
            );
            self.own_problems.push(Problem::new(&shard.path, 0, why));
            return None;
        }
        state.seqs.insert(seq, index);
        self.recordings[recording].shards = state.seqs.values().copied().collect();
        self.shard_recording.push(recording);
        self.shards.push(shard);
        self.shard_damage.push(None);
        Some(index)
    }

    /// Takes in what scans found: schemas, then chunks (each checked against its column), then
    /// episodes (each listed only if its rows can all be read). `shard_damage`: per shard, the
    /// offset of the first damage its scans found (episodes after it may have lost rows to it);
    /// `verified` registers the Chunks records the chunks point into.
    pub fn take_in(
        &mut self,
        found: Vec<(usize, Found)>,
        shard_damage: Vec<Option<u64>>,
        verified: &mut VerifiedRecords,
    ) {
        self.shard_damage = shard_damage;
        if found.iter().all(|(_, f)| f.is_empty()) {
            return; // a refresh that found nothing new costs nothing here
        }
        for (shard, f) in &found {
            let file = &self.shards[*shard].path;
            self.skipped.extend(f.skipped.iter().map(|&(offset, kind)| SkippedRecord {
                file: file.clone(),
                offset,
                kind,
            }));
        }
        let (sidecars, found): (Vec<_>, Vec<_>) =
            found.into_iter().partition(|(shard, _)| self.shards[*shard].annotation);
        // Schemas first: chunks and episodes are checked against them.
        for (shard, f) in &found {
            let recording = self.shard_recording[*shard];
            let seq = self.shards[*shard].seq;
            let state = &mut self.states[recording];
            if let Some((_, meta)) = f.metas.first() {
                if state.meta_seq.is_none_or(|s| seq < s) {
                    state.meta_seq = Some(seq);
                    self.recordings[recording].set_meta(meta.clone());
                }
            }
            for (offset, spec) in &f.columns {
                match state.specs.get(&spec.id) {
                    None => {
                        state.specs.insert(spec.id, spec.clone());
                        state.spec_at.insert(spec.id, (*shard, *offset));
                    }
                    Some(known) if known == spec => {}
                    Some(_) => {
                        let why = format!(
                            "column {} ('{}') is described differently in another shard; the first description is kept",
                            spec.id, spec.name
                        );
                        self.own_problems.push(Problem::new(&self.shards[*shard].path, *offset, why));
                    }
                }
            }
        }
        for recording in 0..self.recordings.len() {
            self.list_columns(recording);
        }
        let annotated = self.detach_annotations();

        let mut new_chunks: IntMap<ListKey, Vec<Located>> = IntMap::default();
        for (shard, f) in &found {
            let recording = self.shard_recording[*shard];
            for chunk in &f.chunks {
                match check_chunk(&self.states[recording].specs, chunk) {
                    Ok(()) => {
                        let record = verified.id((*shard, chunk.checked_at()));
                        new_chunks.entry((recording, chunk.lane, chunk.column)).or_default().push(Located {
                            shard: *shard,
                            chunk: *chunk,
                            record,
                        })
                    }
                    Err(why) => {
                        self.note_lost_description(recording, *shard, chunk);
                        self.note_chunk_damage(*shard, chunk.record_offset);
                        self.own_problems.push(Problem::new(&self.shards[*shard].path, chunk.record_offset, why));
                    }
                }
            }
            for &record in &f.verified {
                let id = verified.id((*shard, record));
                verified.mark(id);
            }
        }
        for (key, mut chunks) in new_chunks {
            // Repeated rows (see `CHUNK_REPEAT`) only fill in for a shard the dataset lacks.
            chunks.sort_by_key(|c| (c.chunk.is_repeat(), c.first_row()));
            let list = self.chunk_lists.entry(key).or_default();
            for c in chunks {
                let place = place_chunk(&list.chunks, &c);
                if place == Insert::Clash {
                    let why = format!(
                        "chunk of column {} lane {} (rows {}..{}) overlaps rows another chunk holds; left out",
                        c.chunk.column,
                        c.chunk.lane,
                        c.first_row(),
                        c.end_row()
                    );
                    let (shard, offset) = (c.shard, c.chunk.record_offset);
                    self.own_problems.push(Problem::new(&self.shards[shard].path, offset, why));
                    let damage = self.chunk_damage.entry(shard).or_insert(offset);
                    *damage = (*damage).min(offset);
                }
                list.put(c, place);
            }
        }
        self.take_in_sidecars(sidecars, verified);
        self.attach_annotations(&annotated);

        self.list_episodes(found);
        self.note_schema();
    }

    /// Lists the episodes of the Episode records found, in record order. The parts of an
    /// episode that ran over a shard rollover (see `format::episode`) are merged: with every
    /// shard from the episode's first to its latest record present, one listing covers it all;
    /// otherwise each part the dataset holds is listed on its own, marked as a part.
    fn list_episodes(&mut self, mut found: Vec<(usize, Found)>) {
        // Each episode's records chained through `next` (an open lists thousands of episodes,
        // most of one record: no Vec of its own for each), left where the scans put them: record
        // `i` is `found[place[i].0]`'s episode `place[i].1`.
        let records_found = found.iter().map(|(_, f)| f.episodes.len()).sum();
        let mut place: Vec<(usize, usize)> = Vec::with_capacity(records_found);
        let mut next: Vec<usize> = vec![END; records_found];
        let mut groups: Vec<EpisodeGroup> = Vec::new();
        let mut group_of: IntMap<(usize, u64), usize> = IntMap::default();
        group_of.reserve(records_found);
        let all = found.iter().enumerate().flat_map(|(k, (shard, f))| {
            f.episodes.iter().enumerate().map(move |(j, summary)| ((k, j), shard, summary))
        });
        for (i, (at_found, shard, summary)) in all.enumerate() {
            place.push(at_found);
            let key = (self.shard_recording[*shard], summary.episode_id);
            if summary.discarded() {
                self.discarded.insert(key);
                // Listed while it ran (a part): its listings leave sampling.
                if let Some(parts) = self.listed_parts.remove(&key) {
                    self.dropped.extend(parts.listed);
                }
                continue;
            }
            let at = (*shard, summary.record_offset, summary.position);
            match group_of.entry(key) {
                Entry::Vacant(v) => {
                    v.insert(groups.len());
                    groups.push(EpisodeGroup { key, first: i, last: i, last_at: at });
                }
                Entry::Occupied(o) => {
                    let g = &mut groups[*o.get()];
                    next[g.last] = i;
                    g.last = i;
                    g.last_at = g.last_at.max(at);
                }
            }
        }
        // An episode is listed where its latest record is (the order episodes ended).
        groups.sort_by_key(|g| g.last_at);
        // One episode's records, their parts and views: buffers kept from one to the next.
        let (mut records, mut joined, mut views) = (Vec::new(), Vec::new(), Vec::new());
        for EpisodeGroup { key, first, .. } in groups {
            if !self.discarded.is_empty() && self.discarded.contains(&key) {
                if let Some(parts) = self.listed_parts.remove(&key) {
                    self.dropped.extend(parts.listed);
                }
                continue;
            }
            let seq = |me: &Self, shard: usize| me.shards[shard].seq;
            // Opening has no parts listed before: no key to hash per episode.
            let earlier = if self.listed_parts.is_empty() { None } else { self.listed_parts.remove(&key) };
            if earlier.is_none() && next[first] == END {
                let (k, j) = place[first];
                let s = &found[k].1.episodes[j];
                let shard = found[k].0;
                if s.first_shard_seq == seq(self, shard) && !s.continues() {
                    // Most records of a refresh: an episode whole in one record, listed for the
                    // first time (what `views`, `listing` and `place` give it, without their
                    // buffers: a refresh costs what it found, at a few hundred episodes each).
                    let summary = std::mem::take(&mut found[k].1.episodes[j]);
                    if summary.length > 0 {
                        let from_seq = summary.first_shard_seq;
                        self.place_episode(Place::Append, key.0, shard, summary, false, from_seq);
                    }
                    continue;
                }
            }
            let ListedParts { records: before, listed } = earlier.unwrap_or_default();
            records.clear();
            records.extend(before);
            let mut i = first;
            while i != END {
                let (k, j) = place[i];
                records.push((found[k].0, std::mem::take(&mut found[k].1.episodes[j])));
                i = next[i];
            }
            records.sort_by_key(|(shard, s)| (seq(self, *shard), s.record_offset, s.position));
            joined.clear();
            joined.extend(records.iter().map(|(shard, s)| Part {
                seq: seq(self, *shard),
                first_shard_seq: s.first_shard_seq,
                length: s.length,
                piece_length: s.piece_length(),
            }));
            parts::views(&joined, |from, to| self.shards_present(key.0, from, to), &mut views);
            // Kept while more records may come: its end, or those of a shard before it that
            // is not listed yet (a store's shards may be listed out of order: see `views`).
            let more = records.last().is_some_and(|(shard, s)| {
                s.continues() || !self.shards_present(key.0, s.first_shard_seq, seq(self, *shard))
            });
            let mut now_listed = Vec::new();
            for (k, view) in views.iter().enumerate() {
                let summary = parts::listing(&joined, |i| &records[i].1, view);
                let shard = records[view.part].0;
                let at =
                    self.place_episode(parts::place(&listed, k), key.0, shard, summary, view.continued, view.from_seq);
                if more {
                    now_listed.extend(at);
                }
            }
            if more {
                self.listed_parts
                    .insert(key, ListedParts { records: std::mem::take(&mut records), listed: now_listed });
            }
        }
    }

    /// Whether every shard `from..=to` of the recording is in the dataset.
    fn shards_present(&self, recording: usize, from: u64, to: u64) -> bool {
        let seqs = &self.states[recording].seqs;
        if let (Some((&lo, _)), Some((&hi, _))) = (seqs.first_key_value(), seqs.last_key_value()) {
            if hi - lo == seqs.len() as u64 - 1 {
                // No shard missing between the first and the last: no walk over them (an open
                // asks for each episode).
                return to >= from && lo <= from && to <= hi;
            }
        }
        to >= from && seqs.range(from..=to).count() as u64 == (to - from).saturating_add(1)
    }

    /// Lists one episode (or part) if its rows can all be read, else reports it left out:
    /// appended, or at `Place::At` in place of an earlier listing of it (see `parts`), which
    /// stays if the new one cannot be read. Returns where it is listed.
    fn place_episode(
        &mut self,
        place: Place,
        recording: usize,
        shard: usize,
        summary: EpisodeSummary,
        continued: bool,
        from_seq: u64,
    ) -> Option<usize> {
        let listing = self.checked_listing(recording, shard, summary, continued, from_seq);
        match (place, listing) {
            (Place::At(at), Some((loc, episode))) => {
                // Grown in place: the step numbering after it moves (only what comes after).
                let before = self.episodes[at].summary.length;
                if episode.summary.length != before {
                    self.all.set_length(at, episode.summary.length);
                    self.regrown.push((at, before));
                }
                self.locs[at] = loc;
                self.episodes[at] = episode;
                Some(at)
            }
            (Place::At(at), None) => Some(at),
            (Place::Append, Some((loc, episode))) => {
                self.all.push(episode.summary.length);
                self.locs.push(loc);
                self.episodes.push(episode);
                Some(self.episodes.len() - 1)
            }
            (Place::Append, None) => None,
        }
    }

    /// The listing of one episode (or part) if its rows can all be read, else `None` (and it is
    /// reported left out, unless an exclusion left it out).
    fn checked_listing(
        &mut self,
        recording: usize,
        shard: usize,
        summary: EpisodeSummary,
        continued: bool,
        from_seq: u64,
    ) -> Option<(EpisodeLoc, EpisodeRef)> {
        if self.exclusions.excludes(&self.recordings[recording].id, &summary) {
            return None;
        }
        match self.check_episode(recording, shard, &summary, from_seq) {
            Ok(()) => {
                let loc = EpisodeLoc {
                    recording: recording as u32,
                    lane: summary.lane,
                    obs_first_row: summary.obs_first_row,
                    step_first_row: summary.step_first_row,
                    length: summary.length,
                };
                let continues = summary.continues();
                Some((loc, EpisodeRef { recording, shard, summary, continued, continues }))
            }
            Err(why) => {
                self.left_out.push(LeftOut { recording, shard, summary: summary.clone() });
                let why = format!("episode {} (lane {}) left out: {why}", summary.episode_id, summary.lane);
                // It counts as lost (`VerifyReport::episodes_lost`): the damage that took its rows
                // names no listed episode.
                let problem = Problem::new(&self.shards[shard].path, summary.record_offset, why).unlisting(1);
                self.own_problems.push(problem);
                None
            }
        }
    }

    fn note_chunk_damage(&mut self, shard: usize, offset: u64) {
        let damage = self.chunk_damage.entry(shard).or_insert(offset);
        *damage = (*damage).min(offset);
    }

    /// Lists the columns with ids 0, 1, 2... up to the first id no shard describes. A column
    /// and its mask must describe each other (a mask: bool, one value a row, on the same
    /// timeline); a pair that does not is damage, and reading either column says so.
    fn list_columns(&mut self, recording: usize) {
        let specs = &self.states[recording].specs;
        let mut listed: Vec<ColumnSpec> =
            specs.values().enumerate().take_while(|(i, s)| s.id as usize == *i).map(|(_, s)| s.clone()).collect();
        // The writer describes a column, then its mask: a file cut between the two has the
        // column's description alone (and no chunk of it yet). It is not listed until its mask is.
        let gap_after = listed.len() < specs.len();
        if !gap_after && listed.last().is_some_and(|c| c.mask.is_some_and(|m| m as usize >= listed.len())) {
            listed.pop();
        }
        let misnamed = crate::reader::catalog::column_names::name_problems(&listed);
        for spec in &listed {
            if self.recordings[recording].damaged_columns.iter().any(|(id, _)| *id == spec.id) {
                continue;
            }
            let named = misnamed.iter().find(|(id, _)| *id == spec.id).map(|(_, why)| why.clone());
            if let Some(why) = mask_pair_problem(&listed, spec).or(named) {
                let at = self.states[recording].spec_at.get(&spec.id).map(|&(s, o)| (self.shards[s].path.clone(), o));
                let (file, offset) = at.unwrap_or_else(|| (self.root.clone(), 0));
                let problem = Problem::new(file, offset, format!("column '{}': {why}", spec.name));
                self.recordings[recording].damaged_columns.push((spec.id, problem.clone()));
                self.own_problems.push(problem);
            }
        }
        if gap_after {
            let gap = listed.len();
            let key = format!("column gap {recording} {gap}");
            if self.reported.insert(key) {
                let why = format!(
                    "recording {}: no description of column {gap} survived, so columns {gap} and after are left out",
                    hex(&self.recordings[recording].id)
                );
                let file = self.recordings[recording].shards.first().map(|&s| self.shards[s].path.clone());
                let problem = Problem::new(file.unwrap_or_else(|| self.root.clone()), 0, why);
                self.recordings[recording].schema_damage = Some(problem.clone());
                self.own_problems.push(problem);
            }
        }
        self.recordings[recording].own_count = listed.len();
        self.recordings[recording].columns = listed;
    }

    /// Whether the episode's rows can all be read (see the module notes); its rows lie in shards
    /// `from_seq` up to `shard`'s.
    fn check_episode(&self, recording: usize, shard: usize, s: &EpisodeSummary, from_seq: u64) -> Result<(), String> {
        // Annotations never decide whether recorded data is listed.
        let columns = self.recordings[recording].own_columns();
        if !columns.iter().any(is_required) {
            return Err("no description of its columns survived".into());
        }
        for spec in columns {
            let (first, n) = episode_span(s, spec.timeline).ok_or("its row numbers overflow")?;
            let end = first + n;
            let list = self.chunk_lists.get(&(recording, s.lane, spec.id)).map_or(&[][..], |l| &l.chunks);
            let Some((a, b)) = first_gap(list, first, end) else { continue };
            let lost = |a, b| {
                format!(
                    "rows {a}..{b} of column '{}' are in no chunk (lost with a damaged or missing shard)",
                    spec.name
                )
            };
            if is_required(spec) {
                return Err(lost(a, b));
            }
            // A masked column holds a row (perhaps "no value") for every row from its first one
            // on, so a gap after that is lost data. Rows before its first chunk may predate the
            // column, unless damage before this episode's record may have held them. A column
            // and its mask are made together: the earlier first chunk of the two is the birth
            // (a mask that says "present" where the value's chunk is lost must not be read).
            let first_of = |id: ColumnId| {
                self.chunk_lists.get(&(recording, s.lane, id)).and_then(|l| l.chunks.first()).map(|c| c.first_row())
            };
            let partner = spec.mask.or(spec.mask_of);
            let born = [first_of(spec.id), partner.and_then(first_of)].into_iter().flatten().min().unwrap_or(u64::MAX);
            if let Some((a, b)) = first_gap(list, first.max(born), end) {
                return Err(lost(a, b));
            }
            if let Some(damage) = self.damage_before(recording, shard, s.record_offset, from_seq) {
                return Err(format!(
                    "rows {a}..{b} of column '{}' are in no chunk, and the damage at {damage} may have held them",
                    spec.name
                ));
            }
        }
        Ok(())
    }

    /// The first damage in this recording's shards `from_seq..` before (shard, offset): in an
    /// earlier one of them, one missing, or earlier in this shard.
    fn damage_before(&self, recording: usize, shard: usize, offset: u64, from_seq: u64) -> Option<String> {
        let seq = self.shards[shard].seq;
        let from_seq = from_seq.min(seq);
        let earlier = &self.states[recording].seqs;
        if seq > from_seq && (earlier.range(from_seq..seq).count() as u64) < seq - from_seq {
            return Some(format!("shard {seq} (earlier shards of the episode are missing)"));
        }
        let at = |i: usize, limit: u64| {
            let first = self.shard_damage[i].into_iter().chain(self.chunk_damage.get(&i).copied()).min();
            first.filter(|&d| d < limit).map(|d| format!("{}:{d}", self.shards[i].path.display()))
        };
        earlier.range(from_seq..seq).find_map(|(_, &i)| at(i, u64::MAX)).or_else(|| at(shard, offset))
    }

    /// Lists each hole in the shard_seq numbers of a recording once (a shard file missing between
    /// two present ones). Shards missing before the first present one are not reported: every
    /// shard stands on its own, and deleting the oldest ones is how old data is pruned. A single
    /// shard opened by name is expected to be alone.
    pub fn report_missing_shards(&mut self, evicted: impl Fn(&[u8; 16], u64) -> bool) {
        if !self.is_dir {
            return;
        }
        for (recording, state) in self.states.iter().enumerate() {
            let mut expected = None;
            let id = &self.recordings[recording].id;
            for (&seq, &shard) in &state.seqs {
                // Shards a bounded recording deleted before this reader saw them: no damage.
                let hole = expected.filter(|&e| seq > e && !(e..seq).all(|s| evicted(id, s)));
                if let Some(from) = hole {
                    if self.reported.insert(format!("missing {recording} {from}")) {
                        let why = format!(
                            "shard(s) {from}..{} of recording {} are missing (rows they held cannot be read)",
                            seq - 1,
                            hex(&self.recordings[recording].id)
                        );
                        self.own_problems.push(Problem::new(&self.shards[shard].path, 0, why));
                    }
                }
                expected = Some(seq.saturating_add(1));
            }
        }
    }

    /// A chunk left out at open refers to a column no Column record of its recording describes
    /// (the record was damaged): every read of that column is then a damaged file, not a wrong
    /// name. Decision: the first such chunk names the damage.
    pub(crate) fn note_lost_description(&mut self, recording: usize, shard: usize, chunk: &ChunkRef) {
        let rec = &mut self.recordings[recording];
        if (chunk.column as usize) < rec.columns.len() || rec.schema_damage.is_some() {
            return;
        }
        let why = format!("the description of column {} (lane {} has chunks of it) was lost", chunk.column, chunk.lane);
        rec.schema_damage = Some(Problem::new(&self.shards[shard].path, chunk.record_offset, why));
    }
}

/// Entry `episode` of a list kept per listed episode (`episodes`, `locs`), or the error naming it.
#[inline]
fn listed<T>(list: &[T], episode: usize) -> Result<&T> {
    list.get(episode)
        .ok_or_else(|| Error::OutOfRange(format!("episode {episode} is out of range (the dataset has {})", list.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::episode::{FLAG_CONTINUES, FLAG_DISCARDED};
    use crate::reader::catalog::trust::tests::summary;
    use crate::schema::{CodecSpec, Timeline};

    const REC: [u8; 16] = [7; 16];

    fn spec(
        id: ColumnId,
        name: &str,
        timeline: Timeline,
        mask: Option<ColumnId>,
        mask_of: Option<ColumnId>,
    ) -> ColumnSpec {
        let dtype = if mask_of.is_some() { "bool" } else { "float32" };
        ColumnSpec {
            id,
            name: name.into(),
            dtype: dtype.into(),
            shape: Vec::new(),
            timeline,
            mask_of,
            mask,
            role: None,
            codec: CodecSpec::default(),
            widens: None,
        }
    }

    /// obs (T+1 rows), reward (T rows), and a masked info column with its mask.
    fn columns() -> Vec<(u64, ColumnSpec)> {
        vec![
            (20, spec(0, "obs", Timeline::Obs, None, None)),
            (20, spec(1, "reward", Timeline::Step, None, None)),
            (20, spec(2, "info/x", Timeline::Step, Some(3), None)),
            (20, spec(3, "info/_x", Timeline::Step, None, Some(2))),
        ]
    }

    fn chunk(column: ColumnId, first_row: u64, n_rows: u32, record_offset: u64) -> ChunkRef {
        let row = if column == 3 { 1 } else { 4 };
        ChunkRef {
            lane: 0,
            column,
            first_row,
            n_rows,
            codec: 0,
            record_offset,
            data_offset: record_offset + 8,
            stored_len: row * n_rows as u64,
            raw_len: row * n_rows as u64,
            flags: 0,
            crc: 0,
        }
    }

    /// An episode's record: `length` steps from row `first` (obs and step rows alike), at `offset`.
    fn episode(id: u64, first: u64, length: u64, offset: u64) -> EpisodeSummary {
        EpisodeSummary { episode_id: id, record_offset: offset, ..summary(0, first, first, length) }
    }

    fn facts(seq: u64) -> ShardFacts {
        ShardFacts { path: PathBuf::from(format!("d/{seq}.trj")), recording_id: REC, seq, annotation: false }
    }

    #[test]
    fn shards_present_with_and_without_a_hole() {
        // (shard seqs registered, from, to) -> every shard from..=to present
        let cases: [(&[u64], u64, u64, bool); 12] = [
            (&[0], 0, 0, true),
            (&[0], 0, 1, false),
            (&[3, 4, 5], 3, 5, true),
            (&[3, 4, 5], 4, 4, true),
            (&[3, 4, 5], 2, 4, false),
            (&[3, 4, 5], 5, 6, false),
            (&[3, 4, 5], 5, 4, false),
            (&[0, 1, 3], 0, 1, true),
            (&[0, 1, 3], 1, 3, false),
            (&[0, 1, 3], 3, 3, true),
            (&[0, u64::MAX], 0, u64::MAX, false),
            (&[u64::MAX], u64::MAX, u64::MAX, true),
        ];
        for (seqs, from, to, want) in cases {
            let mut catalog = Catalog::new(Path::new("d"), true, Exclusions::default());
            for &seq in seqs {
                catalog.register(facts(seq));
            }
            assert_eq!(catalog.shards_present(0, from, to), want, "{seqs:?} {from}..={to}");
        }
    }

    struct Case {
        name: &'static str,
        chunks: Vec<ChunkRef>,
        episodes: Vec<EpisodeSummary>,
        damage: Option<u64>,
        listed: Vec<u64>,
        problem: Option<&'static str>,
    }

    impl Case {
        /// Episode 0 (obs rows 0..=4, step rows 0..4: 4 steps; its record at offset 500) over
        /// `chunks`, no damage: listed, with no problem, unless the case says otherwise.
        fn new(name: &'static str, chunks: Vec<ChunkRef>) -> Case {
            Case { name, chunks, episodes: vec![episode(0, 0, 4, 500)], damage: None, listed: vec![0], problem: None }
        }

        /// The episode is not listed, and `problem` says why.
        fn refused(self, problem: &'static str) -> Case {
            Case { listed: vec![], problem: Some(problem), ..self }
        }
    }

    #[test]
    fn episodes_listed_only_when_every_row_can_be_read() {
        let all = || vec![chunk(0, 0, 5, 100), chunk(1, 0, 4, 100), chunk(2, 0, 4, 100), chunk(3, 0, 4, 100)];
        // The info key (and its mask) first appears at step row 2.
        let info_from_2 = || vec![chunk(0, 0, 5, 100), chunk(1, 0, 4, 100), chunk(2, 2, 2, 100), chunk(3, 2, 2, 100)];
        let cases = vec![
            Case::new("whole", all()),
            Case::new("a required column lacks rows", vec![chunk(0, 0, 5, 100), chunk(1, 0, 2, 100)])
                .refused("rows 2..4 of column 'reward' are in no chunk"),
            Case::new("an info key that appears mid-episode", info_from_2()),
            Case::new(
                "a masked column's gap after its first row",
                vec![chunk(0, 0, 5, 100), chunk(1, 0, 4, 100), chunk(2, 0, 1, 100), chunk(3, 0, 1, 100)],
            )
            .refused("rows 1..4 of column 'info/x' are in no chunk"),
            Case {
                damage: Some(300),
                ..Case::new("damage before the record may have held an info key's first rows", info_from_2())
            }
            .refused("and the damage at d/0.trj:300 may have held them"),
            Case { damage: Some(900), ..Case::new("damage after the record touches nothing", info_from_2()) },
            Case {
                problem: Some("overlaps rows another chunk holds"),
                ..Case::new("an overlapping chunk is left out", [all(), vec![chunk(1, 2, 4, 200)]].concat())
            },
            Case::new(
                "a chunk claiming more bytes than its rows is left out, with its episodes",
                vec![chunk(0, 0, 5, 100), ChunkRef { raw_len: 99, stored_len: 99, ..chunk(1, 0, 4, 100) }],
            )
            .refused("99 bytes for 4 rows"),
            Case {
                episodes: vec![EpisodeSummary { flags: FLAG_DISCARDED, ..episode(0, 0, 4, 500) }],
                listed: vec![],
                ..Case::new("a discarded episode is not listed", all())
            },
        ];
        for case in cases {
            let mut catalog = Catalog::new(Path::new("d"), true, Exclusions::default());
            assert_eq!(catalog.register(facts(0)), Some(0));
            let found = Found { columns: columns(), chunks: case.chunks, episodes: case.episodes, ..Found::default() };
            catalog.take_in(vec![(0, found)], vec![case.damage], &mut VerifiedRecords::default());
            let ids: Vec<u64> = catalog.episodes.iter().map(|e| e.summary.episode_id).collect();
            assert_eq!(ids, case.listed, "{}", case.name);
            assert_eq!(catalog.all.num_steps(), 4 * case.listed.len() as u64, "{}", case.name);
            match case.problem {
                None => assert!(catalog.own_problems.is_empty(), "{}: {:?}", case.name, catalog.own_problems),
                Some(text) => assert!(
                    catalog.own_problems.iter().any(|p| p.why.contains(text)),
                    "{}: {:?}",
                    case.name,
                    catalog.own_problems
                ),
            }
        }
    }

    #[test]
    fn a_copied_shard_and_a_missing_one_are_named() {
        let mut catalog = Catalog::new(Path::new("d"), true, Exclusions::default());
        assert_eq!(catalog.register(facts(0)), Some(0));
        assert_eq!(catalog.register(facts(2)), Some(1));
        let copy = ShardFacts { path: PathBuf::from("d/copy.trj"), ..facts(0) };
        assert_eq!(catalog.register(copy), None);
        assert!(catalog.own_problems[0].why.contains("is also d/0.trj; this file is left out"));
        assert_eq!(catalog.recordings[0].shards, vec![0, 1]);
        catalog.report_missing_shards(|_, _| false);
        catalog.report_missing_shards(|_, _| false); // said once
        let missing: Vec<_> = catalog.own_problems.iter().filter(|p| p.why.contains("are missing")).collect();
        assert_eq!(missing.len(), 1);
        assert!(missing[0].why.starts_with("shard(s) 1..1 of recording"));
    }

    #[test]
    fn a_shard_a_bounded_recording_deleted_is_no_hole() {
        let mut catalog = Catalog::new(Path::new("d"), true, Exclusions::default());
        catalog.register(facts(0));
        catalog.register(facts(2));
        catalog.report_missing_shards(|_, seq| seq == 1);
        assert!(!catalog.own_problems.iter().any(|p| p.why.contains("are missing")));
    }

    #[test]
    fn an_episode_over_a_rollover_is_listed_again_in_place_when_its_end_arrives() {
        let mut catalog = Catalog::new(Path::new("d"), true, Exclusions::default());
        catalog.register(facts(0));
        // Shard 0: episode 0 whole (rows 0..4), episode 1 running at the rollover (3 steps so far).
        let part = EpisodeSummary { flags: FLAG_CONTINUES, ..episode(1, 5, 3, 600) };
        let found = Found {
            columns: columns(),
            chunks: vec![chunk(0, 0, 9, 100), chunk(1, 0, 8, 100)],
            episodes: vec![episode(0, 0, 4, 500), part.clone()],
            ..Found::default()
        };
        catalog.take_in(vec![(0, found)], vec![None], &mut VerifiedRecords::default());
        let lengths =
            |c: &Catalog| c.episodes.iter().map(|e| (e.summary.episode_id, e.summary.length)).collect::<Vec<_>>();
        assert_eq!(lengths(&catalog), vec![(0, 4), (1, 3)]);
        assert!(catalog.episodes[1].continues);
        // Shard 1 holds the rest: the end record lists episode 1 whole, where its part was.
        catalog.register(facts(1));
        let end = EpisodeSummary {
            first_shard_seq: 0,
            piece_obs_first_row: 8,
            piece_step_first_row: 8,
            record_offset: 300,
            ..episode(1, 5, 6, 300)
        };
        let found = Found {
            columns: columns(),
            chunks: vec![
                ChunkRef { flags: crate::format::chunks::CHUNK_REPEAT, ..chunk(0, 8, 1, 100) },
                chunk(0, 9, 3, 100),
                chunk(1, 8, 3, 100),
            ],
            episodes: vec![end],
            ..Found::default()
        };
        catalog.take_in(vec![(1, found)], vec![None, None], &mut VerifiedRecords::default());
        assert_eq!(lengths(&catalog), vec![(0, 4), (1, 6)], "{:?}", catalog.own_problems);
        assert!(!catalog.episodes[1].continues);
        assert_eq!(catalog.all.num_steps(), 10);
    }
}
