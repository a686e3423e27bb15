//! One shard file: the header check, its bytes (`source`: a memory map or positioned reads), and
//! the two ways to find its records.
//!
//! - Clean path: a closed file ends with an End record pointing at the last Index record; the
//!   Index chain (each one points at the previous) describes every record, so opening reads the
//!   chain and nothing else.
//! - Recovery path: a file without a valid End record (the writer was killed, or is still
//!   writing) is read by hopping record headers forward from the file header. Records covered by
//!   an Index record come from that index; records after the last Index are decoded directly
//!   (their payload checksums verified). The hop stops at the first header that does not decode
//!   or whose record runs past the end of the file: everything before it stays readable.
//!
//! A record whose header is sound but whose payload checksum fails is skipped on its own (the
//! header says where the next record starts) and reported; a header that does not decode ends
//! the hop, since nothing after it can be located.
//!
//! A shard remembers how far it was scanned, so `scan` called again (after the writer appended)
//! only hops over the new records.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::framing::{frame, FrameError, RecordAt};
use super::source::Source;
use super::tail::{self, Tail};
use crate::error::{Error, Result};
use crate::file_identity::identity_of;
// Whether a writer holds its shard's lock (see `tail`): a writer locks its file before it
// writes the header, and a file is only scanned once it has one.
use crate::format::chunks::{self, ChunkRef};
use crate::format::episode::{self, EpisodeSummary};
use crate::format::header::{FileHeader, HeaderError, HEADER_LEN, MAGIC, VERSION_MAJOR};
use crate::format::index::{IndexDelta, NO_PREVIOUS};
use crate::format::record::{RecordKind, RECORD_HEADER_LEN};
use crate::reader::int_map::{IntMap, IntSet};
use crate::reader::Problem;
use crate::schema::ColumnSpec;
use crate::writer::files::shard::writer_holds_lock;

const HEADER_END: u64 = HEADER_LEN as u64;
/// What `check_changed` says of a shard file deleted under the reader.
const DELETED: &str = "the file was deleted since it was opened: the dataset still reads the file it opened";
/// An End record: a 24-byte header and an 8-byte payload, already 8-aligned.
const END_RECORD_LEN: u64 = RECORD_HEADER_LEN as u64 + 8;

fn kind_name(kind: u32) -> String {
    match RecordKind::from_repr(kind) {
        Some(k) => format!("{k:?}"),
        None => format!("unknown kind {kind}"),
    }
}

/// What one scan of a shard found that earlier scans had not.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Meta record JSON texts, with their record offsets, in file order.
    pub metas: Vec<(u64, String)>,
    pub columns: Vec<(u64, ColumnSpec)>,
    pub chunks: Vec<ChunkRef>,
    /// In record order.
    pub episodes: Vec<EpisodeSummary>,
    /// Where the checksums this scan already verified sit (`ChunkRef::checked_at`).
    pub verified: Vec<u64>,
    /// Records of kinds this version does not know (a newer writer's): (offset, kind), skipped.
    pub skipped: Vec<(u64, u32)>,
}

impl Found {
    /// Whether the scan found nothing new.
    pub fn is_empty(&self) -> bool {
        let Found { metas, columns, chunks, episodes, verified, skipped } = self;
        metas.is_empty()
            && columns.is_empty()
            && chunks.is_empty()
            && episodes.is_empty()
            && verified.is_empty()
            && skipped.is_empty()
    }
}

pub(crate) enum Opened {
    Shard(Box<Shard>),
    /// A file in a dataset directory whose header is not written yet (a writer just created it):
    /// skipped now, picked up by a later `refresh`.
    NotStarted,
}

pub(crate) struct Shard {
    pub path: PathBuf,
    pub header: FileHeader,
    /// Shared so a scan can read it while it updates the shard.
    pub source: Arc<Source>,
    /// None for an object in object storage (`open_remote`): nothing to watch or lock there.
    file: Option<File>,
    /// The file's identity when opened: a file replaced under its name (by a rename) is noticed.
    identity: (u64, u64),
    /// The identity of the file found under its name that is this shard compacted by its
    /// writer: checked once (reading its header), not at every refresh.
    compacted_as: Option<(u64, u64)>,
    /// `check_changed` found something (said once).
    change_reported: bool,
    /// Its modification time when its End record was read (a closed shard never changes).
    modified: Option<std::time::SystemTime>,
    /// A valid End record was read: the file is complete and will not change.
    pub finished: bool,
    /// The file's length as `check_changed` found it, for the `scan` that follows it (one
    /// `stat` per refresh of a shard still written, not two).
    len_seen: Option<u64>,
    /// Records before this offset have been taken in; the next scan hops from here.
    scanned_to: u64,
    /// Records found damaged; index entries pointing at them are left out.
    bad_records: IntSet<u64>,
    /// Damage that stays: later scans never look at those bytes again.
    pub problems: Vec<Problem>,
    /// Why the last scan stopped before the end of the file (an unfinished final record, a
    /// damaged header). Replaced by every scan, since a writer may since have completed it.
    pub tail: Option<Problem>,
    /// Offsets of its Timelog records, in file order (read only when asked for).
    pub timelog_records: Vec<u64>,
    /// Where its Opening Copies record lies (a closed shard of format 1.2): a damaged Episode
    /// record is read from its copy there.
    copies: Option<std::ops::Range<u64>>,
    /// `check_changed` found the file deleted under its name (the shard still reads the file
    /// it opened).
    pub deleted: bool,
    /// Deleted by a bounded recording (`writer::files::capacity`): its episodes are out of sampling.
    pub evicted: bool,
    /// Held by each `EpisodePin` of an episode with rows here: an evicted shard is let go of
    /// (`release`) only once the store's is the last.
    pub pin: Arc<()>,
    /// Let go of (`release`): its file and map are closed, its chunks' places forgotten.
    pub released: bool,
}

impl Shard {
    /// Opens a shard and checks its header. `in_directory`: the file was found in a dataset
    /// directory (rather than named by the user), where a file shorter than a header that starts
    /// like one is a shard the writer has just created.
    pub fn open(path: &Path, in_directory: bool, mmap: bool) -> Result<Opened> {
        if let Some(url) = crate::objstore::url::url_of(path) {
            return Shard::open_remote(path, url, in_directory);
        }
        let io = |e| Error::io(path, e);
        let not_trajcore = |why: String| Error::NotTrajcore { path: path.to_path_buf(), why };
        let mut file = File::open(path).map_err(io)?;
        let mut head = Vec::with_capacity(HEADER_LEN);
        (&mut file).take(HEADER_LEN as u64).read_to_end(&mut head).map_err(io)?;
        let Some(header) = check_head(path, &head, in_directory)? else { return Ok(Opened::NotStarted) };
        let source = Source::open(&file, path, mmap)?;
        if source.len() < HEADER_LEN as u64 {
            return Err(not_trajcore("the file shrank while it was being opened".into()));
        }
        let identity = file_identity(&file).map_err(io)?;
        Ok(Opened::Shard(Box::new(Shard::new(path, header, source, Some(file), identity))))
    }

    fn new(path: &Path, header: FileHeader, source: Source, file: Option<File>, identity: (u64, u64)) -> Shard {
        Shard {
            path: path.to_path_buf(),
            header,
            source: Arc::new(source),
            file,
            identity,
            compacted_as: None,
            change_reported: false,
            modified: None,
            finished: false,
            len_seen: None,
            scanned_to: HEADER_END,
            bad_records: IntSet::default(),
            problems: Vec::new(),
            tail: None,
            timelog_records: Vec::new(),
            copies: None,
            deleted: false,
            evicted: false,
            pin: Arc::new(()),
            released: false,
        }
    }

    /// `Invalid`, naming the eviction, for a read of a shard let go of (`release`): no listing
    /// sampling draws from reads it, only an episode listed before its eviction and handed out
    /// after it was let go of.
    pub fn check_not_released(&self) -> Result<()> {
        if !self.released {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "{}: the rows read are in shards a bounded recording (capacity_steps) deleted, which this dataset \
             has let go of (this one and those after it): the episode read is evicted \
             (`Dataset.evicted_episodes`); an Episode object taken before the eviction keeps its shards readable",
            self.path.display()
        )))
    }

    /// Closes the file and its map (a shard a bounded recording deleted: its disk space is freed
    /// once no other process holds it either). Nothing is read from it afterwards: reads of its
    /// rows fail, naming the eviction (`reads::rows`).
    pub fn release(&mut self) {
        self.source = Arc::new(Source::released(self.source.len()));
        self.file = None;
        self.finished = true;
        self.released = true;
    }

    fn problem(&self, offset: u64, why: impl Into<String>) -> Problem {
        Problem::new(&self.path, offset, why)
    }

    /// What another process did to the file since it was opened, reported once: truncated (or
    /// cut short) in place, after which nothing more is read from it (through a memory map, the
    /// lost pages would fault); or replaced or deleted under its name, which is harmless (the
    /// reader keeps the file it opened) but worth saying.
    /// Returns the notice, and whether it is damage (rows lost) rather than news. `by_name`:
    /// the directory may have changed, so look the file up by name too (replaced or deleted).
    pub fn check_changed(&mut self, by_name: bool) -> Option<(Problem, bool)> {
        let file = self.file.as_ref()?;
        if self.change_reported {
            return None;
        }
        let metadata = file.metadata();
        self.len_seen = metadata.as_ref().ok().filter(|_| !self.finished).map(|m| m.len());
        let (why, damage) = match metadata {
            Ok(m) if m.len() < self.source.len() => {
                self.source.mark_unreadable();
                let why = format!(
                    "the file shrank from {} to {} bytes since it was opened (rewritten in place?): its episodes \
                     can no longer be read; replace files by renaming a new one over them, never in place",
                    self.source.len(),
                    m.len()
                );
                (why, true)
            }
            // A closed shard is never written again: a later change is someone rewriting it.
            Ok(m) if self.finished && m.modified().ok() != self.modified => {
                self.source.mark_unreadable();
                let why = "the file was modified in place since it was opened (a closed shard never changes): its \
                           episodes can no longer be read; replace files by renaming a new one over them, never in \
                           place"
                    .to_string();
                (why, true)
            }
            _ if !by_name => return None,
            _ => match std::fs::metadata(&self.path).map(|m| identity_of(&m)) {
                Ok(id) if id == self.identity || Some(id) == self.compacted_as => return None,
                // The writer's compaction of this very shard (`writer::files::compact`): same rows.
                Ok(id) if self.compacted_under_its_name() => {
                    self.compacted_as = Some(id);
                    return None;
                }
                // Gone since: compacted, then deleted by a bounded recording (see below).
                Ok(_) if !self.path.exists() => {
                    self.deleted = true;
                    (DELETED.to_string(), false)
                }
                Ok(_) => (
                    "the file was replaced under its name since it was opened: the dataset still reads the file it \
                     opened; reopen it to read the new one"
                        .to_string(),
                    false,
                ),
                Err(_) => {
                    self.deleted = true;
                    (DELETED.to_string(), false)
                }
            },
        };
        self.change_reported = true;
        Some((self.problem(0, why), damage))
    }

    /// The inode numbers of the files this shard is known as under its name: the one it opened,
    /// and its compaction by its writer once seen (see `dir_watch::look_up_by_name`).
    pub fn known_inos(&self) -> [u64; 2] {
        [self.identity.1, self.compacted_as.map_or(self.identity.1, |c| c.1)]
    }

    /// The identity of the file under this shard's name that is its compaction by its writer,
    /// while the shard still reads the file it opened (see `store::compacted`).
    pub fn rewrite(&self) -> Option<(u64, u64)> {
        self.compacted_as.filter(|_| self.file.is_some())
    }

    /// Opens and scans the rewrite `rewrite` found. `Ok(None)`: the file under the name is
    /// another one by now.
    ///
    /// Errors: those of `open` and `scan`.
    pub fn open_rewrite(&self, mmap: bool) -> Result<Option<(Shard, Found)>> {
        let Opened::Shard(new) = Shard::open(&self.path, true, mmap)? else { return Ok(None) };
        let mut new = *new;
        if Some(new.identity) != self.compacted_as || !self.header.compacted_as(&new.header) {
            return Ok(None);
        }
        let found = new.scan()?;
        Ok(Some((new, found)))
    }

    /// Reads the rewrite `new` from now on (its file, its map, where its records are), keeping
    /// what the dataset decided of this shard (its pin, eviction, the notices said). The file
    /// it read before is closed, and its map unmapped once no view handed out holds it.
    pub fn take_rewrite(&mut self, new: Shard) {
        self.header = new.header;
        self.source = new.source;
        self.file = new.file;
        self.identity = new.identity;
        self.compacted_as = None;
        self.modified = new.modified;
        self.finished = new.finished;
        self.scanned_to = new.scanned_to;
        self.bad_records = new.bad_records;
        self.problems = new.problems;
        self.tail = new.tail;
        self.timelog_records = new.timelog_records;
        self.copies = new.copies;
    }

    /// Whether the file now under this shard's name is this shard compacted by its writer
    /// (`FileHeader::compacted_as`): the same rows, so nothing to say.
    fn compacted_under_its_name(&self) -> bool {
        let mut head = [0u8; HEADER_LEN];
        File::open(&self.path).and_then(|mut f| f.read_exact(&mut head)).is_ok()
            && FileHeader::decode(&head).is_ok_and(|h| self.header.compacted_as(&h))
    }

    /// Takes in the records written since the last scan (all of them, the first time).
    pub fn scan(&mut self) -> Result<Found> {
        let mut found = Found::default();
        if self.finished {
            return Ok(found);
        }
        let len = match (&self.file, self.len_seen.take()) {
            (Some(_), Some(len)) => len,
            (Some(file), None) => file.metadata().map_err(|e| Error::io(&self.path, e))?.len(),
            (None, _) => self.source.len(), // an object in a store: whole as listed
        };
        if self.source.is_unreadable() || len < self.source.len() {
            return Ok(found); // `check_changed` reported it; nothing more is read from it
        }
        if let Some(file) = self.file.as_ref().filter(|_| len > self.source.len()) {
            self.source = Arc::new(Source::open(file, &self.path, self.source.is_mapped())?);
        }
        let mut clean_problem = None;
        if self.scanned_to == HEADER_END {
            let clean = self.scan_clean();
            if let Some(object) = self.source.remote_object() {
                object.opened(); // reads from now on fetch the records, not their copies
            }
            match clean {
                Ok(clean) => found = clean,
                Err(problem) => clean_problem = problem,
            }
        }
        if !self.finished {
            self.scan_forward(&mut found);
            // The forward hop usually trips over the same damage; list it once.
            if let Some(p) = clean_problem {
                let seen = self.problems.iter().chain(&self.tail).any(|q| q.offset == p.offset);
                if !seen {
                    self.problems.push(p);
                }
            }
        }
        // Index entries and directly decoded records arrive interleaved: restore file order.
        found.metas.sort_by_key(|m| m.0);
        found.columns.sort_by_key(|c| c.0);
        found.episodes.sort_by_key(|e| (e.record_offset, e.position));
        if let Some(e) = self.source.remote_object().and_then(|o| o.failure()) {
            return Err(e); // a store that failed is not damage
        }
        Ok(found)
    }

    /// The clean path. `Err(None)`: no End record (an unclean file, not damage);
    /// `Err(Some(problem))`: an End record whose index chain is damaged.
    fn scan_clean(&mut self) -> Result<Found, Option<Problem>> {
        let src = self.source.clone();
        let map: &Source = &src;
        let len = map.len();
        if len < HEADER_END + END_RECORD_LEN {
            return Err(None);
        }
        let end_offset = len - END_RECORD_LEN;
        let end = match frame(map, end_offset) {
            Ok(r) if r.kind() == Some(RecordKind::End) && r.header.payload_len == 8 && r.next == len => r,
            _ => return Err(None),
        };
        if !end.payload_ok(map) {
            return Err(None);
        }
        let mut at = u64::from_le_bytes((*end.payload(map)).try_into().unwrap_or([0xff; 8]));
        let final_index = at;
        let mut limit = end_offset;
        let mut deltas = Vec::new();
        // In a store: the records opening reads, copied (see `opening_copies`), in the cache.
        let mut copied = std::collections::HashSet::new();
        // Offsets strictly decrease along the chain, so this ends.
        while at != NO_PREVIOUS {
            let broken = |why: String| Some(self.problem(at, why));
            if at < HEADER_END || at >= limit {
                let why = format!("index chain points to byte offset {at}, outside {HEADER_END}..{limit}");
                return Err(Some(self.problem(limit, why)));
            }
            let rec = frame(map, at).map_err(|e| broken(format!("index record: {e}")))?;
            if rec.kind() != Some(RecordKind::Index) || rec.next > limit {
                return Err(broken(format!("index chain points to a {} record", kind_name(rec.header.kind))));
            }
            if rec.header.unknown_required() != 0 {
                let flags = rec.header.unknown_required();
                return Err(broken(format!(
                    "index record needs format feature flag(s) {flags:#x} this trajcore does not know"
                )));
            }
            if !rec.payload_ok(map) {
                return Err(broken("index record payload checksum mismatch".into()));
            }
            let delta = IndexDelta::decode(&rec.payload(map), rec.header.packed_table())
                .map_err(|e| broken(format!("index record: {e}")))?;
            limit = at;
            at = delta.prev_index;
            if deltas.is_empty() {
                self.copies = super::opening_copies::copies_range(&delta, final_index);
                let copies = self.copies.clone();
                copied = copies.map(|range| super::opening_copies::fetch_copies(map, range)).unwrap_or_default();
            }
            deltas.push(delta);
        }
        let mut found = Found::default();
        let _ = map.prefetch(&crate::reader::store::find_shards::indexed_ranges(&deltas, &copied)); // a failure: see `scan`
        for delta in deltas.iter().rev() {
            self.apply_index(map, delta, HEADER_END, &mut found);
        }
        self.finished = true;
        self.modified = self.file.as_ref().and_then(|f| f.metadata().and_then(|m| m.modified()).ok());
        self.source.seal(self.modified);
        self.scanned_to = len;
        self.tail = None;
        Ok(found)
    }

    /// The recovery path, from where the last scan stopped.
    fn scan_forward(&mut self, found: &mut Found) {
        let src = self.source.clone();
        let map: &Source = &src;
        let len = map.len();
        let from = self.scanned_to;
        let mut at = from;
        // Records since the last Index record, decoded directly unless a later Index covers them.
        let mut pending: Vec<RecordAt> = Vec::new();
        self.tail = None;
        while at < len {
            let rec = match frame(map, at) {
                Ok(rec) => rec,
                Err(e) => {
                    self.tail = self.tail_problem(map, at, e);
                    break;
                }
            };
            match rec.kind() {
                Some(RecordKind::Index) => {
                    let delta = if rec.header.unknown_required() != 0 {
                        let flags = rec.header.unknown_required();
                        Err(format!("needs format feature flag(s) {flags:#x} this trajcore does not know"))
                    } else if rec.payload_ok(map) {
                        IndexDelta::decode(&rec.payload(map), rec.header.packed_table())
                    } else {
                        Err("payload checksum mismatch".into())
                    };
                    match delta {
                        Ok(delta) => {
                            // It covers the records after the previous Index it names; records
                            // before that (behind a damaged Index) are still decoded directly.
                            let covers_from = if delta.prev_index == NO_PREVIOUS { 0 } else { delta.prev_index };
                            pending.retain(|r| r.offset < covers_from);
                            self.apply_index(map, &delta, from, found);
                        }
                        Err(why) => {
                            // The records it covers are still in `pending` and get decoded directly.
                            self.problems.push(self.problem(at, format!("index record: {why}")));
                            self.bad_records.insert(at);
                        }
                    }
                }
                Some(RecordKind::End) => {
                    if rec.payload_ok(map) && rec.header.payload_len == 8 {
                        self.finished = true;
                        self.modified = self.file.as_ref().and_then(|f| f.metadata().and_then(|m| m.modified()).ok());
                        self.source.seal(self.modified);
                        if rec.next < len {
                            let why = format!("{} bytes after the end record are ignored", len - rec.next);
                            self.problems.push(self.problem(rec.next, why));
                        }
                        at = len;
                        break;
                    }
                    self.problems.push(self.problem(at, "end record payload is damaged"));
                }
                Some(RecordKind::Timelog) => self.timelog_records.push(rec.offset),
                // The Episode records it copies are taken in themselves.
                Some(RecordKind::OpeningCopies) => {}
                Some(_) => pending.push(rec),
                // Unknown kinds come from newer minor versions: skipped, and listed.
                None => found.skipped.push((rec.offset, rec.header.kind)),
            }
            at = rec.next;
        }
        for rec in &pending {
            self.take_record(map, rec, found);
        }
        self.scanned_to = at;
    }

    /// Explains why the hop stopped at `at`: the bytes after the last complete record are
    /// reported (the writer lost them), worded by what they look like: a record cut short (the
    /// writer stopped), zeros (space the file system extended but the data never reached), or
    /// damage. `None` for the record a live writer is writing (see `tail`).
    fn tail_problem(&self, map: &Source, at: u64, e: FrameError) -> Option<Problem> {
        let rest = map.len() - at;
        let zeros = e != FrameError::Unreadable && all_zero(map, at);
        let shape = match e {
            _ if zeros => Tail::Zeros,
            FrameError::PartialHeader | FrameError::PastEnd { .. } => Tail::CutShort,
            FrameError::BadHeader | FrameError::Unreadable => Tail::Damaged,
        };
        // The lock first, then the length (see `tail`): a writer that let go of it wrote its last byte.
        let (locked, grew) = match &self.file {
            Some(file) if shape == Tail::CutShort => {
                let locked = writer_holds_lock(file);
                (locked, !locked && file.metadata().is_ok_and(|m| m.len() > map.len()))
            }
            _ => (false, false),
        };
        if !tail::is_damage(shape, locked, grew) {
            return None;
        }
        let why = if zeros {
            format!(
                "{rest} zero bytes at end of file after the last complete record (data that never reached the disk)"
            )
        } else {
            match e {
                FrameError::PartialHeader | FrameError::PastEnd { .. } => {
                    format!("unfinished record at end of file (writer stopped): {e}")
                }
                FrameError::BadHeader => format!("{e}; the {rest} bytes from here on cannot be read"),
                FrameError::Unreadable => format!("{e}; the {rest} bytes from here on cannot be read"),
            }
        };
        Some(self.problem(at, why))
    }

    /// Takes in the records an Index record describes, except those before `from` (taken in by
    /// an earlier scan) or found damaged. Chunk references are checked against the framing of
    /// the Chunks record they point into (a header read, no payload checksum: that waits for the
    /// first read of the chunk).
    fn apply_index(&mut self, map: &Source, delta: &IndexDelta, from: u64, found: &mut Found) {
        let is_new = |s: &Self, offset: u64| offset >= from && !s.bad_records.contains(&offset);
        for other in &delta.other_records {
            let offset = other.offset;
            if !is_new(self, offset) {
                continue;
            }
            match RecordKind::from_repr(other.kind) {
                // Checked when read (`timelog`): opening does not read them (in a store, a
                // request each).
                Some(RecordKind::Timelog) => {
                    self.timelog_records.push(offset);
                    continue;
                }
                // Used only to open a shard in a store (`opening_copies`); checked by `verify`.
                Some(RecordKind::OpeningCopies) => continue,
                _ => {}
            }
            match frame(map, offset) {
                Ok(rec) if matches!(rec.kind(), Some(RecordKind::Meta | RecordKind::Column)) => {
                    self.take_record(map, &rec, found)
                }
                Ok(rec) if rec.kind().is_none() && rec.header.kind == other.kind => {
                    found.skipped.push((offset, other.kind));
                }
                Ok(rec) => {
                    let why = format!(
                        "index lists a {} record here, expected meta, column or timelog",
                        kind_name(rec.header.kind)
                    );
                    self.problems.push(self.problem(offset, why));
                }
                Err(e) => self.problems.push(self.problem(offset, format!("record listed by the index: {e}"))),
            }
        }
        // Data bounds (start, end) of each Chunks record the index points into.
        let mut records: IntMap<u64, Option<(u64, u64)>> = IntMap::default();
        for chunk in &delta.chunks {
            if !is_new(self, chunk.record_offset) {
                continue;
            }
            // A chunk with its own checksum needs nothing of its record, only its bytes inside
            // the file (checked when first read): a damaged table or record header costs it
            // nothing.
            let bounds = if chunk.has_checksum() {
                Some((HEADER_END, map.len()))
            } else {
                match records.get(&chunk.record_offset) {
                    Some(&bounds) => bounds,
                    None => {
                        let bounds = self.chunks_record_bounds(map, chunk.record_offset);
                        records.insert(chunk.record_offset, bounds);
                        bounds
                    }
                }
            };
            let Some((start, end)) = bounds else { continue };
            let inside =
                chunk.data_offset >= start && chunk.data_offset.checked_add(chunk.stored_len).is_some_and(|e| e <= end);
            if inside {
                found.chunks.push(*chunk);
            } else {
                let why = format!(
                    "chunk of column {} lane {} (rows from {}) points outside its record or the file ({} bytes at offset {})",
                    chunk.column, chunk.lane, chunk.first_row, chunk.stored_len, chunk.data_offset
                );
                self.problems.push(self.problem(chunk.record_offset, why));
            }
        }
        for &offset in &delta.episode_records {
            if !is_new(self, offset) {
                continue;
            }
            match frame(map, offset) {
                Ok(rec) if rec.kind() == Some(RecordKind::Episode) => self.take_record(map, &rec, found),
                Ok(rec) => {
                    let why = format!("index lists a {} record here, expected episode", kind_name(rec.header.kind));
                    self.problems.push(self.problem(offset, why));
                }
                Err(e) => self.problems.push(self.problem(offset, format!("record listed by the index: {e}"))),
            }
        }
    }

    /// Where chunk data may lie in the Chunks record at `offset` (after its table, inside its
    /// payload); `None` (and a problem) when the framing is damaged.
    fn chunks_record_bounds(&mut self, map: &Source, offset: u64) -> Option<(u64, u64)> {
        let bounds = match frame(map, offset) {
            Ok(rec) if rec.kind() == Some(RecordKind::Chunks) && rec.header.unknown_required() != 0 => Err(format!(
                "chunks record needs format feature flag(s) {:#x} this trajcore does not know",
                rec.header.unknown_required()
            )),
            Ok(rec) if rec.kind() == Some(RecordKind::Chunks) => {
                // Where the data lies follows from the payload's first bytes: read those only.
                let payload_len = (rec.payload_end - rec.payload_start) as u64;
                let head =
                    map.bytes(rec.payload_start as u64, payload_len.min(chunks::HEAD_LEN as u64)).unwrap_or_default();
                chunks::data_area(&head, payload_len, rec.header.packed_table()).map(|(start, end)| {
                    let at = rec.payload_start as u64;
                    (at + start, at + end)
                })
            }
            Ok(rec) => Err(format!("index points at a {} record, expected chunks", kind_name(rec.header.kind))),
            Err(e) => Err(format!("chunks record listed by the index: {e}")),
        };
        match bounds {
            Ok(b) => Some(b),
            Err(why) => {
                self.problems.push(self.problem(offset, why));
                self.bad_records.insert(offset);
                None
            }
        }
    }

    /// Verifies and decodes a Meta, Column, Chunks or Episode record found by hopping (or a
    /// Meta/Column record listed by an index).
    fn take_record(&mut self, map: &Source, rec: &RecordAt, found: &mut Found) {
        let kind = rec.kind();
        if rec.header.unknown_required() != 0 {
            let why = format!(
                "{} record needs format feature flag(s) {:#x} this trajcore does not know (a newer writer): left out",
                kind_name(rec.header.kind),
                rec.header.unknown_required()
            );
            self.problems.push(self.problem(rec.offset, why));
            self.bad_records.insert(rec.offset);
            return;
        }
        if !rec.payload_ok(map) {
            if kind == Some(RecordKind::Episode) && self.take_copy(map, rec.offset, found) {
                return;
            }
            let why = format!("{} record payload checksum mismatch", kind_name(rec.header.kind));
            let mut unlisted = 0;
            let why = match kind {
                Some(RecordKind::Chunks) => self.salvage_chunks(map, rec, found, why),
                Some(RecordKind::Episode) => match episode::claimed_count(&rec.payload(map)) {
                    Some(n) => {
                        unlisted = n;
                        format!("{why}: about {n} episode(s) in it are no longer listed")
                    }
                    None => format!("{why}: the episodes in it are no longer listed"),
                },
                _ => why,
            };
            self.problems.push(self.problem(rec.offset, why).unlisting(unlisted));
            self.bad_records.insert(rec.offset);
            return;
        }
        let payload = rec.payload(map);
        let payload: &[u8] = &payload;
        let result = match kind {
            Some(RecordKind::Meta) => parse_meta(payload).map(|text| found.metas.push((rec.offset, text))),
            Some(RecordKind::Column) => parse_column(payload).map(|spec| found.columns.push((rec.offset, spec))),
            Some(RecordKind::Chunks) => chunks::decode(payload, rec.offset, rec.header.packed_table()).map(|refs| {
                found.verified.extend(refs.iter().map(ChunkRef::checked_at));
                found.chunks.extend(refs);
            }),
            Some(RecordKind::Episode) => episode::decode_batch(payload, rec.offset)
                .map(|batch| found.episodes.extend(batch.into_iter().map(|(summary, _, _)| summary))),
            _ => Ok(()),
        };
        if let Err(why) = result {
            self.problems.push(self.problem(rec.offset, format!("{} record: {why}", kind_name(rec.header.kind))));
            self.bad_records.insert(rec.offset);
        }
    }

    /// Takes in the episodes of the damaged Episode record at `offset` from its intact copy, if
    /// this shard keeps one: as a reader of the object in a store does, which reads the copies
    /// at open and never the record, so both list the same episodes and neither says more at
    /// open (nothing is lost); `verify` reports the damage. Returns whether it did.
    fn take_copy(&self, map: &Source, offset: u64, found: &mut Found) -> bool {
        let Some(Ok(batch)) = self.episode_copy(map, offset).map(|copy| episode::decode_batch(&copy, offset)) else {
            return false;
        };
        found.episodes.extend(batch.into_iter().map(|(summary, _, _)| summary));
        true
    }

    /// The chunks of a damaged Chunks record that carry their own checksum and pass it: they are
    /// taken in (checked), the rest is left out. Returns `why` with what was kept said.
    fn salvage_chunks(&mut self, map: &Source, rec: &RecordAt, found: &mut Found, why: String) -> String {
        let Ok(refs) = chunks::decode(&rec.payload(map), rec.offset, rec.header.packed_table()) else {
            return format!("{why}; its table is damaged too: every chunk in it is lost");
        };
        let total = refs.len();
        let intact: Vec<ChunkRef> = refs
            .into_iter()
            .filter(|c| {
                let check = |d: &[u8]| if c.checksum_matches(d) { Ok(()) } else { Err(()) };
                c.has_checksum() && map.checked(c.data_offset, c.stored_len, check).is_some_and(|r| r.is_ok())
            })
            .collect();
        let kept = intact.len();
        found.verified.extend(intact.iter().map(ChunkRef::checked_at));
        found.chunks.extend(intact);
        format!("{why}: {kept} of its {total} chunks pass their own checksums and are kept, the rest is lost")
    }

    /// Checks once, before its data is first used, that a chunk with its own checksum is intact
    /// (`data`: its stored bytes).
    pub fn verify_chunk(&self, chunk: &ChunkRef, data: &[u8]) -> Result<()> {
        if !chunk.checksum_matches(data) {
            let why = format!(
                "chunk of column {} lane {} (rows {}..{}) fails its checksum",
                chunk.column,
                chunk.lane,
                chunk.first_row,
                chunk.end_row()
            );
            return Err(Error::corrupt(&self.path, chunk.data_offset, why));
        }
        Ok(())
    }

    /// Checks once, before its data is first used, that a Chunks record is intact.
    pub fn verify_chunks_record(&self, offset: u64) -> Result<()> {
        self.check_not_released()?;
        let map: &Source = &self.source;
        let rec = frame(map, offset).map_err(|e| Error::corrupt(&self.path, offset, format!("chunks record: {e}")))?;
        if rec.kind() != Some(RecordKind::Chunks) {
            let why = format!("expected a chunks record, found a {} record", kind_name(rec.header.kind));
            return Err(Error::corrupt(&self.path, offset, why));
        }
        if !rec.payload_ok(map) {
            return Err(Error::corrupt(&self.path, offset, "chunks record payload checksum mismatch"));
        }
        Ok(())
    }

    /// The decoded batch of an Episode record (checksum verified): each episode's fixed part,
    /// metadata bytes and metrics blob.
    /// A damaged one is read from its intact copy in the Opening Copies record, if there is one.
    pub(crate) fn episode_record(&self, offset: u64) -> Result<Vec<episode::DecodedEpisode>> {
        self.check_not_released()?;
        let corrupt = |why: String| Error::corrupt(&self.path, offset, why);
        let map: &Source = &self.source;
        let checked = frame(map, offset).map_err(|e| format!("episode record: {e}")).and_then(|rec| {
            if rec.kind() != Some(RecordKind::Episode) {
                return Err(format!("expected an episode record, found a {} record", kind_name(rec.header.kind)));
            }
            if !rec.payload_ok(map) {
                return Err("episode record payload checksum mismatch".into());
            }
            Ok(rec.payload(map))
        });
        match checked {
            Ok(payload) => episode::decode_batch(&payload, offset).map_err(corrupt),
            Err(why) => match self.episode_copy(map, offset) {
                Some(copy) => episode::decode_batch(&copy, offset).map_err(corrupt),
                None => Err(corrupt(why)),
            },
        }
    }

    /// The payload of the intact copy of the Episode record at `offset`, if this shard keeps one.
    pub(crate) fn episode_copy(&self, map: &Source, offset: u64) -> Option<Vec<u8>> {
        let range = self.copies.clone()?;
        super::opening_copies::copy_payload(map, range, offset)
    }

    /// The samples of the Timelog record at `offset` (checksum verified), or why not.
    pub(crate) fn timelog_record(&self, offset: u64) -> Result<Vec<crate::format::timelog::Sample>, String> {
        let map: &Source = &self.source;
        let rec = frame(map, offset).map_err(|e| format!("timelog record: {e}"))?;
        if rec.kind() != Some(RecordKind::Timelog) {
            return Err(format!("expected a timelog record, found a {} record", kind_name(rec.header.kind)));
        }
        if rec.header.unknown_required() != 0 {
            let flags = rec.header.unknown_required();
            return Err(format!("timelog record needs format feature flag(s) {flags:#x} this trajcore does not know"));
        }
        if !rec.payload_ok(map) {
            return Err("timelog record payload checksum mismatch".into());
        }
        crate::format::timelog::decode(&rec.payload(map))
    }

    /// The metadata JSON of `summary`'s episode from its decoded Episode record.
    pub(crate) fn metadata_in(&self, batch: &[episode::DecodedEpisode], summary: &EpisodeSummary) -> Result<String> {
        let corrupt = |why: String| Error::corrupt(&self.path, summary.record_offset, why);
        let Some((stored, meta, _)) = batch.get(summary.position as usize) else {
            return Err(corrupt(format!("the episode record holds no episode {}", summary.position)));
        };
        // (A listing may show the part of the episode its shard holds: rows can differ.)
        let same = stored.lane == summary.lane && stored.episode_id == summary.episode_id;
        if !same {
            return Err(corrupt("the episode record does not match its listing".into()));
        }
        if meta.is_empty() {
            return Ok("{}".into());
        }
        parse_meta(meta).map_err(|why| corrupt(format!("episode metadata: {why}")))
    }

    /// Opens a shard in object storage (see `remote`): its header and its last bytes (the End
    /// record and the Index records before it) come in one round of range requests.
    fn open_remote(path: &Path, url: &str, in_directory: bool) -> Result<Opened> {
        let source = Source::remote(crate::reader::store::find_shards::object(url)?);
        source.prefetch(&crate::reader::store::find_shards::opening_ranges(source.len()))?;
        let head = source.bytes(0, source.len().min(HEADER_LEN as u64));
        if let Some(e) = head.is_none().then(|| source.remote_object().and_then(|o| o.failure())).flatten() {
            return Err(e); // a store that failed, not a shard whose header is not written yet
        }
        let Some(header) = check_head(path, &head.unwrap_or_default(), in_directory)? else {
            return Ok(Opened::NotStarted);
        };
        Ok(Opened::Shard(Box::new(Shard::new(path, header, source, None, (0, 0)))))
    }
}

/// The checks of a shard's first bytes (`head`, up to `HEADER_LEN`): its header, or `None` for a
/// file in a dataset directory whose header is not written yet.
fn check_head(path: &Path, head: &[u8], in_directory: bool) -> Result<Option<FileHeader>> {
    let not_trajcore = |why: String| Error::NotTrajcore { path: path.to_path_buf(), why };
    let n = head.len().min(MAGIC.len());
    if head[..n] != MAGIC[..n] {
        return Err(not_trajcore("bad magic: the file does not start with \"TRAJCORE\"".into()));
    }
    if head.len() >= 12 {
        let major = u16::from_le_bytes([head[8], head[9]]);
        let minor = u16::from_le_bytes([head[10], head[11]]);
        if major != VERSION_MAJOR {
            return Err(Error::Version {
                path: path.to_path_buf(),
                found: format!("{major}.{minor}"),
                supported: VERSION_MAJOR,
            });
        }
    }
    if head.len() < HEADER_LEN && in_directory {
        return Ok(None);
    }
    let header = FileHeader::decode(head).map_err(|e| {
        not_trajcore(match e {
            HeaderError::TooShort => {
                format!("the file is {} bytes, shorter than the {HEADER_LEN}-byte header", head.len())
            }
            HeaderError::BadMagic => "bad magic: the file does not start with \"TRAJCORE\"".into(),
            HeaderError::BadChecksum => "the file header checksum does not match".into(),
        })
    })?;
    if header.unknown_required() != 0 {
        return Err(Error::Unsupported {
            path: path.to_path_buf(),
            why: format!(
                "the file needs format feature flag(s) {:#x} that this trajcore does not know (it was written \
                 by a newer version {}.{}); upgrade trajcore to read it",
                header.unknown_required(),
                header.version_major,
                header.version_minor
            ),
        });
    }
    Ok(Some(header))
}

/// Whether the bytes from `at` to the end are all zero (read a block at a time).
fn all_zero(src: &Source, at: u64) -> bool {
    const BLOCK: u64 = 1 << 20;
    let mut from = at;
    while from < src.len() {
        let n = BLOCK.min(src.len() - from);
        match src.bytes(from, n) {
            Some(b) if b.iter().all(|&x| x == 0) => from += n,
            _ => return false,
        }
    }
    true
}

/// (device, inode): what identifies a file whatever its name.
fn file_identity(file: &File) -> std::io::Result<(u64, u64)> {
    let m = file.metadata()?;
    Ok(identity_of(&m))
}

fn parse_meta(payload: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(payload).map_err(|e| format!("not UTF-8: {e}"))?;
    serde_json::from_str::<serde_json::Value>(text).map_err(|e| format!("not JSON: {e}"))?;
    Ok(text.to_string())
}

fn parse_column(payload: &[u8]) -> Result<ColumnSpec, String> {
    let spec: ColumnSpec = serde_json::from_slice(payload).map_err(|e| format!("not a column spec: {e}"))?;
    spec.validate().map_err(|e| e.to_string())?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::io::AsRawFd;

    use super::*;
    use crate::writer::config::Durability;
    use crate::writer::files::shard::ShardWriter;

    /// The bytes of a complete shard, as the writer writes them.
    fn whole_shard() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let writer = ShardWriter::create(dir.path(), [1; 16], 0, b"{}", &[], Durability::Flush).unwrap();
        std::fs::read(writer.finish().unwrap()).unwrap()
    }

    fn opened(path: &Path, mmap: bool) -> Shard {
        match Shard::open(path, true, mmap).unwrap() {
            Opened::Shard(shard) => *shard,
            Opened::NotStarted => panic!("the header is written"),
        }
    }

    /// A reader reads a record cut short while its writer holds the lock; the writer then ends
    /// the shard and lets go of the lock before the reader asks for it (the window between a
    /// scan's read and its lock probe): a live writer's record, not damage. The same bytes
    /// left by a writer that stopped stay damage.
    #[test]
    fn a_record_finished_after_it_was_read_is_not_damage() {
        let whole = whole_shard();
        let cut = whole.len() - 8; // inside the End record
        let dir = tempfile::tempdir().unwrap();
        for mmap in [true, false] {
            let path = dir.path().join(format!("live-{mmap}.trj"));
            let mut file = File::create_new(&path).unwrap();
            // SAFETY: the descriptor is open and owned by `file` for the whole call.
            assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
            file.write_all(&whole[..cut]).unwrap();
            let mut shard = opened(&path, mmap);
            file.write_all(&whole[cut..]).unwrap();
            drop(file); // the shard is complete and its lock gone
            let mut found = Found::default();
            shard.scan_forward(&mut found); // the bytes read before the writer finished
            assert_eq!(shard.tail.as_ref().map(|p| p.why.as_str()), None, "mmap {mmap}");
            assert!(!shard.finished);
            shard.scan().unwrap(); // the next scan reads on
            assert!(shard.finished && shard.tail.is_none() && shard.problems.is_empty(), "mmap {mmap}");

            let stopped = dir.path().join(format!("stopped-{mmap}.trj"));
            std::fs::write(&stopped, &whole[..cut]).unwrap();
            let mut shard = opened(&stopped, mmap);
            shard.scan().unwrap();
            let why = shard.tail.as_ref().map(|p| p.why.as_str()).unwrap_or_default();
            assert!(why.contains("unfinished record at end of file (writer stopped)"), "mmap {mmap}: {why}");
        }
    }
}
