//! Which listings the Episode records of one episode give: the join of the parts an episode
//! ran over a shard rollover in (see `format::episode`), and where a refresh puts them.
//!
//! One rule for an open and for every refresh, so that a dataset refreshed while a recorder
//! rolls over shards lists what a fresh open of the same files lists:
//! - with every shard from the episode's first one to the one holding its latest record
//!   present, the episode is listed once, from that latest record (the whole episode so far);
//! - otherwise each record's part is listed on its own (rows in its shard only);
//! - a listing without a step is not made (a part's holds nothing but a repeated row).
//!
//! A refresh lists an episode again when a later record of it arrives (its end, after a
//! rollover). It lays the new listings over the ones it made before, in order, so an episode
//! keeps its index (it grows: the whole episode's first steps are the part's steps) and
//! listings handed out before stay valid; listings beyond the old ones are appended.
//!
//! Nothing here does I/O: table tests cover the cases.

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

/// One listing: of `parts[part]`, the whole episode up to it or only its piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    pub part: usize,
    pub piece: bool,
    /// The episode began in a shard before this part's (its earlier rows are not listed here).
    pub continued: bool,
    /// The first shard whose rows the listing reads (damage from there on may have hit it).
    pub from_seq: u64,
}

/// The listings of an episode's records, `parts` sorted by `seq` (at least one).
/// `all_present(from, to)`: whether every shard `from..=to` of the recording is present.
pub(crate) fn views(parts: &[Part], all_present: impl Fn(u64, u64) -> bool) -> Vec<View> {
    let Some((last_at, last)) = parts.iter().enumerate().next_back() else { return Vec::new() };
    if all_present(last.first_shard_seq, last.seq) {
        let whole = View { part: last_at, piece: false, continued: false, from_seq: last.first_shard_seq };
        return if last.length > 0 { vec![whole] } else { Vec::new() };
    }
    parts
        .iter()
        .enumerate()
        // A flush's progress parts: the latest of a shard holds what the earlier ones did.
        .filter(|(i, p)| parts.get(i + 1).is_none_or(|next| next.seq != p.seq))
        .filter(|(_, p)| p.piece_length > 0)
        .map(|(i, p)| {
            let continued = p.seq > p.first_shard_seq;
            View { part: i, piece: true, continued, from_seq: if continued { p.seq } else { p.first_shard_seq } }
        })
        .collect()
}

/// Where a refresh puts an episode's listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// In place of an earlier listing of the episode (at this index).
    At(usize),
    /// After every listing.
    Append,
}

/// Places `new` listings of an episode listed before at `listed` (dataset indexes, in order):
/// over the old ones in order, the rest appended. Old listings left over (fewer listings now:
/// a shard that was missing between two parts appeared) keep what they list.
pub(crate) fn places(listed: &[usize], new: usize) -> Vec<Place> {
    (0..new).map(|i| listed.get(i).map_or(Place::Append, |&at| Place::At(at))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part whose pieces before it held 10 steps in all (when it is not the first).
    fn part(seq: u64, first_shard_seq: u64, piece_length: u64) -> Part {
        let before = if seq > first_shard_seq { 10 } else { 0 };
        Part { seq, first_shard_seq, length: before + piece_length, piece_length }
    }

    fn whole(part: usize, from_seq: u64) -> View {
        View { part, piece: false, continued: false, from_seq }
    }

    fn piece(part: usize, continued: bool, from_seq: u64) -> View {
        View { part, piece: true, continued, from_seq }
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
