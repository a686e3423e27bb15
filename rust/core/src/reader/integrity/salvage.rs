//! What of each episode can still be read after damage: the plan `recover` replays.
//!
//! An episode is kept whole when every row of it reads; otherwise its intact prefix is kept:
//! the steps before the first unreadable row in any column (a row in a chunk that fails its
//! checksum or does not decode, or a row that no chunk holds where one should), cut short and
//! marked incomplete. Episodes that opening left out (rows lost to a damaged or missing part of
//! a file) are planned the same way. The decisions (`first_unreadable`, `steps_before`) take
//! plain row ranges, so table-driven tests cover them without files.

use std::collections::HashSet;

use super::verify::VerifyReport;
use crate::format::episode::EpisodeSummary;
use crate::reader::catalog::trust::episode_span;
use crate::reader::catalog::trust::is_required;
use crate::reader::dataset_view::DatasetView;
use crate::reader::reads::rows::overlapping;
use crate::schema::{ColumnSpec, Timeline};

/// One episode to write again.
#[derive(Debug, Clone)]
pub struct Salvage {
    pub recording: usize,
    /// Where its rows are, cut to the steps kept (a cut episode is incomplete: flags cleared).
    pub summary: EpisodeSummary,
    /// Its steps before cutting.
    pub recorded_length: u64,
    /// Its metadata JSON ("{}" when its Episode record cannot be read).
    pub metadata: String,
    /// Its index in the dataset, if it was listed.
    pub listed: Option<usize>,
}

impl Salvage {
    pub fn is_cut(&self) -> bool {
        self.summary.length < self.recorded_length
    }
}

/// The salvage plan of a dataset: episodes in recording order, and how many had nothing left.
#[derive(Debug, Clone, Default)]
pub struct SalvagePlan {
    pub episodes: Vec<Salvage>,
    /// Damaged episodes with no intact step.
    pub lost: usize,
}

/// The first row of `first..end` that cannot be read. `chunks`: the column's chunks overlapping
/// the range as (first row, end row, readable), sorted and disjoint. Rows no chunk holds read
/// as zeros only in a masked column (or a mask), and only before `born`, the first row the
/// column (or its partner) has a chunk for; elsewhere they were lost.
pub(crate) fn first_unreadable(
    chunks: &[(u64, u64, bool)],
    first: u64,
    end: u64,
    required: bool,
    born: u64,
) -> Option<u64> {
    let gap = |a: u64, b: u64| -> Option<u64> {
        let from = if required { a } else { a.max(born) };
        (from < b).then_some(from)
    };
    let mut cursor = first;
    for &(a, b, readable) in chunks {
        if b <= cursor {
            continue;
        }
        if a >= end {
            break;
        }
        if let Some(row) = gap(cursor, a.min(end)) {
            return Some(row);
        }
        if !readable {
            return Some(a.max(cursor));
        }
        cursor = b;
        if cursor >= end {
            return None;
        }
    }
    gap(cursor, end)
}

/// Steps whose rows all read, given a column's first unreadable row counted from the
/// episode's first row on that timeline: step t needs observation rows t and t + 1 and step
/// row t.
pub(crate) fn steps_before(length: u64, timeline: Timeline, bad_row: u64) -> u64 {
    match timeline {
        Timeline::Obs => bad_row.saturating_sub(1).min(length),
        Timeline::Step => bad_row.min(length),
    }
}

impl DatasetView<'_> {
    /// The salvage plan after `report` (a verification of this dataset).
    pub fn salvage(&self, report: &VerifyReport) -> SalvagePlan {
        let damaged: HashSet<usize> = report.damaged_episodes().into_iter().collect();
        let mut plan = SalvagePlan::default();
        // (recording, shard_seq, record offset, position) orders episodes as they ended.
        let mut keyed = Vec::new();
        for (i, e) in self.episodes().iter().enumerate() {
            let kept = if damaged.contains(&i) {
                self.intact_steps(e.recording, &e.summary, &report.unreadable)
            } else {
                e.summary.length
            };
            let metadata = self.episode_metadata(i).unwrap_or_else(|_| "{}".into());
            keyed.push((e.recording, e.shard, Some(i), e.summary.clone(), kept, metadata));
        }
        for left in &self.catalog.left_out {
            let kept = self.intact_steps(left.recording, &left.summary, &report.unreadable);
            let shard = &self.store.shards[left.shard];
            let metadata = shard
                .episode_record(left.summary.record_offset)
                .and_then(|batch| shard.metadata_in(&batch, &left.summary))
                .unwrap_or_else(|_| "{}".into());
            keyed.push((left.recording, left.shard, None, left.summary.clone(), kept, metadata));
        }
        keyed.sort_by_key(|k| (k.0, self.store.shards[k.1].header.shard_seq, k.3.record_offset, k.3.position));
        for (recording, _, listed, summary, kept, metadata) in keyed {
            if kept == 0 {
                plan.lost += 1;
                continue;
            }
            let recorded_length = summary.length;
            let mut summary = summary;
            if kept < recorded_length {
                summary.length = kept;
                summary.flags = 0;
            }
            plan.episodes.push(Salvage { recording, summary, recorded_length, metadata, listed });
        }
        plan
    }

    /// Steps of an episode whose rows all read (`unreadable`: chunks that do not).
    fn intact_steps(&self, recording: usize, s: &EpisodeSummary, unreadable: &HashSet<(usize, u64)>) -> u64 {
        // Annotations never cut what was recorded (`recover` does not copy them).
        let columns = self.catalog.recordings[recording].own_columns();
        if !columns.iter().any(is_required) {
            return 0;
        }
        let mut kept = s.length;
        for spec in columns {
            let Some((first, n)) = episode_span(s, spec.timeline) else { return 0 };
            let chunks: Vec<(u64, u64, bool)> =
                overlapping(self.chunk_list(recording, s.lane, spec.id), first, first + n)
                    .map(|(c, _, _)| {
                        (c.first_row(), c.end_row(), !unreadable.contains(&(c.shard, c.chunk.data_offset)))
                    })
                    .collect();
            let born = self.born(recording, s.lane, spec);
            if let Some(bad) = first_unreadable(&chunks, first, first + n, is_required(spec), born) {
                kept = kept.min(steps_before(s.length, spec.timeline, bad - first));
            }
        }
        kept
    }

    /// The first row a column or its partner (mask / masked column) has a chunk for in a lane.
    fn born(&self, recording: usize, lane: u32, spec: &ColumnSpec) -> u64 {
        let first_of = |id| self.chunk_list(recording, lane, id).first().map(|c| c.first_row());
        [Some(spec.id), spec.mask.or(spec.mask_of)].into_iter().flatten().filter_map(first_of).min().unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_unreadable_rows() {
        let ok = |a, b| (a, b, true);
        let bad = |a, b| (a, b, false);
        // (chunks, first, end, required, born) -> first unreadable row
        type Case<'a> = (&'a [(u64, u64, bool)], u64, u64, bool, u64, Option<u64>);
        let cases: &[Case] = &[
            (&[ok(0, 10)], 2, 8, true, 0, None),
            (&[ok(0, 4), ok(4, 10)], 0, 10, true, 0, None),
            (&[ok(0, 4), bad(4, 10)], 2, 8, true, 0, Some(4)),
            (&[bad(0, 4), ok(4, 10)], 2, 8, true, 0, Some(2)),
            (&[bad(0, 4)], 5, 8, true, 0, Some(5)), // the list may start before: no chunk holds 5..
            (&[ok(0, 4), ok(6, 10)], 0, 10, true, 0, Some(4)),
            (&[ok(0, 4)], 0, 10, true, 0, Some(4)),
            (&[], 0, 3, true, u64::MAX, Some(0)),
            // Masked: rows before the column was born read as zeros; a gap after it is lost.
            (&[ok(5, 10)], 0, 10, false, 5, None),
            (&[], 0, 10, false, u64::MAX, None),
            (&[ok(5, 7)], 0, 10, false, 5, Some(7)),
            (&[ok(6, 10)], 0, 10, false, 4, Some(4)), // the partner was born at 4
            (&[ok(0, 3), bad(3, 6)], 0, 10, false, 0, Some(3)),
            (&[ok(0, 3), bad(3, 6)], 0, 3, false, 0, None),
        ];
        for &(chunks, first, end, required, born, want) in cases {
            assert_eq!(first_unreadable(chunks, first, end, required, born), want, "{chunks:?} {first}..{end}");
        }
    }

    #[test]
    fn steps_kept_per_timeline() {
        // Observation row r unreadable: steps 0..r-1 keep both their observations.
        assert_eq!(steps_before(10, Timeline::Obs, 0), 0);
        assert_eq!(steps_before(10, Timeline::Obs, 1), 0);
        assert_eq!(steps_before(10, Timeline::Obs, 4), 3);
        assert_eq!(steps_before(10, Timeline::Obs, 10), 9, "the final observation lost: the last step goes");
        assert_eq!(steps_before(10, Timeline::Step, 0), 0);
        assert_eq!(steps_before(10, Timeline::Step, 4), 4);
        assert_eq!(steps_before(10, Timeline::Step, 99), 10);
    }
}
