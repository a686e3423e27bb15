//! Shards in object storage: `s3://bucket/key` (AWS S3 and the stores that speak its protocol:
//! MinIO, Ceph, R2, ...) and `http(s)://host/path` (read-only), read with range requests through
//! the `object_store` crate, never downloaded whole.
//!
//! - Clients: one per store (scheme and bucket or host), built from the standard environment
//!   variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//!   `AWS_ALLOW_HTTP`, ...) and then the options `configure` was given for that store
//!   (`storage_options` in Python), every request bounded by a timeout and transient failures
//!   retried (see `DEFAULTS`), so no read waits forever.
//! - A tokio runtime owned by the core drives the requests; readers block on it. After a fork
//!   (a data-loader worker) the child has none of the parent's threads: it builds its own
//!   runtime and clients on first use and leaks the parent's (dropping them would wait on
//!   threads that do not exist in the child).
//! - Fetched bytes go to a per-process cache (`remote_cache`); `stats` counts the requests and
//!   bytes fetched, for benchmarks and tests to measure instead of guess.
//!
//! Errors name the URL and the cause: `Error::NotFound` for a missing object, `Error::Io` for
//! the rest (refused credentials, an unreachable endpoint, a timeout after the retries).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, ClientOptions, GetOptions, GetRange, ObjectStore, RetryConfig};

use crate::error::{Error, Result};
use crate::objstore::fetch_cache::ExtentCache;
use crate::objstore::url::{locate, Location};

/// A read the cache cannot serve fetches at least this much (the index records and record
/// headers opening reads lie close together; chunk reads come through `prefetch`, exact).
const READ_AHEAD: u64 = 64 << 10;
/// Ranges closer than this are fetched in one request (one round trip costs more than this many
/// bytes on any link worth using).
const COALESCE_GAP: u64 = 64 << 10;
/// The per-process cache's bound unless `TRAJCORE_REMOTE_CACHE_BYTES` says otherwise.
const CACHE_BYTES: usize = 1 << 30;

/// Per-request timeouts and retries unless the options say otherwise (keys `timeout`,
/// `connect_timeout`, `max_retries`, `retry_timeout`).
struct Defaults {
    timeout: Duration,
    connect_timeout: Duration,
    max_retries: usize,
    retry_timeout: Duration,
}
const DEFAULTS: Defaults = Defaults {
    timeout: Duration::from_secs(30),
    connect_timeout: Duration::from_secs(5),
    max_retries: 3,
    retry_timeout: Duration::from_secs(60),
};

/// Requests made and bytes fetched by this process so far (listings and HEADs included), the
/// stored bytes of the chunks reads fetched them for (what a read needed, to set against what it
/// fetched), and the bytes its cache holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    pub requests: u64,
    pub bytes: u64,
    pub chunk_bytes: u64,
    pub cached_bytes: u64,
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static CHUNK_BYTES: AtomicU64 = AtomicU64::new(0);

/// Counts `bytes` of chunk data a read fetched (see `RemoteStats::chunk_bytes`).
pub(crate) fn count_chunk_bytes(bytes: u64) {
    CHUNK_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

pub fn stats() -> RemoteStats {
    RemoteStats {
        requests: REQUESTS.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
        chunk_bytes: CHUNK_BYTES.load(Ordering::Relaxed),
        cached_bytes: cache().held() as u64,
    }
}

pub(crate) fn count(requests: u64, bytes: u64) {
    REQUESTS.fetch_add(requests, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
}

struct Clients {
    pid: u32,
    runtime: Arc<tokio::runtime::Runtime>,
    stores: HashMap<String, Arc<dyn ObjectStore>>,
}

static CLIENTS: Mutex<Option<Clients>> = Mutex::new(None);
/// The options `configure` was given, per store (kept across a fork: the child rebuilds from them).
type StoreOptions = HashMap<String, Vec<(String, String)>>;
static OPTIONS: Mutex<Option<StoreOptions>> = Mutex::new(None);
static CACHE: Mutex<ExtentCache> = Mutex::new(ExtentCache::new(CACHE_BYTES));
/// Object identities (URL, size, entity tag) as small numbers, the cache's keys.
static OBJECT_IDS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sets the options of the store `url` is in (its scheme and bucket or host), over the
/// environment's: for S3 any `object_store` S3 key (`aws_access_key_id`, `endpoint`, `region`,
/// `allow_http`, ...), for both `timeout` and `connect_timeout` ("30s"), `max_retries` and
/// `retry_timeout` (seconds). The client is built now, so a bad key fails here; without
/// options, nothing is set and the client the store's options so far (and the environment) make
/// is checked the same way.
///
/// Errors: `Invalid` (not an object storage URL, an unknown key, a bad value, a plain HTTP S3
/// endpoint without `allow_http`).
pub fn configure(url: &str, options: &[(String, String)]) -> Result<()> {
    let location = locate(url)?;
    if options.is_empty() {
        let kept = lock(&OPTIONS).as_ref().and_then(|o| o.get(&location.store).cloned()).unwrap_or_default();
        return build(&location.store, &kept).map(drop);
    }
    build(&location.store, options)?;
    lock(&OPTIONS).get_or_insert_with(HashMap::new).insert(location.store.clone(), options.to_vec());
    if let Some(clients) = lock(&CLIENTS).as_mut() {
        clients.stores.remove(&location.store);
    }
    Ok(())
}

/// Serves the store `url` is in (its scheme and bucket or host) with `client` instead of one
/// built from the environment and options: any `object_store` implementation (an in-memory or
/// throttled store in tests, a caller's own client). Until `configure` is called for that store,
/// or the process forks (a child builds its clients from the options again).
///
/// Errors: `Invalid` (not an object storage URL), `Io` (the runtime could not start).
pub fn use_store(url: &str, client: Arc<dyn ObjectStore>) -> Result<()> {
    let location = locate(url)?;
    let mut clients = clients()?;
    clients.as_mut().expect("made by clients()").stores.insert(location.store, client);
    Ok(())
}

/// A client for `store` from the environment and `options`.
fn build(store: &str, options: &[(String, String)]) -> Result<Arc<dyn ObjectStore>> {
    let invalid = |why: String| Error::Invalid(format!("{store}: {why}"));
    let seconds = |key: &str, v: &str| {
        v.trim_end_matches('s')
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| invalid(format!("option {key}={v:?}: expected seconds")))
    };
    let mut retry =
        RetryConfig { max_retries: DEFAULTS.max_retries, retry_timeout: DEFAULTS.retry_timeout, ..Default::default() };
    let mut rest = Vec::new();
    for (key, value) in options {
        match key.as_str() {
            "max_retries" => {
                retry.max_retries =
                    value.parse().map_err(|_| invalid(format!("option max_retries={value:?}: expected a count")))?
            }
            "retry_timeout" => retry.retry_timeout = seconds(key, value)?,
            _ => rest.push((key.to_ascii_lowercase(), value.as_str())),
        }
    }
    let client = ClientOptions::new().with_timeout(DEFAULTS.timeout).with_connect_timeout(DEFAULTS.connect_timeout);
    let unknown = |key: &str| invalid(format!("unknown storage option {key:?}"));
    let built = if store.starts_with("s3") {
        let mut b = AmazonS3Builder::new().with_client_options(client).with_retry(retry).with_url(store);
        let env = std::env::vars().filter(|(k, _)| k.starts_with("AWS_")).map(|(k, v)| (k.to_ascii_lowercase(), v));
        for (key, value) in env.collect::<Vec<_>>() {
            if let Ok(k) = key.parse::<AmazonS3ConfigKey>() {
                b = b.with_config(k, value);
            }
        }
        for (key, value) in rest {
            b = b.with_config(key.parse::<AmazonS3ConfigKey>().map_err(|_| unknown(&key))?, value);
        }
        // The client refuses plain HTTP unless allowed, and only at the first request, with a
        // "builder error" that names nothing: said here, by the option's name.
        let endpoint = b.get_config_value(&AmazonS3ConfigKey::Endpoint).unwrap_or_default();
        let allow_http = b.get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp));
        if endpoint.to_ascii_lowercase().starts_with("http://") && !allow_http.as_deref().is_some_and(truthy) {
            return Err(invalid(format!(
                "the endpoint {endpoint} is plain HTTP, which the S3 client refuses unless the storage option \
                 allow_http is \"true\" (or AWS_ALLOW_HTTP=true)"
            )));
        }
        b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
    } else {
        // An http:// URL asks for plain HTTP (the S3 client needs `allow_http` for its endpoint).
        let client = client.with_allow_http(store.starts_with("http://"));
        let mut b = HttpBuilder::new().with_client_options(client).with_retry(retry).with_url(store);
        for (key, value) in rest {
            b = b.with_config(key.parse::<ClientConfigKey>().map_err(|_| unknown(&key))?, value);
        }
        b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
    };
    built.map_err(|e| invalid(e.to_string()))
}

/// Whether a configuration value says yes, as `object_store` reads it.
fn truthy(value: &str) -> bool {
    matches!(value.trim().to_ascii_lowercase().as_str(), "1" | "true" | "on" | "yes" | "y")
}

/// This process's clients, the runtime made on first use (again after a fork).
fn clients() -> Result<MutexGuard<'static, Option<Clients>>> {
    let mut clients = lock(&CLIENTS);
    let pid = std::process::id();
    if clients.as_ref().is_some_and(|c| c.pid != pid) {
        // The parent's runtime threads do not exist here: dropping it would wait for them.
        std::mem::forget(clients.take());
    }
    if clients.is_none() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("trajcore-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Io { path: "the object storage runtime".into(), source: e })?;
        *clients = Some(Clients { pid, runtime: Arc::new(runtime), stores: HashMap::new() });
    }
    Ok(clients)
}

/// This process's runtime and the client for `store`, made on first use.
fn client(store: &str) -> Result<(Arc<tokio::runtime::Runtime>, Arc<dyn ObjectStore>)> {
    let mut clients = clients()?;
    let clients = clients.as_mut().expect("made by clients()");
    let made = match clients.stores.get(store) {
        Some(s) => s.clone(),
        None => {
            let options = lock(&OPTIONS).as_ref().and_then(|o| o.get(store).cloned()).unwrap_or_default();
            let made = build(store, &options)?;
            clients.stores.insert(store.to_string(), made.clone());
            made
        }
    };
    Ok((clients.runtime.clone(), made))
}

/// Runs `f` (a request to `store`'s client) on the runtime, waiting for it.
pub(crate) fn run<T, F>(store: &str, url: &str, f: impl FnOnce(Arc<dyn ObjectStore>) -> F) -> Result<T>
where
    F: std::future::Future<Output = object_store::Result<T>>,
{
    run_raw(store, f)?.map_err(|e| store_error(url, e))
}

/// `run`, with the store's own error (`Err` only when no client could be made).
fn run_raw<T, F>(store: &str, f: impl FnOnce(Arc<dyn ObjectStore>) -> F) -> Result<object_store::Result<T>>
where
    F: std::future::Future<Output = object_store::Result<T>>,
{
    let (runtime, client) = client(store)?;
    Ok(runtime.block_on(f(client)))
}

/// Whether a failed request ends the object's reads for good: only when it was replaced since
/// opening (its entity tag changed); anything else (a 503, a timeout, a refused connection)
/// passes, and the next read asks again.
fn fails_for_good(e: &object_store::Error) -> bool {
    matches!(e, object_store::Error::Precondition { .. })
}

/// An `object_store` error as the core's, naming the URL.
fn store_error(url: &str, e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound { path: url.into() },
        object_store::Error::Precondition { .. } => Error::Io {
            path: url.into(),
            source: std::io::Error::other(
                "the object was replaced since the dataset was opened (its entity tag changed): open it again",
            ),
        },
        e => Error::Io { path: url.into(), source: std::io::Error::other(e.to_string()) },
    }
}

/// One object of a store, read by range.
#[derive(Debug)]
pub(crate) struct RemoteObject {
    pub location: Location,
    pub url: String,
    pub len: u64,
    /// Its key in the per-process cache.
    id: u64,
    /// Its entity tag when opened: every range request asks for that version (`If-Match`), so
    /// an object replaced while a dataset is open fails by name instead of mixing versions.
    e_tag: Option<String>,
    /// While set (opening the shard), reads the cache cannot serve look for the copies of the
    /// records opening reads (`keep_copy`) before fetching.
    opening: AtomicBool,
    /// Why: the object was replaced since opening (see `fails_for_good`): nothing more is read,
    /// and every later read says so.
    replaced: std::sync::OnceLock<String>,
}

impl RemoteObject {
    /// The object at `url`, its size asked of the store.
    pub fn open(url: &str) -> Result<RemoteObject> {
        let location = locate(url)?;
        let key = ObjectPath::from(location.key.as_str());
        let meta = run(&location.store, url, |c| async move { c.head(&key).await })?;
        count(1, 0);
        Ok(RemoteObject::new(location, meta.size, meta.e_tag.as_deref()))
    }

    /// An object whose size (and entity tag) a listing gave (as `new`; a build without the
    /// `remote` feature refuses it).
    pub fn listed(location: Location, len: u64, e_tag: Option<&str>) -> Result<RemoteObject> {
        Ok(RemoteObject::new(location, len, e_tag))
    }

    /// The object's size when opened.
    pub fn size(&self) -> u64 {
        self.len
    }

    /// An object whose size (and entity tag) a listing gave.
    pub fn new(location: Location, len: u64, e_tag: Option<&str>) -> RemoteObject {
        let url = location.url();
        let identity = format!("{url}\n{len}\n{}", e_tag.unwrap_or(""));
        let mut ids = lock(&OBJECT_IDS);
        let ids = ids.get_or_insert_with(HashMap::new);
        let next = ids.len() as u64;
        let id = *ids.entry(identity).or_insert(next);
        // A weak tag (`W/"..."`) never matches `If-Match` (a strong comparison): not asked for.
        let e_tag = e_tag.filter(|t| !t.starts_with("W/")).map(str::to_string);
        RemoteObject {
            location,
            url,
            len,
            id,
            e_tag,
            opening: AtomicBool::new(false),
            replaced: std::sync::OnceLock::new(),
        }
    }

    /// `len` bytes from `offset`, from the cache or fetched (with `READ_AHEAD`).
    pub fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        if let Some(b) = cache().get(self.id, offset, len) {
            return Ok(b);
        }
        if self.opening.load(Ordering::Relaxed) {
            if let Some(b) = cache().get(self.copies_id(), offset, len) {
                return Ok(b);
            }
        }
        let end = offset.saturating_add(len.max(READ_AHEAD)).min(self.len);
        let fetched = self.fetch(std::slice::from_ref(&(offset..end)))?.pop().unwrap_or_default();
        cache().insert(self.id, offset, fetched.clone());
        Ok(fetched.slice(..(len as usize).min(fetched.len())))
    }

    /// Keeps `bytes`, the copy of the object's record at `offset` (see `opening_copies`), for
    /// reads while opening: kept apart from the object's own bytes, so that later reads
    /// (`verify`, an episode's metadata) fetch the record itself.
    pub fn keep_copy(&self, offset: u64, bytes: Bytes) {
        self.opening.store(true, Ordering::Relaxed);
        cache().insert(self.copies_id(), offset, bytes);
    }

    /// Opening is over: reads no longer look at the copies.
    pub fn opened(&self) {
        self.opening.store(false, Ordering::Relaxed);
    }

    /// The cache's key for this object's copies (ids count up from 0: the top bit is free).
    fn copies_id(&self) -> u64 {
        self.id | 1 << 63
    }

    /// Drops the cached bytes that hold any of `range` (they failed a check).
    pub fn forget(&self, range: Range<u64>) {
        cache().forget(self.id, range.start, range.end);
    }

    /// Whether the cache holds `range`.
    pub fn holds(&self, range: &Range<u64>) -> bool {
        cache().holds(self.id, range.start, range.end)
    }

    /// Fetches the `ranges` the cache does not hold, neighbours together, in parallel, and
    /// keeps them.
    pub fn prefetch(&self, ranges: &[Range<u64>]) -> Result<()> {
        let mut missing: Vec<Range<u64>> = {
            let mut cache = cache();
            ranges
                .iter()
                .map(|r| r.start.min(self.len)..r.end.min(self.len))
                .filter(|r| r.start < r.end && !cache.holds(self.id, r.start, r.end))
                .collect()
        };
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_by_key(|r| r.start);
        let merged = merge(&missing, COALESCE_GAP);
        // Its caller gets the error itself: nothing is left for `failure`.
        let fetched = self.fetch(&merged).inspect_err(|_| forget_failure())?;
        let mut cache = cache();
        for (r, bytes) in merged.iter().zip(fetched) {
            cache.insert(self.id, r.start, bytes);
        }
        Ok(())
    }

    /// The bytes of each of `ranges`, one request each, in parallel (counted in `stats`).
    fn fetch(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let key = ObjectPath::from(self.location.key.as_str());
        let ranges = ranges.to_vec();
        let n = ranges.len() as u64;
        let e_tag = self.e_tag.clone();
        let fetched = run_raw(&self.location.store, |c| async move {
            let get = |r: Range<u64>| {
                let options =
                    GetOptions { range: Some(GetRange::Bounded(r)), if_match: e_tag.clone(), ..Default::default() };
                let (c, key) = (c.clone(), key.clone());
                async move { c.get_opts(&key, options).await?.bytes().await }
            };
            // Already merged: the crate's own coalescing (gap 0) only runs them in parallel.
            object_store::coalesce_ranges(&ranges, get, 0).await
        })
        .and_then(|r| {
            r.map_err(|e| {
                let final_ = fails_for_good(&e);
                let e = store_error(&self.url, e);
                if final_ {
                    let _ = self.replaced.set(e.to_string());
                }
                e
            })
        });
        match fetched {
            Ok(fetched) => {
                count(n, fetched.iter().map(|b| b.len() as u64).sum());
                Ok(fetched)
            }
            Err(e) => {
                LAST_FAILURE.with(|f| *f.borrow_mut() = Some((self.id, e.to_string())));
                Err(e)
            }
        }
    }

    /// Whether the object was replaced since opening: its reads fail for good.
    pub fn is_replaced(&self) -> bool {
        self.replaced.get().is_some()
    }
}

thread_local! {
    /// Why a read of an object on this thread failed (object id, why), until a caller that can
    /// say so takes it (`failure`: reads through `Source::bytes` can only say that the bytes are
    /// missing). Per thread, and taken once: a failure ends with its cause, and another thread's
    /// read, failing or not, says nothing about this one's.
    static LAST_FAILURE: std::cell::RefCell<Option<(u64, String)>> = const { std::cell::RefCell::new(None) };
}

fn forget_failure() {
    LAST_FAILURE.with(|f| f.borrow_mut().take());
}

impl RemoteObject {
    /// Why a read of the object on this thread failed, as the error it was (taken: asked again,
    /// `None`), or for good that it was replaced.
    pub fn failure(&self) -> Option<Error> {
        let taken = || LAST_FAILURE.with(|f| f.borrow_mut().take_if(|(id, _)| *id == self.id)).map(|(_, why)| why);
        let why = self.replaced.get().cloned().or_else(taken)?;
        let why = why.strip_prefix(&format!("{}: ", self.url)).unwrap_or(&why).to_string();
        Some(Error::Io { path: self.url.clone().into(), source: std::io::Error::other(why) })
    }
}

fn cache() -> MutexGuard<'static, ExtentCache> {
    let mut cache = lock(&CACHE);
    static SIZED: std::sync::Once = std::sync::Once::new();
    SIZED.call_once(|| {
        if let Some(n) = std::env::var("TRAJCORE_REMOTE_CACHE_BYTES").ok().and_then(|v| v.parse().ok()) {
            cache.set_capacity(n);
        }
    });
    cache
}

/// Sorted ranges with those closer than `gap` joined.
fn merge(sorted: &[Range<u64>], gap: u64) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => last.end = last.end.max(r.end),
            _ => out.push(r.clone()),
        }
    }
    out
}

/// The whole object at `url` (a small one: an eviction log), asked of the store at every call
/// (never cached, so a failure ends with its cause); `None` when there is no such object.
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid` (a bad URL).
pub(crate) fn get_whole(url: &str) -> Result<Option<Bytes>> {
    let location = locate(url)?;
    let key = ObjectPath::from(location.key.as_str());
    let got = run_raw(&location.store, |c| async move { c.get(&key).await?.bytes().await })?;
    match got {
        Ok(bytes) => {
            count(1, bytes.len() as u64);
            Ok(Some(bytes))
        }
        Err(object_store::Error::NotFound { .. }) => {
            count(1, 0);
            Ok(None)
        }
        Err(e) => Err(store_error(url, e)),
    }
}

/// Deletes the object at `url`; one already gone is deleted all the same.
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid` (a bad URL).
pub(crate) fn delete(url: &str) -> Result<()> {
    let location = locate(url)?;
    let key = ObjectPath::from(location.key.as_str());
    count(1, 0);
    match run_raw(&location.store, |c| async move { c.delete(&key).await })? {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(store_error(url, e)),
    }
}

/// Objects listed: (location, size, entity tag).
pub(crate) type Listed = Vec<(Location, u64, Option<String>)>;

/// The objects directly under `prefix` in `location`'s store (one listing request per page), as
/// (location, size, entity tag), in key order.
pub(crate) fn list(location: &Location, url: &str) -> Result<Listed> {
    Ok(list_with_folders(location, url)?.0)
}

/// `list`, and the folders directly under `prefix` too (common prefixes: a shard's segments are
/// in `<shard>.open/`), by key, unordered.
pub(crate) fn list_with_folders(location: &Location, url: &str) -> Result<(Listed, Vec<String>)> {
    let prefix = ObjectPath::from(location.key.as_str());
    let listed = run(&location.store, url, |c| async move { c.list_with_delimiter(Some(&prefix)).await })?;
    count(1, 0);
    let mut objects: Vec<_> = listed
        .objects
        .into_iter()
        .map(|m| (Location { store: location.store.clone(), key: m.location.to_string() }, m.size, m.e_tag))
        .collect();
    objects.sort_by(|a, b| a.0.key.cmp(&b.0.key));
    Ok((objects, listed.common_prefixes.iter().map(|p| p.to_string()).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_merge_within_the_gap() {
        type Spans = &'static [(u64, u64)];
        let cases: &[(Spans, u64, Spans)] = &[
            (&[(0, 10), (15, 20)], 5, &[(0, 20)]),
            (&[(0, 10), (16, 20)], 5, &[(0, 10), (16, 20)]),
            (&[(0, 10), (5, 8)], 0, &[(0, 10)]),
            (&[], 5, &[]),
        ];
        let ranges = |spans: Spans| spans.iter().map(|&(a, b)| a..b).collect::<Vec<_>>();
        for &(spans, gap, want) in cases {
            assert_eq!(merge(&ranges(spans), gap), ranges(want), "{spans:?} {gap}");
        }
    }

    #[test]
    fn a_plain_http_endpoint_needs_allow_http() {
        let endpoint = |allow: Option<&str>| {
            let mut options = vec![("endpoint".to_string(), "http://127.0.0.1:9".to_string())];
            options.extend(allow.map(|v| ("allow_http".to_string(), v.to_string())));
            configure("s3://plain-http-bucket/x", &options)
        };
        for allow in [None, Some("false")] {
            let e = endpoint(allow).unwrap_err().to_string();
            assert!(e.starts_with("s3://plain-http-bucket: the endpoint http://127.0.0.1:9 is plain HTTP"), "{e}");
            assert!(e.contains("allow_http"), "{e}");
        }
        for allow in ["true", "True", "1"] {
            assert!(endpoint(Some(allow)).is_ok(), "{allow}");
        }
        assert!(configure("s3://plain-http-bucket/x", &[]).is_ok(), "the options kept are checked");
    }

    #[test]
    fn only_a_replaced_object_fails_for_good() {
        let source = || Box::new(std::io::Error::other("cause")) as Box<dyn std::error::Error + Send + Sync>;
        let cases: Vec<(object_store::Error, bool)> = vec![
            (object_store::Error::Precondition { path: "k".into(), source: source() }, true),
            (object_store::Error::NotFound { path: "k".into(), source: source() }, false),
            (object_store::Error::Generic { store: "S3", source: source() }, false), // a 503 after the retries
            (object_store::Error::NotModified { path: "k".into(), source: source() }, false),
        ];
        for (e, final_) in cases {
            assert_eq!(fails_for_good(&e), final_, "{e}");
        }
    }

    #[test]
    fn bad_options_are_refused_naming_the_key() {
        let bad = [("no_such_key", "1"), ("max_retries", "many"), ("retry_timeout", "-1")];
        for (key, value) in bad {
            let e = configure("s3://bucket/x", &[(key.to_string(), value.to_string())]).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }
}
