//! Record framing: where a record lies in a shard's bytes, checked without reading its payload
//! (its header's checksum and length, and that it ends inside the file). Every walk over records
//! (opening, scanning a growing shard, verify, the opening copies, reads from a store) frames
//! through this one function.

use std::borrow::Cow;

use super::source::Source;
use crate::format::record::{RecordHeader, RecordKind, RECORD_HEADER_LEN};

/// A record whose header decoded and whose payload and padding lie inside the file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordAt {
    pub offset: u64,
    pub header: RecordHeader,
    pub payload_start: usize,
    pub payload_end: usize,
    /// Where the next record starts.
    pub next: u64,
}

impl RecordAt {
    /// The payload (empty if the file can no longer be read there, which its checksum then says).
    pub fn payload<'m>(&self, src: &'m Source) -> Cow<'m, [u8]> {
        src.bytes(self.payload_start as u64, (self.payload_end - self.payload_start) as u64).unwrap_or_default()
    }

    pub fn payload_ok(&self, src: &Source) -> bool {
        let len = (self.payload_end - self.payload_start) as u64;
        let crc = self.header.payload_crc;
        let check = |p: &[u8]| if crc32c::crc32c(p) == crc { Ok(()) } else { Err(()) };
        src.checked(self.payload_start as u64, len, check).is_some_and(|r| r.is_ok())
    }

    pub fn kind(&self) -> Option<RecordKind> {
        self.header.record_kind()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Fewer bytes than a record header remain.
    PartialHeader,
    /// The header checksum fails or its length is impossible.
    BadHeader,
    /// The header is sound but the record runs past the end of the file.
    PastEnd { payload_len: u64 },
    /// The file could not be read there (it shrank since it was opened, or an I/O error).
    Unreadable,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::PartialHeader => write!(f, "record header cut short by the end of the file"),
            FrameError::BadHeader => write!(f, "record header is damaged (checksum mismatch or impossible length)"),
            FrameError::PastEnd { payload_len } => {
                write!(f, "record of {payload_len} payload bytes runs past the end of the file")
            }
            FrameError::Unreadable => write!(f, "the file could not be read here (it changed since it was opened?)"),
        }
    }
}

/// Checks the framing of the record at `offset` without looking at its payload.
pub(crate) fn frame(src: &Source, offset: u64) -> Result<RecordAt, FrameError> {
    let len = src.len();
    let header_end = offset.checked_add(RECORD_HEADER_LEN as u64).filter(|&e| e <= len);
    let Some(header_end) = header_end else { return Err(FrameError::PartialHeader) };
    let decoded =
        src.checked(offset, RECORD_HEADER_LEN as u64, |b| RecordHeader::decode(b).ok_or(FrameError::BadHeader));
    let header = decoded.ok_or(FrameError::Unreadable)??;
    let past_end = FrameError::PastEnd { payload_len: header.payload_len };
    let payload_end = header_end.checked_add(header.payload_len).filter(|&e| e <= len).ok_or(past_end)?;
    let next = offset.checked_add(header.total_len()).filter(|&e| e <= len).ok_or(past_end)?;
    Ok(RecordAt { offset, header, payload_start: header_end as usize, payload_end: payload_end as usize, next })
}
