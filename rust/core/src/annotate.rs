//! Writing an annotation (`crate::annotation` says what one is): one sidecar per recording annotated, each written to a hidden
//! temporary file, completed (Index and End records, synced) and then linked under its name, so
//! a reader never sees half a sidecar and an existing file is never replaced.

use std::path::{Path, PathBuf};

use crate::annotation::matching::{place, Given, Listed, Placed};
use crate::annotation::sidecar::{self, AnnotationMeta};
use crate::annotation::versions::next_version;
use crate::error::{Error, Result};
use crate::format::chunks::PendingChunk;
use crate::format::codec;
use crate::format::header::{FileHeader, ANNOTATION, PACKED_TABLES};
use crate::format::record::RecordKind;
use crate::reader::{Dataset, OpenOptions};
use crate::schema::ColumnSpec;
use crate::writer::config::Durability;
use crate::writer::files::shard::{now_ns, ShardWriter};

/// The most rows a chunk holds (as the recorder's: a damaged byte costs one chunk's rows).
const CHUNK_ROWS: usize = 4096;
/// Raw bytes after which a chunk is cut (the recorder's default `chunk_bytes`).
const CHUNK_BYTES: usize = 1 << 20;
/// Pending bytes after which the sidecar's writer hands them to the OS.
const FLUSH_BYTES: usize = 64 << 20;

/// What is annotated.
pub struct Annotation<'a> {
    pub name: &'a str,
    /// A fixed-size dtype name (`float32`, `int64`, `bool`, ...).
    pub dtype: &'a str,
    /// The shape of one value.
    pub shape: &'a [u64],
    /// The values were given one per episode (stored on each of its steps).
    pub per_episode: bool,
    /// (episode index in the dataset's listing, its rows' bytes, little-endian, row after row).
    pub values: Vec<(usize, &'a [u8])>,
}

/// Writes annotation `a` of the dataset directory `dir` as a sidecar per recording it touches,
/// each the next version of `a.name` for its recording; returns the files written.
///
/// Errors: `Invalid` (a name, dtype or shape that cannot be a column; values whose bytes are
/// not whole rows; a recording that records a column of that name itself; a dataset that is not
/// a local directory), `OutOfRange` and `Invalid` from `place` (episodes that do not exist, of
/// another length, given twice), `Io`, and those of opening the dataset.
pub fn annotate(dir: &Path, a: &Annotation<'_>) -> Result<Vec<PathBuf>> {
    sidecar::check_name(a.name)?;
    if crate::objstore::url::url_of(dir).is_some() || !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{}: annotations are written beside the shards of a local dataset directory",
            dir.display()
        )));
    }
    let [value, mask] = sidecar::columns(a.name, a.dtype, a.shape);
    value.validate()?;
    let row_bytes = value.row_bytes().filter(|&b| b > 0).ok_or_else(|| {
        Error::Invalid(format!(
            "annotation {:?}: dtype {} has no fixed size; use a numeric or bool dtype",
            a.name, a.dtype
        ))
    })?;
    let given = a
        .values
        .iter()
        .map(|&(episode, bytes)| match bytes.len() % row_bytes {
            0 => Ok(Given { episode, rows: (bytes.len() / row_bytes) as u64 }),
            _ => Err(Error::Invalid(format!(
                "annotation of episode {episode}: {} bytes are not whole rows of {row_bytes}",
                bytes.len()
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    let ds = Dataset::open(dir, OpenOptions { cache_bytes: 0, ..OpenOptions::default() })?;
    let listed: Vec<Listed> = ds
        .episodes()
        .iter()
        .map(|e| Listed {
            recording: e.recording,
            lane: e.summary.lane,
            episode_id: e.summary.episode_id,
            step_first_row: e.summary.step_first_row,
            length: e.summary.length,
        })
        .collect();
    let placed = place(&listed, &given)?;
    let found = ds.annotation_candidates();
    let mut written = Vec::new();
    for (recording, placed) in placed {
        let rec = ds.recording(recording)?;
        if rec.own_columns().iter().any(|c| c.name == value.name || c.name == mask.name) {
            return Err(Error::Invalid(format!(
                "annotation {:?}: recording {} records a column '{}' itself; choose another name",
                a.name, recording, value.name
            )));
        }
        let meta = AnnotationMeta {
            name: a.name.to_string(),
            version: next_version(&found, &rec.id, a.name),
            created_ns: now_ns(),
            per: if a.per_episode { "episode" } else { "step" }.into(),
            episodes: placed.iter().map(|p| p.span).collect(),
        };
        written.push(write_sidecar(dir, &rec.id, &meta, [&value, &mask], &placed, a, row_bytes)?);
    }
    Ok(written)
}

/// One sidecar: written whole under a hidden name, then linked as `meta.file_name`.
fn write_sidecar(
    dir: &Path,
    recording: &[u8; 16],
    meta: &AnnotationMeta,
    columns: [&ColumnSpec; 2],
    placed: &[Placed],
    a: &Annotation<'_>,
    row_bytes: usize,
) -> Result<PathBuf> {
    let name = meta.file_name(recording);
    let (path, tmp) = (dir.join(&name), dir.join(format!(".{name}.writing")));
    let header = FileHeader {
        required_flags: PACKED_TABLES | ANNOTATION,
        ..FileHeader::new(*recording, meta.version, meta.created_ns)
    };
    let mut w = ShardWriter::create_at(tmp.clone(), &header, Durability::FsyncOnClose)?;
    w.copy_record(RecordKind::Meta, &meta.to_meta_json()?);
    for c in columns {
        w.add_column(c)?;
    }
    let [value, mask] = columns;
    let rows_per_chunk = (CHUNK_BYTES / row_bytes).clamp(1, CHUNK_ROWS);
    let mut pending = 0;
    for run in runs(placed) {
        let lane = run[0].span.lane;
        let mut raw: Vec<u8> = Vec::new();
        for p in run {
            raw.extend_from_slice(a.values[p.given].1);
        }
        let mut first_row = run[0].span.first_row;
        for piece in raw.chunks(rows_per_chunk * row_bytes) {
            let n_rows = piece.len() / row_bytes;
            let chunk = |spec: &ColumnSpec, raw: &[u8]| {
                let (codec, data) = codec::encode(&spec.codec, spec.row_layout(), raw);
                let (raw_len, column) = (raw.len() as u64, spec.id);
                PendingChunk { lane, column, first_row, n_rows: n_rows as u32, codec, raw_len, data, flags: 0 }
            };
            let chunks = vec![chunk(value, piece), chunk(mask, &vec![1u8; n_rows])];
            pending += chunks.iter().map(|c| c.data.len()).sum::<usize>();
            w.append_chunks(chunks);
            if pending >= FLUSH_BYTES {
                w.flush_to_os()?;
                pending = 0;
            }
            first_row += n_rows as u64;
        }
    }
    w.finish()?;
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(path),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::Invalid(format!(
            "{}: another annotation {:?} took version {} meanwhile; annotate again",
            path.display(),
            meta.name,
            meta.version
        ))),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// The placed entries as runs of consecutive rows of one lane (one run: one stretch of chunks).
fn runs(placed: &[Placed]) -> impl Iterator<Item = &[Placed]> {
    placed.chunk_by(|a, b| a.span.lane == b.span.lane && a.span.first_row + a.span.rows == b.span.first_row)
}
