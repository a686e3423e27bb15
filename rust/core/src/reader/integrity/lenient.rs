//! Training reads that go on past damage (a dataset opened without `strict`).
//!
//! Opening reads the index, not the data, so a flipped byte in a chunk is found by the first
//! read that needs it. A lenient batched read then leaves the damaged episodes out and goes on:
//!
//! 1. Windows in episodes already known damaged are redrawn (see `Redraw`).
//! 2. Before its rows are first used, every Chunks record holding any row of a window's episode
//!    (any column) has its checksum verified, once per episode (a bit per episode remembers it,
//!    and each record's own flag is shared with ordinary reads). So a batch never holds a row of
//!    an episode with a damaged chunk, even a row that itself lies in an intact chunk.
//! 3. The gather runs; a chunk that fails to decode is damage too.
//!
//! Damage found in 2 or 3 marks every listed episode it affects (`damage::Affected`), is
//! returned (the caller warns), and the loop starts again at 1. The damaged set only grows, so
//! the loop ends.
//!
//! **Redraws are deterministic.** The batch is first drawn as a strict read would draw it; a
//! window in a damaged episode is then replaced by the first window drawn from a stream of its
//! own (seeded by the batch's seed and the window's position, or by the number it was asked
//! for) that lands in an intact episode. Every damaged episode a stream lands on is found
//! damaged by step 2 when it is first used, so the result depends on the seed and the file,
//! not on what earlier reads found (up to damage that step 2 cannot see: a chunk that passes
//! its checksum and fails to decode only marks its episodes once a read decodes it).

use super::damage::{Affected, Damage};
use crate::error::{Error, Result};
use crate::reader::catalog::chunk_list::Located;
use crate::reader::catalog::trust::episode_span;
use crate::reader::dataset_view::DatasetView;
use crate::reader::reads::gather::{Field, Out, Window};
use crate::reader::reads::rows::overlapping;
use crate::reader::reads::sampling::SplitMix64;
use crate::reader::reads::steps::{EpisodeSet, WindowKind};

/// Draws of one window that may land in damaged episodes before giving up (the episodes left
/// are then too few to sample from).
const MAX_REDRAWS: u64 = 10_000;

/// What a lenient read draws and reads (`Dataset::gather_lenient`): windows of `kind` of `set`,
/// replaced as `redraw` says where they fall in damaged episodes, over `fields`.
#[derive(Debug, Clone, Copy)]
pub struct Draw<'a> {
    pub set: &'a EpisodeSet,
    pub redraw: &'a Redraw,
    pub kind: WindowKind,
    pub fields: &'a [Field],
}

/// How a window that fell in a damaged episode is replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redraw {
    /// It is not: the windows were asked for by (episode, step), and damage is an error.
    Never,
    /// The batch was drawn from this seed: window i is redrawn from a stream of (seed, i).
    Seed(u64),
    /// Window i was asked for by number `numbers[i]` (a step or window number of the set): it is
    /// redrawn from a stream of that number.
    Numbers(Vec<u64>),
}

/// Two numbers mixed into one seed (SplitMix64's output function over both).
fn mix(a: u64, b: u64) -> u64 {
    SplitMix64::new(a ^ b.wrapping_mul(0xD1B5_4A32_D192_ED03).rotate_left(29)).next_u64()
}

impl Redraw {
    /// The seed of window `slot`'s own stream; `None` for `Never`.
    fn stream(&self, slot: usize) -> Option<u64> {
        match self {
            Redraw::Never => None,
            Redraw::Seed(seed) => Some(mix(*seed, slot as u64)),
            Redraw::Numbers(numbers) => numbers.get(slot).map(|&n| mix(n, u64::MAX)),
        }
    }
}

/// Draw `attempt` of a window's stream: uniform over the set's steps (transitions) or windows
/// (sequences), as sampling draws.
fn draw(set: &EpisodeSet, kind: WindowKind, stream: u64, attempt: u64) -> Result<Window> {
    let mut rng = SplitMix64::new(mix(stream, attempt));
    let (episode, start) = if kind.sequence {
        let windows = set.windows(kind.length as u64, kind.pad)?;
        if windows.num_windows() == 0 {
            return Err(Error::Invalid(format!("no window of {} steps is left to draw", kind.length)));
        }
        set.locate_window(&windows, rng.below(windows.num_windows()))?
    } else {
        if set.num_steps() == 0 {
            return Err(Error::Invalid("no step is left to draw".into()));
        }
        set.locate_step(rng.below(set.num_steps()))?
    };
    Ok(Window { episode, start })
}

impl DatasetView<'_> {
    /// `gather`, leaving damaged episodes out (see the module notes): windows that fall in them
    /// are redrawn as `redraw` says, and `windows` ends up holding the windows read. Returns the
    /// damage found (each with the episodes it newly left out), for the caller to report. With
    /// `strict`, this is `gather`.
    ///
    /// Errors: those of `gather`; `Corrupt` also when a window cannot be redrawn (`Never`, or
    /// too few intact episodes).
    pub fn gather_lenient(
        &self,
        draw: Draw<'_>,
        windows: &mut [Window],
        outs: &mut [Out<'_>],
        mut mask: Option<&mut [bool]>,
    ) -> Result<Vec<Damage>> {
        let Draw { set, redraw, kind, fields } = draw;
        let pad = kind.sequence && kind.pad;
        if self.options().strict {
            self.gather(fields, windows, kind.length, pad, outs, mask)?;
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        loop {
            self.replace_damaged(set, redraw, kind, windows)?;
            let result = self
                .check_episodes(windows)
                .and_then(|()| self.gather(fields, windows, kind.length, pad, outs, mask.as_deref_mut()));
            match result {
                Ok(()) => return Ok(found),
                Err(e @ Error::Corrupt { .. }) => {
                    found.extend(self.note_read_damage(&e));
                    // Go on only if a window's episode is now known damaged (it is redrawn):
                    // otherwise the same error would come back.
                    if !windows.iter().any(|w| self.is_damaged(w.episode)) {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Marks the listed episodes that the damage an error names affects (nothing for another
    /// kind of error, or in strict mode). Returns the damage with the episodes newly marked.
    pub fn note_read_damage(&self, error: &Error) -> Option<Damage> {
        let Error::Corrupt { path, offset, why } = error else { return None };
        if self.options().strict {
            return None;
        }
        let shard = self.catalog.shard_of(path)?;
        // Damage in an annotation sidecar is no damage to the episodes' recorded data: the read
        // of the annotation fails, naming the sidecar, and nothing is left out of other reads.
        if self.catalog.shards[shard].annotation {
            return None;
        }
        let episodes = Affected::new(self.catalog).at(shard, *offset);
        self.read_damage.add(Damage { file: path.clone(), offset: *offset, why: why.clone(), episodes, unlisted: 0 })
    }

    /// Whether a read found damage in the episode's data (lenient mode).
    pub fn is_damaged(&self, episode: usize) -> bool {
        self.read_damage.is_damaged(episode)
    }

    /// The episodes reads found damaged, ascending.
    pub fn damaged_episodes(&self) -> Vec<usize> {
        self.read_damage.damaged_episodes()
    }

    /// The damage reads found, in the order found (each with the episodes it left out).
    pub fn read_damage(&self) -> Vec<Damage> {
        self.read_damage.events()
    }

    fn replace_damaged(
        &self,
        set: &EpisodeSet,
        redraw: &Redraw,
        kind: WindowKind,
        windows: &mut [Window],
    ) -> Result<()> {
        if !self.read_damage.any() {
            return Ok(());
        }
        for (slot, w) in windows.iter_mut().enumerate() {
            if !self.is_damaged(w.episode) {
                continue;
            }
            let Some(stream) = redraw.stream(slot) else { return Err(self.damaged_error(w.episode)) };
            let mut attempt = 0;
            *w = loop {
                if attempt == MAX_REDRAWS {
                    let e = self.damaged_error(w.episode);
                    let Error::Corrupt { path, offset, why } = e else { return Err(e) };
                    let why = format!("{why}; {MAX_REDRAWS} draws in a row fell in damaged episodes: too few are left");
                    return Err(Error::Corrupt { path, offset, why });
                }
                let candidate = draw(set, kind, stream, attempt)?;
                if !self.is_damaged(candidate.episode) {
                    break candidate;
                }
                attempt += 1;
            };
        }
        Ok(())
    }

    /// The error for reading an episode a read found damaged: the damage that marked it.
    fn damaged_error(&self, episode: usize) -> Error {
        match self.read_damage.event_of(episode) {
            Some(d) => Error::corrupt(&d.file, d.offset, format!("{} (episode {episode} is damaged)", d.why)),
            None => Error::corrupt(self.path(), 0, format!("episode {episode} is damaged")),
        }
    }

    /// Verifies the Chunks records of the windows' episodes not verified yet (step 2).
    pub(in crate::reader) fn check_episodes(&self, windows: &[Window]) -> Result<()> {
        let mut todo = self.read_damage.unchecked(windows.iter().map(|w| w.episode));
        todo.sort_unstable();
        todo.dedup();
        self.prefetch_episodes(&todo)?;
        for episode in todo {
            self.check_episode_records(episode)?;
            self.read_damage.set_checked(episode);
        }
        Ok(())
    }

    /// Verifies every Chunks record holding a row of the episode, in any column.
    fn check_episode_records(&self, episode: usize) -> Result<()> {
        self.episode_chunks(episode)?.into_iter().try_for_each(|loc| self.ensure_verified(loc))
    }

    /// The chunks holding a row of the episode, in any column it recorded. Annotation columns
    /// are left out: a damaged sidecar must not take recorded data out of training reads (a
    /// read of the annotation itself checks its chunk, and names the sidecar).
    pub(in crate::reader) fn episode_chunks(&self, episode: usize) -> Result<Vec<&Located>> {
        let e = self.episode(episode)?;
        let mut chunks = Vec::new();
        for spec in self.recording(e.recording)?.own_columns() {
            let Some((first, n)) = episode_span(&e.summary, spec.timeline) else { continue };
            let list = self.chunk_list(e.recording, e.summary.lane, spec.id);
            chunks.extend(overlapping(list, first, first + n).map(|(loc, _, _)| loc));
        }
        Ok(chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_by_slot_and_number_and_are_stable() {
        let seed = Redraw::Seed(42);
        assert_eq!(seed.stream(3), Redraw::Seed(42).stream(3));
        assert_ne!(seed.stream(3), seed.stream(4));
        assert_ne!(seed.stream(0), Redraw::Seed(43).stream(0));
        let numbers = Redraw::Numbers(vec![5, 5, 6]);
        assert_eq!(numbers.stream(0), numbers.stream(1), "the same number, the same stream");
        assert_ne!(numbers.stream(0), numbers.stream(2));
        assert_eq!(numbers.stream(3), None);
        assert_eq!(Redraw::Never.stream(0), None);
    }

    #[test]
    fn draws_stay_inside_the_set() {
        let set = EpisodeSet::subset(vec![4, 9], [3, 2]);
        let steps = WindowKind { length: 1, sequence: false, pad: false };
        let seqs = WindowKind { length: 3, sequence: true, pad: false };
        for attempt in 0..200 {
            let w = draw(&set, steps, 7, attempt).unwrap();
            assert!((w.episode == 4 && w.start < 3) || (w.episode == 9 && w.start < 2), "{w:?}");
            let s = draw(&set, seqs, 7, attempt).unwrap();
            assert_eq!((s.episode, s.start), (4, 0), "only episode 4 holds 3 steps");
        }
        assert_eq!(draw(&set, steps, 1, 5).unwrap(), draw(&set, steps, 1, 5).unwrap());
        let empty = EpisodeSet::subset(vec![], []);
        assert!(draw(&empty, steps, 1, 0).is_err());
        let long = WindowKind { length: 9, sequence: true, pad: false };
        assert!(draw(&set, long, 1, 0).is_err());
    }
}
