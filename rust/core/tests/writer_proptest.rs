//! Property: whatever the columns (any dtype, shape, timeline and codec, str included), the
//! episode lengths, the chunk size and the shard size, every value the writer is given reads
//! back identical.

use proptest::prelude::*;
use serde_json::{json, Value};
use trajcore_core::reader::{ColumnData, Dataset, OpenOptions};
use trajcore_core::writer::{EntryKind, EntryRef, MessageKind, Recorder, RecorderConfig, Slot};
use trajcore_core::DType;

const DTYPES: [&str; 13] = [
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "str",
];

#[derive(Debug, Clone)]
struct Col {
    dtype: &'static str,
    shape: Vec<u64>,
    obs: bool,
    /// 0 raw, 1 zstd, 2 delta + zstd.
    codec: u8,
}

fn col() -> impl Strategy<Value = Col> {
    (0..DTYPES.len(), prop::collection::vec(1u64..5, 0..3), any::<bool>(), 0u8..3).prop_map(|(d, shape, obs, codec)| {
        let dtype = DTYPES[d];
        let str_col = dtype == "str";
        Col {
            dtype,
            shape: if str_col { vec![] } else { shape },
            obs,
            codec: if str_col { codec.min(1) } else { codec },
        }
    })
}

/// splitmix64: values from the case's seed, so a failing case is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Row {
    Fixed(Vec<u8>),
    Text(String),
}

fn row(c: &Col, rng: &mut Rng) -> Row {
    if c.dtype == "str" {
        let n = rng.next() % 7;
        let alphabet = ['a', 'Z', '0', ' ', 'é', '中', '🦀', '/'];
        return Row::Text((0..n).map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize]).collect());
    }
    let size = DType::from_name(c.dtype).unwrap().size().unwrap();
    let n = size * c.shape.iter().product::<u64>() as usize;
    // Half the rows repeat a small pattern so delta and zstd have something to gain.
    let smooth = rng.next() & 1 == 0;
    let base = rng.next();
    let bytes = (0..n)
        .map(|i| {
            if c.dtype == "bool" {
                (rng.next() % 2) as u8
            } else if smooth {
                (base as usize + i / size) as u8
            } else {
                rng.next() as u8
            }
        })
        .collect();
    Row::Fixed(bytes)
}

fn encode(rows: &[&Row]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rows {
        match r {
            Row::Fixed(b) => out.extend_from_slice(b),
            Row::Text(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    out
}

fn push(rec: &mut Recorder, kind: MessageKind, time_ns: u64, entries: &[(u32, Vec<u8>)]) {
    let refs: Vec<EntryRef> = entries
        .iter()
        .map(|(column, data)| EntryRef {
            column: *column,
            kind: EntryKind::Dense,
            slot: Slot::Regular,
            env: 0,
            mask: None,
            data,
        })
        .collect();
    let len = match kind {
        MessageKind::Reset => rec.plan_reset(&refs, None).unwrap(),
        _ => rec.plan_step(&refs).unwrap(),
    };
    rec.wait_for_space(len).unwrap();
    rec.send_planned(&refs, time_ns).unwrap();
}

/// One episode as written: per column its rows (T+1 or T of them), and the step outcomes.
struct Episode {
    rows: Vec<Vec<Row>>,
    rewards: Vec<f64>,
    complete: bool,
}

fn run(cols: &[Col], lengths: &[usize], last_complete: bool, chunk_bytes: usize, max_shard_bytes: u64, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> =
        cols.iter().enumerate().map(|(i, c)| format!("{}/c{i}", if c.obs { "obs" } else { "action" })).collect();
    let specs: Vec<Value> = cols
        .iter()
        .zip(&names)
        .map(|(c, name)| {
            let codec = match c.codec {
                0 => json!({"zstd_level": null}),
                1 => json!({"zstd_level": 1}),
                _ => json!({"delta": true, "zstd_level": 3}),
            };
            json!({"id": 0, "name": name, "dtype": c.dtype, "shape": c.shape, "timeline": if c.obs {"obs"} else {"step"}, "codec": codec})
        })
        .collect();
    let layout = |obs: bool| {
        let items: Vec<Value> =
            cols.iter().zip(&names).filter(|(c, _)| c.obs == obs).map(|(_, n)| json!([n, {"leaf": n}])).collect();
        json!({ "dict": items })
    };
    let config = json!({
        "columns": specs, "observation": layout(true), "action": layout(false),
        "chunk_bytes": chunk_bytes, "max_shard_bytes": max_shard_bytes, "flush_interval_s": 30.0,
    });
    let mut rec = Recorder::create(dir.path(), RecorderConfig::from_json(&config.to_string()).unwrap()).unwrap();
    let [reward, terminated, truncated] = rec.role_columns();
    let ids: Vec<u32> = names.iter().map(|n| rec.column_id(n).unwrap()).collect();

    let mut rng = Rng(seed);
    let mut time = 0u64;
    let mut episodes = Vec::new();
    for (k, &len) in lengths.iter().enumerate() {
        let complete = k + 1 < lengths.len() || last_complete;
        let mut ep = Episode { rows: vec![Vec::new(); cols.len()], rewards: Vec::new(), complete };
        let reset: Vec<(u32, Vec<u8>)> = cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.obs)
            .map(|(i, c)| {
                let r = row(c, &mut rng);
                let data = encode(&[&r]);
                ep.rows[i].push(r);
                (ids[i], data)
            })
            .collect();
        time += 10;
        push(&mut rec, MessageKind::Reset, time, &reset);
        for t in 1..=len {
            let mut entries = Vec::new();
            for (i, c) in cols.iter().enumerate() {
                let r = row(c, &mut rng);
                entries.push((ids[i], encode(&[&r])));
                ep.rows[i].push(r);
            }
            let r = (rng.next() % 2001) as f64 / 8.0 - 125.0;
            ep.rewards.push(r);
            let done = t == len && complete;
            entries.push((reward, r.to_le_bytes().to_vec()));
            entries.push((terminated, vec![(done && k % 2 == 0) as u8]));
            entries.push((truncated, vec![(done && k % 2 == 1) as u8]));
            time += 10;
            push(&mut rec, MessageKind::Step, time, &entries);
        }
        episodes.push(ep);
    }
    rec.close().unwrap();

    let ds = Dataset::open(dir.path(), OpenOptions::default()).unwrap();
    assert!(ds.problems().is_empty(), "{:?}", ds.problems());
    assert_eq!(ds.episodes().len(), episodes.len());
    for (i, (got, want)) in ds.episodes().iter().zip(&episodes).enumerate() {
        let s = &got.summary;
        assert_eq!(s.length as usize, want.rewards.len(), "episode {i}");
        assert_eq!(s.complete(), want.complete, "episode {i}");
        assert_eq!(s.episode_return, want.rewards.iter().sum::<f64>(), "episode {i}");
        for (c, name) in names.iter().enumerate() {
            let rows = &want.rows[c];
            match ds.view().read_episode_column(i, name).unwrap() {
                ColumnData::Fixed { shape, bytes, .. } => {
                    let mut want_shape = vec![rows.len()];
                    want_shape.extend(cols[c].shape.iter().map(|&d| d as usize));
                    assert_eq!(shape, want_shape, "episode {i} column {name}");
                    assert_eq!(bytes, encode(&rows.iter().collect::<Vec<_>>()), "episode {i} column {name}");
                }
                ColumnData::Strings(text) => {
                    let want: Vec<Row> = text.into_iter().map(Row::Text).collect();
                    assert_eq!(&want, rows, "episode {i} column {name}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn random_columns_round_trip(
        cols in prop::collection::vec(col(), 1..6),
        lengths in prop::collection::vec(1usize..40, 1..6),
        last_complete in any::<bool>(),
        chunk_bytes in 8usize..600,
        small_shards in any::<bool>(),
        seed in any::<u64>(),
    ) {
        run(&cols, &lengths, last_complete, chunk_bytes, if small_shards { 4096 } else { 1 << 30 }, seed);
    }
}
