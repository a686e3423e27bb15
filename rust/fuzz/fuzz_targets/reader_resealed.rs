//! As `reader`, but the input's records get valid checksums before it is read: random bytes
//! rarely pass a CRC, so without this the fuzzer seldom gets past the framing into the payload
//! parsers (chunk tables, episode records, index deltas, codecs, column specs, JSON).
#![no_main]

mod shard_input;

use libfuzzer_sys::fuzz_target;
use trajcore_core::format::header::HEADER_LEN;
use trajcore_core::format::record::{RecordHeader, RECORD_HEADER_LEN};
use trajcore_core::format::{u32_at, u64_at};

/// Recomputes every record's payload and header checksums, walking the lengths as written.
fn reseal(bytes: &mut [u8]) {
    let mut at = HEADER_LEN;
    while at + RECORD_HEADER_LEN <= bytes.len() {
        let kind = u32_at(bytes, at);
        let len = u64_at(bytes, at + 8);
        let start = at + RECORD_HEADER_LEN;
        let Some(end) = usize::try_from(len).ok().and_then(|l| start.checked_add(l)).filter(|&e| e <= bytes.len())
        else {
            return;
        };
        let header = RecordHeader::new_raw(kind, &bytes[start..end]);
        bytes[at..start].copy_from_slice(&header.encode());
        at = end.next_multiple_of(8);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    reseal(&mut bytes);
    let path = shard_input::path("reader_resealed");
    std::fs::write(path, &bytes).expect("write the input");
    shard_input::read_everything(path);
});
