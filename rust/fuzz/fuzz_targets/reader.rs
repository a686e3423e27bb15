//! Any bytes as a shard file: opening it (lenient and strict) and reading everything it lists
//! must return data or an error, never panic, hang or allocate without bound.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use trajcore_core::reader::{Dataset, OpenOptions};

/// One file per fuzzing process, rewritten for each input.
fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("trajcore-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.join("input.trj")
    })
}

fuzz_target!(|data: &[u8]| {
    let path = path();
    std::fs::write(path, data).expect("write the input");
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
});
