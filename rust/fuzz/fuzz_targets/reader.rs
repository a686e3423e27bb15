//! Any bytes as a shard file: opening it (lenient and strict) and reading everything it lists
//! must return data or an error, never panic, hang or allocate without bound.
#![no_main]

mod shard_input;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = shard_input::path("reader");
    std::fs::write(path, data).expect("write the input");
    shard_input::read_everything(path);
});
