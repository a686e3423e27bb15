//! The Chunks records whose payload checksum has been verified (atomic flags), so a dataset read
//! from many threads checksums each record once. No lock is held while checksumming.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::reader::int_map::{IntMap, RecordKey};

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

    /// Forgets the ids of the records of the shards `gone` marks (the store let go of them):
    /// their one flag each stays, so ids handed out stay valid.
    pub fn forget_shards(&mut self, gone: &[bool]) {
        self.ids.retain(|&(shard, _), _| !gone.get(shard).copied().unwrap_or(false));
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
