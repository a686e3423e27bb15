//! Finding a dataset's shards, in a local directory or under an object storage prefix, and what
//! opening a shard in a store fetches ahead (so that the record hops of a scan find their bytes
//! in the cache instead of paying a round trip each).
//!
//! A prefix is listed with one request per page (objects directly under it: like `read_dir`,
//! subfolders are not datasets' shards); the sizes and entity tags the listing gives are kept,
//! so opening each shard needs no request of its own to learn them.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::objstore::{remote, url};

use crate::error::{Error, Result};
use crate::format::chunks::HEAD_LEN;
use crate::format::header::HEADER_LEN;
use crate::format::index::IndexDelta;
use crate::format::record::{RecordKind, RECORD_HEADER_LEN};
use crate::format::ANNOTATION_EXTENSION;
use crate::objstore::remote::RemoteObject;
use crate::reader::SHARD_EXTENSION;

/// What opening a shard fetches from its end: the End record and, in a shard of ordinary size,
/// the Index records before it (a closed shard's last Index record is written just before its
/// End record).
const TAIL_BYTES: u64 = 256 << 10;
/// What is fetched ahead at each record an index lists: its header and, for most Meta, Column
/// and Episode records, the whole record (a larger one costs a second request when read).
const PROBE_BYTES: u64 = 4 << 10;

/// Sizes and entity tags from listings, by URL.
type Listed = HashMap<String, (u64, Option<String>)>;
static LISTED: Mutex<Option<Listed>> = Mutex::new(None);

/// Whether `path` is a dataset directory (or a store prefix) rather than one shard.
///
/// Errors: `NotFound` (no such local path), `Io`.
pub(crate) fn is_dir(path: &Path) -> Result<bool> {
    match url::url_of(path) {
        Some(url) => Ok(!is_shard_name(url)),
        None => Ok(fs::metadata(path).map_err(|e| Error::io(path, e))?.is_dir()),
    }
}

fn is_shard_name(name: &str) -> bool {
    name.rsplit('/').next().is_some_and(|n| n.ends_with(&format!(".{SHARD_EXTENSION}")))
}

/// The shards and annotation sidecars under the store prefix `url`, as URLs in key order (with
/// their sizes kept for `object`), and the version (name, size and entity tag of each) of the
/// prefix's eviction log objects, if the listing holds any: bounded recordings wrote there
/// (each its own log: a log added or changed changes the version).
///
/// Errors: `Invalid` (a bad URL), `Io` (the listing failed: the message names the URL and why).
pub(crate) fn shards_under(url: &str) -> Result<(Vec<PathBuf>, Option<String>)> {
    let location = url::locate(url)?;
    let mut found = Vec::new();
    let mut eviction_log = None;
    let listed = remote::list(&location, url)?;
    let mut memo = LISTED.lock().unwrap_or_else(|p| p.into_inner());
    let memo = memo.get_or_insert_with(HashMap::new);
    for (object, size, e_tag) in listed {
        let name = object.key.rsplit('/').next().unwrap_or_default();
        if crate::writer::files::capacity::is_eviction_log(name) {
            let version: &mut String = eviction_log.get_or_insert_with(String::new);
            version.push_str(&format!("{name} {size} {};", e_tag.as_deref().unwrap_or("")));
            continue;
        }
        // Annotation sidecars are read from a store too (`crate::annotation`).
        if is_shard_name(&object.key) || object.key.ends_with(&format!(".{ANNOTATION_EXTENSION}")) {
            let url = object.url();
            memo.insert(url.clone(), (size, e_tag));
            found.push(PathBuf::from(url));
        }
    }
    Ok((found, eviction_log))
}

/// The object at `url`: its size from the listing that found it, else asked of the store.
pub(crate) fn object(url: &str) -> Result<RemoteObject> {
    let listed = LISTED.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|m| m.get(url).cloned());
    match listed {
        Some((size, e_tag)) => RemoteObject::listed(url::locate(url)?, size, e_tag.as_deref()),
        None => RemoteObject::open(url),
    }
}

/// What opening a shard of `len` bytes fetches: its header and its tail.
pub(crate) fn opening_ranges(len: u64) -> Vec<Range<u64>> {
    vec![0..(HEADER_LEN as u64).min(len), len.saturating_sub(TAIL_BYTES)..len]
}

/// What taking in `deltas` reads, fetched ahead: the start of every Meta, Column, Episode and
/// unknown-kind record they list (not the Episode records `copied`, in the cache already: see
/// `opening_copies`), and of a Chunks record only when a chunk in it has no checksum of its own.
pub(crate) fn indexed_ranges(deltas: &[IndexDelta], copied: &HashSet<u64>) -> Vec<Range<u64>> {
    let chunks_head = (RECORD_HEADER_LEN + HEAD_LEN) as u64;
    let unread = [RecordKind::Timelog as u32, RecordKind::OpeningCopies as u32];
    let mut ranges: Vec<Range<u64>> = Vec::new();
    for delta in deltas {
        let episodes = delta.episode_records.iter().copied().filter(|at| !copied.contains(at));
        let others = delta.other_records.iter().filter(|o| !unread.contains(&o.kind)).map(|o| o.offset);
        let others = others.chain(episodes);
        ranges.extend(others.map(|at| at..at.saturating_add(PROBE_BYTES)));
        // Opening reads the head of a Chunks record only for chunks without their own checksum
        // (format 1.0: see `Shard::apply_index`).
        let heads = delta.chunks.iter().filter(|c| !c.has_checksum());
        ranges.extend(heads.map(|c| c.record_offset..c.record_offset.saturating_add(chunks_head)));
    }
    ranges.sort_by_key(|r| (r.start, r.end));
    ranges.dedup();
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::index::OtherRecord;

    #[test]
    fn shard_names_and_prefixes() {
        let cases: &[(&str, bool)] = &[
            ("s3://b/run/a.trj", false),
            ("s3://b/run", true),
            ("s3://b/run/", true),
            ("https://h/x/shard-0001.trj", false),
            ("s3://b/run.trj/", true),
        ];
        for &(url, dir) in cases {
            assert_eq!(is_dir(Path::new(url)).unwrap(), dir, "{url}");
        }
    }

    #[test]
    fn opening_fetches_the_header_and_the_tail() {
        let h = HEADER_LEN as u64;
        assert_eq!(opening_ranges(1 << 30), vec![0..h, (1 << 30) - TAIL_BYTES..1 << 30]);
        assert_eq!(opening_ranges(100), vec![0..h.min(100), 0..100]);
    }

    #[test]
    fn every_listed_record_is_probed_once() {
        let delta = IndexDelta {
            prev_index: 0,
            other_records: vec![OtherRecord { kind: 1, offset: 64 }],
            chunks: Vec::new(),
            episode_records: vec![64, 9000],
        };
        let both = vec![64..64 + PROBE_BYTES, 9000..9000 + PROBE_BYTES];
        assert_eq!(indexed_ranges(std::slice::from_ref(&delta), &HashSet::new()), both);
        // An Episode record whose copy is in the cache is not fetched again.
        assert_eq!(indexed_ranges(&[delta], &HashSet::from([9000])), vec![64..64 + PROBE_BYTES]);
    }
}
