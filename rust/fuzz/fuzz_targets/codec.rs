//! Any bytes as a chunk's stored data under any codec pipeline: decoding returns exactly the
//! chunk's raw length or an error, never panics or allocates past its bounds. Reaches the
//! filters (delta, frame stacks) directly, which the file targets only reach through zstd.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trajcore_core::format::codec::decode;

fuzz_target!(|data: &[u8]| {
    // codec u32, row bytes u16 (0: variable-length), raw length u16, then the stored bytes.
    if data.len() < 8 {
        return;
    }
    let codec = u32::from_le_bytes(data[..4].try_into().unwrap());
    let row = u16::from_le_bytes([data[4], data[5]]) as usize;
    let raw_len = u16::from_le_bytes([data[6], data[7]]) as usize;
    let row_bytes = (row > 0).then_some(row);
    if let Ok(out) = decode(codec, row_bytes, &data[8..], raw_len) {
        assert_eq!(out.len(), raw_len);
    }
});
