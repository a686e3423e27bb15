//! Module-level functions of `trajcore._core`: `convert`, `verify`, `recover`, `annotate`, the
//! bound on gather threads, the leaves of a layout tree (each said in `trajcore/_core.pyi`; the
//! GIL released around I/O), and object storage's options, counters, uploads and recovery.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use trajcore_core::annotate::{annotate as write_annotation, Annotation};
use trajcore_core::convert::{codecs_from_json, convert as convert_dataset, ConvertOptions};
use trajcore_core::layout::Layout;
use trajcore_core::reader::verify_path;
use trajcore_core::recover::recover_leaving_out;

use crate::dataset::{from_json, PyDataset};
use crate::errors::{invalid, IntoPy};

#[pyfunction]
#[pyo3(signature = (src, dst, codecs_json=None, chunk_bytes=None, max_shard_bytes=None, episodes=None, keys=None))]
#[allow(clippy::too_many_arguments)]
pub fn convert<'py>(
    py: Python<'py>,
    src: &PyDataset,
    dst: PathBuf,
    codecs_json: Option<&str>,
    chunk_bytes: Option<usize>,
    max_shard_bytes: Option<u64>,
    episodes: Option<Vec<usize>>,
    keys: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyAny>> {
    let codecs = codecs_json.map(codecs_from_json).transpose().py_err(py)?.unwrap_or_default();
    let opts = ConvertOptions { codecs, chunk_bytes, max_shard_bytes, episodes, keys };
    let done = src.reader.over(py, |ds| convert_dataset(ds, &dst, &opts))?;
    from_json(py, serde_json::to_string(&done))
}

#[pyfunction]
pub fn verify<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    from_json(py, serde_json::to_string(&py.detach(|| verify_path(&path)).py_err(py)?))
}

#[pyfunction]
pub fn recover<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    left_out: Vec<(usize, String)>,
) -> PyResult<Bound<'py, PyAny>> {
    let done = py.detach(|| recover_leaving_out(&src, &dst, &left_out)).py_err(py)?;
    from_json(py, serde_json::to_string(&done))
}

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

#[pyfunction]
pub fn set_num_threads(n: usize) {
    trajcore_core::reader::set_max_threads(n);
}

#[pyfunction]
pub fn num_threads() -> usize {
    trajcore_core::reader::max_threads()
}

#[pyfunction]
pub fn layout_leaves<'py>(py: Python<'py>, layout_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let tree = Layout::from_json(layout_json, &|_| true).map_err(|why| invalid(py, why))?;
    from_json(py, Ok(tree.leaves_json()))
}

/// Sets the options of the object store `url` is in, over the environment's (see the core's
/// `remote::configure`).
#[pyfunction]
pub fn configure_store(py: Python<'_>, url: &str, options: Vec<(String, String)>) -> PyResult<()> {
    trajcore_core::objstore::remote::configure(url, &options).py_err(py)
}

/// (requests, bytes fetched, chunk bytes fetched for, bytes cached) from object storage by this
/// process so far.
#[pyfunction]
pub fn remote_stats() -> (u64, u64, u64, u64) {
    let s = trajcore_core::objstore::remote::stats();
    (s.requests, s.bytes, s.chunk_bytes, s.cached_bytes)
}

/// Puts the local file `local` as the object `url` (GIL released; see the core's
/// `segments::upload`).
#[pyfunction]
pub fn upload_file(py: Python<'_>, local: PathBuf, url: &str) -> PyResult<()> {
    py.detach(|| trajcore_core::objstore::segments::upload(&local, url)).py_err(py)
}

/// Makes shards of the segments under the prefix `url`, through files in `staging` (GIL
/// released; see the core's `segments::recover_segments`): a list of dicts. With `skip_live`,
/// the segments of recordings holding a fresh lease there are left alone.
#[pyfunction]
#[pyo3(signature = (url, staging, skip_live=false))]
pub fn recover_segments<'py>(
    py: Python<'py>,
    url: &str,
    staging: PathBuf,
    skip_live: bool,
) -> PyResult<Bound<'py, PyAny>> {
    use trajcore_core::writer::files::capacity::of_live_recordings;
    let live = |names: &[String]| if skip_live { of_live_recordings(url, names) } else { Ok(vec![false; names.len()]) };
    let done = py.detach(|| trajcore_core::objstore::segments::recover_segments(url, &staging, &live)).py_err(py)?;
    from_json(py, serde_json::to_string(&done))
}

/// Which of the shards `names` under the store prefix `url` belong to a recording that holds a
/// fresh lease there (GIL released; see the core's `capacity::of_live_recordings`).
#[pyfunction]
pub fn live_store_shards(py: Python<'_>, url: &str, names: Vec<String>) -> PyResult<Vec<bool>> {
    py.detach(|| trajcore_core::writer::files::capacity::of_live_recordings(url, &names)).py_err(py)
}
