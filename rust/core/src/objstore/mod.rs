//! Object storage: the wing the reader and the writer's uploads both stand on, depending on
//! neither. `url` parses which paths are URLs (every build); `remote` is the client (options per
//! store, requests with retries and timeouts, request counts) and a remote object read by range
//! through the per-process `fetch_cache`; `segments` uploads files and the growing shard of a
//! recording and joins a killed recorder's segments. Without the `remote` feature (the fuzz
//! targets) `remote` is `remote_off.rs`: URLs are recognised and refused by name.

#[cfg(feature = "remote")]
mod fetch_cache;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(not(feature = "remote"))]
#[path = "remote_off.rs"]
pub mod remote;
#[cfg(feature = "remote")]
pub mod segments;
pub mod url;
