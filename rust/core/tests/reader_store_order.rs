//! A live reader of a store prefix whose shards appear out of order: a shard listed after the
//! one that follows it. trajcore's uploads put a recording's shards up in order
//! (`objstore_uploads.rs`), but a prefix filled by other means (a copy tool putting files in
//! parallel) may not be. The later shard starts with a repeat of the earlier one's last row
//! (`CHUNK_REPEAT`), which fills in for it while the reader lacks it; once the earlier shard is
//! listed, its rows take the repeat's place and its episodes join their parts: the reader reads
//! every row, and lists what a fresh open of the whole prefix lists.
#![cfg(feature = "remote")]

mod writer_util;

use std::path::Path;
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use serde_json::json;
use trajcore_core::objstore::remote::use_store;
use trajcore_core::reader::{Dataset, OpenOptions};
use writer_util::*;

/// An episode listed: (lane, id, length, complete, its obs and action bytes).
type Listed = (u32, u64, u64, bool, Vec<u8>, Vec<u8>);

/// Every episode listed, sorted.
fn listing(ds: &Dataset) -> Vec<Listed> {
    let bytes = |i: usize, column: &str| match ds.view().read_episode_column(i, column).unwrap() {
        trajcore_core::reader::ColumnData::Fixed { bytes, .. } => bytes,
        trajcore_core::reader::ColumnData::Strings(_) => panic!("{column} is fixed-size"),
    };
    let mut out: Vec<_> = (0..ds.episodes().len())
        .map(|i| {
            let s = &ds.episodes()[i].summary;
            (s.lane, s.episode_id, s.length, s.complete(), bytes(i, "obs"), bytes(i, "action"))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_shard_listed_after_the_one_that_follows_it_is_read_whole() {
    const BUCKET: &str = "s3://reads-late";
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    use_store(BUCKET, store.clone()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let put = |path: &Path| {
        let key = ObjectPath::from(format!("run/{}", path.file_name().unwrap().to_string_lossy()));
        runtime.block_on(store.put(&key, std::fs::read(path).unwrap().into())).unwrap();
    };

    // One env, episodes of lengths 1..23 over several shards: most run over a rollover.
    let staging = tempfile::tempdir().unwrap();
    let mut h = Harness::new(staging.path(), config(1, false, "disabled", json!({"max_shard_bytes": 4096})));
    let mut tick = 0u64;
    h.reset(&[env_step(0, tick)], None);
    for k in 0..60u64 {
        h.one_env_episode(k, &mut tick);
    }
    h.close();
    let whole = open(staging.path());
    let shards = whole.shard_paths();
    assert!(shards.len() >= 4, "{} shards", shards.len());

    // Every shard but the second, then the second.
    for (i, shard) in shards.iter().enumerate() {
        if i != 1 {
            put(shard);
        }
    }
    let url = format!("{BUCKET}/run");
    let mut ds = Dataset::open(Path::new(&url), OpenOptions::default()).unwrap();
    let missing = ds.problems().iter().map(|p| p.why.clone()).collect::<Vec<_>>();
    assert!(missing.iter().any(|why| why.contains("are missing")), "{missing:?}");
    put(&shards[1]);
    ds.refresh().unwrap();
    let after: Vec<String> = ds.problems().iter().map(|p| p.why.clone()).filter(|why| !missing.contains(why)).collect();
    assert!(after.is_empty(), "{after:?}");
    assert_eq!(ds.num_steps(), whole.num_steps());
    assert_eq!(listing(&ds), listing(&whole));
}
