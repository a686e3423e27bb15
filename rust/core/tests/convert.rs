//! `convert`: a recording rewritten with other codecs reads back identical, episode by episode
//! (values, masks, flags, returns, lanes, times, ids, metadata, order), with the new codecs.

mod writer_util;

use serde_json::json;
use trajcore_core::convert::{convert, ConvertOptions};
use trajcore_core::format::episode::EpisodeSummary;
use trajcore_core::reader::{Dataset, OpenOptions};
use trajcore_core::CodecSpec;
use writer_util::*;

/// Three lanes, same-step autoreset, infos (int and str, with gaps), metadata, an aborted
/// episode and episodes still running at close.
fn record(dir: &std::path::Path) -> Vec<ExpEpisode> {
    let mut h = Harness::new(dir, config(3, true, "next_step", json!({"chunk_bytes": 200})));
    h.add_info_columns();
    let mut tick = 0u64;
    h.reset(&(0..3).map(|l| env_step(l, tick)).collect::<Vec<_>>(), None);
    let mut clocks = EpisodeClocks::new(3);
    while tick < 60 {
        tick += 1;
        h.step(&clocks.steps(tick, |lane, tick| 2 + (lane + tick as usize) % 6));
        if tick.is_multiple_of(7) {
            h.set_metadata((tick % 3) as u32, json!({"tick": tick, "nested": {"l": [1, 2]}}));
        }
        if tick == 31 {
            h.abort(Some(1));
            clocks.ended(1);
        }
    }
    h.close()
}

/// Every episode of `dst` equals episode `picked[i]` of `src`: summary, every column, metadata.
fn same_episodes(src: &Dataset, dst: &Dataset, picked: &[usize], ids_kept: bool) {
    assert!(dst.problems().is_empty(), "{:?}", dst.problems());
    assert_eq!(dst.episodes().len(), picked.len());
    let key = |s: &EpisodeSummary, id: bool| {
        (s.lane, s.flags, s.length, s.episode_return.to_bits(), s.start_ns, s.end_ns, if id { s.episode_id } else { 0 })
    };
    for (j, &i) in picked.iter().enumerate() {
        let (a, b) = (&src.episodes()[i], &dst.episodes()[j]);
        assert_eq!(key(&a.summary, ids_kept), key(&b.summary, ids_kept), "episode {i}");
        for c in &src.recordings()[a.recording].columns {
            let want = src.view().read_episode_column(i, &c.name).unwrap();
            assert_eq!(dst.view().read_episode_column(j, &c.name).unwrap(), want, "episode {i} column {}", c.name);
        }
        assert_eq!(
            dst.view().episode_metadata(j).unwrap(),
            src.view().episode_metadata(i).unwrap(),
            "episode {i} metadata"
        );
    }
}

#[test]
fn converted_dataset_reads_back_identical() {
    let src_dir = tempfile::tempdir().unwrap();
    let expected = record(src_dir.path());
    let src = open(src_dir.path());
    assert_eq!(src.episodes().len(), expected.len(), "{:?}", src.problems());
    assert!(expected.iter().any(|e| !e.complete), "incomplete episodes exercised");
    assert!((0..src.episodes().len()).any(|i| src.view().episode_metadata(i).unwrap() != "{}"), "metadata exercised");

    let out = tempfile::tempdir().unwrap();
    let dst_path = out.path().join("raw");
    let raw = CodecSpec { delta: false, zstd_level: None, chunk_bytes: None, frame_stack: true };
    let opts = ConvertOptions { codecs: vec![("default".into(), raw)], chunk_bytes: Some(4096), ..Default::default() };
    let converted = convert(&src, &dst_path, &opts).unwrap();
    assert_eq!(converted.episodes, expected.len());
    assert_eq!(converted.steps, src.num_steps());
    assert!(converted.shards.iter().all(|p| p.starts_with(&dst_path) && p.exists()));
    let dst = open(&dst_path);
    // Episode ids number episodes in the order they start, which the one-by-one replay changes.
    same_episodes(&src, &dst, &(0..expected.len()).collect::<Vec<_>>(), false);
    let rec = &dst.recordings()[0];
    for c in rec.columns.iter().filter(|c| c.mask_of.is_none()) {
        assert_eq!(c.codec.zstd_level, None, "column {} is raw", c.name);
    }
    let meta: serde_json::Value = serde_json::from_str(&rec.meta_json).unwrap();
    assert_eq!(meta["metadata"], json!({"suite": "writer"}));
    assert_eq!(meta["user"]["converted_from"]["autoreset_mode"], "next_step");
    // Raw observation rows are now seen in place.
    let i = (0..dst.episodes().len()).find(|&i| dst.episodes()[i].summary.length > 2).unwrap();
    assert!(dst.view().view_episode_column(i, "obs").unwrap().is_some());

    // A subset, into a directory that exists but is empty; a non-empty one is refused.
    let subset = out.path().join("subset");
    std::fs::create_dir(&subset).unwrap();
    let opts = ConvertOptions { episodes: Some(vec![1, 4]), ..Default::default() };
    assert_eq!(convert(&src, &subset, &opts).unwrap().episodes, 2);
    let small = Dataset::open(&subset, OpenOptions::default()).unwrap();
    same_episodes(&src, &small, &[1, 4], false);
    assert!(convert(&src, &subset, &opts).is_err());
    assert!(convert(
        &src,
        &out.path().join("bad"),
        &ConvertOptions { episodes: Some(vec![999]), ..Default::default() }
    )
    .is_err());
    assert!(!out.path().join("bad").exists(), "a failed conversion leaves nothing behind");
    let leftovers: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
}
