//! Decoded chunks in memory: the per-process cache (`cache`, bounded by `cache_bytes`), the runs
//! that join a lane's small chunks for sampling (`joined`, counted in the same bound), and the
//! decoded copy shared by every process that reads the dataset (`shared_chunks`).

pub(in crate::reader) mod cache;
pub(in crate::reader) mod joined;
pub(in crate::reader) mod shared_chunks;
