//! Leases: how recorders sharing a store prefix tell a live recording from a stopped one. A
//! directory has the lock a live writer holds on its shard (its process's death lets go of it);
//! a store has no lock. So every recording to a store, bounded or not, holds a lease object in
//! the prefix (`lease_name`): put by its upload thread before any object of its recording goes
//! up, renewed every `LeaseTimes::renew`, deleted when it closes. A lease is fresh while the
//! store's clock says it was renewed less than its `LeaseTimes::ttl` ago (the holder's own, in
//! the lease's name, so recorders with other timings judge it alike): the store's own clock,
//! read as the time of a probe object in the same listing, so no machine's clock is compared
//! with another's. A killed recorder's lease goes stale a ttl after its last renewal; until then
//! its recording counts as live. The decisions (`LeaseTimes::new`, `lease_of`, `fresh`) are pure;
//! the requests (`put`, `delete`, `live_recordings`) need the `remote` feature.

use std::collections::HashSet;
use std::time::Duration;

use crate::error::{Error, Result};

/// How often a live recording renews its lease, by default (`lease_renew_interval`).
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// How long after its last renewal a lease is stale, by default (`lease_ttl`): several
/// renewals, so that a slow store or a failed renewal (retried soon) does not make a live
/// recording look stopped.
pub const LEASE_TTL: Duration = Duration::from_secs(60);
/// The step of the store's clock: an S3 listing's times are whole seconds, so a lease's age as
/// read may exceed its age by up to this.
const CLOCK_STEP: Duration = Duration::from_secs(1);

/// A recording's lease timings (the recorder options `lease_renew_interval` and `lease_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    /// Between renewals.
    pub renew: Duration,
    /// After the last renewal, the lease is stale.
    pub ttl: Duration,
}

impl Default for LeaseTimes {
    fn default() -> Self {
        LeaseTimes { renew: LEASE_RENEW, ttl: LEASE_TTL }
    }
}

impl LeaseTimes {
    /// The timings of the options `lease_renew_interval` and `lease_ttl` (seconds; `None`: the
    /// default). The ttl must cover a failed renewal and the one after it (at least 3 renewal
    /// intervals) and the store clock's step with a second to spare (at least 2 s more than a
    /// renewal interval): a live recorder's lease never reads as stale.
    ///
    /// Errors: `Invalid`, naming the option and the value.
    pub fn new(renew_s: Option<f64>, ttl_s: Option<f64>) -> Result<LeaseTimes> {
        let seconds = |value: Option<f64>, default: Duration, name: &str| match value {
            None => Ok(default),
            Some(s) => Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| Error::Invalid(format!("{name}={s} must be a positive number of seconds"))),
        };
        let renew = seconds(renew_s, LEASE_RENEW, "lease_renew_interval")?;
        let ttl = seconds(ttl_s, LEASE_TTL, "lease_ttl")?;
        let least = renew.saturating_mul(3).max(renew.saturating_add(CLOCK_STEP * 2));
        if ttl < least {
            return Err(Error::Invalid(format!(
                "lease_ttl={} must be at least {} s with lease_renew_interval={} (3 renewal intervals, and 2 s \
                 more than one): a live recorder's lease must stay fresh through a failed renewal and the \
                 store clock's whole seconds",
                ttl.as_secs_f64(),
                least.as_secs_f64(),
                renew.as_secs_f64()
            )));
        }
        Ok(LeaseTimes { renew, ttl })
    }
}

const LEASE_PREFIX: &str = "trajcore-lease-";

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The lease object of the recording `recording_id`, stale `ttl` after it was put (the last
/// part of its key): `trajcore-lease-<id>-<ttl in ms>ms.json`.
pub fn lease_name(recording_id: &[u8; 16], ttl: Duration) -> String {
    format!("{LEASE_PREFIX}{}-{}ms.json", hex(recording_id), ttl.as_millis())
}

/// The recording id (hex) the lease object `name` belongs to and its ttl; `None` for an object
/// that is no lease. A name without its ttl (from before leases had their own) has the default.
pub fn lease_of(name: &str) -> Option<(&str, Duration)> {
    let rest = name.strip_prefix(LEASE_PREFIX)?.strip_suffix(".json")?;
    let (id, ttl) = match rest.split_once('-') {
        Some((id, ms)) => (id, Duration::from_millis(ms.strip_suffix("ms")?.parse().ok()?)),
        None => (rest, LEASE_TTL),
    };
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some((id, ttl))
}

/// The recordings (ids, hex) whose lease among `leases` (object name, when last put, in
/// milliseconds by the store's clock) is fresh at `now` (same clock), each by its own ttl. A
/// lease put after `now` (renewed while the probe was listed) is fresh.
pub fn fresh(leases: &[(String, i64)], now: i64) -> HashSet<String> {
    leases
        .iter()
        .filter_map(|(name, at)| lease_of(name).map(|(id, ttl)| (id, ttl, *at)))
        .filter(|(_, ttl, at)| now.saturating_sub(*at) < i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
        .map(|(id, _, _)| id.to_string())
        .collect()
}

/// The leases among `leases` (as for `fresh`) stale at `now` for at least their ttl again: a
/// killed recorder's, which nobody else deletes. A recorder that renews its lease after so long
/// puts it anew. None without a clock (`now` is `i64::MIN`).
pub fn forgotten(leases: &[(String, i64)], now: i64) -> Vec<&str> {
    leases
        .iter()
        .filter(|(name, at)| {
            lease_of(name).is_some_and(|(_, ttl)| {
                let twice = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).saturating_mul(2);
                now != i64::MIN && now.saturating_sub(*at) >= twice
            })
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

/// Puts (or renews) the lease of `recording_id`, stale `ttl` after, under the prefix `url`.
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid` (a bad URL).
#[cfg(feature = "remote")]
pub fn put(url: &str, recording_id: &[u8; 16], ttl: Duration) -> Result<()> {
    let at = format!("{}/{}", url.trim_end_matches('/'), lease_name(recording_id, ttl));
    let body = format!("{{\"recording\": \"{}\"}}", hex(recording_id));
    io::put_bytes(&at, body.into_bytes())
}

/// Deletes the lease `put` made (gone already: done).
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid`.
#[cfg(feature = "remote")]
pub fn delete(url: &str, recording_id: &[u8; 16], ttl: Duration) -> Result<()> {
    super::remote::delete(&format!("{}/{}", url.trim_end_matches('/'), lease_name(recording_id, ttl)))
}

/// The recordings (ids, hex) under the prefix `url` that hold a fresh lease now, by the store's
/// clock: a probe object of this call is put, the prefix listed (the probe's time is the
/// store's now), and the probe deleted. Three requests. Deleting the probe is best effort (a
/// store refusing deletions leaves it; readers list only shards): probes older than
/// `LEASE_TTL` that a later call lists are deleted then, as are the `forgotten` leases (one
/// request each, once).
///
/// Errors: `Io` (the store, naming the URL and why: the probe could not be put or the prefix
/// listed), `Invalid` (a bad URL).
#[cfg(feature = "remote")]
pub fn live_recordings(url: &str) -> Result<HashSet<String>> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static PROBES: AtomicU64 = AtomicU64::new(0);
    let url = url.trim_end_matches('/');
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let probe =
        format!("{PROBE_PREFIX}{}-{nanos:x}-{}.json", std::process::id(), PROBES.fetch_add(1, Ordering::Relaxed));
    io::put_bytes(&format!("{url}/{probe}"), Vec::new())?;
    let listed = io::list_times(url);
    let _ = super::remote::delete(&format!("{url}/{probe}"));
    let listed = listed?;
    let now = listed.iter().find(|(name, _)| *name == probe).map(|(_, at)| *at);
    // The probe not listed (a store that lists late): every lease counts as fresh, so nothing
    // a live recorder may own is taken.
    let now = now.unwrap_or(i64::MIN);
    let ttl = i64::try_from(LEASE_TTL.as_millis()).unwrap_or(i64::MAX);
    let old_probes = listed
        .iter()
        .filter(|(name, at)| name.starts_with(PROBE_PREFIX) && *name != probe && now.saturating_sub(*at) >= ttl);
    for name in old_probes.map(|(name, _)| name.as_str()).chain(forgotten(&listed, now)) {
        let _ = super::remote::delete(&format!("{url}/{name}"));
    }
    Ok(fresh(&listed, now))
}

#[cfg(feature = "remote")]
const PROBE_PREFIX: &str = "trajcore-clock-";

#[cfg(feature = "remote")]
mod io {
    use object_store::path::Path as ObjectPath;

    use super::super::remote::{count, run};
    use super::super::url::locate;
    use crate::error::Result;

    pub(super) fn put_bytes(url: &str, bytes: Vec<u8>) -> Result<()> {
        let location = locate(url)?;
        let key = ObjectPath::from(location.key.as_str());
        count(1, 0);
        run(&location.store, url, |c| async move { c.put(&key, bytes.into()).await }).map(|_| ())
    }

    /// The objects directly under the prefix `url` (names) with when each was last put
    /// (milliseconds, by the store's clock).
    pub(super) fn list_times(url: &str) -> Result<Vec<(String, i64)>> {
        let location = locate(url)?;
        let prefix = ObjectPath::from(location.key.as_str());
        count(1, 0);
        let listed = run(&location.store, url, |c| async move { c.list_with_delimiter(Some(&prefix)).await })?;
        Ok(listed
            .objects
            .into_iter()
            .map(|m| (m.location.filename().unwrap_or_default().to_string(), m.last_modified.timestamp_millis()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_table() {
        let (ida, idb) = ("aa".repeat(16), "bb".repeat(16));
        let a = lease_name(&[0xaa; 16], LEASE_TTL);
        let b = lease_name(&[0xbb; 16], LEASE_TTL);
        let short = lease_name(&[0xbb; 16], Duration::from_millis(2500));
        let old = format!("trajcore-lease-{ida}.json"); // no ttl in its name: the default
        let s = 1000; // ms
                      // (leases, now, fresh recordings)
        type Case<'a> = (Vec<(String, i64)>, i64, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            (vec![], 100 * s, vec![]),
            (vec![(a.clone(), 100 * s)], 100 * s, vec![&ida]),
            (vec![(a.clone(), 41 * s)], 100 * s, vec![&ida]),
            (vec![(a.clone(), 40 * s)], 100 * s, vec![]), // exactly the ttl old: stale
            (vec![(a.clone(), 10 * s), (b.clone(), 90 * s)], 100 * s, vec![&idb]),
            (vec![(a.clone(), 130 * s)], 100 * s, vec![&ida]), // renewed while the probe was listed
            (vec![("a.trj".into(), 100 * s), ("trajcore-lease-xyz.json".into(), 100 * s)], 100 * s, vec![]),
            (vec![(a.clone(), 0)], i64::MIN, vec![&ida]), // no clock: everything counts as fresh
            // Each lease by its own ttl: a short one goes stale while a default one is fresh.
            (vec![(a.clone(), 97 * s), (short.clone(), 97 * s)], 100 * s, vec![&ida]),
            (vec![(short.clone(), 98 * s)], 100 * s, vec![&idb]),
            (vec![(old.clone(), 41 * s)], 100 * s, vec![&ida]),
            (vec![(old, 40 * s)], 100 * s, vec![]),
        ];
        for (k, (leases, now, want)) in cases.into_iter().enumerate() {
            let want: HashSet<String> = want.into_iter().map(str::to_string).collect();
            assert_eq!(fresh(&leases, now), want, "case {k}");
        }
    }

    #[test]
    fn forgotten_table() {
        let a = lease_name(&[0xaa; 16], LEASE_TTL);
        let short = lease_name(&[0xbb; 16], Duration::from_millis(2500));
        let s = 1000; // ms
                      // (leases, now, forgotten)
        type Case = (Vec<(String, i64)>, i64, Vec<String>);
        let cases: Vec<Case> = vec![
            (vec![(a.clone(), 100 * s)], 100 * s, vec![]),
            (vec![(a.clone(), 40 * s)], 100 * s, vec![]), // stale, not yet for twice its ttl
            (vec![(a.clone(), -20 * s + 1)], 100 * s, vec![]),
            (vec![(a.clone(), -20 * s)], 100 * s, vec![a.clone()]),
            (vec![(a.clone(), 90 * s), (short.clone(), 95 * s)], 100 * s, vec![short.clone()]),
            (vec![("a.trj".into(), 0), ("trajcore-clock-1.json".into(), 0)], 100 * s, vec![]),
            (vec![(a.clone(), 0)], i64::MIN, vec![]), // no clock: nothing is stale
        ];
        for (k, (leases, now, want)) in cases.into_iter().enumerate() {
            assert_eq!(forgotten(&leases, now), want, "case {k}");
        }
    }

    #[test]
    fn lease_names_round_trip() {
        let id = [0x1f; 16];
        for ttl in [LEASE_TTL, Duration::from_millis(2500), Duration::from_secs(86_400)] {
            assert_eq!(lease_of(&lease_name(&id, ttl)), Some(("1f".repeat(16).as_str(), ttl)));
        }
        for name in [
            "trajcore-evictions.json",
            "trajcore-lease-.json",
            "trajcore-lease-1f.json.tmp",
            &format!("trajcore-lease-{}-.json", "1f".repeat(16)),
            &format!("trajcore-lease-{}-12.json", "1f".repeat(16)),
            &format!("trajcore-lease-{}-xms.json", "1f".repeat(16)),
        ] {
            assert_eq!(lease_of(name), None, "{name}");
        }
    }

    #[test]
    fn lease_times_table() {
        let secs = Duration::from_secs_f64;
        // (lease_renew_interval, lease_ttl, the timings or the option the error names)
        type Case = (Option<f64>, Option<f64>, std::result::Result<(f64, f64), &'static str>);
        let cases: &[Case] = &[
            (None, None, Ok((10.0, 60.0))),
            (Some(0.5), Some(2.5), Ok((0.5, 2.5))),
            (Some(0.5), Some(2.4), Err("lease_ttl=2.4")), // less than 2 s more than a renewal
            (Some(10.0), Some(30.0), Ok((10.0, 30.0))),
            (Some(10.0), Some(29.0), Err("lease_ttl=29")), // less than 3 renewals
            (Some(30.0), None, Err("lease_ttl=60")),       // the default ttl no longer covers it
            (None, Some(5.0), Err("lease_ttl=5")),
            (Some(0.0), None, Err("lease_renew_interval=0")),
            (Some(-1.0), None, Err("lease_renew_interval=-1")),
            (Some(f64::NAN), None, Err("lease_renew_interval=NaN")),
            (Some(1.0), Some(f64::INFINITY), Err("lease_ttl=inf")),
            (Some(1.0), Some(1e300), Err("lease_ttl=1000")),
        ];
        for &(renew, ttl, want) in cases {
            match (LeaseTimes::new(renew, ttl), want) {
                (Ok(got), Ok((r, t))) => assert_eq!(got, LeaseTimes { renew: secs(r), ttl: secs(t) }),
                (Err(e), Err(name)) => assert!(e.to_string().contains(name), "{renew:?} {ttl:?}: {e}"),
                (got, want) => panic!("{renew:?} {ttl:?}: {got:?}, not {want:?}"),
            }
        }
    }
}
