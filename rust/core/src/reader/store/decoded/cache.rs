//! Decoded chunks: a byte-bounded LRU, behind a lock, counting the memory each holds (frame
//! stacks as their frames), so a dataset can be read from many threads. No lock is held while
//! decoding.
//!
//! The LRU is kept lazily: a hit only stamps the entry with the current tick (a batch of
//! training reads hits hundreds of chunks, so a hit must be cheap); the eviction queue, ordered
//! by the tick an entry was queued at, is brought up to date when an entry reaches its front:
//! one used since is queued again at its last use instead of being dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::joined::{JoinedRuns, CACHE_SHARE};
use super::shared_chunks::{Shape, SharedChunk, SharedChunks};
use crate::reader::int_map::{ChunkKey, IntMap};
use crate::reader::store::chunk_bytes::{ChunkBytes, Decoded};

struct Lru {
    /// Key -> (data, tick of its last use).
    entries: IntMap<ChunkKey, (Arc<Decoded>, u64)>,
    /// Tick an entry was queued at -> key; an entry used since it was queued has a later last
    /// use, and one replaced or dropped leaves a stale item here: both are settled at the front.
    order: BTreeMap<u64, ChunkKey>,
    tick: u64,
    bytes: usize,
}

/// Decoded (decompressed) chunks, least recently used dropped first once over `capacity` bytes.
/// Raw chunks are read straight from the memory map and never enter it. Chunks with a slot in
/// a shared store (see `shared_chunks`) are kept there instead, for every process at once.
pub(crate) struct ChunkCache {
    capacity: usize,
    lru: Mutex<Lru>,
    shared: Option<Arc<SharedChunks>>,
    /// Chunks this process decoded through `fill`.
    decodes: AtomicU64,
    /// Small chunks joined into runs of rows (see `joined`), within the same bound.
    pub joined: JoinedRuns,
}

impl ChunkCache {
    pub fn new(capacity: usize) -> Self {
        ChunkCache::with_store(capacity, None)
    }

    /// A cache whose chunks with a slot in `shared` go there, the others to an LRU of `capacity`.
    pub fn with_store(capacity: usize, shared: Option<SharedChunks>) -> Self {
        let lru = Lru { entries: IntMap::default(), order: BTreeMap::new(), tick: 0, bytes: 0 };
        let shared = shared.map(Arc::new);
        ChunkCache { capacity, lru: Mutex::new(lru), shared, decodes: AtomicU64::new(0), joined: JoinedRuns::default() }
    }

    /// The bound of the LRU.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// What the joined runs may hold.
    pub fn joined_bound(&self) -> usize {
        self.capacity / CACHE_SHARE
    }

    /// The store, if chunks are shared.
    pub fn store(&self) -> Option<&SharedChunks> {
        self.shared.as_deref()
    }

    /// Chunks decoded by this process through `fill` (a ready shared slot is not decoded).
    pub fn decodes(&self) -> u64 {
        self.decodes.load(Ordering::Relaxed)
    }

    /// Whether `key` is kept only whole (a shared slot holds whole chunks).
    pub fn keeps_whole(&self, key: ChunkKey) -> bool {
        self.shared.as_ref().is_some_and(|s| s.slot(key).is_some())
    }

    /// A ready shared slot's chunk.
    fn shared_get(&self, key: ChunkKey) -> Option<Arc<Decoded>> {
        let store = self.shared.as_ref()?;
        let slot = store.slot(key)?;
        store.ready(&slot).then(|| Arc::new(Decoded::Shared(SharedChunk { store: store.clone(), slot })))
    }

    /// The chunk `key`, decoded by `decode` unless another process has it in the shared store
    /// (or is decoding it: then waited for, boundedly), and kept: in its shared slot, published
    /// for every process, or in this process's LRU.
    pub fn fill<E>(&self, key: ChunkKey, decode: impl FnOnce() -> Result<Decoded, E>) -> Result<Arc<Decoded>, E> {
        let shared = self.shared.as_ref().and_then(|s| Some((s, s.slot(key)?)));
        let Some((store, slot)) = shared else {
            self.decodes.fetch_add(1, Ordering::Relaxed);
            let data = Arc::new(decode()?);
            self.insert(key, data.clone());
            return Ok(data);
        };
        match store.claim(&slot) {
            Ok(false) => return Ok(Arc::new(Decoded::Shared(SharedChunk { store: store.clone(), slot }))),
            Ok(true) => {}
            // Its writer is stalled: decode here, and keep it out of the slot.
            Err(()) => {
                self.decodes.fetch_add(1, Ordering::Relaxed);
                let data = Arc::new(decode()?);
                self.insert(key, data.clone());
                return Ok(data);
            }
        }
        self.decodes.fetch_add(1, Ordering::Relaxed);
        let data = match decode() {
            Ok(data) => data,
            Err(e) => {
                store.release(&slot);
                return Err(e);
            }
        };
        let published = match &data {
            Decoded::Rows(b) => store.publish(&slot, &[b]),
            Decoded::Frames(f) => {
                let (bytes, ends) = f.parts();
                // SAFETY: a usize slice seen as its bytes (any alignment is fine for u8).
                let ends =
                    unsafe { std::slice::from_raw_parts(ends.as_ptr() as *const u8, std::mem::size_of_val(ends)) };
                store.publish(&slot, &[ends, bytes])
            }
            Decoded::Shared(_) => {
                store.release(&slot);
                false
            }
        };
        match published {
            true => Ok(Arc::new(Decoded::Shared(SharedChunk { store: store.clone(), slot }))),
            // Not the shape the index promised (a damaged frame header): kept here only.
            false => {
                let data = Arc::new(data);
                self.insert(key, data.clone());
                Ok(data)
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        // A panic elsewhere while holding the lock leaves the map consistent (every update is
        // a few infallible steps), so a poisoned lock is still usable.
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: ChunkKey) -> Option<Arc<Decoded>> {
        if let Some(data) = self.shared_get(key) {
            return Some(data);
        }
        let mut guard = self.lock();
        let lru = &mut *guard;
        lru.tick += 1;
        let tick = lru.tick;
        let (data, last) = lru.entries.get_mut(&key)?;
        *last = tick;
        Some(data.clone())
    }

    /// Runs `f` with a `get` that holds the lock once for many keys. A ready shared slot of
    /// rows comes back as its bytes in the store (published slots never change again, and the
    /// store lives as long as the cache): a batch of scattered rows hits hundreds of chunks,
    /// and a handle for each would be an allocation each.
    pub fn with_gets<'c, R>(&'c self, f: impl FnOnce(&mut dyn FnMut(ChunkKey) -> Option<ChunkBytes<'c>>) -> R) -> R {
        let mut guard: Option<MutexGuard<'_, Lru>> = None;
        f(&mut |key| {
            if let Some(store) = &self.shared {
                if let Some(slot) = store.slot(key).filter(|slot| store.ready(slot)) {
                    return Some(match slot.shape {
                        Shape::Rows(_) => ChunkBytes::Mapped(store.bytes(&slot)),
                        Shape::Frames { .. } => {
                            ChunkBytes::Decoded(Arc::new(Decoded::Shared(SharedChunk { store: store.clone(), slot })))
                        }
                    });
                }
            }
            let lru = &mut **guard.get_or_insert_with(|| self.lock());
            lru.tick += 1;
            let tick = lru.tick;
            lru.entries.get_mut(&key).map(|(data, last)| {
                *last = tick;
                ChunkBytes::Decoded(data.clone())
            })
        })
    }

    /// Keeps `data` unless it alone exceeds the capacity, evicting old entries to make room
    /// (for the joined runs too).
    pub fn insert(&self, key: ChunkKey, data: Arc<Decoded>) {
        let size = data.heap_bytes();
        if size > self.capacity {
            return;
        }
        let mut guard = self.lock();
        let lru = &mut *guard;
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((old, _)) = lru.entries.insert(key, (data, tick)) {
            // Another thread decoded the same chunk meanwhile; its queue item goes stale.
            lru.bytes -= old.heap_bytes();
        }
        lru.order.insert(tick, key);
        lru.bytes += size;
        while lru.bytes + self.joined.bytes() > self.capacity {
            let Some((queued, oldest)) = lru.order.pop_first() else { break };
            match lru.entries.get(&oldest) {
                Some(&(_, last)) if last > queued => {
                    lru.order.insert(last, oldest); // used since: queue it at its last use
                }
                Some(&(_, last)) if last == queued => {
                    if let Some((old, _)) = lru.entries.remove(&oldest) {
                        lru.bytes -= old.heap_bytes();
                    }
                }
                _ => {} // stale: the entry was replaced (queued again later) or is gone
            }
        }
    }

    /// Drops the chunks of the shards `gone` marks (a bounded recording deleted them: sampling
    /// no longer reads them, and a read of one decodes it again).
    pub fn forget_shards(&self, gone: &[bool]) {
        self.joined.forget_shards(gone);
        self.forget_chunks_of(gone);
    }

    /// Drops the decoded chunks of the shards `gone` marks but keeps their rows in the joined
    /// runs: a shard switched to its compacted rewrite holds the same rows (the catalog checked
    /// it) in chunks at other offsets, and dropping the runs would cut every run at that shard.
    pub fn forget_chunks_of(&self, gone: &[bool]) {
        let mut guard = self.lock();
        let lru = &mut *guard;
        let mut freed = 0;
        lru.entries.retain(|&(shard, _), (data, _)| {
            let keep = !gone.get(shard).copied().unwrap_or(false);
            if !keep {
                freed += data.heap_bytes();
            }
            keep
        });
        lru.bytes -= freed; // their queue items go stale
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(len: usize, value: u8) -> Arc<Decoded> {
        Arc::new(Decoded::Rows(vec![value; len]))
    }

    #[test]
    fn lru_stays_within_capacity_and_drops_least_recent() {
        let cache = ChunkCache::new(100);
        cache.insert((0, 0), rows(40, 0));
        cache.insert((0, 1), rows(40, 1));
        assert!(cache.get((0, 0)).is_some()); // (0, 1) is now the least recently used
        cache.insert((0, 2), rows(40, 2));
        assert!(cache.get((0, 1)).is_none());
        assert!(cache.get((0, 0)).is_some());
        assert!(cache.get((0, 2)).is_some());
        assert_eq!(cache.bytes(), 80);
        cache.insert((0, 3), rows(101, 3));
        assert!(cache.get((0, 3)).is_none(), "an entry larger than the cache is not kept");
        cache.insert((0, 2), rows(50, 2));
        assert_eq!(cache.bytes(), 90);
    }

    #[test]
    fn forgotten_shards_leave_the_cache() {
        let cache = ChunkCache::new(100);
        cache.insert((0, 0), rows(10, 0));
        cache.insert((1, 0), rows(20, 1));
        cache.insert((2, 0), rows(30, 2));
        cache.forget_shards(&[true, false, true]);
        assert!(cache.get((0, 0)).is_none() && cache.get((2, 0)).is_none());
        assert!(cache.get((1, 0)).is_some());
        assert_eq!(cache.bytes(), 20);
        cache.insert((3, 0), rows(80, 3)); // stale queue items are settled as they reach the front
        assert_eq!(cache.bytes(), 100);
    }

    #[test]
    fn a_shard_switched_to_its_rewrite_keeps_its_joined_rows() {
        let cache = ChunkCache::new(1000);
        cache.insert((1, 0), rows(10, 1));
        // One run of rows from shards 0, 1 and 2: shard 1 (in the middle) is then rewritten.
        cache.joined.get((0, 0, 0), 2, 6, 250, |_, _, run| {
            run.push(0, 0, &[0, 0]);
            run.push(1, 1, &[1, 1]);
            run.push(2, 2, &[2, 2]);
        });
        cache.forget_chunks_of(&[false, true, false]);
        assert!(cache.get((1, 0)).is_none(), "the old file's chunk is gone");
        let run = cache.joined.get((0, 0, 0), 2, 3, 250, |_, _, _| panic!("rejoined rows it held"));
        assert_eq!(run.map(|r| (r.first_row, r.bytes.clone())), Some((0, vec![0, 0, 1, 1, 2, 2])));
        // Evicted, the same shard cuts the run (its rows are no longer sampled).
        cache.forget_shards(&[false, true, false]);
        assert_eq!(cache.joined.bytes(), 0);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let cache = ChunkCache::new(0);
        cache.insert((0, 0), rows(1, 0));
        assert!(cache.get((0, 0)).is_none());
        cache.insert((0, 1), rows(0, 0));
        assert_eq!(cache.bytes(), 0);
    }
}
