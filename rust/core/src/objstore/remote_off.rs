//! `remote` in a build without the `remote` feature (the fuzz targets: local bytes only, built
//! without the network client and its hundred crates). URLs are still recognised, so each is
//! refused by name instead of being read as a local path; no `RemoteObject` is ever made. Only
//! what the reader calls is here (the bindings, which configure stores and count requests,
//! always build with the feature).

use std::ops::Range;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::objstore::url::Location;

fn refused(url: &str) -> Error {
    let why = "this trajcore was built without object storage (the core's `remote` feature)".into();
    Error::Unsupported { path: url.into(), why }
}

pub(crate) fn count_chunk_bytes(_bytes: u64) {}

pub(crate) type Listed = Vec<(Location, u64, Option<String>)>;

pub(crate) fn list(_location: &Location, url: &str) -> Result<Listed> {
    Err(refused(url))
}

pub(crate) fn list_with_folders(_location: &Location, url: &str) -> Result<(Listed, Vec<String>)> {
    Err(refused(url))
}

pub(crate) fn get_whole(url: &str) -> Result<Option<Bytes>> {
    Err(refused(url))
}

/// No value: every way to one (`open`, `listed`) refuses.
#[derive(Debug)]
pub(crate) enum RemoteObject {}

impl RemoteObject {
    pub fn open(url: &str) -> Result<RemoteObject> {
        Err(refused(url))
    }

    pub fn listed(location: Location, _len: u64, _e_tag: Option<&str>) -> Result<RemoteObject> {
        Err(refused(&location.url()))
    }

    pub fn size(&self) -> u64 {
        match *self {}
    }

    pub fn read(&self, _offset: u64, _len: u64) -> Result<Bytes> {
        match *self {}
    }

    pub fn keep_copy(&self, _offset: u64, _bytes: Bytes) {
        match *self {}
    }

    pub fn opened(&self) {
        match *self {}
    }

    pub fn holds(&self, _range: &Range<u64>) -> bool {
        match *self {}
    }

    pub fn prefetch(&self, _ranges: &[Range<u64>]) -> Result<()> {
        match *self {}
    }

    pub fn failure(&self) -> Option<Error> {
        match *self {}
    }

    pub fn is_replaced(&self) -> bool {
        match *self {}
    }

    pub fn forget(&self, _range: Range<u64>) {
        match *self {}
    }
}
