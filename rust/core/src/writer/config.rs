//! What a recorder is asked to do: columns, layout, limits and durability. Deserialized from the
//! JSON the Python side builds, so every field has a default a user would expect.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::objstore::leases::LeaseTimes;
use crate::schema::{CodecSpec, ColumnSpec};

use crate::writer::entries::reading::bounds::IntBounds;

/// How a vector env starts the next episode of a sub-env, as gymnasium's `AutoresetMode` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoresetMode {
    /// The step after an episode ends is a reset: its observation starts the next episode and its
    /// action is ignored.
    NextStep,
    /// An ending step returns the next episode's reset observation; the final one comes in
    /// `infos["final_obs"]`.
    SameStep,
    /// Only `reset` starts episodes (with a mask for vector envs); single envs work this way.
    Disabled,
}

impl AutoresetMode {
    pub fn name(self) -> &'static str {
        match self {
            AutoresetMode::NextStep => "next_step",
            AutoresetMode::SameStep => "same_step",
            AutoresetMode::Disabled => "disabled",
        }
    }
}

/// When written bytes are pushed to the disk, not just to the operating system.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Durability {
    /// Every sealed chunk is handed to the OS: survives the process being killed, not power loss.
    Flush,
    /// As `Flush`, plus fsync when the recorder closes.
    FsyncOnClose,
    /// fsync after every batch of chunks.
    FsyncEveryChunk,
    /// fsync at most this often, and at close.
    FsyncInterval(Duration),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecorderConfig {
    #[serde(default = "one")]
    pub num_envs: u32,
    /// Whether arrays carry a leading env axis (vector envs) or not (single envs).
    #[serde(default)]
    pub batched: bool,
    #[serde(default = "disabled")]
    pub autoreset_mode: AutoresetMode,
    /// Observation and action leaf columns; reward, terminated and truncated are added by the core.
    pub columns: Vec<ColumnSpec>,
    pub observation: serde_json::Value,
    pub action: serde_json::Value,
    #[serde(default)]
    pub metadata: serde_json::Value,
    #[serde(default)]
    pub user: serde_json::Value,
    #[serde(default = "max_shard_bytes")]
    pub max_shard_bytes: u64,
    #[serde(default = "ring_bytes")]
    pub ring_bytes: usize,
    /// A column's buffered rows of one lane are sealed into a chunk at this many raw bytes.
    #[serde(default = "chunk_bytes")]
    pub chunk_bytes: usize,
    /// Everything recorded reaches the file within about this long.
    #[serde(default = "flush_interval_s")]
    pub flush_interval_s: f64,
    #[serde(default = "durability")]
    pub durability: String,
    #[serde(default = "flush_interval_s")]
    pub fsync_interval_s: f64,
    /// Wait (GIL released) when the ring is full; otherwise raise.
    #[serde(default = "yes")]
    pub block_when_full: bool,
    /// An index checkpoint is written after this many bytes, so recovery reads indexes, not data.
    #[serde(default = "index_interval_bytes")]
    pub index_interval_bytes: u64,
    /// Store the writer's timelog (a sample per second) in the file, for plots after the fact.
    #[serde(default = "yes")]
    pub timelog: bool,
    /// Rewrite each closed shard without the small chunks the flush timer cut, when that saves
    /// at least 1% of it (`compact`): the file's size then no longer depends on the env's pace.
    #[serde(default = "yes")]
    pub compact_shards: bool,
    /// Codec of info columns, which the core creates on first sight.
    #[serde(default)]
    pub info_codec: CodecSpec,
    /// Codec of custom per-step data columns (`record`); the info codec when absent.
    #[serde(default)]
    pub data_codec: Option<CodecSpec>,
    /// Codec of the column of rendered frames (`render/frame`); the info codec when absent.
    #[serde(default)]
    pub frame_codec: Option<CodecSpec>,
    /// Codec of the reward, terminated and truncated columns.
    #[serde(default)]
    pub flags_codec: CodecSpec,
    /// A store prefix (`s3://bucket/prefix`) the shards go up to, from the recorder's directory
    /// (then a local staging directory) as the writer writes them (see `objstore::uploads`).
    #[serde(default)]
    pub upload_to: Option<String>,
    /// Where shard file names and the Meta record say which program wrote them.
    #[serde(default)]
    pub writer_version: String,
    /// Inclusive bounds of the values of discrete spaces' columns, by column name (see `bounds`).
    #[serde(default)]
    pub value_bounds: BTreeMap<String, IntBounds>,
    /// Keep at most this many transitions in the directory's closed shards (plus the open
    /// shard), deleting the oldest closed shards (see `capacity`). None: keep everything.
    #[serde(default)]
    pub capacity_steps: Option<u64>,
    /// The closed shards the directory held when the recording started, oldest first, with
    /// their transitions: a capacity counts them too.
    #[serde(default)]
    pub prior_shards: Vec<(std::path::PathBuf, u64)>,
    /// A recording to a store renews its lease in the prefix this often (seconds; None: the
    /// default, see `objstore::leases`).
    #[serde(default)]
    pub lease_renew_interval_s: Option<f64>,
    /// Its lease is stale this long after its last renewal (seconds; None: the default).
    #[serde(default)]
    pub lease_ttl_s: Option<f64>,
}

fn one() -> u32 {
    1
}
fn disabled() -> AutoresetMode {
    AutoresetMode::Disabled
}
fn max_shard_bytes() -> u64 {
    1 << 30
}
fn ring_bytes() -> usize {
    // A ring's memory becomes resident once data has passed through all of it, so a larger ring
    // costs memory without helping: 2 MiB holds thousands of small steps, and the writer never
    // kept the loop waiting with it (measured in docs/BENCHMARKS.md, issue 14).
    2 << 20
}
fn chunk_bytes() -> usize {
    1 << 20
}
fn flush_interval_s() -> f64 {
    1.0
}
fn durability() -> String {
    "flush".into()
}
fn yes() -> bool {
    true
}
fn index_interval_bytes() -> u64 {
    16 << 20
}

impl RecorderConfig {
    /// The codec of custom data columns: its own, else the info codec.
    pub fn data_codec(&self) -> CodecSpec {
        self.data_codec.clone().unwrap_or_else(|| self.info_codec.clone())
    }

    /// The codec of the frame column: its own, else the info codec.
    pub fn frame_codec(&self) -> CodecSpec {
        self.frame_codec.clone().unwrap_or_else(|| self.info_codec.clone())
    }

    /// The env count when values carry a leading env axis (vector envs), `None` for one env.
    pub fn rows(&self) -> Option<usize> {
        self.batched.then_some(self.num_envs as usize)
    }

    pub fn from_json(json: &str) -> Result<Self> {
        let config: RecorderConfig =
            serde_json::from_str(json).map_err(|e| Error::Invalid(format!("recorder configuration: {e}")))?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<()> {
        if self.num_envs == 0 {
            return Err(Error::Invalid("num_envs must be at least 1".into()));
        }
        if !self.batched && self.num_envs != 1 {
            return Err(Error::Invalid("an unbatched recorder records exactly one env".into()));
        }
        if self.ring_bytes < 1 << 16 {
            return Err(Error::Invalid(format!("ring_bytes={} is too small (at least 65536)", self.ring_bytes)));
        }
        if self.chunk_bytes == 0 {
            return Err(Error::Invalid("chunk_bytes must be positive".into()));
        }
        if !(self.flush_interval_s > 0.0 && self.flush_interval_s.is_finite()) {
            return Err(Error::Invalid(format!(
                "flush_interval={} must be a positive number of seconds",
                self.flush_interval_s
            )));
        }
        if self.max_shard_bytes < 4096 {
            return Err(Error::Invalid(format!(
                "max_shard_bytes={} is too small (at least 4096)",
                self.max_shard_bytes
            )));
        }
        if self.capacity_steps == Some(0) {
            return Err(Error::Invalid("capacity_steps must be at least 1".into()));
        }
        self.durability()?;
        self.lease_times()?;
        for (name, bounds) in &self.value_bounds {
            let column = self.columns.iter().find(|c| &c.name == name);
            let column = column.ok_or_else(|| Error::Invalid(format!("value_bounds: '{name}' names no column")))?;
            let elements = column.row_elements() as usize;
            bounds
                .check_spec(column.dtype()?, elements)
                .map_err(|why| Error::Invalid(format!("value_bounds of '{name}': {why}")))?;
        }
        Ok(())
    }

    pub fn durability(&self) -> Result<Durability> {
        Ok(match self.durability.as_str() {
            "flush" => Durability::Flush,
            "fsync_close" => Durability::FsyncOnClose,
            "fsync_chunk" => Durability::FsyncEveryChunk,
            "fsync_interval" if self.fsync_interval_s > 0.0 && self.fsync_interval_s.is_finite() => {
                Durability::FsyncInterval(Duration::from_secs_f64(self.fsync_interval_s))
            }
            other => {
                return Err(Error::Invalid(format!(
                    "durability '{other}' is not one of 'flush', 'fsync_close', 'fsync_chunk', 'fsync_interval' \
                     (with a positive fsync_interval)"
                )))
            }
        })
    }

    pub fn flush_interval(&self) -> Duration {
        Duration::from_secs_f64(self.flush_interval_s)
    }

    /// The lease timings of a recording to a store.
    ///
    /// Errors: `Invalid`, naming the option.
    pub fn lease_times(&self) -> Result<LeaseTimes> {
        LeaseTimes::new(self.lease_renew_interval_s, self.lease_ttl_s)
    }
}
