//! Random recordings (columns of every dtype, shape and codec; lanes; episode lengths; chunk
//! sizes; flush, checkpoint and shard points) read back value by value; and cut anywhere,
//! everything before the cut still reads.

mod common;

use common::*;
use proptest::prelude::*;
use trajcore_core::reader::{Dataset, OpenOptions};
use trajcore_core::{CodecSpec, ColumnSpec, Timeline};

const DTYPES: [&str; 13] = [
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "str",
];

#[derive(Debug, Clone)]
struct Col {
    dtype: usize,
    shape: Vec<u64>,
    obs: bool,
    codec: u8,
    masked: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Steps { lane: u32, n: u64 },
    End { lane: u32 },
    Flush,
    Index,
    NextShard,
    AddColumn(Col),
}

fn col() -> impl Strategy<Value = Col> {
    (0..DTYPES.len(), prop::collection::vec(0u64..4, 0..3), any::<bool>(), 0u8..3, any::<bool>())
        .prop_map(|(dtype, shape, obs, codec, masked)| Col { dtype, shape, obs, codec, masked })
}

fn op(lanes: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..lanes, 1u64..12).prop_map(|(lane, n)| Op::Steps { lane, n }),
        3 => (0..lanes).prop_map(|lane| Op::End { lane }),
        2 => Just(Op::Flush),
        1 => Just(Op::Index),
        1 => Just(Op::NextShard),
        1 => col().prop_map(Op::AddColumn),
    ]
}

fn codec(c: &Col) -> CodecSpec {
    match c.codec {
        0 => RAW,
        1 => ZSTD,
        _ if DTYPES[c.dtype] == "str" => ZSTD,
        _ => DELTA_ZSTD,
    }
}

fn build_columns(cols: &[Col]) -> Vec<ColumnSpec> {
    // A required column first, so every episode has rows that must be present.
    let mut out = vec![spec(0, "obs", "float32", &[2], Timeline::Obs, ZSTD)];
    for (i, c) in cols.iter().enumerate() {
        let id = out.len() as u32;
        let dtype = DTYPES[c.dtype];
        let shape = if dtype == "str" { vec![] } else { c.shape.clone() };
        let timeline = if c.obs { Timeline::Obs } else { Timeline::Step };
        let mut value = spec(id, &format!("c/k{i}"), dtype, &shape, timeline, codec(c));
        if c.masked {
            value.mask = Some(id + 1);
            let mut mask = spec(id + 1, &format!("c/_k{i}"), "bool", &[], timeline, RAW);
            mask.mask_of = Some(id);
            out.push(value);
            out.push(mask);
        } else {
            out.push(value);
        }
    }
    out
}

fn run(sim: &mut Sim, ops: &[Op], lanes: u32) {
    let mut running = vec![false; lanes as usize];
    let mut added = 0;
    for op in ops {
        match op {
            Op::Steps { lane, n } => {
                sim.steps(*lane, *n);
                running[*lane as usize] = true;
            }
            Op::End { lane } if running[*lane as usize] => {
                sim.end_episode(*lane, &format!(r#"{{"lane": {lane}}}"#));
                running[*lane as usize] = false;
            }
            Op::End { .. } => {}
            Op::Flush => sim.flush(),
            Op::Index => sim.index(),
            Op::NextShard => sim.next_shard(),
            Op::AddColumn(c) => {
                // Columns added mid-recording are masked (info keys, custom data).
                let dtype = DTYPES[c.dtype];
                let shape = if dtype == "str" { vec![] } else { c.shape.clone() };
                let timeline = if c.obs { Timeline::Obs } else { Timeline::Step };
                sim.add_masked(&format!("late/x{added}"), dtype, &shape, timeline, codec(c));
                added += 1;
            }
        }
    }
    for (lane, &open) in running.iter().enumerate() {
        if open {
            sim.end_episode(lane as u32, "");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_recordings_round_trip(
        lanes in 1u32..4,
        cols in prop::collection::vec(col(), 0..5),
        ops in prop::collection::vec(op(3), 1..40),
        chunk_rows in 1u32..12,
        per_record in 1usize..6,
        clean in any::<bool>(),
    ) {
        let ops: Vec<Op> = ops.into_iter().map(|o| match o {
            Op::Steps { lane, n } => Op::Steps { lane: lane % lanes, n },
            Op::End { lane } => Op::End { lane: lane % lanes },
            o => o,
        }).collect();
        let mut sim = Sim::new(11, lanes as usize, build_columns(&cols), chunk_rows);
        sim.max_chunks_per_record = per_record;
        run(&mut sim, &ops, lanes);
        let shards = sim.finish(clean);
        let dir = tempfile::tempdir().unwrap();
        for (i, bytes) in shards.iter().enumerate() {
            write(&dir.path().join(format!("r-{i:04}.trj")), bytes);
        }
        // Through a memory map and through positioned reads (`mmap: false`), the same values.
        for mmap in [true, false] {
            let ds = Dataset::open(dir.path(), OpenOptions { strict: true, cache_bytes: 4096, mmap }).unwrap();
            prop_assert!(ds.problems().is_empty());
            check_values(&ds, &sim, &sim.listed());
            prop_assert_eq!(ds.num_steps(), sim.listed().iter().map(|e| e.length).sum::<u64>());
        }

        // Cut the last shard anywhere: what lies before the cut reads.
        let last = shards.len() - 1;
        let cut = 64 + (ops.len() * 7919) % (shards[last].len() - 63);
        write(&dir.path().join(format!("r-{last:04}.trj")), &shards[last][..cut]);
        let expected: Vec<&SimEpisode> = sim
            .listed()
            .into_iter()
            .filter(|e| e.deps.iter().all(|&(s, _, end)| s < last || end <= cut as u64))
            .collect();
        for mmap in [true, false] {
            let ds = Dataset::open(dir.path(), OpenOptions { mmap, ..Default::default() }).unwrap();
            check_values(&ds, &sim, &expected);
        }
    }
}
