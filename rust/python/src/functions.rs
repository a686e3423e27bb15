//! Module-level functions of `trajcore._core`: `convert`, `verify`, `recover`, `annotate`, the
//! bound on gather threads, the key escaping rule of column names, the leaves of a layout tree,
//! and object storage's options, counters, uploads and recovery (each said in
//! `trajcore/_core.pyi`; the GIL released around I/O).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use trajcore_core::annotate::{annotate as write_annotation, Annotation};
use trajcore_core::convert::{convert as convert_dataset, ConvertOptions};
use trajcore_core::layout::Layout;
use trajcore_core::objstore::{remote, segments};
use trajcore_core::reader::verify_path;
use trajcore_core::recover::recover_leaving_out;
use trajcore_core::writer::files::capacity::{of_live_recordings, recover_store};

use crate::dataset::{from_json, PyDataset};
use crate::errors::{invalid, IntoPy};
use crate::open_dataset::over;

#[pyfunction]
pub fn convert<'py>(py: Python<'py>, src: &PyDataset, dst: PathBuf, options_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let opts = ConvertOptions::from_json(options_json).py_err(py)?;
    let done = over(py, &src.reader, |ds| convert_dataset(ds, &dst, &opts))?;
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
#[pyo3(signature = (n=None))]
pub fn num_threads(n: Option<usize>) -> usize {
    if let Some(n) = n {
        trajcore_core::reader::set_max_threads(n);
    }
    trajcore_core::reader::max_threads()
}

#[pyfunction]
pub fn escape_key(key: &str) -> String {
    trajcore_core::schema::escape_key(key)
}

#[pyfunction]
pub fn unescape_key(part: &str) -> String {
    trajcore_core::schema::unescape_key(part)
}

#[pyfunction]
pub fn layout_leaves<'py>(py: Python<'py>, layout_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let tree = Layout::from_json(layout_json, &|_| true).map_err(|why| invalid(py, why))?;
    from_json(py, Ok(tree.leaves_json()))
}

#[pyfunction]
pub fn configure_store(py: Python<'_>, url: &str, options: Vec<(String, String)>) -> PyResult<()> {
    remote::configure(url, &options).py_err(py)
}

#[pyfunction]
pub fn remote_stats() -> (u64, u64, u64, u64) {
    let s = remote::stats();
    (s.requests, s.bytes, s.chunk_bytes, s.cached_bytes)
}

#[pyfunction]
pub fn upload_file(py: Python<'_>, local: PathBuf, url: &str) -> PyResult<()> {
    py.detach(|| segments::upload(&local, url)).py_err(py)
}

#[pyfunction]
pub fn recover_segments<'py>(
    py: Python<'py>,
    url: &str,
    staging: PathBuf,
    skip_live: bool,
) -> PyResult<Bound<'py, PyAny>> {
    from_json(py, serde_json::to_string(&py.detach(|| recover_store(url, &staging, skip_live)).py_err(py)?))
}

#[pyfunction]
pub fn live_store_shards(py: Python<'_>, url: &str, names: Vec<String>) -> PyResult<Vec<bool>> {
    py.detach(|| of_live_recordings(url, &names)).py_err(py)
}
