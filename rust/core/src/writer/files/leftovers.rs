//! What a compaction killed part way leaves: `NAME.trj.compacting` beside its shard (0 bytes when
//! killed before the first write, which is most of the time). Readers never list it, but nothing
//! else would ever remove it, so the next recorder in that directory and `recover` remove those
//! they can prove unused: a compaction writes its file under an exclusive advisory lock, which
//! the kernel drops when the process ends however it ends (`shard::lock_while_writing`), so a
//! leftover whose lock can be taken has no writer. A file made in the last `MIN_AGE` is left
//! alone too, which covers the instant between a compaction creating its file and locking it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::format::SHARD_EXTENSION;

/// Files younger than this are never taken for leftovers.
const MIN_AGE: Duration = Duration::from_secs(2);

/// Whether `name` is a compaction's temporary file: `*.trj.compacting`.
pub fn is_compaction_leftover_name(name: &str) -> bool {
    name.strip_suffix(".compacting")
        .is_some_and(|shard| shard.len() > SHARD_EXTENSION.len() + 1 && shard.ends_with(&format!(".{SHARD_EXTENSION}")))
}

/// Removes the unused compaction leftovers of directory `dir`; the paths removed. Best effort:
/// what cannot be read or removed stays.
pub fn remove_leftovers(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_name().to_str().is_some_and(is_compaction_leftover_name) {
            continue;
        }
        let Ok(file) = File::open(&path) else { continue };
        let old = file
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| SystemTime::now().duration_since(t).is_ok_and(|age| age >= MIN_AGE));
        // Removed while holding the lock: a compaction cannot take the file meanwhile.
        if old && unused(&file) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Whether no process holds a lock on `file` (the lock taken here is dropped with `file`).
fn unused(file: &File) -> bool {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is open and owned by `file` for the whole call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_compaction_files_are_leftovers() {
        let table = [
            ("a.trj.compacting", true),
            ("shard-0001.trj.compacting", true),
            (".trj.compacting", false),
            ("a.trj", false),
            ("a.compacting", false),
            ("a.trj.compacting.x", false),
            ("a.trj.tmp", false),
        ];
        for (name, want) in table {
            assert_eq!(is_compaction_leftover_name(name), want, "{name}");
        }
    }

    #[test]
    fn unlocked_old_leftovers_go_and_locked_or_new_ones_stay() {
        use std::os::unix::io::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let old = SystemTime::now() - Duration::from_secs(60);
        let make = |name: &str, at: SystemTime| {
            let f = File::create(dir.path().join(name)).unwrap();
            f.set_modified(at).unwrap();
            f
        };
        drop(make("gone.trj.compacting", old));
        drop(make("new.trj.compacting", SystemTime::now()));
        drop(make("kept.trj", old));
        let held = make("held.trj.compacting", old);
        // SAFETY: `held` stays open for the whole test.
        assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        let removed = remove_leftovers(dir.path());
        assert_eq!(removed, vec![dir.path().join("gone.trj.compacting")]);
        for name in ["new.trj.compacting", "kept.trj", "held.trj.compacting"] {
            assert!(dir.path().join(name).exists(), "{name}");
        }
    }
}
