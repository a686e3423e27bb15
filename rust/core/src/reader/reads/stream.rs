//! Copies whose stores go around the CPU caches ("non-temporal" stores), for bulk reads whose
//! output is far larger than the caches: an ordinary store first reads the destination's cache
//! line from memory (to own it), then writes it back, so copying many pieces into a large
//! output moves three bytes for each one copied. Streamed stores write whole lines without
//! reading them: pieces of a few hundred bytes (a CartPole scan's) copied 48 MB in about two
//! thirds of the time `memcpy` took. The data then is not in the caches, which a caller that
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
pub(in crate::reader) fn streams(bytes: usize) -> bool {
    bytes >= STREAM_FROM_BYTES.load(Ordering::Relaxed)
}

/// Whether rows of `row_bytes` can be streamed: every store to an output must then be streamed,
/// so every piece must start and end on a 4-byte boundary. An ordinary store to a cache line
/// that streamed stores are filling flushes the line half written, which made a scan twice as
/// slow when the edges of pieces were copied plainly.
pub(in crate::reader) fn streams_rows(row_bytes: usize) -> bool {
    row_bytes.is_multiple_of(4)
}

/// Copies `src` into `dst` (the same length), every store streamed where `dst` starts on a
/// 4-byte boundary and the length is a multiple of 4 (rows that `streams_rows`), else plainly.
pub(in crate::reader) fn copy_streamed(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "a streamed copy between slices of different lengths");
    #[cfg(target_arch = "x86_64")]
    if dst.as_ptr().align_offset(4) == 0 && dst.len().is_multiple_of(4) {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128, _mm_stream_si32, _mm_stream_si64};
        let (to, from, len) = (dst.as_mut_ptr().cast::<u8>(), src.as_ptr(), dst.len());
        // SAFETY (every block below): each store writes bytes `at .. at + width` of `dst` and
        // each load reads the same bytes of `src`, where `at + width <= len`, the length of
        // both (asserted above); `at` keeps `dst + at` aligned to the store's width (4 at the
        // start, checked above, then 8 or 16 once reached); unaligned loads and writes of
        // integers read from unaligned bytes are allowed. SSE2 is part of every x86-64 CPU.
        // The slices do not overlap (one borrowed mutably, the other shared).
        let mut at = 0;
        let aligned = |at: usize, width: usize| (to as usize + at).is_multiple_of(width);
        while at < len && !aligned(at, 16) {
            if aligned(at, 8) && at + 8 <= len {
                unsafe { _mm_stream_si64(to.add(at).cast::<i64>(), from.add(at).cast::<i64>().read_unaligned()) };
                at += 8;
            } else {
                unsafe { _mm_stream_si32(to.add(at).cast::<i32>(), from.add(at).cast::<i32>().read_unaligned()) };
                at += 4;
            }
        }
        while at + 16 <= len {
            unsafe { _mm_stream_si128(to.add(at).cast::<__m128i>(), _mm_loadu_si128(from.add(at).cast::<__m128i>())) };
            at += 16;
        }
        if at + 8 <= len {
            unsafe { _mm_stream_si64(to.add(at).cast::<i64>(), from.add(at).cast::<i64>().read_unaligned()) };
            at += 8;
        }
        if at + 4 <= len {
            unsafe { _mm_stream_si32(to.add(at).cast::<i32>(), from.add(at).cast::<i32>().read_unaligned()) };
        }
        return;
    }
    copy_plain(dst, src);
}

/// Writes `first, first + step, first + 2 * step, ...` as little-endian int64s into the 8-byte
/// rows of `dst` (an episode's number repeated, its steps counted); with `stream`, every store
/// streamed (two rows at a time) where `dst` is 8-byte aligned (a numpy array is).
pub(in crate::reader) fn put_sequence(dst: &mut [MaybeUninit<u8>], first: i64, step: i64, stream: bool) {
    let rows = dst.len() / 8;
    let value = |k: usize| first.wrapping_add(step.wrapping_mul(k as i64));
    #[cfg(target_arch = "x86_64")]
    if stream && dst.as_ptr().align_offset(8) == 0 {
        use std::arch::x86_64::{
            __m128i, _mm_add_epi64, _mm_set1_epi64x, _mm_set_epi64x, _mm_stream_si128, _mm_stream_si64,
        };
        let to = dst.as_mut_ptr().cast::<i64>();
        // SAFETY (every block below): row `k < rows` lies in `dst`, 8-byte aligned (checked
        // above); a pair of rows is stored where row `k` is 16-byte aligned and `k + 1 < rows`;
        // a little-endian CPU stores each value as its little-endian bytes. SSE2 is part of
        // every x86-64 CPU.
        let mut k = 0;
        if rows > 0 && !(to as usize).is_multiple_of(16) {
            unsafe { _mm_stream_si64(to, value(0)) };
            k = 1;
        }
        let (mut pair, twice) =
            unsafe { (_mm_set_epi64x(value(k + 1), value(k)), _mm_set1_epi64x(step.wrapping_mul(2))) };
        while k + 2 <= rows {
            unsafe {
                _mm_stream_si128(to.add(k).cast::<__m128i>(), pair);
                pair = _mm_add_epi64(pair, twice);
            }
            k += 2;
        }
        if k < rows {
            unsafe { _mm_stream_si64(to.add(k), value(k)) };
        }
        return;
    }
    put_i64s(dst, (0..rows).map(value));
}

/// Writes `values` as little-endian int64s into the 8-byte rows of `dst`, as many as it holds.
pub(in crate::reader) fn put_i64s(dst: &mut [MaybeUninit<u8>], values: impl Iterator<Item = i64>) {
    for (d, v) in dst.chunks_exact_mut(8).zip(values) {
        d.copy_from_slice(&v.to_le_bytes().map(MaybeUninit::new));
    }
}

/// Makes the streamed stores of this thread visible before whatever it does next.
pub(in crate::reader) fn fence() {
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

        /// Streamed or not, at any alignment: the sequence little-endian, the bytes past the
        /// last whole row untouched.
        #[test]
        fn sequences_are_written_little_endian(
            rows in 0usize..50,
            first in any::<i64>(),
            step in -3i64..3,
            at in 0usize..16,
            extra in 0usize..8,
            stream in any::<bool>(),
        ) {
            let mut dst = vec![MaybeUninit::new(0xA5u8); at + rows * 8 + extra];
            put_sequence(&mut dst[at..], first, step, stream);
            fence();
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
