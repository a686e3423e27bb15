//! Annotations (`trajcore_core::annotation`): `annotate` writes a column beside a dataset
//! directory (an open dataset lists the sidecars it found: `report("annotations")`).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use trajcore_core::annotate::{annotate as write_annotation, Annotation};

use crate::errors::IntoPy;

/// Writes annotation `name` of the dataset directory `path` (GIL released): `values[i]` holds
/// the rows of episode `episodes[i]` (little-endian `dtype` of `shape`, row after row). Returns
/// the sidecar files written.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn annotate(
    py: Python<'_>,
    path: PathBuf,
    name: &str,
    dtype: &str,
    shape: Vec<u64>,
    per_episode: bool,
    episodes: Vec<usize>,
    values: Vec<PyBackedBytes>,
) -> PyResult<Vec<PathBuf>> {
    let values = episodes.into_iter().zip(values.iter().map(|v| &v[..])).collect();
    let a = Annotation { name, dtype, shape: &shape, per_episode, values };
    py.detach(|| write_annotation(&path, &a)).py_err(py)
}
