//! Copies whose stores go around the CPU caches ("non-temporal" stores), for bulk reads whose
//! output is far larger than the caches: an ordinary store first reads the destination's cache
//! line from memory (to own it), then writes it back, so copying many pieces into a large
//! output moves three bytes for each one copied. Streamed stores write whole lines without
//! reading them: on a CartPole scan (pieces of a few hundred bytes) they copied 48 MB in about
//! two thirds of the time of `memcpy`. The data then is not in the caches, which a caller that
//! reads its batch at once would pay for: only outputs far larger than the caches use them.
//!
//! Streamed stores are weakly ordered: a thread that made them calls `fence` before its output
//! is handed on (a scoped thread's join is not enough by itself).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Output bytes from which a bulk read streams its stores: well past the CPU caches, which a
/// smaller batch is better read from.
static STREAM_FROM_BYTES: AtomicUsize = AtomicUsize::new(32 << 20);

/// Sets the output bytes from which a bulk read streams its stores (tests use 1 to take that
/// path on small data). Results never depend on it.
#[doc(hidden)]
pub fn set_stream_from_bytes(bytes: usize) {
    STREAM_FROM_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// Whether a bulk read of `bytes` of output streams its stores.
pub(super) fn streams(bytes: usize) -> bool {
    bytes >= STREAM_FROM_BYTES.load(Ordering::Relaxed)
}

/// Pieces shorter than this are copied plainly: too little to fill a cache line in a row.
const STREAM_MIN_BYTES: usize = 64;

/// Copies `src` into `dst` (the same length).
pub(super) fn copy_streamed(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "a streamed copy between slices of different lengths");
    #[cfg(target_arch = "x86_64")]
    if src.len() >= STREAM_MIN_BYTES {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        // The head up to the first 16-byte boundary of `dst`, and the tail after the last one,
        // are copied plainly: a streamed store writes 16 aligned bytes.
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let body_end = head + (dst.len() - head) / 16 * 16;
        copy_plain(&mut dst[..head], &src[..head]);
        let (to, from) = (dst.as_mut_ptr().cast::<u8>(), src.as_ptr());
        let mut at = head;
        while at < body_end {
            // SAFETY: `at + 16 <= body_end <= len` of both slices (same length), so the load
            // reads 16 bytes of `src` (unaligned loads are allowed) and the store writes 16
            // bytes of `dst`, 16-byte aligned (`at - head` is a multiple of 16 and `dst + head`
            // is aligned). SSE2 is part of every x86-64 CPU. The slices do not overlap (one is
            // borrowed mutably, the other shared).
            unsafe { _mm_stream_si128(to.add(at).cast::<__m128i>(), _mm_loadu_si128(from.add(at).cast::<__m128i>())) };
            at += 16;
        }
        copy_plain(&mut dst[body_end..], &src[body_end..]);
        return;
    }
    copy_plain(dst, src);
}

/// Writes `values` as little-endian int64s into the 8-byte rows of `dst`, as many as it holds;
/// with `stream`, around the CPU caches where `dst` is 8-byte aligned (a numpy array is).
pub(super) fn put_i64s(dst: &mut [MaybeUninit<u8>], values: impl Iterator<Item = i64>, stream: bool) {
    #[cfg(target_arch = "x86_64")]
    if stream && dst.as_ptr().align_offset(8) == 0 {
        let to = dst.as_mut_ptr().cast::<i64>();
        for (k, v) in (0..dst.len() / 8).zip(values) {
            // SAFETY: `k < len / 8`, so the 8 bytes from `8 * k` lie in `dst`, 8-byte aligned
            // (checked above); a little-endian CPU stores `v` as its little-endian bytes.
            unsafe { std::arch::x86_64::_mm_stream_si64(to.add(k), v) };
        }
        return;
    }
    for (d, v) in dst.chunks_exact_mut(8).zip(values) {
        d.copy_from_slice(&v.to_le_bytes().map(MaybeUninit::new));
    }
}

/// Makes the streamed stores of this thread visible before whatever it does next.
pub(super) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a store fence has no operands and only orders this thread's stores; SSE2 is part
    // of every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

fn copy_plain(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    // SAFETY: the caller's slices have the same length (asserted in `copy_streamed`, sliced
    // alike since) and do not overlap; `MaybeUninit<u8>` has the layout of `u8`.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any length at any alignment of either side: the bytes copied, nothing around them
        /// touched.
        #[test]
        fn streamed_copies_are_copies(
            bytes in prop::collection::vec(any::<u8>(), 0..600),
            dst_at in 0usize..40,
            src_at in 0usize..40,
        ) {
            let src_at = src_at.min(bytes.len());
            let src = &bytes[src_at..];
            let mut dst = vec![MaybeUninit::new(0xA5u8); dst_at + src.len() + 40];
            copy_streamed(&mut dst[dst_at..dst_at + src.len()], src);
            fence();
            // SAFETY: every byte was initialized at creation.
            let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
            prop_assert!(got[..dst_at].iter().all(|&b| b == 0xA5));
            prop_assert_eq!(&got[dst_at..dst_at + src.len()], src);
            prop_assert!(got[dst_at + src.len()..].iter().all(|&b| b == 0xA5));
        }

        /// Streamed or not, at any alignment: the values little-endian, the bytes past the
        /// last whole row untouched.
        #[test]
        fn int64s_are_written_little_endian(values in prop::collection::vec(any::<i64>(), 0..50), at in 0usize..16, extra in 0usize..8, stream in any::<bool>()) {
            let mut dst = vec![MaybeUninit::new(0xA5u8); at + values.len() * 8 + extra];
            put_i64s(&mut dst[at..], values.iter().copied(), stream);
            fence();
            // SAFETY: every byte was initialized at creation.
            let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
            let want: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            prop_assert!(got[..at].iter().all(|&b| b == 0xA5));
            prop_assert_eq!(&got[at..at + want.len()], &want[..]);
            prop_assert!(got[at + want.len()..].iter().all(|&b| b == 0xA5));
        }
    }
}
