//! Compaction of a closed shard whose chunks the flush timer cut small.
//!
//! A recording paced by a slow env seals every column of every lane each `flush_interval`, so
//! its small columns (actions, rewards, flags, infos) end up in chunks of a few dozen rows: each
//! a zstd frame of its own plus a table entry, and frame stacks restart with a whole stack. The
//! same steps recorded fast make a file ~10% smaller. Once a shard is closed no reader needs
//! those cuts any more, so the writer rewrites it: each stretch of consecutive chunks of a
//! (lane, column) that the timer cut is decoded and sealed again as the writer seals a fast
//! recording's rows (same buffer, same limit), so the chunks come out as if recorded fast;
//! every other record is copied byte for byte, after its checksum is checked. The new file gets
//! the same header (recording, shard number, creation time; compat flag `COMPACTED` added) and
//! name, and replaces the old one
//! by a rename: a reader holding the old one keeps reading it (it is complete and holds the same
//! rows), a crash leaves the old one in place.
//!
//! Which chunks are sealed again is decided by `plan_runs`, apart from the file handling in
//! `compact`.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::shard::{ShardWriter, EPISODES_PER_RECORD};
use crate::error::{Error, Result};
use crate::format::chunks::{self, ChunkRef, PendingChunk};
use crate::format::codec::{self, Encoder};
use crate::format::episode;
use crate::format::header::{FileHeader, COMPACTED, HEADER_LEN};
use crate::format::record::{known_required_flags, RecordHeader, RecordKind, RECORD_HEADER_LEN};
use crate::format::stack;
use crate::schema::ColumnSpec;
use crate::writer::config::Durability;
use crate::writer::lane::{ChunkLimit, ColumnBuffer};

/// A rewrite must save at least this fraction of the file (a fast recording's few cuts are not
/// worth copying its file for).
const MIN_SAVING: f64 = 0.01;
/// What a chunk costs besides its rows, about: a table entry, a zstd frame's header and tables,
/// the context a fresh frame lacks. Measured from 40 bytes (small columns) to ~500 (frame stacks).
const CHUNK_COST: u64 = 64;
/// Chunk data handed to the new file per Chunks record (bounds the copy's memory).
const BATCH_BYTES: usize = 16 << 20;
/// Runs of chunks sealed again stay within this many bytes of the old file, so the new file
/// can hold the Episode records of each such window right after its chunks: a copy cut short
/// keeps the episodes before the cut, less about a window's (8 MiB costs a cut per lane and
/// column every 8 MiB of file, about 0.1% of it).
const WINDOW_BYTES: u64 = 8 << 20;

/// What the writer was configured with, which the new file is written with too.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The chunk size of columns that do not state one.
    pub default_chunk_bytes: usize,
    /// An Index checkpoint after this many bytes, as the writer writes them.
    pub index_interval_bytes: u64,
    pub durability: Durability,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub chunks_before: usize,
    pub chunks_after: usize,
}

/// The records of a closed shard, in file order.
struct Layout {
    header: FileHeader,
    /// Meta, Column, Timelog and Episode records: (kind, payload range).
    copied: Vec<(RecordKind, Range<usize>)>,
    chunks: Vec<ChunkRef>,
    columns: BTreeMap<u32, ColumnSpec>,
}

/// Rewrites the closed shard at `path` with its runs of small chunks merged, when that saves at
/// least `MIN_SAVING` of it. `Ok(None)`: left as it is (nothing worth merging, or records this version
/// would not know how to copy). On an error the shard is left as it is too.
pub fn compact(path: &Path, settings: &Settings, encoder: &mut Encoder) -> Result<Option<Compacted>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the shard is closed and ours; nobody writes it any more (a reader never does).
    let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let corrupt = |at: usize, why: String| Error::corrupt(path, at as u64, format!("compacting: {why}"));
    let Some(layout) = read_layout(&map).map_err(|(at, why)| corrupt(at, why))? else { return Ok(None) };
    let limits = |column: u32| {
        layout
            .columns
            .get(&column)
            .filter(|s| s.row_bytes().is_some())
            .map(|s| ChunkLimit::of(s, settings.default_chunk_bytes))
    };
    let fills: Vec<u64> = layout.chunks.iter().map(|c| fill_of(&map, c)).collect();
    let groups = plan_runs(&layout.chunks, &fills, limits);
    let cuts: usize = layout.chunks.len() - groups.iter().map(|g| g.chunks_after).sum::<usize>();
    let payloads = layout.episode_payloads(&map);
    let episodes = latest_episodes(&payloads);
    let bytes_before = map.len() as u64;
    let worth = |dropped: u64| ((cuts as u64 * CHUNK_COST + dropped) as f64) >= bytes_before as f64 * MIN_SAVING;
    if !worth(episodes.as_ref().map_or(0, |e| e.dropped_bytes)) {
        return Ok(None);
    }
    // Checked only now (a zstd encode of every record), for a shard worth rewriting: most are not.
    let episodes = episodes.filter(|_| encode_back(&payloads));
    if episodes.is_none() && !worth(0) {
        return Ok(None);
    }
    let tmp = sibling(path, "compacting");
    let _ = std::fs::remove_file(&tmp); // left by a crash during an earlier compaction
    let decoded = episodes.map(|e| e.records);
    let replaced = write_compacted(&map, &layout, &groups, decoded, settings, encoder, &tmp)
        .and_then(|()| replace_if_smaller(&tmp, path, bytes_before));
    let bytes_after = match replaced {
        Ok(Some(after)) => after,
        other => {
            let _ = std::fs::remove_file(&tmp);
            return other.map(|_| None);
        }
    };
    if settings.durability != Durability::Flush {
        if let Some(dir) = path.parent() {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
    }
    let chunks_after = groups.iter().map(|g| g.chunks_after).sum();
    Ok(Some(Compacted { bytes_before, bytes_after, chunks_before: layout.chunks.len(), chunks_after }))
}

/// Renames `tmp` over `path` if it is smaller than the `bytes_before` of `path`; its size then.
/// `None`: the estimate was wrong and the old file is the smaller one (`tmp` stays, to remove).
fn replace_if_smaller(tmp: &Path, path: &Path, bytes_before: u64) -> Result<Option<u64>> {
    let bytes_after = std::fs::metadata(tmp).map_err(|e| Error::io(tmp, e))?.len();
    if bytes_after >= bytes_before {
        return Ok(None);
    }
    std::fs::rename(tmp, path).map_err(|e| Error::io(path, e))?;
    Ok(Some(bytes_after))
}

/// `path` with `.{suffix}` added to its name (not a shard name: readers never list it).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

impl Layout {
    /// The payloads of the Episode records, in file order.
    fn episode_payloads<'m>(&self, map: &'m [u8]) -> Vec<&'m [u8]> {
        self.copied.iter().filter(|(kind, _)| *kind == RecordKind::Episode).map(|(_, p)| &map[p.clone()]).collect()
    }
}

/// Every record of a closed shard, each checksum checked. `Ok(None)` for records this version
/// cannot place in a rewritten file (an unknown kind or required flag). Errors: (offset, why).
fn read_layout(map: &[u8]) -> std::result::Result<Option<Layout>, (usize, String)> {
    let header = FileHeader::decode(map).map_err(|e| (0, format!("file header: {e:?}")))?;
    let mut layout = Layout { header, copied: Vec::new(), chunks: Vec::new(), columns: BTreeMap::new() };
    let mut at = HEADER_LEN;
    loop {
        let header = map.get(at..).and_then(RecordHeader::decode).ok_or((at, "unreadable record header".into()))?;
        let start = at + RECORD_HEADER_LEN;
        let end =
            usize::try_from(header.payload_len).ok().and_then(|n| start.checked_add(n)).filter(|&e| e <= map.len());
        let payload = end.map(|end| start..end).ok_or((at, "record past the end of the file".into()))?;
        if crc32c::crc32c(&map[payload.clone()]) != header.payload_crc {
            return Err((at, "record checksum mismatch".into()));
        }
        let Some(kind) = header.record_kind() else { return Ok(None) };
        if header.required_flags & !known_required_flags(header.kind) != 0 {
            return Ok(None);
        }
        match kind {
            RecordKind::Chunks => {
                let refs =
                    chunks::decode(&map[payload.clone()], at as u64, header.packed_table()).map_err(|e| (at, e))?;
                layout.chunks.extend(refs);
            }
            RecordKind::Column => {
                let spec: ColumnSpec =
                    serde_json::from_slice(&map[payload.clone()]).map_err(|e| (at, format!("column record: {e}")))?;
                layout.columns.insert(spec.id, spec);
                layout.copied.push((kind, payload));
            }
            RecordKind::Meta | RecordKind::Timelog | RecordKind::Episode => layout.copied.push((kind, payload)),
            // The compacted file's writer writes its own copies (at other offsets).
            RecordKind::Index | RecordKind::OpeningCopies => {}
            RecordKind::End => return Ok(Some(layout)),
        }
        at += header.total_len() as usize;
    }
}

/// The bytes a chunk was sealed on (`ColumnBuffer::fill`): for frame stacks stored by the
/// frame-stack filter, what the filter kept (read from the zstd frame's header), else its raw bytes.
fn fill_of(map: &[u8], c: &ChunkRef) -> u64 {
    let filtered = codec::codec_ids(c.codec).any(|id| id == codec::CODEC_STACK);
    let content = || zstd::zstd_safe::get_frame_content_size(stored_bytes(map, c).ok()?).ok().flatten();
    match (filtered, codec::codec_ids(c.codec).any(|id| id == codec::CODEC_ZSTD)) {
        (true, true) => content().map_or(c.raw_len, |n| n.saturating_sub((stack::HEADER_LEN as u64) + c.n_rows as u64)),
        (true, false) => c.stored_len.saturating_sub((stack::HEADER_LEN as u64) + c.n_rows as u64),
        _ => c.raw_len,
    }
}

/// A run of chunks of the old file that becomes `chunks_after` chunks of the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Indexes of the old chunks, rows continuing each other in one (lane, column).
    pub members: Vec<usize>,
    /// 1 for a chunk copied as it is; the writer's count for rows sealed again.
    pub chunks_after: usize,
}

/// How the new file holds the chunks (`fills`: each chunk's `fill_of`), in the order of each
/// run's first chunk in the old one. Per (lane, column) of fixed-size rows (`limit` is `Some`),
/// each stretch of chunks whose rows continue each other (within a `WINDOW_BYTES` window of the
/// old file) is sealed again as the writer seals a fast recording's rows, at `limit`, where that
/// makes fewer chunks than the flush timer made;
/// everything else (variable-length rows, repeated rows, stretches already full) is copied.
pub fn plan_runs(chunks: &[ChunkRef], fills: &[u64], limit: impl Fn(u32) -> Option<ChunkLimit>) -> Vec<Run> {
    let mut by_lane_column: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, c) in chunks.iter().enumerate() {
        by_lane_column.entry((c.lane, c.column)).or_default().push(i);
    }
    let copy = |i: usize| Run { members: vec![i], chunks_after: 1 };
    let mut runs = Vec::new();
    for ((_, column), mut members) in by_lane_column {
        members.sort_by_key(|&i| (chunks[i].first_row, i));
        let Some(limit) = limit(column) else {
            runs.extend(members.into_iter().map(copy));
            continue;
        };
        let mut stretch: Vec<usize> = Vec::new();
        let close = |stretch: &mut Vec<usize>, runs: &mut Vec<Run>| {
            let (fill, raw, rows) = stretch.iter().fold((0u64, 0u64, 0u64), |(f, r, n), &i| {
                (f + fills[i], r + chunks[i].raw_len, n + chunks[i].n_rows as u64)
            });
            let needed = fill
                .div_ceil(limit.fill.max(1) as u64)
                .max(raw.div_ceil(limit.raw.max(1) as u64))
                .max(rows.div_ceil(limit.rows.max(1) as u64))
                .max(1);
            if stretch.len() >= 2 && (needed as usize) < stretch.len() {
                runs.push(Run { members: std::mem::take(stretch), chunks_after: needed as usize });
            } else {
                runs.extend(stretch.drain(..).map(copy));
            }
        };
        for i in members {
            let c = &chunks[i];
            let continues = stretch.last().is_some_and(|&last| {
                chunks[last].end_row() == c.first_row
                    && chunks[last].record_offset / WINDOW_BYTES == c.record_offset / WINDOW_BYTES
            });
            if !continues {
                close(&mut stretch, &mut runs);
            }
            if c.is_repeat() {
                runs.push(copy(i));
            } else {
                stretch.push(i);
            }
        }
        close(&mut stretch, &mut runs);
    }
    runs.sort_by_key(|r| r.members[0]);
    runs
}

/// Seals the rows of `run` again as the writer would (`ColumnBuffer`), each chunk checked to
/// decode back to its rows; hands each chunk to `out`. `corrupt` makes the error of a chunk that
/// does not decode as it says.
fn reseal(
    map: &[u8],
    spec: &ColumnSpec,
    limit: &ChunkLimit,
    run: &[&ChunkRef],
    encoder: &mut Encoder,
    corrupt: impl Fn(String) -> Error,
    mut out: impl FnMut(PendingChunk) -> Result<()>,
) -> Result<()> {
    let row = spec.row_bytes().filter(|&r| r > 0).ok_or_else(|| corrupt("a run of variable-length rows".into()))?;
    let mut buffer = ColumnBuffer::starting_at(run[0].first_row, limit);
    let mut rows = Vec::new(); // the raw rows of the chunk being filled, to check it against
    let mut seal = |buffer: &mut ColumnBuffer, rows: &mut Vec<u8>| -> Result<()> {
        let Some(chunk) = buffer.seal(run[0].lane, spec, encoder) else { return Ok(()) };
        if codec::decode(chunk.codec, Some(row), &chunk.data, chunk.raw_len as usize).map_err(&corrupt)? != *rows {
            return Err(corrupt(format!("column {}: a chunk sealed again does not decode to its rows", spec.name)));
        }
        rows.clear();
        out(chunk)
    };
    for c in run {
        let stored = stored_bytes(map, c).map_err(&corrupt)?;
        let raw = codec::decode(c.codec, Some(row), stored, c.raw_len as usize).map_err(&corrupt)?;
        if raw.len() as u64 != c.n_rows as u64 * row as u64 {
            let why = format!("a chunk of column {} decodes to {} bytes for {} rows", spec.name, raw.len(), c.n_rows);
            return Err(corrupt(why));
        }
        for r in raw.chunks_exact(row) {
            buffer.push_fixed(r);
            rows.extend_from_slice(r);
            if buffer.is_full(limit) {
                seal(&mut buffer, &mut rows)?;
            }
        }
    }
    seal(&mut buffer, &mut rows)
}

fn stored_bytes<'m>(map: &'m [u8], c: &ChunkRef) -> std::result::Result<&'m [u8], String> {
    let start = usize::try_from(c.data_offset).map_err(|_| "chunk offset out of range")?;
    let end = usize::try_from(c.stored_len).ok().and_then(|n| start.checked_add(n)).filter(|&e| e <= map.len());
    end.map(|end| &map[start..end]).ok_or_else(|| "chunk outside the file".to_string())
}

/// Chunks on their way to the new file: a Chunks record holds at most one chunk of each (lane,
/// column), as a recording's records do, so a file cut short in one loses at most a chunk of
/// each; and at most `BATCH_BYTES`, which bounds the copy's memory.
#[derive(Default)]
struct Batch {
    chunks: Vec<PendingChunk>,
    bytes: usize,
    keys: std::collections::HashSet<(u32, u32)>,
}

impl Batch {
    fn add(&mut self, shard: &mut ShardWriter, chunk: PendingChunk) -> Result<()> {
        if !self.keys.insert((chunk.lane, chunk.column)) {
            self.write(shard)?;
            self.keys.insert((chunk.lane, chunk.column));
        }
        self.bytes += chunk.data.len();
        self.chunks.push(chunk);
        if self.bytes >= BATCH_BYTES {
            self.write(shard)?;
        }
        Ok(())
    }

    fn write(&mut self, shard: &mut ShardWriter) -> Result<()> {
        if self.chunks.is_empty() {
            return Ok(());
        }
        shard.append_chunks(std::mem::take(&mut self.chunks));
        self.bytes = 0;
        self.keys.clear();
        shard.flush_to_os()
    }
}

/// The old file's Episode records, written to the new one as soon as the chunks before them
/// are (so a cut keeps the episodes whose rows lie before it): decoded and batched as a fast
/// recording batches them, or copied as they are (`encode_back`).
struct EpisodeQueue<'m> {
    /// (old offset, payload), in file order.
    records: Vec<(u64, &'m [u8])>,
    next: usize,
    /// Each record's episodes (`None`: copy the records as they are).
    decoded: Option<Vec<Vec<episode::DecodedEpisode>>>,
    waiting: Vec<episode::DecodedEpisode>,
}

impl<'m> EpisodeQueue<'m> {
    /// `decoded`: each record's episodes to write (`latest_episodes`), or `None` to copy them.
    fn new(records: Vec<(u64, &'m [u8])>, decoded: Option<Vec<Vec<episode::DecodedEpisode>>>) -> Self {
        EpisodeQueue { decoded, records, next: 0, waiting: Vec::new() }
    }

    /// Writes the episodes of the old records before `offset` (every chunk before them is in
    /// `batch` or written): full records only unless `all` (at a window's start).
    fn write_before(&mut self, offset: u64, all: bool, batch: &mut Batch, shard: &mut ShardWriter) -> Result<()> {
        let start = self.next;
        while self.next < self.records.len() && self.records[self.next].0 < offset {
            self.next += 1;
        }
        match &self.decoded {
            Some(decoded) => {
                for record in &decoded[start..self.next] {
                    self.waiting.extend_from_slice(record);
                }
                let ready = if all {
                    self.waiting.len()
                } else {
                    self.waiting.len() / EPISODES_PER_RECORD * EPISODES_PER_RECORD
                };
                if ready > 0 {
                    batch.write(shard)?;
                    shard.append_episodes(&self.waiting[..ready]);
                    self.waiting.drain(..ready);
                }
            }
            None if self.next > start => {
                batch.write(shard)?;
                for (_, payload) in &self.records[start..self.next] {
                    shard.copy_record(RecordKind::Episode, payload);
                }
            }
            None => {}
        }
        Ok(())
    }
}

/// Writes the new file: the header, Meta and Column records, the chunks, the episodes in their
/// order (each after the chunks holding its rows, as early as that allows, batched as a fast
/// recording batches them), the Timelog records, the index.
fn write_compacted(
    map: &[u8],
    layout: &Layout,
    runs: &[Run],
    decoded: Option<Vec<Vec<episode::DecodedEpisode>>>,
    settings: &Settings,
    encoder: &mut Encoder,
    tmp: &Path,
) -> Result<()> {
    let header = FileHeader { compat_flags: layout.header.compat_flags | COMPACTED, ..layout.header };
    // Syncing per batch would only slow the copy: the old file stays until the rename.
    let sync = if settings.durability == Durability::Flush { Durability::Flush } else { Durability::FsyncOnClose };
    let mut shard = ShardWriter::create_at(tmp.to_path_buf(), &header, sync)?;
    let (heads, tails): (Vec<_>, Vec<_>) =
        layout.copied.iter().partition(|(kind, _)| matches!(kind, RecordKind::Meta | RecordKind::Column));
    for (kind, payload) in heads {
        shard.copy_record(*kind, &map[payload.clone()]);
    }
    let (episodes, others): (Vec<_>, Vec<_>) = tails.into_iter().partition(|(kind, _)| *kind == RecordKind::Episode);
    let old_offset = |payload: &Range<usize>| (payload.start - RECORD_HEADER_LEN) as u64;
    let mut queue =
        EpisodeQueue::new(episodes.iter().map(|(_, p)| (old_offset(p), &map[p.clone()])).collect(), decoded);
    let mut batch = Batch::default();
    let mut window = 0;
    for run in runs {
        let first = &layout.chunks[run.members[0]];
        // A new window: every episode before it has its rows written (full records otherwise).
        let new_window = first.record_offset / WINDOW_BYTES != window;
        window = first.record_offset / WINDOW_BYTES;
        queue.write_before(first.record_offset, new_window, &mut batch, &mut shard)?;
        if run.members.len() == 1 {
            let data = stored_bytes(map, first).map_err(|why| Error::corrupt(tmp, first.data_offset, why))?.to_vec();
            let chunk = PendingChunk {
                lane: first.lane,
                column: first.column,
                first_row: first.first_row,
                n_rows: first.n_rows,
                codec: first.codec,
                raw_len: first.raw_len,
                data,
                flags: first.flags & !chunks::CHUNK_CHECKSUM,
            };
            batch.add(&mut shard, chunk)?;
            continue;
        }
        let spec = &layout.columns[&first.column];
        let limit = ChunkLimit::of(spec, settings.default_chunk_bytes);
        let members: Vec<&ChunkRef> = run.members.iter().map(|&i| &layout.chunks[i]).collect();
        let corrupt = |why: String| Error::corrupt(tmp, first.data_offset, format!("compacting: {why}"));
        reseal(map, spec, &limit, &members, encoder, corrupt, |chunk| batch.add(&mut shard, chunk))?;
    }
    batch.write(&mut shard)?;
    queue.write_before(u64::MAX, true, &mut batch, &mut shard)?;
    for (kind, payload) in others {
        shard.copy_record(*kind, &map[payload.clone()]);
    }
    shard.finish()?;
    Ok(())
}

/// The episodes of a closed shard's Episode records to write, and the bytes of those left out.
struct LatestEpisodes {
    /// Per record (in file order), its episodes no later record of the shard supersedes.
    records: Vec<Vec<episode::DecodedEpisode>>,
    /// About what the superseded ones took (their fixed parts, metadata and metrics).
    dropped_bytes: u64,
}

/// The episodes of Episode records (`payloads`, in order) without the progress parts a later
/// record of the same episode supersedes (`episode::superseded`), or `None` (a record does not
/// decode) to copy the records as they are; written only where `encode_back` holds too.
fn latest_episodes(payloads: &[&[u8]]) -> Option<LatestEpisodes> {
    let mut records = payloads.iter().map(|p| episode::decode_batch(p, 0).ok()).collect::<Option<Vec<_>>>()?;
    let ids: Vec<u64> = records.iter().flatten().map(|(s, _, _)| s.episode_id).collect();
    let mut superseded = episode::superseded(&ids).into_iter();
    let mut dropped_bytes = 0;
    for record in &mut records {
        record.retain(|(s, m, x)| {
            let drop = superseded.next().unwrap_or(false);
            if drop {
                dropped_bytes += (episode::FIXED_LEN + m.len() + x.len()) as u64;
                debug_assert!(s.continues(), "only a part is superseded");
            }
            !drop
        });
    }
    Some(LatestEpisodes { records, dropped_bytes })
}

/// Whether every Episode record (`payloads`, in order) decodes and encodes back to its own
/// bytes: only then are their episodes written in fewer, larger records as a fast recording
/// batches them (otherwise the records are copied as they are), so nothing a newer writer added
/// is lost.
fn encode_back(payloads: &[&[u8]]) -> bool {
    payloads.iter().all(|payload| {
        episode::decode_batch(payload, 0).is_ok_and(|decoded| {
            let items: Vec<episode::EpisodeItem> =
                decoded.iter().map(|(s, m, x)| (s.clone(), m.as_slice(), x.as_slice())).collect();
            episode::encode_batch(&items) == *payload
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(lane: u32, column: u32, first_row: u64, n_rows: u32, raw_len: u64) -> ChunkRef {
        ChunkRef {
            lane,
            column,
            first_row,
            n_rows,
            codec: 0,
            record_offset: 0,
            data_offset: 0,
            stored_len: raw_len,
            raw_len,
            flags: 0,
            crc: 0,
        }
    }

    fn limit(bytes: usize) -> ChunkLimit {
        ChunkLimit { fill: bytes, raw: bytes, frame: None, rows: u32::MAX }
    }

    fn members(runs: &[Run]) -> Vec<(Vec<usize>, usize)> {
        runs.iter().map(|r| (r.members.clone(), r.chunks_after)).collect()
    }

    #[test]
    fn timer_cut_stretches_of_one_lane_and_column_are_sealed_again() {
        let chunks = [
            chunk(0, 1, 0, 10, 80),
            chunk(1, 1, 0, 10, 80),
            chunk(0, 1, 10, 10, 80),
            chunk(0, 1, 20, 10, 80),
            chunk(0, 2, 0, 10, 80), // a variable-length column: copied
            chunk(0, 2, 10, 10, 80),
            chunk(1, 1, 15, 5, 40), // rows 10..15 missing: not a continuation
        ];
        let fills: Vec<u64> = chunks.iter().map(|c| c.raw_len).collect();
        let runs = plan_runs(&chunks, &fills, |c| (c == 1).then(|| limit(200)));
        // 240 bytes in chunks of 200: 2 chunks instead of 3.
        assert_eq!(members(&runs), vec![(vec![0, 2, 3], 2), (vec![1], 1), (vec![4], 1), (vec![5], 1), (vec![6], 1)]);
    }

    #[test]
    fn stretches_stop_at_a_window_of_the_old_file_and_at_the_row_cap() {
        let at = |c: ChunkRef, record_offset: u64| ChunkRef { record_offset, ..c };
        let chunks = [
            at(chunk(0, 1, 0, 10, 80), 64),
            at(chunk(0, 1, 10, 10, 80), WINDOW_BYTES - 8),
            at(chunk(0, 1, 20, 10, 80), WINDOW_BYTES), // the next window: a new stretch
            at(chunk(0, 1, 30, 10, 80), WINDOW_BYTES + 64),
        ];
        let fills: Vec<u64> = chunks.iter().map(|c| c.raw_len).collect();
        let runs = plan_runs(&chunks, &fills, |_| Some(limit(1000)));
        assert_eq!(members(&runs), vec![(vec![0, 1], 1), (vec![2, 3], 1)]);
        // At most `rows` rows a chunk: 40 rows in chunks of 25 make 2.
        let rows = ChunkLimit { rows: 25, ..limit(1000) };
        let one_window: Vec<ChunkRef> = chunks.iter().map(|c| at(*c, 64)).collect();
        assert_eq!(members(&plan_runs(&one_window, &fills, |_| Some(rows))), vec![(vec![0, 1, 2, 3], 2)]);
    }

    #[test]
    fn full_chunks_and_repeated_rows_are_copied() {
        let mut repeat = chunk(0, 1, 0, 1, 8);
        repeat.flags = chunks::CHUNK_REPEAT;
        let chunks = [repeat, chunk(0, 1, 1, 25, 200), chunk(0, 1, 26, 25, 200), chunk(0, 1, 51, 2, 16)];
        let fills: Vec<u64> = chunks.iter().map(|c| c.raw_len).collect();
        assert_eq!(
            members(&plan_runs(&chunks, &fills, |_| Some(limit(200)))),
            vec![(vec![0], 1), (vec![1], 1), (vec![2], 1), (vec![3], 1)]
        );
        // Frame stacks are sealed on what the filter stores (the fills), not on raw bytes.
        let fills = [8, 50, 50, 4];
        let framed = ChunkLimit { fill: 200, raw: 800, frame: Some(2), rows: u32::MAX };
        assert_eq!(members(&plan_runs(&chunks, &fills, |_| Some(framed))), vec![(vec![0], 1), (vec![1, 2, 3], 1)]);
    }

    #[test]
    fn only_the_writers_rewrite_of_a_header_counts_as_compaction() {
        let closed = FileHeader::new([7; 16], 2, 123);
        let rewritten = FileHeader { compat_flags: COMPACTED, ..closed };
        assert!(closed.compacted_as(&rewritten));
        assert!(!closed.compacted_as(&closed), "a copy of the same file is a replacement like any other");
        assert!(!rewritten.compacted_as(&rewritten));
        assert!(!closed.compacted_as(&FileHeader { shard_seq: 3, ..rewritten }));
    }
}
