//! Reads of shards in object storage, planned before they run: a gather (a training batch, a
//! block of a scan) lists the chunks it needs, and their bytes are fetched together (neighbours
//! in one request, the requests in parallel: see `remote`) before its one-by-one reads find
//! them in the cache. A chunk with its own checksum (format 1.1) brings its own bytes only; a
//! 1.0 chunk whose Chunks record is not verified yet brings its whole record (the record's
//! checksum covers it: the read verifies it before using any of its chunks).

use std::collections::BTreeMap;
use std::ops::Range;

use super::framing::frame;
use crate::error::Result;
use crate::reader::catalog::chunk_list::Located;
use crate::reader::dataset_view::DatasetView;

impl DatasetView<'_> {
    /// `prefetch_remote` for every chunk of `episodes` whose Chunks record is not verified yet
    /// (what a lenient read verifies before it reads them: see `lenient`).
    pub(in crate::reader) fn prefetch_episodes(&self, episodes: &[usize]) -> Result<()> {
        if self.store.shards.iter().all(|s| s.source.remote_object().is_none()) {
            return Ok(());
        }
        let mut chunks = Vec::new();
        for &episode in episodes {
            chunks.extend(
                self.episode_chunks(episode)?.into_iter().filter(|l| !self.store.verified.is_verified(l.record)),
            );
        }
        self.prefetch_remote(chunks.into_iter(), false)
    }

    /// Fetches what reading `chunks` needs from object storage and is not cached yet; nothing
    /// for local shards. `needed`: the chunks are what a read copies rows from, counted in
    /// `RemoteStats::chunk_bytes` (unless decoded already), whether fetched now or earlier.
    ///
    /// Errors: `Io` naming the object's URL and why the store failed (after its retries).
    pub(in crate::reader) fn prefetch_remote<'a>(
        &self,
        chunks: impl Iterator<Item = &'a Located>,
        needed: bool,
    ) -> Result<()> {
        let mut wanted: BTreeMap<usize, Vec<Range<u64>>> = BTreeMap::new();
        for loc in chunks {
            let shard = &self.store.shards[loc.shard];
            let Some(object) = shard.source.remote_object().filter(|_| loc.chunk.stored_len > 0) else { continue };
            // A chunk with its own checksum needs its own bytes only (format 1.1).
            let range = if self.store.verified.is_verified(loc.record) || loc.chunk.has_checksum() {
                loc.chunk.data_offset..loc.chunk.data_offset.saturating_add(loc.chunk.stored_len)
            } else {
                match frame(&shard.source, loc.chunk.record_offset) {
                    Ok(rec) => rec.offset..rec.next,
                    Err(_) => continue, // the read says what is wrong with it
                }
            };
            if self.store.cache.get((loc.shard, loc.chunk.data_offset)).is_some() {
                continue;
            }
            if needed {
                crate::objstore::remote::count_chunk_bytes(loc.chunk.stored_len);
            }
            if object.holds(&range) {
                continue;
            }
            wanted.entry(loc.shard).or_default().push(range);
        }
        for (shard, ranges) in wanted {
            let source = &self.store.shards[shard].source;
            source.prefetch(&ranges)?;
        }
        Ok(())
    }
}
