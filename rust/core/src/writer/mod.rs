//! Recording: the caller pushes (vector) steps into a lock-free ring; a background thread turns
//! them into per-env episodes and appends compressed, checksummed chunks to shard files.
//!
//! Modules depend one way: `recorder` (the caller's side) on `autoreset` and `reader_flush`
//! (its decisions) and `thread`; `thread` (the loop) on `episodes` (pure: ops to rows and episodes) and `sink`
//! (sealing, writing, rollover, compaction); `sink` on `episodes`, `shard`, `compact` and
//! `capacity` (which closed shards a bounded recording deletes).

pub mod autoreset;
pub mod config;
pub mod entries;
pub mod episodes;
pub mod files;
pub mod lane;
pub mod message;
pub mod reader_flush;
pub mod recorder;
pub mod shared;
pub mod thread;
pub mod timelog;

pub use crate::format::SHARD_EXTENSION;
pub use autoreset::{EpisodeEnd, LaneOp, LaneState, Splitter};
pub use config::{AutoresetMode, Durability, RecorderConfig};
pub use message::{EntryKind, EntryRef, MessageHead, MessageKind, Slot};
pub use recorder::{mask_name, Interrupt, NewColumn, Recorder, Stats};
pub use thread::Faults;
