//! Index outputs (episode and step numbers): int64s written as little-endian 8-byte rows into
//! memory not initialized yet.

use std::mem::MaybeUninit;

/// Writes `first, first + step, first + 2 * step, ...` as little-endian int64s into the 8-byte
/// rows of `dst` (an episode's number repeated, its steps counted).
pub(in crate::reader) fn put_sequence(dst: &mut [MaybeUninit<u8>], first: i64, step: i64) {
    let rows = dst.len() / 8;
    put_i64s(dst, (0..rows).map(|k| first.wrapping_add(step.wrapping_mul(k as i64))));
}

/// Writes `values` as little-endian int64s into the 8-byte rows of `dst`, as many as it holds.
pub(in crate::reader) fn put_i64s(dst: &mut [MaybeUninit<u8>], values: impl Iterator<Item = i64>) {
    for (d, v) in dst.chunks_exact_mut(8).zip(values) {
        d.copy_from_slice(&v.to_le_bytes().map(MaybeUninit::new));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// At any alignment: the sequence little-endian, the bytes past the last whole row
        /// untouched.
        #[test]
        fn sequences_are_written_little_endian(
            rows in 0usize..50,
            first in any::<i64>(),
            step in -3i64..3,
            at in 0usize..16,
            extra in 0usize..8,
        ) {
            let mut dst = vec![MaybeUninit::new(0xA5u8); at + rows * 8 + extra];
            put_sequence(&mut dst[at..], first, step);
            // SAFETY: every byte was initialized at creation.
            let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
            let want: Vec<u8> =
                (0..rows as i64).flat_map(|k| first.wrapping_add(k.wrapping_mul(step)).to_le_bytes()).collect();
            prop_assert!(got[..at].iter().all(|&b| b == 0xA5));
            prop_assert_eq!(&got[at..at + want.len()], &want[..]);
            prop_assert!(got[at + want.len()..].iter().all(|&b| b == 0xA5));
        }
    }
}
