//! Opening a closed shard in object storage with its Opening Copies record (`format::copies`):
//! the copies come in one range request and go into the fetch cache at their records' offsets,
//! so walking the index chain and taking in the Episode records then read from the cache,
//! checked as usual.

use std::collections::HashSet;

use super::framing::frame;
use super::source::Source;
use crate::format::copies;
use crate::format::index::IndexDelta;
use crate::format::record::{RecordHeader, RecordKind, RECORD_HEADER_LEN};

/// The copies record the final index delta lists, and where it ends: a writer writes it just
/// before its final Index record, at `final_index`.
pub(crate) fn copies_range(last: &IndexDelta, final_index: u64) -> Option<std::ops::Range<u64>> {
    let kind = RecordKind::OpeningCopies as u32;
    let at = last.other_records.iter().rev().find(|o| o.kind == kind)?.offset;
    (at < final_index).then_some(at..final_index)
}

/// Fetches the copies in `range` of a shard in a store and keeps each in the fetch cache for the
/// reads of opening (`RemoteObject::keep_copy`); returns their records' offsets. A copies
/// record that is damaged or unreadable gives none: the records are then fetched themselves
/// (`verify` reports the damage).
pub(crate) fn fetch_copies(map: &Source, range: std::ops::Range<u64>) -> HashSet<u64> {
    let Some(object) = map.remote_object() else { return HashSet::new() };
    if map.prefetch(std::slice::from_ref(&range)).is_err() {
        return HashSet::new(); // `scan` reports the store's error
    }
    let Ok(rec) = frame(map, range.start) else { return HashSet::new() };
    if rec.header.record_kind() != Some(RecordKind::OpeningCopies) || rec.header.unknown_required() != 0 {
        return HashSet::new();
    }
    // The payload as the cache holds it (no copy): each copy is kept as a slice of it.
    let len = (rec.payload_end - rec.payload_start) as u64;
    let Ok(payload) = object.read(rec.payload_start as u64, len) else { return HashSet::new() };
    if crc32c::crc32c(&payload) != rec.header.payload_crc {
        object.forget(range); // never kept: `verify` fetches it again
        return HashSet::new();
    }
    let Ok(entries) = copies::decode(&payload) else { return HashSet::new() };
    entries
        .into_iter()
        .map(|(offset, bytes)| {
            object.keep_copy(offset, payload.slice(bytes));
            offset
        })
        .collect()
}

/// The payload of the copy of the record at `offset` kept in the Opening Copies record at
/// `range`, when the copies record and the copy both pass their checksums: what a reader reads
/// instead of a damaged Episode record, on a disk as in a store (where opening reads the
/// copies anyway), so both list the same episodes.
pub(crate) fn copy_payload(map: &Source, range: std::ops::Range<u64>, offset: u64) -> Option<Vec<u8>> {
    let rec = frame(map, range.start).ok()?;
    if rec.header.record_kind() != Some(RecordKind::OpeningCopies) || rec.header.unknown_required() != 0 {
        return None;
    }
    if !rec.payload_ok(map) {
        return None;
    }
    let payload = rec.payload(map);
    let (_, bytes) = copies::decode(&payload).ok()?.into_iter().find(|(at, _)| *at == offset)?;
    let copy = payload.get(bytes)?;
    let header = RecordHeader::decode(copy.get(..RECORD_HEADER_LEN)?)?;
    let body =
        copy.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN.checked_add(usize::try_from(header.payload_len).ok()?)?)?;
    (crc32c::crc32c(body) == header.payload_crc).then(|| body.to_vec())
}

/// What a damaged Episode record whose copy is intact costs: nothing (said once, the same on a
/// disk and from a store).
pub(crate) const COPY_READ_INSTEAD: &str =
    "its copy in the Opening Copies record is intact and read instead: no episode is lost";

/// Whether every copy in `payload` (an Opening Copies record's) is the bytes of the record at
/// its offset (`verify`: a copy that differs from an intact record would mislead a reader of the
/// object in a store; a damaged record is reported on its own).
pub(crate) fn check_copies(map: &Source, payload: &[u8]) -> Result<(), String> {
    for (offset, bytes) in copies::decode(payload)? {
        let copy = &payload[bytes];
        if map.bytes(offset, copy.len() as u64).is_some_and(|record| *record == *copy) {
            continue;
        }
        if frame(map, offset).is_ok_and(|rec| rec.payload_ok(map)) {
            return Err(format!("opening copies record: its copy of the record at offset {offset} differs from it"));
        }
    }
    Ok(())
}
