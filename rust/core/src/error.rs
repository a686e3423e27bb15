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

/// What a caller tells errors apart by: the Python layer raises one class per kind (damage, a
/// value that does not fit its column, a bad argument, an index past the end, the recorder,
/// I/O, a missing path), so which variant is which is decided here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Corrupt,
    Schema,
    Invalid,
    OutOfRange,
    Recorder,
    Io,
    NotFound,
}

/// An error as an OS error: errno, its text and the file it is about (as Python's `OSError`
/// takes them, so `e.errno` and `e.filename` say what failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsError {
    pub errno: i32,
    pub strerror: String,
    pub filename: Option<String>,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotTrajcore { .. } | Error::Corrupt { .. } | Error::Version { .. } | Error::Unsupported { .. } => {
                ErrorKind::Corrupt
            }
            Error::Schema { .. } => ErrorKind::Schema,
            Error::Invalid(_) => ErrorKind::Invalid,
            Error::OutOfRange(_) => ErrorKind::OutOfRange,
            Error::RingFull { .. }
            | Error::WriterStopped(_)
            | Error::ForeignProcess { .. }
            | Error::Interrupted(_)
            | Error::Upload { .. } => ErrorKind::Recorder,
            Error::Io { .. } => ErrorKind::Io,
            Error::NotFound { .. } | Error::NoShard { .. } => ErrorKind::NotFound,
        }
    }

    /// The OS error this error stands for, if any: a missing path is ENOENT about that path; a
    /// failed system call keeps its number, the whole message as its text. An I/O error without
    /// a number (a store's) is none: its message alone, no "[Errno 0]" before it.
    pub fn os_error(&self) -> Option<OsError> {
        let missing = |path: &PathBuf, why: &str| OsError {
            errno: libc::ENOENT,
            strerror: why.to_string(),
            filename: Some(path.display().to_string()),
        };
        match self {
            Error::Io { source, .. } => {
                source.raw_os_error().map(|errno| OsError { errno, strerror: self.to_string(), filename: None })
            }
            Error::NotFound { path } => Some(missing(path, "No such file or directory")),
            Error::NoShard { path, why } => Some(missing(path, why)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_kind_and_os_error() {
        let io = |errno| Error::Io { path: "f".into(), source: std::io::Error::from_raw_os_error(errno) };
        let store = Error::Io { path: "s3://b/k".into(), source: std::io::Error::other("503") };
        let missing = |errno: i32, why: &str, file: &str| {
            Some(OsError { errno, strerror: why.into(), filename: Some(file.into()) })
        };
        let cases: Vec<(Error, ErrorKind, Option<OsError>)> = vec![
            (Error::NotTrajcore { path: "f".into(), why: "magic".into() }, ErrorKind::Corrupt, None),
            (Error::corrupt("f", 8, "checksum"), ErrorKind::Corrupt, None),
            (Error::Version { path: "f".into(), found: "9.0".into(), supported: 1 }, ErrorKind::Corrupt, None),
            (Error::Unsupported { path: "f".into(), why: "codec".into() }, ErrorKind::Corrupt, None),
            (Error::schema("obs", "shape"), ErrorKind::Schema, None),
            (Error::Invalid("n".into()), ErrorKind::Invalid, None),
            (Error::OutOfRange("step 9 of 3".into()), ErrorKind::OutOfRange, None),
            (Error::RingFull { capacity: 1, detail: String::new() }, ErrorKind::Recorder, None),
            (Error::WriterStopped("disk".into()), ErrorKind::Recorder, None),
            (Error::ForeignProcess { owner: 1 }, ErrorKind::Recorder, None),
            (Error::Interrupted("signal".into()), ErrorKind::Recorder, None),
            (Error::Upload { url: "s3://b".into(), why: "denied".into() }, ErrorKind::Recorder, None),
            (store, ErrorKind::Io, None),
            (
                Error::io("f", std::io::Error::from_raw_os_error(libc::ENOENT)),
                ErrorKind::NotFound,
                missing(libc::ENOENT, "No such file or directory", "f"),
            ),
            (
                Error::NoShard { path: "d".into(), why: "no shard below".into() },
                ErrorKind::NotFound,
                missing(libc::ENOENT, "no shard below", "d"),
            ),
        ];
        for (error, kind, os) in cases {
            assert_eq!(error.kind(), kind, "{error}");
            assert_eq!(error.os_error(), os, "{error}");
        }
        let full = io(libc::ENOSPC);
        let want = OsError { errno: libc::ENOSPC, strerror: full.to_string(), filename: None };
        assert_eq!((full.kind(), full.os_error()), (ErrorKind::Io, Some(want)));
    }
}
