//! The on-disk format, byte by byte: see `docs/FORMAT.md`. Everything is little-endian.
//! These modules only encode and decode; they never touch files.

pub mod chunks;
pub mod codec;
pub mod copies;
pub mod episode;
pub mod header;
pub mod index;
pub mod metrics;
pub mod packed;
pub mod record;
pub mod stack;
pub mod table;
pub mod timelog;

/// Shard files end with this extension; a directory's other files are not part of the dataset.
pub const SHARD_EXTENSION: &str = "trj";
/// Annotation sidecars (`crate::annotation`) end with this one: readers that predate them list
/// only `trj` files, so they read the dataset as it was recorded.
pub const ANNOTATION_EXTENSION: &str = "trja";

/// Raw column data starts on a 64-byte file offset so a memory map can be viewed as an array.
pub const DATA_ALIGN: u64 = 64;
/// Records start on 8-byte file offsets.
pub const RECORD_ALIGN: u64 = 8;

pub fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

pub fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

pub fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

pub fn f64_at(bytes: &[u8], at: usize) -> f64 {
    f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}
