//! A shard still being written, in object storage: its whole records go up as it grows, as
//! consecutive *segment* objects, so a recorder killed mid-shard loses from the store only what
//! it wrote since the last upload (about a flush interval), and `recover_segments` makes a
//! shard of them afterwards.
//!
//! - A segment is the bytes `[from, to)` of the shard file, cut at record boundaries (`to` is
//!   where the last record wholly in the file ends: `whole_records_end` hops the record
//!   headers), stored as `<shard key>.open/<from, 20 digits>`. A prefix listing shows the
//!   `.open/` folder as a common prefix, never as a shard: nothing partial is listed as one.
//!   Naming a segment by its offset makes an upload retried after a failure land on the same
//!   key, and lets `recover_segments` check the segments follow each other.
//! - Each byte goes up once as a segment and once in the sealed shard (about twice the bytes
//!   recorded in all), never a growing prefix again: the cost is linear in the recording.
//! - A segment streams from the file `PART_BYTES` at a time (`put_file`): one part in memory
//!   whatever the segment's size.
//! - Every request is the store client's (`remote::run`): timeouts, and retries of transient
//!   failures with backoff, so no call waits forever.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

use object_store::path::Path as ObjectPath;

use super::remote::run;
use super::url::{locate, Location};
use crate::error::{Error, Result};
use crate::format::header::HEADER_LEN;
use crate::format::record::{RecordHeader, RECORD_HEADER_LEN};
use crate::format::SHARD_EXTENSION;

/// What one request of an upload carries at most: a file goes up a part at a time, so an
/// upload holds one part in memory whatever its size (S3's parts are 5 MiB at least).
const PART_BYTES: usize = 8 << 20;

/// What follows a shard's key in the keys of its segments.
const OPEN_SUFFIX: &str = ".open";

/// Where the last record wholly within the first `len` bytes ends, hopping record headers from
/// `from` (a record boundary; 0: the file's start, its header first). `read_at` reads bytes at an
/// offset (fewer at the end). A header that does not decode ends the hop: a live writer appends
/// whole headers, so that is where its writing stops (or damage, which recovery reports).
pub fn whole_records_end(mut read_at: impl FnMut(u64, &mut [u8]) -> usize, from: u64, len: u64) -> u64 {
    let mut at = from.max(HEADER_LEN as u64);
    if at > len {
        return from;
    }
    let mut head = [0u8; RECORD_HEADER_LEN];
    while at + RECORD_HEADER_LEN as u64 <= len {
        if read_at(at, &mut head) < RECORD_HEADER_LEN {
            break;
        }
        let Some(end) = RecordHeader::decode(&head).and_then(|h| at.checked_add(h.total_len())) else { break };
        if end > len {
            break;
        }
        at = end;
    }
    at
}

/// A file's identity (device, inode): a shard the writer compacts is replaced by a rename, and
/// segments of two files must not be mixed.
fn identity(file: &File, path: &Path) -> Result<u64> {
    let (dev, ino) = crate::file_identity::identity_of(&file.metadata().map_err(|e| Error::io(path, e))?);
    Ok(dev.rotate_left(32) ^ ino)
}

/// Uploads the shard file `local`'s whole records past `from` (where its previous segment
/// ended; 0 at first) as the segment `<url>.open/<from>`, `url` being the shard's object.
/// `identity` is the file's from the previous call (0 at first): when the file is another now
/// (a compaction replaced it, which the writer does only to a finished shard), nothing goes up.
/// Returns where the records uploaded end, and the file's identity.
///
/// Errors: `Io` (reading the file, or the store, naming the URL and why), `Invalid` (a bad URL).
pub fn put_segment(local: &Path, identity_before: u64, from: u64, url: &str) -> Result<(u64, u64)> {
    let mut file = File::open(local).map_err(|e| Error::io(local, e))?;
    let id = identity(&file, local)?;
    if identity_before != 0 && identity_before != id {
        return Ok((from, id));
    }
    let len = file.metadata().map_err(|e| Error::io(local, e))?.len();
    let end = whole_records_end(|at, buf| file.read_at(buf, at).unwrap_or(0), from, len);
    if end > from {
        file.seek(SeekFrom::Start(from)).map_err(|e| Error::io(local, e))?;
        put_file(&mut file, end - from, local, &segment_url(url, from))?;
    }
    Ok((end, id))
}

fn segment_url(shard_url: &str, from: u64) -> String {
    format!("{shard_url}{OPEN_SUFFIX}/{from:020}")
}

/// Puts `len` bytes of `file` from its position (fewer if it ends first) as the object `url`:
/// one request, or a multipart upload of `PART_BYTES` parts completed only once every part is
/// in (and aborted when one fails), so the object appears whole or not at all. `local` names
/// the file in errors.
pub(crate) fn put_file(file: &mut File, len: u64, local: &Path, url: &str) -> Result<()> {
    let location = locate(url)?;
    let key = ObjectPath::from(location.key.as_str());
    let mut left = len;
    let mut part = |file: &mut File| -> Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(PART_BYTES.min(left as usize));
        file.take((PART_BYTES as u64).min(left)).read_to_end(&mut buf).map_err(|e| Error::io(local, e))?;
        left -= buf.len() as u64;
        Ok(buf)
    };
    let first = part(file)?;
    let store = &location.store;
    if first.len() < PART_BYTES {
        super::remote::count(1, 0);
        let key = &key;
        return run(store, url, |c| async move { c.put(key, first.into()).await }).map(|_| ());
    }
    let mut upload = run(store, url, |c| async move { c.put_multipart(&key).await })?;
    super::remote::count(1, 0);
    let mut next = first;
    let done = loop {
        if next.is_empty() {
            super::remote::count(1, 0);
            break run(store, url, |_| upload.complete());
        }
        super::remote::count(1, 0);
        if let Err(e) = run(store, url, |_| upload.put_part(next.into())) {
            break Err(e);
        }
        next = match part(file) {
            Ok(next) => next,
            Err(e) => break Err(e),
        };
    };
    if done.is_err() {
        let _ = run(store, url, |_| upload.abort()); // nothing partial stays behind
    }
    done.map(|_| ())
}

/// Deletes in flight at once: a long recording's shard has a segment per flush interval, and
/// one at a time they would hold up the next segments for as many round trips.
const PARALLEL_DELETES: usize = 16;

/// Deletes the segments of the shard object `url` (once the shard is up whole).
///
/// Errors: `Io` (the store, naming the URL and why), `Invalid` (a bad URL).
pub fn remove_segments(url: &str) -> Result<()> {
    let folder = locate(&format!("{url}{OPEN_SUFFIX}"))?;
    let listed = super::remote::list(&folder, url)?;
    for batch in listed.chunks(PARALLEL_DELETES) {
        let keys: Vec<ObjectPath> = batch.iter().map(|(s, _, _)| ObjectPath::from(s.key.as_str())).collect();
        super::remote::count(keys.len() as u64, 0);
        run(&folder.store, &folder.url(), |c| async move {
            let mut set = tokio::task::JoinSet::new();
            for key in keys {
                let c = c.clone();
                set.spawn(async move { c.delete(&key).await });
            }
            while let Some(done) = set.join_next().await {
                done.map_err(|e| object_store::Error::Generic { store: "delete", source: Box::new(e) })??;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// What `recover_segments` did with the segments of one shard.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rejoined {
    /// The shard's object.
    pub url: String,
    pub segments: usize,
    /// Bytes of the shard made of them (0 when the shard was already up whole).
    pub bytes: u64,
    /// The shard was already up whole (its recorder was killed before removing them).
    pub already_up: bool,
    /// Segments left out: one that does not start where the one before it ended (a gap).
    pub left_out: usize,
}

/// Turns the segments a killed recorder left under the dataset prefix `url` into shards: for
/// each shard with segments (and not already up whole), the segments that follow each other
/// from the start, joined into a file in `staging` (streamed: `PART_BYTES` at a time) and put as
/// the shard object; then the segments are removed. The shard holds every record that was
/// wholly uploaded and ends without its End record, as a killed local recorder's last shard
/// does: readers read it as such (and `verify` finds it intact), episodes running over a
/// rollover from the recording's sealed shards included. Run again after it was stopped, it
/// finishes what it started (keys, and the shard's bytes, are the same). Shards `live` names
/// (asked with the names listed, after the listing: which belong to a recorder still writing
/// them, see `leases`) are left alone.
///
/// Errors: `Io` (the store or the staging files, naming the URL or path and why), `Invalid`,
/// those of `live`.
pub fn recover_segments(
    url: &str,
    staging: &Path,
    live: &dyn Fn(&[String]) -> Result<Vec<bool>>,
) -> Result<Vec<Rejoined>> {
    let prefix = locate(url)?;
    let dir = ObjectPath::from(prefix.key.as_str());
    let listed = run(&prefix.store, url, |c| async move { c.list_with_delimiter(Some(&dir)).await })?;
    super::remote::count(1, 0);
    let suffix = format!(".{SHARD_EXTENSION}{OPEN_SUFFIX}");
    let mut open: Vec<String> =
        listed.common_prefixes.iter().map(|p| p.to_string()).filter(|k| k.ends_with(&suffix)).collect();
    open.sort();
    if !open.is_empty() {
        let names: Vec<String> = open
            .iter()
            .map(|f| f[..f.len() - OPEN_SUFFIX.len()].rsplit('/').next().unwrap_or_default().to_string())
            .collect();
        let mut skip = live(&names)?.into_iter();
        open.retain(|_| !skip.next().unwrap_or(true));
    }
    let shards: Vec<String> = listed.objects.iter().map(|m| m.location.to_string()).collect();
    let mut out = Vec::new();
    for folder in open {
        let shard = Location { store: prefix.store.clone(), key: folder[..folder.len() - OPEN_SUFFIX.len()].into() };
        let shard_url = shard.url();
        let segments = super::remote::list(&Location { store: prefix.store.clone(), key: folder }, url)?;
        let mut done =
            Rejoined { url: shard_url.clone(), segments: segments.len(), bytes: 0, already_up: false, left_out: 0 };
        if shards.contains(&shard.key) {
            done.already_up = true;
        } else {
            let name = shard.key.rsplit('/').next().unwrap_or(&shard.key);
            let local = staging.join(name);
            let (bytes, left_out) = join(&segments, &local)?;
            let mut file = File::open(&local).map_err(|e| Error::io(&local, e))?;
            put_file(&mut file, bytes, &local, &shard_url)?;
            std::fs::remove_file(&local).map_err(|e| Error::io(&local, e))?;
            (done.bytes, done.left_out) = (bytes, left_out);
        }
        remove_segments(&shard_url)?;
        out.push(done);
    }
    Ok(out)
}

/// Writes the segments that follow each other from offset 0 into the file `local`; returns its
/// size and how many segments were left out past a gap.
fn join(segments: &[(Location, u64, Option<String>)], local: &Path) -> Result<(u64, usize)> {
    use std::io::Write;
    let mut file = File::create(local).map_err(|e| Error::io(local, e))?;
    let mut at = 0u64;
    for (k, (segment, size, _)) in segments.iter().enumerate() {
        let from = segment.key.rsplit('/').next().and_then(|n| n.parse::<u64>().ok());
        if from != Some(at) {
            return Ok((at, segments.len() - k));
        }
        let key = ObjectPath::from(segment.key.as_str());
        let mut got = 0u64;
        while got < *size {
            let range = got..(*size).min(got + PART_BYTES as u64);
            let key = &key;
            let bytes = run(&segment.store, &segment.url(), |c| async move { c.get_range(key, range).await })?;
            super::remote::count(1, 0);
            file.write_all(&bytes).map_err(|e| Error::io(local, e))?;
            got += bytes.len() as u64;
        }
        at += size;
    }
    file.sync_all().map_err(|e| Error::io(local, e))?;
    Ok((at, 0))
}

/// Puts the local file `local` as the object `url`, whole or not at all (see
/// `segments::put_file`: one part in memory at a time). Counted in `stats`.
///
/// Errors: `Io` (reading the file, or the store, naming the URL and why), `Invalid` (a bad URL).
pub fn upload(local: &Path, url: &str) -> Result<()> {
    let mut file = std::fs::File::open(local).map_err(|e| Error::io(local, e))?;
    put_file(&mut file, u64::MAX, local, url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::RecordKind;

    /// A file header's worth of bytes, then records of the given payload lengths.
    fn shard(payloads: &[usize]) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = vec![7u8; HEADER_LEN];
        let mut ends = Vec::new();
        for &n in payloads {
            let payload = vec![1u8; n];
            let header = RecordHeader::new(RecordKind::Chunks, &payload);
            let start = bytes.len();
            bytes.extend_from_slice(&header.encode());
            bytes.extend_from_slice(&payload);
            bytes.resize(start + header.total_len() as usize, 0); // padding to the next record
            ends.push(bytes.len() as u64);
        }
        (bytes, ends)
    }

    #[test]
    fn segments_end_at_the_last_whole_record() {
        let (bytes, ends) = shard(&[10, 100, 3]);
        let read = |at: u64, buf: &mut [u8]| {
            let at = (at as usize).min(bytes.len());
            let n = buf.len().min(bytes.len() - at);
            buf[..n].copy_from_slice(&bytes[at..at + n]);
            n
        };
        let h = HEADER_LEN as u64;
        // (from, bytes in the file, where the whole records end)
        let cases = [
            (0, 0, 0),                   // not even a header: nothing
            (0, h, h),                   // the header alone
            (0, h + 10, h),              // a record header cut short
            (0, ends[0] - 1, h),         // a record cut short
            (0, ends[0], ends[0]),       // one record
            (0, ends[1] + 5, ends[1]),   // two, and part of the third's header
            (ends[0], ends[2], ends[2]), // from a boundary to the end
            (ends[2], ends[2], ends[2]), // nothing new
        ];
        for (from, len, want) in cases {
            assert_eq!(whole_records_end(read, from, len), want, "from {from}, {len} bytes");
        }
        // Zeros where the next header should be (space the data never reached) end the hop.
        let mut zeros = bytes.clone();
        zeros.truncate(ends[0] as usize);
        zeros.resize(ends[2] as usize, 0);
        let read_zeros = |at: u64, buf: &mut [u8]| {
            let at = at as usize;
            let n = buf.len().min(zeros.len() - at);
            buf[..n].copy_from_slice(&zeros[at..at + n]);
            n
        };
        assert_eq!(whole_records_end(read_zeros, 0, ends[2]), ends[0]);
    }

    #[test]
    fn segment_keys_sort_by_offset() {
        let a = segment_url("s3://b/run/x.trj", 9);
        let b = segment_url("s3://b/run/x.trj", 10);
        assert_eq!(a, "s3://b/run/x.trj.open/00000000000000000009");
        assert!(a < b);
    }
}
