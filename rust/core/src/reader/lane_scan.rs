//! Reads in the file's order (`transitions.blocks(order="file")`): a set's episodes grouped by
//! recording, then by lane (sub-env), each lane's episodes in row order, the way the writer
//! stored them. A bulk read of that order (`read_range` over the reordered set) copies whole
//! chunks of step-timeline columns at once (the runs of consecutive episodes of a lane meet
//! row to row: `gather` plans those fields over the runs joined, `join_steps`, and merges the
//! pieces that go on from each other, `push_piece`), and observation columns one piece per
//! episode (each episode skips one observation row: its reset or its final one), where the
//! step order interleaves the lanes and copies one short piece per episode and column.
//!
//! Only the order changes: every member of the set is in it exactly once (repeats as often as
//! they were given), with its own steps, so a scan of it returns the same transitions as a
//! scan in step order, `episode_index` and `step_index` saying which is which.

use std::sync::Arc;

use super::dataset_view::DatasetView;
use super::gather::{Item, Piece, ZEROS};
use super::steps::EpisodeSet;
use crate::error::Result;

/// Where an episode's rows start in the file: (recording, lane, first step row).
pub(crate) type FilePlace = (u32, u32, u64);

/// The positions of `places` in file order: sorted by (recording, lane, row), ties (repeats,
/// empty episodes) in the order given.
pub(crate) fn file_order(places: &[FilePlace]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..places.len()).collect();
    // Stable: members at the same place keep their order.
    order.sort_by_key(|&k| places[k]);
    order
}

impl DatasetView<'_> {
    /// The members of `set` in file order (see the module notes), with the step numbering of
    /// that order; made once per set (a set that grows makes it again).
    ///
    /// Errors: `Invalid` when a member is not an episode of this dataset.
    pub fn file_order(&self, set: &EpisodeSet) -> Result<Arc<EpisodeSet>> {
        if let Some(ordered) = set.file_order.get() {
            return Ok(ordered.clone());
        }
        let ordered = Arc::new(self.order_by_file(set)?);
        Ok(set.file_order.get_or_init(|| ordered).clone())
    }

    fn order_by_file(&self, set: &EpisodeSet) -> Result<EpisodeSet> {
        let members = set.episodes();
        let places: Vec<FilePlace> = members
            .iter()
            .map(|&e| {
                self.episode(e)?;
                let loc = &self.catalog.locs[e];
                Ok((loc.recording, loc.lane, loc.step_first_row))
            })
            .collect::<Result<_>>()?;
        let ordered: Vec<usize> = file_order(&places).into_iter().map(|k| members[k]).collect();
        self.episode_set(&ordered).map(EpisodeSet::by_lane)
    }
}

/// `items` with each item joined to the one before it where their step-timeline rows and
/// output rows both go on from it (the same lane, no padding): what step-timeline fields are
/// planned over. Observation rows of such items do not meet (each episode has one more), so
/// the joined items' `obs_row` is not to be used.
pub(super) fn join_steps(items: &[Item]) -> Vec<Item> {
    let mut joined: Vec<Item> = Vec::with_capacity(items.len());
    for item in items {
        if let Some(last) = joined.last_mut() {
            let goes_on = (last.recording, last.lane) == (item.recording, item.lane)
                && last.pad == 0
                && item.pad == 0
                && last.step_row + last.rows == item.step_row
                && last.out_row + last.rows as usize == item.out_row;
            if goes_on {
                last.rows += item.rows;
                continue;
            }
        }
        joined.push(*item);
    }
    joined
}

/// Appends `p`, or extends the last piece when `p` goes on from it (the same chunk, the next
/// rows of it, to the next output rows; zeros after zeros): runs of consecutive episodes of a
/// lane read in file order become one piece per chunk instead of one per episode.
/// Pieces before `field_from` are another field's: never extended.
pub(super) fn push_piece(pieces: &mut Vec<Piece>, field_from: usize, p: Piece) {
    if let Some(last) = pieces.get_mut(field_from..).and_then(<[Piece]>::last_mut) {
        let goes_on = last.slot == p.slot
            && last.out_row + last.rows == p.out_row
            && (p.slot == ZEROS || last.chunk_row + last.rows == p.chunk_row);
        if goes_on {
            last.rows += p.rows;
            return;
        }
    }
    pieces.push(p);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lanes_are_grouped_and_rows_ascend() {
        let places = [(0, 1, 0), (0, 0, 0), (0, 1, 5), (0, 0, 3), (1, 0, 0), (0, 0, 7)];
        assert_eq!(file_order(&places), vec![1, 3, 5, 0, 2, 4]);
        assert!(file_order(&[]).is_empty());
    }

    proptest! {
        /// A permutation of the positions, sorted by place, ties in the order given.
        #[test]
        fn file_order_is_a_stable_sort_by_place(
            places in prop::collection::vec((0u32..3, 0u32..4, 0u64..20), 0..60),
        ) {
            let order = file_order(&places);
            let mut seen = order.clone();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..places.len()).collect::<Vec<_>>());
            for pair in order.windows(2) {
                let (a, b) = (places[pair[0]], places[pair[1]]);
                prop_assert!(a < b || (a == b && pair[0] < pair[1]));
            }
        }
    }

    /// (output row, slot, chunk row) of every row the pieces hold, sorted.
    fn rows_of(pieces: &[Piece]) -> Vec<(usize, u32, usize)> {
        let mut rows: Vec<_> = pieces
            .iter()
            .flat_map(|p| {
                (0..p.rows).map(move |j| (p.out_row + j, p.slot, if p.slot == ZEROS { 0 } else { p.chunk_row + j }))
            })
            .collect();
        rows.sort_unstable();
        rows
    }

    proptest! {
        /// Merging changes how rows are grouped, never where a row comes from or goes, and
        /// never reaches back into another field's pieces.
        #[test]
        fn merged_pieces_copy_the_same_rows(
            steps in prop::collection::vec((0u32..3, 0usize..4, 1usize..4, any::<bool>()), 1..40),
            split in 0usize..40,
        ) {
            // Pieces that mostly go on from each other (the next chunk rows to the next output
            // rows), some jumping, in a chunk or zeros; the first `split` are one field's, the
            // rest another's (whose output rows start again from 0).
            let split = split.min(steps.len());
            let (mut plain, mut out_row, mut chunk_row) = (Vec::new(), 0usize, 0usize);
            for (k, &(slot, jump, rows, zeros)) in steps.iter().enumerate() {
                if k == split {
                    out_row = 0;
                }
                out_row += jump % 2;
                chunk_row += jump / 2;
                plain.push(Piece { slot: if zeros { ZEROS } else { slot }, chunk_row, rows, out_row });
                out_row += rows;
                chunk_row += rows;
            }
            let (mut merged, mut field_from) = (Vec::new(), 0);
            for (k, p) in plain.iter().enumerate() {
                if k == split {
                    field_from = merged.len();
                }
                push_piece(&mut merged, field_from, *p);
            }
            if split == plain.len() {
                field_from = merged.len();
            }
            prop_assert_eq!(rows_of(&merged[..field_from]), rows_of(&plain[..split]));
            prop_assert_eq!(rows_of(&merged[field_from..]), rows_of(&plain[split..]));
            prop_assert!(merged.len() <= plain.len());
        }
    }

    proptest! {
        /// Joined items hold the same step rows going to the same output rows, lane by lane.
        #[test]
        fn joined_items_map_the_same_step_rows(
            runs in prop::collection::vec((0u32..2, 0u64..3, 1u64..5, 0usize..2), 0..30),
        ) {
            // Runs sorted by lane, mostly meeting the one before (a gap of 0) on both rows.
            let (mut items, mut step_row, mut out_row) = (Vec::new(), 0u64, 0usize);
            let mut runs = runs;
            runs.sort_by_key(|r| r.0);
            for (lane, gap, rows, out_gap) in runs {
                step_row += gap;
                out_row += out_gap;
                items.push(Item { recording: 0, lane, obs_row: 0, step_row, rows, pad: 0, out_row });
                step_row += rows;
                out_row += rows as usize;
            }
            let rows = |items: &[Item]| -> Vec<(u32, u64, usize)> {
                let mut v: Vec<_> = items
                    .iter()
                    .flat_map(|i| (0..i.rows).map(move |j| (i.lane, i.step_row + j, i.out_row + j as usize)))
                    .collect();
                v.sort_unstable();
                v
            };
            let joined = join_steps(&items);
            prop_assert_eq!(rows(&joined), rows(&items));
            prop_assert!(joined.len() <= items.len());
        }
    }

    #[test]
    fn pieces_that_go_on_merge() {
        let p = |slot, chunk_row, rows, out_row| Piece { slot, chunk_row, rows, out_row };
        let mut v = Vec::new();
        push_piece(&mut v, 0, p(1, 0, 3, 0));
        push_piece(&mut v, 0, p(1, 3, 2, 3)); // goes on
        push_piece(&mut v, 0, p(1, 6, 2, 5)); // skips a chunk row
        push_piece(&mut v, 0, p(ZEROS, 0, 1, 7));
        push_piece(&mut v, 0, p(ZEROS, 9, 1, 8)); // zeros after zeros
        push_piece(&mut v, 3, p(ZEROS, 0, 1, 9)); // another field's: not merged
        let got: Vec<_> = v.iter().map(|q| (q.slot, q.chunk_row, q.rows, q.out_row)).collect();
        assert_eq!(got, vec![(1, 0, 5, 0), (1, 6, 2, 5), (ZEROS, 0, 2, 7), (ZEROS, 0, 1, 9)]);
    }
}
