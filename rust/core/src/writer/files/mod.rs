//! What the writer thread leaves on disk: the shard being written (`shard`) and where rows and
//! episodes go into it (`sink`: chunks, records, rollover, what a recording's uploads are told),
//! closed shards compacted (`compact`, and what a killed compaction leaves: `leftovers`) and,
//! for a bounded recording, evicted (`capacity`), and the freed buffers' pages given back
//! (`release`).

pub mod capacity;
pub mod compact;
pub mod leftovers;
pub(in crate::writer) mod release;
pub mod shard;
pub mod sink;
