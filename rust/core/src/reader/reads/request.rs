//! Which windows a batch holds: requests (a sample, numbers, (episode, step) pairs, a range)
//! turned into windows of an episode set, and the one rule for indexes counted from the end.
//! Plain values in, plain values out: the table tests below cover every case.

use super::gather::Window;
use super::sampling::{sample_steps, sample_windows};
use super::steps::{resolve_index, EpisodeSet};
use crate::reader::integrity::lenient::Redraw;
use crate::reader::reads::steps::WindowKind;
use crate::{Error, Result};

/// Which windows a batch holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `n` steps (transitions) or windows (sequences) drawn from a seed.
    Sample { n: usize, seed: u64 },
    /// Step numbers (transitions) or window numbers (sequences) of the episode set, negative
    /// from the end.
    Numbers(Vec<i64>),
    /// (dataset episode, first step) pairs; episodes negative from the end.
    Pairs(Vec<(i64, i64)>),
    /// Steps `first .. first + n` of the episode set, read in bulk (transitions only).
    Range { first: u64, n: usize },
}

impl Request {
    /// Steps `start .. stop` by `step` (none when `stop <= start`), read in bulk: a Python
    /// `range` of step numbers, which must count up by 1 from 0 or more.
    ///
    /// Errors: `Invalid` for another range, or steps more than an index can count.
    pub fn range(start: i64, stop: i64, step: i64) -> Result<Request> {
        let (Ok(start), Ok(stop), 1) = (u64::try_from(start), u64::try_from(stop), step) else {
            let by = if step == 1 { String::new() } else { format!(", {step}") };
            let got = format!("range({start}, {stop}{by})");
            return Err(Error::Invalid(format!("steps are a range of non-negative numbers by 1 (got {got})")));
        };
        let n = usize::try_from(stop.saturating_sub(start))
            .map_err(|_| Error::Invalid(format!("steps {start}..{stop} are too many to read at once")))?;
        Ok(Request::Range { first: start, n })
    }

    /// Windows at (episode, first step) pairs, given as two lists.
    ///
    /// Errors: `Invalid` when the lists differ in length.
    pub fn pairs(episodes: Vec<i64>, steps: Vec<i64>) -> Result<Request> {
        if episodes.len() != steps.len() {
            return Err(Error::Invalid(format!("{} episodes for {} steps", episodes.len(), steps.len())));
        }
        Ok(Request::Pairs(episodes.into_iter().zip(steps).collect()))
    }

    /// Windows in the batch.
    pub fn len(&self) -> usize {
        match self {
            Request::Sample { n, .. } | Request::Range { n, .. } => *n,
            Request::Numbers(v) => v.len(),
            Request::Pairs(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How a window that falls in a damaged episode is replaced (lenient reads): a sample's
    /// from its seed, a numbered one's from its number; one asked for by (episode, step) is not.
    pub fn redraw(&self) -> Redraw {
        match self {
            Request::Sample { seed, .. } => Redraw::Seed(*seed),
            Request::Numbers(v) => Redraw::Numbers(v.iter().map(|&i| i as u64).collect()),
            Request::Pairs(_) => Redraw::Never,
            Request::Range { first, n } => Redraw::Numbers((*first..*first + *n as u64).collect()),
        }
    }

    /// The windows of `set` asked for (`num_episodes`: the dataset's, which pairs count in).
    ///
    /// Errors: `OutOfRange` (a number or an episode), `Invalid` (a negative step of a pair, a
    /// sample from nothing).
    pub fn windows(self, set: &EpisodeSet, num_episodes: usize, kind: WindowKind) -> Result<Vec<Window>> {
        let length = kind.length as u64;
        if kind.sequence && length == 0 {
            return Err(Error::Invalid("a sequence length must be at least 1".into()));
        }
        match self {
            Request::Pairs(v) => v
                .into_iter()
                .map(|(e, t)| {
                    let episode = resolve_index(e, num_episodes as u64, "episode")? as usize;
                    let start = u64::try_from(t).map_err(|_| Error::Invalid(format!("step {t} is negative")))?;
                    Ok(Window { episode, start })
                })
                .collect(),
            Request::Range { first, n } => Ok(set
                .runs(first, n as u64)?
                .iter()
                .flat_map(|r| (r.start..r.start + r.steps).map(|start| Window { episode: r.episode, start }))
                .collect()),
            Request::Sample { n, seed } if kind.sequence => sample_windows(set, n, length, kind.pad, seed),
            Request::Sample { n, seed } => sample_steps(set, n, seed),
            Request::Numbers(v) if kind.sequence => {
                let windows = set.windows(length, kind.pad)?;
                v.into_iter()
                    .map(|i| {
                        let (episode, start) =
                            set.locate_window(&windows, resolve_index(i, windows.num_windows(), "window")?)?;
                        Ok(Window { episode, start })
                    })
                    .collect()
            }
            Request::Numbers(v) => {
                Ok(set.locate_numbers(&v)?.into_iter().map(|(episode, start)| Window { episode, start }).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_pairs_are_checked() {
        assert_eq!(Request::range(3, 7, 1).unwrap(), Request::Range { first: 3, n: 4 });
        assert_eq!(Request::range(7, 3, 1).unwrap(), Request::Range { first: 7, n: 0 });
        let refused = |start, stop, step| Request::range(start, stop, step).unwrap_err().to_string();
        let why = "steps are a range of non-negative numbers by 1 (got";
        assert_eq!(refused(0, 8, 2), format!("{why} range(0, 8, 2))"));
        assert_eq!(refused(-1, 8, 1), format!("{why} range(-1, 8))"));
        assert_eq!(refused(0, -8, 1), format!("{why} range(0, -8))"));
        assert_eq!(refused(8, 0, -1), format!("{why} range(8, 0, -1))"));
        assert_eq!(Request::pairs(vec![0, -1], vec![2, 3]).unwrap(), Request::Pairs(vec![(0, 2), (-1, 3)]));
        assert_eq!(Request::pairs(vec![0], vec![]).unwrap_err().to_string(), "1 episodes for 0 steps");
    }

    #[test]
    fn indexes_count_from_the_end_when_negative() {
        let table: &[(i64, u64, Option<u64>)] = &[
            (0, 3, Some(0)),
            (2, 3, Some(2)),
            (3, 3, None),
            (-1, 3, Some(2)),
            (-3, 3, Some(0)),
            (-4, 3, None),
            (0, 0, None),
            (-1, 0, None),
            (i64::MIN, 3, None),
            (i64::MAX, u64::MAX, Some(i64::MAX as u64)),
            (-1, u64::MAX, Some(u64::MAX - 1)),
        ];
        for &(index, len, want) in table {
            match (resolve_index(index, len, "step"), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{index} of {len}"),
                (Err(Error::OutOfRange(m)), None) => {
                    assert_eq!(m, format!("step {index} is out of range ({len} steps)"))
                }
                (got, want) => panic!("{index} of {len}: got {got:?}, want {want:?}"),
            }
        }
    }

    fn pairs(windows: &[Window]) -> Vec<(usize, u64)> {
        windows.iter().map(|w| (w.episode, w.start)).collect()
    }

    const STEP: WindowKind = WindowKind::TRANSITION;
    const TWO: WindowKind = WindowKind { length: 2, sequence: true, pad: false };
    const TWO_PADDED: WindowKind = WindowKind { length: 2, sequence: true, pad: true };

    #[test]
    fn requests_become_windows() {
        // Dataset episodes 4, 1, 7 with 3, 1 and 2 steps: steps 0..6 of the set.
        let set = || EpisodeSet::subset(vec![4, 1, 7], [3, 1, 2]);
        type Case = (Request, WindowKind, Result<Vec<(usize, u64)>, &'static str>);
        let table: &[Case] = &[
            (Request::Numbers(vec![0, 3, -1, -6]), STEP, Ok(vec![(4, 0), (1, 0), (7, 1), (4, 0)])),
            (Request::Numbers(vec![6]), STEP, Err("step 6 is out of range (6 steps)")),
            (Request::Numbers(vec![-7]), STEP, Err("step -7 is out of range (6 steps)")),
            // Windows of 2: (4,0), (4,1), (7,0); padded, episode 1 counts once too.
            (Request::Numbers(vec![0, 1, -1]), TWO, Ok(vec![(4, 0), (4, 1), (7, 0)])),
            (Request::Numbers(vec![3]), TWO, Err("window 3 is out of range (3 windows)")),
            (Request::Numbers(vec![2, 3]), TWO_PADDED, Ok(vec![(1, 0), (7, 0)])),
            (Request::Range { first: 2, n: 3 }, STEP, Ok(vec![(4, 2), (1, 0), (7, 0)])),
            (Request::Range { first: 5, n: 2 }, STEP, Err("steps 5..7 are out of range")),
            (Request::Pairs(vec![(0, 5), (-1, 0)]), STEP, Ok(vec![(0, 5), (8, 0)])),
            (Request::Pairs(vec![(9, 0)]), STEP, Err("episode 9 is out of range (9 episodes)")),
            (Request::Pairs(vec![(0, -1)]), STEP, Err("step -1 is negative")),
            (
                Request::Pairs(vec![(0, 0)]),
                WindowKind { length: 0, ..TWO },
                Err("a sequence length must be at least 1"),
            ),
        ];
        for (request, kind, want) in table {
            let got = request.clone().windows(&set(), 9, *kind);
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(&pairs(&got), want, "{request:?}"),
                (Err(e), Err(want)) => assert!(e.to_string().starts_with(want), "{request:?}: {e}"),
                (got, want) => panic!("{request:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn an_index_past_the_end_is_out_of_range_not_invalid() {
        let set = EpisodeSet::subset(vec![0], [2]);
        for request in [Request::Numbers(vec![2]), Request::Range { first: 1, n: 2 }, Request::Pairs(vec![(1, 0)])] {
            let got = request.clone().windows(&set, 1, STEP);
            assert!(matches!(got, Err(Error::OutOfRange(_))), "{request:?}: {got:?}");
        }
    }

    #[test]
    fn samples_are_reproducible_and_inside_the_set() {
        let set = EpisodeSet::subset(vec![4, 1, 7], [3, 1, 2]);
        let a = Request::Sample { n: 50, seed: 3 }.windows(&set, 9, STEP).unwrap();
        assert_eq!(pairs(&a), pairs(&Request::Sample { n: 50, seed: 3 }.windows(&set, 9, STEP).unwrap()));
        assert!(a.iter().all(|w| [(4, 3), (1, 1), (7, 2)].iter().any(|&(e, len)| w.episode == e && w.start < len)));
        let s = Request::Sample { n: 20, seed: 1 }.windows(&set, 9, TWO).unwrap();
        assert!(s.iter().all(|w| (w.episode == 4 && w.start < 2) || (w.episode == 7 && w.start == 0)));
    }

    #[test]
    fn lenient_reads_redraw_by_seed_number_or_never() {
        assert_eq!(Request::Sample { n: 2, seed: 9 }.redraw(), Redraw::Seed(9));
        assert_eq!(Request::Numbers(vec![3, 1]).redraw(), Redraw::Numbers(vec![3, 1]));
        assert_eq!(Request::Range { first: 4, n: 2 }.redraw(), Redraw::Numbers(vec![4, 5]));
        assert_eq!(Request::Pairs(vec![(0, 0)]).redraw(), Redraw::Never);
    }
}
