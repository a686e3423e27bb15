//! A problem: damage found while opening or refreshing a dataset (a shard's record that fails
//! its checks, bytes after the last record), what it left out, and where.

use std::path::PathBuf;

/// Damage found while opening (or refreshing): what was left out, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub offset: u64,
    pub why: String,
    /// Episodes this damage took out of the listing: a damaged Episode record's (the count its
    /// own header claims, so approximate), or 1 for an episode left out whose rows are lost.
    pub unlisted: u64,
}

impl Problem {
    /// (file, byte offset, why): how the bindings hand a problem out.
    pub fn parts(&self) -> (String, u64, String) {
        (self.file.display().to_string(), self.offset, self.why.clone())
    }
}

/// As its `parts`, a (file, byte offset, why) list.
impl serde::Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.parts().serialize(s)
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: byte offset {}: {}", self.file.display(), self.offset, self.why)
    }
}

impl Problem {
    pub(crate) fn new(file: impl Into<PathBuf>, offset: u64, why: impl Into<String>) -> Self {
        Problem { file: file.into(), offset, why: why.into(), unlisted: 0 }
    }

    /// A problem that took `unlisted` episodes out of the listing.
    pub(crate) fn unlisting(mut self, unlisted: u64) -> Self {
        self.unlisted = unlisted;
        self
    }

    pub(crate) fn to_error(&self) -> crate::Error {
        crate::Error::corrupt(&self.file, self.offset, &self.why)
    }
}
