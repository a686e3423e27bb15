//! Batched gathers against reads one episode at a time: every field, every codec, windows
//! crossing chunk and shard boundaries, overlapping and repeated windows, padding, columns
//! added mid-recording, several recordings, sampling and the global step index.

mod common;

use std::mem::MaybeUninit;
use std::sync::{Mutex, MutexGuard};

use common::*;
use trajcore_core::reader::{
    sample_steps, sample_windows, set_gather_hold_bytes, set_max_threads, set_parallel_thresholds,
    set_scan_block_bytes, set_stream_from_bytes, ColumnData, Dataset, EpisodeSet, Field, IndexOut, OpenOptions, Out,
    RangeRead, SplitMix64, Window,
};
use trajcore_core::{Error, Timeline};

/// The reader's tuning (threads, thresholds, block sizes) is process-wide, and cargo runs this
/// file's tests on parallel threads: every test here holds this lock, so none reads under
/// another's settings, and the guard puts the defaults back when the test ends, failed or not.
static TUNING: Mutex<()> = Mutex::new(());

struct Tuned(#[allow(dead_code)] MutexGuard<'static, ()>);

fn tuned() -> Tuned {
    Tuned(TUNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

impl Drop for Tuned {
    fn drop(&mut self) {
        set_max_threads(0);
        set_parallel_thresholds(256 << 10, 2 << 20);
        set_gather_hold_bytes(512 << 20);
        set_scan_block_bytes(64 << 20);
        set_stream_from_bytes(32 << 20);
    }
}

/// Three lanes, interleaved episodes of lengths 1..9, chunks of 4 rows, three shards, a column
/// added midway.
fn dataset(dir: &std::path::Path, id: u8) -> Dataset {
    let mut sim = Sim::new(id, 3, standard_columns(), 4);
    sim.max_chunks_per_record = 5;
    let mut len = 1u64;
    for round in 0..12u32 {
        for lane in 0..3u32 {
            sim.steps(lane, (len + lane as u64) % 9 + 1);
            sim.end_episode(lane, "");
            len += 3;
        }
        if round == 4 {
            sim.add_masked("info/extra", "int16", &[2], Timeline::Obs, RAW);
        }
        if round % 5 == 4 {
            sim.next_shard();
        }
    }
    for (i, bytes) in sim.finish(true).into_iter().enumerate() {
        write(&dir.join(format!("{id:02}-{i:03}.trj")), &bytes);
    }
    Dataset::open(dir, OpenOptions { cache_bytes: 1 << 12, ..Default::default() }).unwrap()
}

fn fields(ds: &Dataset) -> Vec<Field> {
    let mut out = Vec::new();
    for name in ["obs", "obs/img", "info/msg", "info/extra", "info/_extra"] {
        out.push(ds.view().field(name, false).unwrap());
        out.push(ds.view().field(name, true).unwrap());
    }
    for name in ["action", "reward", "terminated"] {
        out.push(ds.view().field(name, false).unwrap());
    }
    out
}

enum Buf {
    Fixed(Vec<u8>),
    Strings(Vec<String>),
}

fn gather(ds: &Dataset, fields: &[Field], windows: &[Window], length: usize, pad: bool) -> (Vec<Buf>, Vec<bool>) {
    let rows = windows.len() * length;
    // Junk in every output: a gather writes every row (zeros where there is no data).
    let mut bufs: Vec<Buf> = fields
        .iter()
        .map(|f| match f.row_bytes {
            Some(rb) => Buf::Fixed(vec![0xAA; rows * rb]),
            None => Buf::Strings(vec!["junk".to_string(); rows]),
        })
        .collect();
    let mut mask = vec![false; rows];
    let mut outs: Vec<Out> = bufs
        .iter_mut()
        .map(|b| match b {
            Buf::Fixed(v) => Out::Fixed(v),
            Buf::Strings(v) => Out::Strings(v),
        })
        .collect();
    ds.view().gather(fields, windows, length, pad, &mut outs, Some(&mut mask)).unwrap();
    (bufs, mask)
}

/// What reading the episode whole gives for rows `start..start + length` of a field (zeros
/// past its end).
fn expected(ds: &Dataset, field: &Field, w: Window, length: usize) -> Buf {
    let e = &ds.episodes()[w.episode];
    let known = ds.column_id(e.recording, &field.column).is_some();
    let shift = field.next as usize;
    let t = e.summary.length as usize;
    let rows: Vec<usize> = (w.start as usize..w.start as usize + length).map(|r| r + shift).collect();
    let valid = |r: usize| r - shift < t;
    match (field.row_bytes, known.then(|| ds.view().read_episode_column(w.episode, &field.column).unwrap())) {
        (Some(rb), Some(ColumnData::Fixed { bytes, .. })) => Buf::Fixed(
            rows.iter()
                .flat_map(|&r| if valid(r) { bytes[r * rb..(r + 1) * rb].to_vec() } else { vec![0; rb] })
                .collect(),
        ),
        (Some(rb), None) => Buf::Fixed(vec![0; rb * length]),
        (None, Some(ColumnData::Strings(s))) => {
            Buf::Strings(rows.iter().map(|&r| if valid(r) { s[r].clone() } else { String::new() }).collect())
        }
        (None, None) => Buf::Strings(vec![String::new(); length]),
        _ => unreachable!(),
    }
}

fn check(ds: &Dataset, fields: &[Field], windows: &[Window], length: usize, pad: bool) {
    let (bufs, mask) = gather(ds, fields, windows, length, pad);
    for (field, buf) in fields.iter().zip(&bufs) {
        for (i, &w) in windows.iter().enumerate() {
            let what = format!("{} next={} window {i} {w:?} length {length}", field.column, field.next);
            match (buf, expected(ds, field, w, length)) {
                (Buf::Fixed(got), Buf::Fixed(want)) => {
                    let rb = field.row_bytes.unwrap();
                    assert_eq!(&got[i * length * rb..(i + 1) * length * rb], &want[..], "{what}");
                }
                (Buf::Strings(got), Buf::Strings(want)) => {
                    assert_eq!(&got[i * length..(i + 1) * length], &want[..], "{what}")
                }
                _ => unreachable!(),
            }
        }
    }
    for (i, w) in windows.iter().enumerate() {
        let t = ds.episodes()[w.episode].summary.length;
        for j in 0..length {
            assert_eq!(mask[i * length + j], w.start + (j as u64) < t, "mask of window {i}");
        }
    }
}

#[test]
fn gathered_rows_equal_episode_reads() {
    let _tuning = tuned();
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 1);
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    let fields = fields(&ds);
    let all = ds.all_episodes();
    assert_eq!(all.num_steps(), ds.num_steps());
    // Every step once, in order, then shuffled with repeats.
    let every: Vec<Window> = (0..ds.num_steps())
        .map(|g| {
            let (episode, start) = ds.locate_step(g).unwrap();
            Window { episode, start }
        })
        .collect();
    check(&ds, &fields, &every, 1, false);
    let sampled = sample_steps(all, 500, 3).unwrap();
    check(&ds, &fields, &sampled, 1, false);
    // The last: a gather may hold one decoded chunk at a time (each slot a run of its own).
    for (threads, parallel_from, hold) in [(1, usize::MAX, usize::MAX), (4, 1, usize::MAX), (2, 1, 1)] {
        set_max_threads(threads);
        set_parallel_thresholds(parallel_from, parallel_from);
        set_gather_hold_bytes(hold);
        for (length, pad) in [(3, false), (4, true), (9, true)] {
            let windows = sample_windows(all, 200, length, pad, 9).unwrap();
            check(&ds, &fields, &windows, length as usize, pad);
        }
    }
}

#[test]
fn windows_past_the_end_need_pad() {
    let _tuning = tuned();
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 2);
    let fields = [ds.view().field("reward", false).unwrap()];
    let e = (0..ds.episodes().len()).find(|&i| ds.episodes()[i].summary.length == 2).unwrap();
    let mut buf = vec![0u8; 8 * 3];
    let window = [Window { episode: e, start: 0 }];
    let err = ds.view().gather(&fields, &window, 3, false, &mut [Out::Fixed(&mut buf)], None).unwrap_err();
    assert!(matches!(err, Error::Invalid(ref m) if m.contains("pad")), "{err}");
    ds.view().gather(&fields, &window, 3, true, &mut [Out::Fixed(&mut buf)], None).unwrap();
    let bad = [Window { episode: e, start: 2 }];
    assert!(matches!(
        ds.view().gather(&fields, &bad, 1, true, &mut [Out::Fixed(&mut buf[..8])], None),
        Err(Error::OutOfRange(_))
    ));
    let bad = [Window { episode: ds.episodes().len(), start: 0 }];
    assert!(ds.view().gather(&fields, &bad, 1, false, &mut [Out::Fixed(&mut buf[..8])], None).is_err());
    // A buffer of the wrong size is refused, not written past.
    assert!(ds.view().gather(&fields, &window[..], 1, false, &mut [Out::Fixed(&mut buf[..7])], None).is_err());
    assert!(matches!(ds.view().field("nope", false), Err(Error::Schema { .. })));
    assert!(matches!(ds.view().field("reward", true), Err(Error::Invalid(_))));
}

#[test]
fn subsets_and_several_recordings() {
    let _tuning = tuned();
    let dir = tempfile::tempdir().unwrap();
    dataset(dir.path(), 4);
    let ds = dataset(dir.path(), 5);
    assert_eq!(ds.recordings().len(), 2);
    let fields = fields(&ds);
    let n = ds.episodes().len();
    let picked: Vec<usize> = (0..n).filter(|i| i % 3 != 1).collect();
    let set = ds.view().episode_set(&picked).unwrap();
    assert_eq!(set.num_steps(), picked.iter().map(|&i| ds.episodes()[i].summary.length).sum::<u64>());
    let windows = sample_steps(&set, 300, 1).unwrap();
    assert!(windows.iter().all(|w| w.episode % 3 != 1));
    check(&ds, &fields, &windows, 1, false);
    let windows = sample_windows(&set, 100, 5, true, 2).unwrap();
    check(&ds, &fields, &windows, 5, true);
    // Every chunk decoded on several threads at once (a cold cache of one chunk).
    set_max_threads(3);
    set_parallel_thresholds(1, 1);
    let cold = Dataset::open(dir.path(), OpenOptions { cache_bytes: 0, ..Default::default() }).unwrap();
    let windows = sample_windows(cold.all_episodes(), 64, 2, false, 5).unwrap();
    check(&cold, &fields, &windows, 2, false);
    assert!(ds.view().episode_set(&[n]).is_err());
}

#[test]
fn uninitialized_outputs_are_written_whole() {
    let _tuning = tuned();
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 6);
    let fields = fields(&ds);
    let windows = sample_windows(ds.all_episodes(), 50, 6, true, 1).unwrap();
    let (want, _) = gather(&ds, &fields, &windows, 6, true);
    for (field, want) in fields.iter().zip(&want) {
        let (Some(rb), Buf::Fixed(want)) = (field.row_bytes, want) else { continue };
        // Junk, not uninitialized memory, so reading back is defined whatever the gather did.
        let mut raw = vec![std::mem::MaybeUninit::new(0xAAu8); windows.len() * 6 * rb];
        ds.view().gather(std::slice::from_ref(field), &windows, 6, true, &mut [Out::Uninit(&mut raw)], None).unwrap();
        // SAFETY: every byte was initialized (to junk) before the gather.
        let got: Vec<u8> = raw.iter().map(|b| unsafe { b.assume_init() }).collect();
        assert_eq!(&got, want, "{}", field.column);
    }
}

fn outputs(fields: &[Field], rows: usize) -> Vec<Buf> {
    fields
        .iter()
        .map(|f| match f.row_bytes {
            Some(rb) => Buf::Fixed(vec![0xAA; rows * rb]),
            None => Buf::Strings(vec!["junk".to_string(); rows]),
        })
        .collect()
}

fn outs(bufs: &mut [Buf]) -> Vec<Out<'_>> {
    bufs.iter_mut()
        .map(|b| match b {
            Buf::Fixed(v) => Out::Fixed(v),
            Buf::Strings(v) => Out::Strings(v),
        })
        .collect()
}

/// A bulk read of steps `first .. first + n` of `set` equals gathering them one window per step.
fn check_range(ds: &Dataset, set: &EpisodeSet, fields: &[Field], first: u64, n: u64) {
    let steps: Vec<u64> = (first..first + n).collect();
    let windows: Vec<Window> =
        set.locate_steps(&steps).unwrap().into_iter().map(|(episode, start)| Window { episode, start }).collect();
    let mut want = outputs(fields, n as usize);
    ds.view().gather(fields, &windows, 1, false, &mut outs(&mut want), None).unwrap();
    let mut got = outputs(fields, n as usize);
    let (mut episodes, mut steps) =
        (vec![MaybeUninit::new(0xAA); n as usize * 8], vec![MaybeUninit::new(0xAA); n as usize * 8]);
    let indexes = IndexOut { episodes: &mut episodes, steps: &mut steps };
    let (read, damage) = ds.view().read_range(set, fields, first, n, &mut outs(&mut got), Some(indexes)).unwrap();
    assert!(damage.is_empty());
    let int64s = |b: &[MaybeUninit<u8>]| -> Vec<u64> {
        // SAFETY: every byte was initialized above, and written since.
        b.chunks(8).map(|c| u64::from_le_bytes(std::array::from_fn(|i| unsafe { c[i].assume_init() }))).collect()
    };
    let indexed: Vec<Window> = int64s(&episodes)
        .into_iter()
        .zip(int64s(&steps))
        .map(|(episode, start)| Window { episode: episode as usize, start })
        .collect();
    assert_eq!(indexed, windows, "indexes of steps {first}..{}", first + n);
    let RangeRead::Runs(runs) = &read else { panic!("an intact range is read in runs") };
    assert!(runs.len() <= windows.len() && runs.iter().all(|r| r.steps > 0));
    let mut listed = Vec::new();
    read.for_each_step(|episode, start| listed.push(Window { episode, start }));
    assert_eq!(listed, windows, "steps {first}..{}", first + n);
    for ((field, got), want) in fields.iter().zip(&got).zip(&want) {
        match (got, want) {
            (Buf::Fixed(g), Buf::Fixed(w)) => assert!(g == w, "{} next={} steps {first}+{n}", field.column, field.next),
            (Buf::Strings(g), Buf::Strings(w)) => assert_eq!(g, w, "{} steps {first}+{n}", field.column),
            _ => unreachable!(),
        }
    }
}

/// Bulk reads of step ranges (a run per episode, in blocks) against step-by-step gathers: ranges
/// across episodes, chunks, shards, recordings and blocks, a subset in the caller's order,
/// one and several threads.
#[test]
fn range_reads_equal_step_by_step_gathers() {
    let _tuning = tuned();
    let dir = tempfile::tempdir().unwrap();
    dataset(dir.path(), 7);
    let ds = dataset(dir.path(), 8);
    let fields = fields(&ds);
    let n = ds.episodes().len();
    let picked: Vec<usize> = (0..n).filter(|i| i % 4 != 2).rev().collect();
    let subset = ds.view().episode_set(&picked).unwrap();
    // Lane by lane: the reads that are cut into parts for several threads.
    let (in_file, subset_in_file) =
        (ds.view().file_order(ds.all_episodes()).unwrap(), ds.view().file_order(&subset).unwrap());
    assert!(in_file.is_by_lane() && !subset.is_by_lane());
    let mut rng = SplitMix64::new(11);
    let configs = [(1, usize::MAX, 64 << 20, usize::MAX), (3, 1, 64 << 20, 1), (3, 1, 1, usize::MAX), (2, 1, 2000, 1)];
    for (threads, parallel_from, block, stream_from) in configs {
        set_max_threads(threads);
        set_parallel_thresholds(parallel_from, parallel_from);
        set_scan_block_bytes(block);
        set_stream_from_bytes(stream_from);
        for set in [ds.all_episodes(), &subset, &*in_file, &*subset_in_file] {
            let total = set.num_steps();
            check_range(&ds, set, &fields, 0, total);
            check_range(&ds, set, &fields, total, 0);
            for _ in 0..20 {
                let first = rng.below(total);
                check_range(&ds, set, &fields, first, 1 + rng.below(total - first));
            }
            let mut bufs = outputs(&fields, 2);
            let err = ds.view().read_range(set, &fields, total - 1, 2, &mut outs(&mut bufs), None).unwrap_err();
            assert!(matches!(err, Error::OutOfRange(ref m) if m.contains("out of range")), "{err}");
        }
    }
}

/// Random rows decode a zstd chunk only as far as they need; a cached prefix is decoded again,
/// further or whole, for rows past it (gathers) and for episode reads.
#[test]
fn chunk_prefixes_serve_only_the_rows_they_hold() {
    let _tuning = tuned();
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(9, 1, standard_columns(), 64);
    sim.steps(0, 150);
    sim.end_episode(0, "");
    sim.steps(0, 40);
    sim.end_episode(0, "");
    for (i, bytes) in sim.finish(true).into_iter().enumerate() {
        write(&dir.path().join(format!("09-{i:03}.trj")), &bytes);
    }
    let ds = Dataset::open(dir.path(), OpenOptions::default()).unwrap();
    let fields: Vec<Field> = [("obs", false), ("obs", true), ("obs/img", true), ("info/msg", false), ("action", false)]
        .iter()
        .map(|&(name, next)| ds.view().field(name, next).unwrap())
        .collect();
    for (episode, start) in [(0, 0), (0, 1), (0, 3), (0, 70), (0, 40), (0, 127), (0, 149), (1, 0), (1, 39), (1, 5)] {
        check(&ds, &fields, &[Window { episode, start }], 1, false);
    }
    let windows = sample_steps(ds.all_episodes(), 300, 4).unwrap();
    check(&ds, &fields, &windows, 1, false);
}
