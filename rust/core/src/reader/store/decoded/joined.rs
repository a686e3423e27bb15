//! Small decoded chunks of one (recording, lane, column) joined into one run of rows in this
//! process's memory, so that a batch of scattered rows reads each row at an offset instead of
//! finding its chunk, looking it up in the cache and copying from it.
//!
//! A live recording flushes every lane and column on a timer, so its chunks are small (a few
//! hundred rows of a few bytes): a batch of 256 transitions touches a thousand different chunks,
//! and per-chunk work is what it costs. Rows never change once written (a row of a lane is the
//! same value in whichever chunk or shard holds it), so a run stays right as chunks are
//! appended (it grows at its end), compacted or evicted (it forgets the rows of evicted shards
//! at the next `refresh`, like the cache). Only small rows of small chunks are joined, whole
//! and checked (a chunk that fails its check, a frame stack, a gap in the rows end a run: the
//! rows after it are read chunk by chunk as before). The runs' bytes count against the
//! cache's bound (`ChunkCache::insert` makes room for them).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::reader::catalog::chunk_list::{ListKey, Located};
use crate::reader::int_map::IntMap;

/// Chunks whose rows take at most this many bytes are joined (larger ones already amortize
/// their lookup over many rows).
pub(crate) const JOIN_CHUNK_BYTES: u64 = 64 << 10;
/// Rows of at most this many bytes are joined (a larger row's copy costs more than its lookup).
pub(crate) const JOIN_ROW_BYTES: usize = 1 << 10;
/// The share of the cache's bound the runs may take: 1 / `CACHE_SHARE`.
pub(crate) const CACHE_SHARE: usize = 4;
/// The most chunks one read joins to a run: a dataset of many small chunks is joined over
/// several reads, not all at the first (its other rows are read chunk by chunk meanwhile).
pub(crate) const JOIN_CHUNKS_PER_READ: usize = 64;

/// Rows `first_row ..` of one (recording, lane, column), `row_bytes` each, contiguous.
#[derive(Debug, Default, Clone)]
pub(crate) struct JoinedRun {
    pub first_row: u64,
    pub row_bytes: usize,
    pub bytes: Vec<u8>,
    /// The shards its rows came from, each with the first row it gave, ascending.
    shards: Vec<(usize, u64)>,
}

impl JoinedRun {
    pub fn end_row(&self) -> u64 {
        self.first_row + (self.bytes.len() / self.row_bytes.max(1)) as u64
    }

    /// Appends `rows`, a chunk of `shard` from row `first` (its end row, or any row while it
    /// is empty).
    pub fn push(&mut self, shard: usize, first: u64, rows: &[u8]) {
        if self.bytes.is_empty() {
            self.first_row = first;
            self.shards.clear();
        }
        debug_assert_eq!(first, self.end_row());
        if self.shards.last().is_none_or(|&(s, _)| s != shard) {
            self.shards.push((shard, first));
        }
        self.bytes.extend_from_slice(rows);
    }

    /// Appends `tail`, rows that go on from its end.
    fn append(&mut self, tail: JoinedRun) {
        debug_assert_eq!(tail.first_row, self.end_row());
        let new_shards = tail.shards.into_iter().skip_while(|&(s, _)| self.shards.last().is_some_and(|&(l, _)| l == s));
        self.shards.extend(new_shards.collect::<Vec<_>>());
        self.bytes.extend_from_slice(&tail.bytes);
    }

    /// Drops its rows from the shards `gone` marks. Returns false where they are not all at its
    /// front (then the run is to be dropped whole).
    fn forget(&mut self, gone: &[bool]) -> bool {
        let is_gone = |s: usize| gone.get(s).copied().unwrap_or(false);
        let front = self.shards.iter().take_while(|&&(s, _)| is_gone(s)).count();
        if self.shards[front..].iter().any(|&(s, _)| is_gone(s)) {
            return false;
        }
        if front > 0 {
            let new_first = self.shards.get(front).map_or(self.end_row(), |&(_, first)| first);
            let cut = (new_first - self.first_row) as usize * self.row_bytes;
            self.bytes.drain(..cut);
            if self.bytes.capacity() > 2 * self.bytes.len() {
                self.bytes.shrink_to_fit();
            }
            self.shards.drain(..front);
            self.first_row = new_first;
        }
        true
    }
}

/// The chunks of `list` (sorted by first row) that extend a run ending at row `end` (`None`: a
/// new run, from the list's first chunk), as indexes into `list`: consecutive chunks whose rows
/// go on from each other, each `ok` (joinable), adding at most `budget` bytes of `row_bytes`
/// rows and `JOIN_CHUNKS_PER_READ` chunks with rows. Empty chunks (no rows) are passed over.
/// The first may hold rows before `end` (the run's chunks were since rewritten into larger
/// ones, by a compaction): only its rows from `end` on are joined.
pub(crate) fn to_join(
    list: &[Located],
    ends: &[u64],
    end: Option<u64>,
    row_bytes: usize,
    budget: usize,
    ok: impl Fn(&Located) -> bool,
) -> Range<usize> {
    let start = match end {
        None => 0,
        // The first chunk with rows at or after `end`.
        Some(end) => ends.partition_point(|&e| e <= end),
    };
    let mut row = end.or_else(|| list.first().map(Located::first_row));
    let (mut stop, mut added, mut chunks) = (start, 0usize, 0);
    for loc in &list[start..] {
        let Some(from) = row else { break };
        let bytes = loc.end_row().saturating_sub(from) as usize * row_bytes;
        let empty = loc.chunk.n_rows == 0;
        let holds = loc.first_row() <= from && (from < loc.end_row() || (empty && loc.first_row() == from));
        let joins = holds
            && (empty || (joinable(loc, row_bytes) && ok(loc) && chunks < JOIN_CHUNKS_PER_READ))
            && added + bytes <= budget;
        if !joins {
            break;
        }
        added += bytes;
        chunks += !empty as usize;
        row = Some(loc.end_row());
        stop += 1;
    }
    start..stop
}

/// Whether a chunk's rows are small enough to join: rows of at most `JOIN_ROW_BYTES`, at most
/// `JOIN_CHUNK_BYTES` in all.
pub(crate) fn joinable(loc: &Located, row_bytes: usize) -> bool {
    row_bytes > 0 && row_bytes <= JOIN_ROW_BYTES && loc.chunk.n_rows as u64 * row_bytes as u64 <= JOIN_CHUNK_BYTES
}

/// Every (recording, lane, column)'s run, and the bytes they hold.
#[derive(Default)]
pub(crate) struct JoinedRuns {
    runs: Mutex<IntMap<ListKey, Arc<JoinedRun>>>,
    bytes: AtomicUsize,
}

impl JoinedRuns {
    /// The bytes the runs hold (the cache makes room for them).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, IntMap<ListKey, Arc<JoinedRun>>> {
        // Every update is a few infallible steps: a poisoned lock is still consistent.
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The run of `key` (rows of `row_bytes`), first extended by `extend` when it ends before
    /// row `end`: `extend` gets the run's end row (`None`: no run yet) and the bytes it may add
    /// under `bound`, and pushes the chunks that go on from there. `None` while the run holds
    /// no row.
    pub fn get(
        &self,
        key: ListKey,
        row_bytes: usize,
        end: u64,
        bound: usize,
        extend: impl FnOnce(Option<u64>, usize, &mut JoinedRun),
    ) -> Option<Arc<JoinedRun>> {
        let mut runs = self.lock();
        if let Some(run) = runs.get(&key).filter(|r| r.end_row() >= end) {
            return Some(run.clone());
        }
        let budget = bound.saturating_sub(self.bytes());
        let mut tail = JoinedRun { row_bytes, ..Default::default() };
        extend(runs.get(&key).map(|r| r.end_row()), budget, &mut tail);
        if tail.bytes.is_empty() {
            // Nothing more to join (most lists of large chunks never hold a row).
            return runs.get(&key).cloned();
        }
        self.bytes.fetch_add(tail.bytes.len(), Ordering::Relaxed);
        let run = match runs.get_mut(&key) {
            Some(run) => {
                // In place when no gather holds it (the usual case), else a copy for the
                // gathers after.
                Arc::make_mut(run).append(tail);
                run
            }
            None => runs.entry(key).or_insert(Arc::new(tail)),
        };
        Some(run.clone())
    }

    /// Forgets the rows of the shards `gone` marks (evicted: sampling reads them no more); a
    /// run with such rows past its front is dropped whole.
    pub fn forget_shards(&self, gone: &[bool]) {
        let mut runs = self.lock();
        runs.retain(|_, run| {
            let before = run.bytes.len();
            let kept = Arc::get_mut(run).is_some_and(|r| r.forget(gone)) && !run.bytes.is_empty();
            let after = if kept { run.bytes.len() } else { 0 };
            self.bytes.fetch_sub(before - after, Ordering::Relaxed);
            kept
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::chunks::ChunkRef;

    fn at(shard: usize, first_row: u64, n_rows: u32) -> Located {
        Located { shard, chunk: ChunkRef { first_row, n_rows, ..Default::default() }, record: 0 }
    }

    #[test]
    fn to_join_table() {
        let list = vec![at(0, 0, 4), at(0, 4, 4), at(1, 8, 0), at(1, 8, 4), at(1, 14, 2), at(2, 16, 4)];
        let ends: Vec<u64> = list.iter().map(Located::end_row).collect();
        let all = |_: &Located| true;
        let not_shard_1 = |l: &Located| l.shard != 1;
        // (run end, row bytes, budget, shard 1 joinable) -> chunk indexes joined
        type Case = (Option<u64>, usize, usize, bool, Range<usize>);
        let cases: &[Case] = &[
            // A new run: from the first chunk to the gap at row 12 (the empty chunk passed over).
            (None, 4, usize::MAX, true, 0..4),
            // Extending from each chunk's end.
            (Some(4), 4, usize::MAX, true, 1..4),
            (Some(12), 4, usize::MAX, true, 4..4),
            (Some(16), 4, usize::MAX, true, 5..6),
            (Some(20), 4, usize::MAX, true, 6..6),
            // An end inside a chunk (its rows rewritten into a larger one): joined from there.
            (Some(2), 4, usize::MAX, true, 0..4),
            (Some(15), 4, usize::MAX, true, 4..6),
            // The budget stops it before the chunk that would exceed it (an empty one fits).
            (None, 4, 32, true, 0..3),
            (None, 4, 31, true, 0..1),
            // A chunk that may not be joined (an evicted shard's) ends it (an empty one joins).
            (None, 4, usize::MAX, false, 0..3),
            // Rows too large, or chunks too large, are never joined.
            (None, JOIN_ROW_BYTES + 1, usize::MAX, true, 0..0),
            (None, (JOIN_CHUNK_BYTES / 4) as usize + 1, usize::MAX, true, 0..0),
        ];
        for (end, rb, budget, shard_1, want) in cases.iter().cloned() {
            let got = match shard_1 {
                true => to_join(&list, &ends, end, rb, budget, all),
                false => to_join(&list, &ends, end, rb, budget, not_shard_1),
            };
            assert_eq!(got, want, "end {end:?} row bytes {rb} budget {budget}");
        }
        assert_eq!(to_join(&[], &[], None, 4, usize::MAX, all), 0..0);
        // At most `JOIN_CHUNKS_PER_READ` chunks at a time; the next read goes on from there.
        let many: Vec<Located> = (0..100).map(|i| at(0, i, 1)).collect();
        let ends: Vec<u64> = many.iter().map(Located::end_row).collect();
        let first = to_join(&many, &ends, None, 4, usize::MAX, all);
        assert_eq!(first, 0..JOIN_CHUNKS_PER_READ);
        assert_eq!(to_join(&many, &ends, Some(first.end as u64), 4, usize::MAX, all), first.end..100);
    }

    fn run_of(parts: &[(usize, u64, &[u8])]) -> JoinedRun {
        let mut run = JoinedRun { row_bytes: 2, ..Default::default() };
        for &(shard, first, rows) in parts {
            run.push(shard, first, rows);
        }
        run
    }

    #[test]
    fn a_run_forgets_the_shards_at_its_front_only() {
        let parts: &[(usize, u64, &[u8])] =
            &[(3, 10, &[1, 1, 2, 2]), (3, 12, &[3, 3]), (4, 13, &[4, 4]), (5, 14, &[5, 5])];
        // (shards gone) -> (kept, first row, bytes)
        let cases: &[(&[usize], bool, u64, &[u8])] = &[
            (&[], true, 10, &[1, 1, 2, 2, 3, 3, 4, 4, 5, 5]),
            (&[3], true, 13, &[4, 4, 5, 5]),
            (&[3, 4], true, 14, &[5, 5]),
            (&[3, 4, 5], true, 15, &[]),
            (&[0, 1], true, 10, &[1, 1, 2, 2, 3, 3, 4, 4, 5, 5]),
            // Not at its front: the run is dropped.
            (&[4], false, 10, &[1, 1, 2, 2, 3, 3, 4, 4, 5, 5]),
        ];
        for &(gone_shards, kept, first, bytes) in cases {
            let mut run = run_of(parts);
            assert_eq!((run.first_row, run.end_row()), (10, 15));
            let mut gone = vec![false; 6];
            gone_shards.iter().for_each(|&s| gone[s] = true);
            assert_eq!(run.forget(&gone), kept, "gone {gone_shards:?}");
            assert_eq!((run.first_row, run.bytes.as_slice()), (first, bytes), "gone {gone_shards:?}");
            assert_eq!(run.end_row(), 15);
        }
    }

    #[test]
    fn runs_grow_at_their_end_within_the_bound_and_count_their_bytes() {
        let runs = JoinedRuns::default();
        let key = (0, 1, 2);
        let none = runs.get(key, 2, 5, 100, |start, _, _| assert_eq!(start, None));
        assert!(none.is_none() && runs.bytes() == 0, "a run that joined nothing is not kept");
        let first = runs.get(key, 2, 5, 100, |start, budget, run| {
            assert_eq!((start, budget), (None, 100));
            run.push(7, 3, &[1, 1, 2, 2]);
        });
        assert_eq!(first.as_ref().map(|r| (r.first_row, r.end_row())), Some((3, 5)));
        // Held rows come back without extending.
        let same = runs.get(key, 2, 5, 100, |_, _, _| panic!("extended a run that holds the rows"));
        assert!(Arc::ptr_eq(first.as_ref().unwrap(), same.as_ref().unwrap()));
        // Held by a gather (`first`): the grown run is a copy; the gather's stays as it was.
        let grown = runs.get(key, 2, 6, 100, |start, budget, run| {
            assert_eq!((start, budget), (Some(5), 96));
            run.push(7, 5, &[3, 3]);
        });
        assert_eq!(grown.unwrap().bytes, [1, 1, 2, 2, 3, 3]);
        assert_eq!(first.unwrap().bytes, [1, 1, 2, 2]);
        assert_eq!(runs.bytes(), 6);
        // Forgetting shard 7 empties it: dropped, its bytes given back.
        runs.forget_shards(&[false; 8].map(|_| true));
        assert_eq!(runs.bytes(), 0);
        assert!(runs.get(key, 2, 1, 100, |start, _, _| assert_eq!(start, None)).is_none());
    }
}
