//! Annotations: a column added to a recorded dataset without rewriting it (a reward model's
//! score, a success label), written as a sidecar file beside the shards, in the same format.
//!
//! A sidecar is a shard file of the recording it annotates (same recording id in its header)
//! with the `ANNOTATION` required flag, a Meta record saying which annotation and version it is
//! and which episodes it covers (`sidecar`), two Column records (`data/<name>` and its mask), and
//! Chunks records on the lane row numbers of the episodes' steps. Lane rows are unique per
//! recording, so a reader joins the sidecar's chunks to the recording's rows as it joins a
//! shard's (`reader::catalog::annotations`): every read sees the column as custom data.
//!
//! The decisions are pure: which rows each given value goes to (`matching`), and which version
//! of an annotation readers take (`versions`); the tool that writes a sidecar (`crate::annotate`)
//! and the reader only move bytes around them. Nothing here reads or writes files.

pub mod matching;
pub mod sidecar;
pub mod versions;

pub use matching::{place, Given, Listed, Placed};
pub use sidecar::{check_name, AnnotationMeta, Span};
pub use versions::{latest, next_version, Candidate};
