//! The writer's timelog, recorded for real: samples cover the recording, count its steps and
//! bytes, and see the time fsync takes when the durability asks for it.

mod writer_util;

use serde_json::json;
use writer_util::*;

/// Records `steps` steps of one env (an episode every 10), flushing every 100, then closes.
fn record(extra: serde_json::Value, steps: u64) -> Vec<trajcore_core::writer::timelog::Sample> {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(1, false, "disabled", extra));
    h.reset(&[env_step(0, 0)], None);
    for tick in 1..=steps {
        let ends = tick % 10 == 0;
        let mut s = env_step(0, tick);
        s.terminated = ends;
        h.step(&[s]);
        if ends {
            h.reset(&[env_step(0, tick)], None);
        }
        if tick % 100 == 0 {
            h.rec.flush().unwrap();
        }
    }
    h.rec.flush().unwrap();
    let before_close = h.rec.timelog().len();
    h.rec.close().unwrap();
    let after = h.rec.timelog();
    assert!(after.len() > before_close, "closing publishes the last (partial) sample");
    after
}

#[test]
fn samples_cover_the_recording_and_count_its_steps() {
    let samples = record(json!({}), 1000);
    assert_eq!(samples.iter().map(|s| s.steps).sum::<u64>(), 1000);
    assert!(samples.iter().map(|s| s.bytes_written).sum::<u64>() > 0);
    assert!(samples.iter().map(|s| s.bytes_raw).sum::<u64>() >= 1000 * (12 + 8));
    for w in samples.windows(2) {
        assert!((w[0].t_s + w[0].dt_s - w[1].t_s).abs() < 1e-6, "samples follow each other: {w:?}");
    }
    for s in &samples {
        let busy = s.copy_s + s.encode_s + s.compress_s + s.write_s + s.fsync_s + s.idle_s;
        assert!(busy <= s.dt_s * 1.05 + 1e-3, "stages add up to at most the sample's span: {s:?}");
        assert!((0.0..=1.0).contains(&s.ring_fill) && s.ring_fill <= s.ring_fill_max.max(s.ring_fill));
    }
    let total = |f: fn(&trajcore_core::writer::timelog::Sample) -> f64| samples.iter().map(f).sum::<f64>();
    assert!(total(|s| s.copy_s) > 0.0 && total(|s| s.encode_s) > 0.0 && total(|s| s.write_s) > 0.0);
    assert!(total(|s| s.compress_s) > 0.0, "the obs column is zstd-compressed");
    assert_eq!(total(|s| s.fsync_s), 0.0, "the default durability never syncs");
}

#[test]
fn fsync_time_is_its_own_stage() {
    let samples = record(json!({"durability": "fsync_chunk"}), 300);
    assert!(samples.iter().map(|s| s.fsync_s).sum::<f64>() > 0.0);
}
