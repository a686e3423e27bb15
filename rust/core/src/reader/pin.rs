//! What keeps an evicted shard open: a reader of a bounded recording lets go of a shard its
//! recorder deleted (its file, its map, where its chunks are: `Store::release_unpinned`) at the
//! first refresh after which nothing handed out still reads it. An episode handed out (Python's
//! `Episode`) holds an `EpisodePin` of the shards its rows are in, so it reads its values, the
//! same ones, for as long as it lives; a loop that keeps no episode holds no deleted shard.

use std::sync::Arc;

use super::dataset::Dataset;
use crate::error::Result;

/// Holds the shards of one listed episode (see the module).
#[derive(Debug, Clone)]
pub struct EpisodePin {
    _shards: Vec<Arc<()>>,
}

impl Dataset {
    /// Pins the shards listed episode `episode` has rows in (those of its recording from its
    /// first shard to the one holding its record), so that no refresh lets go of them while the
    /// pin lives. Shards already let go of are not brought back: reading the episode then fails,
    /// naming the eviction.
    ///
    /// Errors: `OutOfRange`.
    pub fn pin_episode(&self, episode: usize) -> Result<EpisodePin> {
        let shards = self.catalog.episode_shards(episode)?;
        Ok(EpisodePin { _shards: shards.iter().map(|&s| self.store.shards[s].pin.clone()).collect() })
    }
}
