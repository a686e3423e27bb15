//! `trajcore._core.Dataset`: a read-only, memory-mapped view of a directory of shards (or one
//! shard). Reads release the GIL. `trajcore.Dataset` pickles as its path and options (data-loader
//! workers reopen it), this object never alone. What each method does is said in
//! `trajcore/_core.pyi`.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyList, PyString};
use trajcore_core::reader::{
    episode_metrics, episode_summaries, ColumnData, Dataset, OpenOptions, Report, Subset, Values, CACHE_AUTO,
};

use crate::arrays;
use crate::batch;
use crate::errors::{invalid, IntoPy};
use crate::open_dataset::{over, OpenDataset};
use crate::selection::PySelection;

/// `subclass`: `trajcore.read.core_reader` unpacks its reports in Python.
#[pyclass(module = "trajcore._core", name = "Dataset", frozen, subclass)]
pub struct PyDataset {
    #[pyo3(get)]
    strict: bool,
    #[pyo3(get)]
    cache_bytes: Option<usize>,
    #[pyo3(get)]
    mmap: bool,
    pub(crate) reader: Arc<OpenDataset>,
}

/// The shards an episode handed out reads, kept while it lives (see `reader::pin`).
#[pyclass(module = "trajcore._core", name = "EpisodePin", frozen)]
pub struct PyEpisodePin(#[allow(dead_code)] trajcore_core::reader::EpisodePin);

/// A plain value of the core, made a Python one through its JSON.
pub fn from_json(py: Python<'_>, json: serde_json::Result<String>) -> PyResult<Bound<'_, PyAny>> {
    let text = json.map_err(|e| invalid(py, e.to_string()))?;
    py.import("json")?.getattr("loads")?.call1((text,))
}

/// One array per named field.
fn arrays<'py>(py: Python<'py>, fields: Vec<(&str, Values)>) -> PyResult<Bound<'py, PyDict>> {
    let array = |values| match values {
        Values::I64(v) => PyArray1::from_vec(py, v).into_any(),
        Values::F64(v) => PyArray1::from_vec(py, v).into_any(),
        Values::Bool(v) => PyArray1::from_vec(py, v).into_any(),
    };
    fields.into_iter().map(|(name, values)| (name, array(values))).into_py_dict(py)
}

#[pymethods]
impl PyDataset {
    /// `shared_fd`: the shared decoded-chunk store of the process that pickled it (owned now).
    #[new]
    #[pyo3(signature = (path, strict=false, cache_bytes=None, verify=false, exclusions_json=None, mmap=true, shared_fd=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        strict: bool,
        cache_bytes: Option<usize>,
        verify: bool,
        exclusions_json: Option<&str>,
        mmap: bool,
        shared_fd: Option<i32>,
    ) -> PyResult<Self> {
        let options = OpenOptions { strict, cache_bytes: cache_bytes.unwrap_or(CACHE_AUTO), mmap };
        let mut dataset = py.detach(|| Dataset::open_choosing(&path, options, verify, exclusions_json)).py_err(py)?;
        // SAFETY: multiprocessing handed this process the descriptor, used nowhere else.
        shared_fd.map(|fd| unsafe { dataset.adopt_shared_chunks(fd) });
        Ok(PyDataset { strict, cache_bytes, mmap, reader: OpenDataset::new(dataset) })
    }

    /// The GIL released: a store prefix's eviction log is a request.
    #[pyo3(signature = (name, recording=None))]
    fn report<'py>(&self, py: Python<'py>, name: &str, recording: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let report = Report::parse(name, recording).py_err(py)?;
        from_json(py, Ok(over(py, &self.reader, |d| d.report(report))?))
    }

    #[getter]
    fn num_episodes(&self) -> usize {
        self.reader.read(|d| d.episodes().len())
    }

    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        arrays(py, self.reader.read(episode_summaries))
    }

    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let metrics =
            self.reader.read(episode_metrics).into_iter().map(|(name, m)| Ok((name, arrays(py, m.fields())?)));
        metrics.collect::<PyResult<Vec<_>>>()?.into_py_dict(py)
    }

    fn pin_episode(&self, py: Python<'_>, episode: i64) -> PyResult<PyEpisodePin> {
        self.reader.read(|d| d.pin_episode(d.view().episode_index(episode)?)).map(PyEpisodePin).py_err(py)
    }

    fn episode_metadata_json(&self, py: Python<'_>, episode: i64) -> PyResult<String> {
        over(py, &self.reader, |d| d.view().episode_metadata(d.view().episode_index(episode)?))
    }

    fn read_column<'py>(&self, py: Python<'py>, episode: i64, column: &str) -> PyResult<Bound<'py, PyAny>> {
        match over(py, &self.reader, |d| d.view().episode_column(episode, column))? {
            Ok(ColumnData::Fixed { dtype, shape, bytes }) => {
                let typed = PyArray1::<u8>::from_vec(py, bytes).call_method1("view", (dtype.name(),))?;
                typed.call_method1("reshape", (shape,))
            }
            Ok(ColumnData::Strings(items)) => Ok(PyList::new(py, items)?.into_any()),
            Err((dtype, shape, view)) => arrays::mapped(py, view, dtype, &shape),
        }
    }

    fn read_layout<'py>(&self, py: Python<'py>, episode: i64, which: &str) -> PyResult<Bound<'py, PyAny>> {
        let layout = self.reader.read(|d| d.view().episode_layout(episode, which)).py_err(py)?;
        let tree = layout.try_map(&mut |c| Ok::<_, PyErr>(c.clone()), &mut |k| Ok(PyString::new(py, k).unbind()))?;
        batch::nest(py, &tree, &mut |column| self.read_column(py, episode, column))
    }

    fn all_episodes(&self) -> PySelection {
        PySelection { reader: self.reader.clone(), subset: Subset::default() }
    }

    fn selection(&self, py: Python<'_>, episodes: PyReadonlyArray1<'_, i64>) -> PyResult<PySelection> {
        let subset = self.reader.read(|d| d.subset_at(&episodes.as_array().to_vec())).py_err(py)?;
        Ok(PySelection { reader: self.reader.clone(), subset })
    }

    fn live_selection(&self) -> Option<PySelection> {
        Some(PySelection { reader: self.reader.clone(), subset: self.reader.read(Dataset::live_subset)? })
    }

    /// With the listing's counts (see `SharedDataset::refresh`).
    fn refresh(&self, py: Python<'_>) -> PyResult<(usize, usize, usize)> {
        py.detach(|| self.reader.refresh()).py_err(py)
    }

    fn __repr__(&self) -> String {
        self.reader.read(|d| format!("<trajcore._core.Dataset {} at {:?}>", d.all_episodes(), d.path()))
    }
}
