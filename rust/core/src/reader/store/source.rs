//! Where a shard's bytes come from: a memory map (reads are slices of it, raw chunks are handed
//! out as views without a copy), or positioned reads of the open file (`mmap=False`: every read
//! is a copy, and a file truncated by another process gives a short read, an error, never the
//! SIGBUS a map gives).

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::objstore::remote::RemoteObject;

pub(crate) struct Source {
    kind: Kind,
    /// Set when the file was found shorter than this source, or rewritten in place: nothing is
    /// read from it any more (through a map, lost pages would fault; the bytes are not the ones
    /// the index describes).
    unreadable: AtomicBool,
    /// The modification time (ns) of a closed file, which never changes again; 0 while open.
    /// Positioned reads check it, so a file rewritten in place is noticed by the next read.
    sealed_mtime_ns: AtomicU64,
}

enum Kind {
    /// Shared so zero-copy views handed out keep the mapping alive after a refresh remaps.
    Mapped(Arc<Mmap>),
    /// The file, and its length when this source was made (reads stay below it).
    Read { file: File, len: u64 },
    /// An object in object storage, read by range (see `remote`).
    Remote(RemoteObject),
    /// Let go of (a shard a bounded recording deleted, that nothing handed out still reads:
    /// `Shard::release`): nothing reads from it; its length as it was.
    Released { len: u64 },
}

impl Source {
    /// A source over the first `len` bytes of `file` (its length now).
    pub fn open(file: &File, path: &Path, mmap: bool) -> Result<Source> {
        let io = |e| Error::io(path, e);
        let kind = if mmap {
            // SAFETY: the map is only ever read, never written. Another process may append to
            // the file (a writer still running): appending does not change the mapped bytes, and
            // the writer never rewrites bytes it has written (the format is append-only). A
            // process truncating the file under us would make reads of the lost pages fault
            // (SIGBUS): the documented cost of a memory map, which `mmap=False` avoids.
            Kind::Mapped(Arc::new(unsafe { Mmap::map(file) }.map_err(io)?))
        } else {
            let len = file.metadata().map_err(io)?.len();
            Kind::Read { file: file.try_clone().map_err(io)?, len }
        };
        Ok(Source { kind, unreadable: AtomicBool::new(false), sealed_mtime_ns: AtomicU64::new(0) })
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self.kind, Kind::Mapped(_))
    }

    pub fn len(&self) -> u64 {
        match &self.kind {
            Kind::Mapped(map) => map.len() as u64,
            Kind::Read { len, .. } => *len,
            Kind::Remote(object) => object.size(),
            Kind::Released { len } => *len,
        }
    }

    /// Notes that the file is closed (its End record was read), as of modification time `mtime`.
    pub fn seal(&self, mtime: Option<std::time::SystemTime>) {
        let ns = mtime.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as u64);
        self.sealed_mtime_ns.store(ns, Ordering::Relaxed);
    }

    /// Lets go of the pages of the map this process has touched (a shard a bounded recording
    /// deleted: sampling reads it no more, and its pages would otherwise stay in the process's
    /// RSS for as long as the dataset is open). A later read of it maps them back in.
    pub fn release_pages(&self) {
        #[cfg(unix)]
        if let Kind::Mapped(map) = &self.kind {
            // SAFETY: the map is a shared, read-only map of a file: MADV_DONTNEED drops this
            // process's mappings of its pages and nothing else; a later access reads the file's
            // bytes again (unchanged: a closed shard is never rewritten, and a deleted one
            // cannot be), so every view of the map, handed out or not, keeps its values.
            let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    /// Marks the file as changed under the reader: every later read fails.
    pub fn mark_unreadable(&self) {
        self.unreadable.store(true, Ordering::Relaxed);
    }

    pub fn is_unreadable(&self) -> bool {
        self.unreadable.load(Ordering::Relaxed)
    }

    /// `len` bytes from `offset`: a slice of the map, or a copy read from the file. `None` when
    /// the range is not inside the source, or the file could not be read (it shrank, an I/O
    /// error): the caller reports the record as unreadable.
    pub fn bytes(&self, offset: u64, len: u64) -> Option<Cow<'_, [u8]>> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len())?;
        if self.is_unreadable() {
            return None;
        }
        match &self.kind {
            Kind::Mapped(map) => Some(Cow::Borrowed(&map[offset as usize..end as usize])),
            Kind::Read { file, .. } => {
                let sealed = self.sealed_mtime_ns.load(Ordering::Relaxed);
                if sealed != 0 && mtime_ns(file) != Some(sealed) {
                    self.mark_unreadable(); // a closed file rewritten in place
                    return None;
                }
                let mut buf = vec![0u8; usize::try_from(len).ok()?];
                file.read_exact_at(&mut buf, offset).ok()?;
                Some(Cow::Owned(buf))
            }
            Kind::Released { .. } => None,
            Kind::Remote(object) => match object.read(offset, len) {
                Ok(b) => Some(Cow::Owned(b.to_vec())),
                Err(_) => {
                    // A failure ends with its cause: the next read asks again (with the client's
                    // retries), unless the object was replaced, which no retry undoes.
                    if object.is_replaced() {
                        self.mark_unreadable();
                    }
                    None
                }
            },
        }
    }

    /// Bytes `offset .. offset + len` failed a check: a store's are dropped from the fetch cache,
    /// so the next read fetches them again (a flip in transit is no damage, and bytes that failed
    /// are never kept). Returns whether there was anything to fetch again (a store's object).
    pub fn forget(&self, offset: u64, len: u64) -> bool {
        match &self.kind {
            Kind::Remote(object) => {
                object.forget(offset..offset.saturating_add(len));
                true
            }
            _ => false,
        }
    }

    /// `len` bytes from `offset` through `check`; a store's bytes that fail it are fetched once
    /// more before the failure stands, and are not kept. `None`: the bytes could not be read.
    pub fn checked<T, E>(&self, offset: u64, len: u64, check: impl Fn(&[u8]) -> Result<T, E>) -> Option<Result<T, E>> {
        let first = check(&self.bytes(offset, len)?);
        if first.is_ok() || !self.forget(offset, len) {
            return Some(first);
        }
        let again = check(&self.bytes(offset, len)?);
        if again.is_err() {
            self.forget(offset, len);
        }
        Some(again)
    }

    /// The map, for zero-copy views (none when reading through the file, or once it changed).
    pub fn map(&self) -> Option<&Arc<Mmap>> {
        match &self.kind {
            Kind::Mapped(map) if !self.is_unreadable() => Some(map),
            _ => None,
        }
    }
}

fn mtime_ns(file: &File) -> Option<u64> {
    let t = file.metadata().ok()?.modified().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_nanos() as u64)
}

/// Object storage (`remote`): a third kind beside the map and positioned reads.
impl Source {
    /// A source in place of one let go of (`Kind::Released`): `len` as it was, nothing readable.
    pub fn released(len: u64) -> Source {
        Source { kind: Kind::Released { len }, unreadable: AtomicBool::new(true), sealed_mtime_ns: AtomicU64::new(0) }
    }

    pub fn remote(object: RemoteObject) -> Source {
        Source { kind: Kind::Remote(object), unreadable: AtomicBool::new(false), sealed_mtime_ns: AtomicU64::new(0) }
    }

    pub fn remote_object(&self) -> Option<&RemoteObject> {
        match &self.kind {
            Kind::Remote(object) => Some(object),
            _ => None,
        }
    }

    /// Fetches `ranges` ahead of the reads that need them (object storage: together, in
    /// parallel; local files need nothing). Errors name the URL and the cause, which `bytes`
    /// cannot (a read that fails there reads as damage).
    pub fn prefetch(&self, ranges: &[std::ops::Range<u64>]) -> Result<()> {
        match &self.kind {
            Kind::Remote(object) => object.prefetch(ranges).inspect_err(|_| {
                if object.is_replaced() {
                    self.mark_unreadable();
                }
            }),
            _ => Ok(()),
        }
    }
}
