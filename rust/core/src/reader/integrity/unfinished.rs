//! A shard that must end with its End record and does not: damage `verify` reports. A writer
//! finishes a shard (Index, End) before it starts the next one of its recording, and compacts a
//! shard only once it is finished; so a shard that says it was compacted (`COMPACTED`), or that a
//! later shard of its recording follows, lost its end, and the Episode records there with it:
//! those episodes are not listed at all, and nothing else would say so. (The last shard of a
//! recording may lack its End record: a writer still at work, or one killed, which the
//! recovery path reads as far as it got.)
//!
//! Lost episodes are counted by their ids: a recording numbers its episodes in the order they
//! started, so ids missing from the first that may have ended in this shard were lost (up to
//! the discarded episodes, which are not listed either, and other damage's; see `first_lost`).

use std::collections::{HashMap, HashSet};

use crate::format::header::COMPACTED;
use crate::reader::dataset_view::DatasetView;

/// Why a shard without its End record has lost its end, if it has.
pub fn why_end_lost(finished: bool, compacted: bool, later_shard: Option<u64>) -> Option<String> {
    if finished {
        return None;
    }
    match (compacted, later_shard) {
        (true, _) => Some("it says it was compacted, which a writer does only to a finished shard".into()),
        (false, Some(seq)) => Some(format!(
            "shard {seq} of its recording follows it, which a writer starts only after finishing this one"
        )),
        (false, None) => None,
    }
}

/// How many ids from `from` up to the largest of `ids` are not among them.
pub fn missing_ids(ids: &HashSet<u64>, from: u64) -> u64 {
    let Some(&last) = ids.iter().max() else { return 0 };
    let present = ids.iter().filter(|&&id| id >= from).count() as u64;
    (last + 1).saturating_sub(from).saturating_sub(present)
}

/// The first episode id that may have been lost with the end of shard `seq`, of the episodes
/// `listed` (shard seq, lane, id). A lane's episodes follow each other, so one lost here began
/// after the last listed from its lane in an earlier shard: the smallest of those ids, plus one,
/// over the lanes. (Not above every id listed earlier: an episode may begin before others that
/// end in an earlier shard and still have all its rows after the rollover, its lane's rows not
/// yet written as a chunk then.) With none listed earlier, the first listed from here on.
pub fn first_lost(listed: &[(u64, u32, u64)], seq: u64) -> Option<u64> {
    let mut last_of_lane: HashMap<u32, u64> = HashMap::new();
    for &(_, lane, id) in listed.iter().filter(|&&(q, _, _)| q < seq) {
        let last = last_of_lane.entry(lane).or_insert(id);
        *last = (*last).max(id);
    }
    let earlier = last_of_lane.values().map(|&id| id + 1).min();
    earlier.or_else(|| listed.iter().filter(|&&(q, _, _)| q >= seq).map(|&(_, _, id)| id).min())
}

/// The shards of `ds` that lost their end: (shard index, offset where the file ends, why).
pub(in crate::reader) fn lost_ends(ds: &DatasetView<'_>) -> Vec<(usize, u64, String)> {
    let mut out = Vec::new();
    for (r, recording) in ds.recordings().iter().enumerate() {
        for &s in &recording.shards {
            let shard = &ds.store.shards[s];
            let seq = shard.header.shard_seq;
            let later =
                recording.shards.iter().map(|&o| ds.store.shards[o].header.shard_seq).filter(|&o| o > seq).min();
            let compacted = shard.header.compat_flags & COMPACTED != 0;
            let Some(why) = why_end_lost(shard.finished, compacted, later) else { continue };
            let listed: Vec<(u64, u32, u64)> = ds
                .episodes()
                .iter()
                .filter(|e| e.recording == r)
                .map(|e| (ds.store.shards[e.shard].header.shard_seq, e.summary.lane, e.summary.episode_id))
                .collect();
            let ids: HashSet<u64> = listed.iter().map(|&(_, _, id)| id).collect();
            let lost = first_lost(&listed, seq).map_or(0, |from| missing_ids(&ids, from));
            let end = shard.source.len();
            out.push((
                s,
                end,
                format!(
                    "shard {seq} ends at byte {end} without its End record, though {why}: its last records \
                     were lost, with the Episode records there ({lost} episode(s) of the recording are \
                     missing from the listing)"
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_must_end_when_it_says_so_or_a_later_one_follows() {
        let table = [
            (true, true, Some(3), false),
            (false, false, None, false), // the last shard: a writer at work, or killed
            (false, true, None, true),
            (false, false, Some(3), true),
            (false, true, Some(3), true),
        ];
        for (finished, compacted, later, lost) in table {
            assert_eq!(why_end_lost(finished, compacted, later).is_some(), lost, "{finished} {compacted} {later:?}");
        }
    }

    #[test]
    fn lost_episodes_are_counted_from_the_first_that_may_have_ended_in_the_shard() {
        // (episodes listed: shard seq, lane, id), the shard that lost its end, the first id
        type Case = (&'static [(u64, u32, u64)], u64, Option<u64>);
        let table: [Case; 6] = [
            // lane 2's last episode listed earlier is 6; its next, 8, began before 9 and 10 (lanes
            // 0 and 1, ended in shard 1), yet its rows all came after the rollover: 7 and up count
            (&[(1, 2, 6), (1, 0, 9), (1, 1, 10), (3, 0, 13)], 2, Some(7)),
            // a part running at the rollover (8) is its lane's last: lanes go on at 9 and 8
            (&[(1, 0, 5), (1, 1, 7), (1, 0, 8), (3, 1, 12)], 2, Some(8)),
            // one lane: above its last id listed earlier
            (&[(1, 0, 5), (1, 0, 6), (3, 0, 9)], 2, Some(7)),
            // nothing earlier: the first listed from here on
            (&[(2, 0, 4), (3, 1, 6)], 2, Some(4)),
            (&[], 2, None),
            // episodes of later shards, or of this one, do not count
            (&[(1, 0, 5), (2, 0, 3), (3, 1, 2)], 2, Some(6)),
        ];
        for (listed, seq, want) in table {
            assert_eq!(first_lost(listed, seq), want, "{listed:?}");
        }
    }

    #[test]
    fn lost_episodes_are_the_missing_ids() {
        let ids: HashSet<u64> = [0, 1, 2, 5, 6, 9].into_iter().collect();
        assert_eq!(missing_ids(&ids, 0), 4); // 3, 4, 7, 8
        assert_eq!(missing_ids(&ids, 5), 2); // 7, 8
        assert_eq!(missing_ids(&HashSet::new(), 0), 0);
    }
}
