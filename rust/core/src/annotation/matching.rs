//! Which rows each annotated episode's values go to, decided from the listing alone: an episode
//! is named by its recording, its lane and the row of its first step (rows run on per recording
//! and lane, so no two episodes share one), and its values must be as many as its steps.

use std::collections::BTreeMap;

use super::sidecar::Span;
use crate::error::{Error, Result};

/// What matching needs of a listed episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    pub recording: usize,
    pub lane: u32,
    pub episode_id: u64,
    pub step_first_row: u64,
    pub length: u64,
}

/// Values given for one episode: its index in the listing and how many rows they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Given {
    pub episode: usize,
    pub rows: u64,
}

/// Where one given entry goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Its index among the entries given.
    pub given: usize,
    pub span: Span,
}

/// Per recording (ascending), the entries given, placed on their rows and sorted by (lane, row).
///
/// Errors: `OutOfRange` (an episode the listing does not have), `Invalid` (values of another
/// length than the episode's steps, an episode given twice, or two episodes on the same rows),
/// each naming the episode index and the lengths.
pub fn place(listed: &[Listed], given: &[Given]) -> Result<BTreeMap<usize, Vec<Placed>>> {
    let mut out: BTreeMap<usize, Vec<Placed>> = BTreeMap::new();
    let mut seen = vec![false; listed.len()];
    for (i, g) in given.iter().enumerate() {
        let e = listed.get(g.episode).ok_or_else(|| {
            Error::OutOfRange(format!(
                "annotation of episode {}: no such episode (the dataset lists {})",
                g.episode,
                listed.len()
            ))
        })?;
        if g.rows != e.length {
            return Err(Error::Invalid(format!(
                "annotation of episode {}: {} values for its {} steps (one value per step, or one per episode)",
                g.episode, g.rows, e.length
            )));
        }
        if std::mem::replace(&mut seen[g.episode], true) {
            return Err(Error::Invalid(format!("annotation of episode {}: given twice", g.episode)));
        }
        let span = Span { lane: e.lane, episode_id: e.episode_id, first_row: e.step_first_row, rows: e.length };
        out.entry(e.recording).or_default().push(Placed { given: i, span });
    }
    for placed in out.values_mut() {
        placed.sort_by_key(|p| (p.span.lane, p.span.first_row));
        for w in placed.windows(2) {
            let (a, b) = (&w[0].span, &w[1].span);
            if a.lane == b.lane && a.first_row + a.rows > b.first_row {
                let (ea, eb) = (given[w[0].given].episode, given[w[1].given].episode);
                return Err(Error::Invalid(format!(
                    "annotation of episodes {ea} and {eb}: both hold rows {}..{} of lane {} (parts of one episode listed twice?)",
                    b.first_row,
                    (a.first_row + a.rows).min(b.first_row + b.rows),
                    a.lane
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(recording: usize, lane: u32, first: u64, length: u64) -> Listed {
        Listed { recording, lane, episode_id: first, step_first_row: first, length }
    }

    #[test]
    fn entries_go_to_their_episodes_rows() {
        let listed = [ep(0, 1, 10, 3), ep(0, 0, 0, 5), ep(1, 0, 0, 2), ep(0, 1, 0, 10)];
        let given = [Given { episode: 0, rows: 3 }, Given { episode: 2, rows: 2 }, Given { episode: 3, rows: 10 }];
        let out = place(&listed, &given).unwrap();
        let spans = |r: usize| out[&r].iter().map(|p| (p.given, p.span.lane, p.span.first_row)).collect::<Vec<_>>();
        // Sorted by lane then row within a recording; recording 0's episode 1 was not given.
        assert_eq!(spans(0), vec![(2, 1, 0), (0, 1, 10)]);
        assert_eq!(spans(1), vec![(1, 0, 0)]);
    }

    #[test]
    fn refusals_name_the_episode_and_the_lengths() {
        let listed = [ep(0, 0, 0, 5), ep(0, 0, 5, 2), ep(0, 0, 3, 4)];
        let cases: &[(&[Given], &str)] = &[
            (&[Given { episode: 7, rows: 1 }], "episode 7: no such episode (the dataset lists 3)"),
            (&[Given { episode: 1, rows: 3 }], "episode 1: 3 values for its 2 steps"),
            (&[Given { episode: 0, rows: 5 }, Given { episode: 0, rows: 5 }], "episode 0: given twice"),
            (
                &[Given { episode: 0, rows: 5 }, Given { episode: 2, rows: 4 }],
                "episodes 0 and 2: both hold rows 3..5 of lane 0",
            ),
        ];
        for (given, want) in cases {
            let e = place(&listed, given).unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        }
        // Adjacent episodes on a lane are fine; an empty episode takes no row.
        assert!(place(&listed, &[Given { episode: 0, rows: 5 }, Given { episode: 1, rows: 2 }]).is_ok());
    }
}
