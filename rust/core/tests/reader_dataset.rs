//! Directories of shards: recordings, rows running on across shards, missing and duplicate
//! shards, and `refresh` while a writer appends.

mod common;

use std::io::Write;
use std::path::Path;

use common::*;
use trajcore_core::reader::{Dataset, OpenOptions, SharedDataset};
use trajcore_core::{Error, Timeline};

fn lenient() -> OpenOptions {
    OpenOptions::default()
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Episodes of one recording as the dataset lists them, checked against its simulator.
fn check_recording(ds: &Dataset, recording: usize, sim: &Sim, expected: &[&SimEpisode]) {
    let mine: Vec<usize> = (0..ds.episodes().len()).filter(|&i| ds.episodes()[i].recording == recording).collect();
    assert_eq!(mine.len(), expected.len(), "recording {recording}: {:?}", ds.problems());
    for (&i, e) in mine.iter().zip(expected) {
        let s = &ds.episodes()[i].summary;
        assert_eq!(
            (s.lane, s.obs_first_row, s.step_first_row, s.length),
            (e.lane, e.obs_first_row, e.step_first_row, e.length)
        );
        for spec in &sim.columns {
            assert_eq!(ds.view().read_episode_column(i, &spec.name).unwrap(), sim.expected(e, spec), "{}", spec.name);
        }
    }
}

/// Two lanes, episodes running across shard boundaries, a column added in the second shard.
fn three_shard_sim(id: u8) -> (Sim, Vec<Vec<u8>>) {
    let mut sim = Sim::new(id, 2, standard_columns(), 5);
    sim.steps(0, 4);
    sim.steps(1, 2);
    sim.end_episode(0, r#"{"n": 0}"#);
    sim.steps(1, 3);
    sim.steps(0, 2);
    sim.next_shard(); // both lanes mid-episode
    sim.steps(1, 4);
    sim.end_episode(1, "");
    sim.add_masked("info/late", "int32", &[], Timeline::Obs, ZSTD);
    sim.steps(0, 3);
    sim.end_episode(0, "");
    sim.steps(0, 6);
    sim.steps(1, 1);
    sim.next_shard(); // lane 0 mid-episode
    sim.steps(0, 1);
    sim.end_episode(0, "");
    sim.steps(1, 2);
    sim.end_episode(1, "");
    sim.steps(0, 3);
    sim.end_episode(0, "");
    let shards = sim.finish(true);
    (sim, shards)
}

#[test]
fn rows_run_on_across_the_shards_of_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, shards) = three_shard_sim(1);
    for (i, bytes) in shards.iter().enumerate() {
        write(&dir.path().join(format!("rec-{i:05}.trj")), bytes);
    }
    let ds = Dataset::open(dir.path(), OpenOptions { strict: true, ..lenient() }).unwrap();
    assert_eq!(ds.shard_paths().len(), 3);
    assert_eq!(ds.recordings()[0].shards, vec![0, 1, 2]);
    check_values(&ds, &sim, &sim.listed());
    // The Episode record of an episode that began in shard 0 is in shard 1.
    let shards_of: Vec<usize> = ds.episodes().iter().map(|e| e.shard).collect();
    assert_eq!(shards_of, vec![0, 1, 1, 2, 2, 2]);
    assert_eq!(ds.episodes()[1].summary.obs_first_row, 0, "lane 1's first episode");
    // The late column reads as zeros before it was added.
    let late = ds.column_id(0, "info/late").unwrap();
    assert_eq!(ds.recordings()[0].columns[late as usize].name, "info/late");

    // Opening the last shard alone (this simulated writer writes no parts at rollovers, unlike
    // the real one): episodes whose rows began in a shard not opened are left out, reported.
    let one = Dataset::open(&dir.path().join("rec-00002.trj"), lenient()).unwrap();
    assert_eq!(one.episodes().len(), 1, "{:?}", one.problems());
    assert_eq!(one.problems().iter().filter(|p| p.why.contains("in no chunk")).count(), 2, "{:?}", one.problems());
    check_recording(&one, 0, &sim, &sim.listed()[5..]);
}

#[test]
fn recordings_are_grouped_and_episodes_follow_file_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, a_shards) = three_shard_sim(1);
    let mut b = Sim::new(2, 1, standard_columns(), 3);
    b.steps(0, 5);
    b.end_episode(0, r#"{"b": 1}"#);
    let b_shards = b.finish(false);
    // Names interleave the recordings: a0, b0, a1, a2.
    write(&dir.path().join("1-a.trj"), &a_shards[0]);
    write(&dir.path().join("2-b.trj"), &b_shards[0]);
    write(&dir.path().join("3-a.trj"), &a_shards[1]);
    write(&dir.path().join("4-a.trj"), &a_shards[2]);
    let ds = Dataset::open(dir.path(), lenient()).unwrap();
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    assert_eq!(ds.recordings().len(), 2);
    assert_eq!(ds.recordings()[0].id, [1; 16]);
    assert_eq!(ds.recordings()[1].id, [2; 16]);
    assert_eq!(ds.recordings()[0].shards, vec![0, 2, 3]);
    assert_eq!(ds.recordings()[1].shards, vec![1]);
    let order: Vec<(usize, usize)> = ds.episodes().iter().map(|e| (e.recording, e.shard)).collect();
    assert_eq!(order, vec![(0, 0), (1, 1), (0, 2), (0, 2), (0, 3), (0, 3), (0, 3)]);
    check_recording(&ds, 0, &a, &a.listed());
    check_recording(&ds, 1, &b, &b.listed());
    assert_eq!(ds.view().episode_metadata(1).unwrap(), r#"{"b": 1}"#);
    let steps: u64 = a.listed().iter().chain(b.listed().iter()).map(|e| e.length).sum();
    assert_eq!(ds.num_steps(), steps);
}

#[test]
fn a_missing_shard_drops_only_the_episodes_that_ran_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, shards) = three_shard_sim(1);
    write(&dir.path().join("rec-00000.trj"), &shards[0]);
    write(&dir.path().join("rec-00002.trj"), &shards[2]);
    let ds = Dataset::open(dir.path(), lenient()).unwrap();
    // Kept: lane 0's first episode (all rows in shard 0) and its last (all rows in shard 2).
    let listed = sim.listed();
    let kept: Vec<&SimEpisode> = vec![listed[0], listed[5]];
    check_recording(&ds, 0, &sim, &kept);
    assert!(ds.problems().iter().any(|p| p.why.contains("shard(s) 1..1") && p.why.contains("missing")));
    let dropped = ds.problems().iter().filter(|p| p.why.contains("left out")).count();
    assert_eq!(dropped, 2, "shard 2 holds two episodes that began in shard 1: {:?}", ds.problems());
    assert!(matches!(Dataset::open(dir.path(), OpenOptions { strict: true, ..lenient() }), Err(Error::Corrupt { .. })));
}

#[test]
fn a_copied_shard_is_left_out_once() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, shards) = three_shard_sim(1);
    for (i, bytes) in shards.iter().enumerate() {
        write(&dir.path().join(format!("rec-{i}.trj")), bytes);
    }
    write(&dir.path().join("z-copy.trj"), &shards[1]);
    let mut ds = Dataset::open(dir.path(), lenient()).unwrap();
    check_values(&ds, &sim, &sim.listed());
    assert_eq!(ds.problems().len(), 1, "{:?}", ds.problems());
    assert!(ds.problems()[0].file.ends_with("z-copy.trj"));
    assert_eq!(ds.refresh().unwrap(), 0);
    assert_eq!(ds.problems().len(), 1);
}

/// The file grows record by record (and through half-written records); after every `refresh`
/// the dataset equals a fresh open of the same bytes.
#[test]
fn refresh_follows_a_growing_file() {
    let dir = tempfile::tempdir().unwrap();
    for clean in [true, false] {
        let (sim, bytes) = small_sim(clean);
        let path = dir.path().join(format!("grow-{clean}.trj"));
        let _ = std::fs::remove_file(&path);
        append(&path, &bytes[..64]);
        let mut ds = Dataset::open(&path, lenient()).unwrap();
        assert_eq!(ds.episodes().len(), 0);
        let mut size = 64;
        for &(_, end) in &sim.shards[0].records {
            let end = end as usize;
            // First half a record: reported as unfinished, then completed.
            let half = size + (end - size) / 2;
            append(&path, &bytes[size..half]);
            let before = ds.episodes().len();
            assert_eq!(ds.refresh().unwrap(), 0);
            assert_eq!(ds.episodes().len(), before);
            assert!(ds.problems().iter().any(|p| p.why.contains("unfinished")), "{:?}", ds.problems());
            append(&path, &bytes[half..end]);
            let added = ds.refresh().unwrap();
            size = end;
            assert!(ds.problems().is_empty(), "{:?}", ds.problems());
            let expected = sim.listed().into_iter().filter(|e| e.deps.iter().all(|&(_, _, d)| d <= end as u64)).count();
            assert_eq!(ds.episodes().len(), expected);
            assert_eq!(added, ds.episodes().len() - before);
            let fresh = Dataset::open(&path, lenient()).unwrap();
            let summaries = |d: &Dataset| d.episodes().iter().map(|e| e.summary.clone()).collect::<Vec<_>>();
            assert_eq!(summaries(&ds), summaries(&fresh), "after growing to {end}");
            assert_eq!(ds.recordings()[0].columns, fresh.recordings()[0].columns);
        }
        check_values(&ds, &sim, &sim.listed());
        assert_eq!(ds.refresh().unwrap(), 0);
    }
}

#[test]
fn refresh_picks_up_new_shard_files() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, shards) = three_shard_sim(1);
    write(&dir.path().join("rec-00000.trj"), &shards[0]);
    // A writer just created the next shard: no header yet.
    write(&dir.path().join("rec-00001.trj"), b"");
    let mut ds = Dataset::open(dir.path(), OpenOptions { strict: true, ..lenient() }).unwrap();
    assert_eq!(ds.episodes().len(), 1);
    assert_eq!(ds.shard_paths().len(), 1);
    append(&dir.path().join("rec-00001.trj"), &shards[1][..40]);
    assert_eq!(ds.refresh().unwrap(), 0);
    append(&dir.path().join("rec-00001.trj"), &shards[1][40..]);
    assert_eq!(ds.refresh().unwrap(), 2);
    write(&dir.path().join("rec-00002.trj"), &shards[2]);
    assert_eq!(ds.refresh().unwrap(), 3);
    assert_eq!(ds.shard_paths().len(), 3);
    check_values(&ds, &sim, &sim.listed());
    assert_eq!(ds.refresh().unwrap(), 0);
}

/// Views handed out before a refresh stay valid after it remaps the grown file.
#[test]
fn views_survive_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(3, 1, standard_columns(), 100);
    sim.steps(0, 8);
    sim.end_episode(0, "");
    sim.flush();
    let cut = sim.shards[0].offset() as usize;
    sim.steps(0, 30);
    sim.end_episode(0, "");
    let bytes = sim.finish(true).remove(0);
    let path = dir.path().join("views.trj");
    append(&path, &bytes[..cut]);
    let mut ds = Dataset::open(&path, lenient()).unwrap();
    let (_, _, view) = ds.view().view_episode_column(0, "reward").unwrap().unwrap();
    let before = view.bytes().to_vec();
    append(&path, &bytes[cut..]);
    assert_eq!(ds.refresh().unwrap(), 1);
    assert_eq!(view.bytes(), &before[..]);
    check_values(&ds, &sim, &sim.listed());
}

/// A dataset shared by readers: its refresh says what it added with the listing's counts, and
/// a batch plan is made once while the dataset's plans hold.
#[test]
fn a_shared_dataset_refreshes_with_counts_and_makes_a_plan_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_, shards) = three_shard_sim(1);
    write(&dir.path().join("rec-00000.trj"), &shards[0]);
    let shared = SharedDataset::<usize>::new(Dataset::open(dir.path(), lenient()).unwrap());
    let mut made = 0;
    let mut plan = |keys: Option<Vec<String>>| {
        shared.plan(keys, None, |d, _, _| -> Result<usize, Error> {
            made += 1;
            Ok(d.episodes().len())
        })
    };
    assert_eq!(*plan(None).unwrap(), 1);
    assert_eq!(*plan(None).unwrap(), 1, "the plan made first");
    assert_eq!(*plan(Some(vec!["observation".into()])).unwrap(), 1);
    assert_eq!(made, 2);
    assert_eq!(shared.refresh().unwrap(), (0, 0, 0));
    write(&dir.path().join("rec-00001.trj"), &shards[1]);
    assert_eq!(shared.refresh().unwrap(), (2, 0, 0));
    assert_eq!(shared.read(|d| d.episodes().len()), 3);
    std::fs::remove_file(dir.path().join("rec-00000.trj")).unwrap();
    let (added, problems, notices) = shared.refresh().unwrap();
    assert_eq!((added, problems), (0, 0));
    assert!(notices >= 1, "a deleted shard is news: {notices}");
}
