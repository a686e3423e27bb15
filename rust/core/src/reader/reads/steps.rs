//! Step and window numbering over an ordered set of episodes, for random access by training code.
//!
//! - `StepIndex`: prefix sums of episode lengths, so the global step number `g` (0 ..
//!   `num_steps`, episodes in order, steps in order within each) is located by a binary search.
//!   A dataset keeps one over all its episodes and extends it on `refresh` (episodes are only
//!   ever appended, so numbers handed out stay valid).
//! - `EpisodeSet`: the episodes a sampler draws from: every episode of a dataset, or a subset
//!   chosen by a filter (a `select`), with its own step index.
//! - `WindowIndex`: numbering of the windows of `length` consecutive steps that lie inside one
//!   episode (with `pad`, an episode shorter than the window counts as one window, padded at
//!   its end). Built on first use for a given length and cached on the set.

use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};

/// `index` of `len` things called `what` ("episode", "step", "window"), negative from the end
/// as in Python: `-1` is the last.
///
/// Errors: `OutOfRange` outside `-len .. len`.
pub fn resolve_index(index: i64, len: u64, what: &str) -> Result<u64> {
    let resolved = if index < 0 { len.checked_sub(index.unsigned_abs()) } else { Some(index as u64) };
    resolved
        .filter(|&i| i < len)
        .ok_or_else(|| Error::OutOfRange(format!("{what} {index} is out of range ({len} {what}s)")))
}

/// Prefix sums of episode lengths: `starts[k]` is the number of steps in episodes `0..k`.
///
/// Locating a step is a binary search, narrowed by a table built on first use: for every
/// bucket of `1 << shift` steps (a bucket at least as long as an average episode), the episode
/// holding its first step. A search then looks at the few episodes overlapping one bucket
/// instead of walking ~log2(episodes) dependent loads through a large array, which for random
/// steps of a large dataset are cache misses.
#[derive(Debug, Clone)]
pub struct StepIndex {
    starts: Vec<u64>,
    buckets: OnceLock<Buckets>,
}

#[derive(Debug, Clone)]
struct Buckets {
    shift: u32,
    /// `first[b]`: the member holding step `b << shift`.
    first: Vec<usize>,
}

impl Default for StepIndex {
    fn default() -> Self {
        StepIndex { starts: vec![0], buckets: OnceLock::new() }
    }
}

impl StepIndex {
    pub fn from_lengths(lengths: impl IntoIterator<Item = u64>) -> Self {
        let mut index = StepIndex::default();
        for length in lengths {
            index.push(length);
        }
        index
    }

    /// Appends an episode of `length` steps.
    pub fn push(&mut self, length: u64) {
        let last = *self.starts.last().unwrap_or(&0);
        self.starts.push(last.saturating_add(length));
        self.patch_buckets(self.len() - 1);
    }

    /// Sets member `k`'s length (an episode listed while it ran, listed whole): the steps of
    /// the members after it move by the difference. Costs what comes after `k`, not the index.
    pub fn set_length(&mut self, k: usize, length: u64) {
        let (old_end, new_end) = (self.starts[k + 1], self.starts[k].saturating_add(length));
        if old_end == new_end {
            return;
        }
        for start in &mut self.starts[k + 1..] {
            *start =
                if new_end > old_end { start.saturating_add(new_end - old_end) } else { *start - (old_end - new_end) };
        }
        self.patch_buckets(k);
    }

    /// The bucket size (a power of two, as its shift) for the index as it is.
    fn shift(&self) -> u32 {
        let average = self.num_steps() / self.len().max(1) as u64;
        average.max(16).next_power_of_two().trailing_zeros()
    }

    /// Brings a built bucket table up to date after members from `k` on changed (appended, or
    /// their starts moved): the buckets from the one holding member `k`'s first step are
    /// redone, those before hold earlier members, unchanged. A refresh then costs what it
    /// added, not the index. Once the average length has moved far from the bucket size, the
    /// table is dropped and built again on first use (rarely: the average must double).
    fn patch_buckets(&mut self, k: usize) {
        let shift = self.shift();
        let Some(buckets) = self.buckets.get_mut() else { return };
        if buckets.shift.abs_diff(shift) > 1 {
            self.buckets = OnceLock::new();
            return;
        }
        let from = usize::try_from(self.starts[k] >> buckets.shift).unwrap_or(usize::MAX);
        buckets.first.truncate(from);
        let k = buckets.first.last().copied().unwrap_or(0);
        fill_buckets(&self.starts, buckets, k);
    }

    fn buckets(&self) -> &Buckets {
        self.buckets.get_or_init(|| {
            let mut buckets = Buckets { shift: self.shift(), first: Vec::new() };
            fill_buckets(&self.starts, &mut buckets, 0);
            buckets
        })
    }

    /// Number of episodes.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn num_steps(&self) -> u64 {
        *self.starts.last().unwrap_or(&0)
    }

    /// The global number of the first step of member `k`.
    pub fn first_step(&self, k: usize) -> u64 {
        self.starts[k]
    }

    /// Steps of member `k`.
    pub fn length(&self, k: usize) -> u64 {
        self.starts[k + 1] - self.starts[k]
    }

    /// `locate` for many steps at once: each phase's loads are issued for all steps before any
    /// is used, so the cache misses of a random batch overlap instead of queuing.
    pub fn locate_many(&self, steps: &[u64]) -> Option<Vec<(usize, u64)>> {
        if steps.iter().any(|&s| s >= self.num_steps()) {
            return None;
        }
        let buckets = self.buckets();
        for &step in steps {
            crate::reader::prefetch((&buckets.first[(step >> buckets.shift) as usize] as *const usize).cast());
        }
        let ranges: Vec<(usize, usize)> = steps
            .iter()
            .map(|&step| {
                let b = (step >> buckets.shift) as usize;
                let lo = buckets.first[b];
                crate::reader::prefetch((&self.starts[lo] as *const u64).cast());
                (lo, buckets.first.get(b + 1).map_or(self.len() - 1, |&h| h))
            })
            .collect();
        Some(
            steps
                .iter()
                .zip(ranges)
                .map(|(&step, (lo, hi))| {
                    let k = lo + self.starts[lo + 1..=hi].partition_point(|&s| s <= step);
                    (k, step - self.starts[k])
                })
                .collect(),
        )
    }

    /// (member, step within it) of global step `step`; `None` past the end.
    pub fn locate(&self, step: u64) -> Option<(usize, u64)> {
        if step >= self.num_steps() {
            return None;
        }
        // The last start <= step; episodes of length 0 (never listed) would share a start, and
        // the search then lands on the last of them, which is the one holding the step. It lies
        // between the members holding the first steps of this bucket and of the next.
        let buckets = self.buckets();
        let b = (step >> buckets.shift) as usize;
        let lo = buckets.first[b];
        let hi = buckets.first.get(b + 1).map_or(self.len() - 1, |&h| h);
        let k = lo + self.starts[lo + 1..=hi].partition_point(|&s| s <= step);
        Some((k, step - self.starts[k]))
    }
}

/// Adds to `buckets.first` the buckets from its length up to the end of `starts` (the prefix
/// sums of a `StepIndex`), starting the walk at member `k` (at most the member holding the first
/// new bucket's step).
fn fill_buckets(starts: &[u64], buckets: &mut Buckets, mut k: usize) {
    let members = starts.len() - 1;
    let total = starts[members];
    let n = usize::try_from((total >> buckets.shift) + 1).unwrap_or(usize::MAX);
    buckets.first.reserve(n.saturating_sub(buckets.first.len()));
    for b in buckets.first.len()..n {
        let step = (b as u64) << buckets.shift;
        while k + 1 < members && starts[k + 1] <= step {
            k += 1;
        }
        buckets.first.push(k);
    }
}

/// Windows of `length` steps inside single episodes of a set, numbered member by member.
#[derive(Debug)]
pub struct WindowIndex {
    pub length: u64,
    pub pad: bool,
    /// Windows per member, as prefix sums.
    windows: StepIndex,
}

impl WindowIndex {
    fn build(steps: &StepIndex, length: u64, pad: bool) -> Self {
        let windows = (0..steps.len()).map(|k| {
            let t = steps.length(k);
            if t >= length {
                t - length + 1
            } else {
                u64::from(pad && t > 0)
            }
        });
        WindowIndex { length, pad, windows: StepIndex::from_lengths(windows) }
    }

    /// Number of members it was built over.
    fn members(&self) -> usize {
        self.windows.len()
    }

    pub fn num_windows(&self) -> u64 {
        self.windows.num_steps()
    }

    /// (member, first step of the window) of window `w`; `None` past the end.
    pub fn locate(&self, w: u64) -> Option<(usize, u64)> {
        self.windows.locate(w)
    }
}

/// Episodes a sampler draws from, in dataset order (or the caller's order, for a subset).
#[derive(Debug, Default)]
pub struct EpisodeSet {
    /// Dataset episode index of each member; `None`: member k is dataset episode k.
    ids: Option<Vec<usize>>,
    steps: StepIndex,
    windows: Mutex<Option<Arc<WindowIndex>>>,
    /// The members come lane by lane, each lane's in row order (`Dataset::file_order` made it).
    by_lane: bool,
    /// The same members in file order, made on first use (`Dataset::file_order`).
    pub(in crate::reader) file_order: OnceLock<Arc<EpisodeSet>>,
}

/// What a selection's repr says of it.
impl std::fmt::Display for EpisodeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} episodes, {} steps", self.len(), self.num_steps())
    }
}

impl EpisodeSet {
    /// Every episode of a dataset; extend it with `push` as the dataset grows.
    pub(crate) fn all() -> Self {
        EpisodeSet::default()
    }

    /// A subset: `ids[k]` is the dataset index of member k, `lengths[k]` its length.
    pub(crate) fn subset(ids: Vec<usize>, lengths: impl IntoIterator<Item = u64>) -> Self {
        EpisodeSet { ids: Some(ids), steps: StepIndex::from_lengths(lengths), ..Default::default() }
    }

    /// The same set, marked as coming lane by lane (the file order).
    pub(crate) fn by_lane(self) -> Self {
        EpisodeSet { by_lane: true, ..self }
    }

    /// Whether the members come lane by lane, each lane's in row order (the file order).
    pub fn is_by_lane(&self) -> bool {
        self.by_lane
    }

    pub(crate) fn push(&mut self, length: u64) {
        debug_assert!(self.ids.is_none(), "push_member grows a subset");
        self.steps.push(length);
        self.file_order = OnceLock::new();
    }

    /// Appends dataset episode `episode` (of `length` steps) to a subset.
    pub(crate) fn push_member(&mut self, episode: usize, length: u64) {
        match &mut self.ids {
            Some(ids) => ids.push(episode),
            None => debug_assert_eq!(episode, self.len(), "members of `all` are the dataset's episodes in order"),
        }
        self.steps.push(length);
        self.file_order = OnceLock::new();
    }

    /// Sets member `k`'s length (its listing grew in place).
    pub(crate) fn set_length(&mut self, k: usize, length: u64) {
        self.steps.set_length(k, length);
        self.file_order = OnceLock::new();
        *self.windows.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The member that is dataset episode `episode`, if any (members of a subset made by
    /// `Dataset` come in ascending order; others are searched).
    pub(crate) fn member_of(&self, episode: usize) -> Option<usize> {
        match &self.ids {
            None => (episode < self.len()).then_some(episode),
            Some(ids) => match ids.binary_search(&episode) {
                Ok(k) => Some(k),
                Err(_) => ids.iter().position(|&e| e == episode),
            },
        }
    }

    /// Number of episodes.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The dataset index of member `k`.
    pub fn episode(&self, k: usize) -> usize {
        match &self.ids {
            Some(ids) => ids[k],
            None => k,
        }
    }

    /// Dataset indexes of the members, in order.
    pub fn episodes(&self) -> Vec<usize> {
        (0..self.len()).map(|k| self.episode(k)).collect()
    }

    pub fn steps(&self) -> &StepIndex {
        &self.steps
    }

    pub fn num_steps(&self) -> u64 {
        self.steps.num_steps()
    }

    /// `locate_step` for many steps (faster than one at a time for random steps).
    pub fn locate_steps(&self, steps: &[u64]) -> Result<Vec<(usize, u64)>> {
        let found = self.steps.locate_many(steps).ok_or_else(|| {
            let bad = steps.iter().find(|&&s| s >= self.num_steps()).copied().unwrap_or_default();
            Error::OutOfRange(format!("step {bad} is out of range (the episodes hold {} steps)", self.num_steps()))
        })?;
        Ok(found.into_iter().map(|(k, t)| (self.episode(k), t)).collect())
    }

    /// `locate_steps` of step numbers, negative from the end.
    ///
    /// Errors: `OutOfRange`.
    pub fn locate_numbers(&self, numbers: &[i64]) -> Result<Vec<(usize, u64)>> {
        let steps = numbers.iter().map(|&s| resolve_index(s, self.num_steps(), "step")).collect::<Result<Vec<_>>>()?;
        self.locate_steps(&steps)
    }

    /// (dataset episode, step within it) of step `step` of the set.
    pub fn locate_step(&self, step: u64) -> Result<(usize, u64)> {
        let (k, t) = self.steps.locate(step).ok_or_else(|| {
            Error::OutOfRange(format!("step {step} is out of range (the episodes hold {} steps)", self.num_steps()))
        })?;
        Ok((self.episode(k), t))
    }

    /// The window numbering for `length` and `pad`, built once and cached (rebuilt when the
    /// length, `pad` or the number of members changed).
    pub fn windows(&self, length: u64, pad: bool) -> Result<Arc<WindowIndex>> {
        if length == 0 {
            return Err(Error::Invalid("a sequence length must be at least 1".into()));
        }
        let mut cached = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = cached.as_ref() {
            if w.length == length && w.pad == pad && w.members() == self.len() {
                return Ok(w.clone());
            }
        }
        let built = Arc::new(WindowIndex::build(&self.steps, length, pad));
        *cached = Some(built.clone());
        Ok(built)
    }

    /// (dataset episode, first step) of window `w` of `length` steps.
    pub fn locate_window(&self, windows: &WindowIndex, w: u64) -> Result<(usize, u64)> {
        let (k, t) = windows.locate(w).ok_or_else(|| {
            Error::OutOfRange(format!(
                "window {w} is out of range (the episodes hold {} windows of {} steps)",
                windows.num_windows(),
                windows.length
            ))
        })?;
        Ok((self.episode(k), t))
    }
}

/// What the windows of a batch are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowKind {
    /// Steps per window (1 for transitions).
    pub length: usize,
    /// Windows of `length` steps inside episodes (drawn from the set's windows); `false`:
    /// transitions (drawn from its steps).
    pub sequence: bool,
    /// Sequences only: shorter episodes count as one padded window.
    pub pad: bool,
}

impl WindowKind {
    /// One step a row: transitions.
    pub const TRANSITION: WindowKind = WindowKind { length: 1, sequence: false, pad: false };

    /// Sequences of `length` steps (padded with `pad`); `None`: transitions.
    pub fn of(length: Option<usize>, pad: bool) -> WindowKind {
        length.map_or(WindowKind::TRANSITION, |length| WindowKind { length, sequence: true, pad })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_displays_its_episodes_and_steps() {
        assert_eq!(EpisodeSet::subset(vec![4, 7], [5, 2]).to_string(), "2 episodes, 7 steps");
        assert_eq!(EpisodeSet::all().to_string(), "0 episodes, 0 steps");
    }

    #[test]
    fn bucketed_search_matches_a_plain_one() {
        let mut lengths = Vec::new();
        let mut x = 7u64;
        for _ in 0..3000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lengths.push(if x.is_multiple_of(7) { 1 + (x >> 50) % 2000 } else { 1 + (x >> 40) % 40 });
        }
        let mut index = StepIndex::from_lengths(lengths.iter().copied());
        let check = |index: &StepIndex| {
            for step in (0..index.num_steps()).step_by(7).chain([index.num_steps() - 1]) {
                let k = index.starts.partition_point(|&s| s <= step) - 1;
                assert_eq!(index.locate(step), Some((k, step - index.starts[k])), "step {step}");
            }
            assert_eq!(index.locate(index.num_steps()), None);
        };
        check(&index);
        index.push(5000); // the table is rebuilt for the new length
        check(&index);
        let steps: Vec<u64> = (0..index.num_steps()).rev().step_by(13).collect();
        let one_by_one: Vec<_> = steps.iter().map(|&s| index.locate(s).unwrap()).collect();
        assert_eq!(index.locate_many(&steps).unwrap(), one_by_one);
        assert_eq!(index.locate_many(&[index.num_steps()]), None);
        let one = StepIndex::from_lengths([1]);
        assert_eq!(one.locate(0), Some((0, 0)));
    }

    #[test]
    fn an_index_grown_and_resized_in_place_locates_as_one_built_whole() {
        // Appends and in-place resizes (listings that grew), with the bucket table built in
        // between: every step lands where an index built from the final lengths puts it.
        let mut lengths: Vec<u64> = Vec::new();
        let mut index = StepIndex::default();
        let mut x = 11u64;
        for round in 0..400u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            match x % 5 {
                0 if !lengths.is_empty() => {
                    // Resize one of the last few (where running episodes are listed), or any.
                    let k = if x.is_multiple_of(3) { (x >> 20) as usize % lengths.len() } else { lengths.len() - 1 };
                    let length = (x >> 33) % 300; // shorter too (and 0)
                    lengths[k] = length;
                    index.set_length(k, length);
                }
                _ => {
                    let length = if round % 50 == 0 { 5000 } else { 1 + (x >> 40) % 40 };
                    lengths.push(length);
                    index.push(length);
                }
            }
            if round % 7 == 0 {
                let _ = index.locate(0); // builds the table, which later changes patch
            }
            if round % 25 == 24 {
                let whole = StepIndex::from_lengths(lengths.iter().copied());
                assert_eq!(index.starts, whole.starts, "round {round}");
                for step in (0..whole.num_steps()).step_by(3) {
                    assert_eq!(index.locate(step), whole.locate(step), "round {round} step {step}");
                }
                assert_eq!(index.locate(whole.num_steps()), None);
            }
        }
    }

    #[test]
    fn a_subset_grows_and_finds_its_members() {
        let mut set = EpisodeSet::subset(vec![1, 4], [3, 2]);
        let w = set.windows(2, false).unwrap();
        assert_eq!(w.num_windows(), 2 + 1);
        set.push_member(7, 5);
        set.set_length(0, 1);
        assert_eq!(set.episodes(), [1, 4, 7]);
        assert_eq!(set.num_steps(), 1 + 2 + 5);
        assert_eq!(set.locate_step(3).unwrap(), (7, 0));
        assert_eq!(set.windows(2, false).unwrap().num_windows(), 1 + 4, "windows made again after a resize");
        assert_eq!((set.member_of(4), set.member_of(7), set.member_of(5)), (Some(1), Some(2), None));
    }

    #[test]
    fn locate_steps_across_episodes() {
        let index = StepIndex::from_lengths([3, 1, 2]);
        assert_eq!(index.num_steps(), 6);
        let got: Vec<_> = (0..6).map(|g| index.locate(g).unwrap()).collect();
        assert_eq!(got, [(0, 0), (0, 1), (0, 2), (1, 0), (2, 0), (2, 1)]);
        assert_eq!(index.locate(6), None);
        assert_eq!(StepIndex::default().locate(0), None);
    }

    #[test]
    fn windows_skip_or_pad_short_episodes() {
        let set = EpisodeSet::subset(vec![4, 7, 9], [5, 2, 3]);
        let w = set.windows(3, false).unwrap();
        assert_eq!(w.num_windows(), 3 + 1);
        let all: Vec<_> = (0..4).map(|i| set.locate_window(&w, i).unwrap()).collect();
        assert_eq!(all, [(4, 0), (4, 1), (4, 2), (9, 0)]);
        let padded = set.windows(3, true).unwrap();
        assert_eq!(padded.num_windows(), 5);
        assert_eq!(set.locate_window(&padded, 3).unwrap(), (7, 0));
        assert!(set.locate_window(&padded, 5).is_err());
        assert!(set.windows(0, false).is_err());
        // Cached while the key is unchanged.
        assert!(Arc::ptr_eq(&padded, &set.windows(3, true).unwrap()));
    }
}
