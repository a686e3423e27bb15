//! Which listed episodes a bounded recording's evictions took out of the buffer, and what each
//! shard holds: decided from the listing and the chunk lists (which shard holds which rows),
//! without I/O. An episode is evicted when any of its steps was in a deleted shard: a lane's
//! step rows grow with its shards (first in, first out deletes a recording's oldest shards), so
//! that is when its first step row lies before the end of the lane's rows in deleted shards.

use std::collections::HashMap;

use super::Catalog;

/// An episode as this decision sees it: (recording, lane, first step row, shard of its record).
pub(crate) type EpisodeAt = (usize, u32, u64, usize);

/// The episodes (indexes into `episodes`) with a step in a deleted shard: their record is in
/// one (`gone[shard]`), or their first step row is before `gone_end[(recording, lane)]`, the end
/// of that lane's step rows in deleted shards.
pub(crate) fn evicted(episodes: &[EpisodeAt], gone: &[bool], gone_end: &HashMap<(usize, u32), u64>) -> Vec<usize> {
    episodes
        .iter()
        .enumerate()
        .filter(|(_, &(recording, lane, first, shard))| {
            gone.get(shard).copied().unwrap_or(false)
                || gone_end.get(&(recording, lane)).is_some_and(|&end| first < end)
        })
        .map(|(i, _)| i)
        .collect()
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

    /// The episodes with a step in the shards `gone` marks (see `evicted`), ascending.
    pub fn episodes_in_shards(&self, gone: &[bool]) -> Vec<usize> {
        if !gone.iter().any(|&g| g) {
            return Vec::new();
        }
        let mut gone_end: HashMap<(usize, u32), u64> = HashMap::new();
        for (key, shard, end, _) in self.step_chunks() {
            if gone.get(shard).copied().unwrap_or(false) {
                let slot = gone_end.entry(key).or_default();
                *slot = (*slot).max(end);
            }
        }
        let at: Vec<EpisodeAt> =
            self.episodes.iter().map(|e| (e.recording, e.summary.lane, e.summary.step_first_row, e.shard)).collect();
        evicted(&at, gone, &gone_end)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicted_table() {
        // Recording 0, lanes 0 and 1; shard 0 deleted, which held lane 0's step rows to 10 and
        // lane 1's to 4. Recording 1 lost nothing.
        let gone = [true, false, false];
        let gone_end: HashMap<(usize, u32), u64> = [((0, 0), 10), ((0, 1), 4)].into();
        let cases: &[(&str, EpisodeAt, bool)] = &[
            ("record in the deleted shard", (0, 0, 0, 0), true),
            ("began in the deleted shard, ended later", (0, 0, 7, 1), true),
            ("the part after the deleted shard", (0, 0, 10, 1), false),
            ("another lane, after its deleted rows", (0, 1, 4, 1), false),
            ("another lane, in its deleted rows", (0, 1, 3, 2), true),
            ("another recording", (1, 0, 0, 2), false),
        ];
        let episodes: Vec<EpisodeAt> = cases.iter().map(|c| c.1).collect();
        let got = evicted(&episodes, &gone, &gone_end);
        for (i, (name, _, want)) in cases.iter().enumerate() {
            assert_eq!(got.contains(&i), *want, "{name}");
        }
        assert!(evicted(&episodes, &[false; 3], &HashMap::new()).is_empty());
    }
}
