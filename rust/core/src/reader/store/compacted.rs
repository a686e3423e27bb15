//! A reader of a live recording switches to the compacted rewrite of a closed shard
//! (`writer::files::compact` renames it over the file): the file it opened while the shard was
//! written holds the same rows in the many small chunks the flush timer cut, and kept open it
//! would hold its disk space and pages for as long as the dataset is open. At the refresh that
//! finds the rewrite, the store opens and scans it, the catalog takes its chunks and Episode
//! records in place of the old ones (`catalog::rewrite`, which refuses a rewrite that does not
//! hold the rows listed), and the shard reads the new file from then on: the same rows, the
//! same listings. What was decoded from the old file, and which of its records were checked,
//! is forgotten (its offsets mean other bytes in the new one). Views handed out keep the old
//! map alive until they are dropped.
//!
//! A rewrite that cannot be opened or scanned now (an I/O error) is tried again at the next
//! refresh; one that is damaged or holds other rows is not read: a notice says so, and the
//! shard reads on the file it opened.
//!
//! A shard in a store prefix never switches: a reader lists no shard still being written (its
//! segments are not listed as shards), and a recording's uploads put each shard up once,
//! sealed and compacted, after the one opened before it (`objstore::uploads`).

use super::shard::{Found, Shard};
use super::Store;
use crate::reader::Problem;

/// What decides whether a shard switches to its rewrite (see `switches`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Candidate {
    /// A rewrite was found under its name (`Shard::rewrite`).
    pub rewrite: bool,
    /// The rewrite was refused before (`Store::refuse_rewrite`).
    pub refused: bool,
    /// Every record of the file it opened was taken in (its End record read).
    pub finished: bool,
    /// Its scans found no damage: the catalog lists all of its rows.
    pub clean: bool,
    /// A bounded recording deleted it: its rows leave sampling, and it is let go of instead.
    pub evicted: bool,
}

/// Whether to open the rewrite of a shard and switch to it: found, not refused, and the file
/// read so far complete (the catalog holds all it held, to compare with) and undamaged (a
/// rewrite of a damaged file holds other rows); an evicted shard is let go of instead.
pub(crate) fn switches(c: Candidate) -> bool {
    c.rewrite && !c.refused && c.finished && c.clean && !c.evicted
}

impl Store {
    /// The rewrites to switch to, opened and scanned: (shard, the rewrite, what its scan found).
    pub fn rewrites(&mut self, mmap: bool) -> Vec<(usize, Shard, Found)> {
        let mut out = Vec::new();
        for i in 0..self.shards.len() {
            let shard = &self.shards[i];
            let Some(id) = shard.rewrite() else { continue };
            let candidate = Candidate {
                rewrite: true,
                refused: self.refused_rewrites.get(&i) == Some(&id),
                finished: shard.finished,
                clean: shard.problems.is_empty() && shard.tail.is_none() && !shard.source.is_unreadable(),
                evicted: shard.evicted || shard.deleted || shard.released,
            };
            if !switches(candidate) {
                continue;
            }
            match shard.open_rewrite(mmap) {
                Ok(Some((new, found))) if new.finished && new.problems.is_empty() && new.tail.is_none() => {
                    out.push((i, new, found))
                }
                Ok(Some((new, _))) => {
                    let why = new
                        .problems
                        .iter()
                        .chain(&new.tail)
                        .next()
                        .map_or("it is not complete".into(), |p| format!("{} at byte {}", p.why, p.offset));
                    self.refuse_rewrite(i, &why);
                }
                // Replaced again, or gone (evicted): the next refresh sees what is there.
                Ok(None) => {}
                Err(_) => {} // the cause may pass: tried again at the next refresh
            }
        }
        out
    }

    /// Reads shard `shard` from its rewrite `new` from now on (the catalog took its records in):
    /// what this process decoded or checked of the old file is forgotten (the joined runs keep its
    /// rows: they are the rewrite's too).
    pub fn switch_to(&mut self, shard: usize, new: Shard) {
        self.shards[shard].take_rewrite(new);
        let mut mask = vec![false; self.shards.len()];
        mask[shard] = true;
        self.cache.forget_chunks_of(&mask);
        if let Some(store) = self.cache.store() {
            store.retire_shard(shard);
        }
        let mut last = self.last_episode_record.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref().is_some_and(|((s, _), _)| *s == shard) {
            *last = None;
        }
    }

    /// Leaves shard `shard` on the file it opened, its rewrite not read (why), with a notice;
    /// not tried again unless another file comes under its name.
    pub fn refuse_rewrite(&mut self, shard: usize, why: &str) {
        let s = &self.shards[shard];
        let Some(id) = s.rewrite() else { return };
        self.refused_rewrites.insert(shard, id);
        let why = format!(
            "the file was replaced by its compacted rewrite, which this dataset does not read ({why}): it reads \
             on the file it opened"
        );
        self.notices.push(Problem::new(&s.path, 0, why));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_shards_switch() {
        let ready = Candidate { rewrite: true, refused: false, finished: true, clean: true, evicted: false };
        let cases = [
            ("a closed, clean shard whose rewrite was found", ready, true),
            ("no rewrite found", Candidate { rewrite: false, ..ready }, false),
            ("refused before", Candidate { refused: true, ..ready }, false),
            ("the old file not read to its end yet", Candidate { finished: false, ..ready }, false),
            ("damage in the old file", Candidate { clean: false, ..ready }, false),
            ("evicted: let go of instead", Candidate { evicted: true, ..ready }, false),
        ];
        for (name, candidate, want) in cases {
            assert_eq!(switches(candidate), want, "{name}");
        }
    }
}
