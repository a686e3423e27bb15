//! Verification: every record of every shard checksummed and every chunk decoded, each damage
//! reported with the listed episodes it affects.
//!
//! Opening reads the index and checks what it reads (the index chain, Meta, Column and Episode
//! records), not the chunk data: a flipped byte in a Chunks record is otherwise found by the
//! first read that needs it. `verify` walks each shard from its header, record by record (and,
//! past a record header that does not decode, through the records the index lists), checks
//! every payload checksum, and decodes every chunk the dataset reads from with the reader's own
//! decode path, checking decoded lengths and, for str columns, the offsets and UTF-8.
//!
//! It streams: Chunks records are checked on a few threads (`max_threads`), each decoding one
//! chunk at a time and dropping it, so memory stays at a chunk per thread beyond the memory
//! map; nothing enters the chunk cache. Records that pass are marked verified, so the reads
//! that follow do not checksum them again.
//!
//! Repeated rows (`CHUNK_REPEAT`) that another shard of the dataset also holds are covered by
//! their record's checksum but not decoded (the dataset reads the other copy); verifying the
//! shard alone decodes them.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::damage::{Affected, Damage};
use crate::error::{Error, Result};
use crate::format::header::HEADER_LEN;
use crate::format::record::RecordKind;
use crate::objstore::url::url_of;
use crate::reader::catalog::chunk_list::Located;
use crate::reader::dataset::Dataset;
use crate::reader::dataset_view::DatasetView;
use crate::reader::integrity::exclusions::Exclusions;
use crate::reader::reads::gather::max_threads;
use crate::reader::reads::rows::chunk_strings;
use crate::reader::store::framing::frame;
use crate::reader::store::source::Source;
use crate::reader::{OpenOptions, Problem};
use crate::schema::ColumnSpec;

/// What a verification found. Serialized for the bindings without `from_open`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    /// What opening found first (see `from_open`), then what the walk found, in file order.
    pub damage: Vec<Damage>,
    /// The first `from_open` entries of `damage` are the problems opening found.
    #[serde(skip)]
    pub from_open: usize,
    pub shards: usize,
    /// Bytes of the shard files walked.
    pub bytes: u64,
    pub records: u64,
    pub chunks: u64,
    /// Bytes the chunks decoded to.
    pub decoded_bytes: u64,
    /// Chunks that cannot be read: (shard, data offset).
    #[serde(skip)]
    pub(crate) unreadable: HashSet<(usize, u64)>,
    /// The first chunk fetch a store failed (its URL, why): no damage, and `verify_store` fails
    /// with it.
    #[serde(skip)]
    pub(crate) store_failure: Option<(PathBuf, String)>,
}

impl VerifyReport {
    pub fn is_intact(&self) -> bool {
        self.damage.is_empty()
    }

    /// Episodes lost: the listed ones some damage affects, and those damage took out of the
    /// listing (as their damaged records count them).
    pub fn episodes_lost(&self) -> u64 {
        self.damaged_episodes().len() as u64 + self.damage.iter().map(|d| d.unlisted).sum::<u64>()
    }

    /// Every listed episode some damage affects, ascending.
    pub fn damaged_episodes(&self) -> Vec<usize> {
        let set: BTreeSet<usize> = self.damage.iter().flat_map(|d| d.episodes.iter().copied()).collect();
        set.into_iter().collect()
    }
}

/// What checking one record found.
#[derive(Default)]
struct Checked {
    /// (offset, why).
    damage: Vec<(u64, String)>,
    /// Damaged records whose intact copy is read instead: their damage affects no episode.
    copied: Vec<u64>,
    unreadable: Vec<u64>,
    /// A chunk fetch the store failed (URL, why): not damage.
    store_failure: Option<(PathBuf, String)>,
    records: u64,
    chunks: u64,
    decoded: u64,
}

/// Why a chunk did not check out: damage (why), or a store that failed to give its bytes.
enum Failed {
    Damage(String),
    Store(PathBuf, String),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Self {
        match e {
            Error::Io { path, source } if url_of(&path).is_some() => Failed::Store(path, source.to_string()),
            other => Failed::Damage(why(other)),
        }
    }
}

/// The chunks the dataset reads from one Chunks record, with their columns.
type RecordChunks<'d> = Vec<(&'d Located, &'d ColumnSpec)>;

/// Verifies every shard of an opened dataset (see the module notes). Never fails: damage is
/// what it reports.
pub fn verify(dataset: &Dataset) -> VerifyReport {
    let ds = &dataset.view();
    // Built only when there is damage to map (a pass over every chunk and episode).
    let affected = std::cell::OnceCell::new();
    let affected = || affected.get_or_init(|| Affected::new(ds.catalog));
    let mut report = VerifyReport { shards: ds.store.shards.len(), ..VerifyReport::default() };
    let mut seen: HashSet<(usize, u64)> = HashSet::new();
    for p in dataset.problems() {
        if let Some(s) = ds.catalog.shard_of(&p.file) {
            seen.insert((s, p.offset));
        }
        let episodes = affected().of_problem(p);
        let (file, offset, why, unlisted) = (p.file.clone(), p.offset, p.why.clone(), p.unlisted);
        report.damage.push(Damage { file, offset, why, episodes, unlisted });
    }
    report.from_open = report.damage.len();

    let mut by_record: HashMap<(usize, u64), RecordChunks<'_>> = HashMap::new();
    for (&(recording, _, column), list) in &ds.catalog.chunk_lists {
        let Some(spec) = ds.recordings()[recording].columns.get(column as usize) else { continue };
        for loc in &list.chunks {
            by_record.entry((loc.shard, loc.chunk.record_offset)).or_default().push((loc, spec));
        }
    }
    for chunks in by_record.values_mut() {
        chunks.sort_by_key(|(loc, _)| loc.chunk.data_offset);
    }

    // Every record: those a hop from the header reaches, and those the dataset knows of (the
    // index lists records past a damaged header too).
    let mut known: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); ds.store.shards.len()];
    for &(s, offset) in by_record.keys() {
        known[s].insert(offset);
    }
    for e in ds.episodes() {
        known[e.shard].insert(e.summary.record_offset);
    }
    let mut items: Vec<(usize, u64)> = Vec::new();
    let mut copied: HashSet<(usize, u64)> = HashSet::new();
    let mut found: Vec<(usize, u64, String)> = Vec::new();
    for (s, (shard, mut offsets)) in ds.store.shards.iter().zip(known).enumerate() {
        let map: &Source = &shard.source;
        report.bytes += map.len();
        let mut at = HEADER_LEN as u64;
        while at < map.len() {
            match frame(map, at) {
                Ok(rec) => {
                    offsets.insert(at);
                    at = rec.next;
                }
                Err(e) => {
                    found.push((s, at, format!("{e}; the records after it are checked through the index")));
                    break;
                }
            }
        }
        items.extend(offsets.into_iter().map(|o| (s, o)));
    }

    let next = AtomicUsize::new(0);
    let work = || {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(s, offset)) = items.get(i) else { break };
            let chunks = by_record.get(&(s, offset)).map_or(&[][..], Vec::as_slice);
            out.push((i, check_record(ds, s, offset, chunks, &mut scratch)));
        }
        out
    };
    let threads = max_threads().min(items.len()).max(1);
    let mut results: Vec<(usize, Checked)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut all = work();
        for h in handles {
            all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        all
    });
    results.sort_unstable_by_key(|r| r.0);

    for (i, checked) in results {
        let s = items[i].0;
        report.records += checked.records;
        report.chunks += checked.chunks;
        report.decoded_bytes += checked.decoded;
        report.unreadable.extend(checked.unreadable.iter().map(|&o| (s, o)));
        if report.store_failure.is_none() {
            report.store_failure = checked.store_failure;
        }
        copied.extend(checked.copied.iter().map(|&o| (s, o)));
        found.extend(checked.damage.into_iter().map(|(offset, why)| (s, offset, why)));
    }
    found.extend(super::unfinished::lost_ends(ds));
    found.sort_by_key(|f| (f.0, f.1));
    for (s, offset, why) in found {
        if seen.insert((s, offset)) {
            let file = ds.store.shards[s].path.clone();
            let episodes = if copied.contains(&(s, offset)) { Vec::new() } else { affected().at(s, offset) };
            report.damage.push(Damage { file, offset, why, episodes, unlisted: 0 });
        }
    }
    report
}

/// Checks the record at `offset` of shard `s`; `chunks`: what the dataset reads from it.
fn check_record(
    ds: &DatasetView<'_>,
    s: usize,
    offset: u64,
    chunks: &[(&Located, &ColumnSpec)],
    scratch: &mut Vec<String>,
) -> Checked {
    let mut out = Checked::default();
    let map: &Source = &ds.store.shards[s].source;
    let rec = match frame(map, offset) {
        Ok(rec) => rec,
        Err(e) => {
            out.damage.push((offset, format!("record header: {e}")));
            out.unreadable.extend(chunks.iter().map(|(loc, _)| loc.chunk.data_offset));
            return out;
        }
    };
    out.records = 1;
    let payload_ok = rec.payload_ok(map);
    // Chunks with checksums of their own are checked one by one: damage in their record's table
    // or in another chunk leaves them readable.
    let each_checked = !chunks.is_empty() && chunks.iter().all(|(loc, _)| loc.chunk.has_checksum());
    if !payload_ok {
        let kind = match rec.header.record_kind() {
            Some(k) => format!("{k:?}"),
            None => format!("unknown kind {}", rec.header.kind),
        };
        let why = format!("{kind} record payload checksum mismatch");
        if rec.header.record_kind() == Some(RecordKind::Episode)
            && ds.store.shards[s].episode_copy(map, offset).is_some()
        {
            out.damage.push((offset, format!("{why}: {}", crate::reader::store::opening_copies::COPY_READ_INSTEAD)));
            out.copied.push(offset);
            return out;
        }
        if !each_checked {
            out.damage.push((offset, why));
            out.unreadable.extend(chunks.iter().map(|(loc, _)| loc.chunk.data_offset));
            return out;
        }
    }
    let damage_before = out.damage.len();
    if rec.header.record_kind() == Some(RecordKind::Timelog) {
        if let Err(why) = crate::format::timelog::decode(&rec.payload(map)) {
            out.damage.push((offset, why));
        }
        return out;
    }
    if rec.header.record_kind() == Some(RecordKind::OpeningCopies) {
        if let Err(why) = crate::reader::store::opening_copies::check_copies(map, &rec.payload(map)) {
            out.damage.push((offset, why));
        }
        return out;
    }
    if rec.header.record_kind() != Some(RecordKind::Chunks) {
        return out;
    }
    for &(loc, spec) in chunks {
        out.chunks += 1;
        // Every checksum there is: a chunk's own one too when its record's passes (a writer bug
        // or an edit can leave one wrong under a valid record checksum, and a read checks it).
        let checked = if loc.chunk.has_checksum() {
            check_own_checksum(ds, loc)
        } else {
            ds.store.verified.mark(loc.record);
            Ok(())
        };
        match checked.and_then(|()| check_chunk_data(ds, loc, spec, scratch)) {
            Ok(decoded) => out.decoded += decoded,
            Err(Failed::Store(url, why)) => {
                out.store_failure.get_or_insert((url, why));
            }
            Err(Failed::Damage(why)) => {
                let c = &loc.chunk;
                let why = format!(
                    "chunk of column {} ('{}') lane {} (rows {}..{}): {why}",
                    c.column,
                    spec.name,
                    c.lane,
                    loc.first_row(),
                    loc.end_row()
                );
                out.damage.push((c.data_offset, why));
                out.unreadable.push(c.data_offset);
            }
        }
    }
    if !payload_ok && out.damage.len() == damage_before {
        // No chunk explains the mismatch: the damage is in the table or the padding, which
        // costs nothing while the index holds the chunks' references.
        let why =
            "Chunks record payload checksum mismatch in its table or padding (every chunk passes its own checksum)";
        out.damage.push((offset, why.into()));
    }
    out
}

/// A chunk's own checksum against its stored bytes (marked verified when they match, as a read
/// would mark it).
fn check_own_checksum(ds: &DatasetView<'_>, loc: &Located) -> Result<(), Failed> {
    ds.stored_bytes(loc).map(|_| ()).map_err(Failed::from)
}

/// What a chunk's check found, as a damage's text (a `Corrupt` error's reason alone).
fn why(e: Error) -> String {
    match e {
        Error::Corrupt { why, .. } => why,
        other => other.to_string(),
    }
}

/// Decodes one chunk as a read would and checks what it holds; returns its decoded bytes.
fn check_chunk_data(
    ds: &DatasetView<'_>,
    loc: &Located,
    spec: &ColumnSpec,
    scratch: &mut Vec<String>,
) -> Result<u64, Failed> {
    let stored = ds.stored_unchecked(loc)?;
    let row_bytes = spec.row_bytes();
    let data: Cow<'_, [u8]> =
        if loc.chunk.codec == 0 { stored } else { Cow::Owned(ds.decode_stored(loc, &stored, row_bytes)?) };
    if data.len() as u64 != loc.chunk.raw_len {
        return Err(Failed::Damage(format!("decoded to {} bytes, the chunk says {}", data.len(), loc.chunk.raw_len)));
    }
    if row_bytes.is_none() {
        scratch.clear();
        let n = loc.chunk.n_rows as usize;
        chunk_strings(&data, loc.chunk.n_rows, 0, n, scratch).map_err(|e| Failed::Damage(format!("str chunk: {e}")))?;
    }
    Ok(data.len() as u64)
}

/// `verify`, for a caller that must not take a store's failure for damage: the error of a shard
/// whose fetches failed (naming its URL and why), rather than a report of every chunk it could
/// not fetch as damaged (which would leave every episode out of a listing, unexplained).
pub fn verify_store(dataset: &Dataset) -> Result<VerifyReport> {
    let mut report = verify(dataset);
    if let Some((url, why)) = report.store_failure.take() {
        return Err(Error::Io { path: url, source: std::io::Error::other(why) });
    }
    let failed = dataset.view().store.shards.iter().find_map(|s| s.source.remote_object().and_then(|o| o.failure()));
    failed.map_or(Ok(report), Err)
}

/// `verify_path`'s checks of a dataset already open: a caller with checks of its own (the
/// spaces' descriptions, in Python) opens it once for both.
///
/// Errors: `NotFound` (no shard), and `verify_store`'s.
pub fn verify_dataset(dataset: &Dataset) -> Result<VerifyReport> {
    crate::reader::store::no_shard::check_dataset(dataset).and_then(|()| verify_store(dataset))
}

/// Opens a dataset (one shard file that is not a trajcore file counts as damage at its first
/// byte) and verifies it.
///
/// Errors: `NotFound`, `Version`, `Unsupported`, `Io` (as `Dataset::open`).
pub fn verify_path(path: &Path) -> Result<VerifyReport> {
    match Dataset::open(path, OpenOptions::default()) {
        Ok(ds) => verify_dataset(&ds),
        Err(Error::NotTrajcore { path, why }) => Ok(VerifyReport {
            damage: vec![Damage {
                file: path,
                offset: 0,
                why: format!("not a trajcore file: {why}"),
                episodes: vec![],
                unlisted: 0,
            }],
            from_open: 1,
            shards: 1,
            ..VerifyReport::default()
        }),
        Err(e) => Err(e),
    }
}

/// Opens a dataset and verifies it: damaged episodes are left out of the listing (opened again
/// without them, see `Dataset::open_excluding`) and the damage found is listed with its
/// problems. With `strict`, damage is an error. The report's episode indexes are those of the
/// dataset before leaving out.
///
/// Errors: those of `Dataset::open`; `Corrupt` with `strict` for the first damage found.
pub fn open_verified(path: &Path, opts: OpenOptions) -> Result<(Dataset, VerifyReport)> {
    let ds = Dataset::open(path, opts.clone())?;
    let report = verify_store(&ds)?;
    if opts.strict {
        return match report.damage.first() {
            Some(d) => Err(Error::corrupt(&d.file, d.offset, &d.why)),
            None => Ok((ds, report)),
        };
    }
    let mut exclusions = Exclusions::default();
    for e in report.damaged_episodes() {
        exclusions.episodes.insert(ds.view().episode_key(e)?);
    }
    for d in &report.damage[report.from_open..] {
        exclusions.problems.push(Problem::new(&d.file, d.offset, d.why_with_episodes()));
    }
    if exclusions.is_empty() {
        return Ok((ds, report));
    }
    drop(ds);
    Ok((Dataset::open_excluding(path, opts, exclusions)?, report))
}
