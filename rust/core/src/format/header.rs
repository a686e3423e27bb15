//! The 64-byte file header: what the file is, which version wrote it, which recording and which
//! shard of it this is.

use super::{u32_at, u64_at};

pub const MAGIC: &[u8; 8] = b"TRAJCORE";
pub const HEADER_LEN: usize = 64;
/// Readers refuse a file whose major version differs; minor versions only add things a reader
/// may ignore (new record kinds, new JSON fields).
pub const VERSION_MAJOR: u16 = 1;
pub const VERSION_MINOR: u16 = 2;
/// Required flag: the file may hold records whose table is packed (`record::PACKED_TABLE`). A
/// 1.0 reader, which would leave those records out and so lose their chunks, refuses the file.
pub const PACKED_TABLES: u32 = 1;
/// Required flag: the file is an annotation sidecar (`crate::annotation`): its chunks add a column
/// to the shards of its recording instead of being a shard of it. A reader that does not know it
/// would take its chunks for the recording's own columns, so it refuses the file.
pub const ANNOTATION: u32 = 2;
/// Compat flag: the writer rewrote this shard after closing it (`writer::files::compact`); the rows
/// are the ones the shard held before, in chunks sealed again.
pub const COMPACTED: u32 = 1;
/// Bits of `required_flags` this reader understands. A file with another bit set needs a
/// feature this reader lacks: it is refused, naming the bit.
pub const KNOWN_REQUIRED_FLAGS: u32 = PACKED_TABLES | ANNOTATION;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub version_major: u16,
    pub version_minor: u16,
    /// Random id shared by every shard one recorder wrote; lane row numbers run on across them.
    pub recording_id: [u8; 16],
    /// 0 for the first shard of a recording, then 1, 2, ...
    pub shard_seq: u64,
    /// Unix time in nanoseconds when the shard was started.
    pub created_ns: u64,
    /// Features a reader must understand to read the file (see `KNOWN_REQUIRED_FLAGS`).
    pub required_flags: u32,
    /// Features a reader may ignore.
    pub compat_flags: u32,
}

#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    TooShort,
    BadMagic,
    BadChecksum,
}

impl FileHeader {
    pub fn new(recording_id: [u8; 16], shard_seq: u64, created_ns: u64) -> Self {
        FileHeader {
            version_major: VERSION_MAJOR,
            version_minor: VERSION_MINOR,
            recording_id,
            shard_seq,
            created_ns,
            required_flags: 0,
            compat_flags: 0,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..10].copy_from_slice(&self.version_major.to_le_bytes());
        b[10..12].copy_from_slice(&self.version_minor.to_le_bytes());
        b[12..16].copy_from_slice(&self.compat_flags.to_le_bytes());
        b[16..32].copy_from_slice(&self.recording_id);
        b[32..40].copy_from_slice(&self.shard_seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.created_ns.to_le_bytes());
        b[48..52].copy_from_slice(&self.required_flags.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, HeaderError> {
        if bytes.len() < 8 || &bytes[0..8] != MAGIC {
            return Err(if bytes.len() < 8 { HeaderError::TooShort } else { HeaderError::BadMagic });
        }
        if bytes.len() < HEADER_LEN {
            return Err(HeaderError::TooShort);
        }
        if crc32c::crc32c(&bytes[0..60]) != u32_at(bytes, 60) {
            return Err(HeaderError::BadChecksum);
        }
        Ok(FileHeader {
            version_major: u16::from_le_bytes([bytes[8], bytes[9]]),
            version_minor: u16::from_le_bytes([bytes[10], bytes[11]]),
            recording_id: bytes[16..32].try_into().unwrap(),
            shard_seq: u64_at(bytes, 32),
            created_ns: u64_at(bytes, 40),
            compat_flags: u32_at(bytes, 12),
            required_flags: u32_at(bytes, 48),
        })
    }

    /// Whether `other` is this shard as the writer's compaction rewrote it: the same header with
    /// `COMPACTED` added.
    pub fn compacted_as(&self, other: &FileHeader) -> bool {
        self.compat_flags & COMPACTED == 0
            && *other == FileHeader { compat_flags: self.compat_flags | COMPACTED, ..*self }
    }

    /// The required flags this reader does not understand (0 when it can read the file).
    pub fn unknown_required(&self) -> u32 {
        self.required_flags & !KNOWN_REQUIRED_FLAGS
    }
}
