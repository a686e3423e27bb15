//! Leases: how recorders sharing a store prefix tell a live recording from a stopped one. A
//! directory has the lock a live writer holds on its shard (its process's death lets go of it);
//! a store has no lock. So a bounded recording to a store holds a lease object in the prefix
//! (`lease_name`): put before any object of its recording exists, renewed every `LEASE_RENEW` by
//! its upload thread, deleted when it closes. A lease is fresh while the store's clock says it
//! was renewed less than `LEASE_TTL` ago: the store's own clock, read as the time of a probe
//! object in the same listing, so no machine's clock is compared with another's. A killed
//! recorder's lease goes stale `LEASE_TTL` after its last renewal; until then its recording
//! counts as live.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use object_store::path::Path as ObjectPath;

use super::remote::{count, run};
use super::url::locate;
use crate::error::Result;

/// How often a live recording renews its lease.
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// How long after its last renewal a lease is stale: several renewals, so that a slow store or
/// a failed renewal (retried at the next interval) does not make a live recording look stopped.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

const LEASE_PREFIX: &str = "trajcore-lease-";

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The lease object of the recording `recording_id` (the last part of its key).
pub fn lease_name(recording_id: &[u8; 16]) -> String {
    format!("{LEASE_PREFIX}{}.json", hex(recording_id))
}

/// The recording id (hex) the lease object `name` belongs to; `None` for an object that is no
/// lease.
pub fn leased_recording(name: &str) -> Option<&str> {
    let id = name.strip_prefix(LEASE_PREFIX)?.strip_suffix(".json")?;
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The recordings (ids, hex) whose lease among `leases` (object name, when last put, in
/// seconds by the store's clock) is fresh at `now` (same clock). A lease put after `now`
/// (another recorder renewed it while the probe was listed) is fresh.
pub fn fresh(leases: &[(String, i64)], now: i64, ttl: Duration) -> HashSet<String> {
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    leases
        .iter()
        .filter(|(_, at)| now.saturating_sub(*at) < ttl)
        .filter_map(|(name, _)| leased_recording(name).map(str::to_string))
        .collect()
}

/// Puts (or renews) the lease of `recording_id` under the prefix `url`.
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid` (a bad URL).
pub fn put(url: &str, recording_id: &[u8; 16]) -> Result<()> {
    let at = format!("{}/{}", url.trim_end_matches('/'), lease_name(recording_id));
    let body = format!("{{\"recording\": \"{}\"}}", hex(recording_id));
    put_bytes(&at, body.into_bytes())
}

/// Deletes the lease of `recording_id` under the prefix `url` (gone already: done).
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid`.
pub fn delete(url: &str, recording_id: &[u8; 16]) -> Result<()> {
    super::remote::delete(&format!("{}/{}", url.trim_end_matches('/'), lease_name(recording_id)))
}

fn put_bytes(url: &str, bytes: Vec<u8>) -> Result<()> {
    let location = locate(url)?;
    let key = ObjectPath::from(location.key.as_str());
    count(1, 0);
    run(&location.store, url, |c| async move { c.put(&key, bytes.into()).await }).map(|_| ())
}

const PROBE_PREFIX: &str = "trajcore-clock-";

/// The recordings (ids, hex) under the prefix `url` that hold a fresh lease now, by the store's
/// clock: a probe object of this call is put, the prefix listed (the probe's time is the
/// store's now), and the probe deleted. Three requests. Deleting the probe is best effort (a
/// store refusing deletions leaves it; readers list only shards): probes older than
/// `LEASE_TTL` that a later call lists are deleted then.
///
/// Errors: `Io` (the store, naming the URL and why: the probe could not be put or the prefix
/// listed), `Invalid` (a bad URL).
pub fn live_recordings(url: &str) -> Result<HashSet<String>> {
    static PROBES: AtomicU64 = AtomicU64::new(0);
    let url = url.trim_end_matches('/');
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let probe =
        format!("{PROBE_PREFIX}{}-{nanos:x}-{}.json", std::process::id(), PROBES.fetch_add(1, Ordering::Relaxed));
    put_bytes(&format!("{url}/{probe}"), Vec::new())?;
    let listed = list_times(url);
    let _ = super::remote::delete(&format!("{url}/{probe}"));
    let listed = listed?;
    let now = listed.iter().find(|(name, _)| *name == probe).map(|(_, at)| *at);
    // The probe not listed (a store that lists late): every lease counts as fresh, so nothing
    // a live recorder may own is taken.
    let now = now.unwrap_or(i64::MIN);
    let ttl = i64::try_from(LEASE_TTL.as_secs()).unwrap_or(i64::MAX);
    for (name, at) in &listed {
        if name.starts_with(PROBE_PREFIX) && *name != probe && now.saturating_sub(*at) >= ttl {
            let _ = super::remote::delete(&format!("{url}/{name}"));
        }
    }
    Ok(fresh(&listed, now, LEASE_TTL))
}

/// The objects directly under the prefix `url` (names) with when each was last put (seconds,
/// by the store's clock).
fn list_times(url: &str) -> Result<Vec<(String, i64)>> {
    let location = locate(url)?;
    let prefix = ObjectPath::from(location.key.as_str());
    count(1, 0);
    let listed = run(&location.store, url, |c| async move { c.list_with_delimiter(Some(&prefix)).await })?;
    Ok(listed
        .objects
        .into_iter()
        .map(|m| (m.location.filename().unwrap_or_default().to_string(), m.last_modified.timestamp()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_table() {
        let a = lease_name(&[0xaa; 16]);
        let b = lease_name(&[0xbb; 16]);
        let (ida, idb) = ("aa".repeat(16), "bb".repeat(16));
        let ttl = Duration::from_secs(60);
        // (leases, now, fresh recordings)
        type Case<'a> = (Vec<(String, i64)>, i64, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            (vec![], 100, vec![]),
            (vec![(a.clone(), 100)], 100, vec![&ida]),
            (vec![(a.clone(), 41)], 100, vec![&ida]),
            (vec![(a.clone(), 40)], 100, vec![]), // exactly the TTL old: stale
            (vec![(a.clone(), 10), (b.clone(), 90)], 100, vec![&idb]),
            (vec![(a.clone(), 130)], 100, vec![&ida]), // renewed while the probe was listed
            (vec![("a.trj".into(), 100), ("trajcore-lease-xyz.json".into(), 100)], 100, vec![]),
            (vec![(a.clone(), 0)], i64::MIN, vec![&ida]), // no clock: everything counts as fresh
        ];
        for (k, (leases, now, want)) in cases.into_iter().enumerate() {
            let want: HashSet<String> = want.into_iter().map(str::to_string).collect();
            assert_eq!(fresh(&leases, now, ttl), want, "case {k}");
        }
    }

    #[test]
    fn lease_names_round_trip() {
        let id = [0x1f; 16];
        assert_eq!(leased_recording(&lease_name(&id)), Some("1f".repeat(16).as_str()));
        for name in ["trajcore-evictions.json", "trajcore-lease-.json", "trajcore-lease-1f.json.tmp"] {
            assert_eq!(leased_recording(name), None, "{name}");
        }
    }
}
