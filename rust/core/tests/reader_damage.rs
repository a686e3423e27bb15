//! Damaged, truncated, hostile and foreign files: never a panic, everything before the damage
//! still reads, the damage is reported (or raised in strict mode).

mod common;

use std::path::Path;

use common::*;
use trajcore_core::format::chunks;
use trajcore_core::format::header::FileHeader;
use trajcore_core::format::record::{RecordHeader, RECORD_HEADER_LEN};
use trajcore_core::reader::{verify, ColumnRows, Dataset, OpenOptions};
use trajcore_core::Error;

const STRICT: OpenOptions = OpenOptions { strict: true, cache_bytes: 1 << 20, mmap: true };

fn lenient() -> OpenOptions {
    OpenOptions::default()
}

/// Reads every column and the metadata of every listed episode; returns whether any read failed
/// (only with `Corrupt`), and checks that what reads is right.
fn read_all(ds: &Dataset, sim: &Sim) -> bool {
    let mut failed = check_values_or_corrupt(ds, sim);
    for i in 0..ds.episodes().len() {
        match ds.view().episode_metadata(i) {
            Ok(_) => {}
            Err(Error::Corrupt { .. }) => failed = true,
            Err(e) => panic!("metadata of episode {i}: {e}"),
        }
    }
    failed
}

/// Episodes every record of which lies in `0..limit` (and so must survive damage at `limit`).
fn intact_before(sim: &Sim, limit: u64) -> Vec<&SimEpisode> {
    sim.listed().into_iter().filter(|e| e.deps.iter().all(|&(_, _, end)| end <= limit)).collect()
}

#[test]
fn truncation_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    for clean in [true, false] {
        let (sim, bytes) = small_sim(clean);
        let boundaries: Vec<u64> =
            std::iter::once(64).chain(sim.shards[0].records.iter().map(|&(_, end)| end)).collect();
        let path = dir.path().join("cut.trj");
        let mut last_count = 0;
        for cut in 0..=bytes.len() {
            write(&path, &bytes[..cut]);
            let ds = match Dataset::open(&path, lenient()) {
                Ok(ds) => ds,
                Err(Error::NotTrajcore { .. }) if cut < 64 => continue,
                Err(e) => panic!("cut at {cut}: {e}"),
            };
            assert!(cut >= 64, "a file shorter than its header opened");
            let expected = intact_before(&sim, cut as u64);
            check_values(&ds, &sim, &expected);
            assert!(!read_all(&ds, &sim), "cut at {cut}: a listed episode failed to read");
            assert!(ds.episodes().len() >= last_count, "more bytes never list fewer episodes");
            last_count = ds.episodes().len();
            let at_boundary = boundaries.contains(&(cut as u64));
            assert_eq!(ds.problems().is_empty(), at_boundary, "cut at {cut}: {:?}", ds.problems());
            if !at_boundary {
                let p = &ds.problems()[0];
                assert_eq!(p.file, path);
                assert!(p.why.contains("unfinished record at end of file"), "{}", p.why);
                assert!(matches!(Dataset::open(&path, STRICT), Err(Error::Corrupt { .. })));
            }
        }
        assert_eq!(last_count, sim.listed().len());
    }
}

/// Byte ranges covered by a checksum: the file header and every record header and payload
/// (record padding is not).
fn covered(sim: &Sim, bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut v = vec![(0, 64)];
    for &(start, _) in &sim.shards[0].records {
        let start = start as usize;
        let h = RecordHeader::decode(&bytes[start..start + RECORD_HEADER_LEN]).unwrap();
        v.push((start, start + RECORD_HEADER_LEN + h.payload_len as usize));
    }
    v
}

#[test]
fn flipped_bytes_are_caught_and_earlier_data_survives() {
    let dir = tempfile::tempdir().unwrap();
    for clean in [true, false] {
        let (sim, bytes) = small_sim(clean);
        let covered = covered(&sim, &bytes);
        let path = dir.path().join("flip.trj");
        for at in 0..bytes.len() {
            // One flip an offset: a low bit, a high bit or the whole byte, in turn.
            for mask in [[0x01u8, 0x80, 0xff][at % 3]] {
                let mut damaged = bytes.clone();
                damaged[at] ^= mask;
                write(&path, &damaged);
                let ds = match Dataset::open(&path, lenient()) {
                    Ok(ds) => ds,
                    Err(Error::NotTrajcore { .. } | Error::Version { .. }) if at < 64 => continue,
                    Err(e) => panic!("flip at {at}: {e}"),
                };
                // What lies wholly before the damage is listed and reads right.
                let intact = intact_before(&sim, at as u64);
                let listed = &ds.episodes()[..intact.len().min(ds.episodes().len())];
                assert_eq!(listed.len(), intact.len(), "flip at {at}: {:?}", ds.problems());
                for (i, e) in intact.iter().enumerate() {
                    for spec in &sim.columns {
                        if ds.column_id(0, &spec.name).is_some() {
                            let got = ds.view().read_episode_column(i, &spec.name).unwrap();
                            assert_eq!(got, sim.expected(e, spec), "flip at {at}: episode {i} {}", spec.name);
                        }
                    }
                }
                let read_failed = read_all(&ds, &sim);
                // A flip in a Chunks record's table or in a chunk no read reached harms no read
                // (each chunk has its own checksum, the index its references): `verify` sees it.
                let detected = read_failed
                    || !ds.problems().is_empty()
                    || ds.episodes().len() < sim.listed().len()
                    || !verify(&ds).is_intact();
                let in_checksum = covered.iter().any(|&(a, b)| (a..b).contains(&at));
                assert_eq!(detected, in_checksum, "flip at {at} (mask {mask:#x}): {:?}", ds.problems());
                if !ds.problems().is_empty() {
                    assert!(matches!(Dataset::open(&path, STRICT), Err(Error::Corrupt { .. })));
                }
            }
        }
    }
}

#[test]
fn damaged_chunk_fails_at_read_time_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, mut bytes) = small_sim(true);
    // A byte of the last chunk of the first Chunks record: chunk data, not seen by the index.
    let &(start, _) = &sim.shards[0].records[1 + 7];
    let h = RecordHeader::decode(&bytes[start as usize..start as usize + 24]).unwrap();
    assert_eq!(h.kind, 3, "a chunks record");
    let payload = &bytes[start as usize + 24..start as usize + 24 + h.payload_len as usize];
    let chunk = *chunks::decode(payload, start, h.packed_table()).unwrap().last().unwrap();
    bytes[(chunk.data_offset + chunk.stored_len / 2) as usize] ^= 0x40;
    let path = dir.path().join("chunk.trj");
    write(&path, &bytes);
    let ds = Dataset::open(&path, STRICT).expect("the index path does not checksum chunks at open");
    assert!(ds.problems().is_empty());
    let mut failures = 0;
    for i in 0..ds.episodes().len() {
        for spec in &sim.columns {
            if ds.column_id(0, &spec.name).is_none() {
                continue;
            }
            match ds.view().read_episode_column(i, &spec.name) {
                Ok(data) => assert_eq!(data, sim.expected(sim.listed()[i], spec)),
                Err(Error::Corrupt { path: p, offset, why }) => {
                    assert_eq!((p.as_path(), offset), (path.as_path(), chunk.data_offset));
                    assert!(why.contains("checksum"), "{why}");
                    failures += 1;
                    // And again: still refused.
                    assert!(ds.view().read_episode_column(i, &spec.name).is_err());
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(failures > 0);
}

fn expect_not_trajcore(path: &Path) {
    match Dataset::open(path, lenient()) {
        Err(Error::NotTrajcore { path: p, .. }) => assert_eq!(p, path),
        other => panic!("{}: expected NotTrajcore, got {:?}", path.display(), other.map(|_| ())),
    }
}

#[test]
fn foreign_files_missing_paths_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (_, good) = small_sim(true);

    let missing = dir.path().join("nope");
    assert!(matches!(Dataset::open(&missing, lenient()), Err(Error::NotFound { path }) if path == missing));

    let foreign = dir.path().join("foreign.bin");
    write(&foreign, b"PK\x03\x04 this is a zip file, not a trajectory file at all........................");
    expect_not_trajcore(&foreign);
    let empty = dir.path().join("empty.trj");
    write(&empty, b"");
    expect_not_trajcore(&empty);
    let short = dir.path().join("short.trj");
    write(&short, &good[..40]);
    expect_not_trajcore(&short);
    let mut bad_crc = good.clone();
    bad_crc[50] ^= 1;
    let bad_crc_path = dir.path().join("badcrc.trj");
    write(&bad_crc_path, &bad_crc);
    expect_not_trajcore(&bad_crc_path);
    // Strict or not: a foreign file always raises.
    assert!(matches!(Dataset::open(&foreign, STRICT), Err(Error::NotTrajcore { .. })));

    let mut v2 = good.clone();
    let mut header = FileHeader::new([1; 16], 0, 0);
    header.version_major = 2;
    header.version_minor = 3;
    v2[..64].copy_from_slice(&header.encode());
    let v2_path = dir.path().join("v2.trj");
    write(&v2_path, &v2);
    match Dataset::open(&v2_path, lenient()) {
        Err(Error::Version { found, supported, .. }) => assert_eq!((found.as_str(), supported), ("2.3", 1)),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // A newer minor version opens.
    let mut minor = good.clone();
    let mut header = FileHeader::decode(&good[..64]).unwrap();
    header.version_minor = 9;
    minor[..64].copy_from_slice(&header.encode());
    let minor_path = dir.path().join("minor.trj");
    write(&minor_path, &minor);
    assert_eq!(Dataset::open(&minor_path, STRICT).unwrap().episodes().len(), 4);

    // Directories: files not ending in .trj are ignored; empty or header-less .trj files are
    // shards a writer just created (skipped); a .trj file with a foreign or damaged header is
    // left out with a problem (the other shards still read), or raises in strict mode.
    let ds_dir = dir.path().join("ds");
    std::fs::create_dir(&ds_dir).unwrap();
    write(&ds_dir.join("a.trj"), &good);
    write(&ds_dir.join("notes.txt"), b"hello");
    write(&ds_dir.join("a.trj.bak"), b"junk");
    std::fs::create_dir(ds_dir.join("sub.trj")).unwrap();
    write(&ds_dir.join("z.trj"), b"");
    write(&ds_dir.join("zz.trj"), &good[..30]);
    let ds = Dataset::open(&ds_dir, STRICT).unwrap();
    assert_eq!(ds.shard_paths(), vec![ds_dir.join("a.trj")]);
    assert_eq!(ds.episodes().len(), 4);
    write(
        &ds_dir.join("b.trj"),
        b"TRAJCORE\x01\x00\x00\x00but then nonsense follows, and no checksum will ever match it",
    );
    assert!(
        matches!(Dataset::open(&ds_dir, STRICT), Err(Error::NotTrajcore { path, .. }) if path == ds_dir.join("b.trj"))
    );
    for junk in [&b"not a trajcore file"[..], &bad_crc] {
        write(&ds_dir.join("b.trj"), junk);
        let ds = Dataset::open(&ds_dir, lenient()).unwrap();
        assert_eq!(ds.episodes().len(), 4, "the good shard still reads");
        assert_eq!(ds.shard_paths(), vec![ds_dir.join("a.trj")]);
        let p = &ds.problems()[0];
        assert_eq!((p.file.as_path(), p.offset, ds.problems().len()), (ds_dir.join("b.trj").as_path(), 0, 1));
        assert!(p.why.contains("not a trajcore file"), "{}", p.why);
        assert!(matches!(Dataset::open(&ds_dir, STRICT), Err(Error::NotTrajcore { .. })));
    }

    let empty_dir = dir.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let ds = Dataset::open(&empty_dir, STRICT).unwrap();
    assert_eq!((ds.episodes().len(), ds.num_steps(), ds.recordings().len()), (0, 0, 0));
}

#[test]
fn strict_mode_raises_where_lenient_mode_reports() {
    let dir = tempfile::tempdir().unwrap();
    // No index: every record is decoded (and checksummed) at open.
    let mut sim = Sim::new(6, 1, standard_columns(), 4);
    for len in [2u64, 3, 4, 5] {
        sim.steps(0, len);
        sim.end_episode(0, "");
        sim.flush();
    }
    let mut bytes = sim.finish(false).remove(0);
    let good = bytes.clone();
    // Damage the Episode record of the second episode.
    let second = sim.listed()[1].deps[0].1 as usize;
    bytes[second + 30] ^= 0x08;
    let path = dir.path().join("strict.trj");
    write(&path, &bytes);
    let ds = Dataset::open(&path, lenient()).unwrap();
    assert_eq!(ds.problems().len(), 1, "{:?}", ds.problems());
    assert_eq!(ds.problems()[0].offset, second as u64);
    assert!(ds.problems()[0].why.contains("checksum"));
    // The damaged record alone is skipped: the episodes around it are kept.
    let listed: Vec<_> = sim.listed().into_iter().enumerate().filter(|&(i, _)| i != 1).map(|(_, e)| e).collect();
    check_values(&ds, &sim, &listed);
    match Dataset::open(&path, STRICT) {
        Err(Error::Corrupt { path: p, offset, .. }) => assert_eq!((p, offset), (path.clone(), second as u64)),
        other => panic!("{:?}", other.map(|_| ())),
    }
    write(&path, &good);
    assert!(Dataset::open(&path, STRICT).unwrap().problems().is_empty());
}

/// Rewrites the checksums of the record at `at` after its header or payload was edited, so the
/// damage gets past framing and must be caught by the decoders and checks behind it.
fn reframe(buf: &mut [u8], at: usize) {
    let kind = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
    let len = u64::from_le_bytes(buf[at + 8..at + 16].try_into().unwrap());
    let end = (at + 24).saturating_add(len as usize).min(buf.len());
    let mut header = RecordHeader::new_raw(kind, &buf[at + 24..end]);
    header.payload_len = len;
    buf[at..at + 24].copy_from_slice(&header.encode());
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Hostile files: record contents edited with valid checksums (lengths, offsets, row numbers,
/// counts, codecs and JSON all lie). Opening and reading everything must never panic.
#[test]
fn hostile_records_with_valid_checksums_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.trj");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut opened, mut damaged) = (0, 0);
    let extremes = [0u64, 1, 7, 8, 63, 64, 255, 4096, u32::MAX as u64, u32::MAX as u64 + 1, i64::MAX as u64, u64::MAX];
    for clean in [true, false] {
        let (sim, bytes) = small_sim(clean);
        let records = sim.shards[0].records.clone();
        for _ in 0..1500 {
            let mut buf = bytes.clone();
            let (start, _) = records[rng.below(records.len())];
            let start = start as usize;
            let len = u64::from_le_bytes(buf[start + 8..start + 16].try_into().unwrap()) as usize;
            for _ in 0..1 + rng.below(3) {
                // Overwrite an aligned 4- or 8-byte field of the header or payload with an extreme.
                let field = if rng.below(8) == 0 { start + 8 } else { start + 24 + 4 * rng.below(len.max(4) / 4) };
                let value = extremes[rng.below(extremes.len())].wrapping_add(rng.below(3) as u64);
                let width = if rng.below(2) == 0 { 4 } else { 8 };
                let end = (field + width).min(buf.len());
                buf[field..end].copy_from_slice(&value.to_le_bytes()[..end - field]);
            }
            reframe(&mut buf, start);
            write(&path, &buf);
            for opts in [lenient(), STRICT] {
                let Ok(ds) = Dataset::open(&path, opts) else { continue };
                opened += 1;
                damaged += usize::from(!ds.problems().is_empty());
                for i in 0..ds.episodes().len() {
                    let _ = ds.view().episode_metadata(i);
                    for spec in &sim.columns {
                        let _ = ds.view().read_episode_column(i, &spec.name);
                        let _ = ds.view().view_episode_column(i, &spec.name);
                    }
                }
                for rec in 0..ds.recordings().len() {
                    for (col, spec) in ds.recordings()[rec].columns.iter().enumerate() {
                        let rows = ColumnRows { recording: rec, lane: 0, column: col as u32, first_row: 3, n_rows: 9 };
                        if let Some(row) = spec.row_bytes().filter(|&r| r < 1 << 16) {
                            let mut out = vec![0u8; row * 9];
                            let _ = ds.view().read_rows(rows, &mut out);
                        } else {
                            let _ = ds.view().read_strings(rows);
                        }
                    }
                }
            }
        }
    }
    // Both kinds of outcome happened: files that opened with problems, and files that did not open.
    assert!(damaged > 100 && opened < 2 * 2 * 1500, "opened {opened}, with problems {damaged}");
}

/// A file of random bytes behind a valid header, and random runs of plausible record headers.
#[test]
fn random_garbage_after_a_valid_header_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.trj");
    let mut rng = Rng(12345);
    let header = FileHeader::new([9; 16], 0, 0).encode();
    for round in 0..300 {
        let mut buf = header.to_vec();
        while buf.len() < 64 + 2000 {
            let kind = 1 + rng.below(7) as u32;
            let payload: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
            let at = buf.len();
            buf.extend_from_slice(&[0; 24]);
            buf.extend_from_slice(&payload);
            buf.resize(buf.len().next_multiple_of(8), 0);
            buf[at..at + 4].copy_from_slice(&kind.to_le_bytes());
            buf[at + 8..at + 16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
            reframe(&mut buf, at);
            if round % 3 == 0 && rng.below(4) == 0 {
                let i = 64 + rng.below(buf.len() - 64);
                buf[i] ^= 0x20;
            }
        }
        write(&path, &buf);
        if let Ok(ds) = Dataset::open(&path, lenient()) {
            for i in 0..ds.episodes().len() {
                let _ = ds.view().episode_metadata(i);
            }
        }
    }
}

#[test]
fn zeros_and_bytes_after_the_last_record_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tail.trj");
    for (clean, tail, words) in [
        (false, vec![0u8; 100], "zero bytes at end of file"),
        (false, vec![0u8; 7], "zero bytes at end of file"),
        (false, b"some junk that is not a record header".to_vec(), "damaged"),
        (true, vec![0u8; 16], "after the end record are ignored"),
        (true, b"junk".to_vec(), "after the end record are ignored"),
    ] {
        let (sim, mut bytes) = small_sim(clean);
        let end = bytes.len() as u64;
        bytes.extend_from_slice(&tail);
        write(&path, &bytes);
        let ds = Dataset::open(&path, lenient()).unwrap();
        check_values(&ds, &sim, &sim.listed());
        assert_eq!(ds.problems().len(), 1, "{:?}", ds.problems());
        assert_eq!(ds.problems()[0].offset, end);
        assert!(ds.problems()[0].why.contains(words), "{:?}", ds.problems());
    }
}
