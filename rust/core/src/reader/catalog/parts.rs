//! Which listings the Episode records of one episode give: the join of the parts an episode
//! ran over a shard rollover in (see `format::episode`), and where a refresh puts them.
//!
//! One rule for an open and for every refresh, so that a dataset refreshed while a recorder
//! rolls over shards lists what a fresh open of the same files lists:
//! - with every shard from the episode's first one to the one holding its latest record
//!   present, the episode is listed once, from that latest record (the whole episode so far);
//! - otherwise its records (the latest of each shard) fall into runs over consecutive shards,
//!   all present, and each run is listed once: the rows of its shards, from the first one's
//!   piece to the last one's end, marked continued where the run starts after the episode's
//!   first shard. A bounded recording that deleted an episode's first shards leaves one run: the
//!   episode is listed once, as the part the surviving shards hold;
//! - a listing without a step is not made (a part's holds nothing but a repeated row).
//!
//! A refresh lists an episode again when a later record of it arrives (its end, after a
//! rollover), or an earlier one (a shard of a store prefix listed after the one that follows
//! it, which a reader that lists mid-upload may find). It lays the new listings over the ones it made before, in order, so an episode
//! keeps its index (it grows: the whole episode's first steps are the part's steps) and
//! listings handed out before stay valid; listings beyond the old ones are appended.
//!
//! Nothing here does I/O: table tests cover the cases.

use crate::format::episode::{EpisodeSummary, FLAG_COMPLETE};

/// One Episode record of an episode, as far as the join needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    /// The `shard_seq` of the shard holding the record.
    pub seq: u64,
    /// The `shard_seq` of the shard holding the episode's first rows.
    pub first_shard_seq: u64,
    /// Steps of the episode from its start to the part's end.
    pub length: u64,
    /// Steps of the part in its own shard.
    pub piece_length: u64,
}

/// One listing: the rows of `parts[from..=part]`, from `parts[from]`'s piece (or, with `from`
/// in the episode's first shard, from the episode's start) to `parts[part]`'s end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    pub part: usize,
    pub from: usize,
    /// The episode began in a shard before `parts[from]`'s (its earlier rows are not listed here).
    pub continued: bool,
    /// The first shard whose rows the listing reads (damage from there on may have hit it).
    pub from_seq: u64,
}

/// The listings of an episode's records, `parts` sorted by `seq` (at least one), into `out`
/// (cleared first: an open lists thousands of episodes, one buffer serves them all).
/// `all_present(from, to)`: whether every shard `from..=to` of the recording is present.
pub(crate) fn views(parts: &[Part], all_present: impl Fn(u64, u64) -> bool, out: &mut Vec<View>) {
    out.clear();
    let Some((last_at, last)) = parts.iter().enumerate().next_back() else { return };
    if all_present(last.first_shard_seq, last.seq) {
        if last.length > 0 {
            out.push(View { part: last_at, from: last_at, continued: false, from_seq: last.first_shard_seq });
        }
        return;
    }
    // A flush's progress parts: the latest of a shard holds what the earlier ones did.
    let latest: Vec<usize> =
        (0..parts.len()).filter(|&i| parts.get(i + 1).is_none_or(|next| next.seq != parts[i].seq)).collect();
    let mut start = 0;
    for k in 0..latest.len() {
        let (p, next) = (&parts[latest[k]], latest.get(k + 1).map(|&n| &parts[n]));
        if next.is_some_and(|n| n.seq == p.seq + 1 && all_present(p.seq, n.seq)) {
            continue; // the run goes on
        }
        let (from, part) = (latest[start], latest[k]);
        let first = &parts[from];
        let continued = first.seq > first.first_shard_seq;
        let steps = p.length.saturating_sub(first.length.saturating_sub(first.piece_length));
        if steps > 0 {
            let from_seq = if continued { first.seq } else { first.first_shard_seq };
            out.push(View { part, from, continued, from_seq });
        }
        start = k + 1;
    }
}

/// The summary of `view`'s listing, from `parts` and their records' summaries (`summary(i)`:
/// that of `parts[i]`, as `views` was given them): the latest record's as it is when the listing
/// starts with the episode, else its rows from the first record's piece on, with the return of
/// those steps (the pieces' returns, summed in shard order). Never `complete` then: a part.
pub(crate) fn listing<'a>(
    parts: &[Part],
    summary: impl Fn(usize) -> &'a EpisodeSummary,
    view: &View,
) -> EpisodeSummary {
    let last = summary(view.part);
    if !view.continued {
        return last.clone();
    }
    let first = summary(view.from);
    let latest_of_shard = |i: usize| parts.get(i + 1).is_none_or(|next| next.seq != parts[i].seq);
    let episode_return = (view.from..=view.part).filter(|&i| latest_of_shard(i)).map(|i| summary(i).piece_return).sum();
    EpisodeSummary {
        flags: last.flags & !FLAG_COMPLETE,
        obs_first_row: first.piece_obs_first_row,
        step_first_row: first.piece_step_first_row,
        length: last.length.saturating_sub(first.piece_step_first_row.saturating_sub(last.step_first_row)),
        episode_return,
        ..last.clone()
    }
}

/// Where a refresh puts an episode's listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// In place of an earlier listing of the episode (at this index).
    At(usize),
    /// After every listing.
    Append,
}

/// Places the `i`-th new listing of an episode listed before at `listed` (dataset indexes, in
/// order): over the old ones in order, the rest appended. Old listings left over (fewer listings
/// now: a shard that was missing between two parts appeared) keep what they list.
pub(crate) fn place(listed: &[usize], i: usize) -> Place {
    listed.get(i).map_or(Place::Append, |&at| Place::At(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `super::views`, into a new Vec.
    fn views(parts: &[Part], all_present: impl Fn(u64, u64) -> bool) -> Vec<View> {
        let mut out = vec![View { part: 9, from: 9, continued: true, from_seq: 9 }]; // cleared
        super::views(parts, all_present, &mut out);
        out
    }

    /// `super::listing` of records given as a slice.
    fn listing(parts: &[Part], summaries: &[&EpisodeSummary], view: &View) -> EpisodeSummary {
        super::listing(parts, |i| summaries[i], view)
    }

    /// Where `new` listings go, by `place`.
    fn places(listed: &[usize], new: usize) -> Vec<Place> {
        (0..new).map(|i| place(listed, i)).collect()
    }

    /// A part whose pieces before it held 10 steps in all (when it is not the first).
    fn part(seq: u64, first_shard_seq: u64, piece_length: u64) -> Part {
        let before = if seq > first_shard_seq { 10 } else { 0 };
        Part { seq, first_shard_seq, length: before + piece_length, piece_length }
    }

    fn whole(part: usize, from_seq: u64) -> View {
        View { part, from: part, continued: false, from_seq }
    }

    fn piece(part: usize, continued: bool, from_seq: u64) -> View {
        View { part, from: part, continued, from_seq }
    }

    /// The parts `from..=part`, over consecutive shards, the first after the episode's first.
    fn run(from: usize, part: usize, from_seq: u64) -> View {
        View { part, from, continued: true, from_seq }
    }

    #[test]
    fn views_join_parts_when_their_shards_are_present() {
        // (present shard seqs, parts) -> views
        let cases: Vec<(&[u64], Vec<Part>, Vec<View>)> = vec![
            // An episode in one shard.
            (&[0], vec![part(0, 0, 5)], vec![whole(0, 0)]),
            // Its part at a rollover, before the next shard holds its end: the episode so far.
            (&[0, 1], vec![part(0, 0, 5)], vec![whole(0, 0)]),
            // Then its end: one listing, from the latest record.
            (&[0, 1], vec![part(0, 0, 5), part(1, 0, 3)], vec![whole(1, 0)]),
            // Over three shards.
            (&[3, 4, 5], vec![part(3, 3, 2), part(4, 3, 9), part(5, 3, 1)], vec![whole(2, 3)]),
            // The first shard pruned: the piece the dataset holds, marked continued.
            (&[1], vec![part(1, 0, 3)], vec![piece(0, true, 1)]),
            // The first shards deleted (a bounded recording): one listing of what the others
            // hold, continued, however many shards it spans.
            (&[1, 2], vec![part(1, 0, 3), part(2, 0, 4)], vec![run(0, 1, 1)]),
            (&[1, 2, 3], vec![part(1, 0, 3), part(2, 0, 4), part(3, 0, 2)], vec![run(0, 2, 1)]),
            (&[1, 2], vec![part(1, 0, 2), part(1, 0, 3), part(2, 0, 4)], vec![run(1, 2, 1)]),
            (&[2, 3], vec![part(2, 0, 5), part(3, 0, 1)], vec![run(0, 1, 2)]),
            // Runs on either side of a missing shard: one listing each.
            (
                &[0, 1, 3],
                vec![part(0, 0, 4), part(1, 0, 3), part(3, 0, 2)],
                vec![View { part: 1, from: 0, continued: false, from_seq: 0 }, piece(2, true, 3)],
            ),
            (
                &[1, 2, 4, 5],
                vec![part(1, 0, 1), part(2, 0, 1), part(4, 0, 1), part(5, 0, 1)],
                vec![run(0, 1, 1), run(2, 3, 4)],
            ),
            // A shard missing between two: each piece on its own.
            (&[0, 2], vec![part(0, 0, 4), part(2, 0, 6)], vec![piece(0, false, 0), piece(1, true, 2)]),
            // Progress parts written by flushes: only the latest of a shard counts.
            (&[1], vec![part(1, 0, 2), part(1, 0, 5), part(1, 0, 9)], vec![piece(2, true, 1)]),
            (&[0, 1], vec![part(0, 0, 2), part(0, 0, 4)], vec![whole(1, 0)]),
            (&[0, 2], vec![part(0, 0, 2), part(0, 0, 4), part(2, 0, 6)], vec![piece(1, false, 0), piece(2, true, 2)]),
            // A piece without a step (a repeated row) is not listed.
            (&[0, 2], vec![part(0, 0, 4), part(2, 0, 0)], vec![piece(0, false, 0)]),
            (&[2], vec![part(2, 1, 0)], vec![]),
            // An episode without a step is not listed.
            (&[0], vec![part(0, 0, 0)], vec![]),
        ];
        for (present, parts, expected) in cases {
            let all_present = |from: u64, to: u64| (from..=to).all(|s| present.contains(&s));
            assert_eq!(views(&parts, all_present), expected, "present {present:?}, parts {parts:?}");
        }
        assert_eq!(views(&[], |_, _| true), vec![]);
    }

    #[test]
    fn a_run_lists_its_rows_and_their_return() {
        use crate::format::episode::FLAG_CONTINUES;
        // An episode of 30 steps over shards 0, 1, 2 (10 each, rewards 1 per step), step rows
        // from 100 and observation rows from 200 in its lane; shard 0 is gone.
        let record = |seq: u64, end: u64, flags: u32| EpisodeSummary {
            flags,
            step_first_row: 100,
            obs_first_row: 200,
            length: end,
            episode_return: end as f64,
            piece_step_first_row: 100 + seq * 10,
            piece_obs_first_row: 200 + seq * 10,
            piece_return: 10.0,
            first_shard_seq: 0,
            ..Default::default()
        };
        let (at_1, progress_2, end_2) =
            (record(1, 20, FLAG_CONTINUES), record(2, 25, FLAG_CONTINUES), record(2, 30, FLAG_COMPLETE));
        let summaries = [&at_1, &progress_2, &end_2];
        let parts: Vec<Part> = [(1, &at_1), (2, &progress_2), (2, &end_2)]
            .iter()
            .map(|&(seq, s)| Part { seq, first_shard_seq: 0, length: s.length, piece_length: s.piece_length() })
            .collect();
        let survived = views(&parts, |from, to| from >= 1 && to <= 2);
        assert_eq!(survived, vec![run(0, 2, 1)]);
        let listed = listing(&parts, &summaries, &survived[0]);
        assert_eq!((listed.step_first_row, listed.obs_first_row, listed.length), (110, 210, 20));
        assert_eq!(listed.episode_return, 20.0); // shard 1's 10 and shard 2's latest 10
        assert!(!listed.complete() && listed.flags & FLAG_CONTINUES == 0);
        // With every shard: the latest record, as it is.
        let all = views(&parts, |_, _| true);
        assert_eq!(listing(&parts, &summaries, &all[0]), end_2);
    }

    #[test]
    fn places_lay_new_listings_over_old_ones() {
        // (listed at, new listings) -> places
        let cases: Vec<(&[usize], usize, Vec<Place>)> = vec![
            // Never listed (new, or left out before).
            (&[], 1, vec![Place::Append]),
            (&[], 2, vec![Place::Append, Place::Append]),
            // A part listed whole, now its end: the same index.
            (&[7], 1, vec![Place::At(7)]),
            // A piece listed, now a second piece (a shard missing between them).
            (&[7], 2, vec![Place::At(7), Place::Append]),
            // Two pieces listed, now one whole listing: the second keeps what it listed.
            (&[3, 9], 1, vec![Place::At(3)]),
            // Nothing to list any more (a piece without a step).
            (&[3], 0, vec![]),
        ];
        for (listed, new, expected) in cases {
            assert_eq!(places(listed, new), expected, "listed {listed:?}, {new} new");
        }
    }
}
