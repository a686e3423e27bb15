//! Reading back what was written: fixed and str columns across chunk boundaries and codecs,
//! clean and unclean files, zero-copy views, concurrent reads.

mod common;

use common::*;
use trajcore_core::format::codec::{pipeline, CODEC_DELTA, CODEC_ZSTD};
use trajcore_core::reader::{ColumnData, ColumnRows, Dataset, OpenOptions};
use trajcore_core::{Error, Timeline};

fn open(path: &std::path::Path) -> Dataset {
    Dataset::open(path, OpenOptions::default()).unwrap()
}

#[test]
fn clean_file_round_trips_every_codec() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, bytes) = small_sim(true);
    let path = dir.path().join("a.trj");
    write(&path, &bytes);
    let ds = open(&path);
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    check_values(&ds, &sim, &sim.listed());
    let expected_codecs = [0, pipeline(&[CODEC_ZSTD]), pipeline(&[CODEC_DELTA, CODEC_ZSTD])];
    for codec in expected_codecs {
        assert!(sim.codecs.contains(&codec), "codec {codec:#x} not exercised: {:?}", sim.codecs);
    }
    assert_eq!(ds.num_steps(), 3 + 1 + 5 + 2);
    assert_eq!(ds.recordings().len(), 1);
    let rec = &ds.recordings()[0];
    assert_eq!(rec.id, [7; 16]);
    assert_eq!(rec.columns.len(), sim.columns.len());
    assert!(rec.meta_json.contains("\"sim\": 7"));
    assert_eq!(ds.shard_paths(), vec![path.clone()]);
    assert_eq!(ds.path(), path.as_path());
    let summary = &ds.episodes()[2].summary;
    assert!(summary.complete() && summary.terminated() && !summary.truncated());
    assert_eq!(summary.episode_return, 2.5);
}

#[test]
fn unclean_files_open_like_clean_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, clean) = small_sim(true);
    let (_, unclean) = small_sim(false);
    assert!(unclean.len() < clean.len());
    write(&dir.path().join("clean.trj"), &clean);
    write(&dir.path().join("unclean.trj"), &unclean);
    let a = open(&dir.path().join("clean.trj"));
    let b = open(&dir.path().join("unclean.trj"));
    assert!(b.problems().is_empty(), "{:?}", b.problems());
    check_values(&b, &sim, &sim.listed());
    let summaries = |ds: &Dataset| ds.episodes().iter().map(|e| e.summary.clone()).collect::<Vec<_>>();
    assert_eq!(summaries(&a), summaries(&b));
    assert_eq!(a.recordings()[0].columns, b.recordings()[0].columns);
    assert_eq!(a.recordings()[0].meta_json, b.recordings()[0].meta_json);

    // No index record at all: everything decoded by hopping.
    let mut sim = Sim::new(3, 2, standard_columns(), 5);
    for round in 0..4 {
        sim.steps(round % 2, 3 + round as u64);
        sim.end_episode(round % 2, "");
        sim.flush();
    }
    let bytes = sim.finish(false).remove(0);
    let path = dir.path().join("noindex.trj");
    write(&path, &bytes);
    let ds = open(&path);
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    check_values(&ds, &sim, &sim.listed());
}

/// Several lanes interleaved, small chunks (many boundaries), a column added midway, episodes
/// running across index checkpoints; every row range read back through `read_rows`.
#[test]
fn rows_across_chunks_lanes_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(9, 3, standard_columns(), 7);
    sim.max_chunks_per_record = 5;
    for round in 0..30u64 {
        let lane = (round % 3) as u32;
        sim.steps(lane, 1 + round % 6);
        if round % 4 == 3 {
            sim.end_episode(lane, &format!(r#"{{"round": {round}}}"#));
        }
        if round % 5 == 4 {
            sim.flush();
        }
        if round % 9 == 8 {
            sim.index();
        }
        if round == 13 {
            sim.add_masked("info/late", "float32", &[2], Timeline::Step, ZSTD);
        }
    }
    for lane in 0..3 {
        sim.steps(lane, 2);
        sim.end_episode(lane, "");
    }
    let bytes = sim.finish(true).remove(0);
    let path = dir.path().join("lanes.trj");
    write(&path, &bytes);
    let ds = open(&path);
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    check_values(&ds, &sim, &sim.listed());

    // Arbitrary ranges, including rows past anything written (zeros).
    for spec in sim.columns.clone() {
        for lane in 0..3u32 {
            for (first, n) in [(0u64, 1u64), (0, 40), (5, 9), (6, 1), (13, 20), (30, 60), (1000, 3), (7, 0)] {
                let rows = ColumnRows { recording: 0, lane, column: spec.id, first_row: first, n_rows: n };
                if spec.dtype == "str" {
                    let got = ds.view().read_strings(rows).unwrap();
                    assert_eq!(got.len() as u64, n);
                    if first >= 1000 {
                        assert!(got.iter().all(String::is_empty), "rows never written read as empty strings");
                    }
                } else {
                    let mut out = vec![0xAAu8; n as usize * spec.row_bytes().unwrap()];
                    ds.view().read_rows(rows, &mut out).unwrap();
                    if first >= 1000 {
                        assert!(out.iter().all(|&b| b == 0), "rows never written read as zeros");
                    }
                }
            }
        }
    }
}

/// `read_rows` over a range that spans several episodes equals the concatenation of the rows.
#[test]
fn read_rows_matches_raw_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(1, 1, standard_columns(), 6);
    for len in [4u64, 9, 2, 11] {
        sim.steps(0, len);
        sim.end_episode(0, "");
    }
    let bytes = sim.finish(true).remove(0);
    let path = dir.path().join("rows.trj");
    write(&path, &bytes);
    let ds = open(&path);
    let obs_rows = 4 + 9 + 2 + 11 + 4;
    for spec in &sim.columns {
        let total = if spec.timeline == Timeline::Obs { obs_rows } else { obs_rows - 4 };
        for first in 0..total {
            for n in [1u64, 5, 13, total - first] {
                let n = n.min(total - first);
                let rows = ColumnRows { recording: 0, lane: 0, column: spec.id, first_row: first, n_rows: n };
                if spec.dtype == "str" {
                    let got = ds.view().read_strings(rows).unwrap();
                    let want: Vec<String> = (first..first + n).map(|r| str_row(spec, 0, r)).collect();
                    assert_eq!(got, want);
                } else {
                    let mut out = vec![0u8; n as usize * spec.row_bytes().unwrap()];
                    ds.view().read_rows(rows, &mut out).unwrap();
                    assert_eq!(out, raw_rows(spec, 0, first, n), "{} rows {first}+{n}", spec.name);
                }
            }
        }
        // Past the end: zeros / empty strings.
        let past_end = ColumnRows { recording: 0, lane: 0, column: spec.id, first_row: total - 1, n_rows: 3 };
        if spec.dtype == "str" {
            assert_eq!(ds.view().read_strings(past_end).unwrap()[1..], ["", ""]);
        } else {
            let row = spec.row_bytes().unwrap();
            let mut out = vec![1u8; 3 * row];
            ds.view().read_rows(past_end, &mut out).unwrap();
            assert_eq!(out[..row], raw_rows(spec, 0, total - 1, 1)[..]);
            assert!(out[row..].iter().all(|&b| b == 0));
            // A lane with no rows at all.
            ds.view().read_rows(ColumnRows { lane: 5, first_row: 0, ..past_end }, &mut out).unwrap();
            assert!(out.iter().all(|&b| b == 0));
        }
    }
}

#[test]
fn raw_columns_are_viewed_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(2, 1, standard_columns(), 1000);
    sim.steps(0, 20);
    sim.end_episode(0, "");
    sim.steps(0, 5);
    sim.end_episode(0, "");
    let bytes = sim.finish(true).remove(0);
    let path = dir.path().join("view.trj");
    write(&path, &bytes);
    let ds = open(&path);
    let (dtype, shape, view) = ds.view().view_episode_column(1, "action").unwrap().expect("raw column is viewable");
    assert_eq!(dtype.name(), "int64");
    assert_eq!(shape, vec![5]);
    let ColumnData::Fixed { bytes, .. } = ds.view().read_episode_column(1, "action").unwrap() else { panic!() };
    assert_eq!(view.bytes(), &bytes[..]);
    assert_eq!(view.bytes().as_ptr() as usize % 8, 0, "aligned for int64");
    assert!(ds.view().view_episode_column(1, "obs").unwrap().is_none(), "zstd column is not viewable");
    assert!(ds.view().view_episode_column(1, "info/msg").unwrap().is_none(), "str column is not viewable");
    // The view outlives the dataset.
    drop(ds);
    assert_eq!(view.bytes(), &bytes[..]);
}

#[test]
fn read_errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = small_sim(true);
    let path = dir.path().join("a.trj");
    write(&path, &bytes);
    let ds = open(&path);
    let mut out = vec![0u8; 5];
    let rows = |recording, column, first_row, n_rows| ColumnRows { recording, lane: 0, column, first_row, n_rows };
    assert!(matches!(ds.view().read_rows(rows(0, 0, 0, 1), &mut out), Err(Error::Invalid(_))));
    assert!(matches!(ds.view().read_rows(rows(0, 5, 0, 1), &mut out), Err(Error::Schema { .. })), "str column");
    assert!(matches!(ds.view().read_strings(rows(0, 0, 0, 1)), Err(Error::Schema { .. })), "fixed column");
    assert!(matches!(ds.view().read_rows(rows(1, 0, 0, 1), &mut out), Err(Error::OutOfRange(_))), "recording");
    assert!(matches!(ds.view().read_rows(rows(0, 99, 0, 1), &mut out), Err(Error::Invalid(_))), "column");
    assert!(matches!(ds.view().read_episode_column(0, "nope"), Err(Error::Schema { .. })));
    assert!(matches!(ds.view().read_episode_column(99, "obs"), Err(Error::OutOfRange(_))));
    assert!(matches!(ds.view().episode_metadata(99), Err(Error::OutOfRange(_))));
    assert!(matches!(ds.view().read_rows(rows(0, 0, u64::MAX, 1), &mut [0u8; 12]), Err(Error::Invalid(_))));
    assert!(matches!(ds.view().read_strings(rows(0, 5, 0, u64::MAX)), Err(Error::Invalid(_))));
    assert_eq!(ds.column_id(0, "reward"), Some(3));
    assert_eq!(ds.column_id(0, "nope"), None);
    assert_eq!(ds.column_id(7, "reward"), None);
}

#[test]
fn unknown_record_kinds_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    for clean in [true, false] {
        let mut sim2 = Sim::new(4, 1, standard_columns(), 3);
        sim2.steps(0, 4);
        sim2.end_episode(0, "");
        sim2.flush();
        sim2.cur().record(77, b"from a newer minor version");
        sim2.steps(0, 2);
        sim2.end_episode(0, "");
        let bytes = sim2.finish(clean).remove(0);
        let path = dir.path().join(format!("unknown-{clean}.trj"));
        write(&path, &bytes);
        let ds = open(&path);
        assert!(ds.problems().is_empty(), "{:?}", ds.problems());
        check_values(&ds, &sim2, &sim2.listed());
    }
}

#[test]
fn dataset_is_send_and_sync_and_reads_from_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Dataset>();
    assert_send_sync::<trajcore_core::reader::RowsView>();

    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(5, 2, standard_columns(), 4);
    for i in 0..40u64 {
        sim.steps((i % 2) as u32, 1 + i % 7);
        sim.end_episode((i % 2) as u32, "");
        if i % 3 == 0 {
            sim.flush();
        }
    }
    let bytes = sim.finish(true).remove(0);
    let path = dir.path().join("threads.trj");
    write(&path, &bytes);
    // A cache far smaller than the data: entries are evicted and decoded again.
    let ds = Dataset::open(&path, OpenOptions { strict: true, cache_bytes: 256, mmap: true }).unwrap();
    let listed = sim.listed();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (ds, sim, listed) = (&ds, &sim, &listed);
            s.spawn(move || {
                for round in 0..3 {
                    for i in (0..listed.len()).rev().skip((t + round) % 3) {
                        for spec in &sim.columns {
                            let got = ds.view().read_episode_column(i, &spec.name).unwrap();
                            assert_eq!(got, sim.expected(listed[i], spec));
                        }
                    }
                }
            });
        }
    });
    let ds0 = Dataset::open(&path, OpenOptions { strict: false, cache_bytes: 0, mmap: true }).unwrap();
    check_values(&ds0, &sim, &listed);
}
