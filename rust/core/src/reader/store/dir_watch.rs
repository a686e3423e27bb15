//! Whether a dataset directory may have changed since it was last listed. A learner refreshes
//! at every training step; listing the directory and looking up every shard's name each time
//! would cost more than the refresh finds. A file added, renamed over or deleted changes the
//! directory's modification time, so an unchanged time says no entry changed, with one catch:
//! file systems stamp times from a coarse clock (a few milliseconds), so a change in the same
//! tick as the one seen leaves the time as it was. A time seen is trusted only once it was
//! `SETTLED` old when the listing began: any later change is then stamped later. Until then the
//! directory is listed again, but at most every `RELIST_EVERY`, not at every refresh: a
//! recording's rollover (a new shard, the eviction log renamed, the oldest shard deleted) would
//! otherwise have each of a learner's refreshes in the next `SETTLED` list the directory, most
//! of a refresh's cost over a run. A change the time hides is then found at most
//! `RELIST_EVERY` after it, well within what a learner is promised (`docs/replay-buffer.md`); a
//! change of the time is seen at once.
//!
//! Changes inside files (a shard growing, or truncated in place) do not touch the directory:
//! the reader checks the files it holds open for those (see `closed_checks`).
//!
//! The time is read through a handle on the directory held open (`modified`): a `stat` by
//! descriptor, without walking the path at every refresh. A listing gives each name's inode
//! number: a shard whose name still holds the file it opened (or its writer's compaction of
//! it, already seen) is not looked up by name (`look_up_by_name`), so a listing costs the
//! listing, not a `stat` per shard.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How old a directory's modification time must be when it is listed for an unchanged time to
/// mean an unchanged directory: well past the coarsest timestamp tick (10 ms at 100 Hz).
pub(crate) const SETTLED: Duration = Duration::from_millis(50);

/// How often a directory whose time is not `SETTLED` yet is listed again while the time stays
/// as it was: a tick of the coarsest clock file systems stamp times from (100 Hz).
pub(crate) const RELIST_EVERY: Duration = Duration::from_millis(10);

/// What the last listing saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirWatch {
    /// (modification time before the listing, when the listing began), once a listing found
    /// every shard it listed opened (a file whose header is not written yet is tried again at
    /// the next refresh, whatever the time says).
    seen: Option<(SystemTime, SystemTime)>,
}

impl DirWatch {
    /// Whether the directory, whose modification time is `mtime` (None: unknown) at `now`, must
    /// be listed again.
    pub fn must_list(&self, mtime: Option<SystemTime>, now: SystemTime) -> bool {
        match (self.seen, mtime) {
            (Some((seen, listed_at)), Some(time)) if time == seen => {
                !settled(seen, listed_at) && !now.duration_since(listed_at).is_ok_and(|ago| ago < RELIST_EVERY)
            }
            _ => true,
        }
    }

    /// A listing began at `at`, the directory's time being `mtime` just before; `complete`: it
    /// opened every shard it found.
    pub fn listed(&mut self, mtime: Option<SystemTime>, at: SystemTime, complete: bool) {
        self.seen = mtime.filter(|_| complete).map(|m| (m, at));
    }
}

/// The modification time of the directory `root` (None: unknown), through the handle `held`
/// (opened at the first call). A directory deleted since it was opened (no link left) is
/// opened again by its path: one made under the same name is then the one watched.
pub(crate) fn modified(held: &mut Option<File>, root: &Path) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let still_there = |m: &std::fs::Metadata| m.nlink() > 0;
    if let Some(m) = held.as_ref().and_then(|f| f.metadata().ok()).filter(still_there) {
        return m.modified().ok();
    }
    *held = File::open(root).ok();
    held.as_ref()?.metadata().and_then(|m| m.modified()).ok()
}

/// Whether a shard is looked up by name (a `stat` of its path: replaced, deleted, or compacted
/// by its writer?), `dir_listed`: the directory was listed (it may have changed);
/// `listed_ino`: the inode number the listing found under the shard's name (None: no such
/// name); `known`: the inode numbers of the files it is known as (the one it opened, and its
/// compaction once seen). The listing is of the shard's own directory, so its device is theirs.
pub(crate) fn look_up_by_name(dir_listed: bool, listed_ino: Option<u64>, known: &[u64]) -> bool {
    dir_listed && !listed_ino.is_some_and(|ino| known.contains(&ino))
}

/// Whether a modification time `mtime` was at least `SETTLED` old at `at`.
fn settled(mtime: SystemTime, at: SystemTime) -> bool {
    at.duration_since(mtime).is_ok_and(|age| age >= SETTLED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_listed_again_unless_its_time_is_unchanged_and_was_settled() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let ms = |n: u64| Duration::from_millis(n);
        // (case, last listing: (time seen, when it began, complete), time now, ms since it began, list?)
        type Row = (&'static str, Option<(SystemTime, SystemTime, bool)>, Option<SystemTime>, u64, bool);
        let table: &[Row] = &[
            ("never listed", None, Some(t0), 0, true),
            ("unchanged, settled when listed", Some((t0, t0 + ms(60), true)), Some(t0), 1, false),
            ("changed since", Some((t0, t0 + ms(60), true)), Some(t0 + ms(70)), 1, true),
            ("changed since, listed just before", Some((t0, t0 + ms(5), true)), Some(t0 + ms(6)), 1, true),
            (
                "unchanged, fresh when listed (same tick?), listed a tick ago",
                Some((t0, t0 + ms(5), true)),
                Some(t0),
                10,
                true,
            ),
            (
                "unchanged, fresh when listed, listed less than a tick ago",
                Some((t0, t0 + ms(5), true)),
                Some(t0),
                9,
                false,
            ),
            (
                "a time in the future when listed (clock skew)",
                Some((t0 + ms(500), t0, true)),
                Some(t0 + ms(500)),
                20,
                true,
            ),
            ("a file not started yet when listed", Some((t0, t0 + ms(60), false)), Some(t0), 1, true),
            ("time unknown now", Some((t0, t0 + ms(60), true)), None, 1, true),
        ];
        for (name, listed, mtime, ago, want) in table {
            let mut watch = DirWatch::default();
            let mut now = t0 + ms(*ago);
            if let Some((seen, at, complete)) = listed {
                watch.listed(Some(*seen), *at, *complete);
                now = *at + ms(*ago);
            }
            assert_eq!(watch.must_list(*mtime, now), *want, "{name}");
        }
        let mut watch = DirWatch::default();
        watch.listed(None, t0, true);
        assert!(watch.must_list(Some(t0), t0), "no time when listed");
        // A clock set back since the listing: listed again (no trust in an interval it cannot measure).
        let mut watch = DirWatch::default();
        watch.listed(Some(t0), t0 + ms(5), true);
        assert!(watch.must_list(Some(t0), t0), "the clock went back");
    }

    #[test]
    fn which_shards_a_listing_looks_up_by_name() {
        type Row = (&'static str, bool, Option<u64>, &'static [u64], bool);
        let table: &[Row] = &[
            ("the directory not listed", false, None, &[7], false),
            ("listed: the file it opened under its name", true, Some(7), &[7], false),
            ("listed: its compaction, already seen", true, Some(9), &[7, 9], false),
            ("listed: another file under its name (replaced, or compacted)", true, Some(8), &[7], true),
            ("listed: no such name (deleted)", true, None, &[7], true),
            ("a store prefix (no inode numbers)", true, None, &[], true),
        ];
        for &(name, listed, ino, known, want) in table {
            assert_eq!(look_up_by_name(listed, ino, known), want, "{name}");
        }
    }

    #[test]
    fn the_time_follows_the_directory_under_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("d");
        std::fs::create_dir(&root).unwrap();
        let mut held = None;
        let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        assert_eq!(modified(&mut held, &root), Some(mtime(&root)));
        assert!(held.is_some(), "the handle is kept");
        std::fs::write(root.join("a.trj"), b"x").unwrap();
        assert_eq!(modified(&mut held, &root), Some(mtime(&root)), "a file added: the new time");
        // Deleted and made again under the same name: the new directory is the one watched.
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(modified(&mut held, &root), None, "no directory");
        std::fs::create_dir(&root).unwrap();
        assert_eq!(modified(&mut held, &root), Some(mtime(&root)));
    }
}
