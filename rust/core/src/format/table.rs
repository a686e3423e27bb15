//! A table of equal entries that a later version may lengthen: `n u32, entry_len u32`, then `n`
//! entries of `entry_len` bytes, and nothing after. A reader takes the fields it knows from the
//! front of each entry and skips the rest. Episode metrics and timelog records are such tables.

use super::u32_at;

const HEADER_LEN: usize = 8;

/// The header of a table of `n` entries of `entry_len` bytes, with room for the entries.
pub fn start(n: usize, entry_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + n * entry_len);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&(entry_len as u32).to_le_bytes());
    out
}

/// The entries of the table `bytes`, each of at least `min_entry_len` (> 0) bytes. The error
/// names the table (`what`) and the sizes that do not add up.
pub fn entries<'a>(
    bytes: &'a [u8],
    min_entry_len: usize,
    what: &str,
) -> Result<std::slice::ChunksExact<'a, u8>, String> {
    if bytes.len() < HEADER_LEN {
        return Err(format!("{what} shorter than its header"));
    }
    let n = u32_at(bytes, 0) as usize;
    let len = u32_at(bytes, 4) as usize;
    if len < min_entry_len.max(1) || n.checked_mul(len).and_then(|b| b.checked_add(HEADER_LEN)) != Some(bytes.len()) {
        return Err(format!("{what} of {} bytes for {n} entries of {len} bytes", bytes.len()));
    }
    Ok(bytes[HEADER_LEN..].chunks_exact(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header claiming `n` entries of `entry_len` bytes, then `body` bytes.
    fn table(n: u32, entry_len: u32, body: usize) -> Vec<u8> {
        let mut b = [n.to_le_bytes(), entry_len.to_le_bytes()].concat();
        b.extend((0..body).map(|i| i as u8));
        b
    }

    #[test]
    fn entries_of_tables() {
        // (n, entry_len, body bytes, min entry len) -> entries, or None for an error
        let cases: &[(u32, u32, usize, usize, Option<usize>)] = &[
            (0, 4, 0, 4, Some(0)),
            (3, 4, 12, 4, Some(3)),
            (2, 6, 12, 4, Some(2)),          // longer entries of a later version
            (2, 2, 4, 4, None),              // shorter than this version's
            (0, 0, 0, 0, None),              // no entry length at all
            (3, 4, 11, 4, None),             // cut
            (3, 4, 13, 4, None),             // bytes after the entries
            (u32::MAX, 1 << 31, 0, 4, None), // sizes that overflow
        ];
        for &(n, len, body, min, want) in cases {
            let bytes = table(n, len, body);
            let got = entries(&bytes, min, "test table").ok().map(|e| e.count());
            assert_eq!(got, want, "{n} entries of {len} bytes, {body} bytes");
        }
        assert_eq!(entries(&[0; 7], 4, "test table").unwrap_err(), "test table shorter than its header");
        let bytes = table(2, 6, 12);
        let e: Vec<&[u8]> = entries(&bytes, 4, "t").unwrap().collect();
        assert_eq!(e, [&[0u8, 1, 2, 3, 4, 5][..], &[6, 7, 8, 9, 10, 11][..]]);
        let mut written = start(2, 6);
        written.extend(0..12u8);
        assert_eq!(written, bytes);
    }
}
