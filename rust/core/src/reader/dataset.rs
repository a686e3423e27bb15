//! A dataset: one shard file, or every `.trj` shard in a directory.
//!
//! Shards are grouped by recording id; within a recording, lane row numbers run on across
//! shards, so chunk lists are merged per (recording, lane, column) and kept sorted by first row
//! for binary search. Episodes are listed shard by shard (shards sorted by file name, which
//! sorts by start time), and within a shard in record order. `refresh` appends what appeared
//! since (new records, new shard files) after the episodes already listed, so indexes handed out
//! stay valid; an episode listed while it went on over a shard rollover is listed again in place
//! when its end arrives (`parts`), so the episodes listed are those a fresh open lists.
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
//!
//! Episodes an Index lists are taken from the index's checksummed copy of their record, without
//! touching the Episode record itself (opening reads no more than the index); that record is
//! checked when the episode's metadata is read. Episodes after the last Index are listed only if
//! their Episode record passes its checksum.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::cache::{ChunkCache, IntMap, VerifiedRecords};
use super::integrity::{Integrity, LeftOut};
use super::parts::{self, Part, Place};
use super::shard::{Found, Opened, Shard};
use super::steps::EpisodeSet;
use super::{OpenOptions, Problem, SHARD_EXTENSION};
use crate::error::{Error, Result};
use crate::format::chunks::ChunkRef;
use crate::format::codec::{codec_ids, CODEC_DELTA, CODEC_STACK, CODEC_ZSTD};
use crate::format::episode::EpisodeSummary;
use crate::schema::{ColumnId, ColumnSpec, Timeline};

/// What one recorder wrote: shards sharing a recording id.
#[derive(Debug, Clone)]
pub struct Recording {
    pub id: [u8; 16],
    /// The Meta record of its first shard present ("{}" if none survived).
    pub meta_json: String,
    /// Index = column id. Only a gap-free run of ids from 0 is listed (a problem names a gap).
    pub columns: Vec<ColumnSpec>,
    /// Its shards (indexes into `Dataset::shard_paths`), by shard_seq.
    pub shards: Vec<usize>,
    /// Set when damage hid some of its column descriptions: a read of a column it does not list
    /// is then a corrupt file, not a wrong name.
    pub schema_damage: Option<Problem>,
    /// Columns whose descriptions contradict each other (a mask that is not one): unreadable.
    pub damaged_columns: Vec<(ColumnId, Problem)>,
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

/// A chunk and the shard it lives in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    pub shard: usize,
    pub chunk: ChunkRef,
    /// Id of its Chunks record in `Dataset::verified`.
    pub record: u32,
}

impl Located {
    pub fn first_row(&self) -> u64 {
        self.chunk.first_row
    }
    /// Checked when the chunk was taken in, so it does not overflow.
    pub fn end_row(&self) -> u64 {
        self.chunk.first_row.saturating_add(self.chunk.n_rows as u64)
    }
}

pub(crate) type ListKey = (usize, u32, ColumnId);

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

/// The chunks of one (recording, lane, column), sorted by first row and disjoint.
#[derive(Debug, Default)]
pub(crate) struct ChunkList {
    pub chunks: Vec<Located>,
    /// Their end rows, packed: a batched read binary-searches them for every row it gathers,
    /// and 72-byte `Located`s would spread a search over many cache lines.
    pub ends: Vec<u64>,
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

pub struct Dataset {
    path: PathBuf,
    is_dir: bool,
    opts: OpenOptions,
    pub(super) shards: Vec<Shard>,
    shard_recording: Vec<usize>,
    /// Files opened, or left out for good (a duplicate shard).
    known_files: HashSet<PathBuf>,
    pub(super) recordings: Vec<Recording>,
    states: Vec<RecordingState>,
    pub(super) chunk_lists: IntMap<ListKey, ChunkList>,
    episodes: Vec<EpisodeRef>,
    /// The same episodes' rows, compactly.
    pub(super) locs: Vec<EpisodeLoc>,
    /// Every episode, with the global step index over them (extended as episodes are listed).
    all: EpisodeSet,
    /// Problems found at the dataset level (across shards); never replaced.
    own_problems: Vec<Problem>,
    reported: HashSet<String>,
    /// Per shard, the first Chunks record whose chunks were left out (rows may be lost there).
    chunk_damage: HashMap<usize, u64>,
    /// Shard problems and own problems, gathered after every open/refresh.
    problems: Vec<Problem>,
    pub(super) cache: ChunkCache,
    pub(super) verified: VerifiedRecords,
    /// The Episode record decoded last: (shard, record offset) and its episodes.
    last_episode_record: Mutex<Option<EpisodeBatch>>,
    /// Episodes whose latest record goes on in a later shard (a rollover while a recorder
    /// writes): their records so far and where they are listed, so that the record of their end
    /// lists them as a fresh open would (`parts`).
    listed_parts: HashMap<(usize, u64), ListedParts>,
    /// Episodes discarded after parts of them were written.
    discarded: HashSet<(usize, u64)>,
    skipped: Vec<SkippedRecord>,
    /// Files replaced or deleted under the reader since opening (it reads what it opened).
    notices: Vec<Problem>,
    /// Listings to leave out, episodes left out, damage found while reading (`integrity`).
    pub(super) integrity: Integrity,
}

type EpisodeBatch = ((usize, u64), Arc<Vec<crate::format::episode::DecodedEpisode>>);

/// The records of one episode found in an update: ((recording, episode id), [(shard, record)]).
type EpisodeGroup = ((usize, u64), Vec<(usize, EpisodeSummary)>);

/// An episode listed while it goes on in a later shard: its records (shard, record) so far and
/// the dataset indexes of its listings.
#[derive(Default)]
struct ListedParts {
    records: Vec<(usize, EpisodeSummary)>,
    listed: Vec<usize>,
}

impl Dataset {
    /// Opens a shard file or a directory of shards (`*.trj`; other files are ignored).
    ///
    /// Errors: `NotFound` (no such path), `NotTrajcore` (a file that is not a trajcore shard:
    /// the file named, or a `.trj` file in the directory), `Version` (a newer major version),
    /// `Corrupt` (damage, with `strict`), `Io`.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Dataset> {
        Dataset::open_with(path, opts, Integrity::default())
    }

    /// `open`, with what is known of damage beyond the files (see `integrity`).
    pub(super) fn open_with(path: &Path, opts: OpenOptions, integrity: Integrity) -> Result<Dataset> {
        let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let mut ds = Dataset {
            path: path.to_path_buf(),
            is_dir: meta.is_dir(),
            cache: ChunkCache::new(opts.cache_bytes),
            opts,
            shards: Vec::new(),
            shard_recording: Vec::new(),
            known_files: HashSet::new(),
            recordings: Vec::new(),
            states: Vec::new(),
            chunk_lists: IntMap::default(),
            episodes: Vec::new(),
            locs: Vec::new(),
            all: EpisodeSet::all(),
            own_problems: Vec::new(),
            reported: HashSet::new(),
            chunk_damage: HashMap::new(),
            problems: Vec::new(),
            verified: VerifiedRecords::default(),
            last_episode_record: Mutex::new(None),
            listed_parts: HashMap::new(),
            discarded: HashSet::new(),
            skipped: Vec::new(),
            notices: Vec::new(),
            integrity,
        };
        ds.update()?;
        let (lru_bytes, store) = super::shared_chunks::plan_for(&ds);
        ds.cache = ChunkCache::with_store(lru_bytes, store);
        Ok(ds)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn options(&self) -> &OpenOptions {
        &self.opts
    }

    /// Damage found so far: what was left out, and where.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The writer's timelog of `recording` stored in its shards (a sample per second of
    /// recording, in order), and the damage that left samples out (a damaged record loses its
    /// minute or so of samples; the rest are read).
    pub fn timelog(&self, recording: usize) -> (Vec<crate::format::timelog::Sample>, Vec<Problem>) {
        let (mut samples, mut problems) = (Vec::new(), Vec::new());
        for &shard in self.recordings.get(recording).map_or(&[][..], |r| &r.shards[..]) {
            let shard = &self.shards[shard];
            for &offset in &shard.timelog_records {
                match shard.timelog_record(offset) {
                    Ok(s) => samples.extend(s),
                    Err(why) => problems.push(Problem::new(&shard.path, offset, why)),
                }
            }
        }
        (samples, problems)
    }

    /// Shard files replaced (renamed over) or deleted since they were opened: not damage (the
    /// dataset goes on reading the files it opened), but news a reader of a live directory wants.
    pub fn notices(&self) -> &[Problem] {
        &self.notices
    }

    /// Records of kinds this version does not know, skipped (a newer minor version wrote them).
    pub fn skipped_records(&self) -> &[SkippedRecord] {
        &self.skipped
    }

    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.shards.iter().map(|s| s.path.clone()).collect()
    }

    pub fn recordings(&self) -> &[Recording] {
        &self.recordings
    }

    pub fn episodes(&self) -> &[EpisodeRef] {
        &self.episodes
    }

    /// The sum of episode lengths.
    /// Per (recording, column): chunks, raw bytes and stored bytes over every chunk listed
    /// (rows of discarded episodes included: they are in the file too), ordered by recording and
    /// column id. Read from the index: nothing is decoded.
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

    pub fn num_steps(&self) -> u64 {
        self.all.num_steps()
    }

    /// Every episode, in `episodes()` order, with the global step index: step `g` of the
    /// dataset is step `g - first_step(k)` of the episode `k` holding it. `refresh` extends it.
    pub fn all_episodes(&self) -> &EpisodeSet {
        &self.all
    }

    /// A subset of the episodes (dataset indexes, in the order given; repeats allowed) to sample
    /// from, with its own step numbering. It does not follow `refresh`.
    pub fn episode_set(&self, episodes: &[usize]) -> Result<EpisodeSet> {
        let lengths =
            episodes.iter().map(|&i| self.episode(i).map(|e| e.summary.length)).collect::<Result<Vec<_>>>()?;
        Ok(EpisodeSet::subset(episodes.to_vec(), lengths))
    }

    /// (episode, step within it) of global step `step`.
    pub fn locate_step(&self, step: u64) -> Result<(usize, u64)> {
        self.all.locate_step(step)
    }

    /// Re-scans shards that grew and picks up new shard files (reading while a recorder writes).
    /// New episodes are appended after those already listed. Returns how many were added.
    pub fn refresh(&mut self) -> Result<usize> {
        let before = self.episodes.len();
        self.update()?;
        Ok(self.episodes.len() - before)
    }

    pub(super) fn episode(&self, episode: usize) -> Result<&EpisodeRef> {
        self.episodes.get(episode).ok_or_else(|| {
            Error::OutOfRange(format!("episode {episode} is out of range (the dataset has {})", self.episodes.len()))
        })
    }

    /// Errors: `OutOfRange`.
    pub fn recording(&self, recording: usize) -> Result<&Recording> {
        self.recordings.get(recording).ok_or_else(|| {
            Error::OutOfRange(format!(
                "recording {recording} is out of range (the dataset has {})",
                self.recordings.len()
            ))
        })
    }

    /// The episode's metadata JSON ("{}" if none), read from its Episode record. The last
    /// record decoded is kept: an Episode record holds a batch of episodes (one compressed
    /// body), and reading metadata in order (`convert`, filters) would otherwise decode each
    /// record once per episode in it.
    pub fn episode_metadata(&self, episode: usize) -> Result<String> {
        let e = self.episode(episode)?;
        let shard = &self.shards[e.shard];
        let key = (e.shard, e.summary.record_offset);
        let mut last = self.last_episode_record.lock().unwrap_or_else(|p| p.into_inner());
        let batch = match last.as_ref() {
            Some((k, batch)) if *k == key => batch.clone(),
            _ => {
                let batch = Arc::new(shard.episode_record(e.summary.record_offset)?);
                *last = Some((key, batch.clone()));
                batch
            }
        };
        drop(last);
        shard.metadata_in(&batch, &e.summary)
    }

    pub fn column_id(&self, recording: usize, name: &str) -> Option<ColumnId> {
        let columns = &self.recordings.get(recording)?.columns;
        columns.iter().position(|c| c.name == name).map(|i| i as ColumnId)
    }

    /// The rows an episode spans in a column: (first row, number of rows). T+1 rows on the
    /// observation timeline, T on the step timeline.
    pub fn episode_rows(&self, episode: usize, column: ColumnId) -> Result<(u64, u64)> {
        let e = self.episode(episode)?;
        let spec = self.recording(e.recording)?.columns.get(column as usize);
        let spec = spec.ok_or_else(|| Error::Invalid(format!("no column {column} in recording {}", e.recording)))?;
        episode_span(&e.summary, spec.timeline)
            .ok_or_else(|| Error::Invalid(format!("episode {episode}: row numbers overflow")))
    }

    /// Finds new shard files, scans what grew, and takes in what was found.
    fn update(&mut self) -> Result<()> {
        let mut opened = Vec::new();
        for path in self.discover()? {
            match Shard::open(&path, self.is_dir, self.opts.mmap) {
                Ok(Opened::Shard(shard)) => opened.push(*shard),
                Ok(Opened::NotStarted) => {}
                // One damaged header must not hide the other shards of a directory.
                Err(Error::NotTrajcore { why, .. }) if self.is_dir && !self.opts.strict => {
                    let why = format!("not a trajcore file ({why}): the file is left out");
                    self.own_problems.push(Problem::new(&path, 0, why));
                    self.known_files.insert(path);
                }
                Err(e) => return Err(e),
            }
        }
        // A scan that fails (an I/O error) leaves its shard as it was; what other shards found
        // is still taken in before the error is returned.
        let mut found: Vec<(usize, Found)> = Vec::new();
        let mut failed = None;
        for shard in &mut self.shards {
            match shard.check_changed() {
                Some((problem, true)) => self.own_problems.push(problem),
                Some((notice, false)) => self.notices.push(notice),
                None => {}
            }
        }
        for (i, shard) in self.shards.iter_mut().enumerate() {
            if !shard.finished && failed.is_none() {
                match shard.scan() {
                    Ok(f) => found.push((i, f)),
                    Err(e) => failed = Some(e),
                }
            }
        }
        for mut shard in opened {
            if failed.is_some() {
                break;
            }
            match shard.scan() {
                Ok(f) => {
                    if let Some(index) = self.register(&shard) {
                        self.shards.push(shard);
                        found.push((index, f));
                    }
                }
                Err(e) => failed = Some(e),
            }
        }
        self.ingest(found);
        if let Some(e) = failed {
            return Err(e);
        }
        self.report_missing_shards();
        self.problems = self.shards.iter().flat_map(|s| s.problems.iter().chain(&s.tail)).cloned().collect();
        self.problems.extend(self.own_problems.iter().cloned());
        self.problems.extend(self.integrity.exclusions.problems.iter().cloned());
        match self.problems.first() {
            Some(p) if self.opts.strict => Err(p.to_error()),
            _ => Ok(()),
        }
    }

    /// Shard files not opened yet, in file name order.
    fn discover(&self) -> Result<Vec<PathBuf>> {
        if !self.is_dir {
            let new = self.shards.is_empty() && !self.known_files.contains(&self.path);
            return Ok(if new { vec![self.path.clone()] } else { Vec::new() });
        }
        let io = |e| Error::io(&self.path, e);
        let mut paths = Vec::new();
        for entry in fs::read_dir(&self.path).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let is_shard = path.extension().is_some_and(|ext| ext == SHARD_EXTENSION);
            if is_shard && !self.known_files.contains(&path) && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        Ok(paths)
    }

    /// Assigns a new shard to its recording; `None` (and a problem) if that recording already
    /// has a shard with its shard_seq (a copied file): the later file is left out.
    fn register(&mut self, shard: &Shard) -> Option<usize> {
        self.known_files.insert(shard.path.clone());
        let id = shard.header.recording_id;
        let recording = match self.recordings.iter().position(|r| r.id == id) {
            Some(r) => r,
            None => {
                let meta_json = "{}".to_string();
                self.recordings.push(Recording {
                    id,
                    meta_json,
                    columns: Vec::new(),
                    shards: Vec::new(),
                    schema_damage: None,
                    damaged_columns: Vec::new(),
                });
                self.states.push(RecordingState::default());
                self.recordings.len() - 1
            }
        };
        let seq = shard.header.shard_seq;
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
        Some(index)
    }

    fn ingest(&mut self, found: Vec<(usize, Found)>) {
        for (shard, f) in &found {
            let file = &self.shards[*shard].path;
            self.skipped.extend(f.skipped.iter().map(|&(offset, kind)| SkippedRecord {
                file: file.clone(),
                offset,
                kind,
            }));
        }
        // Schemas first: chunks and episodes are checked against them.
        for (shard, f) in &found {
            let recording = self.shard_recording[*shard];
            let seq = self.shards[*shard].header.shard_seq;
            let state = &mut self.states[recording];
            if let Some((_, meta)) = f.metas.first() {
                if state.meta_seq.is_none_or(|s| seq < s) {
                    state.meta_seq = Some(seq);
                    self.recordings[recording].meta_json = meta.clone();
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

        let mut new_chunks: HashMap<ListKey, Vec<Located>> = HashMap::new();
        for (shard, f) in &found {
            let recording = self.shard_recording[*shard];
            for chunk in &f.chunks {
                match check_chunk(&self.states[recording].specs, chunk) {
                    Ok(()) => {
                        let record = self.verified.id((*shard, chunk.record_offset));
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
                let id = self.verified.id((*shard, record));
                self.verified.mark(id);
            }
        }
        for (key, mut chunks) in new_chunks {
            // Repeated rows (see `CHUNK_REPEAT`) only fill in for a shard the dataset lacks.
            chunks.sort_by_key(|c| (c.chunk.is_repeat(), c.first_row()));
            let entry = self.chunk_lists.entry(key).or_default();
            let list = &mut entry.chunks;
            for c in chunks {
                // Lists stay sorted and free of overlaps, so a row has at most one chunk.
                let at = list.partition_point(|x| x.first_row() < c.first_row());
                let clash = (at > 0 && list[at - 1].end_row() > c.first_row())
                    || list.get(at).is_some_and(|next| next.first_row() < c.end_row());
                if clash && c.chunk.is_repeat() {
                    continue;
                }
                if clash {
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
                } else {
                    list.insert(at, c);
                }
            }
            entry.ends = list.iter().map(Located::end_row).collect();
        }

        self.list_episodes(found.into_iter().flat_map(|(shard, f)| f.episodes.into_iter().map(move |e| (shard, e))));
    }

    /// Lists the episodes of the Episode records found, in record order. The parts of an
    /// episode that ran over a shard rollover (see `format::episode`) are merged: with every
    /// shard from the episode's first to its latest record present, one listing covers it all;
    /// otherwise each part the dataset holds is listed on its own, marked as a part.
    fn list_episodes(&mut self, records: impl Iterator<Item = (usize, EpisodeSummary)>) {
        let mut groups: Vec<EpisodeGroup> = Vec::new();
        let mut group_of: HashMap<(usize, u64), usize> = HashMap::new();
        for (shard, summary) in records {
            let key = (self.shard_recording[shard], summary.episode_id);
            if summary.discarded() {
                self.discarded.insert(key);
                continue;
            }
            let g = *group_of.entry(key).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push((shard, summary));
        }
        // An episode is listed where its latest record is (the order episodes ended).
        let last_at = |g: &EpisodeGroup| g.1.iter().map(|(shard, s)| (*shard, s.record_offset, s.position)).max();
        groups.sort_by_key(|g| last_at(g));
        let mut relisted = false;
        for (key, parts) in groups {
            if self.discarded.contains(&key) {
                self.listed_parts.remove(&key);
                continue;
            }
            let seq = |me: &Self, shard: usize| me.shards[shard].header.shard_seq;
            let ListedParts { mut records, listed } = self.listed_parts.remove(&key).unwrap_or_default();
            records.extend(parts);
            records.sort_by_key(|(shard, s)| (seq(self, *shard), s.record_offset, s.position));
            let joined: Vec<Part> = records
                .iter()
                .map(|(shard, s)| Part {
                    seq: seq(self, *shard),
                    first_shard_seq: s.first_shard_seq,
                    length: s.length,
                    piece_length: s.piece_length(),
                })
                .collect();
            let views = parts::views(&joined, |from, to| self.shards_present(key.0, from, to));
            let mut now_listed = Vec::with_capacity(views.len());
            for (view, place) in views.iter().zip(parts::places(&listed, views.len())) {
                let (shard, record) = &records[view.part];
                let summary = if view.piece { record.as_piece() } else { record.clone() };
                let at = self.place_episode(place, key.0, *shard, summary, view.continued, view.from_seq);
                relisted |= matches!(place, Place::At(_));
                now_listed.extend(at);
            }
            if records.last().is_some_and(|(_, s)| s.continues()) {
                self.listed_parts.insert(key, ListedParts { records, listed: now_listed });
            }
        }
        if relisted {
            // Listings grew in place: the step numbering after them moved.
            self.all = EpisodeSet::all();
            for e in &self.episodes {
                self.all.push(e.summary.length);
            }
        }
    }

    /// Whether every shard `from..=to` of the recording is in the dataset.
    fn shards_present(&self, recording: usize, from: u64, to: u64) -> bool {
        let seqs = &self.states[recording].seqs;
        to >= from && seqs.range(from..=to).count() as u64 == to - from + 1
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
        if self.integrity.excludes(&self.recordings[recording].id, &summary) {
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
                self.integrity.left_out.push(LeftOut { recording, shard, summary: summary.clone() });
                let why = format!("episode {} (lane {}) left out: {why}", summary.episode_id, summary.lane);
                self.own_problems.push(Problem::new(&self.shards[shard].path, summary.record_offset, why));
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
        let misnamed = super::column_names::name_problems(&listed);
        for spec in &listed {
            if self.recordings[recording].damaged_columns.iter().any(|(id, _)| *id == spec.id) {
                continue;
            }
            let named = misnamed.iter().find(|(id, _)| *id == spec.id).map(|(_, why)| why.clone());
            if let Some(why) = mask_pair_problem(&listed, spec).or(named) {
                let at = self.states[recording].spec_at.get(&spec.id).map(|&(s, o)| (self.shards[s].path.clone(), o));
                let (file, offset) = at.unwrap_or_else(|| (self.path.clone(), 0));
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
                let problem = Problem::new(file.unwrap_or_else(|| self.path.clone()), 0, why);
                self.recordings[recording].schema_damage = Some(problem.clone());
                self.own_problems.push(problem);
            }
        }
        self.recordings[recording].columns = listed;
    }

    /// Whether the episode's rows can all be read (see the module notes); its rows lie in shards
    /// `from_seq` up to `shard`'s.
    fn check_episode(&self, recording: usize, shard: usize, s: &EpisodeSummary, from_seq: u64) -> Result<(), String> {
        let columns = &self.recordings[recording].columns;
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
        let seq = self.shards[shard].header.shard_seq;
        let from_seq = from_seq.min(seq);
        let earlier = &self.states[recording].seqs;
        if seq > from_seq && (earlier.range(from_seq..seq).count() as u64) < seq - from_seq {
            return Some(format!("shard {seq} (earlier shards of the episode are missing)"));
        }
        let at = |i: usize, limit: u64| {
            let s = &self.shards[i];
            let first =
                s.problems.iter().chain(&s.tail).map(|p| p.offset).chain(self.chunk_damage.get(&i).copied()).min();
            first.filter(|&d| d < limit).map(|d| format!("{}:{d}", s.path.display()))
        };
        earlier.range(from_seq..seq).find_map(|(_, &i)| at(i, u64::MAX)).or_else(|| at(shard, offset))
    }

    /// Lists each hole in the shard_seq numbers of a recording once (a shard file missing between
    /// two present ones). Shards missing before the first present one are not reported: every
    /// shard stands on its own, and deleting the oldest ones is how old data is pruned. A single
    /// shard opened by name is expected to be alone.
    fn report_missing_shards(&mut self) {
        if !self.is_dir {
            return;
        }
        for (recording, state) in self.states.iter().enumerate() {
            let mut expected = None;
            for (&seq, &shard) in &state.seqs {
                if let Some(from) = expected.filter(|&e| seq > e) {
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
}

/// Why a column and its mask do not describe each other, if they do not.
fn mask_pair_problem(columns: &[ColumnSpec], spec: &ColumnSpec) -> Option<String> {
    // (value, mask) must point at each other, the mask a bool scalar on the value's timeline.
    let pair_holds = |value: &ColumnSpec, mask: &ColumnSpec| {
        value.mask == Some(mask.id)
            && mask.mask_of == Some(value.id)
            && mask.dtype == "bool"
            && mask.shape.is_empty()
            && mask.timeline == value.timeline
    };
    if let Some(m) = spec.mask {
        let Some(mask) = columns.get(m as usize) else { return Some(format!("its mask column {m} is not described")) };
        if !pair_holds(spec, mask) {
            return Some(format!("column {m} ('{}') is not a mask of it", mask.name));
        }
    }
    if let Some(v) = spec.mask_of {
        let Some(value) = columns.get(v as usize) else {
            return Some(format!("the column {v} it masks is not described"));
        };
        if !pair_holds(value, spec) {
            return Some(format!("it is not the mask of column {v} ('{}')", value.name));
        }
    }
    None
}

/// Columns that hold a value on every row: neither a masked column nor a mask.
pub(super) fn is_required(spec: &ColumnSpec) -> bool {
    spec.mask.is_none() && spec.mask_of.is_none()
}

/// (first row, number of rows) of an episode on a timeline; `None` on overflow.
pub(crate) fn episode_span(s: &EpisodeSummary, timeline: Timeline) -> Option<(u64, u64)> {
    let (first, n) = match timeline {
        Timeline::Obs => (s.obs_first_row, s.length.checked_add(1)?),
        Timeline::Step => (s.step_first_row, s.length),
    };
    first.checked_add(n)?;
    Some((first, n))
}

/// The first run of rows in `start..end` that no chunk of the (sorted, disjoint) list holds.
fn first_gap(list: &[Located], start: u64, end: u64) -> Option<(u64, u64)> {
    let mut cursor = start;
    let from = list.partition_point(|c| c.end_row() <= start);
    for c in &list[from..] {
        if cursor >= end {
            return None;
        }
        if c.first_row() > cursor {
            return Some((cursor, c.first_row().min(end)));
        }
        cursor = c.end_row();
    }
    (cursor < end).then_some((cursor, end))
}

/// Checks what a chunk claims against its column, so reads can trust the lengths.
fn check_chunk(specs: &BTreeMap<ColumnId, ColumnSpec>, c: &ChunkRef) -> Result<(), String> {
    let where_ = format!("chunk of column {} lane {} (rows from {})", c.column, c.lane, c.first_row);
    let spec = specs.get(&c.column).ok_or_else(|| format!("{where_}: no description of the column survived"))?;
    if c.n_rows == 0 || c.first_row.checked_add(c.n_rows as u64).is_none() {
        return Err(format!("{where_}: impossible row count {}", c.n_rows));
    }
    let ids: Vec<u8> = codec_ids(c.codec).collect();
    let zstd = ids.iter().filter(|&&id| id == CODEC_ZSTD).count();
    // zstd must come last (undone first) so its frame header can vouch for the decoded size;
    // the frame-stack filter first (undone last), as it changes the length.
    let known = ids.iter().all(|&id| [CODEC_ZSTD, CODEC_DELTA, CODEC_STACK].contains(&id));
    let stack_misplaced = ids.iter().skip(1).any(|&id| id == CODEC_STACK);
    if !known || zstd > 1 || (zstd == 1 && ids.last() != Some(&CODEC_ZSTD)) || stack_misplaced {
        return Err(format!("{where_}: unsupported codec pipeline {ids:?}"));
    }
    if zstd == 0 && !ids.contains(&CODEC_STACK) && c.stored_len != c.raw_len {
        return Err(format!("{where_}: stored uncompressed in {} bytes but says {}", c.stored_len, c.raw_len));
    }
    if c.raw_len > spec.max_decoded_chunk() {
        return Err(format!(
            "{where_}: claims {} decoded bytes, more than a chunk of its column may hold ({})",
            c.raw_len,
            spec.max_decoded_chunk()
        ));
    }
    match spec.row_bytes() {
        Some(row) => {
            if (c.n_rows as u64).checked_mul(row as u64) != Some(c.raw_len) {
                return Err(format!("{where_}: {} bytes for {} rows of {row} bytes", c.raw_len, c.n_rows));
            }
        }
        None => {
            if ids.contains(&CODEC_DELTA) || ids.contains(&CODEC_STACK) {
                return Err(format!("{where_}: the delta or frame-stack codec on a variable-length column"));
            }
            if (c.n_rows as u64 + 1) * 8 > c.raw_len {
                return Err(format!("{where_}: {} bytes cannot hold the offsets of {} strings", c.raw_len, c.n_rows));
            }
        }
    }
    Ok(())
}

pub(crate) fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
