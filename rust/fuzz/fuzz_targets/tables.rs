//! Any bytes as a Chunks payload and as an Index payload, each with its table plain and packed
//! (record required flag `PACKED_TABLE`), and as an Opening Copies payload: decoding gives
//! references inside the payload or an error, never panics or allocates past the packed table's
//! bound. Reaches the packed-table
//! decoder directly, which the file targets only reach behind a valid checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trajcore_core::format::index::IndexDelta;
use trajcore_core::format::{chunks, copies};

fuzz_target!(|data: &[u8]| {
    let Some((&packed, payload)) = data.split_first() else { return };
    let packed = packed & 1 == 1;
    let record_offset = 64;
    if let Ok(refs) = chunks::decode(payload, record_offset, packed) {
        let payload_start = record_offset + 24;
        for r in refs {
            assert!(r.data_offset >= payload_start);
            assert!(r.data_offset + r.stored_len <= payload_start + payload.len() as u64);
        }
    }
    let _ = IndexDelta::decode(payload, packed);
    if let Ok(entries) = copies::decode(payload) {
        for (_, bytes) in entries {
            assert!(bytes.end <= payload.len());
        }
    }
});
