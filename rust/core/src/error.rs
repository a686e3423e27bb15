//! The one error type of the core. Messages name the bad value and what was expected, because
//! they reach Python users verbatim.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not a trajcore file at all (bad magic, unreadable header).
    #[error("{path}: not a trajcore file: {why}")]
    NotTrajcore { path: PathBuf, why: String },

    /// Damage inside a trajcore file: a checksum, a length or a reference does not hold.
    #[error("{path}: corrupt at byte offset {offset}: {why}")]
    Corrupt { path: PathBuf, offset: u64, why: String },

    /// The file was written by a newer, incompatible major version.
    #[error("{path}: format version {found} is not supported (this build reads major version {supported})")]
    Version { path: PathBuf, found: String, supported: u16 },

    /// The file needs a feature this version cannot read (it was written by a newer one).
    #[error("{path}: {why}")]
    Unsupported { path: PathBuf, why: String },

    /// A value does not fit the column it is written to.
    #[error("column '{column}': {why}")]
    Schema { column: String, why: String },

    /// Bad argument or option.
    #[error("{0}")]
    Invalid(String),

    /// An index (of an episode, a step, a window, a recording) past the end of what it counts;
    /// the message names the index and the count.
    #[error("{0}")]
    OutOfRange(String),

    /// The ring buffer is full and the caller asked not to wait.
    #[error("the recording buffer is full ({capacity} bytes): the writer thread cannot keep up{detail}")]
    RingFull { capacity: usize, detail: String },

    /// The writer thread failed or was closed; the message says why.
    #[error("the writer thread stopped: {0}")]
    WriterStopped(String),

    /// A recorder used in another process than the one that made it (after a fork).
    #[error(
        "this recorder belongs to process {owner}: a forked child cannot use it (its writer thread \
         and file stay with that process; make a new recorder in the child)"
    )]
    ForeignProcess { owner: u32 },

    /// A wait was ended by the caller's interrupt check (a signal, in Python).
    #[error("interrupted: {0}")]
    Interrupted(String),

    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    /// Uploading a recording to a store failed past the store client's retries; `why` says
    /// what failed and where the shards are kept.
    #[error("{url}: {why}")]
    Upload { url: String, why: String },

    #[error("{path}: file not found")]
    NotFound { path: PathBuf },

    /// A directory that holds no shard (see `reader::no_shard`); `why` says what is below it.
    #[error("{path}: {why}")]
    NoShard { path: PathBuf, why: String },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::NotFound { path }
        } else {
            Error::Io { path, source }
        }
    }

    pub fn corrupt(path: impl Into<PathBuf>, offset: u64, why: impl Into<String>) -> Self {
        Error::Corrupt { path: path.into(), offset, why: why.into() }
    }

    pub fn schema(column: impl Into<String>, why: impl Into<String>) -> Self {
        Error::Schema { column: column.into(), why: why.into() }
    }
}
