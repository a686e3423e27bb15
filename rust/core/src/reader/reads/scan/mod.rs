//! Bulk reads of consecutive steps (scans, `transitions[a:b]`): a range of a set's step
//! numbers becomes one run per episode it overlaps, gathered by `gather_runs` (pieces per run
//! and chunk, not per step; blocks of bounded size, chunks decoded in parallel).
//!
//! The result is what gathering the same step numbers one window per step gives, damage
//! included: without `strict`, a range that touches a damaged episode is read again step by
//! step through `gather_lenient`, which redraws those steps from their numbers.
//!
//! A range read also writes which (episode, step) each row is (`IndexOut`), with the rows (by
//! the thread that copies them), or, where damage was redrawn, from the steps read.

pub(in crate::reader) mod file_order;
pub(in crate::reader) mod runs;

use super::gather::{Field, Out, Run, Window};
use super::steps::EpisodeSet;
use crate::error::{Error, Result};
use crate::reader::dataset_view::DatasetView;
use crate::reader::integrity::damage::Damage;
use crate::reader::integrity::lenient::{Draw, Redraw};
use crate::reader::reads::scan::runs::IndexOut;
use crate::reader::reads::steps::WindowKind;

/// The windows a range read holds: its runs, or (damage redrawn) one window per step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeRead {
    Runs(Vec<Run>),
    Steps(Vec<Window>),
}

impl RangeRead {
    /// (episode, step) of every step read, in order.
    pub fn for_each_step(&self, mut f: impl FnMut(usize, u64)) {
        match self {
            RangeRead::Runs(runs) => {
                for r in runs {
                    (r.start..r.start + r.steps).for_each(|t| f(r.episode, t));
                }
            }
            RangeRead::Steps(windows) => windows.iter().for_each(|w| f(w.episode, w.start)),
        }
    }
}

impl EpisodeSet {
    /// The runs holding steps `first .. first + n` of the set, in order (one per member they
    /// overlap).
    ///
    /// Errors: `OutOfRange` when the range runs past the set's steps.
    pub fn runs(&self, first: u64, n: u64) -> Result<Vec<Run>> {
        let end = first.checked_add(n).filter(|&e| e <= self.num_steps()).ok_or_else(|| {
            Error::OutOfRange(format!(
                "steps {first}..{} are out of range (the episodes hold {} steps)",
                first.saturating_add(n),
                self.num_steps()
            ))
        })?;
        let mut runs = Vec::new();
        if n == 0 {
            return Ok(runs);
        }
        let steps = self.steps();
        let (mut k, mut start) = steps.locate(first).expect("inside the set: checked above");
        let mut at = first;
        while at < end {
            let take = (steps.length(k) - start).min(end - at);
            if take > 0 {
                runs.push(Run { episode: self.episode(k), start, steps: take });
            }
            at += take;
            k += 1;
            start = 0;
        }
        Ok(runs)
    }
}

impl DatasetView<'_> {
    /// Reads steps `first .. first + n` of `set` (every field, `n` rows each, into `outs`) in
    /// bulk, and, when given, which episode and step each row is into `indexes` (`n` rows
    /// each). Returns what was read and the damage found (lenient reads; see the module notes).
    ///
    /// Errors: those of `gather`; `Invalid` for a range outside the set or indexes of another
    /// size.
    pub fn read_range(
        &self,
        set: &EpisodeSet,
        fields: &[Field],
        first: u64,
        n: u64,
        outs: &mut [Out<'_>],
        mut indexes: Option<IndexOut<'_>>,
    ) -> Result<(RangeRead, Vec<Damage>)> {
        let runs = set.runs(first, n)?;
        if self.options().strict {
            self.gather_runs(fields, &runs, outs, indexes, set.is_by_lane())?;
            return Ok((RangeRead::Runs(runs), Vec::new()));
        }
        let mut found = Vec::new();
        if !runs.iter().any(|r| self.is_damaged(r.episode)) {
            let starts: Vec<Window> = runs.iter().map(|r| Window { episode: r.episode, start: r.start }).collect();
            let ix = indexes.as_mut().map(IndexOut::reborrow);
            match self
                .check_episodes(&starts)
                .and_then(|()| self.gather_runs(fields, &runs, outs, ix, set.is_by_lane()))
            {
                Ok(()) => return Ok((RangeRead::Runs(runs), found)),
                Err(e @ Error::Corrupt { .. }) => match self.note_read_damage(&e) {
                    Some(d) => found.push(d),
                    None if !runs.iter().any(|r| self.is_damaged(r.episode)) => return Err(e),
                    None => {}
                },
                Err(e) => return Err(e),
            }
        }
        // Damage in the range: step by step, each damaged step redrawn from its number.
        let mut windows: Vec<Window> = Vec::with_capacity(n as usize);
        for r in &runs {
            windows.extend((r.start..r.start + r.steps).map(|start| Window { episode: r.episode, start }));
        }
        let redraw = Redraw::Numbers((first..first + n).collect());
        let draw = Draw { set, redraw: &redraw, kind: WindowKind::TRANSITION, fields };
        found.extend(self.gather_lenient(draw, &mut windows, outs, None)?);
        if let Some(ix) = indexes {
            ix.check(windows.len())?;
            ix.write_steps(windows.iter().map(|w| (w.episode, w.start)));
        }
        Ok((RangeRead::Steps(windows), found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_range_member_by_member() {
        let set = EpisodeSet::subset(vec![7, 3, 9], [4, 1, 6]);
        let run = |episode, start, steps| Run { episode, start, steps };
        assert_eq!(set.runs(0, 11).unwrap(), vec![run(7, 0, 4), run(3, 0, 1), run(9, 0, 6)]);
        assert_eq!(set.runs(2, 4).unwrap(), vec![run(7, 2, 2), run(3, 0, 1), run(9, 0, 1)]);
        assert_eq!(set.runs(5, 6).unwrap(), vec![run(9, 0, 6)]);
        assert_eq!(set.runs(6, 0).unwrap(), vec![]);
        assert!(set.runs(6, 6).is_err());
        assert!(set.runs(u64::MAX, 2).is_err());
        assert!(EpisodeSet::subset(vec![], []).runs(0, 0).unwrap().is_empty());
    }
}
