//! `trajcore._core.Dataset`: a read-only, memory-mapped view of a directory of shards (or one
//! shard). Reads release the GIL; the object pickles as its path and options so data-loader
//! workers reopen it.

use std::path::PathBuf;
use std::sync::RwLock;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use trajcore_core::reader::{ColumnData, Dataset, OpenOptions};

use crate::errors::{invalid, IntoPy};

#[pyclass(module = "trajcore._core", name = "Dataset", frozen)]
pub struct PyDataset {
    path: PathBuf,
    strict: bool,
    cache_bytes: usize,
    inner: RwLock<Dataset>,
}

impl PyDataset {
    fn read<R>(&self, f: impl FnOnce(&Dataset) -> R) -> R {
        let guard = self.inner.read().unwrap_or_else(|p| p.into_inner());
        f(&guard)
    }

    fn episode_index(&self, _py: Python<'_>, episode: i64) -> PyResult<usize> {
        let n = self.read(|d| d.episodes().len()) as i64;
        let i = if episode < 0 { episode + n } else { episode };
        if i < 0 || i >= n {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "episode {episode} out of range ({n} episodes)"
            )));
        }
        Ok(i as usize)
    }
}

fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.getattr("loads")?.call1((text,))
}

#[pymethods]
impl PyDataset {
    #[new]
    #[pyo3(signature = (path, strict=false, cache_bytes=256 << 20))]
    fn new(py: Python<'_>, path: PathBuf, strict: bool, cache_bytes: usize) -> PyResult<Self> {
        let options = OpenOptions { strict, cache_bytes };
        let dataset = py.detach(|| Dataset::open(&path, options)).py_err(py)?;
        Ok(PyDataset { path, strict, cache_bytes, inner: RwLock::new(dataset) })
    }

    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    #[getter]
    fn strict(&self) -> bool {
        self.strict
    }

    #[getter]
    fn cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// Damage found while opening: (file, byte offset, what was wrong).
    #[getter]
    fn problems(&self) -> Vec<(String, u64, String)> {
        self.read(|d| d.problems().iter().map(|p| (p.file.display().to_string(), p.offset, p.why.clone())).collect())
    }

    #[getter]
    fn shards(&self) -> Vec<String> {
        self.read(|d| d.shard_paths().iter().map(|p| p.display().to_string()).collect())
    }

    #[getter]
    fn num_episodes(&self) -> usize {
        self.read(|d| d.episodes().len())
    }

    #[getter]
    fn num_steps(&self) -> u64 {
        self.read(|d| d.num_steps())
    }

    #[getter]
    fn num_recordings(&self) -> usize {
        self.read(|d| d.recordings().len())
    }

    fn meta_json(&self, py: Python<'_>, recording: usize) -> PyResult<String> {
        self.read(|d| d.recordings().get(recording).map(|r| r.meta_json.clone()))
            .ok_or_else(|| invalid(py, format!("recording {recording} out of range")))
    }

    /// Column specs of a recording, as dicts.
    fn columns<'py>(&self, py: Python<'py>, recording: usize) -> PyResult<Bound<'py, PyAny>> {
        let json = self
            .read(|d| d.recordings().get(recording).map(|r| serde_json::to_string(&r.columns)))
            .ok_or_else(|| invalid(py, format!("recording {recording} out of range")))?
            .map_err(|e| invalid(py, e.to_string()))?;
        json_loads(py, &json)
    }

    /// One array per summary field over all episodes, in dataset order.
    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        self.read(|d| -> PyResult<()> {
            let eps = d.episodes();
            macro_rules! field {
                ($name:literal, $t:ty, $f:expr) => {
                    out.set_item($name, PyArray1::<$t>::from_vec(py, eps.iter().map($f).collect()))?;
                };
            }
            field!("recording", i64, |e| e.recording as i64);
            field!("shard", i64, |e| e.shard as i64);
            field!("env_index", i64, |e| e.summary.lane as i64);
            field!("length", i64, |e| e.summary.length as i64);
            field!("episode_return", f64, |e| e.summary.episode_return);
            field!("complete", bool, |e| e.summary.complete());
            field!("terminated", bool, |e| e.summary.terminated());
            field!("truncated", bool, |e| e.summary.truncated());
            field!("start_ns", i64, |e| e.summary.start_ns as i64);
            field!("end_ns", i64, |e| e.summary.end_ns as i64);
            field!("episode_id", i64, |e| e.summary.episode_id as i64);
            Ok(())
        })?;
        Ok(out)
    }

    fn episode_metadata_json(&self, py: Python<'_>, episode: i64) -> PyResult<String> {
        let i = self.episode_index(py, episode)?;
        py.detach(|| self.read(|d| d.episode_metadata(i))).py_err(py)
    }

    /// All rows of one column of one episode (T+1 on the observation timeline, T on the step
    /// timeline); str columns come back as a list of str.
    fn read_column<'py>(&self, py: Python<'py>, episode: i64, column: &str) -> PyResult<Bound<'py, PyAny>> {
        let i = self.episode_index(py, episode)?;
        let data = py.detach(|| self.read(|d| d.read_episode_column(i, column))).py_err(py)?;
        column_to_py(py, data)
    }

    /// Re-reads shards that grew or appeared; returns how many episodes were added.
    fn refresh(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| {
            let mut guard = self.inner.write().unwrap_or_else(|p| p.into_inner());
            guard.refresh()
        })
        .py_err(py)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let args = (me.path.clone(), me.strict, me.cache_bytes).into_pyobject(py)?;
        PyTuple::new(py, [slf.get_type().into_any(), args.into_any()])
    }

    fn __len__(&self) -> usize {
        self.num_episodes()
    }

    fn __repr__(&self) -> String {
        format!(
            "<trajcore._core.Dataset {} episodes, {} steps at {:?}>",
            self.num_episodes(),
            self.num_steps(),
            self.path
        )
    }
}

pub fn column_to_py(py: Python<'_>, data: ColumnData) -> PyResult<Bound<'_, PyAny>> {
    match data {
        ColumnData::Fixed { dtype, shape, bytes } => {
            let raw = PyArray1::<u8>::from_vec(py, bytes);
            let typed = raw.call_method1("view", (dtype.name(),))?;
            typed.call_method1("reshape", (shape,))
        }
        ColumnData::Strings(items) => Ok(PyList::new(py, items)?.into_any()),
    }
}
