//! Every file in tests/fuzz_regressions (inputs that once broke a reader, and hostile shards)
//! opens, lenient and strict, and reads everything it lists: data or an error, never a panic.

use std::path::PathBuf;

use trajcore_core::reader::{Dataset, OpenOptions};

fn regressions() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz_regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fuzz_regressions")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "trj"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_regression_file_reads_or_errors() {
    let files = regressions();
    assert!(files.len() >= 5, "the regression files are missing");
    for path in files {
        for (strict, mmap) in [(false, true), (true, true), (false, false)] {
            let Ok(ds) = Dataset::open(&path, OpenOptions { strict, cache_bytes: 8 << 20, mmap }) else { continue };
            for episode in 0..ds.episodes().len() {
                let _ = ds.view().episode_metadata(episode);
                let recording = ds.episodes()[episode].recording;
                let names: Vec<String> = ds.recordings()[recording].columns.iter().map(|c| c.name.clone()).collect();
                for name in names {
                    let _ = ds.view().read_episode_column(episode, &name);
                }
            }
            if strict {
                assert!(ds.problems().is_empty(), "{}: strict open kept problems", path.display());
            }
        }
    }
}
