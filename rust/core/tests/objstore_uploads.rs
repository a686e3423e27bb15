//! A recording's uploads to a store, against `object_store`'s own stores: an in-memory store
//! behind its throttling wrapper (every request slow), and a store that fails (an endpoint
//! nothing listens on) then recovers. What the store holds is compared byte for byte with the
//! staging directory, and read back through the reader value for value.
#![cfg(feature = "remote")]

mod writer_util;

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::throttle::{ThrottleConfig, ThrottledStore};
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions,
    PutPayload, PutResult,
};
use serde_json::json;
use trajcore_core::objstore::remote::{configure, use_store};
use trajcore_core::objstore::uploads::{UploadQueue, Uploads};
use trajcore_core::reader::{ColumnData, Dataset, OpenOptions};
use trajcore_core::writer::files::capacity::{is_eviction_log, store_log_name};
use trajcore_core::Error;
use writer_util::*;

/// One env, episodes of lengths 1..23, `flush` every few (as the flush timer would), several
/// shards; `between` runs at each flush. Returns what the reader should list.
fn record(dir: &Path, url: &str, between: impl FnMut(&Harness)) -> (Harness, usize) {
    record_with(dir, url, json!({}), between)
}

/// `record`, with the config's `more` options.
fn record_with(dir: &Path, url: &str, more: serde_json::Value, mut between: impl FnMut(&Harness)) -> (Harness, usize) {
    let mut extra = json!({"upload_to": url, "max_shard_bytes": 6000, "flush_interval_s": 0.05});
    extra.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
    let mut h = Harness::new(dir, config(1, false, "disabled", extra));
    let mut tick = 0u64;
    h.reset(&[env_step(0, tick)], None);
    let episodes = 40;
    for k in 0..episodes {
        h.one_env_episode(k as u64, &mut tick);
        if k % 4 == 3 {
            h.rec.flush().unwrap();
            between(&h);
        }
    }
    (h, episodes)
}

/// An in-memory store, made the one `bucket`'s URLs reach.
fn memory_store(bucket: &str) -> Arc<dyn ObjectStore> {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    use_store(bucket, store.clone()).unwrap();
    store
}

/// Every object under `prefix` of `store`: (key, bytes), sorted by key.
fn objects(store: &dyn ObjectStore, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        use futures::TryStreamExt;
        let metas: Vec<_> = store.list(Some(&ObjectPath::from(prefix))).try_collect().await.unwrap();
        let mut out = Vec::new();
        for m in metas {
            let bytes = store.get(&m.location).await.unwrap().bytes().await.unwrap();
            out.push((m.location.to_string(), bytes.to_vec()));
        }
        out.sort();
        out
    })
}

/// The staging directory's shards: (file name, bytes), sorted.
fn staged(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "trj"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

/// The store under `bucket`'s `prefix` holds each staged shard whole (no segment left) and
/// reads back as `expected`.
fn check_up(store: &dyn ObjectStore, bucket: &str, prefix: &str, dir: &Path, expected: &[ExpEpisode]) {
    let local = staged(dir);
    assert!(local.len() >= 2, "the recording rolled over: {} shards", local.len());
    let up = objects(store, prefix);
    let named: Vec<(String, Vec<u8>)> = local.iter().map(|(n, b)| (format!("{prefix}/{n}"), b.clone())).collect();
    // Every shard whole, byte for byte, and no segment left behind.
    assert_eq!(
        up.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        named.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
    );
    assert!(up == named, "a shard in the store differs from its staged file");
    let ds = Dataset::open(Path::new(&format!("{bucket}/{prefix}")), OpenOptions::default()).unwrap();
    check(&ds, expected);
}

#[test]
fn a_recording_goes_up_whole_through_a_slow_store_and_reads_back_equal() {
    let slow = ThrottledStore::new(
        InMemory::new(),
        ThrottleConfig { wait_put_per_call: Duration::from_millis(5), ..ThrottleConfig::default() },
    );
    let store: Arc<dyn ObjectStore> = Arc::new(slow);
    const BUCKET: &str = "s3://uploads-slow";
    use_store(BUCKET, store.clone()).unwrap();
    let staging = tempfile::tempdir().unwrap();
    let (h, _) = record(staging.path(), "s3://uploads-slow/run", |_| {});
    assert!(h.rec.stats().bytes_uploaded.is_some(), "recording to a store, stats count the bytes put");
    let expected = h.close();
    check_up(&*store, BUCKET, "run", staging.path(), &expected);
}

/// Every recording to a store holds a lease in the prefix, bounded or not: whenever anything of
/// it is up, its lease is (put first, named with its ttl), renewed every `lease_renew_interval`
/// (its time moves on), and deleted at close (`check_up` finds the shards alone).
#[test]
fn a_recording_holds_its_lease_while_anything_of_it_is_up() {
    const BUCKET: &str = "s3://uploads-lease";
    let store = memory_store(BUCKET);
    let staging = tempfile::tempdir().unwrap();
    let lease_put_at = |names: &[String]| {
        let lease = names.iter().find(|k| k.contains("/trajcore-lease-"))?;
        assert!(lease.ends_with("-30000ms.json"), "{lease}");
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        Some(runtime.block_on(store.head(&ObjectPath::from(lease.as_str()))).unwrap().last_modified)
    };
    let (mut checks, mut renewed) = (0, false);
    let timings = json!({"lease_renew_interval_s": 0.01, "lease_ttl_s": 30.0});
    let (h, _) = record_with(staging.path(), "s3://uploads-lease/run", timings, |_| {
        let names: Vec<String> = objects(&*store, "run").into_iter().map(|(k, _)| k).collect();
        let Some(at) = lease_put_at(&names) else {
            assert!(names.is_empty(), "objects of the recording up before its lease: {names:?}");
            return;
        };
        checks += 1;
        if !renewed {
            wait_for(|| {
                let names: Vec<String> = objects(&*store, "run").into_iter().map(|(k, _)| k).collect();
                lease_put_at(&names).is_some_and(|again| again > at)
            });
            renewed = true;
        }
    });
    assert!(checks > 0 && renewed);
    let expected = h.close();
    check_up(&*store, BUCKET, "run", staging.path(), &expected);
}

/// Waits (checking every millisecond, for at most a minute) until `done`.
fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "not within a minute");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The writer seals a shard once its compaction, on a thread of its own, is done, so shards
/// may be sealed out of order: here the second before the first. The second goes up only after
/// the first: a reader listing the prefix in between would otherwise list it without the one
/// before it, and take in its repeat of that one's last row (`CHUNK_REPEAT`, which fills in for
/// a shard the reader lacks): the first, listed at a later refresh, then overlapped it and its
/// chunk was left out with a warning (`test_store_capacity.py`'s two recorders, 1 run in 6).
#[test]
fn a_shard_sealed_before_the_one_opened_before_it_goes_up_after_it() {
    use trajcore_core::objstore::leases::LeaseTimes;
    const BUCKET: &str = "s3://uploads-order";
    let store = memory_store(BUCKET);
    let staging = tempfile::tempdir().unwrap();
    // The uploads read no record of a sealed shard: any bytes do.
    let file = |name: &str| {
        let path = staging.path().join(name);
        std::fs::write(&path, vec![7u8; 200]).unwrap();
        path
    };
    let keys = || objects(&*store, "run").into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    let (url, lease) = ("s3://uploads-order/run", LeaseTimes::default());
    let mut uploads = Uploads::start(url, staging.path(), Duration::from_millis(10), [7; 16], lease).unwrap();
    let queue = uploads.queue();
    let (first, second) = (file("s-1.trj"), file("s-2.trj"));
    queue.opened(&first);
    queue.opened(&second);
    queue.sealed(&second);
    // Two intervals pass, told by the segments of two more shards (a header's bytes each: a
    // segment holds whole records), each flushed after the one before is up: the sealed shards
    // go up at each interval after the segments.
    for marker in ["m-1.trj", "m-2.trj"] {
        queue.opened(&file(marker));
        queue.flushed();
        let segment = format!("run/{marker}.open/{:020}", 0);
        wait_for(|| keys().contains(&segment));
    }
    assert!(!keys().contains(&"run/s-2.trj".to_string()), "{:?}", keys());
    queue.sealed(&first);
    wait_for(|| {
        let up = keys();
        let (one, two) = (up.contains(&"run/s-1.trj".to_string()), up.contains(&"run/s-2.trj".to_string()));
        assert!(one || !two, "the second shard went up before the first: {up:?}");
        one && two
    });
    uploads.close().unwrap();
}

/// A store nothing answers: every request fails at once (connection refused, no retries).
fn dead_store(url: &str) {
    let options: Vec<(String, String)> = [
        ("endpoint", "http://127.0.0.1:1"),
        ("allow_http", "true"),
        ("region", "us-east-1"),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
        ("max_retries", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    configure(url, &options).unwrap();
}

#[test]
fn a_failed_upload_is_said_once_and_retried_when_the_store_is_back() {
    const BUCKET: &str = "s3://uploads-back";
    dead_store(BUCKET);
    let staging = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let (mut h, _) = record(staging.path(), "s3://uploads-back/run", |h| {
        failures.extend(h.rec.upload_failure());
        if failures.is_empty() {
            wait_for(|| {
                failures.extend(h.rec.upload_failure());
                !failures.is_empty()
            });
        }
    });
    assert!(failures[0].starts_with("s3://uploads-back/run: an upload failed"), "{}", failures[0]);
    // Said once for the outage, however many intervals it lasts (the uploads went on failing).
    assert_eq!(failures.len(), 1);
    h.rec.flush().unwrap();
    assert_eq!(h.rec.upload_failure(), None);
    let store = memory_store(BUCKET);
    let expected = h.close();
    check_up(&*store, BUCKET, "run", staging.path(), &expected);
}

#[test]
fn a_store_that_stays_down_fails_the_close_by_name_and_keeps_the_shards() {
    dead_store("s3://uploads-down");
    let staging = tempfile::tempdir().unwrap();
    let (mut h, _) = record(staging.path(), "s3://uploads-down/run", |_| {});
    let err = h.rec.close().unwrap_err();
    let Error::Upload { url, why } = &err else { panic!("{err}") };
    assert_eq!(url, "s3://uploads-down/run");
    assert!(why.contains(&staging.path().display().to_string()), "{why}");
    assert!(staged(staging.path()).len() >= 2, "the shards stay whole in the staging directory");
}

/// A bounded recording into the store prefix `url` (staged in `staging`) of 40 episodes of
/// lengths 1..23 with a capacity of `capacity` over the shards `prior` already there. Returns
/// the transitions it was given and those it evicted.
fn record_bounded(staging: &Path, url: &str, capacity: u64, prior: Vec<(std::path::PathBuf, u64)>) -> (u64, u64) {
    let extra = json!({"upload_to": url, "capacity_steps": capacity, "flush_interval_s": 0.05, "prior_shards": prior});
    let mut h = Harness::new(staging, config(1, false, "disabled", extra));
    let (mut tick, mut total) = (0u64, 0u64);
    h.reset(&[env_step(0, tick)], None);
    for k in 0..40u64 {
        total += h.one_env_episode(k, &mut tick);
    }
    h.rec.close().unwrap();
    let stats = h.rec.stats();
    assert!(stats.evicted_steps > 0 && stats.eviction_error.is_none(), "{:?}", stats.eviction_error);
    (total, stats.evicted_steps)
}

/// The eviction log a store recording kept in its staging directory `dir` (named for its
/// recording: `capacity::store_log_name`), with its bytes.
fn eviction_log(dir: &Path) -> (String, Vec<u8>) {
    let mut logs = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| is_eviction_log(name));
    let name = logs.next().expect("an eviction log in the staging directory");
    assert!(logs.next().is_none(), "one eviction log per recording");
    let bytes = std::fs::read(dir.join(&name)).unwrap();
    (name, bytes)
}

#[test]
fn a_bounded_recording_puts_its_eviction_log_up_and_deletes_the_evicted_shards() {
    const BUCKET: &str = "s3://uploads-bounded";
    let store = memory_store(BUCKET);
    let staging = tempfile::tempdir().unwrap();
    let url = format!("{BUCKET}/run");
    let (total, evicted) = record_bounded(staging.path(), &url, 60, Vec::new());
    // The store holds what the staging directory kept (the shards the capacity left, whole) and
    // its eviction log, byte for byte: no evicted shard, no segment.
    let (log_name, log) = eviction_log(staging.path());
    let mut want: Vec<(String, Vec<u8>)> =
        staged(staging.path()).into_iter().map(|(n, b)| (format!("run/{n}"), b)).collect();
    want.push((format!("run/{log_name}"), log));
    want.sort();
    let up = objects(&*store, "run");
    assert_eq!(
        up.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        want.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()
    );
    assert!(up == want, "an object differs from its staged file");
    let ds = Dataset::open(Path::new(&url), OpenOptions::default()).unwrap();
    assert_eq!(ds.evicted_steps().unwrap(), evicted);
    assert_eq!(ds.num_steps() + evicted, total);
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
}

/// A bounded recording reopened on a prefix that holds shards counts them (as the reader lists
/// them, oldest first: what the Python side hands over) and evicts the oldest first; the
/// prefix's eviction log goes on counting, and a shard it names that is still there, as an
/// object or as segments (a recorder stopped between the log and the deletion, or whose store
/// refused the deletion until it closed), is deleted.
#[test]
fn a_bounded_recording_reopened_on_a_filled_prefix_counts_and_evicts_its_shards() {
    const BUCKET: &str = "s3://uploads-reopened";
    let store = memory_store(BUCKET);
    let url = format!("{BUCKET}/run");
    let first = tempfile::tempdir().unwrap();
    let (total_before, evicted_before) = record_bounded(first.path(), &url, 200, Vec::new());
    let before = Dataset::open(Path::new(&url), OpenOptions::default()).unwrap();
    let old_shards: Vec<String> =
        before.shard_paths().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert!(old_shards.len() >= 3, "{old_shards:?}");
    // An evicted shard the first recording's log names, left in the store.
    let (_, logged) = eviction_log(first.path());
    let logged: serde_json::Value = serde_json::from_slice(&logged).unwrap();
    let leftover = logged["evicted_shards"][0].as_str().unwrap().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(store.put(&ObjectPath::from(format!("run/{leftover}")), b"left".to_vec().into())).unwrap();
    // And the segment of one evicted before it went up whole (its store refused the deletion).
    let segmented = logged["evicted_shards"][1].as_str().unwrap().to_string();
    let segment = format!("run/{segmented}.open/{:020}", 0);
    runtime.block_on(store.put(&ObjectPath::from(segment.as_str()), b"left".to_vec().into())).unwrap();

    let second = tempfile::tempdir().unwrap();
    let prior: Vec<_> = old_shards
        .iter()
        .zip(before.shard_steps())
        .map(|(name, (_, steps))| (second.path().join(name), steps))
        .collect();
    let kept_before: u64 = prior.iter().map(|(_, s)| s).sum();
    drop(before);
    let (total, evicted) = record_bounded(second.path(), &url, 60, prior);
    let up: Vec<String> = objects(&*store, "run").into_iter().map(|(k, _)| k).collect();
    assert!(!up.contains(&format!("run/{leftover}")) && !up.contains(&segment), "{up:?}");
    // The oldest shards went first: the older recording's shards are all gone (the new one
    // alone holds more than the capacity), the new one's newest are there.
    assert!(old_shards.iter().all(|n| !up.contains(&format!("run/{n}"))), "{up:?}");
    assert!(evicted >= kept_before, "{evicted} {kept_before}");
    let ds = Dataset::open(Path::new(&url), OpenOptions::default()).unwrap();
    assert_eq!(ds.evicted_steps().unwrap(), evicted_before + evicted, "the log counts over both recordings");
    assert_eq!(ds.num_steps() + evicted_before + evicted, total_before + total);
    assert!(ds.num_steps() <= 60 + 60 / 10 * 2, "{}", ds.num_steps());
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
}

/// A store in front of an in-memory one that refuses deletions as told (`refuse`: -1 every
/// one, n the next n, 0 none) with the error a 503 gives, counting those it refused.
#[derive(Debug, Default)]
struct RefusingDeletes {
    inner: InMemory,
    refusing: AtomicI64,
    refused: AtomicU64,
}

impl RefusingDeletes {
    fn refuse(&self, n: i64) {
        self.refusing.store(n, Ordering::SeqCst);
    }

    fn refuses(&self) -> bool {
        let refuses = self
            .refusing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                0 => None,
                n if n < 0 => Some(n),
                n => Some(n - 1),
            })
            .is_ok();
        if refuses {
            self.refused.fetch_add(1, Ordering::SeqCst);
        }
        refuses
    }
}

impl std::fmt::Display for RefusingDeletes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RefusingDeletes({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for RefusingDeletes {
    async fn put_opts(
        &self,
        at: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(at, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        at: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(at, opts).await
    }

    async fn get_opts(&self, at: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(at, options).await
    }

    async fn delete(&self, at: &ObjectPath) -> object_store::Result<()> {
        if self.refuses() {
            let source = "503 SlowDown: please reduce your request rate".into();
            return Err(object_store::Error::Generic { store: "refusing", source });
        }
        self.inner.delete(at).await
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

/// Shard files of any bytes in a staging directory (the uploads read no record of a sealed
/// shard), and an eviction log there naming those evicted so far, as the capacity keeps it.
struct Staging {
    dir: tempfile::TempDir,
    log: std::path::PathBuf,
    evicted: Vec<String>,
}

impl Staging {
    fn new() -> Staging {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(store_log_name(&[9; 16]));
        Staging { dir, log, evicted: Vec::new() }
    }

    fn shard(&self, name: &str) -> std::path::PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, vec![7u8; 200]).unwrap();
        path
    }

    /// Evicts `shard` as the capacity does: logged (the log rewritten whole), then deleted.
    fn evict(&mut self, queue: &UploadQueue, shard: &Path) {
        self.evicted.push(shard.file_name().unwrap().to_string_lossy().into_owned());
        let log = json!({"evicted_steps": 10 * self.evicted.len(), "evicted_shards": self.evicted});
        let temp = self.log.with_extension("tmp");
        std::fs::write(&temp, log.to_string()).unwrap();
        std::fs::rename(&temp, &self.log).unwrap();
        queue.evicted(&[shard.to_path_buf()], &self.log);
        std::fs::remove_file(shard).unwrap();
    }
}

/// A bounded recording evicts far faster than a slow store answers (every put and delete 20
/// ms): what the writer says waits in the uploads' backlog, which holds the shards the capacity
/// keeps, not an eviction log per eviction (only the newest goes up: one put however many
/// evictions came meanwhile). At the end the store holds the log naming every evicted shard,
/// the shards kept, and no object of an evicted one.
#[test]
fn evictions_faster_than_a_slow_store_answers_keep_the_backlog_bounded() {
    use trajcore_core::objstore::leases::LeaseTimes;
    let slow = ThrottleConfig {
        wait_put_per_call: Duration::from_millis(20),
        wait_delete_per_call: Duration::from_millis(20),
        ..ThrottleConfig::default()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(ThrottledStore::new(InMemory::new(), slow));
    use_store("s3://uploads-evicting", store.clone()).unwrap();
    let mut staging = Staging::new();
    let url = "s3://uploads-evicting/run";
    let mut uploads =
        Uploads::start(url, staging.dir.path(), Duration::from_millis(10), [9; 16], LeaseTimes::default()).unwrap();
    let queue = uploads.queue();
    let (kept, shards) = (10, 300);
    let name = |k: usize| format!("s-{k:04}.trj");
    let mut paths = Vec::new();
    for k in 0..shards {
        paths.push(staging.shard(&name(k)));
        queue.opened(&paths[k]);
        queue.flushed();
        if k > 0 {
            queue.sealed(&paths[k - 1]);
        }
        if k > kept {
            staging.evict(&queue, &paths[k - kept - 1]);
        }
    }
    queue.sealed(&paths[shards - 1]);
    uploads.close().unwrap();
    assert_eq!(uploads.deletions_left(), None);
    // `backlog`'s bound: four entries a shard alive at once (those kept, the one written, the
    // one sealed and not yet evicted).
    let bound = 4 * (kept + 2);
    assert!(uploads.backlog_peak() <= bound, "backlog of {} (bound {bound})", uploads.backlog_peak());
    let mut want: Vec<String> = (shards - kept - 1..shards).map(|k| format!("run/{}", name(k))).collect();
    let log_key = format!("run/{}", store_log_name(&[9; 16]));
    want.push(log_key.clone());
    want.sort();
    let up = objects(&*store, "run");
    assert_eq!(up.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), want);
    let log = &up.iter().find(|(k, _)| *k == log_key).unwrap().1;
    let log: serde_json::Value = serde_json::from_slice(log).unwrap();
    let named: Vec<String> = (0..shards - kept - 1).map(name).collect();
    assert_eq!(log["evicted_shards"], json!(named), "the log in the store names every evicted shard");
}

/// A bounded recording through a slow store, a reader of the prefix refreshing at each flush:
/// every episode it has not dropped reads back as the env gave it (none of an evicted shard,
/// whose object may be gone), and at the end the prefix counts every transition once.
#[test]
fn a_reader_of_a_bounded_recording_through_a_slow_store_never_reads_an_evicted_row() {
    let slow = ThrottleConfig {
        wait_put_per_call: Duration::from_millis(10),
        wait_delete_per_call: Duration::from_millis(10),
        ..ThrottleConfig::default()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(ThrottledStore::new(InMemory::new(), slow));
    const BUCKET: &str = "s3://uploads-bounded-slow";
    use_store(BUCKET, store.clone()).unwrap();
    let url = format!("{BUCKET}/run");
    let staging = tempfile::tempdir().unwrap();
    let mut reader: Option<Dataset> = None;
    let mut read = 0;
    let options = json!({"capacity_steps": 150, "flush_interval_s": 0.25});
    let (mut h, _) = record_with(staging.path(), &url, options, |h| {
        // Waits for the uploads to put up what the recording sealed since the last look.
        let Some(ds) = reader.as_mut() else {
            wait_for(|| {
                reader = Dataset::open(Path::new(&url), OpenOptions::default()).ok();
                reader.as_ref().is_some_and(|ds| !ds.episodes().is_empty())
            });
            return;
        };
        let before = ds.episodes().len();
        wait_for(|| {
            ds.refresh().unwrap();
            ds.episodes().len() > before
        });
        assert!(ds.problems().is_empty(), "{:?}", ds.problems());
        for (i, episode) in ds.episodes().iter().enumerate() {
            if ds.evicted_episodes().contains(&i) {
                continue;
            }
            let obs = ds.view().read_episode_column(i, "obs").unwrap();
            let Some(want) = h.model.finished.iter().flatten().find(|e| e.id == episode.summary.episode_id) else {
                continue; // running
            };
            if episode.summary.length as usize == want.len() {
                let bytes = match obs {
                    ColumnData::Fixed { bytes, .. } => bytes,
                    ColumnData::Strings(_) => panic!("obs is fixed-size"),
                };
                assert_eq!(bytes, want.obs.iter().flat_map(obs_bytes).collect::<Vec<_>>(), "episode {i}");
                read += 1;
            }
        }
    });
    h.rec.close().unwrap();
    let stats = h.rec.stats();
    assert!(stats.evicted_steps > 0 && stats.eviction_error.is_none(), "{:?}", stats.eviction_error);
    assert!(read > 0);
    let ds = Dataset::open(Path::new(&url), OpenOptions::default()).unwrap();
    assert_eq!(ds.evicted_steps().unwrap(), stats.evicted_steps);
    assert_eq!(ds.num_steps() + stats.evicted_steps, stats.steps);
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    let evicted: serde_json::Value = serde_json::from_slice(&eviction_log(staging.path()).1).unwrap();
    let up: Vec<String> = objects(&*store, "run").into_iter().map(|(k, _)| k).collect();
    for shard in evicted["evicted_shards"].as_array().unwrap() {
        let shard = shard.as_str().unwrap();
        assert!(!up.iter().any(|k| k.starts_with(&format!("run/{shard}"))), "{shard} is still up: {up:?}");
    }
}

/// Shards `a` and `b` evicted while the store refuses deletions (the ticks try again and
/// again), and shard `d` up whole, its segment left: returns the uploads, the store and the
/// staging (with shards `c` and `d` kept, up).
fn evicted_while_refused(bucket: &str) -> (Uploads, Arc<RefusingDeletes>, Staging) {
    use trajcore_core::objstore::leases::LeaseTimes;
    let store = Arc::new(RefusingDeletes::default());
    use_store(bucket, store.clone()).unwrap();
    let mut staging = Staging::new();
    let url = format!("{bucket}/run");
    let uploads =
        Uploads::start(&url, staging.dir.path(), Duration::from_millis(20), [9; 16], LeaseTimes::default()).unwrap();
    let queue = uploads.queue();
    let shards: Vec<_> = ["a.trj", "b.trj", "c.trj"].iter().map(|n| staging.shard(n)).collect();
    for shard in &shards {
        queue.opened(shard);
        queue.sealed(shard);
    }
    let keys = || objects(&*store, "run").into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    wait_for(|| ["run/a.trj", "run/b.trj", "run/c.trj"].iter().all(|k| keys().contains(&k.to_string())));
    store.refuse(-1);
    staging.evict(&queue, &shards[0]);
    staging.evict(&queue, &shards[1]);
    wait_for(|| store.refused.load(Ordering::SeqCst) >= 2); // two ticks tried, and were refused
    let last = staging.shard("d.trj");
    queue.opened(&last);
    queue.flushed();
    wait_for(|| keys().contains(&format!("run/d.trj.open/{:020}", 0)));
    queue.sealed(&last);
    wait_for(|| keys().contains(&"run/d.trj".to_string()));
    let failure = uploads.failure().expect("the outage is said");
    assert!(failure.starts_with(&format!("{url}: an upload failed")) && failure.contains("503"), "{failure}");
    (uploads, store, staging)
}

/// The store refuses the deletions of two evicted shards and of a segment, then, as the
/// recording closes, takes them after four more refusals: the close tries again (at least two
/// of the four are its own: a tick tries twice at most before it), goes through, and leaves
/// nothing behind.
#[test]
fn a_deletion_the_store_refused_is_tried_again_at_close_and_goes_through() {
    const BUCKET: &str = "s3://uploads-refused-then-back";
    let (mut uploads, store, _staging) = evicted_while_refused(BUCKET);
    store.refuse(4);
    uploads.close().unwrap();
    assert_eq!(uploads.deletions_left(), None);
    assert_eq!(store.refusing.load(Ordering::SeqCst), 0, "every refusal was met");
    let up: Vec<String> = objects(&*store, "run").into_iter().map(|(k, _)| k).collect();
    let log = format!("run/{}", store_log_name(&[9; 16]));
    assert_eq!(up, vec!["run/c.trj".to_string(), "run/d.trj".into(), log]);
}

/// A store that still refuses at close: the close tries for a few seconds, then returns
/// without failing (every shard is up) and says once what is left, naming the prefix, the
/// first shard left, the shard whose segments stay and why; the objects stay, the log that
/// names the evicted ones is up.
#[test]
fn a_store_still_refusing_deletions_at_close_is_said_once_by_name_and_the_close_returns() {
    const BUCKET: &str = "s3://uploads-refused-for-good";
    let (mut uploads, store, _staging) = evicted_while_refused(BUCKET);
    let began = Instant::now();
    uploads.close().unwrap();
    assert!(began.elapsed() < Duration::from_secs(15), "the close took {:?}", began.elapsed());
    let left = uploads.deletions_left().expect("what is left is said");
    assert!(left.starts_with(&format!("{BUCKET}/run: 2 evicted shards from {BUCKET}/run/a.trj on")), "{left}");
    assert!(left.contains(&format!("the segments of 1 shards up whole, from {BUCKET}/run/d.trj on")), "{left}");
    assert!(left.contains("could not be deleted") && left.contains("503"), "{left}");
    assert_eq!(uploads.deletions_left(), None, "said once");
    let up: Vec<String> = objects(&*store, "run").into_iter().map(|(k, _)| k).collect();
    let log = format!("run/{}", store_log_name(&[9; 16]));
    // The lease too: the store refused its deletion, and it goes stale (its ttl).
    let lease = format!("run/trajcore-lease-{}-60000ms.json", "09".repeat(16));
    let segment = format!("run/d.trj.open/{:020}", 0);
    let want = ["run/a.trj", "run/b.trj", "run/c.trj", "run/d.trj", &segment, &log, &lease];
    assert_eq!(up, want.iter().map(|k| k.to_string()).collect::<Vec<_>>());
}
