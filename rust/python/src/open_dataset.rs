//! What a `Dataset` and its `Selection`s read through (shared, so that a selection holds the
//! reader, not the Python object): the core's dataset behind its lock, with this extension's
//! batch plans, read with the GIL released.

use pyo3::prelude::*;
use trajcore_core::reader::{Dataset, SharedDataset};

use crate::batch::Plan;
use crate::errors::IntoPy;

pub type OpenDataset = SharedDataset<Plan>;

/// `OpenDataset::read` of a core call, with the GIL released.
pub fn over<R: Send>(
    py: Python<'_>,
    reader: &OpenDataset,
    f: impl FnOnce(&Dataset) -> trajcore_core::Result<R> + Send,
) -> PyResult<R> {
    py.detach(|| reader.read(f)).py_err(py)
}
