//! Shared state of the read path: decoded chunks (a byte-bounded LRU, behind a lock, counting
//! the memory each holds: frame stacks as their frames) and the
//! Chunks records whose payload checksum has been verified (atomic flags), so a `Dataset` can
//! be read from many threads. No lock is held while decoding or checksumming.
//!
//! The LRU is kept lazily: a hit only stamps the entry with the current tick (a batch of
//! training reads hits hundreds of chunks, so a hit must be cheap); the eviction queue, ordered
//! by the tick an entry was queued at, is brought up to date when an entry reaches its front:
//! one used since is queued again at its last use instead of being dropped.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::chunk_bytes::Decoded;

/// A fast hasher for the small integer keys of the read path (FxHash's mixing step). Keys come
/// from the files' own offsets, not from an adversary choosing collisions over many calls.
#[derive(Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
    fn write_u32(&mut self, word: u32) {
        self.write_u64(word as u64);
    }
}

pub(crate) type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// A chunk: (shard index, file offset of its data).
pub(crate) type ChunkKey = (usize, u64);
/// A Chunks record: (shard index, file offset of the record).
pub(crate) type RecordKey = (usize, u64);

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
/// Raw chunks are read straight from the memory map and never enter it.
pub(crate) struct ChunkCache {
    capacity: usize,
    lru: Mutex<Lru>,
}

impl ChunkCache {
    pub fn new(capacity: usize) -> Self {
        let lru = Lru { entries: IntMap::default(), order: BTreeMap::new(), tick: 0, bytes: 0 };
        ChunkCache { capacity, lru: Mutex::new(lru) }
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        // A panic elsewhere while holding the lock leaves the map consistent (every update is
        // a few infallible steps), so a poisoned lock is still usable.
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: ChunkKey) -> Option<Arc<Decoded>> {
        let mut guard = self.lock();
        let lru = &mut *guard;
        lru.tick += 1;
        let tick = lru.tick;
        let (data, last) = lru.entries.get_mut(&key)?;
        *last = tick;
        Some(data.clone())
    }

    /// Runs `f` with a `get` that holds the lock once for many keys.
    pub fn with_gets<R>(&self, f: impl FnOnce(&mut dyn FnMut(ChunkKey) -> Option<Arc<Decoded>>) -> R) -> R {
        let mut guard = self.lock();
        let lru = &mut *guard;
        f(&mut |key| {
            lru.tick += 1;
            let tick = lru.tick;
            lru.entries.get_mut(&key).map(|(data, last)| {
                *last = tick;
                data.clone()
            })
        })
    }

    /// Keeps `data` unless it alone exceeds the capacity, evicting old entries to make room.
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
        while lru.bytes > self.capacity {
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

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// Which Chunks records have had their payload checksum verified (damaged ones are not
/// remembered: a retry fails again, which is the rare path). Each record gets a small id when
/// its chunks are taken in (with `&mut`, while ingesting), kept in their `Located`, so checking
/// is one atomic load: a batch of training reads checks hundreds of chunks.
#[derive(Default)]
pub(crate) struct VerifiedRecords {
    ids: IntMap<RecordKey, u32>,
    flags: Vec<AtomicBool>,
}

impl VerifiedRecords {
    /// The id of a record, registered if new.
    pub fn id(&mut self, key: RecordKey) -> u32 {
        let next = self.flags.len() as u32;
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            self.flags.push(AtomicBool::new(false));
        }
        id
    }

    pub fn is_verified(&self, id: u32) -> bool {
        self.flags.get(id as usize).is_some_and(|f| f.load(Ordering::Acquire))
    }

    pub fn mark(&self, id: u32) {
        if let Some(f) = self.flags.get(id as usize) {
            f.store(true, Ordering::Release);
        }
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
    fn zero_capacity_keeps_nothing() {
        let cache = ChunkCache::new(0);
        cache.insert((0, 0), rows(1, 0));
        assert!(cache.get((0, 0)).is_none());
        cache.insert((0, 1), rows(0, 0));
        assert_eq!(cache.bytes(), 0);
    }
}
