//! The episodes a bounded recording's buffer holds, as a reader of it samples them: every
//! listed episode less those with a step in a deleted shard (`catalog::evicted`) and the
//! running ones discarded after a refresh listed them (`Catalog::dropped`).
//!
//! A learner refreshes at every training step, so each refresh costs what it found: while no
//! further shard was deleted, the new listings alone are checked and appended, and listings
//! that grew in place are resized (`EpisodeSet::set_length`). The whole listing is walked again
//! only when shards were deleted (or listings dropped) since: once per shard a bounded recording
//! deletes, a tenth of its capacity. Even then the listings before the first one still in the
//! buffer are not looked at again: deleted shards stay deleted, so an episode once out stays
//! out, and the walk costs what the buffer holds, not what the recording ever listed.

use std::sync::Arc;

use super::catalog::evicted::Gone;
use super::catalog::Catalog;
use super::reads::steps::EpisodeSet;

#[derive(Default)]
pub(crate) struct Live {
    /// Shards deleted plus listings dropped when `gone` and `evicted` were found.
    out: usize,
    gone: Gone,
    /// Listed episodes out of the buffer, ascending.
    pub evicted: Vec<usize>,
    /// Every listing before this one is in `evicted` (see `first_in`).
    first_live: usize,
    /// The listing less `evicted`; `None` while nothing is out (sampling draws from every
    /// episode).
    pub set: Option<Arc<EpisodeSet>>,
    /// Episodes listed when last updated.
    listed: usize,
    /// Members of `set` per recording.
    per_recording: Vec<u64>,
}

impl Live {
    /// Takes in a refresh of `catalog`: `gone` marks the shards deleted (`Store::evicted`),
    /// `regrown` the listings that grew in place (`Catalog::regrown`), `gone_rows_found` whether
    /// the refresh read rows of a deleted shard (from the copy this reader still holds open),
    /// which moves what it held. Returns whether shards were deleted (or listings dropped)
    /// since the last update.
    pub fn update(
        &mut self,
        catalog: &Catalog,
        gone: Vec<bool>,
        regrown: &[(usize, u64)],
        gone_rows_found: bool,
    ) -> bool {
        let out = gone.iter().filter(|&&g| g).count() + catalog.dropped.len();
        let listed = catalog.episodes.len();
        let changed = out != self.out;
        if out == 0 {
            self.listed = listed;
            return changed;
        }
        let same = out == self.out && !gone_rows_found && self.set.is_some();
        let regrown_out = same && regrown.iter().any(|&(at, _)| catalog.evicted_by(&self.gone, at));
        let grown = match self.set.as_mut().and_then(Arc::get_mut) {
            Some(set) if same && !regrown_out => {
                // Only what this refresh listed: the evictions did not change.
                for &(at, _) in regrown {
                    if let Some(k) = set.member_of(at) {
                        set.set_length(k, catalog.episodes[at].summary.length);
                    }
                }
                for e in self.listed..listed {
                    if catalog.evicted_by(&self.gone, e) {
                        self.evicted.push(e);
                    } else {
                        set.push_member(e, catalog.episodes[e].summary.length);
                        count_member(&mut self.per_recording, catalog.episodes[e].recording);
                    }
                }
                true
            }
            _ => false,
        };
        if !grown {
            // Shards were deleted since (or the set is still held by a read in progress): the
            // whole listing, once.
            self.gone = catalog.gone(gone);
            // Out before `first_live`, out still (deleted shards stay deleted, dropped listings
            // stay dropped): only the listings from there on are looked at.
            let from = self.first_live.min(listed);
            let mut evicted = std::mem::take(&mut self.evicted);
            evicted.truncate(from); // 0..from
            let mut after: Vec<usize> = (from..listed).filter(|&e| catalog.evicted_by(&self.gone, e)).collect();
            after.extend(catalog.dropped.iter().filter(|&&e| e >= from));
            after.sort_unstable();
            after.dedup();
            evicted.append(&mut after);
            self.first_live = first_in(&evicted);
            self.evicted = evicted;
            let set = live_set(catalog, &self.evicted, self.first_live);
            self.per_recording.clear();
            for k in 0..set.len() {
                count_member(&mut self.per_recording, catalog.episodes[set.episode(k)].recording);
            }
            self.set = Some(Arc::new(set));
        }
        self.out = out;
        self.listed = listed;
        changed
    }

    /// Which of the dataset's `recordings` the set's episodes come from, one flag each; None
    /// when that is all of them or none (as `DatasetView::recordings_among` says it, without
    /// walking the set: a buffer resumed by a second recording samples from both).
    pub fn among(&self, recordings: usize) -> Option<Vec<bool>> {
        let flags: Vec<bool> = (0..recordings).map(|r| self.per_recording.get(r).is_some_and(|&n| n > 0)).collect();
        let count = flags.iter().filter(|&&f| f).count();
        (count > 0 && count < recordings).then_some(flags)
    }
}

/// Counts a member of `recording` in `per_recording`.
fn count_member(per_recording: &mut Vec<u64>, recording: usize) {
    if per_recording.len() <= recording {
        per_recording.resize(recording + 1, 0);
    }
    per_recording[recording] += 1;
}

/// The first listing not in `evicted` (ascending, without repeats): those before it all are.
fn first_in(evicted: &[usize]) -> usize {
    // `evicted[i] == i` holds for a prefix of an ascending list without repeats.
    let (mut lo, mut hi) = (0, evicted.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if evicted[mid] == mid {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The listing of `catalog` less `evicted` (ascending), all of whose listings before
/// `first_live` are evicted.
fn live_set(catalog: &Catalog, evicted: &[usize], first_live: usize) -> EpisodeSet {
    let mut out = evicted[first_live.min(evicted.len())..].iter().peekable();
    let mut ids = Vec::with_capacity(catalog.episodes.len().saturating_sub(evicted.len()));
    for e in first_live..catalog.episodes.len() {
        if out.next_if_eq(&&e).is_none() {
            ids.push(e);
        }
    }
    let lengths: Vec<u64> = ids.iter().map(|&e| catalog.episodes[e].summary.length).collect();
    EpisodeSet::subset(ids, lengths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_listing_still_in_the_buffer() {
        let table: &[(&[usize], usize)] = &[
            (&[], 0),
            (&[1, 2], 0),
            (&[0], 1),
            (&[0, 1, 2], 3),
            (&[0, 1, 3, 4], 2),
            (&[0, 2, 3, 4, 5, 6, 7], 1),
            (&[0, 1, 2, 3, 4, 5, 9], 6),
        ];
        for &(evicted, want) in table {
            assert_eq!(first_in(evicted), want, "{evicted:?}");
        }
    }
}
