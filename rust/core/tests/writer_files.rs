//! The files the writer leaves: several shards past a small `max_shard_bytes` (episodes
//! spanning them), a copy taken after `flush` but before close (what a killed writer leaves),
//! and a closed file truncated at many offsets.

mod writer_util;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::json;
use trajcore_core::format::header::FileHeader;
use trajcore_core::format::record::{RecordHeader, RecordKind};
use trajcore_core::reader::{verify, ColumnData, Dataset, OpenOptions};
use trajcore_core::Timeline;
use writer_util::*;

/// One env: episodes of varied lengths with infos, flushed every few episodes (as the flush
/// timer would), and a last episode running at close. Returns what the reader should list.
fn record(
    dir: &Path,
    extra: serde_json::Value,
    episodes: usize,
    mut on_flush: impl FnMut(&mut Harness, usize),
) -> Vec<ExpEpisode> {
    let mut h = Harness::new(dir, config(1, false, "disabled", extra));
    h.add_info_columns();
    let mut tick = 0u64;
    h.reset(&[env_step(0, tick)], None);
    for k in 0..episodes {
        let len = 1 + (k * 7) % 23;
        for t in 1..=len {
            tick += 1;
            let mut s = env_step(0, tick);
            s.terminated = t == len && k % 3 != 2;
            s.truncated = t == len && k % 3 == 2;
            h.step(&[s]);
        }
        tick += 1;
        h.reset(&[env_step(0, tick)], None);
        if k % 4 == 3 {
            h.rec.flush().unwrap();
            on_flush(&mut h, k);
        }
    }
    for _ in 0..5 {
        tick += 1;
        h.step(&[env_step(0, tick)]);
    }
    h.close()
}

fn shard_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn small_shards_split_a_recording_and_read_back_identical() {
    let dir = tempfile::tempdir().unwrap();
    let expected = record(dir.path(), json!({"max_shard_bytes": 4096, "chunk_bytes": 128}), 24, |_, _| {});
    let files = shard_files(dir.path());
    assert!(files.len() >= 3, "{} shards", files.len());
    let ds = open(dir.path());
    check(&ds, &expected);
    assert_eq!(ds.recordings().len(), 1);
    assert_eq!(ds.shard_paths(), files);

    // Every shard: one recording id, shard_seq in name order, a clean End, its own Meta and
    // Column records; episodes spanning shards have rows in an earlier shard than their record.
    let mut ids = Vec::new();
    for (seq, f) in files.iter().enumerate() {
        let bytes = std::fs::read(f).unwrap();
        let header = FileHeader::decode(&bytes).unwrap();
        assert_eq!(header.shard_seq, seq as u64);
        ids.push(header.recording_id);
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with(&format!("-{seq:05}.trj")), "{name}");
        let end = RecordHeader::decode(&bytes[bytes.len() - 32..]).unwrap();
        assert_eq!(end.record_kind(), Some(RecordKind::End));
        let first = RecordHeader::decode(&bytes[64..]).unwrap();
        assert_eq!(first.record_kind(), Some(RecordKind::Meta));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1);
    // Each shard stands on its own: it opens without a problem and lists the episodes, or the
    // parts of episodes, whose rows it holds; together the parts are every step exactly once,
    // each equal to the rows of the whole episode.
    let whole: HashMap<u64, usize> = ds.episodes().iter().enumerate().map(|(i, e)| (e.summary.episode_id, i)).collect();
    let (mut steps, mut parts) = (0u64, 0);
    for f in &files {
        let alone = Dataset::open(f, OpenOptions { strict: true, ..Default::default() }).unwrap();
        assert!(alone.problems().is_empty(), "{}: {:?}", f.display(), alone.problems());
        for (j, e) in alone.episodes().iter().enumerate() {
            steps += e.summary.length;
            parts += (e.continued || e.continues) as usize;
            let i = whole[&e.summary.episode_id];
            let full = &ds.episodes()[i].summary;
            let skip = (e.summary.step_first_row - full.step_first_row) as usize;
            for name in ["obs", "action", "reward", "info/n", "info/_n", "info/s"] {
                let Some(col) = ds.column_id(0, name) else { continue };
                let timeline = ds.recordings()[0].columns[col as usize].timeline;
                let rows = e.summary.length as usize + (timeline == Timeline::Obs) as usize;
                let want = slice_rows(ds.view().read_episode_column(i, name).unwrap(), skip, rows);
                assert_eq!(
                    alone.view().read_episode_column(j, name).unwrap(),
                    want,
                    "{}: episode {j} {name}",
                    f.display()
                );
            }
        }
    }
    assert_eq!(steps, ds.num_steps(), "every step in exactly one shard's listing");
    assert!(parts >= 2, "some episodes ran over a rollover ({parts} parts)");
}

/// Rows `from..from + n` of a column read.
fn slice_rows(data: ColumnData, from: usize, n: usize) -> ColumnData {
    match data {
        ColumnData::Fixed { dtype, mut shape, bytes } => {
            let row = bytes.len() / shape[0].max(1);
            shape[0] = n;
            ColumnData::Fixed { dtype, shape, bytes: bytes[from * row..(from + n) * row].to_vec() }
        }
        ColumnData::Strings(s) => ColumnData::Strings(s[from..from + n].to_vec()),
    }
}

#[test]
fn a_file_copied_before_close_opens_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let copies = tempfile::tempdir().unwrap();
    let mut snapshots: Vec<(PathBuf, usize)> = Vec::new();
    // A checkpoint every 2 KiB, so recovery mixes index deltas and hopped records.
    let extra = json!({"index_interval_bytes": 2048, "chunk_bytes": 96});
    let expected = record(dir.path(), extra, 20, |h, k| {
        // After flush every ended episode is in the file: copy it as a killed writer leaves it.
        let snap = copies.path().join(format!("after-{k}"));
        std::fs::create_dir(&snap).unwrap();
        for p in h.rec.shard_paths() {
            std::fs::copy(&p, snap.join(p.file_name().unwrap())).unwrap();
        }
        snapshots.push((snap, h.model.finished.len()));
    });
    assert!(snapshots.len() >= 4);
    for (snap, n) in &snapshots {
        let ds = open(snap);
        assert!(ds.problems().is_empty(), "{:?}", ds.problems());
        for f in shard_files(snap) {
            let bytes = std::fs::read(&f).unwrap();
            let tail = RecordHeader::decode(&bytes[bytes.len() - 32..]);
            assert!(tail.is_none_or(|t| t.record_kind() != Some(RecordKind::End)), "no End record yet");
        }
        check(&ds, &expected[..*n]);
    }
}

/// Record starts of a file, by hopping its headers.
fn record_offsets(bytes: &[u8]) -> Vec<(u64, u64, Option<RecordKind>)> {
    let mut at = 64u64;
    let mut out = Vec::new();
    while (at as usize) < bytes.len() {
        let h = RecordHeader::decode(&bytes[at as usize..]).expect("a sound header");
        out.push((at, at + h.total_len(), h.record_kind()));
        at += h.total_len();
    }
    out
}

#[test]
fn truncated_at_any_offset_keeps_what_precedes() {
    let dir = tempfile::tempdir().unwrap();
    // The layout as written (compaction would rewrite it with fewer checkpoints).
    let extra = json!({"index_interval_bytes": 1500, "chunk_bytes": 200, "compact_shards": false});
    let expected = record(dir.path(), extra, 14, |_, _| {});
    let [file] = shard_files(dir.path()).try_into().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let full = open(&file);
    check(&full, &expected);
    let records = record_offsets(&bytes);
    assert!(records.iter().filter(|r| r.2 == Some(RecordKind::Index)).count() >= 3);
    // An Episode record holds a batch of episodes: one end offset per episode it holds.
    let episode_ends: Vec<u64> = records
        .iter()
        .filter(|r| r.2 == Some(RecordKind::Episode))
        .flat_map(|r| {
            let count = u32::from_le_bytes(bytes[r.0 as usize + 24..r.0 as usize + 28].try_into().unwrap());
            std::iter::repeat_n(r.1, count as usize)
        })
        .collect();
    assert_eq!(episode_ends.len(), expected.len());
    let starts: Vec<u64> = records.iter().map(|r| r.0).collect();

    let cuts = tempfile::tempdir().unwrap();
    let path = cuts.path().join("cut.trj");
    let mut offsets: Vec<usize> = (0..bytes.len()).step_by(5).collect();
    for &(a, b, _) in &records {
        offsets.extend([a as usize - 1, a as usize, a as usize + 1, a as usize + 23, a as usize + 24, b as usize - 1]);
    }
    offsets.sort();
    offsets.dedup();
    for (i, &cut) in offsets.iter().enumerate() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let ds = match Dataset::open(&path, OpenOptions::default()) {
            Ok(ds) => ds,
            Err(e) => {
                assert!(cut < 64, "cut at {cut}: {e}");
                continue;
            }
        };
        let kept = episode_ends.iter().filter(|&&end| end <= cut as u64).count();
        assert_eq!(ds.episodes().len(), kept, "cut at {cut}: {:?}", ds.problems());
        let at_boundary = starts.contains(&(cut as u64)) || cut == bytes.len();
        assert_eq!(ds.problems().is_empty(), at_boundary, "cut at {cut}: {:?}", ds.problems());
        for (got, want) in ds.episodes().iter().zip(full.episodes()) {
            assert_eq!(got.summary, want.summary, "cut at {cut}");
        }
        if i % 40 == 0 {
            check_listed(&ds, &expected[..kept]);
        }
        // Strict opening names the damage instead.
        if !at_boundary {
            assert!(Dataset::open(&path, OpenOptions { strict: true, ..Default::default() }).is_err());
        }
    }
}

#[test]
fn recording_again_into_a_directory_adds_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let first = record(dir.path(), json!({}), 3, |_, _| {});
    let second = record(dir.path(), json!({}), 2, |_, _| {});
    let ds = open(dir.path());
    assert_eq!(ds.recordings().len(), 2);
    let all: Vec<ExpEpisode> = first.into_iter().chain(second).collect();
    // Shard names sort by start time: the first recording's episodes come first.
    check_ids_per_recording(&ds, &all);
}

/// `check` numbers episodes across the dataset; with two recordings, ids restart per recording.
fn check_ids_per_recording(ds: &Dataset, expected: &[ExpEpisode]) {
    assert_eq!(ds.episodes().len(), expected.len());
    let mut next = vec![0u64; ds.recordings().len()];
    for e in ds.episodes() {
        assert_eq!(e.summary.episode_id, next[e.recording]);
        next[e.recording] += 1;
    }
    for (i, (got, want)) in ds.episodes().iter().zip(expected).enumerate() {
        assert_eq!(
            (got.summary.lane, got.summary.length as usize, got.summary.complete()),
            (want.lane, want.len(), want.complete),
            "episode {i}"
        );
        let obs = ds.view().read_episode_column(i, "obs").unwrap();
        let trajcore_core::reader::ColumnData::Fixed { bytes, .. } = obs else { panic!() };
        assert_eq!(bytes, want.obs.iter().flat_map(obs_bytes).collect::<Vec<_>>(), "episode {i}");
    }
}

/// Regression: closing a recorder whose shard had passed `max_shard_bytes` rolled over at
/// close, leaving a last shard with nothing but its schema.
#[test]
fn closing_never_leaves_an_empty_shard() {
    for steps in [3u64, 40, 90, 200] {
        let dir = tempfile::tempdir().unwrap();
        let extra = json!({"max_shard_bytes": 4096, "chunk_bytes": 4096});
        let mut h = Harness::new(dir.path(), config(1, false, "disabled", extra));
        h.reset(&[env_step(0, 0)], None);
        for tick in 1..=steps {
            h.step(&[env_step(0, tick)]);
        }
        let expected = h.close();
        for f in shard_files(dir.path()) {
            let bytes = std::fs::read(&f).unwrap();
            let kinds: Vec<Option<RecordKind>> = record_offsets(&bytes).into_iter().map(|r| r.2).collect();
            let holds = |k| kinds.contains(&Some(k));
            assert!(holds(RecordKind::Chunks) || holds(RecordKind::Episode), "{steps} steps: {f:?} is empty");
        }
        check(&open(dir.path()), &expected);
    }
}

#[test]
fn a_closed_shard_copies_what_opening_reads_before_its_final_index() {
    use trajcore_core::format::copies;
    let dir = tempfile::tempdir().unwrap();
    // Small chunks: each seal writes the episodes it ends, so the shard has many Episode records.
    let extra = json!({"chunk_bytes": 128, "compact_shards": false});
    let expected = record(dir.path(), extra, 80, |_, _| {});
    let [file] = shard_files(dir.path()).try_into().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let records = record_offsets(&bytes);
    // The copies sit just before the final Index (then End), and hold every Episode record and
    // every Index record before them, byte for byte, at its offset.
    let kinds: Vec<Option<RecordKind>> = records.iter().rev().take(3).map(|r| r.2).collect();
    assert_eq!(kinds, [Some(RecordKind::End), Some(RecordKind::Index), Some(RecordKind::OpeningCopies)]);
    let (at, _, _) = records[records.len() - 3];
    let read_at_open: Vec<(u64, u64)> = records
        .iter()
        .filter(|r| r.0 < at && matches!(r.2, Some(RecordKind::Episode | RecordKind::Index)))
        .map(|r| (r.0, r.1))
        .collect();
    assert!(read_at_open.len() >= copies::COPIES_FROM_RECORDS, "{} records", read_at_open.len());
    let header = RecordHeader::decode(&bytes[at as usize..]).unwrap();
    let payload = &bytes[at as usize + 24..at as usize + 24 + header.payload_len as usize];
    let copied: Vec<(u64, u64)> = copies::decode(payload)
        .unwrap()
        .into_iter()
        .map(|(offset, range)| {
            let end = offset + range.len() as u64;
            assert_eq!(&payload[range], &bytes[offset as usize..end as usize]);
            (offset, end)
        })
        .collect();
    assert_eq!(copied, read_at_open);
    check(&open(&file), &expected);
    assert!(verify(&open(&file)).is_intact());

    // A damaged copy costs no episode, and `verify` names it.
    let broken_dir = tempfile::tempdir().unwrap();
    let broken = broken_dir.path().join("broken.trj");
    let mut damaged = bytes.clone();
    damaged[at as usize + 24 + payload.len() / 2] ^= 0x10;
    std::fs::write(&broken, &damaged).unwrap();
    let ds = open(&broken);
    check(&ds, &expected);
    let report = verify(&ds);
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert_eq!(report.damage[0].offset, at);
    assert!(report.damage[0].episodes.is_empty());

    // A damaged Episode record is reported once, as itself: its copy is not blamed.
    let (first_episode, _, _) = *records.iter().find(|r| r.2 == Some(RecordKind::Episode)).unwrap();
    let mut damaged = bytes.clone();
    damaged[first_episode as usize + 30] ^= 0x10;
    std::fs::write(&broken, &damaged).unwrap();
    let report = verify(&open(&broken));
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert_eq!(report.damage[0].offset, first_episode);

    // Few Episode records get no copies.
    let few = tempfile::tempdir().unwrap();
    record(few.path(), json!({}), 8, |_, _| {});
    let [small] = shard_files(few.path()).try_into().unwrap();
    let kinds: Vec<_> = record_offsets(&std::fs::read(small).unwrap()).into_iter().map(|r| r.2).collect();
    assert!(!kinds.contains(&Some(RecordKind::OpeningCopies)));
}
