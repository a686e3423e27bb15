//! A dataset as reads see it: the catalog to look up where rows are, the store to read them
//! through. Every read (`rows`, `gather`, `scan`, `batch`, `lenient`, `salvage`, ...) is a
//! method of this view, so none of them depends on `Dataset`, the façade that owns the two and
//! hands the view out (`Dataset::view`); users of the core call the reads on the view too: one
//! signature per read, no forwarding layer.

use std::path::Path;

use super::catalog::{Catalog, EpisodeRef, Recording};
use super::store::Store;
use super::OpenOptions;
use crate::error::{Error, Result};
use crate::reader::integrity::exclusions::EpisodeKey;
use crate::reader::integrity::found_damage::ReadDamage;
use crate::reader::reads::steps::EpisodeSet;
use crate::schema::ColumnId;

#[derive(Clone, Copy)]
pub struct DatasetView<'d> {
    /// The dataset's path (a shard file, or a directory of them).
    pub(crate) root: &'d Path,
    pub(crate) catalog: &'d Catalog,
    pub(crate) store: &'d Store,
    pub(crate) read_damage: &'d ReadDamage,
    pub(crate) opts: &'d OpenOptions,
}

impl<'d> DatasetView<'d> {
    pub fn episode(&self, episode: usize) -> Result<&'d EpisodeRef> {
        self.catalog.episode(episode)
    }

    pub fn episodes(&self) -> &'d [EpisodeRef] {
        &self.catalog.episodes
    }

    pub fn recording(&self, recording: usize) -> Result<&'d Recording> {
        self.catalog.recording(recording)
    }

    pub fn recordings(&self) -> &'d [Recording] {
        &self.catalog.recordings
    }

    pub fn column_id(&self, recording: usize, name: &str) -> Option<ColumnId> {
        self.catalog.column_id(recording, name)
    }

    pub fn episode_rows(&self, episode: usize, column: ColumnId) -> Result<(u64, u64)> {
        self.catalog.episode_rows(episode, column)
    }

    pub fn path(&self) -> &'d Path {
        self.root
    }

    /// A subset of the episodes (dataset indexes, in the order given; repeats allowed) to sample
    /// from, with its own step numbering.
    pub fn episode_set(&self, episodes: &[usize]) -> Result<EpisodeSet> {
        let lengths =
            episodes.iter().map(|&i| self.episode(i).map(|e| e.summary.length)).collect::<Result<Vec<_>>>()?;
        Ok(EpisodeSet::subset(episodes.to_vec(), lengths))
    }

    /// The episode's metadata JSON ("{}" if none), read from its Episode record.
    pub fn episode_metadata(&self, episode: usize) -> Result<String> {
        let e = self.episode(episode)?;
        self.store.episode_metadata(e.shard, &e.summary)
    }

    pub fn options(&self) -> &'d OpenOptions {
        self.opts
    }

    /// The key of a listed episode.
    pub fn episode_key(&self, episode: usize) -> Result<EpisodeKey> {
        let e = self.episode(episode)?;
        Ok(EpisodeKey::of(self.catalog.recordings[e.recording].id, &e.summary))
    }

    /// The error for a column name no recording lists: `Corrupt` when a recording lost column
    /// descriptions (the name may be one of them), else `Schema`.
    pub fn no_such_column(&self, column: &str) -> Error {
        match self.catalog.recordings.iter().find_map(|r| r.schema_damage.as_ref()) {
            Some(p) => Error::corrupt(&p.file, p.offset, format!("column '{column}' is unreadable: {}", p.why)),
            None => Error::schema(column, "no such column in this dataset"),
        }
    }
}
