//! What a dataset says about itself, asked by name (`_core.Dataset.report` in Python): which
//! questions there are, which need a recording, and what each answer holds, decided here so
//! the binding has one path for all of them. Answers are JSON text.

use serde_json::json;

use crate::reader::{verify_dataset, Dataset};
use crate::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The listing as it is now: problems (damage found at open or by a verification at open)
    /// and notices (files replaced or deleted since opening), each [file, byte offset, what];
    /// episodes_unlisted; shards and shard_sizes; damaged_episodes (found by reads, lenient
    /// mode) and evicted_episodes (rows in shards a bounded recording deleted), ascending.
    Listing,
    /// The decoded-chunk cache: lru_bytes (its bound), shared_bytes (the shared store's size),
    /// decodes (chunks this process decoded), shared_fd (the store's descriptor, or null).
    CacheStats,
    /// Transitions the bounded recordings of this directory deleted (their eviction log; a
    /// request for a store prefix).
    EvictedSteps,
    /// A recording's Meta record (dataset metadata, layout, user JSON).
    Meta(usize),
    /// Where damage lost descriptions of a recording's columns (so columns may be missing):
    /// [file, byte offset, why], or null.
    SchemaDamage(usize),
    /// The timelog a recording's writer stored: [samples, damage that left some out].
    Timelog(usize),
    /// The annotation sidecars found (`Dataset::annotations`): recording, name, version, per,
    /// episodes, path, taken and problem of each.
    Annotations,
    /// A recording's column specs (`ColumnSpec`: name, dtype, shape, timeline, mask, ...).
    Columns(usize),
    /// Storage per column of each recording, from the index (`Dataset::column_stats`).
    ColumnStats,
    /// [recording, transitions] of each shard, in `shards` order (`Dataset::shard_steps`).
    ShardSteps,
    /// How many recordings the dataset holds.
    NumRecordings,
    /// What a verification at open left out (`Exclusions::to_json`), or null when nothing was:
    /// what a pickled dataset reopens with.
    Exclusions,
    /// Every checksum checked and every chunk decoded (`verify_dataset`): the `VerifyReport`.
    /// Asked of a dataset already open, so that a caller with more checks opens it once.
    Verify,
}

impl Report {
    /// The report `name` asks for; `recording` is the recording it is about, for those about one.
    ///
    /// Errors: `Invalid` (an unknown name, or a recording missing or given where none is asked).
    pub fn parse(name: &str, recording: Option<usize>) -> Result<Report> {
        let report = match name {
            "listing" => Report::Listing,
            "cache_stats" => Report::CacheStats,
            "evicted_steps" => Report::EvictedSteps,
            "annotations" => Report::Annotations,
            "column_stats" => Report::ColumnStats,
            "shard_steps" => Report::ShardSteps,
            "num_recordings" => Report::NumRecordings,
            "exclusions" => Report::Exclusions,
            "verify" => Report::Verify,
            "columns" => Report::Columns(recording.unwrap_or_default()),
            "meta" => Report::Meta(recording.unwrap_or_default()),
            "schema_damage" => Report::SchemaDamage(recording.unwrap_or_default()),
            "timelog" => Report::Timelog(recording.unwrap_or_default()),
            _ => return Err(Error::Invalid(format!("no report named '{name}'"))),
        };
        let about_one =
            matches!(report, Report::Meta(_) | Report::SchemaDamage(_) | Report::Timelog(_) | Report::Columns(_));
        if about_one != recording.is_some() {
            let need = if about_one { "is about one recording: give its index" } else { "takes no recording" };
            return Err(Error::Invalid(format!("report '{name}' {need}")));
        }
        Ok(report)
    }
}

impl Dataset {
    /// The answer to `report`, as JSON.
    ///
    /// Errors: `OutOfRange` (no such recording), and `EvictedSteps`' errors.
    pub fn report(&self, report: Report) -> Result<String> {
        let value = match report {
            Report::Listing => json!({
                "problems": self.problems(),
                "notices": self.notices(),
                "episodes_unlisted": self.episodes_unlisted(),
                "shards": self.shard_paths().iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "shard_sizes": self.shard_sizes(),
                "damaged_episodes": self.view().damaged_episodes(),
                "evicted_episodes": self.evicted_episodes(),
            }),
            Report::CacheStats => {
                let s = self.cache_stats();
                json!({"lru_bytes": s.lru_bytes, "shared_bytes": s.shared_bytes, "decodes": s.decodes,
                       "shared_fd": self.shared_chunks_fd()})
            }
            Report::EvictedSteps => json!(self.evicted_steps()?),
            Report::Meta(r) => return Ok(self.recording(r)?.meta_json.clone()),
            Report::SchemaDamage(r) => json!(self.recording(r)?.schema_damage),
            Report::Timelog(r) => json!(self.timelog(r)),
            Report::Annotations => json!(self.annotations()),
            // Serialized straight from the structs, keeping their field order (a `Value` sorts keys).
            Report::Columns(r) => return in_field_order(&self.recording(r)?.columns),
            Report::ColumnStats => return in_field_order(&self.column_stats()),
            Report::ShardSteps => json!(self.shard_steps()),
            Report::NumRecordings => json!(self.recordings().len()),
            Report::Exclusions if self.exclusions().is_empty() => json!(null),
            Report::Exclusions => return Ok(self.exclusions().to_json()),
            Report::Verify => return in_field_order(&verify_dataset(self)?),
        };
        Ok(value.to_string())
    }
}

/// `value` as JSON, its objects' keys in the order of the struct's fields.
fn in_field_order(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Invalid(format!("a report does not serialize: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_recordings_pick_the_report() {
        let table: [(&str, Option<usize>, Option<Report>); 21] = [
            ("listing", None, Some(Report::Listing)),
            ("cache_stats", None, Some(Report::CacheStats)),
            ("evicted_steps", None, Some(Report::EvictedSteps)),
            ("meta", Some(2), Some(Report::Meta(2))),
            ("schema_damage", Some(0), Some(Report::SchemaDamage(0))),
            ("timelog", Some(1), Some(Report::Timelog(1))),
            ("annotations", None, Some(Report::Annotations)),
            ("annotations", Some(0), None),
            ("listing", Some(0), None),
            ("meta", None, None),
            ("timelog", None, None),
            ("columns", Some(3), Some(Report::Columns(3))),
            ("column_stats", None, Some(Report::ColumnStats)),
            ("shard_steps", None, Some(Report::ShardSteps)),
            ("columns", None, None),
            ("shard_steps", Some(0), None),
            ("num_recordings", None, Some(Report::NumRecordings)),
            ("exclusions", None, Some(Report::Exclusions)),
            ("exclusions", Some(1), None),
            ("verify", None, Some(Report::Verify)),
            ("verify", Some(0), None),
        ];
        for (name, recording, want) in table {
            let got = Report::parse(name, recording);
            match want {
                Some(want) => assert_eq!(got.unwrap(), want, "{name} {recording:?}"),
                None => assert!(matches!(got, Err(Error::Invalid(_))), "{name} {recording:?}: {got:?}"),
            }
        }
    }
}
