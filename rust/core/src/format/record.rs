//! Record framing: a 24-byte header (kind, payload checksum, payload length, header checksum),
//! the payload, then zero padding to the next 8-byte offset. The header has its own checksum so a
//! damaged length is caught before it is trusted.

use super::{align_up, u32_at, u64_at, RECORD_ALIGN};

pub const RECORD_HEADER_LEN: usize = 24;
/// No single record may claim more than this; a larger length means damage.
pub const MAX_PAYLOAD: u64 = 1 << 40;

numbered_enum! {
    pub enum RecordKind: u32 {
        /// JSON: dataset metadata and the caller's layout of columns into spaces.
        Meta = 1,
        /// JSON: one `ColumnSpec`.
        Column = 2,
        /// Binary: a table of column chunks, then their data.
        Chunks = 3,
        /// Binary: one finished (or, at close, unfinished) episode.
        Episode = 4,
        /// Binary: an index of the records since the previous index record.
        Index = 5,
        /// Binary: the offset of the last index record. Only ever the last record of a closed file.
        End = 6,
        /// Binary: the writer thread's timings, a sample per second (see `format::timelog`).
        Timelog = 7,
        /// Binary: copies of a closed shard's Episode records, to fetch in one range (see
        /// `format::copies`). Listed by the final Index; a local reader never needs it.
        OpeningCopies = 8,
    }
}

/// Required flag of a Chunks or Index record: its table (the Chunks entries, the Index chunk
/// references) is packed (`format::packed`). A reader that does not know it leaves the record
/// out; files holding such records also set `header::PACKED_TABLES`, so such a reader refuses
/// the whole file instead.
pub const PACKED_TABLE: u16 = 1;

/// Bits of a record's `required_flags` this reader understands, by kind: a record with another
/// bit set cannot be interpreted and is left out, reported with the bit.
pub fn known_required_flags(kind: u32) -> u16 {
    match RecordKind::from_repr(kind) {
        Some(RecordKind::Chunks | RecordKind::Index) => PACKED_TABLE,
        _ => 0,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Raw kind; unknown kinds from newer minor versions are skipped by readers.
    pub kind: u32,
    pub payload_crc: u32,
    pub payload_len: u64,
    /// Features needed to interpret the payload (see `known_required_flags`).
    pub required_flags: u16,
    /// Features a reader may ignore.
    pub compat_flags: u16,
}

impl RecordHeader {
    pub fn new(kind: RecordKind, payload: &[u8]) -> Self {
        Self::new_raw(kind as u32, payload)
    }

    /// A header for a payload given in consecutive parts (checksummed in one pass over them).
    pub fn of_parts<'a>(kind: RecordKind, parts: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let (mut crc, mut len) = (0u32, 0u64);
        for part in parts {
            crc = crc32c::crc32c_append(crc, part);
            len += part.len() as u64;
        }
        RecordHeader { kind: kind as u32, payload_crc: crc, payload_len: len, required_flags: 0, compat_flags: 0 }
    }

    /// This header with `flags` as its required flags.
    pub fn requiring(self, flags: u16) -> Self {
        RecordHeader { required_flags: flags, ..self }
    }

    /// Whether the record's table is packed (`PACKED_TABLE`, on Chunks and Index records).
    pub fn packed_table(&self) -> bool {
        self.required_flags & PACKED_TABLE != 0
    }

    /// A header for a raw kind number (also one this build does not know).
    pub fn new_raw(kind: u32, payload: &[u8]) -> Self {
        RecordHeader {
            kind,
            payload_crc: crc32c::crc32c(payload),
            payload_len: payload.len() as u64,
            required_flags: 0,
            compat_flags: 0,
        }
    }

    pub fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut b = [0u8; RECORD_HEADER_LEN];
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[8..16].copy_from_slice(&self.payload_len.to_le_bytes());
        b[16..18].copy_from_slice(&self.required_flags.to_le_bytes());
        b[18..20].copy_from_slice(&self.compat_flags.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..20]);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// `None` when the header checksum fails or the length is implausible.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < RECORD_HEADER_LEN || crc32c::crc32c(&bytes[0..20]) != u32_at(bytes, 20) {
            return None;
        }
        let header = RecordHeader {
            kind: u32_at(bytes, 0),
            payload_crc: u32_at(bytes, 4),
            payload_len: u64_at(bytes, 8),
            required_flags: u16::from_le_bytes([bytes[16], bytes[17]]),
            compat_flags: u16::from_le_bytes([bytes[18], bytes[19]]),
        };
        (header.payload_len <= MAX_PAYLOAD).then_some(header)
    }

    /// Bytes from the start of this record to the start of the next one.
    pub fn total_len(&self) -> u64 {
        align_up(RECORD_HEADER_LEN as u64 + self.payload_len, RECORD_ALIGN)
    }

    pub fn record_kind(&self) -> Option<RecordKind> {
        RecordKind::from_repr(self.kind)
    }

    /// The required flags this reader does not understand (0 when it can interpret the record).
    pub fn unknown_required(&self) -> u16 {
        self.required_flags & !known_required_flags(self.kind)
    }
}

/// The padding after a record's payload.
pub fn padding_after(payload_len: u64) -> usize {
    let used = RECORD_HEADER_LEN as u64 + payload_len;
    (align_up(used, RECORD_ALIGN) - used) as usize
}
