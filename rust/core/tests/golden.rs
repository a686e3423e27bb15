//! The golden files (tests/golden, written by `make_golden.py`): small real recordings of the
//! format's odd cases, read back as `expected.json` says: a file cut inside a Chunks record, a
//! closed file with index checkpoints, an episode that never stepped, an episode in parts over
//! two rollovers (whole in the directory, a part in each shard alone).

use std::path::{Path, PathBuf};

use serde_json::Value;
use trajcore_core::reader::{ColumnData, Dataset, OpenOptions};

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

fn floats(data: ColumnData) -> Vec<f64> {
    match data {
        ColumnData::Fixed { dtype, bytes, .. } => match dtype.name() {
            "float32" => bytes.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64).collect(),
            "float64" => bytes.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect(),
            "int64" => bytes.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64).collect(),
            other => panic!("unexpected dtype {other}"),
        },
        ColumnData::Strings(_) => panic!("unexpected str column"),
    }
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        Value::Bool(b) => vec![*b as u8 as f64],
        other => panic!("unexpected {other}"),
    }
}

fn check(path: &Path, expected: &Value) {
    let ds = Dataset::open(path, OpenOptions::default()).unwrap();
    let want = expected.as_array().unwrap();
    assert_eq!(ds.episodes().len(), want.len(), "{}", path.display());
    for (i, (e, w)) in ds.episodes().iter().zip(want).enumerate() {
        let s = &e.summary;
        let got = (
            s.lane as u64,
            s.episode_id,
            s.length,
            s.complete(),
            s.terminated(),
            s.truncated(),
            e.continued,
            e.continues,
        );
        let exp = (
            w["env_index"].as_u64().unwrap(),
            w["episode_id"].as_u64().unwrap(),
            w["length"].as_u64().unwrap(),
            w["complete"].as_bool().unwrap(),
            w["terminated"].as_bool().unwrap(),
            w["truncated"].as_bool().unwrap(),
            w["continued"].as_bool().unwrap(),
            w["continues"].as_bool().unwrap(),
        );
        assert_eq!(got, exp, "{} episode {i}", path.display());
        for (column, key) in [("obs", "observations"), ("action", "actions"), ("reward", "rewards")] {
            assert_eq!(
                floats(ds.view().read_episode_column(i, column).unwrap()),
                flat(&w[key]),
                "{} episode {i} {column}",
                path.display()
            );
        }
    }
}

#[test]
fn golden_files_read_as_expected() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(golden().join("expected.json")).unwrap()).unwrap();
    // Every case `make_golden.py` described (its keys, besides each case's "/shards").
    let cases: Vec<&String> = expected.as_object().unwrap().keys().filter(|k| !k.ends_with("/shards")).collect();
    assert!(cases.len() >= 6, "{cases:?}");
    for case in cases {
        check(&golden().join(case), &expected[case]);
        for (name, want) in expected[format!("{case}/shards")].as_object().unwrap() {
            check(&golden().join(case).join(name), want);
        }
    }
}
