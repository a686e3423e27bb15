//! Reads over some of a dataset's recordings. A multi-agent dataset holds one recording per
//! agent, each with its own spaces (FORMAT.md, "Agents"): a selection of one agent's episodes
//! plans its batches over that agent's recordings only (their columns and layouts), whatever the
//! other recordings hold.

use std::sync::Arc;

use super::steps::EpisodeSet;
use crate::reader::dataset_view::DatasetView;
use crate::reader::Dataset;
use crate::Result;

/// The episodes a selection reads and the recordings its batches are planned over: every
/// episode of the dataset as it is at each read (`set: None`, a refresh adds to them; `among:
/// None`, all recordings), or a fixed set and the recordings it comes from.
#[derive(Debug, Clone, Default)]
pub struct Subset {
    pub set: Option<Arc<EpisodeSet>>,
    pub among: Option<Vec<bool>>,
}

impl Subset {
    /// Its episodes in `ds`.
    pub fn episodes<'d>(&'d self, ds: &'d Dataset) -> &'d EpisodeSet {
        self.set.as_deref().unwrap_or_else(|| ds.all_episodes())
    }
}

impl Dataset {
    /// The episodes sampling draws from once a bounded recording evicted some (`live_episodes`,
    /// planned over `live_recordings`); None while none is.
    pub fn live_subset(&self) -> Option<Subset> {
        Some(Subset { set: Some(self.live_episodes()?.clone()), among: self.live_recordings() })
    }

    /// The dataset episodes `indexes` (negative from the end), in that order.
    ///
    /// Errors: `OutOfRange`.
    pub fn subset_at(&self, indexes: &[i64]) -> Result<Subset> {
        Ok(self.subset(Arc::new(self.view().episode_set_at(indexes)?)))
    }

    /// `subset`'s episodes in file order (see `DatasetView::file_order`).
    ///
    /// Errors: those of `file_order`.
    pub fn subset_in_file_order(&self, subset: &Subset) -> Result<Subset> {
        Ok(self.subset(self.view().file_order(subset.episodes(self))?))
    }

    /// `set`, planned over the recordings its episodes come from.
    fn subset(&self, set: Arc<EpisodeSet>) -> Subset {
        Subset { among: self.view().recordings_among(&set), set: Some(set) }
    }
}

impl DatasetView<'_> {
    /// Which recordings the episodes of `set` come from, one flag per recording; None when that
    /// is every recording, or none (an empty set): the dataset's own plans serve those.
    pub fn recordings_among(&self, set: &EpisodeSet) -> Option<Vec<bool>> {
        let episodes = self.episodes();
        let of_members = set.episodes().into_iter().filter_map(|e| episodes.get(e).map(|ep| ep.recording));
        flags(self.recordings().len(), of_members)
    }
}

/// The flags of the recordings named in `members` among `n`, None when all or none are.
fn flags(n: usize, members: impl IntoIterator<Item = usize>) -> Option<Vec<bool>> {
    let mut among = vec![false; n];
    let mut count = 0;
    for r in members {
        if let Some(flag) = among.get_mut(r).filter(|f| !**f) {
            *flag = true;
            count += 1;
            if count == n {
                return None;
            }
        }
    }
    (count > 0).then_some(among)
}

#[cfg(test)]
mod tests {
    use super::flags;

    #[test]
    fn the_recordings_of_a_set_are_flagged_unless_all_or_none() {
        type Row = (usize, &'static [usize], Option<&'static [bool]>);
        let table: &[Row] = &[
            (3, &[1, 1, 2], Some(&[false, true, true])),
            (3, &[0], Some(&[true, false, false])),
            (3, &[2, 0, 1], None),
            (1, &[0, 0], None),
            (3, &[], None),
            (2, &[5], None), // out of range: not a member recording (the set was checked before)
        ];
        for (n, members, want) in table {
            assert_eq!(flags(*n, members.iter().copied()).as_deref(), *want, "{n} {members:?}");
        }
    }
}
