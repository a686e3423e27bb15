//! How the catalog follows a closed shard that its writer compacted under the reader
//! (`writer::files::compact`: the same rows in fewer, larger chunks, the Episode records
//! batched again, at other offsets): the shard's chunk entries are swapped for the rewrite's
//! and its listings pointed at the rewrite's Episode records. Rows and listing indexes keep
//! their meaning; only where the bytes lie changes. Decided from what the two scans found,
//! without I/O: a rewrite that does not hold exactly the rows the reader listed is refused, and
//! the reader goes on reading the file it opened.

use super::chunk_list::{place_chunk, put_chunk, ChunkList, Insert, Located};
use super::trust::check_chunk;
use super::Catalog;
use crate::format::episode::{EpisodeSummary, FLAG_COMPLETE};
use crate::reader::int_map::IntMap;
use crate::reader::store::checksummed::VerifiedRecords;
use crate::reader::store::shard::Found;

/// `list` with the entries of `shard` replaced by `new` (the rewrite's chunks of the same lane
/// and column), placed as a scan's are (`place_chunk`). Refused (why) unless the new entries
/// hold exactly the rows the old ones held.
pub(crate) fn switched_list(list: &ChunkList, shard: usize, mut new: Vec<Located>) -> Result<ChunkList, String> {
    let old_rows = row_ranges(list.chunks.iter().filter(|c| c.shard == shard));
    let mut chunks: Vec<Located> = list.chunks.iter().filter(|c| c.shard != shard).copied().collect();
    new.sort_by_key(|c| (c.chunk.is_repeat(), c.first_row()));
    let mut placed = Vec::with_capacity(new.len());
    for c in new {
        let place = place_chunk(&chunks, &c);
        if place == Insert::Clash {
            return Err(format!("its chunk of rows {}..{} overlaps another", c.first_row(), c.end_row()));
        }
        if put_chunk(&mut chunks, c, place) {
            placed.push(c);
        }
    }
    placed.sort_by_key(Located::first_row);
    if row_ranges(placed.iter()) != old_rows {
        return Err("its chunks hold other rows than the file it replaced".into());
    }
    let ends = chunks.iter().map(Located::end_row).collect();
    Ok(ChunkList { chunks, ends })
}

/// The rows `chunks` (sorted by first row) hold, as ranges with adjacent ones joined.
fn row_ranges<'a>(chunks: impl Iterator<Item = &'a Located>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for c in chunks.filter(|c| c.chunk.n_rows > 0) {
        match out.last_mut() {
            Some(last) if last.1 == c.first_row() => last.1 = c.end_row(),
            _ => out.push((c.first_row(), c.end_row())),
        }
    }
    out
}

/// The latest of the Episode records `new` (a rewrite's, in record order) per (lane, episode
/// id): what `new_places` looks listings up in, made once for all of a shard's listings.
pub(crate) fn latest_records(new: &[EpisodeSummary]) -> IntMap<(u32, u64), &EpisodeSummary> {
    let mut latest = IntMap::default();
    latest.reserve(new.len());
    for s in new {
        latest.insert((s.lane, s.episode_id), s); // in record order: the last one stays
    }
    latest
}

/// The place (record offset, position) of each of `listed`'s summaries (records of one shard,
/// or listings of episodes whose latest record is in it) in the shard's rewrite, whose latest
/// Episode records per episode `latest` holds (`latest_records`): the latest record of the same
/// lane and episode, which must have ended as the listed one did. `None` for a record the
/// rewrite left out because a later one of the same episode supersedes it (`superseded`:
/// whether it does, in the old file). Refused (why) when an episode's record is missing or
/// different.
pub(crate) fn new_places(
    listed: &[(&EpisodeSummary, bool)],
    latest: &IntMap<(u32, u64), &EpisodeSummary>,
) -> Result<Vec<Option<(u64, u32)>>, String> {
    let same = |a: &EpisodeSummary, b: &EpisodeSummary| {
        a.end_ns == b.end_ns && a.flags & !FLAG_COMPLETE == b.flags & !FLAG_COMPLETE
    };
    listed
        .iter()
        .map(|&(old, superseded)| match latest.get(&(old.lane, old.episode_id)) {
            _ if superseded => Ok(None),
            Some(s) if same(s, old) => Ok(Some((s.record_offset, s.position))),
            _ => Err(format!("episode {} of lane {} is not as it was listed", old.episode_id, old.lane)),
        })
        .collect()
}

/// Per record (in `records` order), whether a later one of the same lane and episode follows.
fn superseded(records: &[&EpisodeSummary]) -> Vec<bool> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<bool> = records.iter().rev().map(|s| !seen.insert((s.lane, s.episode_id))).collect();
    out.reverse();
    out
}

impl Catalog {
    /// Switches `shard` to its compacted rewrite, whose scan found `found`: its chunk entries
    /// become the rewrite's (registered in `verified`, whose ids of the old file the caller
    /// forgot), its listings and the records of episodes still running point at the rewrite's
    /// Episode records. Nothing changes when refused (why).
    pub fn switch_shard(&mut self, shard: usize, found: &Found, verified: &mut VerifiedRecords) -> Result<(), String> {
        let recording = self.shard_recording[shard];
        let mut by_list: IntMap<(usize, u32, u32), Vec<Located>> = IntMap::default();
        for chunk in &found.chunks {
            check_chunk(&self.states[recording].specs, chunk)?;
            by_list.entry((recording, chunk.lane, chunk.column)).or_default().push(Located {
                shard,
                chunk: *chunk,
                record: 0, // registered once the switch is decided
            });
        }
        let mut lists = Vec::new();
        for (&key, list) in &self.chunk_lists {
            let new = by_list.remove(&key).unwrap_or_default();
            if !new.is_empty() || list.chunks.iter().any(|c| c.shard == shard) {
                lists.push((key, switched_list(list, shard, new)?));
            }
        }
        if let Some((key, _)) = by_list.into_iter().next() {
            return Err(format!("it holds rows of lane {} column {} the file it replaced did not", key.1, key.2));
        }
        // The listings whose record is in the shard, and the records of episodes going on.
        let listings: Vec<usize> = (0..self.episodes.len()).filter(|&i| self.episodes[i].shard == shard).collect();
        let summaries: Vec<(&EpisodeSummary, bool)> =
            listings.iter().map(|&i| (&self.episodes[i].summary, false)).collect();
        let latest = latest_records(&found.episodes);
        let listing_places = new_places(&summaries, &latest)?;
        let mut part_places = Vec::new();
        for (key, parts) in &self.listed_parts {
            let here: Vec<&EpisodeSummary> =
                parts.records.iter().filter(|(s, _)| *s == shard).map(|(_, e)| e).collect();
            let listed: Vec<(&EpisodeSummary, bool)> = here.iter().copied().zip(superseded(&here)).collect();
            part_places.push((*key, new_places(&listed, &latest)?));
        }

        // Decided: nothing below fails.
        for (key, mut list) in lists {
            for c in list.chunks.iter_mut().filter(|c| c.shard == shard) {
                c.record = verified.id((shard, c.chunk.checked_at()));
            }
            self.chunk_lists.insert(key, list);
        }
        for &record in &found.verified {
            let id = verified.id((shard, record));
            verified.mark(id);
        }
        for (i, place) in listings.into_iter().zip(listing_places) {
            if let Some((offset, position)) = place {
                let summary = &mut self.episodes[i].summary;
                (summary.record_offset, summary.position) = (offset, position);
            }
        }
        for (key, places) in part_places {
            let Some(parts) = self.listed_parts.get_mut(&key) else { continue };
            let mut places = places.into_iter();
            parts.records.retain_mut(|(s, summary)| {
                if *s != shard {
                    return true;
                }
                match places.next().flatten() {
                    Some((offset, position)) => {
                        (summary.record_offset, summary.position) = (offset, position);
                        true
                    }
                    None => false, // superseded: the rewrite dropped it, as a fresh open never sees it
                }
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::chunks::{ChunkRef, CHUNK_REPEAT};

    fn at(shard: usize, first_row: u64, n_rows: u32, data_offset: u64) -> Located {
        Located { shard, chunk: ChunkRef { first_row, n_rows, data_offset, ..Default::default() }, record: 0 }
    }

    fn list(chunks: Vec<Located>) -> ChunkList {
        let ends = chunks.iter().map(Located::end_row).collect();
        ChunkList { chunks, ends }
    }

    fn entries(l: &ChunkList) -> Vec<(usize, u64, u64, u64)> {
        l.chunks.iter().map(|c| (c.shard, c.first_row(), c.end_row(), c.chunk.data_offset)).collect()
    }

    #[test]
    fn a_shards_entries_are_swapped_for_its_rewrites() {
        let repeat = |mut c: Located| {
            c.chunk.flags |= CHUNK_REPEAT;
            c
        };
        // (list, new chunks of shard 1) -> entries (shard, first, end, offset) or the refusal
        type Case = (&'static str, Vec<Located>, Vec<Located>, Result<Vec<(usize, u64, u64, u64)>, &'static str>);
        let cases: Vec<Case> = vec![
            (
                "three flush-cut chunks become one, between the shards around",
                vec![at(0, 0, 10, 5), at(1, 10, 3, 100), at(1, 13, 3, 200), at(1, 16, 4, 300), at(2, 20, 5, 7)],
                vec![at(1, 10, 10, 64)],
                Ok(vec![(0, 0, 10, 5), (1, 10, 20, 64), (2, 20, 25, 7)]),
            ),
            (
                "new chunks in any order",
                vec![at(1, 0, 2, 100), at(1, 2, 2, 200), at(1, 4, 2, 300), at(1, 6, 2, 400)],
                vec![at(1, 4, 4, 90), at(1, 0, 4, 64)],
                Ok(vec![(1, 0, 4, 64), (1, 4, 8, 90)]),
            ),
            (
                "repeated rows of the shard before stay left out",
                vec![at(0, 0, 10, 5), at(1, 10, 5, 100), at(1, 15, 5, 200)],
                vec![repeat(at(1, 6, 4, 30)), at(1, 10, 10, 64)],
                Ok(vec![(0, 0, 10, 5), (1, 10, 20, 64)]),
            ),
            (
                "a gap where the old file had one (a masked column) is kept",
                vec![at(1, 0, 2, 100), at(1, 5, 2, 200), at(1, 7, 2, 300)],
                vec![at(1, 0, 2, 64), at(1, 5, 4, 90)],
                Ok(vec![(1, 0, 2, 64), (1, 5, 9, 90)]),
            ),
            (
                "fewer rows than the old file held",
                vec![at(1, 0, 5, 100), at(1, 5, 5, 200)],
                vec![at(1, 0, 8, 64)],
                Err("other rows"),
            ),
            (
                "rows another shard holds",
                vec![at(0, 0, 10, 5), at(1, 10, 5, 100)],
                vec![at(1, 8, 7, 64)],
                Err("overlaps"),
            ),
            ("rows the old file never had", vec![at(0, 0, 10, 5)], vec![at(1, 10, 5, 64)], Err("other rows")),
            ("the old file's rows gone", vec![at(0, 0, 10, 5), at(1, 10, 5, 100)], vec![], Err("other rows")),
        ];
        for (name, old, new, want) in cases {
            match (switched_list(&list(old), 1, new), want) {
                (Ok(got), Ok(want)) => {
                    assert_eq!(entries(&got), want, "{name}");
                    assert_eq!(got.ends, want.iter().map(|w| w.2).collect::<Vec<_>>(), "{name}");
                }
                (Err(why), Err(want)) => assert!(why.contains(want), "{name}: {why}"),
                (got, want) => panic!("{name}: {:?} against {want:?}", got.map(|l| entries(&l))),
            }
        }
    }

    #[test]
    fn listings_point_at_the_latest_record_of_their_episode() {
        let summary = |lane: u32, episode_id: u64, end_ns: u64, record_offset: u64, position: u32| EpisodeSummary {
            lane,
            episode_id,
            end_ns,
            record_offset,
            position,
            length: 5,
            ..Default::default()
        };
        // The rewrite: lane 0 episode 7's part (end 10) superseded and dropped, its end (20)
        // batched with lane 1's episode 8 in one record.
        let new = [summary(0, 7, 20, 4000, 0), summary(1, 8, 15, 4000, 1), summary(0, 9, 30, 5000, 0)];
        type Case = (&'static str, Vec<(EpisodeSummary, bool)>, Result<Vec<Option<(u64, u32)>>, &'static str>);
        let cases: Vec<Case> = vec![
            (
                "each at its new place",
                vec![(summary(1, 8, 15, 300, 0), false), (summary(0, 7, 20, 900, 2), false)],
                Ok(vec![Some((4000, 1)), Some((4000, 0))]),
            ),
            (
                "a superseded record has no place",
                vec![(summary(0, 7, 10, 100, 0), true), (summary(0, 7, 20, 900, 2), false)],
                Ok(vec![None, Some((4000, 0))]),
            ),
            ("an episode the rewrite lacks", vec![(summary(2, 8, 15, 300, 0), false)], Err("episode 8 of lane 2")),
            ("an episode that ended otherwise", vec![(summary(0, 9, 31, 300, 0), false)], Err("episode 9 of lane 0")),
            ("nothing listed", vec![], Ok(vec![])),
        ];
        for (name, listed, want) in cases {
            let listed: Vec<(&EpisodeSummary, bool)> = listed.iter().map(|(s, sup)| (s, *sup)).collect();
            match (new_places(&listed, &latest_records(&new)), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{name}"),
                (Err(why), Err(want)) => assert!(why.contains(want), "{name}: {why}"),
                (got, want) => panic!("{name}: {got:?} against {want:?}"),
            }
        }
        let (a, b, c) = (summary(0, 7, 10, 0, 0), summary(1, 7, 5, 0, 1), summary(0, 7, 20, 9, 0));
        assert_eq!(superseded(&[&a, &b, &c]), vec![true, false, false]);
    }
}
