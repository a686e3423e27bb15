//! Packed tables: a Chunks table or an Index record's chunk references stored as one zstd frame
//! (record required flag `PACKED_TABLE`). A timer seal makes a chunk of every column of every
//! lane, and 120 bytes of entries a chunk were most of what a slowly recorded file added; the
//! entries of one table differ in few bytes, so stored plane by plane (byte 0 of every entry,
//! then byte 1, ...) they compress about tenfold.

use super::codec::zstd_decompress;

/// The zstd level of packed tables: higher levels gained under 5% on real tables.
const LEVEL: i32 = 3;
/// A packed table claims at most this many bytes per stored byte, plus `SLACK` (more is damage,
/// refused before allocating): real tables pack 5 to 15 times.
pub const MAX_RATIO: u64 = 1024;
const SLACK: u64 = 1 << 20;

/// `n` entries of `entry_len` bytes each, back to back, packed: one zstd frame (declaring its
/// size) of the entries' bytes in plane order.
pub fn pack(entries: &[u8], entry_len: usize) -> Vec<u8> {
    assert!(entry_len > 0 && entries.len().is_multiple_of(entry_len));
    let planes = to_planes(entries, entry_len);
    zstd::bulk::compress(&planes, LEVEL).expect("zstd compresses any bytes in memory")
}

/// Undoes `pack`: the `n` entries of `entry_len` bytes back to back. The frame must state that
/// size, within `MAX_RATIO` of its own.
pub fn unpack(stored: &[u8], n: usize, entry_len: usize) -> Result<Vec<u8>, String> {
    let len = n
        .checked_mul(entry_len)
        .filter(|&len| len as u64 <= (stored.len() as u64).saturating_mul(MAX_RATIO).saturating_add(SLACK))
        .ok_or_else(|| format!("packed table of {n} entries of {entry_len} bytes in {} bytes", stored.len()))?;
    let declared = zstd::zstd_safe::get_frame_content_size(stored).ok().flatten();
    if declared != Some(len as u64) {
        return Err(format!("packed table frame declares {declared:?} bytes, its {n} entries need {len}"));
    }
    let planes = zstd_decompress(stored, len)?;
    if planes.len() != len {
        return Err(format!("packed table gave {} bytes, its {n} entries need {len}", planes.len()));
    }
    Ok(from_planes(&planes, entry_len))
}

/// Byte `j` of entry `i` goes to `j * n + i`.
fn to_planes(entries: &[u8], entry_len: usize) -> Vec<u8> {
    let n = entries.len() / entry_len;
    let mut out = vec![0u8; entries.len()];
    for (i, entry) in entries.chunks_exact(entry_len).enumerate() {
        for (j, &b) in entry.iter().enumerate() {
            out[j * n + i] = b;
        }
    }
    out
}

fn from_planes(planes: &[u8], entry_len: usize) -> Vec<u8> {
    let n = planes.len() / entry_len;
    let mut out = vec![0u8; planes.len()];
    for (j, plane) in planes.chunks_exact(n.max(1)).enumerate().take(entry_len) {
        for (i, &b) in plane.iter().enumerate() {
            out[i * entry_len + j] = b;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn packs_and_unpacks_any_table(entry_len in 1usize..80, rows in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let n = rows.len() / entry_len;
            let entries = &rows[..n * entry_len];
            let stored = pack(entries, entry_len);
            prop_assert_eq!(unpack(&stored, n, entry_len).unwrap(), entries);
            // A count that does not match the frame is damage, never a misread.
            prop_assert!(unpack(&stored, n + 1, entry_len).is_err());
            if n > 0 {
                prop_assert!(unpack(&stored, n - 1, entry_len).is_err());
            }
        }

        #[test]
        fn any_bytes_unpack_or_fail(stored in proptest::collection::vec(any::<u8>(), 0..200), n in 0usize..100_000, entry_len in 1usize..100) {
            if let Ok(entries) = unpack(&stored, n, entry_len) {
                prop_assert_eq!(entries.len(), n * entry_len);
            }
        }
    }

    #[test]
    fn planes_are_byte_j_of_every_entry() {
        let entries = [1, 2, 3, 11, 12, 13];
        assert_eq!(to_planes(&entries, 3), [1, 11, 2, 12, 3, 13]);
        assert_eq!(from_planes(&to_planes(&entries, 3), 3), entries);
    }

    #[test]
    fn claims_beyond_the_ratio_are_refused_before_allocating() {
        let stored = pack(&[0u8; 56], 56);
        let err = unpack(&stored, usize::MAX / 2, 56).unwrap_err();
        assert!(err.contains("packed table of"), "{err}");
        assert!(unpack(&stored, 1 << 40, 56).is_err());
    }
}
