//! Module-level functions of `trajcore._core`: `convert`, and the bound on gather threads.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use trajcore_core::convert::{convert as convert_dataset, ConvertOptions};
use trajcore_core::CodecSpec;

use crate::dataset::PyDataset;
use crate::errors::{invalid, IntoPy};

/// Rewrites `src` into the new dataset directory `dst` with other codecs / chunk sizes.
/// `codecs_json`: {"<column, prefix or 'default'>": {"delta": bool, "zstd_level": int | null}}.
#[pyfunction]
#[pyo3(signature = (src, dst, codecs_json=None, chunk_bytes=None, max_shard_bytes=None, episodes=None))]
pub fn convert<'py>(
    py: Python<'py>,
    src: &PyDataset,
    dst: PathBuf,
    codecs_json: Option<&str>,
    chunk_bytes: Option<usize>,
    max_shard_bytes: Option<u64>,
    episodes: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyDict>> {
    let codecs: Vec<(String, CodecSpec)> = match codecs_json {
        Some(text) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
            .map_err(|e| invalid(py, format!("codecs: {e}")))?
            .into_iter()
            .map(|(k, v)| {
                serde_json::from_value(v)
                    .map(|c| (k.clone(), c))
                    .map_err(|e| invalid(py, format!("codecs[{k:?}]: {e}")))
            })
            .collect::<PyResult<_>>()?,
        None => Vec::new(),
    };
    if chunk_bytes == Some(0) {
        return Err(invalid(py, "chunk_bytes must be positive"));
    }
    let opts = ConvertOptions { codecs, chunk_bytes, max_shard_bytes, episodes };
    let done = py.detach(|| src.read(|ds| convert_dataset(ds, &dst, &opts))).py_err(py)?;
    let out = PyDict::new(py);
    out.set_item("episodes", done.episodes)?;
    out.set_item("steps", done.steps)?;
    out.set_item("shards", done.shards.iter().map(|p| p.display().to_string()).collect::<Vec<_>>())?;
    Ok(out)
}

/// Bounds the threads one batched read may use to decode and copy (0: the default, the
/// machine's cores up to 8). Data-loader workers use 1.
#[pyfunction]
pub fn set_num_threads(n: usize) {
    trajcore_core::reader::set_max_threads(n);
}

#[pyfunction]
pub fn num_threads() -> usize {
    trajcore_core::reader::max_threads()
}
