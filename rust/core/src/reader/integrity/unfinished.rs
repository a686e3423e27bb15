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

use std::collections::HashSet;

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
/// `listed` (shard seq, id, whether the episode goes on past the listed rows). An episode still
/// running when an earlier shard ended has a part there that goes on: the smallest such id. One
/// that began before it may have no rows there at all (its lane's rows still waiting for a
/// chunk at the rollover), so ids above every episode that ended earlier are not enough. With
/// no part that goes on: above every id listed in an earlier shard; with none listed earlier,
/// the first listed from here on.
pub fn first_lost(listed: &[(u64, u64, bool)], seq: u64) -> Option<u64> {
    let earlier = || listed.iter().filter(|&&(q, _, _)| q < seq);
    let running = earlier().filter(|&&(_, _, goes_on)| goes_on).map(|&(_, id, _)| id).min();
    let ended = earlier().map(|&(_, id, _)| id + 1).max();
    running.or(ended).or_else(|| listed.iter().filter(|&&(q, _, _)| q >= seq).map(|&(_, id, _)| id).min())
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
            let listed: Vec<(u64, u64, bool)> = ds
                .episodes()
                .iter()
                .filter(|e| e.recording == r)
                .map(|e| (ds.store.shards[e.shard].header.shard_seq, e.summary.episode_id, e.continues))
                .collect();
            let ids: HashSet<u64> = listed.iter().map(|&(_, id, _)| id).collect();
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
        // (episodes listed: shard seq, id, goes on), the shard that lost its end, the first id
        type Case = (&'static [(u64, u64, bool)], u64, Option<u64>);
        let table: [Case; 6] = [
            // 7 ran at the rollover (its part in shard 1 goes on); 8 began before 9 and 10, which
            // ended in shard 1, yet its rows all came after the rollover: 8 counts
            (&[(1, 6, false), (1, 9, false), (1, 10, false), (1, 7, true), (3, 13, false)], 2, Some(7)),
            // nothing ran at the rollover: above every id that ended earlier
            (&[(1, 5, false), (1, 6, false), (3, 9, false)], 2, Some(7)),
            // nothing earlier: the first listed from here on
            (&[(2, 4, false), (3, 6, false)], 2, Some(4)),
            (&[], 2, None),
            // a part that goes on from a later shard does not count
            (&[(1, 5, false), (3, 2, true)], 2, Some(6)),
            // the shard's own parts do not either
            (&[(1, 5, false), (2, 3, true)], 2, Some(6)),
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
