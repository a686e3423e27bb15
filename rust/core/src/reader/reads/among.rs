//! Reads over some of a dataset's recordings. A multi-agent dataset holds one recording per
//! agent, each with its own spaces (FORMAT.md, "Agents"): a selection of one agent's episodes
//! plans its batches over that agent's recordings only (their columns and layouts), whatever the
//! other recordings hold.

use super::steps::EpisodeSet;
use crate::reader::dataset_view::DatasetView;

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
