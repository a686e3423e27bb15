//! Maps keyed by the small integers of the read path (shard indexes, file offsets).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

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
pub(crate) type IntSet<K> = HashSet<K, BuildHasherDefault<IntHasher>>;

/// A chunk: (shard index, file offset of its data).
pub(crate) type ChunkKey = (usize, u64);
/// A Chunks record: (shard index, file offset of the record).
pub(crate) type RecordKey = (usize, u64);
