//! Room to evolve: a test-only "future writer" rewrites real shards the way a later 1.x minor
//! version may write them (longer table entries and fixed parts, records of a kind this version
//! does not know, flags it may ignore, new keys in the JSON records), and today's reader must read
//! them exactly as the originals. Flags a reader must understand, it refuses with an error naming
//! them.

mod writer_util;

use std::path::{Path, PathBuf};

use serde_json::json;
use trajcore_core::format::chunks::{self, PendingChunk};
use trajcore_core::format::episode;
use trajcore_core::format::header::{FileHeader, HEADER_LEN};
use trajcore_core::format::index::{EntrySizes, IndexDelta, OtherRecord, NO_PREVIOUS};
use trajcore_core::format::record::{padding_after, RecordHeader, RecordKind, RECORD_HEADER_LEN};
use trajcore_core::format::timelog;
use trajcore_core::reader::{Dataset, OpenOptions};
use trajcore_core::Error;
use writer_util::*;

const UNKNOWN_KIND: u32 = 77;

/// A multi-shard recording with infos, parts across rollovers and episode metadata.
fn record(dir: &Path) -> Vec<ExpEpisode> {
    let mut h = Harness::new(dir, config(2, true, "next_step", json!({"max_shard_bytes": 4096, "chunk_bytes": 200})));
    h.add_info_columns();
    let mut tick = 0;
    h.reset(&[env_step(0, 0), env_step(1, 0)], None);
    for _ in 0..160 {
        tick += 1;
        let mut e: Vec<EnvStep> = (0..2).map(|l| env_step(l, tick)).collect();
        e[0].terminated = tick % 11 == 0;
        e[1].truncated = tick % 17 == 0;
        h.step(&e);
        if tick % 11 == 0 {
            h.set_metadata(0, json!({"tick": tick}));
        }
    }
    h.close()
}

fn shards(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// What the future writer changes.
#[derive(Clone, Copy, Default)]
struct Future {
    /// Header and record flags a reader must understand (0: none).
    required_header: u32,
    required_record: u16,
}

/// Rewrites one shard record by record, as a newer minor version would have written it.
fn rewrite(bytes: &[u8], future: Future) -> Vec<u8> {
    let mut header = FileHeader::decode(bytes).unwrap();
    header.compat_flags = 0xF0;
    header.required_flags |= future.required_header;
    let mut out = header.encode().to_vec();
    let mut delta = IndexDelta { prev_index: NO_PREVIOUS, ..Default::default() };
    let sizes = EntrySizes { header: 40, other: 24, chunk_ref: 72, episode: 16 };
    let mut at = HEADER_LEN;
    let push = |out: &mut Vec<u8>, kind: u32, payload: &[u8], required: u16| -> u64 {
        let offset = out.len() as u64;
        let mut h = RecordHeader::new_raw(kind, payload);
        h.compat_flags = 0x0F;
        h.required_flags = required;
        out.extend_from_slice(&h.encode());
        out.extend_from_slice(payload);
        out.resize(out.len() + padding_after(payload.len() as u64), 0);
        offset
    };
    while at < bytes.len() {
        let h = RecordHeader::decode(&bytes[at..]).unwrap();
        let payload = &bytes[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + h.payload_len as usize];
        at += h.total_len() as usize;
        match h.record_kind().unwrap() {
            RecordKind::Meta | RecordKind::Column => {
                let mut value: serde_json::Value = serde_json::from_slice(payload).unwrap();
                value["added_in_1_1"] = json!({"anything": [1, 2, 3]});
                let kind = h.kind;
                let offset = push(&mut out, kind, &serde_json::to_vec(&value).unwrap(), 0);
                delta.other_records.push(OtherRecord { kind, offset });
                // A record of a kind this version does not know, listed by the index.
                let offset = push(&mut out, UNKNOWN_KIND, b"a record of a newer kind", 0);
                delta.other_records.push(OtherRecord { kind: UNKNOWN_KIND, offset });
            }
            RecordKind::Chunks => {
                let refs = chunks::decode(payload, 0, h.packed_table()).unwrap();
                let pending: Vec<PendingChunk> = refs
                    .iter()
                    .map(|r| {
                        let rel = (r.data_offset - RECORD_HEADER_LEN as u64) as usize;
                        PendingChunk {
                            lane: r.lane,
                            column: r.column,
                            first_row: r.first_row,
                            n_rows: r.n_rows,
                            codec: r.codec,
                            raw_len: r.raw_len,
                            data: payload[rel..rel + r.stored_len as usize].to_vec(),
                            flags: r.flags | 0x100,
                        }
                    })
                    .collect();
                let offset = out.len() as u64;
                // Packed tables stay packed, with the longer entries inside.
                let (p, refs) = if h.packed_table() {
                    chunks::encode_packed(offset, &pending, chunks::ENTRY_LEN + 16)
                } else {
                    chunks::encode_with_entry_size(offset, &pending, chunks::ENTRY_LEN + 16)
                };
                push(&mut out, RecordKind::Chunks as u32, &p, h.required_flags);
                delta.chunks.extend(refs);
            }
            RecordKind::Episode => {
                let batch = episode::decode_batch(payload, 0).unwrap();
                let items: Vec<episode::EpisodeItem> =
                    batch.iter().map(|(s, m, x)| (s.clone(), m.as_slice(), x.as_slice())).collect();
                let p = episode::encode_batch_with(&items, episode::FIXED_LEN + 24);
                let offset = push(&mut out, RecordKind::Episode as u32, &p, future.required_record);
                delta.episode_records.push(offset);
            }
            RecordKind::Index => {
                if at + 32 == bytes.len() {
                    // The final index: an unknown record just before it, listed by it.
                    let offset = push(&mut out, UNKNOWN_KIND + 1, b"trailing", 0);
                    delta.other_records.push(OtherRecord { kind: UNKNOWN_KIND + 1, offset });
                }
                let offset = out.len() as u64;
                let p = if h.packed_table() { delta.encode_packed_with(sizes) } else { delta.encode_with(sizes) };
                push(&mut out, RecordKind::Index as u32, &p, h.required_flags);
                delta = IndexDelta { prev_index: offset, ..Default::default() };
            }
            // Its copies name the old offsets; copies are optional: left out.
            RecordKind::OpeningCopies => {}
            RecordKind::End => {
                push(&mut out, RecordKind::End as u32, &delta.prev_index.to_le_bytes(), 0);
            }
            RecordKind::Timelog => {
                // Entries 16 bytes longer, as a newer writer's with more fields.
                let len = timelog::ENTRY_LEN;
                let n = (payload.len() - 8) / len;
                let mut p = Vec::new();
                p.extend_from_slice(&(n as u32).to_le_bytes());
                p.extend_from_slice(&((len + 16) as u32).to_le_bytes());
                for e in payload[8..].chunks(len) {
                    p.extend_from_slice(e);
                    p.extend_from_slice(&[0xAB; 16]);
                }
                let offset = push(&mut out, RecordKind::Timelog as u32, &p, 0);
                delta.other_records.push(OtherRecord { kind: RecordKind::Timelog as u32, offset });
            }
        }
    }
    out
}

fn rewrite_dir(from: &Path, to: &Path, future: Future) {
    std::fs::create_dir_all(to).unwrap();
    for f in shards(from) {
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(to.join(f.file_name().unwrap()), rewrite(&bytes, future)).unwrap();
    }
}

#[test]
fn todays_reader_reads_a_future_minor_version() {
    let dir = tempfile::tempdir().unwrap();
    let expected = record(dir.path());
    assert!(shards(dir.path()).len() >= 3);
    let future = tempfile::tempdir().unwrap();
    rewrite_dir(dir.path(), future.path(), Future::default());
    let ds = Dataset::open(future.path(), OpenOptions { strict: true, ..Default::default() }).unwrap();
    check(&ds, &expected);
    // Longer timelog entries: the fields this version knows read as written.
    let today = Dataset::open(dir.path(), OpenOptions::default()).unwrap();
    let (samples, problems) = ds.timelog(0);
    assert!(!samples.is_empty() && problems.is_empty(), "{problems:?}");
    assert_eq!(samples, today.timelog(0).0);
    // The unknown records are skipped and listed: two per Meta/Column record, one per shard.
    let skipped = ds.skipped_records();
    assert!(skipped.iter().any(|r| r.kind == UNKNOWN_KIND) && skipped.iter().any(|r| r.kind == UNKNOWN_KIND + 1));
    // The recovery path (no End record) reads it the same.
    let cut = tempfile::tempdir().unwrap();
    for f in shards(future.path()) {
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(cut.path().join(f.file_name().unwrap()), &bytes[..bytes.len() - 32]).unwrap();
    }
    let recovered = Dataset::open(cut.path(), OpenOptions::default()).unwrap();
    check(&recovered, &expected);
}

#[test]
fn features_a_reader_must_understand_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let future = tempfile::tempdir().unwrap();
    rewrite_dir(dir.path(), future.path(), Future { required_header: 1 << 5, ..Default::default() });
    let err = Dataset::open(future.path(), OpenOptions::default()).err().expect("refused");
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("0x20") && err.to_string().contains("upgrade trajcore"), "{err}");

    // On one record kind: those records are left out, each reported naming the flag.
    let records = tempfile::tempdir().unwrap();
    rewrite_dir(dir.path(), records.path(), Future { required_record: 1 << 3, ..Default::default() });
    let ds = Dataset::open(records.path(), OpenOptions::default()).unwrap();
    assert!(ds.episodes().is_empty());
    assert!(
        ds.problems().iter().any(|p| p.why.contains("0x8") && p.why.contains("does not know")),
        "{:?}",
        ds.problems()
    );
    assert!(Dataset::open(records.path(), OpenOptions { strict: true, ..Default::default() }).is_err());
}
