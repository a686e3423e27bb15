//! The background writer thread's loop: takes messages off the ring, hands each to `episodes`
//! (which turns the lane ops decided by `autoreset` on the caller's side into rows and episodes)
//! and lets the `sink` seal and write what they made: full chunks as they fill, everything twice
//! per flush interval (with a progress part of each running episode, so readers anywhere list
//! its steps), and the rest at close. It also keeps the timelog's clock.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::config::RecorderConfig;
use super::episodes::Episodes;
use super::message::{self, Message, MessageKind};
use super::shared::Shared;
use super::timelog::{self, Stage};
use crate::error::{Error, Result};
use crate::objstore::uploads::UploadQueue;
use crate::schema::{ColumnId, ColumnSpec};
use crate::writer::files::shard::{now_ns, ShardWriter};
use crate::writer::files::sink::Sink;

const IDLE_SLEEP: Duration = Duration::from_millis(1);

/// Faults a test of the recorder's failure handling asks the writer thread for; none in normal
/// use (the Python bindings take them as a keyword of their own, never from the config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Panic when handling this step (1-based count of Step messages).
    pub panic_at_step: Option<u64>,
    /// Sleep this long per Step message (a writer that cannot keep up).
    pub slow_step_ms: u64,
}

pub struct WriterSetup {
    pub config: RecorderConfig,
    pub columns: Vec<ColumnSpec>,
    pub meta_json: Vec<u8>,
    pub recording_id: [u8; 16],
    pub shard: ShardWriter,
    pub reward: ColumnId,
    pub faults: Faults,
    /// Where the sink says what it wrote, when the recording goes up to a store.
    pub uploads: Option<UploadQueue>,
}

pub struct WriterThread {
    flush_interval: Duration,
    episodes: Episodes,
    sink: Sink,
    faults: Faults,
    /// Taken by `run_inner` for the thread's lifetime.
    consumer: Option<rtrb::Consumer<u8>>,
    shared: Arc<Shared>,
    /// Messages taken off the ring so far.
    messages_handled: u64,
}

impl WriterThread {
    pub fn new(setup: WriterSetup, consumer: rtrb::Consumer<u8>, shared: Arc<Shared>) -> Result<Self> {
        let config = setup.config;
        let episodes = Episodes::new(config.num_envs, setup.columns, setup.reward, config.chunk_bytes);
        let sink = Sink::new(&config, setup.meta_json, setup.recording_id, setup.shard, shared.clone(), setup.uploads)?;
        Ok(WriterThread {
            flush_interval: config.flush_interval(),
            episodes,
            sink,
            faults: setup.faults,
            consumer: Some(consumer),
            shared,
            messages_handled: 0,
        })
    }

    /// Runs until a Close message has been handled or an error stops it. A panic is caught and
    /// reported like an error, so the caller's waits end and say why.
    pub fn run(mut self) {
        let shared = self.shared.clone();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_inner())) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => shared.fail(e.to_string()),
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into());
                shared.fail(format!("the writer thread panicked: {why}"));
            }
        }
    }

    fn run_inner(&mut self) -> Result<()> {
        let mut consumer = self.consumer.take().ok_or_else(|| Error::WriterStopped("the ring is gone".into()))?;
        // Twice per flush interval, on a fixed cadence (not from the end of the last cycle): a
        // step waits at most half an interval for its flush, and the writer may fall half an
        // interval behind (the recorder's pacing stops the env there), so every step is in the
        // files within one flush interval, even on a machine that holds the writer up a while.
        let interval = self.flush_interval / 2;
        let mut next_cycle = Instant::now() + interval;
        let mut scratch = Vec::new();
        let capacity = consumer.buffer().capacity().max(1) as f64;
        loop {
            let mut handled = 0;
            self.sink.clock.note_ring_fill(consumer.slots() as f64 / capacity);
            while handled < 1024 {
                let Some(len) = next_message_len(&mut consumer) else { break };
                let (started, nested) = (Instant::now(), self.sink.clock.nested());
                // The producer commits whole messages, so all of it is there.
                let chunk = consumer.read_chunk(len).map_err(|e| Error::WriterStopped(format!("ring: {e}")))?;
                let (a, b) = chunk.as_slices();
                // Decode in place unless the message wraps around the ring's end (rare).
                let bytes: &[u8] = if b.is_empty() {
                    a
                } else {
                    scratch.clear();
                    scratch.extend_from_slice(a);
                    scratch.extend_from_slice(b);
                    &scratch
                };
                handled += 1;
                let msg = message::decode(bytes, self.episodes.num_lanes()).map_err(Error::WriterStopped)?;
                let closed = self.handle(msg)?;
                self.messages_handled += 1;
                self.shared.handled.store(self.messages_handled, Ordering::Release);
                chunk.commit_all();
                if closed {
                    return Ok(()); // its last timelog sample was taken in `close`
                }
                // What the message sealed or wrote (a flush) is timed in its own stage.
                let copied = started.elapsed().saturating_sub(self.sink.clock.nested().saturating_sub(nested));
                self.sink.clock.add(Stage::Copy, copied);
                self.shared.bytes_raw.fetch_add(self.episodes.take_raw_bytes(), Ordering::Relaxed);
                if self.episodes.seal_wanted() {
                    self.sink.write_chunks(&mut self.episodes, false)?;
                }
                if Instant::now() >= next_cycle {
                    break;
                }
            }
            if Instant::now() >= next_cycle {
                // Every row is in the file after this: running episodes are listed up to it, so
                // another process (or an open after a kill) sees their steps too.
                self.episodes.progress_parts(now_ns());
                self.sink.cycle(&mut self.episodes)?;
                next_cycle += interval;
                if next_cycle <= Instant::now() {
                    next_cycle = Instant::now() + interval;
                }
            }
            if self.sink.clock.due(Instant::now()) {
                self.end_timelog_sample(consumer.slots() as f64 / capacity);
            }
            if handled == 0 {
                if consumer.is_abandoned() && consumer.is_empty() {
                    // The recorder was dropped without close (its owner crashed): finish the file.
                    self.close()?;
                    return Ok(());
                }
                // Sleep a whole millisecond: the ring holds what arrives meanwhile, and waking
                // per message would steal the env loop's core on small machines.
                self.sink.clock.time(Stage::Idle, || std::thread::sleep(IDLE_SLEEP));
            }
        }
    }

    /// Ends the timelog sample being filled and publishes it.
    fn end_timelog_sample(&mut self, ring_fill: f64) {
        let s = &self.shared;
        let totals = timelog::Totals {
            messages: self.messages_handled,
            steps: s.steps.load(Ordering::Relaxed),
            bytes_raw: s.bytes_raw.load(Ordering::Relaxed),
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            ring_waits: s.ring_waits.load(Ordering::Relaxed),
            backlog_waits: s.backlog_waits.load(Ordering::Relaxed),
            producer_wait_ns: s.timelog.producer_wait_ns.load(Ordering::Relaxed),
        };
        let sample = self.sink.clock.close(Instant::now(), now_ns(), totals, ring_fill);
        self.sink.keep_timelog_sample(sample);
    }

    /// Applies one message; true when it was Close.
    fn handle(&mut self, mut msg: Message) -> Result<bool> {
        if msg.kind == MessageKind::Step {
            self.inject_faults();
        }
        if msg.time_ns == 0 {
            // The caller leaves the clock to us (it costs the step path); we lag it by ~1 ms.
            msg.time_ns = now_ns();
        }
        let episodes = &mut self.episodes;
        match msg.kind {
            MessageKind::Step | MessageKind::Reset => {
                if msg.kind == MessageKind::Reset {
                    episodes.note_reset_columns(&msg);
                }
                episodes.settle(msg.ops, true, true)?;
                // Nothing is held now: the moment to start a new shard, before this message's rows.
                self.sink.roll_over_if_full(episodes)?;
                episodes.apply(msg.ops, Some(&msg), msg.time_ns)?;
                if msg.kind == MessageKind::Step {
                    self.shared.steps.fetch_add(1, Ordering::Relaxed);
                }
            }
            MessageKind::AddColumn => {
                let entry = msg.entries.first().ok_or_else(|| Error::WriterStopped("AddColumn without spec".into()))?;
                let spec: ColumnSpec = serde_json::from_slice(entry.data)
                    .map_err(|e| Error::WriterStopped(format!("column spec: {e}")))?;
                self.sink.add_column(&spec)?;
                episodes.install_column(spec);
            }
            MessageKind::SetMetadata => {
                episodes.set_metadata(msg.env as usize, msg.arg == 1, json_object(&msg, "episode metadata")?)?;
            }
            MessageKind::StartLost => episodes.mark_start_lost(msg.env as usize)?,
            MessageKind::SetDefaults => episodes.set_defaults(json_object(&msg, "episode defaults")?),
            MessageKind::Ops => {
                // Time only: no rows, and what ended at the last step stays reachable.
                episodes.settle(msg.ops, false, false)?;
                episodes.apply(msg.ops, None, msg.time_ns)?;
            }
            MessageKind::Flush => {
                self.settle_control(&msg)?;
                self.episodes.progress_parts(now_ns());
                self.sink.cycle(&mut self.episodes)?;
                self.shared.flushed.store(msg.arg, Ordering::Release);
            }
            MessageKind::Close => {
                self.settle_control(&msg)?;
                self.close()?;
                self.shared.flushed.store(msg.arg, Ordering::Release);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The ops of a Flush or Close: what the last row message ended is settled, then the pending
    /// drops and ends apply now.
    fn settle_control(&mut self, msg: &Message) -> Result<()> {
        self.episodes.settle(msg.ops, false, true)?;
        self.episodes.apply(msg.ops, None, now_ns())
    }

    /// The faults a test asked for (`Faults`), at each Step message.
    fn inject_faults(&self) {
        if self.faults == Faults::default() {
            return;
        }
        let steps = self.shared.steps.load(Ordering::Relaxed) + 1;
        if self.faults.panic_at_step == Some(steps) {
            panic!("test fault: panic at step {steps}");
        }
        if self.faults.slow_step_ms > 0 {
            std::thread::sleep(Duration::from_millis(self.faults.slow_step_ms));
        }
    }

    /// Writes everything, then the episodes still running (incomplete, last), the timelog, the
    /// index and End.
    fn close(&mut self) -> Result<()> {
        self.sink.write_all(&mut self.episodes)?;
        // The last sample goes in the file too (it leaves out the final index and End record).
        self.end_timelog_sample(0.0);
        self.sink.finish(&self.episodes)
    }
}

/// The JSON object a SetMetadata or SetDefaults message carries (its single entry's data).
fn json_object(msg: &Message, what: &str) -> Result<serde_json::Map<String, Value>> {
    let entry = msg.entries.first().ok_or_else(|| Error::WriterStopped(format!("{what} without JSON")))?;
    match serde_json::from_slice::<Value>(entry.data) {
        Ok(Value::Object(update)) => Ok(update),
        _ => Err(Error::WriterStopped(format!("{what} is not a JSON object"))),
    }
}

/// The length of the next message in the ring, if a whole one is there.
fn next_message_len(consumer: &mut rtrb::Consumer<u8>) -> Option<usize> {
    if consumer.slots() < 4 {
        return None;
    }
    let chunk = consumer.read_chunk(4).ok()?;
    let (a, b) = chunk.as_slices();
    let mut len = [0u8; 4];
    len[..a.len()].copy_from_slice(a);
    len[a.len()..].copy_from_slice(b);
    Some(u32::from_le_bytes(len) as usize)
}

impl Faults {
    /// The faults a test asks for, as JSON (`{"panic_at_step": 3}`).
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| Error::Invalid(format!("test_faults: {e}")))
    }
}
