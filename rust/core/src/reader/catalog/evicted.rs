//! Which listed episodes a bounded recording's evictions took out of the buffer, and what each
//! shard holds: decided from the listing and the chunk lists (which shard holds which rows),
//! without I/O. An episode is evicted when any of its steps was in a deleted shard: a lane's
//! step rows grow with its shards (first in, first out deletes a recording's oldest shards), so
//! that is when its first step row lies before the end of the lane's rows in deleted shards.
//! `reader::live` keeps the episodes left in the buffer with it.

use std::collections::HashMap;

use super::chunk_list::{ChunkList, Located};
use crate::format::chunks::ChunkRef;

/// The data offset of a merged entry over a released shard's chunks (see `merged_runs`).
const RELEASED: u64 = u64::MAX;
use super::Catalog;

/// An episode as this decision sees it: (recording, lane, first step row, shard of its record).
pub(crate) type EpisodeAt = (usize, u32, u64, usize);

/// What bounded recordings deleted, as the decision needs it: which shards (`shards[shard]`),
/// and per (recording, lane) the end of that lane's step rows in deleted shards.
#[derive(Debug, Default)]
pub(crate) struct Gone {
    pub shards: Vec<bool>,
    pub ends: HashMap<(usize, u32), u64>,
}

impl Gone {
    /// Whether the episode has a step in a deleted shard: its record is in one, or its first
    /// step row is before the end of its lane's rows in deleted shards.
    pub fn holds(&self, (recording, lane, first, shard): EpisodeAt) -> bool {
        self.shards.get(shard).copied().unwrap_or(false)
            || self.ends.get(&(recording, lane)).is_some_and(|&end| first < end)
    }
}

impl Catalog {
    /// The reward column's chunks (one row per step) of every (recording, lane): (shard, end row).
    fn step_chunks(&self) -> impl Iterator<Item = ((usize, u32), usize, u64, u64)> + '_ {
        self.chunk_lists
            .iter()
            .filter(|((recording, _, column), _)| self.column_id(*recording, "reward") == Some(*column))
            .flat_map(|(&(recording, lane, _), list)| {
                list.chunks.iter().map(move |c| ((recording, lane), c.shard, c.end_row(), c.chunk.n_rows as u64))
            })
    }

    /// What the shards `shards` marks deleted held (see `Gone`).
    pub fn gone(&self, shards: Vec<bool>) -> Gone {
        let mut ends: HashMap<(usize, u32), u64> = HashMap::new();
        if shards.iter().any(|&g| g) {
            for (key, shard, end, _) in self.step_chunks() {
                if shards.get(shard).copied().unwrap_or(false) {
                    let slot = ends.entry(key).or_default();
                    *slot = (*slot).max(end);
                }
            }
        }
        Gone { shards, ends }
    }

    /// Whether listed episode `i` has a step in a deleted shard.
    pub fn evicted_by(&self, gone: &Gone, i: usize) -> bool {
        let e = &self.episodes[i];
        gone.holds((e.recording, e.summary.lane, e.summary.step_first_row, e.shard))
    }

    /// The shards listed episode `episode` may have rows in: those of its recording from its
    /// first shard (`first_shard_seq`) to the one holding its record.
    ///
    /// Errors: `OutOfRange`.
    pub fn episode_shards(&self, episode: usize) -> crate::error::Result<Vec<usize>> {
        let e = self.episode(episode)?;
        let last = self.shards[e.shard].seq;
        let first = e.summary.first_shard_seq.min(last);
        Ok(self.states[e.recording].seqs.range(first..=last).map(|(_, &s)| s).collect())
    }

    /// Forgets where the chunks of the shards `released` marks are (the store let go of them:
    /// `Store::release_unpinned`): each run of a list's chunks in such shards becomes one entry
    /// over the same rows, in the first of them, so the eviction decisions (`gone`: every shard
    /// of the run is gone) stay as they were, and a read of those rows fails naming the eviction
    /// instead of reading zeros where no chunk is. A bounded recording deletes its oldest shards
    /// first, so each list keeps one such entry: what a reader keeps per chunk stays bounded by
    /// what the capacity keeps. (`shard_steps` then counts a run's steps in its first shard.)
    /// `now`: the shards let go of since the last call; `released`: all of them so far.
    pub fn release_shards(&mut self, now: &[bool], released: &[bool]) {
        if !now.iter().any(|&r| r) {
            return;
        }
        for list in self.chunk_lists.values_mut() {
            if list.chunks.iter().any(|c| now.get(c.shard).copied().unwrap_or(false)) {
                *list = merged_runs(&list.chunks, released);
            }
        }
    }

    /// Per shard (in registration order): its recording and the step rows its chunks hold.
    pub fn shard_steps(&self) -> Vec<(usize, u64)> {
        let mut steps: Vec<(usize, u64)> = self.shard_recording.iter().map(|&r| (r, 0)).collect();
        for (_, shard, _, rows) in self.step_chunks() {
            if let Some(slot) = steps.get_mut(shard) {
                slot.1 += rows;
            }
        }
        steps
    }
}

/// `chunks` with each run of consecutive chunks of `released` shards merged into one entry over
/// their rows (kept apart where the rows would not fit one entry).
fn merged_runs(chunks: &[Located], released: &[bool]) -> ChunkList {
    let mut out: Vec<Located> = Vec::with_capacity(chunks.len());
    for c in chunks {
        let is_released = |shard: usize| released.get(shard).copied().unwrap_or(false);
        let merge = is_released(c.shard)
            && out.last().is_some_and(|last| is_released(last.shard) && last.end_row() == c.first_row());
        let rows = out.last().map_or(0, |last| last.chunk.n_rows as u64) + c.chunk.n_rows as u64;
        match out.last_mut() {
            Some(last) if merge && rows <= u32::MAX as u64 => {
                last.chunk.n_rows = rows as u32;
                last.chunk.raw_len = last.chunk.raw_len.saturating_add(c.chunk.raw_len);
                last.chunk.stored_len = last.chunk.stored_len.saturating_add(c.chunk.stored_len);
            }
            _ if is_released(c.shard) => {
                // At no offset a chunk has, so no cache (this process's or the shared one) holds
                // it, and never empty (an empty chunk is decoded without reading): a read of it
                // goes to the shard, which fails naming the eviction.
                let chunk = ChunkRef { data_offset: RELEASED, stored_len: c.chunk.stored_len.max(1), ..c.chunk };
                out.push(Located { chunk, ..*c });
            }
            _ => out.push(*c),
        }
    }
    out.shrink_to_fit();
    let ends = out.iter().map(Located::end_row).collect();
    ChunkList { chunks: out, ends }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_chunks_merge_per_run() {
        let at = |shard: usize, first_row: u64, n_rows: u32| Located {
            shard,
            chunk: ChunkRef { first_row, n_rows, raw_len: n_rows as u64 * 4, stored_len: 3, ..Default::default() },
            record: 0,
        };
        let rows = |l: &ChunkList| l.chunks.iter().map(|c| (c.shard, c.first_row(), c.end_row())).collect::<Vec<_>>();
        // (chunks, released shards) -> (shard, first row, end row) of each entry
        type Case = (Vec<Located>, Vec<bool>, Vec<(usize, u64, u64)>);
        let cases: Vec<Case> = vec![
            // Shard 0 let go of: its three chunks become one; shard 1's stay.
            (
                vec![at(0, 0, 4), at(0, 4, 4), at(0, 8, 2), at(1, 10, 5), at(1, 15, 5)],
                vec![true, false],
                vec![(0, 0, 10), (1, 10, 15), (1, 15, 20)],
            ),
            // A gap in the shard's rows (a masked column) keeps the runs apart.
            (vec![at(0, 0, 4), at(0, 6, 2), at(1, 8, 5)], vec![true, false], vec![(0, 0, 4), (0, 6, 8), (1, 8, 13)]),
            // Nothing let go of: as it was.
            (vec![at(0, 0, 4), at(0, 4, 4)], vec![false], vec![(0, 0, 4), (0, 4, 8)]),
            // Two shards let go of: one entry for both (in the first), the kept one's apart.
            (
                vec![at(0, 0, 4), at(0, 4, 4), at(1, 8, 1), at(1, 9, 1), at(2, 10, 3)],
                vec![true, true, false],
                vec![(0, 0, 10), (2, 10, 13)],
            ),
            // Let go of later, the entry made before grows.
            (
                vec![at(0, 0, 10), at(2, 10, 3), at(3, 13, 3)],
                vec![true, false, true, false],
                vec![(0, 0, 13), (3, 13, 16)],
            ),
        ];
        for (chunks, released, want) in cases {
            let list = merged_runs(&chunks, &released);
            assert_eq!(rows(&list), want, "released {released:?}");
            assert_eq!(list.ends, want.iter().map(|w| w.2).collect::<Vec<_>>());
        }
        // The merged entry's sizes add up (a read of it fails before they are used), at an
        // offset no cached chunk has.
        let list = merged_runs(&[at(0, 0, 4), at(0, 4, 4)], &[true]);
        assert_eq!((list.chunks[0].chunk.raw_len, list.chunks[0].chunk.stored_len), (32, 6));
        assert_eq!(list.chunks[0].chunk.data_offset, RELEASED);
        assert_eq!(merged_runs(&[at(0, 0, 4), at(1, 4, 4)], &[false, false]).chunks[0].chunk.data_offset, 0);
    }

    #[test]
    fn evicted_table() {
        // Recording 0, lanes 0 and 1; shard 0 deleted, which held lane 0's step rows to 10 and
        // lane 1's to 4. Recording 1 lost nothing.
        let gone = Gone { shards: vec![true, false, false], ends: [((0, 0), 10), ((0, 1), 4)].into() };
        let cases: &[(&str, EpisodeAt, bool)] = &[
            ("record in the deleted shard", (0, 0, 0, 0), true),
            ("began in the deleted shard, ended later", (0, 0, 7, 1), true),
            ("the part after the deleted shard", (0, 0, 10, 1), false),
            ("another lane, after its deleted rows", (0, 1, 4, 1), false),
            ("another lane, in its deleted rows", (0, 1, 3, 2), true),
            ("another recording", (1, 0, 0, 2), false),
        ];
        for (name, at, want) in cases {
            assert_eq!(gone.holds(*at), *want, "{name}");
        }
        let nothing = Gone { shards: vec![false; 3], ends: HashMap::new() };
        assert!(cases.iter().all(|(_, at, _)| !nothing.holds(*at)));
    }
}
