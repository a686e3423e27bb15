//! The writer through its public API: messages pushed as the bindings push them, read back
//! with the reader, compared value by value with a model of the documented episode semantics
//! (single env; vector NEXT_STEP, SAME_STEP and DISABLED autoreset; incomplete episodes;
//! abort and discard; columns added mid-run; episode metadata).

mod writer_util;

use serde_json::json;
use trajcore_core::Error;
use writer_util::*;

/// Per-lane episode lengths: lane `l`'s k-th episode ends after `lengths[(k + l) % len]` steps.
struct Schedule {
    lengths: Vec<usize>,
    /// Episodes ended so far per lane.
    ended: Vec<usize>,
}

impl Schedule {
    fn new(n: usize, lengths: &[usize]) -> Self {
        Schedule { lengths: lengths.to_vec(), ended: vec![0; n] }
    }

    /// Whether the env of `lane`, `t` steps into its episode (1-based), ends now; terminated
    /// on even-numbered episodes, truncated on odd ones.
    fn done(&mut self, lane: usize, t: usize) -> Option<(bool, bool)> {
        let k = self.ended[lane];
        if t < self.lengths[(k + lane) % self.lengths.len()] {
            return None;
        }
        self.ended[lane] += 1;
        let odd = k & 1 == 1;
        Some((!odd, odd))
    }
}

#[test]
fn single_env_episodes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(1, false, "disabled", json!({})));
    h.add_info_columns();
    let mut sched = Schedule::new(1, &[5, 1, 9, 3, 40, 2]);
    let mut tick = 0u64;
    h.reset(&[env_step(0, tick)], None);
    h.set_metadata(0, json!({"first": true}));
    let mut t = 0;
    let mut episodes = 0;
    while episodes < 8 {
        tick += 1;
        t += 1;
        let mut s = env_step(0, tick);
        if let Some((te, tr)) = sched.done(0, t) {
            (s.terminated, s.truncated) = (te, tr);
        }
        if t == 2 {
            h.set_metadata(0, json!({"k": episodes, "nested": {"a": [1, 2]}}));
        }
        h.step(&[s.clone()]);
        if s.terminated || s.truncated {
            episodes += 1;
            t = 0;
            tick += 1;
            h.reset(&[env_step(0, tick)], None);
        }
    }
    // A few steps of a last episode, still running at close.
    for _ in 0..3 {
        tick += 1;
        h.step(&[env_step(0, tick)]);
    }
    let expected = h.close();
    assert_eq!(expected.len(), 9);
    assert!(!expected[8].complete && expected[..8].iter().all(|e| e.complete));
    let ds = open(dir.path());
    check(&ds, &expected);

    let rec = &ds.recordings()[0];
    let meta: serde_json::Value = serde_json::from_str(&rec.meta_json).unwrap();
    assert_eq!(meta["metadata"], json!({"suite": "writer"}));
    assert_eq!(meta["num_envs"], 1);
    assert_eq!(meta["autoreset_mode"], "disabled");
    assert_eq!(meta["layout"], json!({"observation": {"leaf": "obs"}, "action": {"leaf": "action"}}));
    let names: Vec<&str> = rec.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["obs", "action", "reward", "terminated", "truncated", "info/n", "info/_n", "info/s", "info/_s"]);
    assert_eq!(rec.columns[6].mask_of, Some(5));
    assert_eq!(rec.columns[5].mask, Some(6));
}

/// Drives `n` vector envs for `ticks` steps in the given mode; envs end by `sched`. In
/// DISABLED mode, ended envs are reset (masked) `reset_after` steps later.
fn run_vector(
    mode: &str,
    n: usize,
    ticks: u64,
    lengths: &[usize],
    reset_after: u64,
) -> (tempfile::TempDir, Vec<ExpEpisode>) {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(n as u32, true, mode, json!({"chunk_bytes": 128})));
    h.add_info_columns();
    let mut sched = Schedule::new(n, lengths);
    let mut tick = 0u64;
    let reset: Vec<EnvStep> = (0..n).map(|l| env_step(l, tick)).collect();
    h.reset(&reset, None);
    // Steps into the current episode, per env as the env itself counts them.
    let mut t = vec![0usize; n];
    let mut autoreset_next = vec![false; n];
    let mut ended_at: Vec<Option<u64>> = vec![None; n];
    while tick < ticks {
        tick += 1;
        let mut envs: Vec<EnvStep> = (0..n).map(|l| env_step(l, tick)).collect();
        for (lane, s) in envs.iter_mut().enumerate() {
            if mode == "next_step" && autoreset_next[lane] {
                // The autoreset step: the env resets, returns a reset observation, ignores the action.
                autoreset_next[lane] = false;
                t[lane] = 0;
                continue;
            }
            if mode == "disabled" && ended_at[lane].is_some() {
                continue; // an ended env left alone: whatever it returns is not recorded
            }
            t[lane] += 1;
            if let Some((te, tr)) = sched.done(lane, t[lane]) {
                (s.terminated, s.truncated) = (te, tr);
                match mode {
                    "next_step" => autoreset_next[lane] = true,
                    "same_step" => {
                        // The step's observation is the next episode's reset; the final one
                        // comes separately.
                        let f = env_step(lane, tick + 1_000_000);
                        s.final_obs = Some(f.obs);
                        s.final_info_n = (lane != 1).then_some(-(tick as i32));
                        t[lane] = 0;
                    }
                    _ => ended_at[lane] = Some(tick),
                }
            }
        }
        h.step(&envs);
        if mode == "disabled" {
            let mask: Vec<bool> = ended_at.iter().map(|e| e.is_some_and(|at| tick >= at + reset_after)).collect();
            if mask.iter().any(|&m| m) {
                tick += 1;
                let envs: Vec<EnvStep> = (0..n).map(|l| env_step(l, tick)).collect();
                h.reset(&envs, Some(&mask));
                for (lane, &m) in mask.iter().enumerate() {
                    if m {
                        ended_at[lane] = None;
                        t[lane] = 0;
                    }
                }
            }
        }
    }
    let expected = h.close();
    (dir, expected)
}

#[test]
fn vector_next_step_autoreset() {
    let (dir, expected) = run_vector("next_step", 3, 125, &[4, 1, 7, 2, 11], 0);
    let ds = open(dir.path());
    check(&ds, &expected);
    // Every lane has several complete episodes; those still running at close come last.
    for lane in 0..3 {
        assert!(expected.iter().filter(|e| e.lane == lane && e.complete).count() >= 5);
    }
    let first_incomplete = expected.iter().position(|e| !e.complete).unwrap();
    assert!(expected[first_incomplete..].iter().all(|e| !e.complete));
    // No autoreset step became a transition: every action recorded is from a step the env took
    // inside an episode, so each lane's steps are fewer than the ticks.
    let total: usize = expected.iter().map(ExpEpisode::len).sum();
    assert!(total < 3 * 125);
    for e in &expected {
        // Row t+1's observation came from the tick whose action is row t's action.
        for (t, a) in e.actions.iter().enumerate() {
            let tick = (a - e.lane as i64) / 100;
            assert_eq!(e.obs[t + 1][0], (tick as u64 * 16 + e.lane as u64) as f32);
        }
    }
}

#[test]
fn vector_same_step_autoreset() {
    let (dir, expected) = run_vector("same_step", 3, 100, &[3, 6, 1, 8], 0);
    let ds = open(dir.path());
    check(&ds, &expected);
    for e in expected.iter().filter(|e| e.complete) {
        // The final row is the final observation from the Final slot, not the reset one.
        let last = e.obs.last().unwrap();
        assert!(last[0] >= 1_000_000.0 * 16.0, "lane {}: final obs {last:?}", e.lane);
        let final_info = e.info_n.last().unwrap();
        assert_eq!(final_info.is_some(), e.lane != 1);
    }
    // The next episode starts with the step's (reset) observation.
    let lane0: Vec<&ExpEpisode> = expected.iter().filter(|e| e.lane == 0).collect();
    assert!(lane0.len() > 5);
    assert!(lane0[1].obs[0][0] < 1_000_000.0);
}

#[test]
fn vector_disabled_autoreset_waits_for_masked_reset() {
    let (dir, expected) = run_vector("disabled", 4, 90, &[2, 5, 3], 3);
    let ds = open(dir.path());
    check(&ds, &expected);
    for lane in 0..4 {
        let eps: Vec<&ExpEpisode> = expected.iter().filter(|e| e.lane == lane).collect();
        assert!(eps.len() >= 5, "lane {lane}");
        // The steps between an episode's end and the masked reset are not recorded: the next
        // episode's first action is from a later tick than the last one's + 1.
        for w in eps.windows(2) {
            let (a, b) = (w[0].actions.last().unwrap(), w[1].actions[0]);
            assert!(b - a >= 300, "lane {lane}: {a} then {b}");
        }
    }
}

#[test]
fn mid_episode_reset_and_close_leave_incomplete_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(2, true, "disabled", json!({})));
    let mut tick = 0;
    let envs = |tick: u64| (0..2).map(|l| env_step(l, tick)).collect::<Vec<_>>();
    h.reset(&envs(tick), None);
    for _ in 0..4 {
        tick += 1;
        h.step(&envs(tick));
    }
    // Lane 1 is reset in the middle of its episode: kept, incomplete; lane 0 runs on.
    tick += 1;
    h.reset(&envs(tick), Some(&[false, true]));
    for _ in 0..3 {
        tick += 1;
        let mut e = envs(tick);
        e[1].terminated = tick == 8;
        h.step(&e);
    }
    // A reset right after another creates no empty episode.
    tick += 1;
    h.reset(&envs(tick), Some(&[false, true]));
    tick += 1;
    h.reset(&envs(tick), Some(&[false, true]));
    tick += 1;
    h.step(&envs(tick));
    let expected = h.close();
    let shape: Vec<(u32, usize, bool)> = expected.iter().map(|e| (e.lane, e.len(), e.complete)).collect();
    assert_eq!(shape, [(1, 4, false), (1, 3, true), (0, 8, false), (1, 1, false)]);
    check(&open(dir.path()), &expected);
}

#[test]
fn abort_and_discard() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(3, true, "next_step", json!({})));
    h.add_info_columns();
    let mut tick = 0;
    let envs = |tick: u64| (0..3).map(|l| env_step(l, tick)).collect::<Vec<_>>();
    h.reset(&envs(tick), None);
    for _ in 0..3 {
        tick += 1;
        h.step(&envs(tick));
    }
    for bad in [-1, 3, i64::from(u32::MAX) + 1] {
        let err = h.rec.env_index(bad).unwrap_err();
        assert!(matches!(err, Error::OutOfRange(ref m) if m.contains(&format!("env_index {bad} is out of range"))));
    }
    assert_eq!(h.rec.env_index(2).unwrap(), 2);
    h.set_metadata(2, json!({"dropped": true}));
    h.discard(2); // never listed
    h.abort(Some(0)); // kept, incomplete; lane 0 is ignored until its env ends
    for _ in 0..2 {
        tick += 1;
        h.step(&envs(tick));
    }
    // Lane 0's env ends (its recording resumes with the autoreset step); lane 2's too.
    tick += 1;
    let mut e = envs(tick);
    e[0].truncated = true;
    e[2].terminated = true;
    h.step(&e);
    for _ in 0..3 {
        tick += 1;
        h.step(&envs(tick));
    }
    h.abort(None);
    tick += 1;
    h.step(&envs(tick));
    let expected = h.close();
    let shape: Vec<(u32, usize, bool)> = expected.iter().map(|e| (e.lane, e.len(), e.complete)).collect();
    assert_eq!(shape, [(0, 3, false), (0, 2, false), (1, 9, false), (2, 2, false)]);
    check(&open(dir.path()), &expected);
}

#[test]
fn column_added_mid_run_reads_as_zeros_before() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(2, true, "same_step", json!({"chunk_bytes": 64})));
    let mut tick = 0;
    let envs = |tick: u64| (0..2).map(|l| env_step(l, tick)).collect::<Vec<_>>();
    let strip = |mut v: Vec<EnvStep>| {
        for e in &mut v {
            (e.info_n, e.info_s) = (None, None);
        }
        v
    };
    h.reset(&strip(envs(tick)), None);
    for _ in 0..6 {
        tick += 1;
        let mut e = strip(envs(tick));
        if tick == 3 {
            e[0].terminated = true;
            e[0].final_obs = Some([7.0; OBS_DIM]);
        }
        h.step(&e);
    }
    // The info keys appear now, in the middle of lane 0's second and lane 1's first episode.
    h.add_info_columns();
    for _ in 0..5 {
        tick += 1;
        h.step(&envs(tick));
    }
    let expected = h.close();
    let ds = open(dir.path());
    check(&ds, &expected);
    // Lane 0's first episode predates the columns entirely: all zeros, all masked out.
    assert_eq!(expected[0].lane, 0);
    assert!(expected[0].info_n.iter().all(Option::is_none));
    let spanning = &expected[1];
    assert!(spanning.info_n.first().unwrap().is_none() && spanning.info_n.iter().any(Option::is_some));
}

#[test]
fn metadata_set_after_the_end_reaches_the_ended_episode() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(1, false, "disabled", json!({})));
    h.reset(&[env_step(0, 0)], None);
    let mut s = env_step(0, 1);
    s.terminated = true;
    h.step(&[s]);
    // As the Python wrapper's episode_metadata callback may: after the ending step, before reset.
    h.set_metadata(0, json!({"late": 1}));
    h.reset(&[env_step(0, 2)], None);
    h.step(&[env_step(0, 3)]);
    let expected = h.close();
    check(&open(dir.path()), &expected);
}

/// Same-step autoreset with an info the reset never gives (what a statistics wrapper adds about
/// the ending step): it goes to the ended episode's final row, not to the new episode.
#[test]
fn same_step_step_infos_go_to_the_final_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(2, true, "same_step", json!({})));
    h.add_info_columns();
    let strip = |mut e: EnvStep| {
        (e.info_n, e.info_s) = (None, None);
        e
    };
    h.reset(&[strip(env_step(0, 0)), strip(env_step(1, 0))], None);
    for tick in 1..12u64 {
        let mut envs: Vec<EnvStep> = (0..2).map(|l| strip(env_step(l, tick))).collect();
        if tick % 4 == 0 {
            // Lane 0 ends; the step's info (n) describes it.
            envs[0].terminated = true;
            envs[0].final_obs = Some([9.0; OBS_DIM]);
            envs[0].info_n = Some(1000 + tick as i32);
        }
        h.step(&envs);
    }
    let expected = h.close();
    let ds = open(dir.path());
    check(&ds, &expected);
    let ended: Vec<&ExpEpisode> = expected.iter().filter(|e| e.lane == 0 && e.complete).collect();
    assert_eq!(ended.len(), 2);
    for e in &ended {
        let n = &e.info_n;
        assert!(n[..n.len() - 1].iter().all(Option::is_none), "lane 0: {n:?}");
        assert!(n.last().unwrap().is_some_and(|v| v > 1000), "the final row has the step info");
    }
}

/// `discard` and metadata between the ending step and the next step reach the ended episode,
/// in every mode; they are applied before that next step's rows.
#[test]
fn discard_and_metadata_after_the_end_in_every_mode() {
    for mode in ["next_step", "same_step", "disabled"] {
        let dir = tempfile::tempdir().unwrap();
        let mut h = Harness::new(dir.path(), config(2, true, mode, json!({})));
        h.add_info_columns();
        h.reset(&[env_step(0, 0), env_step(1, 0)], None);
        for tick in 1..30u64 {
            let mut envs: Vec<EnvStep> = (0..2).map(|l| env_step(l, tick)).collect();
            let ends = tick % 5 == 0;
            if ends {
                envs[1].truncated = true;
                envs[1].final_obs = Some([5.0; OBS_DIM]);
            }
            h.step(&envs);
            if ends && mode == "disabled" {
                h.reset(&[env_step(0, tick), env_step(1, tick)], Some(&[false, true]));
            }
            if ends && mode != "disabled" {
                if tick % 10 == 0 {
                    h.discard(1);
                } else {
                    h.set_metadata(1, json!({"ended_at": tick}));
                }
            }
        }
        let expected = h.close();
        check(&open(dir.path()), &expected);
        let tagged = expected.iter().filter(|e| e.lane == 1 && !e.metadata.is_empty()).count();
        if mode != "disabled" {
            assert_eq!(tagged, 3, "{mode}");
            assert_eq!(expected.iter().filter(|e| e.lane == 1 && e.complete).count(), 3, "{mode}: 2 discarded");
        }
    }
}

/// A reset without a step writes nothing: no row of it reaches the file.
#[test]
fn reset_only_episodes_write_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(1, false, "disabled", json!({"chunk_bytes": 64})));
    h.reset(&[env_step(0, 0)], None);
    h.step(&[env_step(0, 1)]);
    h.reset(&[env_step(0, 2)], None); // the first episode ends incomplete; this one never steps
    h.rec.flush().unwrap();
    h.reset(&[env_step(0, 3)], None);
    let expected = h.close();
    let ds = open(dir.path());
    check(&ds, &expected);
    assert_eq!(expected.len(), 1);
    let obs = ds.column_id(0, "obs").unwrap();
    let stats = ds.column_stats().into_iter().find(|s| s.column == obs).unwrap();
    assert_eq!(stats.raw_bytes, 2 * 4 * OBS_DIM as u64, "the episode's two observation rows and nothing else");
}

#[test]
fn an_interrupted_wait_hands_back_what_the_check_returned() {
    let (dir, slow_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = config(1, false, "disabled", json!({}));
    let mut h = Harness::new(dir.path(), config.clone());
    let faults = trajcore_core::writer::Faults { slow_step_ms: 200, ..Default::default() };
    h.rec = trajcore_core::writer::Recorder::create_with_faults(slow_dir.path(), config, faults).unwrap();
    h.rec.set_interrupt_check(Box::new(|| Err(Box::new(7u8))));
    h.reset(&[env_step(0, 0)], None);
    h.step(&[env_step(0, 1)]);
    assert!(matches!(h.rec.flush(), Err(Error::Interrupted(_))));
    let payload = h.rec.take_interrupt().expect("the check's payload");
    assert_eq!(payload.downcast_ref::<u8>(), Some(&7));
    assert!(h.rec.take_interrupt().is_none());
}

#[test]
fn every_call_that_names_an_env_checks_the_index_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(2, true, "next_step", json!({})));
    h.reset(&[env_step(0, 0), env_step(1, 0)], None);
    for bad in [-1, 2, i64::from(u32::MAX) + 1] {
        let refused = [
            ("set_episode_metadata", h.rec.set_episode_metadata(bad, "{}")),
            ("discard", h.rec.discard(bad)),
            ("mark_start_lost", h.rec.mark_start_lost(bad)),
            ("abort", h.rec.abort(Some(bad))),
        ];
        for (call, result) in refused {
            let err = result.unwrap_err();
            let named =
                matches!(err, Error::OutOfRange(ref m) if m.contains(&format!("env_index {bad} is out of range")));
            assert!(named, "{call}({bad}): {err}");
        }
    }
    h.set_metadata(1, json!({"kept": true}));
    let expected = h.close();
    check(&open(dir.path()), &expected);
}

#[test]
fn a_step_of_an_env_with_no_episode_is_warned_of_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), config(2, true, "next_step", json!({})));
    h.reset(&[env_step(0, 0), env_step(1, 0)], Some(&[true, false]));
    h.step(&[env_step(0, 1), env_step(1, 1)]);
    let warnings: Vec<String> = h.rec.step_warnings().collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("not recorded") && warnings[0].ends_with("so far: env 1: 1"), "{}", warnings[0]);
    h.step(&[env_step(0, 2), env_step(1, 2)]);
    assert_eq!(h.rec.step_warnings().count(), 0, "said once (and again at close)");
    assert_eq!(h.rec.stats().bytes_uploaded, None, "not recording to a store");
    let expected = h.close();
    check(&open(dir.path()), &expected);
}
