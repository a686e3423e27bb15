//! As `reader`, but the input's records get valid checksums before it is read: random bytes
//! rarely pass a CRC, so without this the fuzzer seldom gets past the framing into the payload
//! parsers (chunk tables, episode records, index deltas, codecs, column specs, JSON).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use trajcore_core::format::header::HEADER_LEN;
use trajcore_core::format::record::{RecordHeader, RECORD_HEADER_LEN};
use trajcore_core::format::{u32_at, u64_at};
use trajcore_core::reader::{Dataset, OpenOptions};

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("trajcore-fuzz-resealed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir.join("input.trj")
    })
}

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
    let path = path();
    std::fs::write(path, &bytes).expect("write the input");
    // Through a map and through positioned reads alike.
    for (strict, mmap) in [(false, true), (true, true), (false, false)] {
        let Ok(ds) = Dataset::open(path, OpenOptions { strict, cache_bytes: 8 << 20, mmap }) else { continue };
        let _ = ds.column_stats();
        let _ = ds.timelog(0);
        for episode in 0..ds.episodes().len().min(32) {
            let _ = ds.view().episode_metadata(episode);
            let recording = ds.episodes()[episode].recording;
            let names: Vec<String> = ds.recordings()[recording].columns.iter().map(|c| c.name.clone()).collect();
            for name in names {
                let _ = ds.view().read_episode_column(episode, &name);
            }
        }
    }
});
