//! What a gather copies: items (a window's or run's rows in its lane, and where they go in
//! the outputs) and pieces (rows of one decoded chunk, or zeros, to output rows). Runs of
//! consecutive episodes of a lane read in file order meet row to row: `join_steps` plans
//! step-timeline fields over the runs joined, and `push_piece` merges pieces that go on from
//! each other, so a bulk read copies one piece per chunk instead of one per episode.

/// The slot of pieces that are zeros: padding, and rows no chunk holds.
pub(in crate::reader) const ZEROS: u32 = u32::MAX;

/// A window's (or run's) rows in its lane, with where they go in the outputs.
#[derive(Clone, Copy)]
pub(in crate::reader) struct Item {
    pub(in crate::reader) recording: usize,
    pub(in crate::reader) lane: u32,
    /// The window's first row on each timeline.
    pub(in crate::reader) obs_row: u64,
    pub(in crate::reader) step_row: u64,
    /// Rows inside the episode (fewer than the window's length when padded).
    pub(in crate::reader) rows: u64,
    /// Rows of padding after them (zeros).
    pub(in crate::reader) pad: usize,
    /// Where its first row goes in the outputs.
    pub(in crate::reader) out_row: usize,
}

/// Rows `chunk_row .. chunk_row + rows` of slot `slot` go to output rows from `out_row`.
#[derive(Clone, Copy)]
pub(in crate::reader) struct Piece {
    pub(in crate::reader) slot: u32,
    pub(in crate::reader) chunk_row: usize,
    pub(in crate::reader) rows: usize,
    pub(in crate::reader) out_row: usize,
}

/// Sorts `items` by (recording, lane, step row): within a lane, episodes' rows increase on both
/// timelines together, so a field's rows are then visited in chunk order. Items of equal keys
/// read the same rows, so their order among themselves does not matter.
pub(in crate::reader) fn sort_items(items: &mut Vec<Item>) {
    // A batch sorts a few hundred items: moving 56-byte items and comparing three fields costs
    // more than sorting one integer per item, (recording, lane, row, position) packed in 128
    // bits, and moving each item once. The packing needs recordings and rows under 2^32 and
    // 2^48 and at most 2^16 items: always, but for the types.
    const ROW_BITS: u32 = 48;
    const POSITION_BITS: u32 = 16;
    let packs = items.len() <= 1 << POSITION_BITS
        && items.iter().all(|i| i.recording <= u32::MAX as usize && i.step_row < 1 << ROW_BITS);
    if !packs {
        items.sort_unstable_by_key(|i| (i.recording, i.lane, i.step_row));
        return;
    }
    let mut keys: Vec<u128> = items
        .iter()
        .enumerate()
        .map(|(position, i)| {
            let lane = (i.recording as u128) << 32 | i.lane as u128;
            lane << 64 | (i.step_row as u128) << POSITION_BITS | position as u128
        })
        .collect();
    keys.sort_unstable();
    *items = keys.iter().map(|&key| items[(key & ((1 << POSITION_BITS) - 1)) as usize]).collect();
}

/// `items` with each item joined to the one before it where their step-timeline rows and
/// output rows both go on from it (the same lane, no padding): what step-timeline fields are
/// planned over. Observation rows of such items do not meet (each episode has one more), so
/// the joined items' `obs_row` is not to be used.
pub(in crate::reader) fn join_steps(items: &[Item]) -> Vec<Item> {
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
pub(in crate::reader) fn push_piece(pieces: &mut Vec<Piece>, field_from: usize, p: Piece) {
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
    fn items_sort_by_recording_lane_and_row() {
        let item = |recording, lane, step_row, out_row| Item {
            recording,
            lane,
            obs_row: 0,
            step_row,
            rows: 1,
            pad: 0,
            out_row,
        };
        let keys =
            |items: &[Item]| items.iter().map(|i| (i.recording, i.lane, i.step_row, i.out_row)).collect::<Vec<_>>();
        let table: Vec<Vec<Item>> = vec![
            vec![],
            vec![item(0, 0, 5, 0)],
            vec![item(1, 0, 2, 0), item(0, 3, 9, 1), item(0, 3, 1, 2), item(0, 0, 7, 3), item(1, 0, 2, 4)],
            // Lanes and recordings at the top of their ranges, rows at the packing's bound.
            vec![item(0, u32::MAX, 1, 0), item(0, 0, (1 << 48) - 1, 1), item(u32::MAX as usize, 0, 0, 2)],
            // Rows or recordings past the packing's bounds: the plain sort.
            vec![item(0, 1, 1 << 48, 0), item(0, 1, 3, 1), item(0, 0, u64::MAX, 2)],
            vec![item(usize::MAX, 0, 0, 0), item(1, 0, 0, 1)],
            (0..200u64).map(|k| item((k % 3) as usize, (k * 7 % 65) as u32, k * 31 % 50, k as usize)).collect(),
        ];
        for items in table {
            let mut want = items.clone();
            want.sort_by_key(|i| (i.recording, i.lane, i.step_row, i.out_row));
            let mut got = items.clone();
            sort_items(&mut got);
            // Equal keys may come in any order: compared with their positions sorted.
            let mut got_keys = keys(&got);
            assert!(got_keys.windows(2).all(|w| (w[0].0, w[0].1, w[0].2) <= (w[1].0, w[1].1, w[1].2)), "{got_keys:?}");
            got_keys.sort_unstable();
            assert_eq!(got_keys, keys(&want));
        }
        // A batch past 2^16 items: the plain sort.
        let mut many: Vec<Item> = (0..70_000u64).rev().map(|k| item(0, (k % 3) as u32, k, k as usize)).collect();
        sort_items(&mut many);
        assert!(many.windows(2).all(|w| (w[0].lane, w[0].step_row) <= (w[1].lane, w[1].step_row)));
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
