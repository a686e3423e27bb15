//! The per-process cache of byte ranges fetched from object storage: extents keyed by (object,
//! first byte), bounded in bytes, least recently used dropped first. Every dataset opened in the
//! process shares it, so reopening a dataset (a data-loader worker forked after the parent read
//! it, a second `open` of the same URL) does not fetch its index again. A read is served when one
//! extent covers it whole; extents are never merged (a read across two is a miss, fetched again).
//!
//! No I/O here: `remote` fetches and inserts; this only decides what is kept.

use std::collections::BTreeMap;

use bytes::Bytes;

struct Extent {
    bytes: Bytes,
    /// The `tick` of its last use.
    used: u64,
}

pub(crate) struct ExtentCache {
    extents: BTreeMap<(u64, u64), Extent>,
    held: usize,
    capacity: usize,
    tick: u64,
}

impl ExtentCache {
    pub const fn new(capacity: usize) -> ExtentCache {
        ExtentCache { extents: BTreeMap::new(), held: 0, capacity, tick: 0 }
    }

    /// Bytes `start .. start + len` of `object`, when one extent holds them all.
    pub fn get(&mut self, object: u64, start: u64, len: u64) -> Option<Bytes> {
        let end = start.checked_add(len)?;
        let (&(o, at), extent) = self.extents.range_mut(..=(object, start)).next_back()?;
        let covers = o == object && end <= at + extent.bytes.len() as u64;
        if !covers {
            return None;
        }
        self.tick += 1;
        extent.used = self.tick;
        Some(extent.bytes.slice((start - at) as usize..(end - at) as usize))
    }

    /// Whether `start .. end` of `object` would be served.
    pub fn holds(&mut self, object: u64, start: u64, end: u64) -> bool {
        end.checked_sub(start).is_some_and(|len| self.get(object, start, len).is_some())
    }

    /// Keeps `bytes` as `object`'s bytes from `start`, then drops the least recently used
    /// extents while over capacity (an extent larger than the capacity is not kept).
    pub fn insert(&mut self, object: u64, start: u64, bytes: Bytes) {
        if bytes.len() > self.capacity {
            return;
        }
        self.tick += 1;
        let len = bytes.len();
        if let Some(old) = self.extents.insert((object, start), Extent { bytes, used: self.tick }) {
            self.held -= old.bytes.len();
        }
        self.held += len;
        while self.held > self.capacity {
            let Some((&oldest, _)) = self.extents.iter().min_by_key(|(_, e)| e.used) else { break };
            if let Some(e) = self.extents.remove(&oldest) {
                self.held -= e.bytes.len();
            }
        }
    }

    /// Drops every extent of `object` that holds a byte of `start .. end` (bytes that failed
    /// their check: never kept, so the next read fetches them again).
    pub fn forget(&mut self, object: u64, start: u64, end: u64) {
        let overlapping: Vec<(u64, u64)> = self
            .extents
            .range((object, 0)..(object, end))
            .filter(|(&(_, at), e)| at.saturating_add(e.bytes.len() as u64) > start)
            .map(|(&k, _)| k)
            .collect();
        for k in overlapping {
            if let Some(e) = self.extents.remove(&k) {
                self.held -= e.bytes.len();
            }
        }
    }

    pub fn held(&self) -> usize {
        self.held
    }

    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, v: u8) -> Bytes {
        Bytes::from(vec![v; n])
    }

    #[test]
    fn serves_reads_one_extent_covers() {
        let mut c = ExtentCache::new(1 << 20);
        c.insert(1, 100, Bytes::from((0u8..50).collect::<Vec<_>>()));
        // (object, start, len, served bytes or None)
        let cases: &[(u64, u64, u64, Option<&[u8]>)] = &[
            (1, 100, 3, Some(&[0, 1, 2])),
            (1, 147, 3, Some(&[47, 48, 49])),
            (1, 148, 3, None), // runs past the extent
            (1, 99, 2, None),  // starts before it
            (2, 100, 3, None), // another object
            (1, 120, 0, Some(&[])),
        ];
        for &(object, start, len, want) in cases {
            assert_eq!(c.get(object, start, len).as_deref(), want, "{object} {start} {len}");
        }
    }

    #[test]
    fn stays_within_capacity_dropping_least_recent() {
        let mut c = ExtentCache::new(100);
        c.insert(1, 0, bytes(40, 1));
        c.insert(1, 1000, bytes(40, 2));
        assert!(c.get(1, 0, 1).is_some()); // the first is now the more recent
        c.insert(1, 2000, bytes(40, 3));
        assert!(c.held() <= 100);
        assert!(c.holds(1, 0, 40));
        assert!(!c.holds(1, 1000, 1040));
        assert!(c.holds(1, 2000, 2040));
        c.insert(1, 5000, bytes(101, 4)); // larger than the whole cache: not kept
        assert!(!c.holds(1, 5000, 5001));
        c.insert(1, 2000, bytes(10, 5)); // replaces: counted once
        assert_eq!(c.held(), 50);
    }

    #[test]
    fn forgets_every_extent_holding_a_byte_of_the_range() {
        // (forgotten range) -> the extents left, of (object 1: 0..40, 100..140, 200..240; object 2: 100..140)
        type Keys = &'static [(u64, u64)];
        let cases: &[((u64, u64), Keys)] = &[
            ((110, 120), &[(1, 0), (1, 200), (2, 100)]),
            ((40, 100), &[(1, 0), (1, 100), (1, 200), (2, 100)]), // touches none
            ((39, 101), &[(1, 200), (2, 100)]),
            ((0, 1000), &[(2, 100)]),
            ((139, 140), &[(1, 0), (1, 200), (2, 100)]),
        ];
        for &((start, end), left) in cases {
            let mut c = ExtentCache::new(1 << 20);
            for (object, at) in [(1, 0), (1, 100), (1, 200), (2, 100)] {
                c.insert(object, at, bytes(40, 1));
            }
            c.forget(1, start, end);
            let kept: Vec<(u64, u64)> = c.extents.keys().copied().collect();
            assert_eq!(kept, left, "{start}..{end}");
            assert_eq!(c.held(), 40 * left.len());
        }
    }
}
