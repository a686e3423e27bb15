//! Damage found by tools: `verify` (every checksum, every chunk decoded, each damage named with
//! its file, offset and episodes), `open_verified` (damaged episodes left out of the listing),
//! lenient training reads (damaged episodes left out of sampling, deterministically), a lost
//! column description. (`recover` is in recover.rs, over files the writer wrote.)

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;
use trajcore_core::format::chunks::{self, ChunkRef};
use trajcore_core::format::record::{RecordHeader, RecordKind, RECORD_HEADER_LEN};
use trajcore_core::reader::{
    open_verified, sample_steps, sample_windows, verify, verify_path, Dataset, Draw, Field, OpenOptions, Out, Redraw,
    Report, Window, WindowKind,
};
use trajcore_core::{ColumnSpec, Error, Timeline};

const STRICT: OpenOptions = OpenOptions { strict: true, cache_bytes: 1 << 20, mmap: true };

fn lenient() -> OpenOptions {
    OpenOptions::default()
}

/// Two lanes, two shards, many small Chunks records, a column added midway.
fn many_sim() -> Sim {
    many_sim_with(true)
}

fn many_sim_with(own_checksums: bool) -> Sim {
    let mut sim = Sim::new(9, 2, standard_columns(), 3);
    sim.own_checksums = own_checksums;
    sim.max_chunks_per_record = 4;
    let lengths = [4u64, 2, 7, 1, 5, 3, 6, 2, 8, 3];
    for (i, &len) in lengths.iter().enumerate() {
        let lane = (i % 2) as u32;
        sim.steps(lane, len);
        sim.end_episode(lane, if i % 3 == 0 { r#"{"k": 1}"# } else { "" });
        if i % 3 == 2 {
            sim.flush();
        }
        if i == 4 {
            sim.index();
            sim.add_masked("info/extra", "int16", &[2], Timeline::Obs, RAW);
        }
        if i == 6 {
            sim.next_shard();
        }
    }
    sim
}

/// `many_sim` written as a 1.0 writer wrote it: chunks without checksums of their own, so a
/// damaged Chunks record loses every chunk in it.
fn many_sim_1_0() -> Sim {
    many_sim_with(false)
}

/// Writes the shards into a fresh directory; returns their paths.
fn write_shards(dir: &Path, shards: &[Vec<u8>]) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    shards
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let path = dir.join(format!("s{i}.trj"));
            write(&path, bytes);
            path
        })
        .collect()
}

/// (offset, header) of every record of a shard, hopping from the file header.
fn records(buf: &[u8]) -> Vec<(usize, RecordHeader)> {
    let mut out = Vec::new();
    let mut at = 64;
    while at + RECORD_HEADER_LEN <= buf.len() {
        let Some(h) = RecordHeader::decode(&buf[at..at + RECORD_HEADER_LEN]) else { break };
        out.push((at, h));
        at += h.total_len() as usize;
    }
    out
}

fn chunks_records(buf: &[u8]) -> Vec<(usize, RecordHeader)> {
    records(buf).into_iter().filter(|(_, h)| h.kind == RecordKind::Chunks as u32).collect()
}

/// Dataset indexes of the listed episodes that need the record at (shard, start).
fn needing(sim: &Sim, shard: usize, start: usize) -> Vec<usize> {
    let listed = sim.listed();
    (0..listed.len()).filter(|&i| listed[i].deps.iter().any(|&(s, a, _)| s == shard && a == start as u64)).collect()
}

/// Rewrites the checksums of the record at `at` after its payload was edited.
fn reseal(buf: &mut [u8], at: usize) {
    let h = RecordHeader::decode(&buf[at..at + RECORD_HEADER_LEN]).unwrap();
    let header =
        RecordHeader::new_raw(h.kind, &buf[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + h.payload_len as usize]);
    buf[at..at + RECORD_HEADER_LEN].copy_from_slice(&header.encode());
}

fn flip_last_payload_byte(buf: &mut [u8], at: usize, h: &RecordHeader) {
    buf[at + RECORD_HEADER_LEN + h.payload_len as usize - 1] ^= 0x20;
}

#[test]
fn an_intact_dataset_verifies_and_every_chunk_is_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim();
    let shards = sim.finish(true);
    write_shards(dir.path(), &shards);
    let ds = Dataset::open(dir.path(), STRICT).unwrap();
    let report = verify(&ds);
    assert!(report.is_intact(), "{:?}", report.damage);
    assert_eq!(report.shards, 2);
    assert_eq!(report.bytes, shards.iter().map(|s| s.len() as u64).sum::<u64>());
    assert_eq!(report.records, shards.iter().map(|s| records(s).len() as u64).sum::<u64>());
    let in_files: usize = shards
        .iter()
        .flat_map(|s| chunks_records(s).into_iter().map(move |(at, h)| (s, at, h)))
        .map(|(s, at, h)| {
            chunks::decode(&s[at + 24..at + 24 + h.payload_len as usize], at as u64, h.packed_table()).unwrap().len()
        })
        .sum();
    assert_eq!(report.chunks as usize, in_files, "every chunk decoded");
    assert!(report.decoded_bytes > 0);
    assert!(verify_path(dir.path()).unwrap().is_intact());
}

#[test]
fn every_flipped_chunks_record_is_found_with_the_episodes_needing_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim_1_0();
    let shards = sim.finish(true);
    let mut tried = 0;
    for (s, shard) in shards.iter().enumerate() {
        for (at, h) in chunks_records(shard) {
            let mut damaged = shards.clone();
            flip_last_payload_byte(&mut damaged[s], at, &h);
            let case = dir.path().join(format!("case{s}-{at}"));
            let paths = write_shards(&case, &damaged);
            // Opening reads the index, not the data: it sees nothing.
            let ds = Dataset::open(&case, STRICT).unwrap();
            let report = verify(&ds);
            assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
            let d = &report.damage[0];
            assert_eq!((d.file.as_path(), d.offset), (paths[s].as_path(), at as u64));
            assert_eq!(d.why, "Chunks record payload checksum mismatch");
            assert_eq!(d.episodes, needing(&sim, s, at), "record at {s}:{at}");
            assert!(!d.episodes.is_empty());
            assert_eq!(report.damaged_episodes(), d.episodes);
            tried += 1;
        }
    }
    assert!(tried >= 8, "{tried} chunks records");
}

/// The listed episodes with rows in `chunk` (of shard `s`).
fn needing_chunk(sim: &Sim, s: usize, chunk: &ChunkRef) -> Vec<usize> {
    let spec = &sim.columns[chunk.column as usize];
    let listed = sim.listed();
    (0..listed.len())
        .filter(|&i| {
            let e = listed[i];
            let (lo, n) = match spec.timeline {
                Timeline::Obs => (e.obs_first_row, e.length + 1),
                Timeline::Step => (e.step_first_row, e.length),
            };
            e.lane == chunk.lane && chunk.first_row < lo + n && lo < chunk.end_row() && e.deps.iter().any(|d| d.0 == s)
        })
        .collect()
}

#[test]
fn a_flipped_chunk_loses_that_chunk_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim();
    let shards = sim.finish(true);
    let mut tried = 0;
    for (s, shard) in shards.iter().enumerate() {
        for (at, h) in chunks_records(shard) {
            let payload = &shard[at + 24..at + 24 + h.payload_len as usize];
            for chunk in chunks::decode(payload, at as u64, h.packed_table()).unwrap() {
                assert!(chunk.has_checksum());
                let mut damaged = shards.clone();
                damaged[s][(chunk.data_offset + chunk.stored_len / 2) as usize] ^= 0x20;
                let case = dir.path().join(format!("case{s}-{}", chunk.data_offset));
                write_shards(&case, &damaged);
                let report = verify(&Dataset::open(&case, STRICT).unwrap());
                let bad = needing_chunk(&sim, s, &chunk);
                // The record's checksum fails too: the chunk's explains it.
                assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
                assert_eq!(report.damage[0].offset, chunk.data_offset);
                assert!(report.damage[0].why.contains("fails its checksum"), "{}", report.damage[0].why);
                assert_eq!(report.damaged_episodes(), bad, "chunk at {s}:{}", chunk.data_offset);
                // Every other episode reads back its values.
                let (ds, _) = open_verified(&case, lenient()).unwrap();
                let listed = sim.listed();
                let kept: Vec<&SimEpisode> =
                    (0..listed.len()).filter(|i| !bad.contains(i)).map(|i| listed[i]).collect();
                check_values(&ds, &sim, &kept);
                tried += 1;
            }
        }
    }
    assert!(tried >= 20, "{tried} chunks");
}

#[test]
fn a_damaged_table_costs_no_chunk_of_a_closed_file() {
    // The index holds every chunk's reference and checksum: a flipped table byte loses nothing.
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim();
    let shards = sim.finish(true);
    let (at, _) = chunks_records(&shards[0])[1];
    let mut damaged = shards.clone();
    damaged[0][at + 24 + 2] ^= 0x01; // the table header's entry length
    write_shards(dir.path(), &damaged);
    let report = verify(&Dataset::open(dir.path(), STRICT).unwrap());
    assert_eq!(report.damage.len(), 1, "{:?}", report.damage);
    assert_eq!(report.damage[0].offset, at as u64);
    assert!(report.damage[0].why.contains("table or padding"), "{}", report.damage[0].why);
    assert!(report.damaged_episodes().is_empty());
    let (ds, _) = open_verified(dir.path(), lenient()).unwrap();
    check_values(&ds, &sim, &sim.listed());
}

#[test]
fn an_unindexed_damaged_record_keeps_its_intact_chunks() {
    // A killed writer's file (no End record, the last records after the last Index): the
    // damaged record's table is read and each chunk that passes its own checksum is kept.
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim();
    let shards = sim.finish(false);
    let last = shards.len() - 1;
    let (at, h) = *chunks_records(&shards[last]).last().unwrap();
    let payload = &shards[last][at + 24..at + 24 + h.payload_len as usize];
    let refs = chunks::decode(payload, at as u64, h.packed_table()).unwrap();
    let victim = refs[0];
    let mut damaged = shards.clone();
    damaged[last][(victim.data_offset + victim.stored_len / 2) as usize] ^= 0x20;
    write_shards(dir.path(), &damaged);
    let ds = Dataset::open(dir.path(), lenient()).unwrap();
    let p = ds.problems().iter().find(|p| p.offset == at as u64).expect("the damaged record is a problem");
    let kept = refs.len() - 1;
    assert!(p.why.contains(&format!("{kept} of its {} chunks", refs.len())), "{}", p.why);
    let bad = needing_chunk(&sim, last, &victim);
    let listed = sim.listed();
    let intact: Vec<&SimEpisode> = (0..listed.len()).filter(|i| !bad.contains(i)).map(|i| listed[i]).collect();
    assert_eq!(ds.episodes().len(), intact.len());
    check_values(&ds, &sim, &intact);
}

#[test]
fn chunks_that_pass_their_checksum_but_do_not_decode_are_found() {
    damaged_chunks_under_a_valid_record_checksum_are_found(false);
}

/// Issue 33, point 9: a chunk whose own checksum fails under a valid record checksum (a writer
/// bug or an edit) is found by `verify` as by the reads, by its own checksum.
#[test]
fn a_chunks_own_checksum_is_checked_under_a_valid_record_checksum() {
    damaged_chunks_under_a_valid_record_checksum_are_found(true);
}

/// Damages chunks in every Chunks record and reseals the records: chunks without their own
/// checksum then pass it, and only decoding can tell; those with one fail it.
fn damaged_chunks_under_a_valid_record_checksum_are_found(own_checksums: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim_with(own_checksums);
    let shards = sim.finish(true);
    let ds = Dataset::open(
        &{
            write_shards(&dir.path().join("good"), &shards);
            dir.path().join("good")
        },
        STRICT,
    )
    .unwrap();
    drop(ds);
    // In every record: a zstd frame whose magic is broken, and a str chunk whose last offset
    // points past its text. Resealed, so only decoding can tell.
    let spec_of = |id: u32| sim.columns[id as usize].clone();
    let mut broke = Vec::new();
    let mut damaged = shards.clone();
    for (s, shard) in shards.iter().enumerate() {
        for (at, h) in chunks_records(shard) {
            let payload = at + RECORD_HEADER_LEN;
            let refs =
                chunks::decode(&shard[payload..payload + h.payload_len as usize], at as u64, h.packed_table()).unwrap();
            for r in refs {
                let spec: ColumnSpec = spec_of(r.column);
                let data = r.data_offset as usize;
                if r.codec != 0 && !broke.iter().any(|b: &(usize, u64, u32)| b.0 == s && b.2 == r.column) {
                    damaged[s][data] ^= 0xFF; // zstd magic
                    broke.push((s, r.data_offset, r.column));
                } else if r.codec == 0 && spec.dtype == "str" && !broke.iter().any(|b| b.0 == s && b.2 == r.column) {
                    let last = data + 8 * r.n_rows as usize;
                    damaged[s][last..last + 8].copy_from_slice(&u64::MAX.to_le_bytes());
                    broke.push((s, r.data_offset, r.column));
                }
            }
            reseal(&mut damaged[s], at);
        }
    }
    assert!(broke.len() >= 3, "{broke:?}");
    let case = dir.path().join("case");
    let paths = write_shards(&case, &damaged);
    let ds = Dataset::open(&case, STRICT).unwrap();
    let report = verify(&ds);
    let got: BTreeSet<(PathBuf, u64)> = report.damage.iter().map(|d| (d.file.clone(), d.offset)).collect();
    let want: BTreeSet<(PathBuf, u64)> = broke.iter().map(|&(s, off, _)| (paths[s].clone(), off)).collect();
    assert_eq!(got, want, "{:#?}", report.damage);
    for d in &report.damage {
        let column = &broke.iter().find(|b| paths[b.0] == d.file && b.1 == d.offset).unwrap().2;
        assert!(d.why.starts_with(&format!("chunk of column {column} ('{}')", spec_of(*column).name)), "{}", d.why);
        if own_checksums {
            assert!(d.why.ends_with("fails its checksum"), "{}", d.why);
        } else {
            assert!(d.why.contains("zstd") || d.why.contains("str chunk"), "{}", d.why);
        }
        assert!(!d.episodes.is_empty(), "{d:?}");
    }
    // The reads that hit them fail with the same file and offset.
    let failing: BTreeSet<usize> = report.damaged_episodes().into_iter().collect();
    for i in 0..ds.episodes().len() {
        let mut failed = false;
        for spec in &sim.columns {
            if ds.column_id(ds.episodes()[i].recording, &spec.name).is_some() {
                match ds.view().read_episode_column(i, &spec.name) {
                    Ok(_) => {}
                    Err(Error::Corrupt { path, offset, .. }) => {
                        assert!(want.contains(&(path, offset)));
                        failed = true;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert_eq!(failed, failing.contains(&i), "episode {i}");
    }
}

#[test]
fn what_opening_found_is_reported_first() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = small_sim(true);
    let path = dir.path().join("cut.trj");
    write(&path, &bytes[..bytes.len() - 5]);
    let ds = Dataset::open(&path, lenient()).unwrap();
    let report = verify(&ds);
    assert_eq!(report.from_open, ds.problems().len());
    assert!(report.from_open >= 1);
    assert_eq!(report.damage[0].why, ds.problems()[0].why);
    assert!(report.damage[0].episodes.is_empty(), "nothing listed lies there");

    // One file that is not a trajcore file: damage at its first byte.
    let foreign = dir.path().join("foreign.trj");
    write(&foreign, b"PK\x03\x04 not a shard at all");
    let report = verify_path(&foreign).unwrap();
    assert_eq!((report.damage.len(), report.damage[0].offset), (1, 0));
    assert!(report.damage[0].why.starts_with("not a trajcore file"));
    assert!(matches!(verify_path(&dir.path().join("missing")), Err(Error::NotFound { .. })));
}

/// A dataset with one flipped Chunks record (the `pick`-th of its first shard), the
/// episodes needing it, and the directory.
fn flipped(dir: &Path, sim: &mut Sim, pick: usize) -> (Vec<Vec<u8>>, Vec<usize>, usize) {
    let mut shards = sim.finish(true);
    let (at, h) = chunks_records(&shards[0])[pick];
    flip_last_payload_byte(&mut shards[0], at, &h);
    write_shards(dir, &shards);
    let bad = needing(sim, 0, at);
    (shards, bad, at)
}

#[test]
fn open_verified_leaves_damaged_episodes_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim_1_0();
    let (_, bad, at) = flipped(dir.path(), &mut sim, 2);
    let (ds, report) = open_verified(dir.path(), lenient()).unwrap();
    assert_eq!(report.damaged_episodes(), bad);
    let listed = sim.listed();
    let kept: Vec<&SimEpisode> = (0..listed.len()).filter(|i| !bad.contains(i)).map(|i| listed[i]).collect();
    check_values(&ds, &sim, &kept);
    let p = ds.problems().iter().find(|p| p.offset == at as u64).expect("the damage is a problem");
    assert!(p.why.contains("checksum") && p.why.contains("left out"), "{}", p.why);
    // The exclusions reopen the same listing without verifying.
    let again = Dataset::open_excluding(dir.path(), lenient(), ds.exclusions().clone()).unwrap();
    check_values(&again, &sim, &kept);
    assert_eq!(again.problems(), ds.problems());
    // `open_choosing`: exclusions first (not verifying again), else a verification, else neither.
    let json = ds.exclusions().to_json();
    let chosen = |verify, json| Dataset::open_choosing(dir.path(), lenient(), verify, json).unwrap();
    assert_eq!(chosen(false, Some(json.as_str())).episodes().len(), kept.len());
    assert_eq!(chosen(true, None).episodes().len(), kept.len());
    assert_eq!(chosen(false, None).episodes().len(), listed.len());
    assert!(matches!(Dataset::open_choosing(dir.path(), lenient(), true, Some("{")), Err(Error::Invalid(_))));
    // The reports a pickled dataset reopens with: the exclusions' JSON, null when none.
    assert_eq!(ds.report(Report::Exclusions).unwrap(), json);
    assert_eq!(chosen(false, None).report(Report::Exclusions).unwrap(), "null");
    assert_eq!(ds.report(Report::NumRecordings).unwrap(), ds.recordings().len().to_string());
    // Strict: the damage is an error.
    match open_verified(dir.path(), STRICT) {
        Err(Error::Corrupt { offset, why, .. }) => {
            assert_eq!((offset, why.as_str()), (at as u64, "Chunks record payload checksum mismatch"))
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // An intact dataset opens as it is.
    let clean = tempfile::tempdir().unwrap();
    write_shards(clean.path(), &many_sim().finish(true));
    let (ds, report) = open_verified(clean.path(), STRICT).unwrap();
    assert!(report.is_intact() && ds.problems().is_empty());
    assert!(ds.exclusions().is_empty());
}

fn fields(ds: &Dataset) -> Vec<Field> {
    vec![
        ds.view().field("obs", false).unwrap(),
        ds.view().field("obs", true).unwrap(),
        ds.view().field("action", false).unwrap(),
    ]
}

/// Gathers `windows` leniently into fresh buffers; returns the buffers and the damage found.
fn gather(
    ds: &Dataset,
    redraw: &Redraw,
    kind: WindowKind,
    windows: &mut [Window],
) -> Result<(Vec<Vec<u8>>, Vec<trajcore_core::reader::Damage>), Error> {
    let fields = fields(ds);
    let rows = windows.len() * kind.length;
    let mut bufs: Vec<Vec<u8>> = fields.iter().map(|f| vec![0xEE; rows * f.row_bytes.unwrap()]).collect();
    let mut outs: Vec<Out<'_>> = bufs.iter_mut().map(|b| Out::Fixed(b)).collect();
    let draw = Draw { set: ds.all_episodes(), redraw, kind, fields: &fields };
    let found = ds.view().gather_lenient(draw, windows, &mut outs, None)?;
    Ok((bufs, found))
}

/// Checks every gathered row against the simulator.
fn check_rows(sim: &Sim, ds: &Dataset, kind: WindowKind, windows: &[Window], bufs: &[Vec<u8>]) {
    let listed = sim.listed();
    let (obs, action) = (&sim.columns[0], &sim.columns[2]);
    let (ob, ab) = (obs.row_bytes().unwrap(), action.row_bytes().unwrap());
    for (i, w) in windows.iter().enumerate() {
        let e = listed[w.episode];
        assert_eq!(ds.episodes()[w.episode].summary.obs_first_row, e.obs_first_row);
        for j in 0..kind.length {
            let at = i * kind.length + j;
            let t = w.start + j as u64;
            assert_eq!(bufs[0][at * ob..(at + 1) * ob], fixed_row(obs, e.lane, e.obs_first_row + t)[..]);
            assert_eq!(bufs[1][at * ob..(at + 1) * ob], fixed_row(obs, e.lane, e.obs_first_row + t + 1)[..]);
            assert_eq!(bufs[2][at * ab..(at + 1) * ab], fixed_row(action, e.lane, e.step_first_row + t)[..]);
        }
    }
}

const STEPS: WindowKind = WindowKind { length: 1, sequence: false, pad: false };
const PAIRS: WindowKind = WindowKind { length: 2, sequence: true, pad: false };

#[test]
fn lenient_sampling_leaves_damaged_episodes_out_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim_1_0();
    let (_, bad, at) = flipped(dir.path(), &mut sim, 1);
    assert!(!bad.is_empty());
    let ds = Dataset::open(dir.path(), lenient()).unwrap();
    let mut first_seen = None;
    for seed in 0..20 {
        let mut windows = sample_steps(ds.all_episodes(), 64, seed).unwrap();
        let (bufs, found) = gather(&ds, &Redraw::Seed(seed), STEPS, &mut windows).unwrap();
        assert!(windows.iter().all(|w| !bad.contains(&w.episode)), "seed {seed}: a damaged episode was read");
        check_rows(&sim, &ds, STEPS, &windows, &bufs);
        if !found.is_empty() {
            assert!(first_seen.is_none(), "damage is reported once");
            assert_eq!(found.len(), 1);
            assert_eq!((found[0].offset, found[0].episodes.clone()), (at as u64, bad.clone()));
            first_seen = Some(seed);
        }
        let mut seqs = sample_windows(ds.all_episodes(), 16, 2, false, seed).unwrap();
        let (bufs, _) = gather(&ds, &Redraw::Seed(seed), PAIRS, &mut seqs).unwrap();
        assert!(seqs.iter().all(|w| !bad.contains(&w.episode)));
        check_rows(&sim, &ds, PAIRS, &seqs, &bufs);
    }
    assert_eq!(first_seen, Some(0), "the first batch found it");
    assert_eq!(ds.view().damaged_episodes(), bad);
    assert_eq!(ds.view().read_damage().len(), 1);

    // Deterministic: a seed gives the same batch on a dataset that has seen nothing yet.
    let fresh = Dataset::open(dir.path(), lenient()).unwrap();
    for seed in [7, 3, 19] {
        let mut a = sample_steps(fresh.all_episodes(), 64, seed).unwrap();
        gather(&fresh, &Redraw::Seed(seed), STEPS, &mut a).unwrap();
        let mut b = sample_steps(ds.all_episodes(), 64, seed).unwrap();
        gather(&ds, &Redraw::Seed(seed), STEPS, &mut b).unwrap();
        assert_eq!(a, b, "seed {seed}");
    }

    // By number: redrawn from the number; by (episode, step): an error.
    let numbers: Vec<u64> = (0..ds.num_steps()).collect();
    let mut windows: Vec<Window> = ds
        .all_episodes()
        .locate_steps(&numbers)
        .unwrap()
        .into_iter()
        .map(|(episode, start)| Window { episode, start })
        .collect();
    let (bufs, _) = gather(&ds, &Redraw::Numbers(numbers.clone()), STEPS, &mut windows).unwrap();
    check_rows(&sim, &ds, STEPS, &windows, &bufs);
    assert!(windows.iter().all(|w| !bad.contains(&w.episode)));
    let mut asked = vec![Window { episode: bad[0], start: 0 }];
    assert!(
        matches!(gather(&ds, &Redraw::Never, STEPS, &mut asked), Err(Error::Corrupt { offset, .. }) if offset == at as u64)
    );
    let mut intact = vec![Window { episode: (0..ds.episodes().len()).find(|i| !bad.contains(i)).unwrap(), start: 0 }];
    gather(&ds, &Redraw::Never, STEPS, &mut intact).unwrap();

    // Strict: raises as an ordinary gather does.
    let strict = Dataset::open(dir.path(), STRICT).unwrap();
    let failures = (0..20)
        .filter(|&seed| {
            let mut w = sample_steps(strict.all_episodes(), 64, seed).unwrap();
            matches!(gather(&strict, &Redraw::Seed(seed), STEPS, &mut w), Err(Error::Corrupt { .. }))
        })
        .count();
    assert!(failures > 0);
    assert!(strict.view().damaged_episodes().is_empty());
}

#[test]
fn lenient_sampling_without_damage_is_an_ordinary_gather() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = many_sim();
    write_shards(dir.path(), &sim.finish(true));
    let ds = Dataset::open(dir.path(), lenient()).unwrap();
    for seed in 0..5 {
        let drawn = sample_steps(ds.all_episodes(), 32, seed).unwrap();
        let mut windows = drawn.clone();
        let (bufs, found) = gather(&ds, &Redraw::Seed(seed), STEPS, &mut windows).unwrap();
        assert_eq!((windows, found.len()), (drawn, 0));
        check_rows(&sim, &ds, STEPS, &sample_steps(ds.all_episodes(), 32, seed).unwrap(), &bufs);
    }
}

#[test]
fn a_lost_column_description_is_a_damaged_file_not_a_wrong_name() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, mut bytes) = small_sim(true);
    // The last Column record of the file: the mask of a column added midway, described nowhere
    // else; its chunks are still there.
    let (at, h) = records(&bytes).into_iter().rev().find(|(_, h)| h.kind == RecordKind::Column as u32).unwrap();
    let spec: ColumnSpec = serde_json::from_slice(&bytes[at + 24..at + 24 + h.payload_len as usize]).unwrap();
    let name = spec.name;
    assert_eq!(sim.columns.last().unwrap().name, name);
    flip_last_payload_byte(&mut bytes, at, &h);
    let path = dir.path().join("s.trj");
    write(&path, &bytes);
    let ds = Dataset::open(&path, lenient()).unwrap();
    assert!(ds.column_id(0, &name).is_none());
    let last = ds.episodes().len() - 1;
    match ds.view().read_episode_column(last, &name) {
        Err(Error::Corrupt { path: p, offset, why }) => {
            assert_eq!(p, path);
            assert!(offset > 0 && why.contains(&format!("column '{name}' is unreadable")), "{offset} {why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(ds.view().field(&name, false), Err(Error::Corrupt { .. })));
    // A name no recording ever had, in an intact file, is still a wrong name.
    let (_, good) = small_sim(true);
    write(&path, &good);
    let ds = Dataset::open(&path, STRICT).unwrap();
    assert!(matches!(ds.view().read_episode_column(0, "no/such"), Err(Error::Schema { .. })));
    assert!(matches!(ds.view().field("no/such", false), Err(Error::Schema { .. })));
}
