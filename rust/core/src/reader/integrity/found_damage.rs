//! Damage found while reading (see `lenient`): the episodes it left out, in the order found,
//! and which episodes are known intact (every Chunks record holding their rows passed its
//! checksum). Shared by the threads reading a dataset.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::damage::Damage;

/// Damage found while reading, and which episodes are known intact.
#[derive(Default)]
pub(crate) struct ReadDamage {
    /// Set once anything is damaged: until then a read checks nothing else.
    any: AtomicBool,
    state: RwLock<State>,
    /// A bit per episode: every Chunks record holding its rows passed its checksum.
    checked: RwLock<Vec<AtomicU64>>,
}

#[derive(Default)]
struct State {
    damaged: HashSet<usize>,
    events: Vec<Damage>,
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // Updates are a few infallible steps, so a lock poisoned by a panic elsewhere is consistent.
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

impl ReadDamage {
    pub fn is_damaged(&self, episode: usize) -> bool {
        self.any.load(Ordering::Acquire) && read(&self.state).damaged.contains(&episode)
    }

    /// Records damage; returns it with only the episodes not known damaged before (`None` when
    /// there are none: another read found it first).
    pub fn add(&self, damage: Damage) -> Option<Damage> {
        let mut state = write(&self.state);
        let new: Vec<usize> = damage.episodes.iter().copied().filter(|&e| state.damaged.insert(e)).collect();
        if new.is_empty() {
            return None;
        }
        self.any.store(true, Ordering::Release);
        let event = Damage { episodes: new, ..damage };
        state.events.push(event.clone());
        Some(event)
    }

    fn is_checked(bits: &[AtomicU64], episode: usize) -> bool {
        bits.get(episode / 64).is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (episode % 64)) != 0)
    }

    pub fn set_checked(&self, episode: usize) {
        if read(&self.checked).len() <= episode / 64 {
            let mut bits = write(&self.checked);
            let words = episode / 64 + 1;
            if bits.len() < words {
                bits.resize_with(words, AtomicU64::default);
            }
        }
        read(&self.checked)[episode / 64].fetch_or(1 << (episode % 64), Ordering::Relaxed);
    }

    /// Whether any damage was found (until then a read checks nothing else).
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The episodes found damaged, ascending.
    pub fn damaged_episodes(&self) -> Vec<usize> {
        let mut out: Vec<usize> = read(&self.state).damaged.iter().copied().collect();
        out.sort_unstable();
        out
    }

    /// The damage found, in the order found (each with the episodes it left out).
    pub fn events(&self) -> Vec<Damage> {
        read(&self.state).events.clone()
    }

    /// The damage that marked `episode`, if any.
    pub fn event_of(&self, episode: usize) -> Option<Damage> {
        read(&self.state).events.iter().find(|d| d.episodes.contains(&episode)).cloned()
    }

    /// Forgets which episodes are known intact (their rows were moved to records not checked
    /// yet: a shard switched to its compacted rewrite).
    pub fn forget_checked(&self) {
        write(&self.checked).clear();
    }

    /// Those of `episodes` whose records are not all known to pass their checksums.
    pub fn unchecked(&self, episodes: impl Iterator<Item = usize>) -> Vec<usize> {
        let bits = read(&self.checked);
        episodes.filter(|&e| !ReadDamage::is_checked(&bits, e)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_is_added_once() {
        let rd = ReadDamage::default();
        assert!(!rd.is_damaged(3));
        let d = |eps: Vec<usize>| Damage { file: "f".into(), offset: 8, why: "x".into(), episodes: eps, unlisted: 0 };
        assert_eq!(rd.add(d(vec![3, 4])).unwrap().episodes, vec![3, 4]);
        assert_eq!(rd.add(d(vec![4, 5])).unwrap().episodes, vec![5], "only the episodes new to it");
        assert!(rd.add(d(vec![3])).is_none());
        assert!(rd.add(d(vec![])).is_none());
        assert!(rd.is_damaged(5) && !rd.is_damaged(6));
        rd.set_checked(130);
        assert!(ReadDamage::is_checked(&read(&rd.checked), 130));
        assert!(!ReadDamage::is_checked(&read(&rd.checked), 129));
        assert!(!ReadDamage::is_checked(&read(&rd.checked), 100_000));
    }
}
