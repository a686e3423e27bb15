//! The caller's side of recording: owns the producer end of the ring and the schema, and starts
//! and stops the writer thread. One `push` per (vector) step: one copy into the ring, no syscall.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rtrb::CopyToUninit;

use super::config::RecorderConfig;
use super::message::{self, EntryKind, EntryRef, MessageHead, MessageKind, Slot, ALL_ENVS};
use super::shard::{new_recording_id, now_ns, ShardWriter};
use super::thread::{Shared, WriterSetup, WriterThread};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::schema::{CodecSpec, ColumnId, ColumnSpec, Role, Timeline};

/// A column the caller adds once recording runs (an info key seen for the first time).
pub struct NewColumn {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub timeline: Timeline,
    /// Rows may be missing: a boolean mask column `<parent>/_<leaf>` is kept beside it.
    pub masked: bool,
    pub codec: CodecSpec,
}

/// Counters for progress reports and benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub steps: u64,
    pub episodes: u64,
    pub bytes_raw: u64,
    pub bytes_written: u64,
    pub ring_capacity: u64,
    pub ring_waits: u64,
}

pub struct Recorder {
    producer: rtrb::Producer<u8>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    config: RecorderConfig,
    columns: Vec<ColumnSpec>,
    by_name: HashMap<String, ColumnId>,
    roles: [ColumnId; 3],
    next_ticket: u64,
    closed: bool,
}

impl Recorder {
    /// Validates the configuration, creates the directory and the first shard (so a bad path
    /// fails here, not later on the writer thread) and starts the writer thread.
    pub fn create(dir: &Path, config: RecorderConfig) -> Result<Self> {
        config.validate()?;
        let mut columns: Vec<ColumnSpec> = Vec::new();
        let mut by_name = HashMap::new();
        let fixed = [
            ("reward", "float64", Role::Reward),
            ("terminated", "bool", Role::Terminated),
            ("truncated", "bool", Role::Truncated),
        ];
        let mut given = config.columns.clone();
        for (name, dtype, role) in fixed {
            if given.iter().any(|c| c.name == name) {
                return Err(Error::schema(name, "this column name is reserved for the core"));
            }
            given.push(ColumnSpec {
                id: 0,
                name: name.into(),
                dtype: dtype.into(),
                shape: vec![],
                timeline: Timeline::Step,
                mask_of: None,
                mask: None,
                role: Some(role),
                codec: config.flags_codec.clone(),
            });
        }
        for mut spec in given {
            spec.id = columns.len() as ColumnId;
            spec.validate()?;
            if spec.mask.is_some() || spec.mask_of.is_some() {
                return Err(Error::schema(&spec.name, "mask columns are made by the core, not given"));
            }
            if by_name.insert(spec.name.clone(), spec.id).is_some() {
                return Err(Error::schema(&spec.name, "two columns have this name"));
            }
            columns.push(spec);
        }
        for (key, tree) in [("observation", &config.observation), ("action", &config.action)] {
            check_layout(tree, &by_name, key)?;
        }
        let roles = [by_name["reward"], by_name["terminated"], by_name["truncated"]];
        let meta = serde_json::json!({
            "metadata": config.metadata,
            "layout": {"observation": config.observation, "action": config.action},
            "user": config.user,
            "num_envs": config.num_envs,
            "batched": config.batched,
            "autoreset_mode": config.autoreset_mode.name(),
            "trajcore_version": if config.writer_version.is_empty() { env!("CARGO_PKG_VERSION") } else { &config.writer_version },
        });
        let meta_json = serde_json::to_vec(&meta).map_err(|e| Error::Invalid(format!("metadata: {e}")))?;

        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let recording_id = new_recording_id();
        let shard = ShardWriter::create(dir, recording_id, 0, &meta_json, &columns, config.durability()?)?;
        let (producer, consumer) = rtrb::RingBuffer::new(config.ring_bytes);
        let shared = Arc::new(Shared::default());
        let setup = WriterSetup {
            config: config.clone(),
            columns: columns.clone(),
            meta_json,
            recording_id,
            shard,
            reward: roles[0],
            terminated: roles[1],
            truncated: roles[2],
        };
        let writer = WriterThread::new(setup, consumer, shared.clone())?;
        let thread = std::thread::Builder::new()
            .name("trajcore-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| Error::WriterStopped(format!("cannot start the writer thread: {e}")))?;
        Ok(Recorder {
            producer,
            shared,
            thread: Some(thread),
            config,
            columns,
            by_name,
            roles,
            next_ticket: 1,
            closed: false,
        })
    }

    pub fn config(&self) -> &RecorderConfig {
        &self.config
    }

    pub fn columns(&self) -> &[ColumnSpec] {
        &self.columns
    }

    pub fn column(&self, id: ColumnId) -> &ColumnSpec {
        &self.columns[id as usize]
    }

    pub fn column_id(&self, name: &str) -> Option<ColumnId> {
        self.by_name.get(name).copied()
    }

    /// Ids of the reward, terminated and truncated columns.
    pub fn role_columns(&self) -> [ColumnId; 3] {
        self.roles
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Adds a column (and its mask column) from now on; earlier rows read as missing.
    pub fn add_column(&mut self, new: NewColumn) -> Result<ColumnId> {
        self.check()?;
        if self.by_name.contains_key(&new.name) {
            return Err(Error::schema(&new.name, "a column of this name exists already"));
        }
        let id = self.columns.len() as ColumnId;
        let mask_name = new.masked.then(|| mask_name(&new.name));
        let mut spec = ColumnSpec {
            id,
            name: new.name,
            dtype: new.dtype.name().into(),
            shape: new.shape,
            timeline: new.timeline,
            mask_of: None,
            mask: mask_name.as_ref().map(|_| id + 1),
            role: None,
            codec: new.codec,
        };
        spec.validate()?;
        let mut specs = vec![spec.clone()];
        if let Some(mask_name) = mask_name {
            if self.by_name.contains_key(&mask_name) {
                return Err(Error::schema(&mask_name, "a column of this name exists already"));
            }
            specs.push(ColumnSpec {
                id: id + 1,
                name: mask_name,
                dtype: "bool".into(),
                shape: vec![],
                timeline: spec.timeline,
                mask_of: Some(id),
                mask: None,
                role: None,
                codec: CodecSpec::default(),
            });
        }
        for s in specs {
            let json = serde_json::to_vec(&s).map_err(|e| Error::Invalid(e.to_string()))?;
            self.push_control(MessageKind::AddColumn, 0, 0, &json, true)?;
            self.by_name.insert(s.name.clone(), s.id);
            self.columns.push(s);
        }
        spec.id = id;
        Ok(id)
    }

    /// The writer thread's error, if it stopped.
    pub fn check(&self) -> Result<()> {
        if self.closed {
            return Err(Error::WriterStopped("the recorder is closed".into()));
        }
        if self.shared.dead.load(Ordering::Acquire) {
            return Err(Error::WriterStopped(self.shared.error_message()));
        }
        Ok(())
    }

    pub fn message_len(&self, head: &MessageHead, entries: &[EntryRef]) -> Result<usize> {
        self.check_message_len(message::encoded_len(head, entries))
    }

    /// Refuses a message that could never fit the ring.
    pub fn check_message_len(&self, len: usize) -> Result<usize> {
        if len > self.producer.buffer().capacity() || len > u32::MAX as usize {
            return Err(Error::Invalid(format!(
                "one step of {len} bytes does not fit the recording buffer of {} bytes (raise ring_bytes)",
                self.producer.buffer().capacity()
            )));
        }
        Ok(len)
    }

    /// Whether a message of `len` bytes fits in the ring right now.
    pub fn fits_now(&self, len: usize) -> bool {
        self.producer.slots() >= len
    }

    /// Waits until `len` bytes are free, or fails if the writer stopped or blocking is off.
    /// Bindings call this with the GIL released.
    pub fn wait_for_space(&mut self, len: usize) -> Result<()> {
        if self.fits_now(len) {
            return Ok(());
        }
        if !self.config.block_when_full {
            return Err(Error::RingFull { capacity: self.producer.buffer().capacity() });
        }
        self.wait_until_fits(len)
    }

    /// Waits, whatever `block_when_full` says, until `len` bytes are free or the writer stops.
    fn wait_until_fits(&mut self, len: usize) -> Result<()> {
        if self.fits_now(len) {
            return Ok(());
        }
        self.shared.ring_waits.fetch_add(1, Ordering::Relaxed);
        let mut pause = Duration::from_micros(20);
        while !self.fits_now(len) {
            self.check()?;
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Copies a message into the ring. The caller made sure it fits (`fits_now`/`wait_for_space`).
    pub fn push(&mut self, head: &MessageHead, entries: &[EntryRef], len: usize) -> Result<()> {
        self.check()?;
        let capacity = self.producer.buffer().capacity();
        let mut chunk = self.producer.write_chunk_uninit(len).map_err(|_| Error::RingFull { capacity })?;
        let (first, second) = chunk.as_mut_slices();
        let mut at = 0usize;
        let mut copy = |src: &[u8]| {
            let mut src = src;
            while !src.is_empty() {
                let dst = if at < first.len() { &mut first[at..] } else { &mut second[at - first.len()..] };
                let n = src.len().min(dst.len());
                src[..n].copy_to_uninit(&mut dst[..n]);
                src = &src[n..];
                at += n;
            }
        };
        // Headers are tiny: gather them in a stack buffer so each costs no call into memmove.
        let mut staged = [0u8; 256];
        let mut staged_len = 0usize;
        message::encode(head, entries, len, |bytes| {
            if bytes.len() <= 64 {
                if staged_len + bytes.len() > staged.len() {
                    copy(&staged[..staged_len]);
                    staged_len = 0;
                }
                staged[staged_len..staged_len + bytes.len()].copy_from_slice(bytes);
                staged_len += bytes.len();
            } else {
                copy(&staged[..staged_len]);
                staged_len = 0;
                copy(bytes);
            }
        });
        copy(&staged[..staged_len]);
        debug_assert_eq!(at, len);
        // SAFETY: `encode` wrote exactly `len` bytes (encoded_len computed that count), so every
        // slot of the chunk is initialized.
        unsafe { chunk.commit_all() };
        Ok(())
    }

    /// A small control message (no GIL to release around the wait: these are rare).
    fn push_control(&mut self, kind: MessageKind, env: u32, arg: u64, data: &[u8], force: bool) -> Result<()> {
        if !force {
            self.check()?;
        }
        let entries = [EntryRef { column: 0, kind: EntryKind::Dense, slot: Slot::Regular, env, mask: None, data }];
        let head = MessageHead { kind, env, time_ns: now_ns(), arg, mask: None };
        let len = self.message_len(&head, &entries)?;
        // Control messages are rare and small: they always wait rather than fail on a full ring.
        self.wait_until_fits(len)?;
        self.push(&head, &entries, len)
    }

    /// Merges a JSON object into the episode metadata of `env`: its running episode, or with
    /// `ended` (or when none runs) the one that just ended.
    pub fn set_episode_metadata(&mut self, env: u32, metadata_json: &str, ended: bool) -> Result<()> {
        self.check_env(env)?;
        match serde_json::from_str::<serde_json::Value>(metadata_json) {
            Ok(serde_json::Value::Object(_)) => {}
            _ => return Err(Error::Invalid("episode metadata must be a JSON object".into())),
        }
        self.push_control(MessageKind::SetMetadata, env, ended as u64, metadata_json.as_bytes(), false)
    }

    pub fn discard(&mut self, env: u32) -> Result<()> {
        self.check_env(env)?;
        self.push_control(MessageKind::Discard, env, 0, &[], false)
    }

    /// Ends running episodes as incomplete (one env, or all with `None`); the env's rows are
    /// ignored until its next episode starts.
    pub fn abort(&mut self, env: Option<u32>) -> Result<()> {
        if let Some(env) = env {
            self.check_env(env)?;
        }
        self.push_control(MessageKind::Abort, env.unwrap_or(ALL_ENVS), 0, &[], false)
    }

    fn check_env(&self, env: u32) -> Result<()> {
        if env >= self.config.num_envs {
            return Err(Error::Invalid(format!(
                "env_index {env} is out of range: this recorder has {} envs",
                self.config.num_envs
            )));
        }
        Ok(())
    }

    /// Blocks until everything pushed so far is written (and synced, if the durability says so).
    pub fn flush(&mut self) -> Result<()> {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.push_control(MessageKind::Flush, 0, ticket, &[], false)?;
        self.wait_ticket(ticket)
    }

    fn wait_ticket(&self, ticket: u64) -> Result<()> {
        let mut pause = Duration::from_micros(50);
        while self.shared.flushed.load(Ordering::Acquire) < ticket {
            if self.shared.dead.load(Ordering::Acquire) {
                return Err(Error::WriterStopped(self.shared.error_message()));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        Ok(())
    }

    /// Writes incomplete episodes, the index and the end record, and stops the writer thread.
    /// Idempotent; reports the writer thread's error if it failed at any point.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let pushed = if self.shared.dead.load(Ordering::Acquire) {
            Ok(())
        } else {
            self.push_control(MessageKind::Close, 0, ticket, &[], true)
        };
        self.closed = true;
        let joined = self.thread.take().map(|t| t.join());
        if let Some(Err(_)) = joined {
            self.shared.fail("the writer thread panicked".into());
        }
        pushed?;
        if self.shared.dead.load(Ordering::Acquire) {
            return Err(Error::WriterStopped(self.shared.error_message()));
        }
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            steps: s.steps.load(Ordering::Relaxed),
            episodes: s.episodes.load(Ordering::Relaxed),
            bytes_raw: s.bytes_raw.load(Ordering::Relaxed),
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            ring_capacity: self.producer.buffer().capacity() as u64,
            ring_waits: s.ring_waits.load(Ordering::Relaxed),
        }
    }

    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.shared.shard_paths.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// `info/episode/r` -> `info/episode/_r`.
pub fn mask_name(name: &str) -> String {
    match name.rsplit_once('/') {
        Some((parent, leaf)) => format!("{parent}/_{leaf}"),
        None => format!("_{name}"),
    }
}

/// Every leaf of a layout tree must name a column.
fn check_layout(tree: &serde_json::Value, columns: &HashMap<String, ColumnId>, what: &str) -> Result<()> {
    use serde_json::Value;
    let bad = |why: String| Error::schema(what, format!("layout: {why}"));
    let Value::Object(node) = tree else { return Err(bad(format!("expected an object, got {tree}"))) };
    match (node.get("leaf"), node.get("dict"), node.get("tuple")) {
        (Some(Value::String(name)), None, None) => {
            if columns.contains_key(name) {
                Ok(())
            } else {
                Err(bad(format!("leaf '{name}' names no column")))
            }
        }
        (None, Some(Value::Array(items)), None) => items.iter().try_for_each(|item| match item {
            Value::Array(pair) if pair.len() == 2 && pair[0].is_string() => check_layout(&pair[1], columns, what),
            _ => Err(bad(format!("dict items are [key, tree] pairs, got {item}"))),
        }),
        (None, None, Some(Value::Array(items))) => items.iter().try_for_each(|t| check_layout(t, columns, what)),
        _ => Err(bad(format!("a node is {{\"leaf\"}}, {{\"dict\"}} or {{\"tuple\"}}, got {tree}"))),
    }
}
