//! Annotations without Python: a recording annotated through `annotate` reads back the values
//! on their episodes' rows, as masked custom data; the shards' bytes do not change; a second
//! annotation of the name is a later version readers take; refusals name the episode.

mod writer_util;

use serde_json::json;
use trajcore_core::annotate::{annotate, Annotation};
use trajcore_core::reader::{ColumnData, Dataset, OpenOptions};
use trajcore_core::DType;
use writer_util::*;

fn record(dir: &std::path::Path) {
    let mut h = Harness::new(dir, config(3, true, "next_step", json!({"chunk_bytes": 200})));
    let mut tick = 0u64;
    h.reset(&(0..3).map(|l| env_step(l, tick)).collect::<Vec<_>>(), None);
    let mut clocks = EpisodeClocks::new(3);
    while tick < 60 {
        tick += 1;
        h.step(&clocks.steps(tick, |lane, tick| 2 + (lane + tick as usize) % 6));
    }
    h.close();
}

fn shard_bytes(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "trj"))
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

/// Values that say which episode and step they are: `1000 * episode + step + offset`.
fn values(ds: &Dataset, offset: f64) -> Vec<Vec<u8>> {
    let rows = |i: usize, n: u64| (0..n).flat_map(move |t| (1000.0 * i as f64 + t as f64 + offset).to_le_bytes());
    ds.episodes().iter().enumerate().map(|(i, e)| rows(i, e.summary.length).collect()).collect()
}

fn write(dir: &std::path::Path, values: &[Vec<u8>]) -> trajcore_core::Result<Vec<std::path::PathBuf>> {
    let given = values.iter().enumerate().map(|(i, v)| (i, v.as_slice())).collect();
    annotate(dir, &Annotation { name: "score", dtype: "float64", shape: &[], per_episode: false, values: given })
}

#[test]
fn annotations_read_back_on_their_rows_and_later_versions_replace_earlier_ones() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let before = shard_bytes(dir.path());
    let ds = Dataset::open(dir.path(), OpenOptions::default()).unwrap();
    assert!(ds.episodes().len() > 10);
    let first = values(&ds, 0.0);
    write(dir.path(), &first).unwrap();
    let second = values(&ds, 0.5);
    write(dir.path(), &second).unwrap();
    assert_eq!(shard_bytes(dir.path()), before);

    let ds = Dataset::open(dir.path(), OpenOptions::default()).unwrap();
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    let files = ds.annotations();
    assert_eq!(files.iter().map(|f| (f.version, f.taken)).collect::<Vec<_>>(), vec![(1, false), (2, true)]);
    for (i, want) in second.iter().enumerate() {
        let ColumnData::Fixed { dtype, bytes, .. } = ds.view().read_episode_column(i, "data/score").unwrap() else {
            panic!("a fixed column")
        };
        assert_eq!((dtype, &bytes), (DType::F64, want), "episode {i}");
        let ColumnData::Fixed { bytes: mask, .. } = ds.view().read_episode_column(i, "data/_score").unwrap() else {
            panic!("a fixed column")
        };
        assert!(mask.iter().all(|&m| m == 1), "episode {i}");
    }
}

#[test]
fn refusals_name_the_episode_and_the_lengths() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let ds = Dataset::open(dir.path(), OpenOptions::default()).unwrap();
    let mut v = values(&ds, 0.0);
    let n = ds.episodes()[2].summary.length;
    let cut = v[2].len() - 8;
    v[2].truncate(cut);
    let e = write(dir.path(), &v).unwrap_err().to_string();
    assert!(e.contains(&format!("episode 2: {} values for its {n} steps", n - 1)), "{e}");
    v[2].push(0);
    let e = write(dir.path(), &v).unwrap_err().to_string();
    assert!(e.contains("episode 2:") && e.contains("not whole rows of 8"), "{e}");
    let shard = shard_bytes(dir.path()).remove(0).0;
    assert!(write(&shard, &values(&ds, 0.0)).unwrap_err().to_string().contains("local dataset directory"));
    assert!(ds.annotations().is_empty());
}
