//! A chunk's rows as the read path holds them: in place in the memory map (raw chunks), or
//! decoded and shared with the cache, either contiguous or, for frame stacks, as their frames
//! (each stack rebuilt by one copy when it is read, the cache holding a `stack`th of the bytes).

use std::sync::Arc;

use super::decoded::shared_chunks::SharedChunk;
use crate::format::stack::Frames;

/// A decoded chunk (or a prefix of its rows), as the cache keeps it.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// The rows, contiguous (str chunks: their offsets and text).
    Rows(Vec<u8>),
    /// A frame-stack chunk's stored frames; its rows are overlapping slices of them.
    Frames(Frames),
    /// Either of the above, in a shared store's slot.
    Shared(SharedChunk),
}

impl Decoded {
    /// The bytes of the whole rows it holds, for rows of `row_bytes` (frames: as rebuilt).
    pub fn rows_len(&self, row_bytes: Option<usize>) -> usize {
        match self {
            Decoded::Rows(b) => b.len(),
            Decoded::Frames(f) => f.rows() * row_bytes.unwrap_or(0),
            Decoded::Shared(s) => match s.rows() {
                Some(b) => b.len(),
                None => s.frames().map_or(0, |(_, ends, _)| ends.len()) * row_bytes.unwrap_or(0),
            },
        }
    }

    /// The memory it holds (what the cache counts).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Decoded::Rows(b) => b.len(),
            Decoded::Frames(f) => f.heap_bytes(),
            // Held by the store, not by this process's cache.
            Decoded::Shared(_) => 0,
        }
    }
}

/// A chunk's decoded rows: in a map that outlives the read (a raw chunk in its shard's, a
/// ready slot of rows in the shared store's) or decoded (or, without a map, read) and shared
/// with the cache.
pub(crate) enum ChunkBytes<'a> {
    Mapped(&'a [u8]),
    Decoded(Arc<Decoded>),
}

impl ChunkBytes<'_> {
    /// The bytes of the whole rows it holds (see `Decoded::rows_len`).
    pub fn rows_len(&self, row_bytes: Option<usize>) -> usize {
        match self {
            ChunkBytes::Mapped(b) => b.len(),
            ChunkBytes::Decoded(d) => d.rows_len(row_bytes),
        }
    }

    /// The rows' bytes where they lie contiguous (raw and decoded rows, and str chunks);
    /// `None` for frames.
    pub fn contiguous(&self) -> Option<&[u8]> {
        match self {
            ChunkBytes::Mapped(b) => Some(b),
            ChunkBytes::Decoded(d) => match &**d {
                Decoded::Rows(b) => Some(b),
                Decoded::Frames(_) => None,
                Decoded::Shared(s) => s.rows(),
            },
        }
    }

    /// A frame-stack chunk's frames.
    fn frames(&self) -> Option<FrameRows<'_>> {
        let (data, ends, row) = match self {
            ChunkBytes::Decoded(d) => match &**d {
                Decoded::Frames(f) => (f.parts().0, f.parts().1, f.row_bytes()),
                Decoded::Shared(s) => s.frames()?,
                Decoded::Rows(_) => return None,
            },
            ChunkBytes::Mapped(_) => return None,
        };
        Some(FrameRows { data, ends, row })
    }

    /// Hands `put` the bytes of rows `first .. first + n` of `row_bytes` each, in order, in as
    /// few slices as they lie in (one when contiguous, one a row for frames); `false` (and
    /// nothing handed) when the chunk holds fewer rows.
    pub fn rows(&self, row_bytes: usize, first: usize, n: usize, mut put: impl FnMut(&[u8])) -> bool {
        if let Some(bytes) = self.contiguous() {
            let span = |a: usize| Some(a..a.checked_add(n.checked_mul(row_bytes)?)?);
            let Some(src) = first.checked_mul(row_bytes).and_then(span).and_then(|r| bytes.get(r)) else {
                return false;
            };
            put(src);
            return true;
        }
        let Some(frames) = self.frames() else { return false };
        if first.checked_add(n).is_none_or(|end| end > frames.rows()) {
            return false;
        }
        (first..first + n).filter_map(|r| frames.row(r)).for_each(put);
        true
    }

    /// Where row `r` starts, to prefetch it.
    pub fn row_start(&self, row_bytes: usize, r: usize) -> Option<*const u8> {
        let start = match self.contiguous() {
            Some(bytes) => bytes.get(r.checked_mul(row_bytes)?..)?,
            None => self.frames()?.row(r)?,
        };
        Some(start.as_ptr())
    }
}

/// A frame-stack chunk's frames, wherever they are held (see `stack::Frames`).
struct FrameRows<'a> {
    data: &'a [u8],
    ends: &'a [usize],
    row: usize,
}

impl<'a> FrameRows<'a> {
    fn rows(&self) -> usize {
        self.ends.len()
    }

    /// Row `r`'s bytes: the `row` bytes ending where its own stored bytes end.
    fn row(&self, r: usize) -> Option<&'a [u8]> {
        let end = *self.ends.get(r)?;
        self.data.get(end.checked_sub(self.row)?..end)
    }
}
