//! Reading rows of one column of one (recording, lane): across chunks, zero-filling rows no
//! chunk holds (a column added mid-recording), raw chunks straight from the memory map and
//! compressed ones through the cache. A Chunks record's payload checksum is verified once,
//! before any of its data is first used.

use std::borrow::Cow;
use std::sync::Arc;

use memmap2::Mmap;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::format::chunks::ChunkRef;
use crate::format::codec::{self, codec_ids, CODEC_ZSTD};
use crate::format::stack::Frames;
use crate::format::u64_at;
use crate::reader::catalog::chunk_list::Located;
use crate::reader::dataset_view::DatasetView;
use crate::reader::store::chunk_bytes::{ChunkBytes, Decoded};
use crate::schema::{ColumnId, ColumnSpec};

/// All rows of one column of one episode.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    /// Row-major little-endian elements; `shape` is `[rows, ...row shape]`.
    Fixed { dtype: DType, shape: Vec<usize>, bytes: Vec<u8> },
    /// One string a row ("" where no chunk holds the row).
    Strings(Vec<String>),
}

/// A column of an episode: copied (`Ok`), or seen in place (`Err`: dtype, shape, the view).
pub type EpisodeColumn = std::result::Result<ColumnData, (DType, Vec<usize>, RowsView)>;

/// Rows stored raw, seen in place in the memory map. Keeps the mapping alive, so it outlives a
/// `refresh` (which may remap) and the `Dataset` itself.
#[derive(Clone)]
pub struct RowsView {
    map: Arc<Mmap>,
    start: usize,
    len: usize,
}

impl RowsView {
    /// The rows' bytes. They start on an offset aligned to the element size (chunk data is
    /// 64-byte aligned in the file, and the map starts on a page).
    pub fn bytes(&self) -> &[u8] {
        &self.map[self.start..self.start + self.len]
    }
}

/// Rows `first_row..first_row + n_rows` of one column of one lane of a recording: what
/// `read_rows`, `read_strings` and `view_rows` read, and where an episode's column lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnRows {
    pub recording: usize,
    pub lane: u32,
    pub column: ColumnId,
    pub first_row: u64,
    pub n_rows: u64,
}

impl std::fmt::Debug for RowsView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowsView").field("start", &self.start).field("len", &self.len).finish()
    }
}

impl DatasetView<'_> {
    fn column_spec(&self, recording: usize, column: ColumnId) -> Result<&ColumnSpec> {
        let rec = self.recording(recording)?;
        rec.columns.get(column as usize).ok_or_else(|| {
            Error::Invalid(format!(
                "column {column} is out of range (recording {recording} has {} columns)",
                rec.columns.len()
            ))
        })
    }

    /// The spec and row size of a fixed-size column.
    fn fixed_column(&self, recording: usize, column: ColumnId) -> Result<(&ColumnSpec, usize)> {
        let spec = self.column_spec(recording, column)?;
        match spec.row_bytes() {
            Some(row) => Ok((spec, row)),
            None => Err(Error::schema(&spec.name, format!("holds {} values; read them as strings", spec.dtype))),
        }
    }

    pub(in crate::reader) fn chunk_list(&self, recording: usize, lane: u32, column: ColumnId) -> &[Located] {
        self.catalog.chunk_lists.get(&(recording, lane, column)).map_or(&[], |l| &l.chunks)
    }

    /// `chunk_list` and its chunks' end rows, in the same order.
    pub(in crate::reader) fn chunk_list_ends(
        &self,
        recording: usize,
        lane: u32,
        column: ColumnId,
    ) -> (&[Located], &[u64]) {
        self.catalog.chunk_lists.get(&(recording, lane, column)).map_or((&[], &[]), |l| (&l.chunks, &l.ends))
    }

    pub(in crate::reader) fn ensure_verified(&self, loc: &Located) -> Result<()> {
        if self.store.verified.is_verified(loc.record) {
            return Ok(());
        }
        if loc.chunk.has_checksum() {
            self.checked_bytes(loc)?;
        } else {
            self.store.shards[loc.shard].verify_chunks_record(loc.chunk.record_offset)?;
            self.store.verified.mark(loc.record);
        }
        Ok(())
    }

    /// A chunk's stored bytes (a slice of the map, or read from the file), checked first: by its
    /// own checksum (its bytes read once for both), or its Chunks record's.
    pub(in crate::reader) fn stored_bytes(&self, loc: &Located) -> Result<Cow<'_, [u8]>> {
        if loc.chunk.has_checksum() && !self.store.verified.is_verified(loc.record) {
            return self.checked_bytes(loc);
        }
        self.ensure_verified(loc)?;
        self.stored_unchecked(loc)
    }

    /// A chunk's stored bytes checked against its own checksum, and marked verified.
    /// Bytes of a store that fail are fetched once more before the failure stands (a flip in
    /// transit is no damage), and are never kept.
    fn checked_bytes(&self, loc: &Located) -> Result<Cow<'_, [u8]>> {
        let shard = &self.store.shards[loc.shard];
        let (offset, len) = (loc.chunk.data_offset, loc.chunk.stored_len);
        let mut data = self.stored_unchecked(loc)?;
        if let Err(e) = shard.verify_chunk(&loc.chunk, &data) {
            if !shard.source.forget(offset, len) {
                return Err(e);
            }
            data = self.stored_unchecked(loc)?;
            shard.verify_chunk(&loc.chunk, &data).inspect_err(|_| {
                shard.source.forget(offset, len);
            })?;
        }
        self.store.verified.mark(loc.record);
        Ok(data)
    }

    /// A chunk's stored bytes, for a caller that verified its Chunks record already.
    pub(in crate::reader) fn stored_unchecked(&self, loc: &Located) -> Result<Cow<'_, [u8]>> {
        let shard = &self.store.shards[loc.shard];
        let c = &loc.chunk;
        shard.check_not_released()?;
        shard.source.bytes(c.data_offset, c.stored_len).ok_or_else(|| {
            // A store that failed or an object replaced since opening: its error, not damage.
            if let Some(e) = shard.source.remote_object().and_then(|o| o.failure()) {
                return e;
            }
            let why =
                if shard.source.is_unreadable() || c.data_offset.saturating_add(c.stored_len) <= shard.source.len() {
                    "chunk data could not be read (the file changed since it was opened?)"
                } else {
                    "chunk data lies outside the file"
                };
            Error::corrupt(&shard.path, c.data_offset, why)
        })
    }

    /// Decodes an encoded chunk's stored bytes (no cache involved): `raw_len` bytes.
    pub(in crate::reader) fn decode_stored(
        &self,
        loc: &Located,
        stored: &[u8],
        row_bytes: Option<usize>,
    ) -> Result<Vec<u8>> {
        let c = &loc.chunk;
        let corrupt = |why: String| Error::corrupt(&self.store.shards[loc.shard].path, c.data_offset, why);
        if codec_ids(c.codec).last() == Some(CODEC_ZSTD) && !declares_its_size(c, row_bytes, stored) {
            return Err(corrupt(format!("zstd frame does not declare the chunk's {} bytes", c.raw_len)));
        }
        codec::decode(c.codec, row_bytes, stored, c.raw_len as usize).map_err(corrupt)
    }

    /// An encoded chunk decoded as far as its first `prefix` bytes need (all of it where its
    /// codec cannot stop early, or `prefix` is the whole chunk): frame stacks as their frames
    /// (whole rows), other chunks as their rows.
    pub(in crate::reader) fn decode_chunk(
        &self,
        loc: &Located,
        stored: &[u8],
        row_bytes: Option<usize>,
        prefix: usize,
    ) -> Result<Decoded> {
        let c = &loc.chunk;
        let corrupt = |why: String| Error::corrupt(&self.store.shards[loc.shard].path, c.data_offset, why);
        let raw_len = c.raw_len as usize;
        // A frame that does not declare its size is left to the whole decode, which says so.
        if !declares_its_size(c, row_bytes, stored) {
            return self.decode_stored(loc, stored, row_bytes).map(Decoded::Rows);
        }
        if let Some(row) = row_bytes.filter(|&r| r > 0 && raw_len.is_multiple_of(r)) {
            let (rows, wanted) = (raw_len / row, prefix.min(raw_len).div_ceil(row));
            if let Some(filtered) = codec::stack_frames(c.codec, row_bytes, stored, raw_len, wanted) {
                return Frames::new(filtered.map_err(corrupt)?, row, rows, wanted)
                    .map(Decoded::Frames)
                    .map_err(corrupt);
            }
        }
        match codec::decode_prefix(c.codec, row_bytes, stored, raw_len, prefix) {
            Some(decoded) => decoded.map(Decoded::Rows).map_err(corrupt),
            None => self.decode_stored(loc, stored, row_bytes).map(Decoded::Rows),
        }
    }

    /// `decode_stored` that keeps a raw chunk already read from the file as it is (no copy).
    pub(in crate::reader) fn decode_stored_cow(
        &self,
        loc: &Located,
        stored: Cow<'_, [u8]>,
        row_bytes: Option<usize>,
    ) -> Result<Vec<u8>> {
        match stored {
            Cow::Owned(raw) if loc.chunk.codec == 0 && raw.len() as u64 == loc.chunk.raw_len => Ok(raw),
            stored => self.decode_stored(loc, &stored, row_bytes),
        }
    }

    /// A chunk's decoded rows (all `raw_len` bytes of them, as checked when the chunk was taken
    /// in).
    fn chunk_data(&self, loc: &Located, row_bytes: Option<usize>) -> Result<ChunkBytes<'_>> {
        if loc.chunk.codec == 0 && self.store.shards[loc.shard].source.is_mapped() {
            if let Cow::Borrowed(stored) = self.stored_bytes(loc)? {
                return Ok(ChunkBytes::Mapped(stored));
            }
        }
        self.ensure_verified(loc)?;
        if loc.chunk.stored_len == 0 {
            // Empty chunks share their data offset with the next chunk: never cache them.
            return Ok(ChunkBytes::Decoded(Arc::new(Decoded::Rows(self.decode_stored(loc, &[], row_bytes)?))));
        }
        let key = (loc.shard, loc.chunk.data_offset);
        let whole = loc.chunk.raw_len as usize;
        // A gather may have cached a prefix only: decode such a chunk whole.
        if let Some(data) = self.store.cache.get(key).filter(|d| d.rows_len(row_bytes) == whole) {
            return Ok(ChunkBytes::Decoded(data));
        }
        let data = self.store.cache.fill(key, || {
            Ok(match self.stored_unchecked(loc)? {
                Cow::Owned(raw) if loc.chunk.codec == 0 => {
                    Decoded::Rows(self.decode_stored_cow(loc, Cow::Owned(raw), row_bytes)?)
                }
                stored => self.decode_chunk(loc, &stored, row_bytes, whole)?,
            })
        })?;
        Ok(ChunkBytes::Decoded(data))
    }

    /// Reads `rows` of a fixed-size column into `out` (exactly `n_rows * row bytes` long). Rows
    /// no chunk holds read as zeros.
    ///
    /// Errors: `Invalid` (bad recording, column or buffer size), `Schema` (a str column),
    /// `Corrupt` (a chunk fails its checksum or does not decode; names file and offset).
    pub fn read_rows(&self, rows: ColumnRows, out: &mut [u8]) -> Result<()> {
        let (spec, row_bytes) = self.fixed_column(rows.recording, rows.column)?;
        let n_rows = rows.n_rows;
        let expected = usize::try_from(n_rows).ok().and_then(|n| n.checked_mul(row_bytes));
        if expected != Some(out.len()) {
            return Err(Error::Invalid(format!(
                "column '{}': {n_rows} rows of {row_bytes} bytes do not fit a buffer of {} bytes",
                spec.name,
                out.len()
            )));
        }
        let mut pos = 0usize;
        self.walk_rows(rows, |gap, chunk| {
            // Row counts below fit in usize: they are at most n_rows, which did.
            let gap = gap as usize * row_bytes;
            out[pos..pos + gap].fill(0);
            pos += gap;
            let Some((loc, from, to)) = chunk else { return Ok(()) };
            let data = self.chunk_data(loc, Some(row_bytes))?;
            let (at, n) = ((from - loc.first_row()) as usize, (to - from) as usize);
            let whole = data.rows(row_bytes, at, n, |rows| {
                out[pos..pos + rows.len()].copy_from_slice(rows);
                pos += rows.len();
            });
            if !whole {
                return Err(Error::corrupt(
                    &self.store.shards[loc.shard].path,
                    loc.chunk.data_offset,
                    "chunk shorter than its rows",
                ));
            }
            Ok(())
        })
    }

    /// The one walk over the chunks holding `rows`: `each(gap, Some((chunk, from, to)))` for
    /// each chunk in row order (`gap`: the rows before it that no chunk holds), then
    /// `each(gap, None)` for those after the last.
    fn walk_rows(
        &self,
        rows: ColumnRows,
        mut each: impl FnMut(u64, Option<(&Located, u64, u64)>) -> Result<()>,
    ) -> Result<()> {
        let ColumnRows { recording, lane, column, first_row, n_rows } = rows;
        let end = first_row.checked_add(n_rows).ok_or_else(|| Error::Invalid("row numbers overflow".into()))?;
        let mut cursor = first_row;
        for (loc, from, to) in overlapping(self.chunk_list(recording, lane, column), first_row, end) {
            each(from - cursor, Some((loc, from, to)))?;
            cursor = to;
        }
        each(end - cursor, None)
    }

    /// Reads `rows` of a str column. Rows no chunk holds read as "".
    pub fn read_strings(&self, rows: ColumnRows) -> Result<Vec<String>> {
        let spec = self.column_spec(rows.recording, rows.column)?;
        let n_rows = rows.n_rows;
        if spec.row_bytes().is_some() {
            return Err(Error::schema(&spec.name, format!("holds {} values, not strings", spec.dtype)));
        }
        let mut out = Vec::new();
        usize::try_from(n_rows).ok().and_then(|n| out.try_reserve_exact(n).ok()).ok_or_else(|| {
            Error::Invalid(format!("column '{}': {n_rows} rows are too many to read at once", spec.name))
        })?;
        self.walk_rows(rows, |gap, chunk| {
            out.resize(out.len() + gap as usize, String::new());
            let Some((loc, from, to)) = chunk else { return Ok(()) };
            let data = self.chunk_data(loc, None)?;
            let skip = (from - loc.first_row()) as usize;
            let text = data.contiguous().unwrap_or_default();
            chunk_strings(text, loc.chunk.n_rows, skip, skip + (to - from) as usize, &mut out).map_err(|why| {
                Error::corrupt(&self.store.shards[loc.shard].path, loc.chunk.data_offset, format!("str chunk: {why}"))
            })
        })?;
        Ok(out)
    }

    /// The rows in place, without a copy, when one raw (uncompressed) chunk holds them all;
    /// `None` otherwise (read them with `read_rows`).
    pub fn view_rows(&self, rows: ColumnRows) -> Result<Option<RowsView>> {
        let ColumnRows { recording, lane, column, first_row, n_rows } = rows;
        let (_, row_bytes) = self.fixed_column(recording, column)?;
        let Some(end) = first_row.checked_add(n_rows).filter(|_| n_rows > 0) else { return Ok(None) };
        let list = self.chunk_list(recording, lane, column);
        let Some((loc, _, _)) = overlapping(list, first_row, end).next() else { return Ok(None) };
        if loc.chunk.codec != 0 || loc.first_row() > first_row || loc.end_row() < end {
            return Ok(None);
        }
        self.ensure_verified(loc)?;
        let Some(map) = self.store.shards[loc.shard].source.map() else { return Ok(None) };
        // Inside the chunk (checked at ingest: raw_len = n_rows * row_bytes, data inside the map).
        let start = (loc.chunk.data_offset + (first_row - loc.first_row()) * row_bytes as u64) as usize;
        let len = n_rows as usize * row_bytes;
        if start.checked_add(len).is_none_or(|e| e > map.len()) {
            return Err(Error::corrupt(
                &self.store.shards[loc.shard].path,
                loc.chunk.data_offset,
                "chunk outside the file",
            ));
        }
        Ok(Some(RowsView { map: map.clone(), start, len }))
    }

    /// All rows of one column of an episode: T+1 rows from `obs_first_row` on the observation
    /// timeline, T rows from `step_first_row` on the step timeline.
    ///
    /// Errors: `Invalid` (episode out of range), `Schema` (no such column), `Corrupt`.
    pub fn read_episode_column(&self, episode: usize, column_name: &str) -> Result<ColumnData> {
        let rows = self.locate(episode, column_name)?;
        let (spec, n) = (&self.catalog.recordings[rows.recording].columns[rows.column as usize], rows.n_rows);
        let dtype = spec.dtype()?;
        let Some(row_bytes) = spec.row_bytes() else {
            return Ok(ColumnData::Strings(self.read_strings(rows)?));
        };
        let shape = episode_shape(spec, n)?;
        let too_large = || Error::Invalid(format!("column '{column_name}': {n} rows are too large to read at once"));
        let len = usize::try_from(n).ok().and_then(|n| n.checked_mul(row_bytes)).ok_or_else(too_large)?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(len).map_err(|_| too_large())?;
        bytes.resize(len, 0);
        self.read_rows(rows, &mut bytes)?;
        Ok(ColumnData::Fixed { dtype, shape, bytes })
    }

    /// Like `read_episode_column`, without a copy, when the rows lie in one raw chunk:
    /// (dtype, shape `[rows, ...row shape]`, the bytes in place). `None` otherwise.
    pub fn view_episode_column(
        &self,
        episode: usize,
        column_name: &str,
    ) -> Result<Option<(DType, Vec<usize>, RowsView)>> {
        let rows = self.locate(episode, column_name)?;
        let spec = &self.catalog.recordings[rows.recording].columns[rows.column as usize];
        if spec.row_bytes().is_none() {
            return Ok(None);
        }
        let Some(view) = self.view_rows(rows)? else { return Ok(None) };
        Ok(Some((spec.dtype()?, episode_shape(spec, rows.n_rows)?, view)))
    }

    /// All rows of one column of episode `episode` (negative from the end) as a user asks for
    /// them: in place when they lie in one raw chunk (`Err`: dtype, shape, the view), else
    /// copied. The episode's damage is an error, and sampling leaves the episode out.
    ///
    /// Errors: `OutOfRange`; those of `read_episode_column`.
    pub fn episode_column(&self, episode: i64, column: &str) -> Result<EpisodeColumn> {
        let i = self.episode_index(episode)?;
        let read = match self.view_episode_column(i, column) {
            Ok(Some(view)) => Ok(Err(view)),
            Ok(None) => self.read_episode_column(i, column).map(Ok),
            Err(e) => Err(e),
        };
        if let Err(e) = &read {
            self.note_read_damage(e);
        }
        read
    }

    /// The rows of a column of an episode.
    pub(in crate::reader) fn locate(&self, episode: usize, column_name: &str) -> Result<ColumnRows> {
        let e = self.episode(episode)?;
        let column = self.column_id(e.recording, column_name).ok_or_else(|| {
            match &self.recordings()[e.recording].schema_damage {
                Some(p) => {
                    Error::corrupt(&p.file, p.offset, format!("column '{column_name}' is unreadable: {}", p.why))
                }
                None => {
                    Error::schema(column_name, format!("no such column in recording {} of this dataset", e.recording))
                }
            }
        })?;
        if let Some((_, p)) = self.recordings()[e.recording].damaged_columns.iter().find(|(id, _)| *id == column) {
            return Err(Error::corrupt(&p.file, p.offset, format!("column '{column_name}' is unreadable: {}", p.why)));
        }
        let (first_row, n_rows) = self.episode_rows(episode, column)?;
        Ok(ColumnRows { recording: e.recording, lane: e.summary.lane, column, first_row, n_rows })
    }
}

/// The chunks of a (sorted, disjoint) chunk list that hold rows of `first..end`, in row order,
/// each with the rows of `first..end` it holds: (chunk, from, to).
pub(in crate::reader) fn overlapping(
    list: &[Located],
    first: u64,
    end: u64,
) -> impl Iterator<Item = (&Located, u64, u64)> {
    list[list.partition_point(|c| c.end_row() <= first)..]
        .iter()
        .take_while(move |c| c.first_row() < end)
        .map(move |c| (c, c.first_row().max(first), c.end_row().min(end)))
}

fn episode_shape(spec: &ColumnSpec, rows: u64) -> Result<Vec<usize>> {
    std::iter::once(rows)
        .chain(spec.shape.iter().copied())
        .map(|d| usize::try_from(d).map_err(|_| Error::Invalid(format!("column '{}': shape too large", spec.name))))
        .collect()
}

/// Appends rows `from..to` of a str chunk: `(n_rows + 1)` u64 offsets into the text that
/// follows them, then the UTF-8 text.
pub(in crate::reader) fn chunk_strings(
    data: &[u8],
    n_rows: u32,
    from: usize,
    to: usize,
    out: &mut Vec<String>,
) -> Result<(), String> {
    let table = (n_rows as usize + 1) * 8;
    let text = data.get(table..).ok_or("shorter than its offset table")?;
    for row in from..to {
        let (a, b) = (u64_at(data, row * 8), u64_at(data, row * 8 + 8));
        let bytes = usize::try_from(a)
            .ok()
            .zip(usize::try_from(b).ok())
            .and_then(|(a, b)| text.get(a..b))
            .ok_or_else(|| format!("row {row}: offsets {a}..{b} outside its {} bytes of text", text.len()))?;
        let s = std::str::from_utf8(bytes).map_err(|e| format!("row {row}: not UTF-8: {e}"))?;
        out.push(s.to_owned());
    }
    Ok(())
}

/// Whether the zstd frame of a chunk whose pipeline ends with zstd declares a size its decode
/// accepts: checked before zstd is asked to allocate it.
fn declares_its_size(c: &ChunkRef, row_bytes: Option<usize>, stored: &[u8]) -> bool {
    let (limit, exact) = codec::zstd_output_limit(c.codec, row_bytes, c.raw_len);
    matches!(zstd::zstd_safe::get_frame_content_size(stored), Ok(Some(n)) if n == limit || (!exact && n <= limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_chunks_and_the_rows_they_hold() {
        // Chunks of rows 0..3, 5..7 and 7..10 (rows 3..5 are in none).
        let chunk = |first_row, n_rows| Located {
            shard: 0,
            chunk: ChunkRef {
                lane: 0,
                column: 0,
                first_row,
                n_rows,
                codec: 0,
                record_offset: 0,
                data_offset: first_row,
                stored_len: 0,
                raw_len: 0,
                flags: 0,
                crc: 0,
            },
            record: 0,
        };
        let list = [chunk(0, 3), chunk(5, 2), chunk(7, 3)];
        // (first, end, the chunks overlapping as (chunk's first row, from, to)).
        type Case = (u64, u64, &'static [(u64, u64, u64)]);
        let table: &[Case] = &[
            (0, 10, &[(0, 0, 3), (5, 5, 7), (7, 7, 10)]),
            (1, 6, &[(0, 1, 3), (5, 5, 6)]),
            (3, 5, &[]),
            (3, 6, &[(5, 5, 6)]),
            (8, 9, &[(7, 8, 9)]),
            (9, 20, &[(7, 9, 10)]),
            (10, 20, &[]),
            (4, 4, &[]),
        ];
        for &(first, end, want) in table {
            let got: Vec<_> = overlapping(&list, first, end).map(|(c, from, to)| (c.first_row(), from, to)).collect();
            assert_eq!(got, want, "{first}..{end}");
        }
    }
}
