//! Object storage: the wing the reader and the writer's uploads both stand on, depending on
//! neither. `url` parses which paths are URLs (every build); `remote` is the client (options per
//! store, requests with retries and timeouts, request counts) and a remote object read by range
//! through the per-process `fetch_cache`; `segments` uploads files and the growing shard of a
//! recording and joins a killed recorder's segments; `leases` tell the live recordings of a
//! shared prefix from stopped ones (their timings and rules in every build, their requests
//! with `remote`); `uploads` is the thread that uploads a
//! recording as its writer thread says what it wrote (in a `backlog`, kept coalesced while the
//! thread waits on the store; `close_retries` says how long its close tries again what the
//! store refused). Without the `remote` feature (the fuzz
//! targets) `remote` and `uploads` are `remote_off.rs` and `uploads_off.rs`: URLs are recognised
//! and refused by name.

#[cfg(feature = "remote")]
mod backlog;
#[cfg(feature = "remote")]
mod close_retries;
#[cfg(feature = "remote")]
mod fetch_cache;
pub mod leases;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(not(feature = "remote"))]
#[path = "remote_off.rs"]
pub mod remote;
#[cfg(feature = "remote")]
pub mod segments;
#[cfg(feature = "remote")]
pub mod uploads;
#[cfg(not(feature = "remote"))]
#[path = "uploads_off.rs"]
pub mod uploads;
pub mod url;
