//! Shared state of the read path: decoded chunks (a byte-bounded LRU) and the Chunks records
//! whose payload checksum has been verified. Both sit behind locks so a `Dataset` can be read
//! from many threads; neither lock is held while decoding or checksumming.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// A chunk: (shard index, file offset of its data).
pub(crate) type ChunkKey = (usize, u64);
/// A Chunks record: (shard index, file offset of the record).
pub(crate) type RecordKey = (usize, u64);

struct Lru {
    entries: HashMap<ChunkKey, (Arc<Vec<u8>>, u64)>,
    /// Last-use tick -> key; the first entry is the least recently used.
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
        let lru = Lru { entries: HashMap::new(), order: BTreeMap::new(), tick: 0, bytes: 0 };
        ChunkCache { capacity, lru: Mutex::new(lru) }
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        // A panic elsewhere while holding the lock leaves the map consistent (every update is
        // a few infallible steps), so a poisoned lock is still usable.
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: ChunkKey) -> Option<Arc<Vec<u8>>> {
        let mut guard = self.lock();
        let lru = &mut *guard;
        lru.tick += 1;
        let tick = lru.tick;
        let (data, last) = lru.entries.get_mut(&key)?;
        lru.order.remove(last);
        *last = tick;
        lru.order.insert(tick, key);
        Some(data.clone())
    }

    /// Keeps `data` unless it alone exceeds the capacity, evicting old entries to make room.
    pub fn insert(&self, key: ChunkKey, data: Arc<Vec<u8>>) {
        let size = data.len();
        if size > self.capacity {
            return;
        }
        let mut guard = self.lock();
        let lru = &mut *guard;
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((old, last)) = lru.entries.insert(key, (data, tick)) {
            // Another thread decoded the same chunk meanwhile.
            lru.order.remove(&last);
            lru.bytes -= old.len();
        }
        lru.order.insert(tick, key);
        lru.bytes += size;
        while lru.bytes > self.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else { break };
            if let Some((old, _)) = lru.entries.remove(&oldest) {
                lru.bytes -= old.len();
            }
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// Chunks records whose payload checksum has been verified (damaged ones are not remembered:
/// a retry fails again, which is the rare path).
#[derive(Default)]
pub(crate) struct VerifiedRecords {
    intact: RwLock<HashSet<RecordKey>>,
}

impl VerifiedRecords {
    pub fn contains(&self, key: RecordKey) -> bool {
        self.intact.read().unwrap_or_else(|e| e.into_inner()).contains(&key)
    }

    pub fn insert(&self, key: RecordKey) {
        self.intact.write().unwrap_or_else(|e| e.into_inner()).insert(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_stays_within_capacity_and_drops_least_recent() {
        let cache = ChunkCache::new(100);
        cache.insert((0, 0), Arc::new(vec![0; 40]));
        cache.insert((0, 1), Arc::new(vec![1; 40]));
        assert!(cache.get((0, 0)).is_some()); // (0, 1) is now the least recently used
        cache.insert((0, 2), Arc::new(vec![2; 40]));
        assert!(cache.get((0, 1)).is_none());
        assert!(cache.get((0, 0)).is_some());
        assert!(cache.get((0, 2)).is_some());
        assert_eq!(cache.bytes(), 80);
        cache.insert((0, 3), Arc::new(vec![3; 101]));
        assert!(cache.get((0, 3)).is_none(), "an entry larger than the cache is not kept");
        cache.insert((0, 2), Arc::new(vec![2; 50]));
        assert_eq!(cache.bytes(), 90);
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let cache = ChunkCache::new(0);
        cache.insert((0, 0), Arc::new(vec![0; 1]));
        assert!(cache.get((0, 0)).is_none());
        cache.insert((0, 1), Arc::new(Vec::new()));
        assert_eq!(cache.bytes(), 0);
    }
}
