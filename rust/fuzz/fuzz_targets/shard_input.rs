//! What the reader targets share: the file each input is written to (one per fuzzing process
//! and target, so parallel jobs never read each other's inputs), and reading it every way.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use trajcore_core::reader::{Dataset, OpenOptions};

/// `<temp>/trajcore-fuzz-<target>-<pid>/input.trj`, made on first use.
pub fn path(target: &str) -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("trajcore-fuzz-{target}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.join("input.trj")
    })
}

/// Opens the file lenient, strict and without a map, and reads everything it lists: metadata
/// and every column of its first 32 episodes. Any result is fine; a panic or a hang is not.
pub fn read_everything(path: &Path) {
    // Through a map and through positioned reads alike.
    for (strict, mmap) in [(false, true), (true, true), (false, false)] {
        let Ok(ds) = Dataset::open(path, OpenOptions { strict, cache_bytes: 8 << 20, mmap }) else { continue };
        let _ = ds.column_stats();
        let _ = ds.timelog(0);
        for episode in 0..ds.episodes().len().min(32) {
            let _ = ds.view().episode_metadata(episode);
            let recording = ds.episodes()[episode].recording;
            let names: Vec<String> = ds.recordings()[recording].columns.iter().map(|c| c.name.clone()).collect();
            for name in names {
                let _ = ds.view().read_episode_column(episode, &name);
            }
        }
    }
}
