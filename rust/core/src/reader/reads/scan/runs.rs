//! Bulk reads of runs of consecutive steps (`gather_runs`, under `read_range`: scans and
//! `transitions[a:b]`): an item per run instead of per step, whole chunks, no prefetching.
//!
//! A large read in the file's order is cut by output rows into a few parts per thread (`cuts`),
//! which the threads take in turn, each reading its part from start to end: its runs' places, its plan, its chunks (from
//! the cache, or decoded), its copy and its indexes. On a scan of small rows (CartPole) the plan
//! costs about a third of the copy, so a plan made by one thread before the others copy would
//! leave them idle that long. A part reads in blocks of bounded output, one after the other: the chunks
//! decoded for a block are let go before the next, so a read holds its output, the cache and a
//! block's chunks per thread, not every chunk of the range at once.
//!
//! Large outputs are written with streamed stores (see `stream`).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::reader::catalog::EpisodeLoc;
use crate::reader::dataset_view::DatasetView;
use crate::reader::prefetch;
use crate::reader::reads::gather::{check_outputs, max_threads, parallel_copy_bytes, Field, Out, Run, Work};
use crate::reader::reads::pieces::Item;
use crate::reader::reads::stream::{fence, put_i64s, put_sequence, streams};

/// Where a bulk read puts each step's episode (`episode_index`) and step within it
/// (`step_index`): a little-endian int64 per step in each, memory not initialized yet (a fresh
/// numpy array): every byte gets written.
pub struct IndexOut<'a> {
    pub episodes: &'a mut [MaybeUninit<u8>],
    pub steps: &'a mut [MaybeUninit<u8>],
}

impl IndexOut<'_> {
    /// The same outputs, borrowed for a shorter time.
    pub(in crate::reader) fn reborrow(&mut self) -> IndexOut<'_> {
        IndexOut { episodes: self.episodes, steps: self.steps }
    }

    /// Whether the outputs hold `rows` rows each.
    pub(in crate::reader) fn check(&self, rows: usize) -> Result<()> {
        if [self.episodes.len(), self.steps.len()].iter().any(|&b| Some(b) != rows.checked_mul(8)) {
            return Err(Error::Invalid(format!("the index outputs do not hold {rows} rows")));
        }
        Ok(())
    }

    /// Splits off the first `rows` rows.
    fn split_first(self, rows: usize) -> (Self, Self) {
        let (e, e_rest) = self.episodes.split_at_mut(rows * 8);
        let (s, s_rest) = self.steps.split_at_mut(rows * 8);
        (IndexOut { episodes: e, steps: s }, IndexOut { episodes: e_rest, steps: s_rest })
    }

    /// Writes each step of `windows` (episode, step), in order.
    pub(in crate::reader) fn write_steps(self, windows: impl Iterator<Item = (usize, u64)> + Clone) {
        put_i64s(self.episodes, windows.clone().map(|(e, _)| e as i64));
        put_i64s(self.steps, windows.map(|(_, t)| t as i64));
    }
}

/// Parts of a bulk read per thread that reads it (see `gather_runs`).
const PARTS_PER_THREAD: usize = 4;

/// Output bytes a bulk read fills per block (all its threads together).
static SCAN_BLOCK_BYTES: AtomicUsize = AtomicUsize::new(64 << 20);

/// Sets the output bytes per block of a bulk read (tests use a few rows to cross blocks on
/// small data). Results never depend on it.
#[doc(hidden)]
pub fn set_scan_block_bytes(bytes: usize) {
    SCAN_BLOCK_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// The step after which part `k` of `parts` ends, of `total` steps.
fn part_end(total: u64, k: usize, parts: usize) -> u64 {
    (u128::from(total) * (k as u128 + 1) / parts.max(1) as u128) as u64
}

/// Where `runs` are cut into `parts` parts of consecutive steps, as equal as whole steps allow:
/// part k lies between cut k and cut k + 1, a cut being (a run, its steps before the cut).
/// Only the places: each part's runs are made by its own thread (`runs_between`).
pub(in crate::reader) fn cuts(runs: &[Run], parts: usize) -> Vec<(usize, u64)> {
    let total = runs.iter().map(|r| r.steps).sum();
    let mut cuts = vec![(0, 0)];
    let (mut i, mut at) = (0, 0u64); // the first run not wholly before the cut, its first step
    for k in 0..parts.max(1) - 1 {
        let end = part_end(total, k, parts);
        while i < runs.len() && at + runs[i].steps <= end {
            at += runs[i].steps;
            i += 1;
        }
        cuts.push((i, end - at));
    }
    cuts.push((runs.len(), 0));
    cuts
}

/// The runs between two cuts, those at the cuts cut there (a run of no steps is between the
/// cuts it lies between, to be checked like the others).
pub(in crate::reader) fn runs_between(runs: &[Run], from: (usize, u64), to: (usize, u64)) -> Vec<Run> {
    let mut out = Vec::with_capacity(to.0.saturating_sub(from.0) + 1);
    for (i, run) in runs.iter().enumerate().take(to.0.saturating_add(1)).skip(from.0) {
        if i == to.0 && to.1 == 0 {
            break; // cut at its start: the next part's
        }
        let skip = if i == from.0 { from.1 } else { 0 };
        let end = if i == to.0 { to.1 } else { run.steps };
        if end > skip || run.steps == 0 {
            out.push(Run { start: run.start + skip, steps: end - skip, ..*run });
        }
    }
    out
}

impl DatasetView<'_> {
    /// Copies the steps of `runs` (in the order given) of every field into `outs` (one per
    /// field: as many rows as the runs' steps together), writing every row, and each row's
    /// episode and step into `indexes` when given: a bulk read of whole episodes or long parts
    /// of them, planned per run instead of per step.
    ///
    /// `by_lane`: the runs come lane by lane, each lane's in row order (the file order). Only
    /// then is a large read cut into parts for several threads: they share at most the chunks at
    /// their edges, where parts of runs in step order (the lanes interleaved) would each need
    /// most chunks, decoded once per part when they are not in the cache. Those are planned
    /// once, then fetched and copied on several threads.
    ///
    /// Errors: `OutOfRange` (an episode, a run past its episode's end), `Invalid` (an output of
    /// the wrong size), `Schema`, `Corrupt` (as `gather`).
    pub fn gather_runs(
        &self,
        fields: &[Field],
        runs: &[Run],
        outs: &mut [Out<'_>],
        mut indexes: Option<IndexOut<'_>>,
        by_lane: bool,
    ) -> Result<()> {
        let rows_out = runs
            .iter()
            .try_fold(0usize, |n, r| usize::try_from(r.steps).ok().and_then(|s| n.checked_add(s)))
            .ok_or_else(|| Error::Invalid("the runs hold too many steps".into()))?;
        check_outputs(fields, outs, rows_out)?;
        if let Some(ix) = &indexes {
            ix.check(rows_out)?;
        }
        let field_bytes: usize = fields.iter().map(|f| f.row_bytes.unwrap_or(64)).sum();
        let step_bytes = field_bytes + if indexes.is_some() { 16 } else { 0 };
        let out_bytes = step_bytes.saturating_mul(rows_out);
        let stream = streams(out_bytes);
        let threads = match by_lane {
            true => max_threads().min(out_bytes / parallel_copy_bytes() + 1).min(rows_out.max(1)),
            false => 1,
        };
        // More parts than threads, taken in turn: a thread the OS holds back (a busy machine)
        // delays one small part, not half the read.
        let parts = (threads * PARTS_PER_THREAD).min(rows_out.max(1));
        let block_rows = (SCAN_BLOCK_BYTES.load(Ordering::Relaxed) / threads / field_bytes.max(1)).max(1);
        if threads <= 1 {
            let work = Work { threads: max_threads(), stream };
            return self.read_part(fields, runs, outs, indexes, block_rows, work);
        }
        let mut rest: Vec<Out<'_>> = outs.iter_mut().map(Out::reborrow).collect();
        let cuts = cuts(runs, parts);
        let mut jobs = Vec::with_capacity(parts);
        for (k, ends) in cuts.windows(2).enumerate() {
            let from = if k == 0 { 0 } else { part_end(rows_out as u64, k - 1, parts) };
            let rows = (part_end(rows_out as u64, k, parts) - from) as usize;
            let heads = split_rows(fields, &mut rest, rows);
            let head = indexes.take().map(|ix| {
                let (head, tail) = ix.split_first(rows);
                indexes = Some(tail);
                head
            });
            jobs.push(Mutex::new(Some(((ends[0], ends[1]), heads, head))));
        }
        // The parts are the threads' work: none of them starts more threads.
        let work = Work { threads: 1, stream };
        let (next, results) = (AtomicUsize::new(0), Mutex::new(Vec::with_capacity(parts)));
        let worker = || loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = jobs.get(k).and_then(|j| j.lock().unwrap_or_else(|p| p.into_inner()).take()) else {
                break;
            };
            let ((from, to), mut outs, ix) = job;
            let read = self.read_part(fields, &runs_between(runs, from, to), &mut outs, ix, block_rows, work);
            results.lock().unwrap_or_else(|p| p.into_inner()).push((k, read));
        };
        std::thread::scope(|s| {
            let handles: Vec<_> = (1..threads).map(|_| s.spawn(worker)).collect();
            worker();
            handles.into_iter().for_each(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        });
        // The first error in the order of the rows, as one thread reading them would find.
        let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        results.sort_unstable_by_key(|&(k, _)| k);
        results.into_iter().try_for_each(|(_, read)| read)
    }

    /// One thread's part of `gather_runs`, in blocks of `block_rows` output rows.
    fn read_part(
        &self,
        fields: &[Field],
        runs: &[Run],
        outs: &mut [Out<'_>],
        indexes: Option<IndexOut<'_>>,
        block_rows: usize,
        work: Work,
    ) -> Result<()> {
        let mut items = Vec::with_capacity(runs.len());
        let mut rows_out = 0usize;
        for (k, run) in runs.iter().enumerate() {
            // Episodes come in any order (a lane's in file order): ask for one some runs ahead,
            // so its cache miss overlaps the work on this one and those between.
            if let Some(e) = runs.get(k + 16).and_then(|r| self.catalog.locs.get(r.episode)) {
                prefetch((e as *const EpisodeLoc).cast());
            }
            let e = self.catalog.loc(run.episode)?;
            if run.start.checked_add(run.steps).is_none_or(|end| end > e.length) {
                return Err(Error::OutOfRange(format!(
                    "steps {}..{} are out of range: episode {} has {} steps",
                    run.start,
                    run.start.saturating_add(run.steps),
                    run.episode,
                    e.length
                )));
            }
            if run.steps == 0 {
                continue;
            }
            items.push(Item {
                recording: e.recording as usize,
                lane: e.lane,
                obs_row: e.obs_first_row + run.start,
                step_row: e.step_first_row + run.start,
                rows: run.steps,
                pad: 0,
                out_row: rows_out,
            });
            // The runs' steps were added up without overflow in `gather_runs`.
            rows_out += run.steps as usize;
        }
        let mut rest: Vec<Out<'_>> = outs.iter_mut().map(Out::reborrow).collect();
        let (mut next, mut done) = (items.into_iter().peekable(), 0usize);
        while done < rows_out {
            let rows = block_rows.min(rows_out - done);
            let mut block = Vec::new();
            while let Some(item) = next.peek_mut().filter(|i| i.out_row < done + rows) {
                let take = (item.rows as usize).min(done + rows - item.out_row);
                block.push(Item { rows: take as u64, out_row: item.out_row - done, ..*item });
                if take < item.rows as usize {
                    let k = take as u64;
                    *item = Item {
                        obs_row: item.obs_row + k,
                        step_row: item.step_row + k,
                        rows: item.rows - k,
                        out_row: item.out_row + take,
                        ..*item
                    };
                    break;
                }
                next.next();
            }
            let mut heads = split_rows(fields, &mut rest, rows);
            block.sort_unstable_by_key(|i| (i.recording, i.lane, i.step_row));
            // Whole chunks: the next block reads on where this one stops.
            self.gather_items(fields, &block, rows, &mut heads, false, work)?;
            done += rows;
        }
        if let Some(ix) = indexes {
            write_runs(runs, ix, work.stream);
        }
        Ok(())
    }
}

/// Splits the first `rows` rows off each field's output (`rest` keeps the others).
fn split_rows<'a>(fields: &[Field], rest: &mut Vec<Out<'a>>, rows: usize) -> Vec<Out<'a>> {
    let mut heads = Vec::with_capacity(rest.len());
    for (field, out) in fields.iter().zip(std::mem::take(rest)) {
        let (head, tail) = out.split_first(rows * field.row_bytes.unwrap_or(1));
        heads.push(head);
        rest.push(tail);
    }
    heads
}

/// The runs' indexes, a run at a time: a repeated episode and counting steps.
fn write_runs(runs: &[Run], out: IndexOut<'_>, stream: bool) {
    let mut rest = out;
    for r in runs {
        let (mine, tail) = rest.split_first(r.steps as usize);
        rest = tail;
        put_sequence(mine.episodes, r.episode as i64, 0, stream);
        put_sequence(mine.steps, r.start as i64, 1, stream);
    }
    if stream {
        fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// (episode, step) of every step of `runs`, in order.
    fn steps_of<'a>(runs: impl IntoIterator<Item = &'a Run>) -> Vec<(usize, u64)> {
        runs.into_iter().flat_map(|r| (r.start..r.start + r.steps).map(move |t| (r.episode, t))).collect()
    }

    /// The runs of each part.
    fn split_runs(runs: &[Run], parts: usize) -> Vec<Vec<Run>> {
        cuts(runs, parts).windows(2).map(|c| runs_between(runs, c[0], c[1])).collect()
    }

    #[test]
    fn a_run_is_cut_where_a_part_ends() {
        let run = |episode, start, steps| Run { episode, start, steps };
        let parts = split_runs(&[run(4, 0, 3), run(2, 5, 5)], 2);
        assert_eq!(parts, vec![vec![run(4, 0, 3), run(2, 5, 1)], vec![run(2, 6, 4)]]);
        assert_eq!(
            split_runs(&[run(4, 0, 3), run(7, 1, 0), run(2, 0, 3)], 2),
            vec![vec![run(4, 0, 3), run(7, 1, 0)], vec![run(2, 0, 3)]]
        );
        assert_eq!(split_runs(&[], 3), vec![vec![], vec![], vec![]]);
        assert_eq!(split_runs(&[run(1, 0, 1)], 2), vec![vec![], vec![run(1, 0, 1)]]);
    }

    proptest! {
        /// The parts hold the runs' steps in order, each once, their sizes differing by at
        /// most one step, with the rows `gather_runs` gives them.
        #[test]
        fn parts_hold_every_step_once_in_order(
            runs in prop::collection::vec((0usize..50, 0u64..5, 0u64..9), 0..30),
            parts in 1usize..6,
        ) {
            let runs: Vec<Run> = runs.into_iter().map(|(episode, start, steps)| Run { episode, start, steps }).collect();
            let split = split_runs(&runs, parts);
            prop_assert_eq!(split.len(), parts);
            prop_assert_eq!(steps_of(split.iter().flatten()), steps_of(&runs));
            // Runs of no steps once each, in order.
            let empty = |runs: Vec<&Run>| runs.into_iter().filter(|r| r.steps == 0).copied().collect::<Vec<_>>();
            prop_assert_eq!(empty(split.iter().flatten().collect()), empty(runs.iter().collect()));
            let sizes: Vec<u64> = split.iter().map(|p| p.iter().map(|r| r.steps).sum()).collect();
            prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            let total: u64 = sizes.iter().sum();
            for (k, size) in sizes.iter().enumerate() {
                let from = if k == 0 { 0 } else { part_end(total, k - 1, parts) };
                prop_assert_eq!(*size, part_end(total, k, parts) - from);
            }
        }
    }
}
