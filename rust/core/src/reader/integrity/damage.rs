//! Which listed episodes a damaged spot of a file affects.
//!
//! A spot is a (shard, byte offset) as errors and problems name it: a Chunks record (its
//! checksum failed: every chunk in it is lost), one chunk's data (it failed to decode), an
//! Episode record (its episodes' metadata is lost). Of the problems opening found, only one
//! affects listed episodes: a lost column description (every episode of the recording needs
//! that column); opening left the episodes other damage touched out of the listing.
//!
//! The decision is kept apart from the dataset: `SpanIndex` answers "which episodes' rows
//! overlap these rows of a lane" from plain row ranges, so it is table-tested without files.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::reader::catalog::trust::episode_span;
use crate::reader::catalog::Catalog;
use crate::schema::Timeline;

/// Damage found by a verification or a read: where, what, and which listed episodes it affects.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damage {
    #[serde(serialize_with = "crate::reader::path_text")]
    pub file: PathBuf,
    pub offset: u64,
    pub why: String,
    /// Dataset indexes of the listed episodes whose rows or metadata lie there, ascending.
    pub episodes: Vec<usize>,
    /// Episodes it took out of the listing, so in no `episodes` (a damaged Episode record's, as
    /// its own header counts them).
    #[serde(default)]
    pub unlisted: u64,
}

impl Damage {
    /// What was wrong and which episodes were left out for it: "...; episodes 3, 4 left out"
    /// (the first few of a long list).
    pub fn why_with_episodes(&self) -> String {
        const SHOWN: usize = 8;
        let listed = match self.episodes.as_slice() {
            [] => return self.why.clone(),
            [one] => format!("episode {one}"),
            many => {
                let shown: Vec<String> = many.iter().take(SHOWN).map(usize::to_string).collect();
                let more = if many.len() > SHOWN { format!(" and {} more", many.len() - SHOWN) } else { String::new() };
                format!("episodes {}{more}", shown.join(", "))
            }
        };
        format!("{}; {listed} left out", self.why)
    }

    /// What a read says when it found this damage and went on (lenient reads warn once per
    /// damage found): the file, the offset, what was wrong and the episodes left out.
    pub fn warning(&self) -> String {
        format!(
            "{}: damaged at byte offset {} ({}), found while reading: left out of sampling",
            self.file.display(),
            self.offset,
            self.why_with_episodes()
        )
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: byte offset {}: {}", self.file.display(), self.offset, self.why)
    }
}

/// The row ranges of the episodes of one lane, on one timeline, for overlap queries.
#[derive(Debug, Default)]
pub(crate) struct SpanIndex {
    /// (first row, end row, episode), sorted by first row.
    spans: Vec<(u64, u64, usize)>,
    /// `max_end[i]`: the largest end row among `spans[..=i]`. Episodes of a lane do not overlap
    /// (but for the one row a part repeats), so ends rise with starts; the running maximum
    /// keeps the search right even where they would not.
    max_end: Vec<u64>,
}

impl SpanIndex {
    pub fn new(mut spans: Vec<(u64, u64, usize)>) -> Self {
        spans.sort_unstable();
        let max_end = spans
            .iter()
            .scan(0u64, |m, s| {
                *m = (*m).max(s.1);
                Some(*m)
            })
            .collect();
        SpanIndex { spans, max_end }
    }

    /// Episodes whose rows intersect `first..end`.
    pub fn overlapping(&self, first: u64, end: u64) -> impl Iterator<Item = usize> + '_ {
        let from = if first < end { self.max_end.partition_point(|&m| m <= first) } else { self.spans.len() };
        self.spans[from..].iter().take_while(move |s| s.0 < end).filter(move |s| s.1 > first).map(|s| s.2)
    }
}

/// (recording, lane, on the observation timeline).
type LaneTimeline = (usize, u32, bool);

/// A chunk the dataset reads from, as far as damage is concerned: its lane's rows.
#[derive(Debug, Clone, Copy)]
struct ChunkSite {
    recording: usize,
    lane: u32,
    timeline: Timeline,
    first_row: u64,
    end_row: u64,
}

/// Answers `affected` for many spots of one dataset (built once: a pass over every chunk and
/// every episode).
pub(crate) struct Affected {
    /// Spans of the listed episodes per lane and timeline.
    rows: HashMap<LaneTimeline, SpanIndex>,
    /// (shard, record offset) and (shard, data offset) -> the chunks there.
    chunks: HashMap<(usize, u64), Vec<ChunkSite>>,
    /// (shard, Episode record offset) -> the episodes listed from it.
    records: HashMap<(usize, u64), Vec<usize>>,
    /// Per recording: where the damage that lost one of its columns' descriptions is, and its
    /// episodes.
    lost_columns: Vec<Option<(PathBuf, u64)>>,
    by_recording: Vec<Vec<usize>>,
}

impl Affected {
    pub fn new(ds: &Catalog) -> Self {
        let mut spans: HashMap<LaneTimeline, Vec<(u64, u64, usize)>> = HashMap::new();
        let mut records: HashMap<(usize, u64), Vec<usize>> = HashMap::new();
        let mut by_recording = vec![Vec::new(); ds.recordings.len()];
        for (i, e) in ds.episodes.iter().enumerate() {
            for timeline in [Timeline::Obs, Timeline::Step] {
                if let Some((first, n)) = episode_span(&e.summary, timeline) {
                    spans.entry((e.recording, e.summary.lane, timeline == Timeline::Obs)).or_default().push((
                        first,
                        first + n,
                        i,
                    ));
                }
            }
            records.entry((e.shard, e.summary.record_offset)).or_default().push(i);
            by_recording[e.recording].push(i);
        }
        let rows = spans.into_iter().map(|(k, v)| (k, SpanIndex::new(v))).collect();
        let mut chunks: HashMap<(usize, u64), Vec<ChunkSite>> = HashMap::new();
        for (&(recording, lane, column), list) in &ds.chunk_lists {
            let Some(spec) = ds.recordings[recording].columns.get(column as usize) else { continue };
            for loc in &list.chunks {
                let site = ChunkSite {
                    recording,
                    lane,
                    timeline: spec.timeline,
                    first_row: loc.first_row(),
                    end_row: loc.end_row(),
                };
                // Damage at its record's offset reaches it only when the record's checksum is
                // the one that vouches for it; damage at its data always does.
                chunks.entry((loc.shard, loc.chunk.checked_at())).or_default().push(site);
                if loc.chunk.has_checksum() {
                    continue;
                }
                chunks.entry((loc.shard, loc.chunk.data_offset)).or_default().push(site);
            }
        }
        let lost_columns =
            ds.recordings.iter().map(|r| r.schema_damage.as_ref().map(|p| (p.file.clone(), p.offset))).collect();
        Affected { rows, chunks, records, lost_columns, by_recording }
    }

    /// The listed episodes whose data lies at (shard, offset), ascending: the episodes of an
    /// Episode record there, or those with rows in a Chunks record or chunk data there. For
    /// damage a verification or a read found (what opening found was left out already).
    pub fn at(&self, shard: usize, offset: u64) -> Vec<usize> {
        let mut out: HashSet<usize> = HashSet::new();
        if let Some(eps) = self.records.get(&(shard, offset)) {
            out.extend(eps);
        }
        for site in self.chunks.get(&(shard, offset)).into_iter().flatten() {
            if let Some(index) = self.rows.get(&(site.recording, site.lane, site.timeline == Timeline::Obs)) {
                out.extend(index.overlapping(site.first_row, site.end_row));
            }
        }
        let mut out: Vec<usize> = out.into_iter().collect();
        out.sort_unstable();
        out
    }

    /// The listed episodes a problem opening found affects: every episode of a recording whose
    /// lost column description it names (the rest opening left out already).
    pub fn of_problem(&self, problem: &crate::reader::Problem) -> Vec<usize> {
        let mut out = Vec::new();
        for (recording, lost) in self.lost_columns.iter().enumerate() {
            if lost.as_ref().is_some_and(|(p, o)| *p == problem.file && *o == problem.offset) {
                out.extend(&self.by_recording[recording]);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_names_a_few_episodes() {
        let d = |episodes: Vec<usize>| Damage { file: "f".into(), offset: 0, why: "bad".into(), episodes, unlisted: 0 };
        assert_eq!(d(vec![]).why_with_episodes(), "bad");
        assert_eq!(d(vec![4]).why_with_episodes(), "bad; episode 4 left out");
        assert_eq!(d(vec![1, 2]).why_with_episodes(), "bad; episodes 1, 2 left out");
        assert_eq!(
            d(vec![4]).warning(),
            "f: damaged at byte offset 0 (bad; episode 4 left out), found while reading: left out of sampling"
        );
        assert_eq!(
            d((0..20).collect()).why_with_episodes(),
            "bad; episodes 0, 1, 2, 3, 4, 5, 6, 7 and 12 more left out"
        );
    }

    #[test]
    fn overlap_queries() {
        // Lane rows: episode 7 at 0..4, 3 at 4..9 (listed in another order), a part 5 at 8..12
        // repeating row 8, then a gap, 1 at 20..21.
        let index = SpanIndex::new(vec![(4, 9, 3), (0, 4, 7), (8, 12, 5), (20, 21, 1)]);
        let q = |a, b| index.overlapping(a, b).collect::<Vec<_>>();
        let cases: &[((u64, u64), &[usize])] = &[
            ((0, 1), &[7]),
            ((3, 5), &[7, 3]),
            ((8, 9), &[3, 5]),
            ((12, 20), &[]),
            ((0, 100), &[7, 3, 5, 1]),
            ((20, 21), &[1]),
            ((21, 30), &[]),
            ((5, 5), &[]),
        ];
        for &((a, b), want) in cases {
            assert_eq!(q(a, b), want, "rows {a}..{b}");
        }
        assert_eq!(SpanIndex::new(Vec::new()).overlapping(0, 10).count(), 0);
    }

    #[test]
    fn overlap_stays_right_when_ends_do_not_rise() {
        // Not what a writer produces, but the search must not miss an episode because of it.
        let index = SpanIndex::new(vec![(0, 50, 0), (10, 12, 1), (30, 40, 2)]);
        assert_eq!(index.overlapping(20, 21).collect::<Vec<_>>(), vec![0]);
        assert_eq!(index.overlapping(11, 31).collect::<Vec<_>>(), vec![0, 1, 2]);
    }
}
