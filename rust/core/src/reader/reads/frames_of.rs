//! A column of a set of episodes read as its distinct frames, each once, and per observation
//! row the ids of the frames it stacks: what a replay that keeps its data in device memory
//! holds (a frame stack of 4 shares 3 frames with the next row, so the frames are about a
//! quarter of the stacks' bytes, and a batch is one gather of frames by id).
//!
//! The frames come as the chunks store them, never rebuilt into stacks: a chunk the
//! frame-stack filter kept gives its stored frames (a whole row, then one frame per row that
//! shifts the one before), any other chunk `stack` frames a row. A column whose rows are not
//! frame stacks (no axis of 2 to `MAX_SEALED_STACK` frames first) is read as rows, one "frame"
//! each. Rows no chunk holds (read as zeros everywhere else) point at one zero frame.

use std::borrow::Cow;
use std::collections::HashMap;

use super::gather::max_threads;
use super::rows::ColumnRows;
use super::steps::EpisodeSet;
use crate::error::{Error, Result};
use crate::format::codec::{pipeline, CODEC_STACK, CODEC_ZSTD};
use crate::format::stack::HEADER_LEN;
use crate::reader::catalog::chunk_list::{ListKey, Located};
use crate::reader::dataset_view::DatasetView;
use crate::reader::store::chunk_bytes::Decoded;
use crate::schema::MAX_SEALED_STACK;

/// A column's frames and, per row, the frames it is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameTable {
    /// The frames, `frame_bytes` each, in the order the chunks store them (a zero frame last
    /// where some row is held by no chunk).
    pub frames: Vec<u8>,
    pub frame_bytes: usize,
    /// Frames a row stacks (1: the column's rows are not frame stacks; a frame is a row).
    pub stack: usize,
    /// `stack` frame ids per row: the observation rows of the episodes in the set's order, an
    /// episode's T + 1 rows (its observations, then its final observation) after another's.
    pub ids: Vec<i64>,
}

/// A run of an episode's rows: `n` rows no chunk holds, or rows `at .. at + n` of chunk
/// `chunk` of its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Gap(u64),
    Rows { chunk: usize, at: u64, n: u64 },
}

/// The pieces of rows `first .. first + n` over chunks spanning rows `spans` (sorted,
/// disjoint `(first, end)`).
fn pieces(spans: &[(u64, u64)], first: u64, n: u64) -> Vec<Piece> {
    let end = first.saturating_add(n);
    let mut out = Vec::new();
    let mut cursor = first;
    for (i, &(a, b)) in spans.iter().enumerate().skip(spans.partition_point(|&(_, b)| b <= first)) {
        if a >= end || cursor >= end {
            break;
        }
        let from = a.max(cursor);
        if from > cursor {
            out.push(Piece::Gap(from - cursor));
        }
        let to = b.min(end);
        out.push(Piece::Rows { chunk: i, at: from - a, n: to - from });
        cursor = to;
    }
    if end > cursor {
        out.push(Piece::Gap(end - cursor));
    }
    out
}

/// The frames a chunk of `n_rows` gives: the stored frames when it keeps the filter's bytes
/// (`filtered_len`: the size its zstd frame declares for them: header, a kind a row, frames),
/// else `stack` a row.
fn chunk_frame_count(n_rows: u64, stack: u64, frame: u64, filtered_len: Option<u64>) -> u64 {
    match filtered_len {
        Some(len) => len.saturating_sub(HEADER_LEN as u64 + n_rows) / frame.max(1),
        None => n_rows * stack,
    }
}

/// Where each row's frames end (counted in frames from the chunk's first), from where its
/// bytes end in the stored frames; `None` if one ends off a frame boundary or before a whole
/// stack (not what the filter writes).
fn frame_ends(byte_ends: impl Iterator<Item = usize>, frame: usize, stack: usize) -> Option<Vec<u32>> {
    byte_ends
        .map(|e| {
            (e.is_multiple_of(frame) && e / frame >= stack).then_some(e / frame).and_then(|f| u32::try_from(f).ok())
        })
        .collect()
}

/// Appends the `stack` frame ids of each row of `pieces`: a chunk's row ending at frame `e`
/// of a chunk whose frames start at id `base[chunk]` stacks ids `base + e - stack ..
/// base + e`; a row no chunk holds, `zero` `stack` times.
fn push_ids(pieces: &[(Piece, usize)], base: &[u64], ends: &[Vec<u32>], zero: u64, stack: usize, ids: &mut Vec<i64>) {
    for &(piece, slot) in pieces {
        match piece {
            Piece::Gap(n) => ids.extend(std::iter::repeat_n(zero as i64, n as usize * stack)),
            Piece::Rows { at, n, .. } => {
                for &e in &ends[slot][at as usize..(at + n) as usize] {
                    let last = (base[slot] + e as u64) as i64;
                    ids.extend(last - stack as i64..last);
                }
            }
        }
    }
}

impl DatasetView<'_> {
    /// Column `column` of the episodes of `set` as a `FrameTable`, refused before anything is
    /// decoded when its frames and ids would take more than `max_bytes`.
    ///
    /// Errors: `Invalid` (no episode; more than `max_bytes`, naming the size), `Schema` (no
    /// such column, a str column, shapes or dtypes that differ between recordings), `Corrupt`
    /// (a chunk fails its checksum or does not decode).
    pub fn frames_of(&self, column: &str, set: &EpisodeSet, max_bytes: u64) -> Result<FrameTable> {
        if set.is_empty() {
            return Err(Error::Invalid(format!("column '{column}': no episode to read frames from")));
        }
        let mut runs: Vec<(ListKey, u64, u64)> = Vec::with_capacity(set.len());
        let mut spec_of = None;
        for k in 0..set.len() {
            let ColumnRows { recording, lane, column: id, first_row, n_rows } = self.locate(set.episode(k), column)?;
            let spec = &self.recordings()[recording].columns[id as usize];
            let row = spec.row_bytes().ok_or_else(|| Error::schema(column, "holds str values, not frames"))?;
            match spec_of {
                None => spec_of = Some((spec, row)),
                Some((s, _)) if s.shape != spec.shape || s.dtype != spec.dtype => {
                    let why = format!(
                        "{} {:?} in one recording, {} {:?} in another",
                        s.dtype, s.shape, spec.dtype, spec.shape
                    );
                    return Err(Error::schema(column, why));
                }
                Some(_) => {}
            }
            runs.push(((recording, lane, id), first_row, n_rows));
        }
        let (spec, row) = spec_of.expect("a non-empty set");
        let stack = spec.row_layout().stack.filter(|&s| s as u64 <= MAX_SEALED_STACK).unwrap_or(1);
        let frame = row / stack;

        // The chunks the rows lie in (each once, in the order first needed) and each run's pieces.
        let mut spans: HashMap<ListKey, Vec<(u64, u64)>> = HashMap::new();
        let mut slot_of: HashMap<(ListKey, usize), usize> = HashMap::new();
        let mut chunks: Vec<&Located> = Vec::new();
        let mut planned: Vec<(Piece, usize)> = Vec::new();
        let mut gaps = false;
        for &(key, first, n) in &runs {
            let list = self.chunk_list(key.0, key.1, key.2);
            let spans = spans.entry(key).or_insert_with(|| list.iter().map(|l| (l.first_row(), l.end_row())).collect());
            for piece in pieces(spans, first, n) {
                let slot = match piece {
                    Piece::Gap(_) => {
                        gaps = true;
                        usize::MAX
                    }
                    Piece::Rows { chunk, .. } => *slot_of.entry((key, chunk)).or_insert_with(|| {
                        chunks.push(&list[chunk]);
                        chunks.len() - 1
                    }),
                };
                planned.push((piece, slot));
            }
        }

        // Their frames, counted from the chunk headers (nothing decoded), then the size check.
        let kept = pipeline(&[CODEC_STACK, CODEC_ZSTD]);
        let mut base = Vec::with_capacity(chunks.len() + 1);
        let mut total = 0u64;
        for loc in &chunks {
            base.push(total);
            let filtered_len = (stack > 1 && loc.chunk.codec == kept)
                .then(|| self.store.shards[loc.shard].source.bytes(loc.chunk.data_offset, loc.chunk.stored_len.min(32)))
                .flatten()
                .and_then(|head| zstd::zstd_safe::get_frame_content_size(&head).ok().flatten());
            total += chunk_frame_count(loc.chunk.n_rows as u64, stack as u64, frame as u64, filtered_len);
        }
        base.push(total);
        let zero = total;
        let n_frames = total + gaps as u64;
        let rows: u64 = runs.iter().map(|r| r.2).sum();
        let bytes = n_frames as u128 * frame as u128 + rows as u128 * stack as u128 * 8;
        if bytes > max_bytes as u128 {
            return Err(Error::Invalid(format!(
                "column '{column}': {n_frames} frames of {frame} bytes and {rows} rows of {stack} frame ids \
                 take {bytes} bytes, more than the {max_bytes} allowed"
            )));
        }
        let too_large = || Error::Invalid(format!("column '{column}': {bytes} bytes of frames cannot be allocated"));
        let len = usize::try_from(n_frames * frame as u64).map_err(|_| too_large())?;
        let mut frames = Vec::new();
        frames.try_reserve_exact(len).map_err(|_| too_large())?;
        frames.resize(len, 0);

        // Each chunk decoded into its own place, chunks dealt round-robin over the threads.
        let mut jobs: Vec<(usize, &mut [u8])> = Vec::with_capacity(chunks.len());
        let mut rest = frames.as_mut_slice();
        for slot in 0..chunks.len() {
            let (mine, after) = rest.split_at_mut(((base[slot + 1] - base[slot]) * frame as u64) as usize);
            jobs.push((slot, mine));
            rest = after;
        }
        let threads = max_threads().clamp(1, jobs.len().max(1));
        let mut groups: Vec<Vec<(usize, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
        for (j, job) in jobs.into_iter().enumerate() {
            groups[j % threads].push(job);
        }
        let decode = |group: Vec<(usize, &mut [u8])>| -> Vec<(usize, Result<Vec<u32>>)> {
            group.into_iter().map(|(slot, out)| (slot, self.chunk_frames(chunks[slot], row, stack, out))).collect()
        };
        let done: Vec<(usize, Result<Vec<u32>>)> = std::thread::scope(|s| {
            let mut groups = groups.into_iter();
            let first = groups.next().unwrap_or_default();
            let handles: Vec<_> = groups.map(|g| s.spawn(move || decode(g))).collect();
            let mut all = decode(first);
            for h in handles {
                all.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            }
            all
        });
        let mut ends = vec![Vec::new(); chunks.len()];
        for (slot, result) in done {
            ends[slot] = result?;
        }

        let mut ids = Vec::new();
        let id_len = usize::try_from(rows.saturating_mul(stack as u64)).map_err(|_| too_large())?;
        ids.try_reserve_exact(id_len).map_err(|_| too_large())?;
        push_ids(&planned, &base, &ends, zero, stack, &mut ids);
        Ok(FrameTable { frames, frame_bytes: frame, stack, ids })
    }

    /// Writes chunk `loc`'s frames (`out` is sized for what its header declares) and returns
    /// where each of its rows' frames end.
    fn chunk_frames(&self, loc: &Located, row: usize, stack: usize, out: &mut [u8]) -> Result<Vec<u32>> {
        let corrupt = |why: &str| Error::corrupt(&self.store.shards[loc.shard].path, loc.chunk.data_offset, why);
        let n = loc.chunk.n_rows as usize;
        let stored = self.stored_bytes(loc)?;
        let decoded = match loc.chunk.codec {
            0 => None,
            _ => Some(self.decode_chunk(loc, &stored, Some(row), loc.chunk.raw_len as usize)?),
        };
        let whole_rows = || (1..=n).map(|r| r * row).collect();
        let (bytes, byte_ends): (Cow<'_, [u8]>, Vec<usize>) = match &decoded {
            None => (Cow::Borrowed(stored.get(..n * row).unwrap_or(&stored)), whole_rows()),
            Some(Decoded::Rows(b)) => (Cow::Borrowed(b.as_slice()), whole_rows()),
            Some(Decoded::Frames(f)) if stack > 1 => {
                let (b, e) = f.stored();
                (Cow::Borrowed(b), e.collect())
            }
            // Not frame stacks (a frame is a row) yet filtered: the rows rebuilt.
            Some(Decoded::Frames(f)) => {
                let rebuilt = (0..n).map(|r| f.row(r)).collect::<Option<Vec<_>>>().map(|r| r.concat());
                (Cow::Owned(rebuilt.ok_or_else(|| corrupt("chunk shorter than its rows"))?), whole_rows())
            }
            // `decode_chunk` decodes into this process's memory; only the cache hands out slots
            // of the shared store.
            Some(Decoded::Shared(_)) => return Err(corrupt("a decoded chunk in an unexpected form")),
        };
        if bytes.len() != out.len() || byte_ends.len() != n {
            return Err(corrupt("the chunk's frames are not what its header declares"));
        }
        out.copy_from_slice(&bytes);
        frame_ends(byte_ends.into_iter(), row / stack, stack)
            .ok_or_else(|| corrupt("frame-stack rows off frame boundaries"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::stack::{encode_into, Frames};

    #[test]
    fn rows_split_into_pieces_over_chunks_and_gaps() {
        let spans = [(0, 4), (4, 10), (12, 15)];
        let rows = |chunk, at, n| Piece::Rows { chunk, at, n };
        let table: &[(u64, u64, Vec<Piece>)] = &[
            (0, 3, vec![rows(0, 0, 3)]),
            (2, 5, vec![rows(0, 2, 2), rows(1, 0, 3)]),
            (8, 6, vec![rows(1, 4, 2), Piece::Gap(2), rows(2, 0, 2)]),
            (13, 5, vec![rows(2, 1, 2), Piece::Gap(3)]),
            (20, 2, vec![Piece::Gap(2)]),
            (5, 0, vec![]),
        ];
        for (first, n, want) in table {
            assert_eq!(&pieces(&spans, *first, *n), want, "{first} +{n}");
        }
        assert_eq!(pieces(&[], 3, 2), vec![Piece::Gap(2)]);
    }

    #[test]
    fn chunks_count_their_stored_frames_or_a_stack_a_row() {
        // (rows, stack, frame, declared filtered length, frames)
        let table = [
            (10, 4, 3, None, 40),
            (10, 1, 12, None, 10),
            (7, 4, 3, Some(4 + 7 + 12 + 6 * 3), 10), // a whole row, then 6 shifts
            (7, 4, 3, Some(4 + 7 + 7 * 12), 28),     // no row shifts
            (7, 4, 3, Some(3), 0),                   // a header too short for its kinds
        ];
        for (rows, stack, frame, declared, want) in table {
            assert_eq!(chunk_frame_count(rows, stack, frame, declared), want, "{rows} {stack} {frame} {declared:?}");
        }
    }

    #[test]
    fn row_ends_become_frame_ends_or_are_refused() {
        // (byte ends, frame bytes, stack, frame ends)
        type Case = (&'static [usize], usize, usize, Option<Vec<u32>>);
        let table: &[Case] = &[
            (&[12, 15, 18], 3, 4, Some(vec![4, 5, 6])),
            (&[12, 24], 3, 4, Some(vec![4, 8])),
            (&[12, 14], 3, 4, None), // off a frame boundary
            (&[9], 3, 4, None),      // before a whole stack
            (&[5, 10], 5, 1, Some(vec![1, 2])),
            (&[], 3, 4, Some(vec![])),
        ];
        for (ends, frame, stack, want) in table {
            assert_eq!(&frame_ends(ends.iter().copied(), *frame, *stack), want, "{ends:?}");
        }
    }

    #[test]
    fn ids_point_at_each_rows_frames() {
        // Chunk 0 starts at frame 0 with rows ending at frames 4, 5, 6; chunk 1 at frame 6 with
        // rows ending at 4, 8 (two keeps); the zero frame is 14.
        let base = [0, 6, 14];
        let ends = vec![vec![4, 5, 6], vec![4, 8]];
        let planned = [
            (Piece::Rows { chunk: 0, at: 1, n: 2 }, 0),
            (Piece::Gap(1), usize::MAX),
            (Piece::Rows { chunk: 7, at: 0, n: 2 }, 1),
        ];
        let mut ids = Vec::new();
        push_ids(&planned, &base, &ends, 14, 4, &mut ids);
        let want: Vec<i64> = vec![1, 2, 3, 4, 2, 3, 4, 5, 14, 14, 14, 14, 6, 7, 8, 9, 10, 11, 12, 13];
        assert_eq!(ids, want);
    }

    #[test]
    fn stored_frames_of_a_filtered_chunk_rebuild_its_rows_by_id() {
        // Frames of 3 bytes, stacks of 4: an episode of 5 shifting rows, then a new one (a keep).
        let f: Vec<[u8; 3]> = (0..20u8).map(|i| [i, i + 50, i + 100]).collect();
        let mut raw: Vec<u8> = (0..5).flat_map(|r| f[r..r + 4].concat()).collect();
        raw.extend(f[10..14].concat());
        raw.extend(f[11..15].concat());
        let mut enc = Vec::new();
        encode_into(&raw, 12, 4, &mut enc).unwrap();
        let filtered_len = enc.len() as u64;
        let frames = Frames::new(enc, 12, 7, 7).unwrap();
        let (stored, byte_ends) = frames.stored();
        let ends = frame_ends(byte_ends, 3, 4).unwrap();
        assert_eq!(ends, vec![4, 5, 6, 7, 8, 12, 13]);
        assert_eq!(stored.len() / 3, chunk_frame_count(7, 4, 3, Some(filtered_len)) as usize);
        let mut ids = Vec::new();
        push_ids(&[(Piece::Rows { chunk: 0, at: 0, n: 7 }, 0)], &[0], &[ends], 0, 4, &mut ids);
        let rebuilt: Vec<u8> = ids.iter().flat_map(|&i| stored[i as usize * 3..i as usize * 3 + 3].to_vec()).collect();
        assert_eq!(rebuilt, raw);
    }
}
