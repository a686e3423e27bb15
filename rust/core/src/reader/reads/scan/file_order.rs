//! Reads in the file's order (`transitions.blocks(order="file")`): a set's episodes grouped by
//! recording, then by lane (sub-env), each lane's episodes in row order, the way the writer
//! stored them. A bulk read of that order (`read_range` over the reordered set) copies whole
//! chunks of step-timeline columns at once (the runs of consecutive episodes of a lane meet
//! row to row: `gather` plans those fields over the runs joined and merges the pieces that go
//! on from each other: see `pieces`), and observation columns one piece per
//! episode (each episode skips one observation row: its reset or its final one), where the
//! step order interleaves the lanes and copies one short piece per episode and column.
//!
//! Only the order changes: every member of the set is in it exactly once (repeats as often as
//! they were given), with its own steps, so a scan of it returns the same transitions as a
//! scan in step order, `episode_index` and `step_index` saying which is which.

use std::sync::Arc;

use crate::error::Result;
use crate::reader::dataset_view::DatasetView;
use crate::reader::reads::steps::EpisodeSet;

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
}
