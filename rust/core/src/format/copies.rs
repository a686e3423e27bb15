//! The Opening Copies record (format 1.2): copies of what opening a closed shard reads one record
//! at a time (its Episode records and its Index records but the final one), back to back just
//! before the final Index, so a reader of an object in a store fetches them with one range
//! request instead of one per record.
//!
//! Why copies: damage locality (format 1.1) writes small Episode records right after the chunks
//! that seal their rows, so a 10M-step CartPole recording spreads about 900 of them through its
//! files, and Index checkpoints lie every 16 MiB; each would cost a store a request at open. The
//! records stay where they are (a cut file keeps what lies before the cut); the copies are extra
//! bytes a local reader reads only in place of a damaged Episode record.
//!
//! Payload: `count u32, entry_len u16, reserved u16`, then `count` entries (`offset u64, len u64`:
//! where the record lies in the file and its bytes, header and padding included, `entry_len`
//! bytes each so a later version can add fields), then the records' bytes in the entries' order.
//! A copy is the record byte for byte: a reader checks it as it would the record itself.

use super::u64_at;

const HEAD_LEN: usize = 8;
const ENTRY_LEN: usize = 16;

/// Copies are written when a shard has at least this many such records (fewer cost a store few
/// requests; each copy costs its bytes twice in the file).
pub const COPIES_FROM_RECORDS: usize = 16;
/// ... and when they take at most this many bytes (the writer holds them in memory at close, once).
pub const COPIES_MAX_BYTES: u64 = 64 << 20;

/// The payload holding `records` (file offset, the record's bytes).
pub fn encode(records: &[(u64, &[u8])]) -> Vec<u8> {
    let spans: Vec<(u64, u64)> = records.iter().map(|(offset, b)| (*offset, b.len() as u64)).collect();
    let mut out = table(&spans);
    for (_, b) in records {
        out.extend_from_slice(b);
    }
    out
}

/// The payload's head and entries for records at `spans` (file offset, bytes), with room for
/// the records' bytes to follow (so the writer reads them straight in after it).
pub fn table(spans: &[(u64, u64)]) -> Vec<u8> {
    let bytes: u64 = spans.iter().map(|s| s.1).sum();
    let mut out = Vec::with_capacity(HEAD_LEN + spans.len() * ENTRY_LEN + bytes as usize);
    out.extend_from_slice(&(spans.len() as u32).to_le_bytes());
    out.extend_from_slice(&(ENTRY_LEN as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    for (offset, len) in spans {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    out
}

/// Where each copy lies: (file offset of the record, range of its bytes in `payload`).
pub fn decode(payload: &[u8]) -> Result<Vec<(u64, std::ops::Range<usize>)>, String> {
    if payload.len() < HEAD_LEN {
        return Err("episode copies record shorter than its header".into());
    }
    let count = u32::from_le_bytes(payload[0..4].try_into().unwrap()) as usize;
    let entry_len = u16::from_le_bytes([payload[4], payload[5]]) as usize;
    if entry_len < ENTRY_LEN {
        return Err(format!("episode copies entries of {entry_len} bytes, fewer than {ENTRY_LEN}"));
    }
    let table_end = (count as u128) * (entry_len as u128) + HEAD_LEN as u128;
    if table_end > payload.len() as u128 {
        return Err(format!("episode copies record of {} bytes claims {count} entries", payload.len()));
    }
    let mut at = table_end as usize;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let entry = HEAD_LEN + i * entry_len;
        let (offset, len) = (u64_at(payload, entry), u64_at(payload, entry + 8));
        let end = usize::try_from(len).ok().and_then(|n| at.checked_add(n)).filter(|&e| e <= payload.len());
        let Some(end) = end else {
            return Err(format!("episode copy {i} ({len} bytes) runs past the record"));
        };
        out.push((offset, at..end));
        at = end;
    }
    if at != payload.len() {
        return Err(format!("episode copies record has {} bytes after its copies", payload.len() - at));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_round_trip() {
        let (a, b) = (vec![1u8; 40], vec![2u8; 16]);
        let payload = encode(&[(64, &a), (4096, &b)]);
        let table = HEAD_LEN + 2 * ENTRY_LEN;
        assert_eq!(decode(&payload).unwrap(), vec![(64, table..table + 40), (4096, table + 40..table + 56)]);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
    }

    #[test]
    fn damaged_tables_are_errors_not_panics() {
        let good = encode(&[(64, &[7u8; 24][..])]);
        let mut cases: Vec<(&str, Vec<u8>)> = vec![("short head", good[..4].to_vec())];
        let mut long_count = good.clone();
        long_count[0] = 200;
        cases.push(("count past the end", long_count));
        let mut long_copy = good.clone();
        long_copy[16] = 25;
        cases.push(("copy past the end", long_copy));
        let mut small_entry = good.clone();
        small_entry[4] = 8;
        cases.push(("entry too small", small_entry));
        let mut trailing = good.clone();
        trailing.push(0);
        cases.push(("bytes after the copies", trailing));
        for (what, payload) in cases {
            assert!(decode(&payload).is_err(), "{what}");
        }
    }
}
