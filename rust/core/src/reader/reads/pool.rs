//! Memory for a batch's outputs: where each output lies in one allocation (`ArenaLayout`), and
//! a small pool of large blocks reused from batch to batch (`BlockPool`).
//!
//! One allocation per batch rather than one per output: glibc hands back and re-maps large
//! freed blocks when several are freed together, so separate multi-MB outputs page-fault on
//! every batch; a single block is kept and reused. Large blocks go through the pool because
//! fresh pages cost the kernel a zeroing pass, and glibc maps every block over 32 MB afresh.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Mutex;

/// Where the outputs of a batch lie in one block of `len` bytes: one after another, each
/// starting 64-byte aligned (relative to the block's start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArenaLayout {
    pub ranges: Vec<Range<usize>>,
    pub len: usize,
}

impl ArenaLayout {
    /// The layout of parts given as (item size, shape); `None` when the bytes overflow `usize`.
    pub fn new<'a>(parts: impl IntoIterator<Item = (usize, &'a [usize])>) -> Option<ArenaLayout> {
        let mut ranges = Vec::new();
        let mut len = 0usize;
        for (item_size, shape) in parts {
            let bytes = shape.iter().try_fold(item_size, |a, &d| a.checked_mul(d))?;
            let start = len.checked_next_multiple_of(64)?;
            len = start.checked_add(bytes)?;
            ranges.push(start..len);
        }
        Some(ArenaLayout { ranges, len })
    }

    /// The parts of `memory` (a block laid out by this layout), for the caller to write whole;
    /// the bytes between them, which no caller writes, are zeroed so the block holds no
    /// uninitialized memory once the parts are written.
    ///
    /// Panics if `memory` is not `len` bytes.
    pub fn split<'m>(&self, memory: &'m mut [MaybeUninit<u8>]) -> Vec<&'m mut [MaybeUninit<u8>]> {
        assert_eq!(memory.len(), self.len, "a block laid out by this layout");
        let mut parts = Vec::with_capacity(self.ranges.len());
        let (mut rest, mut at) = (memory, 0);
        for r in &self.ranges {
            let (gap, tail) = std::mem::take(&mut rest).split_at_mut(r.start - at);
            gap.fill(MaybeUninit::new(0));
            let (part, tail) = tail.split_at_mut(r.len());
            parts.push(part);
            (rest, at) = (tail, r.end);
        }
        parts
    }
}

/// Large blocks handed back when their batch is dropped, for the next large batch.
pub struct BlockPool {
    blocks: Mutex<Vec<Vec<MaybeUninit<u8>>>>,
    /// Smaller blocks are not pooled: the allocator reuses those itself.
    min_len: usize,
    max_blocks: usize,
    max_bytes: usize,
}

/// The pool of batch outputs: a couple of blocks cover a training loop's batch shapes.
pub static BATCH_BLOCKS: BlockPool = BlockPool::new(16 << 20, 2, 256 << 20);

impl BlockPool {
    pub const fn new(min_len: usize, max_blocks: usize, max_bytes: usize) -> BlockPool {
        BlockPool { blocks: Mutex::new(Vec::new()), min_len, max_blocks, max_bytes }
    }

    /// A block of `len` bytes, not initialized: the smallest pooled one that fits, or a new one;
    /// `None` when `len` is too small to pool.
    pub fn take(&self, len: usize) -> Option<Vec<MaybeUninit<u8>>> {
        if len < self.min_len {
            return None;
        }
        let mut blocks = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let best = (0..blocks.len()).filter(|&i| blocks[i].capacity() >= len).min_by_key(|&i| blocks[i].capacity());
        // `remove`, not `swap_remove`: the others keep their order, oldest first.
        let mut block = best.map(|i| blocks.remove(i)).unwrap_or_else(|| Vec::with_capacity(len));
        drop(blocks);
        // SAFETY: the capacity is at least `len`, and `MaybeUninit` bytes need no initialization.
        unsafe { block.set_len(len) };
        Some(block)
    }

    /// Keeps `block` for a later `take`, with the blocks handed back most recently: the oldest
    /// ones go while the pool holds more than `max_blocks` blocks or `max_bytes` bytes. A block
    /// too small to pool, or larger than `max_bytes` alone, is freed.
    ///
    /// The newest stay because a reader whose batches grew (a scan in larger blocks than the
    /// last) would otherwise find the pool full of the old size: every batch of the new one
    /// would then take fresh memory, which the kernel faults in and zeroes page by page.
    pub fn give_back(&self, block: Vec<MaybeUninit<u8>>) {
        if block.capacity() < self.min_len || block.capacity() > self.max_bytes {
            return;
        }
        let mut blocks = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        blocks.push(block);
        let mut held: usize = blocks.iter().map(Vec::capacity).sum();
        let mut dropped = 0;
        while blocks.len() - dropped > self.max_blocks || held > self.max_bytes {
            held -= blocks[dropped].capacity();
            dropped += 1;
        }
        let freed: Vec<_> = blocks.drain(..dropped).collect();
        drop(blocks);
        drop(freed); // after the lock: freeing a large block unmaps it
    }

    #[cfg(test)]
    fn capacities(&self) -> Vec<usize> {
        self.blocks.lock().unwrap().iter().map(Vec::capacity).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_64_byte_aligned_and_overflow_is_none() {
        // (item size, shape) per part; the (start, end) of each, and the total; None: overflow.
        type Case = (&'static [(usize, &'static [usize])], Option<(&'static [(usize, usize)], usize)>);
        let table: &[Case] = &[
            (&[], Some((&[], 0))),
            (&[(4, &[3, 2])], Some((&[(0, 24)], 24))),
            (&[(4, &[3, 2]), (8, &[5]), (1, &[])], Some((&[(0, 24), (64, 104), (128, 129)], 129))),
            (&[(8, &[0]), (2, &[1])], Some((&[(0, 0), (0, 2)], 2))),
            (&[(8, &[usize::MAX])], None),
            (&[(1, &[usize::MAX - 10]), (1, &[1])], None),
        ];
        for (parts, want) in table {
            let got = ArenaLayout::new(parts.iter().copied());
            let want = want.map(|(r, len)| ArenaLayout { ranges: r.iter().map(|&(a, b)| a..b).collect(), len });
            assert_eq!(got, want, "{parts:?}");
        }
    }

    #[test]
    fn split_gives_the_parts_and_zeroes_the_gaps() {
        let layout = ArenaLayout::new([(1, &[3][..]), (1, &[2][..])]).unwrap();
        let mut memory = vec![MaybeUninit::new(7u8); layout.len];
        let parts = layout.split(&mut memory);
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [3, 2]);
        for p in parts {
            p.fill(MaybeUninit::new(1));
        }
        // SAFETY: every byte was initialized above.
        let bytes: Vec<u8> = memory.iter().map(|b| unsafe { b.assume_init() }).collect();
        assert_eq!(&bytes[..3], [1, 1, 1]);
        assert!(bytes[3..64].iter().all(|&b| b == 0));
        assert_eq!(&bytes[64..], [1, 1]);
    }

    #[test]
    fn the_pool_reuses_the_smallest_fitting_block() {
        let pool = BlockPool::new(100, 2, 1000);
        assert!(pool.take(99).is_none(), "too small to pool");
        let (a, b) = (pool.take(300).unwrap(), pool.take(200).unwrap());
        assert_eq!((a.len(), b.len()), (300, 200));
        pool.give_back(a);
        pool.give_back(b);
        let c = pool.take(150).unwrap();
        assert_eq!((c.len(), c.capacity()), (150, 200), "the smallest that fits");
        assert_eq!(pool.capacities(), [300]);
        let d = pool.take(400).unwrap();
        assert_eq!(d.capacity(), 400, "none fits: a new one");
        assert_eq!(pool.capacities(), [300], "kept for a batch it fits");
    }

    #[test]
    fn the_pool_keeps_the_newest_blocks_within_its_bounds() {
        // (min_len, max_blocks, max_bytes), the capacities handed back in order, those kept
        // (oldest first).
        type Case = ((usize, usize, usize), &'static [usize], &'static [usize]);
        let table: &[Case] = &[
            ((100, 2, 1000), &[300, 200], &[300, 200]),
            ((100, 2, 1000), &[99, 300], &[300]),            // too small to pool
            ((100, 2, 1000), &[300, 200, 600], &[200, 600]), // at most two: the oldest goes
            ((100, 3, 500), &[300, 150, 400], &[400]),       // at most 500 bytes: both older go
            ((100, 3, 500), &[300, 150, 100], &[150, 100]),  // 550 bytes: the oldest goes
            ((100, 2, 500), &[300, 501], &[300]),            // larger than the bound alone
            ((100, 2, 1500), &[200, 200, 600, 600], &[600, 600]), // batches grew: the new size stays
        ];
        for &((min_len, max_blocks, max_bytes), given, kept) in table {
            let pool = BlockPool::new(min_len, max_blocks, max_bytes);
            for &len in given {
                pool.give_back(Vec::with_capacity(len));
            }
            assert_eq!(pool.capacities(), kept, "{given:?} into ({min_len}, {max_blocks}, {max_bytes})");
        }
    }
}
