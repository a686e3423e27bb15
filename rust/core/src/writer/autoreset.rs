//! Which row belongs to which episode: the autoreset state machine of a (vector) recorder.
//!
//! It is decided on the caller's thread from plain values (each sub-env's done flags, a reset
//! mask, the user's `discard`/`abort` calls) and sent with every message as one [`LaneOp`] per
//! sub-env; the writer thread applies the ops without deciding anything. Because the caller
//! knows each sub-env's state synchronously, `discard` and `set_episode_metadata` right after an
//! episode ended reach that episode in every mode, and a refused step ends exactly the episodes
//! it touched. Nothing here does I/O, so table-driven tests cover every case.
//!
//! The rules, per sub-env ("lane"):
//! - `Reset` (all lanes, or those of the mask): a running episode ends incomplete; a new one
//!   starts with the reset's observation row.
//! - `Step` on a running episode: a transition (step row + observation row). If the lane is done
//!   the episode ends (complete): with `SameStep` its final observation row comes from the
//!   step's final slot and a new episode starts with the step's observation; otherwise the lane
//!   waits: with `NextStep` the next step is the reset (its observation starts the next episode,
//!   its action is no transition), with `Disabled` only a masked `Reset` starts one.
//! - An episode that ended stays reachable ("held") until the next `Reset` or `Step` message:
//!   `discard` drops it and episode metadata goes to it. `flush` writes it; after that it can no
//!   longer change and the calls say so.
//! - A discarded or aborted lane skips rows until its env ends the episode (or a reset).

use super::config::AutoresetMode;

/// What one message does to one lane. The writer applies the bits in this order: `DROP_HELD`,
/// settle the held episode, `DROP_OPEN`, `END_OPEN`, `STEP` (with `FINAL_SLOT`, `END`), `BEGIN`.
pub type LaneOp = u16;

pub mod op {
    use super::LaneOp;
    /// Drop the episode that ended at the previous row message (user `discard` after the end).
    pub const DROP_HELD: LaneOp = 1 << 0;
    /// Drop the running episode: it is not written (user `discard`).
    pub const DROP_OPEN: LaneOp = 1 << 1;
    /// End the running episode as incomplete (`abort`, a reset mid-episode, a refused step).
    pub const END_OPEN: LaneOp = 1 << 2;
    /// A transition of the running episode: one step row and one observation row.
    pub const STEP: LaneOp = 1 << 3;
    /// With `STEP`: the observation row is the final one, from the message's final slot
    /// (same-step autoreset: the regular slot holds the next episode's reset row).
    pub const FINAL_SLOT: LaneOp = 1 << 4;
    /// With `STEP`: the episode ends at this step, complete; it is held until the next row message.
    pub const END: LaneOp = 1 << 5;
    pub const TERMINATED: LaneOp = 1 << 6;
    pub const TRUNCATED: LaneOp = 1 << 7;
    /// A new episode starts with this message's regular observation row.
    pub const BEGIN: LaneOp = 1 << 8;
    /// Every bit a message may carry (the writer refuses others: they would be a bug).
    pub const ALL: LaneOp = (1 << 9) - 1;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneState {
    /// No episode yet: rows are ignored until a reset starts one.
    Idle,
    Running,
    /// The episode ended; `NextStep` starts the next one at the next step, `Disabled` at a reset.
    Ended,
    /// The running episode was discarded or aborted: rows are ignored until the env ends it.
    Skipping,
}

/// The episode a lane ended at the last row message, while `discard` and metadata can reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    None,
    /// Ended at the last row message and not written yet.
    Held,
    /// Ended at the last row message and already written by a flush.
    Flushed,
}

/// Which episode of a lane `set_episode_metadata` reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The running episode (also one aborted since the last message: the writer still has it).
    Open,
    /// The episode that ended at the last row message.
    Held,
}

/// Why a `discard` or metadata call cannot be carried out; the caller turns it into an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The lane's last episode was written by a flush after it ended.
    AlreadyFlushed,
    /// The lane has no episode that could be meant.
    NoEpisode,
}

/// The caller's view of every lane, and the plan for the message being sent.
#[derive(Debug, Clone)]
pub struct Splitter {
    mode: AutoresetMode,
    state: Vec<LaneState>,
    held: Vec<Held>,
    /// Ops of `discard`/`abort` calls, sent with the next message.
    pending: Vec<LaneOp>,
    /// The plan: ops of the message being sent and the states they lead to.
    ops: Vec<LaneOp>,
    next_state: Vec<LaneState>,
    next_held: Vec<Held>,
    /// Per lane: steps of an ended or idle lane whose rows were not recorded (never reset).
    unrecorded: Vec<u64>,
    next_unrecorded: Vec<u64>,
    /// Their sum, so the step path checks one number.
    unrecorded_total: u64,
    next_unrecorded_total: u64,
    /// Every lane runs, none holds an ended episode, no op is pending: a step where no lane is
    /// done is then a plain transition everywhere (the common case, planned without a loop).
    steady: bool,
    /// The planned ops are all `STEP` (so the caller can reuse their bytes).
    planned_steady: bool,
}

impl Splitter {
    pub fn new(num_envs: usize, mode: AutoresetMode) -> Self {
        Splitter {
            mode,
            state: vec![LaneState::Idle; num_envs],
            held: vec![Held::None; num_envs],
            pending: vec![0; num_envs],
            ops: vec![0; num_envs],
            next_state: vec![LaneState::Idle; num_envs],
            next_held: vec![Held::None; num_envs],
            unrecorded: vec![0; num_envs],
            next_unrecorded: vec![0; num_envs],
            unrecorded_total: 0,
            next_unrecorded_total: 0,
            steady: false,
            planned_steady: false,
        }
    }

    /// Whether the planned ops are `STEP` for every lane and nothing else.
    pub fn planned_steady(&self) -> bool {
        self.planned_steady
    }

    pub fn num_envs(&self) -> usize {
        self.state.len()
    }

    pub fn state(&self, lane: usize) -> LaneState {
        self.state[lane]
    }

    pub fn held(&self, lane: usize) -> Held {
        self.held[lane]
    }

    /// Steps of `lane` that were not recorded because no episode ran (stepped after its end
    /// without a reset, or before the first one).
    pub fn unrecorded_steps(&self, lane: usize) -> u64 {
        self.unrecorded[lane]
    }

    /// `unrecorded_steps` summed over the lanes.
    pub fn unrecorded_total(&self) -> u64 {
        self.unrecorded_total
    }

    /// The ops of the planned message (valid until `commit` or the next plan).
    pub fn ops(&self) -> &[LaneOp] {
        &self.ops
    }

    fn start_plan(&mut self) {
        self.planned_steady = false;
        self.ops.copy_from_slice(&self.pending);
        self.next_state.copy_from_slice(&self.state);
        self.next_held.copy_from_slice(&self.held);
        self.next_unrecorded.copy_from_slice(&self.unrecorded);
        self.next_unrecorded_total = self.unrecorded_total;
    }

    /// Plans a reset of every lane, or of those whose `mask` byte is non-zero.
    pub fn plan_reset(&mut self, mask: Option<&[u8]>) {
        self.start_plan();
        for lane in 0..self.state.len() {
            // Any row message settles what the previous one ended.
            self.next_held[lane] = Held::None;
            if mask.is_some_and(|m| m.get(lane).is_none_or(|&b| b == 0)) {
                continue;
            }
            if self.state[lane] == LaneState::Running {
                self.ops[lane] |= op::END_OPEN;
            }
            self.ops[lane] |= op::BEGIN;
            self.next_state[lane] = LaneState::Running;
        }
    }

    /// Plans a step at which no lane is done, if every lane simply steps (see `steady`); false
    /// when the general `plan_step` is needed.
    pub fn plan_steady_step(&mut self) -> bool {
        if !self.steady {
            return false;
        }
        if !self.planned_steady {
            self.ops.iter_mut().for_each(|o| *o = op::STEP);
            self.planned_steady = true;
        }
        true
    }

    /// Plans a (vector) step; `done(lane)` gives the lane's (terminated, truncated) flags, or
    /// `None` for a lane that takes no part in it (a replay of one lane at a time).
    pub fn plan_step(&mut self, done: impl Fn(usize) -> Option<(bool, bool)>) {
        self.start_plan();
        for lane in 0..self.state.len() {
            self.next_held[lane] = Held::None;
            let Some((terminated, truncated)) = done(lane) else { continue };
            let ends = terminated || truncated;
            match self.state[lane] {
                LaneState::Running => {
                    let mut o = op::STEP;
                    if ends {
                        o |= op::END
                            | if terminated { op::TERMINATED } else { 0 }
                            | if truncated { op::TRUNCATED } else { 0 };
                        self.next_held[lane] = Held::Held;
                        if self.mode == AutoresetMode::SameStep {
                            o |= op::FINAL_SLOT | op::BEGIN;
                        } else {
                            self.next_state[lane] = LaneState::Ended;
                        }
                    }
                    self.ops[lane] |= o;
                }
                LaneState::Ended if self.mode == AutoresetMode::NextStep => {
                    // The autoreset step: its observation starts the next episode.
                    self.ops[lane] |= op::BEGIN;
                    self.next_state[lane] = LaneState::Running;
                }
                LaneState::Skipping if ends => {
                    if self.mode == AutoresetMode::SameStep {
                        self.ops[lane] |= op::BEGIN;
                        self.next_state[lane] = LaneState::Running;
                    } else {
                        self.next_state[lane] = LaneState::Ended;
                    }
                }
                LaneState::Skipping => {}
                LaneState::Ended | LaneState::Idle => {
                    self.next_unrecorded[lane] += 1;
                    self.next_unrecorded_total += 1;
                }
            }
        }
    }

    /// Plans a message that carries no rows (flush, close): only the pending ops.
    pub fn plan_control(&mut self) {
        self.start_plan();
    }

    /// The planned message was sent: its states become current.
    pub fn commit(&mut self) {
        if self.planned_steady {
            return; // nothing changed
        }
        std::mem::swap(&mut self.state, &mut self.next_state);
        std::mem::swap(&mut self.held, &mut self.next_held);
        std::mem::swap(&mut self.unrecorded, &mut self.next_unrecorded);
        self.unrecorded_total = self.next_unrecorded_total;
        self.pending.iter_mut().for_each(|p| *p = 0);
        self.update_steady();
    }

    fn update_steady(&mut self) {
        self.steady = self.state.iter().all(|&s| s == LaneState::Running)
            && self.held.iter().all(|&h| h == Held::None)
            && self.pending.iter().all(|&p| p == 0);
    }

    /// A flush was sent: held episodes are written now.
    pub fn commit_flush(&mut self) {
        self.commit();
        for h in &mut self.held {
            if *h == Held::Held {
                *h = Held::Flushed;
            }
        }
        self.update_steady();
    }

    /// The planned row message was refused (too big for the ring, or the ring was full and the
    /// recorder must not wait): what it would have recorded is lost, so every episode it touched
    /// ends incomplete, and a lane whose new episode would have started in it skips that episode
    /// (its reset row is lost). Returns the lanes whose running episode was ended.
    pub fn refuse(&mut self) -> Vec<usize> {
        self.steady = false;
        self.planned_steady = false;
        let mut ended = Vec::new();
        for lane in 0..self.state.len() {
            let planned = self.ops[lane] & !self.pending[lane];
            if planned & (op::STEP | op::BEGIN) == 0 {
                continue;
            }
            if self.state[lane] == LaneState::Running {
                self.pending[lane] |= op::END_OPEN;
                ended.push(lane);
            }
            self.state[lane] = match self.next_state[lane] {
                LaneState::Ended => LaneState::Ended,
                LaneState::Idle => LaneState::Idle,
                LaneState::Running | LaneState::Skipping => LaneState::Skipping,
            };
        }
        ended
    }

    /// `discard(lane)`: the episode that ended at the last step if it is still held, else the
    /// running one.
    pub fn discard(&mut self, lane: usize) -> Result<(), Refusal> {
        self.steady = false;
        match (self.held[lane], self.state[lane]) {
            (Held::Held, _) => {
                self.pending[lane] |= op::DROP_HELD;
                self.held[lane] = Held::None;
                Ok(())
            }
            (Held::Flushed, _) => Err(Refusal::AlreadyFlushed),
            (Held::None, LaneState::Running) => {
                self.pending[lane] |= op::DROP_OPEN;
                self.state[lane] = LaneState::Skipping;
                Ok(())
            }
            (Held::None, LaneState::Skipping) if self.pending[lane] & op::END_OPEN != 0 => {
                // Aborted since the last message: drop it instead of keeping it.
                self.pending[lane] = (self.pending[lane] & !op::END_OPEN) | op::DROP_OPEN;
                Ok(())
            }
            // Already discarded since the last message: nothing more to drop.
            (Held::None, LaneState::Skipping) if self.pending[lane] & op::DROP_OPEN != 0 => Ok(()),
            (Held::None, _) => Err(Refusal::NoEpisode),
        }
    }

    /// `abort`: ends the running episode of `lane` (or of every lane) as incomplete; the lane
    /// skips rows until its env ends that episode.
    pub fn abort(&mut self, lane: Option<usize>) {
        self.steady = false;
        for l in 0..self.state.len() {
            if lane.is_none_or(|x| x == l) && self.state[l] == LaneState::Running {
                self.pending[l] |= op::END_OPEN;
                self.state[l] = LaneState::Skipping;
            }
        }
    }

    /// Which episode metadata set now for `lane` reaches.
    pub fn metadata_target(&self, lane: usize) -> Result<Target, Refusal> {
        match (self.held[lane], self.state[lane]) {
            (Held::Held, _) => Ok(Target::Held),
            (Held::Flushed, _) => Err(Refusal::AlreadyFlushed),
            (Held::None, LaneState::Running) => Ok(Target::Open),
            (Held::None, LaneState::Skipping) if self.pending[lane] & op::END_OPEN != 0 => Ok(Target::Open),
            (Held::None, _) => Err(Refusal::NoEpisode),
        }
    }
}

/// An episode a message ended complete, as the caller learns it when sending the message (for
/// gymnasium wrappers' `episode_metadata` callback): what its summary in the file will say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpisodeEnd {
    pub lane: u32,
    pub length: u64,
    pub episode_return: f64,
    pub terminated: bool,
    pub truncated: bool,
}

/// Each lane's running episode length and return on the caller's side, counted from the very ops
/// the writer thread applies (in the same order), so the episodes a message ended can be told
/// to the caller at once with the length and return the file holds.
#[derive(Debug, Clone)]
pub struct Tally {
    length: Vec<u64>,
    episode_return: Vec<f64>,
    ended: Vec<EpisodeEnd>,
}

impl Tally {
    pub fn new(num_envs: usize) -> Self {
        Tally { length: vec![0; num_envs], episode_return: vec![0.0; num_envs], ended: Vec::new() }
    }

    /// Counts a sent message's `ops`; `reward(lane)` is the step's reward of a lane that steps.
    /// `steady`: every op is `STEP` (see `Splitter::planned_steady`).
    pub fn apply(&mut self, ops: &[LaneOp], steady: bool, reward: impl Fn(usize) -> f64) {
        self.ended.clear();
        if steady {
            for (lane, (length, ret)) in self.length.iter_mut().zip(&mut self.episode_return).enumerate() {
                *length += 1;
                *ret += reward(lane);
            }
            return;
        }
        for (lane, &o) in ops.iter().enumerate() {
            if o & (op::DROP_OPEN | op::END_OPEN) != 0 {
                self.restart(lane);
            }
            if o & op::STEP != 0 {
                self.length[lane] += 1;
                self.episode_return[lane] += reward(lane);
                if o & op::END != 0 {
                    self.ended.push(EpisodeEnd {
                        lane: lane as u32,
                        length: self.length[lane],
                        episode_return: self.episode_return[lane],
                        terminated: o & op::TERMINATED != 0,
                        truncated: o & op::TRUNCATED != 0,
                    });
                    self.restart(lane);
                }
            }
            if o & op::BEGIN != 0 {
                self.restart(lane);
            }
        }
    }

    fn restart(&mut self, lane: usize) {
        self.length[lane] = 0;
        self.episode_return[lane] = 0.0;
    }

    /// The episodes the last message counted ended complete, in lane order.
    pub fn ended(&self) -> &[EpisodeEnd] {
        &self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::op::*;
    use super::*;

    const N: (bool, bool) = (false, false);
    const TERM: (bool, bool) = (true, false);
    const TRUNC: (bool, bool) = (false, true);

    fn step(s: &mut Splitter, flags: &[(bool, bool)]) -> Vec<LaneOp> {
        s.plan_step(|l| Some(flags[l]));
        let ops = s.ops().to_vec();
        s.commit();
        ops
    }

    fn reset(s: &mut Splitter, mask: Option<&[u8]>) -> Vec<LaneOp> {
        s.plan_reset(mask);
        let ops = s.ops().to_vec();
        s.commit();
        ops
    }

    /// One step: the flags per lane, and the ops expected per lane.
    type Row<'a> = (&'a [(bool, bool)], &'a [LaneOp]);

    /// Steps after a full reset, for one mode.
    fn table(mode: AutoresetMode, rows: &[Row]) {
        let n = rows[0].0.len();
        let mut s = Splitter::new(n, mode);
        assert_eq!(reset(&mut s, None), vec![BEGIN; n]);
        for (i, (flags, want)) in rows.iter().enumerate() {
            assert_eq!(step(&mut s, flags), want.to_vec(), "{mode:?} row {i}");
        }
    }

    #[test]
    fn next_step_mode() {
        table(
            AutoresetMode::NextStep,
            &[
                (&[N, N], &[STEP, STEP]),
                (&[TERM, N], &[STEP | END | TERMINATED, STEP]),
                // The autoreset step: no transition, a new episode begins.
                (&[N, TRUNC], &[BEGIN, STEP | END | TRUNCATED]),
                (&[N, N], &[STEP, BEGIN]),
                (&[(true, true), N], &[STEP | END | TERMINATED | TRUNCATED, STEP]),
            ],
        );
    }

    #[test]
    fn same_step_mode() {
        let end_t = STEP | END | TERMINATED | FINAL_SLOT | BEGIN;
        table(
            AutoresetMode::SameStep,
            &[(&[N, N], &[STEP, STEP]), (&[TERM, N], &[end_t, STEP]), (&[TERM, TERM], &[end_t, end_t])],
        );
    }

    #[test]
    fn the_steady_fast_path_agrees_with_the_general_plan() {
        for mode in [AutoresetMode::NextStep, AutoresetMode::SameStep, AutoresetMode::Disabled] {
            let mut s = Splitter::new(2, mode);
            assert!(!s.plan_steady_step(), "idle lanes are not steady");
            reset(&mut s, None);
            assert!(s.plan_steady_step());
            assert_eq!(s.ops(), &[STEP, STEP]);
            s.commit();
            let mut general = s.clone();
            general.plan_step(|_| Some(N));
            assert_eq!(general.ops(), s.ops());
            // A done lane makes the next plans general until things settle again.
            assert_eq!(step(&mut s, &[TERM, N])[0] & END, END);
            assert!(!s.plan_steady_step(), "{mode:?}: a held episode");
            s.discard(1).unwrap();
            s.plan_step(|_| Some(N));
            s.commit();
            assert!(!s.plan_steady_step(), "{mode:?}: lane 1 skips");
        }
    }

    #[test]
    fn disabled_mode_waits_for_a_masked_reset() {
        let mut s = Splitter::new(2, AutoresetMode::Disabled);
        reset(&mut s, None);
        assert_eq!(step(&mut s, &[TERM, N]), vec![STEP | END | TERMINATED, STEP]);
        assert_eq!(step(&mut s, &[N, N]), vec![0, STEP]);
        assert_eq!(s.unrecorded_steps(0), 1);
        assert_eq!(reset(&mut s, Some(&[1, 0])), vec![BEGIN, 0]);
        assert_eq!(step(&mut s, &[N, N]), vec![STEP, STEP]);
    }

    #[test]
    fn reset_mid_episode_ends_it_incomplete() {
        let mut s = Splitter::new(2, AutoresetMode::NextStep);
        reset(&mut s, None);
        step(&mut s, &[N, N]);
        assert_eq!(reset(&mut s, Some(&[0, 1])), vec![0, END_OPEN | BEGIN]);
    }

    #[test]
    fn steps_before_any_reset_are_counted_not_recorded() {
        let mut s = Splitter::new(1, AutoresetMode::Disabled);
        assert_eq!(step(&mut s, &[N]), vec![0]);
        assert_eq!(s.unrecorded_steps(0), 1);
    }

    #[test]
    fn discard_after_the_end_drops_the_held_episode_in_every_mode() {
        for mode in [AutoresetMode::NextStep, AutoresetMode::SameStep, AutoresetMode::Disabled] {
            let mut s = Splitter::new(1, mode);
            reset(&mut s, None);
            step(&mut s, &[TERM]);
            assert_eq!(s.metadata_target(0), Ok(Target::Held), "{mode:?}");
            assert_eq!(s.discard(0), Ok(()));
            // The drop goes out with the next message, before anything else.
            s.plan_control();
            assert_eq!(s.ops()[0], DROP_HELD, "{mode:?}");
            s.commit();
        }
    }

    #[test]
    fn discard_before_the_end_drops_the_running_episode_and_skips_to_its_end() {
        let mut s = Splitter::new(1, AutoresetMode::NextStep);
        reset(&mut s, None);
        step(&mut s, &[N]);
        s.discard(0).unwrap();
        assert_eq!(s.state(0), LaneState::Skipping);
        assert_eq!(step(&mut s, &[N]), vec![DROP_OPEN]);
        assert_eq!(step(&mut s, &[TERM]), vec![0]);
        assert_eq!(step(&mut s, &[N]), vec![BEGIN]);
        // Nothing runs between an end and the next step in NEXT_STEP mode once it settled.
        let mut s = Splitter::new(1, AutoresetMode::NextStep);
        reset(&mut s, None);
        step(&mut s, &[TERM]);
        s.discard(0).unwrap();
        assert_eq!(s.discard(0), Err(Refusal::NoEpisode));
    }

    #[test]
    fn the_held_episode_settles_at_the_next_row_message() {
        let mut s = Splitter::new(1, AutoresetMode::SameStep);
        reset(&mut s, None);
        step(&mut s, &[TERM]);
        step(&mut s, &[N]);
        // Now the new episode is meant.
        assert_eq!(s.metadata_target(0), Ok(Target::Open));
        assert_eq!(s.discard(0), Ok(()));
        assert_eq!(step(&mut s, &[N]), vec![DROP_OPEN]);
    }

    #[test]
    fn a_flush_writes_the_held_episode_and_later_calls_are_refused() {
        let mut s = Splitter::new(1, AutoresetMode::Disabled);
        reset(&mut s, None);
        step(&mut s, &[TRUNC]);
        s.plan_control();
        s.commit_flush();
        assert_eq!(s.discard(0), Err(Refusal::AlreadyFlushed));
        assert_eq!(s.metadata_target(0), Err(Refusal::AlreadyFlushed));
        reset(&mut s, None);
        assert_eq!(s.metadata_target(0), Ok(Target::Open));
    }

    #[test]
    fn abort_then_discard_drops_instead_of_keeping() {
        let mut s = Splitter::new(2, AutoresetMode::NextStep);
        reset(&mut s, None);
        step(&mut s, &[N, N]);
        s.abort(None);
        assert_eq!(s.metadata_target(0), Ok(Target::Open));
        s.discard(1).unwrap();
        assert_eq!(step(&mut s, &[N, N]), vec![END_OPEN, DROP_OPEN]);
    }

    #[test]
    fn a_refused_step_ends_what_it_touched() {
        // Lane 0 runs on, lane 1 ends at the refused step, lane 2 would have autoreset in it.
        let mut s = Splitter::new(3, AutoresetMode::NextStep);
        reset(&mut s, None);
        step(&mut s, &[N, N, TERM]);
        s.plan_step(|l| Some([N, TERM, N][l]));
        assert_eq!(s.refuse(), vec![0, 1]);
        assert_eq!((s.state(0), s.state(1), s.state(2)), (LaneState::Skipping, LaneState::Ended, LaneState::Skipping));
        // The next message ends them (incomplete); lane 1 then autoresets normally, lane 2
        // waits for its env to end the episode whose reset row was lost.
        assert_eq!(step(&mut s, &[N, N, N]), vec![END_OPEN, END_OPEN | BEGIN, 0]);
        assert_eq!(step(&mut s, &[N, N, TERM]), vec![0, STEP, 0]);
        assert_eq!(step(&mut s, &[N, N, N]), vec![0, STEP, BEGIN]);
    }

    #[test]
    fn a_refused_same_step_end_skips_the_episode_it_would_have_started() {
        let mut s = Splitter::new(1, AutoresetMode::SameStep);
        reset(&mut s, None);
        s.plan_step(|_| Some(TERM));
        assert_eq!(s.refuse(), vec![0]);
        assert_eq!(s.state(0), LaneState::Skipping);
        assert_eq!(step(&mut s, &[N]), vec![END_OPEN]);
        assert_eq!(step(&mut s, &[TRUNC]), vec![BEGIN]);
    }

    #[test]
    fn a_refused_reset_keeps_pending_ops() {
        let mut s = Splitter::new(1, AutoresetMode::Disabled);
        reset(&mut s, None);
        step(&mut s, &[N]);
        s.plan_reset(None);
        assert_eq!(s.refuse(), vec![0]);
        assert_eq!(s.state(0), LaneState::Skipping);
        s.plan_control();
        assert_eq!(s.ops(), &[END_OPEN]);
    }

    /// Runs `steps` (flags per lane) through a splitter after a full reset and tallies each
    /// message with rewards of 1 per lane and step; returns (lane, length, terminated) per step.
    fn tally_table(mode: AutoresetMode, steps: &[&[(bool, bool)]]) -> Vec<Vec<(u32, u64, bool)>> {
        let n = steps[0].len();
        let mut s = Splitter::new(n, mode);
        let mut t = Tally::new(n);
        s.plan_reset(None);
        t.apply(s.ops(), false, |_| 1.0);
        s.commit();
        let mut out = Vec::new();
        for flags in steps {
            s.plan_step(|l| Some(flags[l]));
            t.apply(s.ops(), s.planned_steady(), |_| 1.0);
            s.commit();
            assert!(t.ended().iter().all(|e| e.episode_return == e.length as f64));
            out.push(t.ended().iter().map(|e| (e.lane, e.length, e.terminated)).collect());
        }
        out
    }

    #[test]
    fn the_tally_reports_what_each_mode_ends_with_the_lengths_written() {
        let steps: &[&[(bool, bool)]] = &[&[N, N], &[TERM, N], &[N, TRUNC], &[N, N], &[TERM, N]];
        let e = |lane, length, terminated| vec![(lane, length, terminated)];
        // NEXT_STEP: the step after an end is the reset, no transition.
        assert_eq!(
            tally_table(AutoresetMode::NextStep, steps),
            vec![vec![], e(0, 2, true), e(1, 3, false), vec![], e(0, 2, true)]
        );
        // SAME_STEP: the next episode's steps count from the step after the end.
        assert_eq!(
            tally_table(AutoresetMode::SameStep, steps),
            vec![vec![], e(0, 2, true), e(1, 3, false), vec![], e(0, 3, true)]
        );
        // DISABLED: an ended lane records nothing until a masked reset.
        assert_eq!(
            tally_table(AutoresetMode::Disabled, steps),
            vec![vec![], e(0, 2, true), e(1, 3, false), vec![], vec![]]
        );
    }

    #[test]
    fn the_tally_forgets_dropped_aborted_and_reset_episodes() {
        let mut t = Tally::new(3);
        t.apply(&[BEGIN, BEGIN, BEGIN], false, |_| 0.0);
        t.apply(&[STEP, STEP, STEP], true, |l| l as f64);
        t.apply(&[DROP_OPEN, END_OPEN | BEGIN, STEP], false, |_| 5.0);
        assert!(t.ended().is_empty());
        t.apply(&[0, STEP | END | TRUNCATED, STEP | END | TERMINATED | FINAL_SLOT | BEGIN], false, |_| 1.0);
        let ended = t.ended();
        assert_eq!(ended.len(), 2);
        assert_eq!((ended[0].lane, ended[0].length, ended[0].episode_return, ended[0].truncated), (1, 1, 1.0, true));
        assert_eq!((ended[1].lane, ended[1].length, ended[1].episode_return, ended[1].terminated), (2, 3, 8.0, true));
        // Ended episodes are reported once: the next message starts from nothing.
        t.apply(&[0, 0, STEP], false, |_| 1.0);
        assert!(t.ended().is_empty());
    }
}
