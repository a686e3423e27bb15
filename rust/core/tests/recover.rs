//! `recover`: a damaged recording written again into a new dataset: every intact episode
//! whole, the intact prefix of each damaged one (incomplete), the source untouched, the result
//! intact.

mod writer_util;

use std::path::Path;

use serde_json::json;
use trajcore_core::format::chunks::{self, ChunkRef};
use trajcore_core::format::record::{RecordHeader, RecordKind, RECORD_HEADER_LEN};
use trajcore_core::reader::{verify, ColumnData, ColumnRows, Dataset, OpenOptions};
use trajcore_core::recover::recover;
use trajcore_core::{ColumnSpec, Error, Timeline};
use writer_util::*;

const STRICT: OpenOptions = OpenOptions { strict: true, cache_bytes: 1 << 20, mmap: true };

/// Three lanes, infos (int and str, with gaps), metadata, an aborted episode, episodes running
/// at close; small chunks, so many Chunks records.
fn record(dir: &Path) {
    let mut h = Harness::new(dir, config(3, true, "next_step", json!({"chunk_bytes": 200})));
    h.add_info_columns();
    let mut tick = 0u64;
    h.reset(&(0..3).map(|l| env_step(l, tick)).collect::<Vec<_>>(), None);
    let mut clocks = EpisodeClocks::new(3);
    while tick < 80 {
        tick += 1;
        h.step(&clocks.steps(tick, |lane, tick| 3 + (lane + tick as usize) % 9));
        if tick.is_multiple_of(7) {
            h.set_metadata((tick % 3) as u32, json!({"tick": tick}));
        }
        if tick == 31 {
            h.abort(Some(1));
            clocks.ended(1);
        }
    }
    h.close();
}

/// (offset, header) of every Chunks record of a file.
fn chunks_records(buf: &[u8]) -> Vec<(usize, RecordHeader)> {
    let mut out = Vec::new();
    let mut at = 64;
    while at + RECORD_HEADER_LEN <= buf.len() {
        let Some(h) = RecordHeader::decode(&buf[at..at + RECORD_HEADER_LEN]) else { break };
        if h.kind == RecordKind::Chunks as u32 {
            out.push((at, h));
        }
        at += h.total_len() as usize;
    }
    out
}

/// Where the last Index record of a file starts (the close's, just before the End record).
fn last_index_at(buf: &[u8]) -> usize {
    let mut at = 64;
    let mut last = None;
    while at + RECORD_HEADER_LEN <= buf.len() {
        let Some(h) = RecordHeader::decode(&buf[at..at + RECORD_HEADER_LEN]) else { break };
        if h.kind == RecordKind::Index as u32 {
            last = Some(at);
        }
        at += h.total_len() as usize;
    }
    last.expect("an index record")
}

fn refs_at(buf: &[u8], at: usize, h: &RecordHeader) -> Vec<ChunkRef> {
    chunks::decode(
        &buf[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + h.payload_len as usize],
        at as u64,
        h.packed_table(),
    )
    .unwrap()
}

/// Steps of an episode before its first row in one of `lost` (the rule: step t needs
/// observation rows t and t + 1 and step row t).
fn steps_kept(columns: &[ColumnSpec], lost: &[ChunkRef], lane: u32, obs_first: u64, step_first: u64, t: u64) -> u64 {
    let mut k = t;
    for r in lost.iter().filter(|r| r.lane == lane) {
        let spec = &columns[r.column as usize];
        let (first, n) = match spec.timeline {
            Timeline::Obs => (obs_first, t + 1),
            Timeline::Step => (step_first, t),
        };
        if r.first_row < first + n && first < r.end_row() {
            let bad = r.first_row.max(first) - first;
            k = k.min(if spec.timeline == Timeline::Obs { bad.saturating_sub(1) } else { bad });
        }
    }
    k
}

/// The rows `first..first + n` of a column, as the source holds them.
fn rows(ds: &Dataset, lane: u32, spec: &ColumnSpec, first: u64, n: u64) -> ColumnData {
    let rows = ColumnRows { recording: 0, lane, column: spec.id, first_row: first, n_rows: n };
    match spec.row_bytes() {
        Some(rb) => {
            let mut bytes = vec![0; n as usize * rb];
            ds.view().read_rows(rows, &mut bytes).unwrap();
            let mut shape = vec![n as usize];
            shape.extend(spec.shape.iter().map(|&d| d as usize));
            ColumnData::Fixed { dtype: spec.dtype().unwrap(), shape, bytes }
        }
        None => ColumnData::Strings(ds.view().read_strings(rows).unwrap()),
    }
}

/// A copy of the recording in `dir/name` with `damage` applied to its shard; returns the
/// shard's path and bytes.
fn damaged_copy(
    good: &Path,
    dir: &Path,
    name: &str,
    damage: impl FnOnce(&mut Vec<u8>),
) -> (std::path::PathBuf, Vec<u8>) {
    let src = dir.join(name);
    std::fs::create_dir_all(&src).unwrap();
    let file = std::fs::read_dir(good).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    damage(&mut bytes);
    let shard = src.join(file.file_name().unwrap());
    std::fs::write(&shard, &bytes).unwrap();
    (shard, bytes)
}

#[test]
fn intact_episodes_whole_and_the_intact_prefix_of_damaged_ones() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    record(&good);
    let file = std::fs::read_dir(&good).unwrap().next().unwrap().unwrap().path();
    let good_bytes = std::fs::read(&file).unwrap();
    let records = chunks_records(&good_bytes);
    assert!(records.len() >= 6, "{} chunks records", records.len());
    let mut cut_somewhere = 0;
    for (n, &(at, h)) in records.iter().enumerate() {
        let case = dir.path().join(format!("case{n}"));
        // A byte of the record's first chunk: that chunk alone is lost (each has its checksum).
        let lost = refs_at(&good_bytes, at, &h)[..1].to_vec();
        let flip = (lost[0].data_offset + lost[0].stored_len / 2) as usize;
        let (shard, bytes) = damaged_copy(&good, &case, "src", |b| b[flip] ^= 0x04);
        let src = shard.parent().unwrap().to_path_buf();

        let source = Dataset::open(&src, STRICT).unwrap(); // opening sees nothing
        let columns = source.recordings()[0].columns.clone();
        let mut expected = Vec::new(); // (source index, steps kept)
        let mut lost_episodes = 0;
        for (i, e) in source.episodes().iter().enumerate() {
            let s = &e.summary;
            match steps_kept(&columns, &lost, s.lane, s.obs_first_row, s.step_first_row, s.length) {
                0 => lost_episodes += 1,
                k => expected.push((i, k)),
            }
        }
        let cut = expected.iter().filter(|&&(i, k)| k < source.episodes()[i].summary.length).count();
        cut_somewhere += cut;

        let dst = case.join("dst");
        let done = recover(&src, &dst).unwrap();
        assert_eq!(std::fs::read(&shard).unwrap(), bytes, "the source is never touched");
        assert_eq!((done.whole + done.cut, done.cut, done.lost), (expected.len(), cut, lost_episodes), "case {n}");
        assert_eq!(done.steps, expected.iter().map(|e| e.1).sum::<u64>());
        assert!(done.shards.iter().all(|p| p.starts_with(&dst) && p.exists()));
        assert!(!done.source.is_intact());
        let out = Dataset::open(&dst, STRICT).unwrap();
        assert!(verify(&out).is_intact(), "{:?}", verify(&out).damage);
        let leftovers: Vec<_> = std::fs::read_dir(&case).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers.len(), 2, "no temporary directory is left: {leftovers:?}");

        assert_eq!(out.episodes().len(), expected.len());
        for (j, &(i, k)) in expected.iter().enumerate() {
            let (a, b) = (&source.episodes()[i].summary, &out.episodes()[j].summary);
            assert_eq!((b.lane, b.length, b.start_ns), (a.lane, k, a.start_ns), "case {n}: episode {i} -> {j}");
            if k == a.length {
                assert_eq!((b.flags, b.episode_return.to_bits()), (a.flags, a.episode_return.to_bits()), "episode {i}");
            } else {
                assert!(!b.complete() && !b.terminated() && !b.truncated(), "a cut episode is incomplete");
            }
            for spec in &columns {
                let (first, n) = match spec.timeline {
                    Timeline::Obs => (a.obs_first_row, k + 1),
                    Timeline::Step => (a.step_first_row, k),
                };
                let want = rows(&source, a.lane, spec, first, n);
                assert_eq!(
                    out.view().read_episode_column(j, &spec.name).unwrap(),
                    want,
                    "episode {i} column {}",
                    spec.name
                );
            }
            assert_eq!(out.view().episode_metadata(j).unwrap(), source.view().episode_metadata(i).unwrap());
        }
        // The destination must be new (or empty: when nothing was left to write, it is).
        if !expected.is_empty() {
            assert!(matches!(recover(&src, &dst), Err(Error::Invalid(_))));
        }
    }
    assert!(cut_somewhere > 0, "some damaged episode kept a prefix");
    assert!(matches!(recover(&dir.path().join("nope"), &dir.path().join("x")), Err(Error::NotFound { .. })));
    assert!(!dir.path().join("x").exists());
}

#[test]
fn episodes_opening_left_out_give_their_prefixes() {
    // A killed writer's file (its final Index and End record cut off, so opening decodes the
    // records themselves) with a damaged chunk: opening leaves that chunk, and the episodes
    // needing it, out; recovery keeps what precedes the loss.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    record(&good);
    let intact = Dataset::open(&good, STRICT).unwrap().episodes().len();
    let file = std::fs::read_dir(&good).unwrap().next().unwrap().unwrap().path();
    let good_bytes = std::fs::read(&file).unwrap();
    let last_index = last_index_at(&good_bytes);
    let records = chunks_records(&good_bytes);
    let mut saved = 0;
    for (n, &(at, h)) in records.iter().enumerate() {
        let case = dir.path().join(format!("case{n}"));
        let victim = refs_at(&good_bytes, at, &h)[0];
        let (shard, _) = damaged_copy(&good, &case, "src", |b| {
            b.truncate(last_index);
            b[(victim.data_offset + victim.stored_len / 2) as usize] ^= 1;
        });
        let src = shard.parent().unwrap().to_path_buf();
        let listed = Dataset::open(&src, OpenOptions::default()).unwrap().episodes().len();
        assert!(listed < intact);
        let done = recover(&src, &case.join("dst")).unwrap();
        let out = Dataset::open(&case.join("dst"), STRICT).unwrap();
        assert!(verify(&out).is_intact());
        assert_eq!(out.episodes().len(), done.whole + done.cut);
        assert_eq!(done.whole + done.cut + done.lost, intact, "case {n}: {done:?}");
        assert!(out.episodes().len() >= listed);
        saved += out.episodes().len() - listed;
    }
    assert!(saved > 0, "left-out episodes gave their prefixes");
}

#[test]
fn an_intact_dataset_comes_out_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    record(&src);
    let done = recover(&src, &dir.path().join("dst")).unwrap();
    let (a, b) = (Dataset::open(&src, STRICT).unwrap(), Dataset::open(&dir.path().join("dst"), STRICT).unwrap());
    assert_eq!((done.cut, done.lost, done.whole), (0, 0, a.episodes().len()));
    assert!(done.source.is_intact());
    for i in 0..a.episodes().len() {
        for c in &a.recordings()[0].columns {
            assert_eq!(
                a.view().read_episode_column(i, &c.name).unwrap(),
                b.view().read_episode_column(i, &c.name).unwrap()
            );
        }
    }
}
