//! A directory that holds no shard is no dataset: an empty folder, a typo, or the parent folder
//! of several datasets. The tools and the Python reader say so (`Error::NoShard`, a
//! `FileNotFoundError` in Python and exit status 2 in the CLI) instead of reading it as a dataset
//! of 0 episodes, so a nightly `verify` cannot stay green while checking nothing. A parent
//! folder's message names the folders below it that hold shards, to verify or open each.
//! (`Dataset::open` itself still opens it, for a reader that waits for a recorder to start.)

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::SHARD_EXTENSION;

/// Subfolders named in the message at most.
const SHOWN: usize = 8;

/// `Error::NoShard` when the opened dataset is a directory without a shard.
pub(crate) fn check_dataset(ds: &crate::reader::Dataset) -> Result<()> {
    check(ds.path(), ds.path().is_dir() || crate::objstore::url::url_of(ds.path()).is_some(), ds.shard_paths().len())
}

/// `Error::NoShard` when `path` is a directory and `shards` (the shards found in it) is 0.
pub fn check(path: &Path, is_dir: bool, shards: usize) -> Result<()> {
    if !is_dir || shards > 0 {
        return Ok(());
    }
    let mut below: Vec<String> = std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir() && holds_shard(&e.path()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    below.sort();
    Err(Error::NoShard { path: path.to_path_buf(), why: why(&below) })
}

fn holds_shard(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| e.path().extension().is_some_and(|x| x == SHARD_EXTENSION) && e.path().is_file())
    })
}

/// What the error says, given the subfolders that hold shards.
fn why(below: &[String]) -> String {
    let none = format!("no trajcore shard (*.{SHARD_EXTENSION}) found in this folder");
    match below {
        [] => none,
        [one] => format!("{none}; its folder '{one}' holds one: give that folder"),
        many => {
            let shown: Vec<&str> = many.iter().take(SHOWN).map(String::as_str).collect();
            let more = if many.len() > SHOWN { format!(" and {} more", many.len() - SHOWN) } else { String::new() };
            format!(
                "{none}; it is the parent folder of {} datasets ({}{more}): give one of them",
                many.len(),
                shown.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_it_found_below() {
        let names = |n: usize| (0..n).map(|i| format!("run{i}")).collect::<Vec<_>>();
        let table: [(Vec<String>, &str); 4] = [
            (vec![], "found in this folder"),
            (names(1), "its folder 'run0' holds one"),
            (names(3), "parent folder of 3 datasets (run0, run1, run2)"),
            (names(10), "parent folder of 10 datasets (run0, run1, run2, run3, run4, run5, run6, run7 and 2 more)"),
        ];
        for (below, want) in table {
            assert!(why(&below).contains(want), "{:?}: {}", below, why(&below));
        }
    }

    #[test]
    fn a_folder_without_shards_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check(dir.path(), false, 0).is_ok() && check(dir.path(), true, 1).is_ok());
        std::fs::create_dir(dir.path().join("b")).unwrap();
        std::fs::write(dir.path().join("b").join("x.trj"), b"").unwrap();
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let e = check(dir.path(), true, 0).unwrap_err();
        assert!(matches!(&e, Error::NoShard { why, .. } if why.contains("folder 'b'")), "{e}");
    }
}
