//! `uploads` in a build without the `remote` feature: recording to a store is refused by name
//! (see `remote_off`).

use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};

/// Never made: `Uploads::start` refuses.
#[derive(Clone, Debug)]
pub enum UploadQueue {}

impl UploadQueue {
    pub fn opened(&self, _shard: &Path) {
        match *self {}
    }

    pub fn flushed(&self) {
        match *self {}
    }

    pub fn sealed(&self, _shard: &Path) {
        match *self {}
    }

    pub fn evicted(&self, _shards: &[std::path::PathBuf], _log: &Path) {
        match *self {}
    }
}

pub enum Uploads {}

impl Uploads {
    pub fn start(
        url: &str,
        _staging: &Path,
        _interval: Duration,
        _recording_id: [u8; 16],
        _lease: super::leases::LeaseTimes,
    ) -> Result<Uploads> {
        let why = "this trajcore was built without object storage (the core's `remote` feature)".into();
        Err(Error::Unsupported { path: url.into(), why })
    }

    pub fn queue(&self) -> UploadQueue {
        match *self {}
    }

    pub fn backlog_peak(&self) -> usize {
        match *self {}
    }

    pub fn bytes_uploaded(&self) -> u64 {
        match *self {}
    }

    pub fn failure(&self) -> Option<String> {
        match *self {}
    }

    pub fn close(&mut self) -> Result<()> {
        match *self {}
    }

    pub fn deletions_left(&mut self) -> Option<String> {
        match *self {}
    }
}
