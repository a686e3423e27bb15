//! One shard file being written: header, framed records, the running index, rollover naming
//! and durability. Knows nothing about episodes or lanes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::format::chunks::{self, ChunkRef, PendingChunk};
use crate::format::copies;
use crate::format::episode::{self, EpisodeSummary};
use crate::format::header::{FileHeader, HEADER_LEN, PACKED_TABLES};
use crate::format::index::{IndexDelta, OtherRecord, NO_PREVIOUS};
use crate::format::record::{padding_after, RecordHeader, RecordKind, PACKED_TABLE};
use crate::format::DATA_ALIGN;
use crate::format::SHARD_EXTENSION;
use crate::schema::ColumnSpec;
use crate::writer::config::Durability;

/// The most episodes an Episode record holds: a damaged record loses its episodes, so a fast
/// recording (tens of thousands of short episodes a second) must not batch them all in one.
/// 512 CartPole episodes are 0.7% of the README's dataset; with 4,096-row chunks, the dataset
/// grew by 0.2% (`benches/test_damage_locality.py` has the damage figures).
pub const EPISODES_PER_RECORD: usize = 512;

pub struct ShardWriter {
    path: PathBuf,
    file: File,
    /// File offset of the next record.
    offset: u64,
    /// Bytes of the current batch not yet handed to the OS.
    pending: Pending,
    index: IndexDelta,
    bytes_at_last_index: u64,
    durability: Durability,
    last_sync: Instant,
    /// The file's identity when created, to notice it being deleted or replaced under us.
    identity: Option<(u64, u64)>,
    shard_seq: u64,
    /// (offset, bytes) of each Episode and Index record written: what opening the closed shard
    /// reads one by one, copied at close (`format::copies`).
    opening_spans: Vec<(u64, u64)>,
}

/// (device, inode) of an open file or a path.
#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

impl ShardWriter {
    /// Creates the shard file and writes its header, Meta record and Column records.
    pub fn create(
        dir: &Path,
        recording_id: [u8; 16],
        shard_seq: u64,
        meta_json: &[u8],
        columns: &[ColumnSpec],
        durability: Durability,
    ) -> Result<Self> {
        let created_ns = now_ns();
        let path = dir.join(shard_name(created_ns, &recording_id, shard_seq));
        // Its Chunks and Index records may pack their tables: readers that cannot unpack them
        // refuse the file rather than leave those records out.
        let header =
            FileHeader { required_flags: PACKED_TABLES, ..FileHeader::new(recording_id, shard_seq, created_ns) };
        let mut shard = Self::create_at(path, &header, durability)?;
        let meta = shard.append(RecordKind::Meta, meta_json);
        shard.index.other_records.push(OtherRecord { kind: RecordKind::Meta as u32, offset: meta });
        for column in columns {
            shard.add_column(column)?;
        }
        shard.flush_to_os()?;
        Ok(shard)
    }

    /// A new file at `path` (which must not exist) holding `header` so far.
    pub fn create_at(path: PathBuf, header: &FileHeader, durability: Durability) -> Result<Self> {
        // create_new: never clobber a file someone may be reading.
        // Read too: the Episode records are read back for their copies at close.
        let file =
            OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(|e| Error::io(&path, e))?;
        lock_while_writing(&file);
        let identity = file.metadata().ok().as_ref().and_then(identity);
        let mut shard = ShardWriter {
            path,
            file,
            offset: 0,
            pending: Pending { bytes: Vec::with_capacity(1 << 20), kept: Vec::new() },
            index: IndexDelta { prev_index: NO_PREVIOUS, ..Default::default() },
            bytes_at_last_index: 0,
            durability,
            last_sync: Instant::now(),
            identity,
            shard_seq: header.shard_seq,
            opening_spans: Vec::new(),
        };
        shard.pending.bytes.extend_from_slice(&header.encode());
        shard.offset = HEADER_LEN as u64;
        Ok(shard)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn shard_seq(&self) -> u64 {
        self.shard_seq
    }

    /// Fails if the file's name no longer leads to the file being written (deleted, or replaced
    /// by another file): everything written from now on would be lost without a word.
    pub fn check_still_there(&self) -> Result<()> {
        let Some(expected) = self.identity else { return Ok(()) };
        let now = std::fs::metadata(&self.path).ok().as_ref().and_then(identity);
        if now != Some(expected) {
            return Err(Error::WriterStopped(format!(
                "{}: the shard file was deleted or replaced while recording (what it held is gone with it)",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Bytes in the file once pending bytes are written.
    pub fn size(&self) -> u64 {
        self.offset
    }

    pub fn add_column(&mut self, column: &ColumnSpec) -> Result<()> {
        let json = serde_json::to_vec(column).map_err(|e| Error::Invalid(format!("column spec: {e}")))?;
        let at = self.append(RecordKind::Column, &json);
        self.index.other_records.push(OtherRecord { kind: RecordKind::Column as u32, offset: at });
        Ok(())
    }

    /// A Timelog record of `samples` (listed by the index like Meta and Column records).
    pub fn append_timelog(&mut self, samples: &[crate::format::timelog::Sample]) {
        if samples.is_empty() {
            return;
        }
        let at = self.append(RecordKind::Timelog, &crate::format::timelog::encode(samples));
        self.index.other_records.push(OtherRecord { kind: RecordKind::Timelog as u32, offset: at });
    }

    /// One Chunks record of `chunks`, built in place: the record header (one checksum over the
    /// parts) and the table go into the pending bytes, each chunk's data stays in the buffer it
    /// was sealed in (see `Pending`).
    pub fn append_chunks(&mut self, chunks: Vec<PendingChunk>) -> Vec<ChunkRef> {
        if chunks.is_empty() {
            return Vec::new();
        }
        let table = chunks::table(self.offset, &chunks);
        let gaps: Vec<usize> = chunks::gaps(self.offset, table.head.len(), &table.refs).collect();
        let zeros = [0u8; DATA_ALIGN as usize];
        let data = chunks.iter().zip(&gaps).flat_map(|(c, &gap)| [&zeros[..gap], c.data.as_slice()]);
        let parts = std::iter::once(table.head.as_slice()).chain(data).chain(std::iter::once(table.tail.as_slice()));
        let mut header = RecordHeader::of_parts(RecordKind::Chunks, parts);
        if table.packed {
            header = header.requiring(PACKED_TABLE);
        }
        let bytes = &mut self.pending.bytes;
        bytes.extend_from_slice(&header.encode());
        bytes.extend_from_slice(&table.head);
        for (chunk, gap) in chunks.into_iter().zip(gaps) {
            self.pending.bytes.resize(self.pending.bytes.len() + gap, 0);
            self.pending.push(chunk.data);
        }
        let bytes = &mut self.pending.bytes;
        bytes.extend_from_slice(&table.tail);
        bytes.resize(bytes.len() + padding_after(header.payload_len), 0);
        self.take_offset(&header);
        self.index.chunks.extend_from_slice(&table.refs);
        table.refs
    }

    /// Episode records for a batch of episodes (summary, metadata JSON, metrics), in order, at
    /// most `EPISODES_PER_RECORD` a record.
    pub fn append_episodes(&mut self, batch: &[(EpisodeSummary, Vec<u8>, Vec<u8>)]) {
        for part in batch.chunks(EPISODES_PER_RECORD) {
            let items: Vec<episode::EpisodeItem> =
                part.iter().map(|(s, m, x)| (s.clone(), m.as_slice(), x.as_slice())).collect();
            let payload = episode::encode_batch(&items);
            self.append_episode_record(&payload);
        }
    }

    /// Appends a record of another shard as it was (Meta, Column, Timelog or Episode: records
    /// holding no file offsets), listed by the index like the writer's own.
    pub fn copy_record(&mut self, kind: RecordKind, payload: &[u8]) {
        match kind {
            RecordKind::Episode => self.append_episode_record(payload),
            _ => {
                let at = self.append(kind, payload);
                self.index.other_records.push(OtherRecord { kind: kind as u32, offset: at });
            }
        }
    }

    fn append_episode_record(&mut self, payload: &[u8]) {
        let at = self.append(RecordKind::Episode, payload);
        self.index.episode_records.push(at);
        self.opening_spans.push((at, self.offset - at));
    }

    /// The Opening Copies record (`format::copies`), when the shard has enough Episode and Index
    /// records for it to spare a store's reader requests, read back from the file (they were
    /// written whole: nothing is kept in memory while recording).
    fn append_opening_copies(&mut self) -> Result<()> {
        let bytes: u64 = self.opening_spans.iter().map(|s| s.1).sum();
        if self.opening_spans.len() < copies::COPIES_FROM_RECORDS || bytes > copies::COPIES_MAX_BYTES {
            return Ok(());
        }
        self.flush_to_os()?;
        let mut payload = copies::table(&self.opening_spans);
        let mut at = payload.len();
        payload.resize(at + bytes as usize, 0);
        for &(offset, len) in &self.opening_spans {
            let into = &mut payload[at..at + len as usize];
            std::os::unix::fs::FileExt::read_exact_at(&self.file, into, offset)
                .map_err(|e| Error::io(&self.path, e))?;
            at += len as usize;
        }
        let copies_at = self.append_owned(RecordKind::OpeningCopies, payload);
        self.index.other_records.push(OtherRecord { kind: RecordKind::OpeningCopies as u32, offset: copies_at });
        Ok(())
    }

    /// Writes an Index record when enough has been written since the last one, so that a reader
    /// recovering this file after a crash reads indexes instead of every record.
    pub fn maybe_checkpoint(&mut self, interval: u64) {
        if self.offset - self.bytes_at_last_index >= interval && !self.index.is_empty() {
            self.write_index();
        }
    }

    fn write_index(&mut self) -> u64 {
        let (payload, packed) = self.index.encode();
        let at = self.append_requiring(RecordKind::Index, &payload, if packed { PACKED_TABLE } else { 0 });
        self.opening_spans.push((at, self.offset - at));
        self.index = IndexDelta { prev_index: at, ..Default::default() };
        self.bytes_at_last_index = self.offset;
        at
    }

    /// Hands the pending bytes to the OS, and syncs them to disk if the durability asks for it.
    pub fn flush_to_os(&mut self) -> Result<()> {
        let file = &mut self.file;
        self.pending.drain(|part| file.write_all(part)).map_err(|e| Error::io(&self.path, e))?;
        let sync = match self.durability {
            Durability::FsyncEveryChunk => true,
            Durability::FsyncInterval(every) => self.last_sync.elapsed() >= every,
            Durability::Flush | Durability::FsyncOnClose => false,
        };
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let started = Instant::now();
        self.file.sync_data().map_err(|e| Error::io(&self.path, e))?;
        self.last_sync = Instant::now();
        crate::writer::timelog::note_fsync(self.last_sync - started);
        Ok(())
    }

    /// Writes the final Index and the End record; the file is then complete.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.append_opening_copies()?;
        let index_at = self.write_index();
        self.append(RecordKind::End, &index_at.to_le_bytes());
        self.flush_to_os()?;
        if self.durability != Durability::Flush {
            self.sync()?;
        }
        Ok(self.path)
    }

    /// Frames a record into the pending bytes; returns its file offset.
    fn append(&mut self, kind: RecordKind, payload: &[u8]) -> u64 {
        self.append_requiring(kind, payload, 0)
    }

    /// `append` with record required flags.
    fn append_requiring(&mut self, kind: RecordKind, payload: &[u8], required: u16) -> u64 {
        let header = RecordHeader::new(kind, payload).requiring(required);
        let bytes = &mut self.pending.bytes;
        bytes.extend_from_slice(&header.encode());
        bytes.extend_from_slice(payload);
        bytes.resize(bytes.len() + padding_after(header.payload_len), 0);
        self.take_offset(&header)
    }

    /// `append` of a payload kept where it was built until written (a large one is not copied).
    fn append_owned(&mut self, kind: RecordKind, payload: Vec<u8>) -> u64 {
        let header = RecordHeader::new(kind, &payload);
        self.pending.bytes.extend_from_slice(&header.encode());
        self.pending.push(payload);
        let bytes = &mut self.pending.bytes;
        bytes.resize(bytes.len() + padding_after(header.payload_len), 0);
        self.take_offset(&header)
    }

    /// The offset of the record `header` frames, moving past it.
    fn take_offset(&mut self, header: &RecordHeader) -> u64 {
        let at = self.offset;
        self.offset += header.total_len();
        at
    }
}

/// Data from this size on is kept where it was built until it is written (a copy costs more
/// than the extra write call).
const KEPT_DATA_BYTES: usize = 64 << 10;

/// The bytes of a batch not yet handed to the OS, in file order: `bytes`, with each buffer of
/// `kept` placed at the length `bytes` had when it was added (headers, tables and small records
/// are copied into `bytes`; large chunk data stays in the buffer it was sealed in).
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    kept: Vec<(usize, Vec<u8>)>,
}

impl Pending {
    /// Adds `data` after the bytes so far: copied when small, kept as it is otherwise.
    fn push(&mut self, data: Vec<u8>) {
        if data.len() < KEPT_DATA_BYTES {
            self.bytes.extend_from_slice(&data);
        } else {
            self.kept.push((self.bytes.len(), data));
        }
    }

    /// Hands every part, in file order, to `write`; empties the batch once all went.
    fn drain(&mut self, mut write: impl FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        let mut from = 0;
        for (at, data) in &self.kept {
            write(&self.bytes[from..*at])?;
            write(data)?;
            from = *at;
        }
        write(&self.bytes[from..])?;
        self.bytes.clear();
        self.kept.clear();
        Ok(())
    }
}

pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The bytes of the recording id a shard's name carries (as hex).
pub const RECORDING_TAG_BYTES: usize = 4;

/// `20261121T062507.123456Z-1a2b3c4d-00000.trj`: names sort by start time, then recording and shard.
pub fn shard_name(created_ns: u64, recording_id: &[u8; 16], shard_seq: u64) -> String {
    let secs = created_ns / 1_000_000_000;
    let micros = (created_ns % 1_000_000_000) / 1000;
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    let rec: String = recording_id[..RECORDING_TAG_BYTES].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{y:04}{mo:02}{d:02}T{:02}{:02}{:02}.{micros:06}Z-{rec}-{shard_seq:05}.{SHARD_EXTENSION}",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The recording tag (hex) the shard name `name` carries (`shard_name`); `None` for a name
/// not made so.
pub fn recording_tag_of(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(&format!(".{SHARD_EXTENSION}"))?;
    let mut parts = stem.rsplitn(3, '-');
    let (_seq, tag) = (parts.next()?, parts.next()?);
    parts.next()?;
    (tag.len() == 2 * RECORDING_TAG_BYTES && tag.bytes().all(|b| b.is_ascii_hexdigit())).then_some(tag)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A recording id that differs between processes and between recorders of one process.
pub fn new_recording_id() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut id = [0u8; 16];
    for (i, half) in id.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(now_ns());
        h.write_u32(std::process::id());
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    id
}

/// Tells readers the file is being written: an exclusive advisory lock (`flock`) held as long as
/// the file is open here, dropped by the kernel when this process ends however it ends. A reader
/// finding a record cut short at the end of a locked file waits for it instead of reporting it
/// as what a stopped writer left (`reader::tail`). Taken before the header is written, so a
/// reader's probe (on files with a header) never makes it fail; if it fails anyway (a file
/// system without locks), readers report such a record as today.
fn lock_while_writing(file: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is open and owned by `file` for the whole call.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
}

/// Whether a writer holds the lock it takes on the shard it writes (`lock_while_writing`; also
/// one of this process: the lock belongs to the writer's open file). The probe takes a shared
/// lock without waiting and lets go at once, so it never holds up a writer.
pub fn writer_holds_lock(file: &File) -> bool {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file`, alive for the whole call.
    if unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) } == 0 {
        // SAFETY: as above; this releases only the lock just taken through this descriptor.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        return false;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::RECORD_HEADER_LEN;

    #[test]
    fn names_sort_by_time() {
        let id = [0xab; 16];
        assert_eq!(shard_name(0, &id, 0), "19700101T000000.000000Z-abababab-00000.trj");
        assert_eq!(recording_tag_of(&shard_name(0, &id, 7)), Some("abababab"));
        for other in ["x.trj", "a-b.trj", "19700101T000000.000000Z-abababab-00000.trjx", "Z-zzzzzzzz-00001.trj"] {
            assert_eq!(recording_tag_of(other), None, "{other}");
        }
        assert_eq!(shard_name(1_763_706_307_123_456_789, &id, 3), "20251121T062507.123456Z-abababab-00003.trj");
        assert!(shard_name(1_000_000_000, &id, 0) < shard_name(2_000_000_000, &id, 0));
    }

    #[test]
    fn pending_parts_keep_file_order() {
        let mut pending = Pending::default();
        pending.bytes.extend_from_slice(b"head");
        pending.push(vec![7; KEPT_DATA_BYTES]);
        pending.bytes.extend_from_slice(b"next");
        pending.push(b"small".to_vec());
        pending.push(vec![9; KEPT_DATA_BYTES + 1]);
        assert_eq!(pending.kept.len(), 2);
        let mut out = Vec::new();
        pending
            .drain(|part| {
                out.extend_from_slice(part);
                Ok(())
            })
            .unwrap();
        let expected = [&b"head"[..], &[7; KEPT_DATA_BYTES], b"nextsmall", &[9; KEPT_DATA_BYTES + 1]].concat();
        assert_eq!(out, expected);
        assert!(pending.bytes.is_empty() && pending.kept.is_empty());
    }

    /// A Chunks record built in place is byte for byte the one `chunks::encode` describes.
    #[test]
    fn chunks_record_in_place_matches_encode() {
        let dir = tempfile::tempdir().unwrap();
        let mut shard = ShardWriter::create(dir.path(), [1; 16], 0, b"{}", &[], Durability::Flush).unwrap();
        let chunk = |column: u32, codec: u32, len: usize| PendingChunk {
            lane: 0,
            column,
            first_row: 0,
            n_rows: 1,
            codec,
            raw_len: len as u64,
            data: (0..len).map(|i| (i * 7 + column as usize) as u8).collect(),
            flags: 0,
        };
        let chunks =
            vec![chunk(0, 0, 3), chunk(1, 1, KEPT_DATA_BYTES + 5), chunk(2, 0, 100), chunk(3, 0, KEPT_DATA_BYTES)];
        let at = shard.size();
        let (payload, expected_refs) = chunks::encode_packed(at, &chunks, chunks::ENTRY_LEN);
        let refs = shard.append_chunks(chunks);
        assert_eq!(refs, expected_refs);
        shard.flush_to_os().unwrap();
        let file = std::fs::read(shard.path()).unwrap();
        let header = RecordHeader::new(RecordKind::Chunks, &payload).requiring(PACKED_TABLE);
        let start = at as usize;
        assert_eq!(&file[start..start + RECORD_HEADER_LEN], &header.encode());
        assert_eq!(&file[start + RECORD_HEADER_LEN..start + RECORD_HEADER_LEN + payload.len()], &payload[..]);
        assert_eq!(file.len() as u64, at + header.total_len());
    }

    #[test]
    fn recording_ids_differ() {
        assert_ne!(new_recording_id(), new_recording_id());
    }
}
