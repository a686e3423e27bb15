//! Which listed episodes a bounded recording's evictions took out of the buffer, and what each
//! shard holds: decided from the listing and the chunk lists (which shard holds which rows),
//! without I/O. An episode is evicted when any of its steps was in a deleted shard: a lane's
//! step rows grow with its shards (first in, first out deletes a recording's oldest shards), so
//! that is when its first step row lies before the end of the lane's rows in deleted shards.
//! `reader::live` keeps the episodes left in the buffer with it.

use std::collections::HashMap;

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
