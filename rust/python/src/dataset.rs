//! `trajcore._core.Dataset`: a read-only, memory-mapped view of a directory of shards (or one
//! shard). Reads release the GIL. `trajcore.Dataset` pickles as its path and options (data-loader
//! workers reopen it), this object never alone.

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
use crate::open_dataset::OpenDataset;
use crate::selection::PySelection;

/// `subclass`: `trajcore.read.core_reader` unpacks its reports in Python.
#[pyclass(module = "trajcore._core", name = "Dataset", frozen, subclass)]
pub struct PyDataset {
    path: PathBuf,
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
    /// `verify`: check every chunk at open and leave damaged episodes out (strict: raise).
    /// `exclusions_json`: what an earlier verification left out (`exclusions_json()`), applied
    /// without verifying again (a dataset pickled into a worker).
    /// `mmap`: read through memory maps (else positioned reads: no SIGBUS if a file is truncated).
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
        Ok(PyDataset { path, strict, cache_bytes, mmap, reader: OpenDataset::new(dataset) })
    }

    /// What a verification at open left out, as JSON (None when nothing was).
    fn exclusions_json(&self) -> Option<String> {
        self.reader.read(|d| (!d.exclusions().is_empty()).then(|| d.exclusions().to_json()))
    }

    /// What the dataset says about itself (see the core's `Report`), with the GIL released:
    /// a store prefix's eviction log is a request.
    #[pyo3(signature = (name, recording=None))]
    fn report<'py>(&self, py: Python<'py>, name: &str, recording: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let report = Report::parse(name, recording).py_err(py)?;
        from_json(py, Ok(py.detach(|| self.reader.read(|d| d.report(report))).py_err(py)?))
    }

    #[getter]
    fn num_episodes(&self) -> usize {
        self.reader.read(|d| d.episodes().len())
    }

    #[getter]
    fn num_recordings(&self) -> usize {
        self.reader.read(|d| d.recordings().len())
    }

    /// One array per summary field over all episodes, in dataset order.
    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        arrays(py, self.reader.read(episode_summaries))
    }

    /// Episode metrics by column name: {name: {count, sum, mean, min, max}}, one array entry per
    /// episode in dataset order (count 0 and NaN where an episode has no value).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let metrics =
            self.reader.read(episode_metrics).into_iter().map(|(name, m)| Ok((name, arrays(py, m.fields())?)));
        metrics.collect::<PyResult<Vec<_>>>()?.into_py_dict(py)
    }

    /// Keeps the shards episode `episode` reads open while the pin lives (an evicted shard is let
    /// go of at the first refresh no pin holds it).
    fn pin_episode(&self, py: Python<'_>, episode: i64) -> PyResult<PyEpisodePin> {
        self.reader.read(|d| d.pin_episode(d.view().episode_index(episode)?)).map(PyEpisodePin).py_err(py)
    }

    fn episode_metadata_json(&self, py: Python<'_>, episode: i64) -> PyResult<String> {
        py.detach(|| self.reader.read(|d| d.view().episode_metadata(d.view().episode_index(episode)?))).py_err(py)
    }

    /// All rows of one column of one episode (T+1 on the observation timeline, T on the step
    /// timeline); str columns come back as a list of str.
    /// Rows stored raw in one chunk come back as a read-only view of the memory map (no copy).
    fn read_column<'py>(&self, py: Python<'py>, episode: i64, column: &str) -> PyResult<Bound<'py, PyAny>> {
        match py.detach(|| self.reader.read(|d| d.view().episode_column(episode, column))).py_err(py)? {
            Ok(ColumnData::Fixed { dtype, shape, bytes }) => {
                let typed = PyArray1::<u8>::from_vec(py, bytes).call_method1("view", (dtype.name(),))?;
                typed.call_method1("reshape", (shape,))
            }
            Ok(ColumnData::Strings(items)) => Ok(PyList::new(py, items)?.into_any()),
            Err((dtype, shape, view)) => arrays::mapped(py, view, dtype, &shape),
        }
    }

    /// An episode's observations or actions (`which`: "observation" or "action"), its leaf
    /// columns read as `read_column` does and nested like the recorded space.
    fn read_layout<'py>(&self, py: Python<'py>, episode: i64, which: &str) -> PyResult<Bound<'py, PyAny>> {
        let layout = self.reader.read(|d| d.view().episode_layout(episode, which)).py_err(py)?;
        let mut leaves = Vec::new();
        let tree = layout.try_map(
            &mut |column| {
                leaves.push(self.read_column(py, episode, column)?);
                Ok::<_, PyErr>(leaves.len() - 1)
            },
            &mut |key| Ok(PyString::new(py, key).unbind()),
        )?;
        batch::nest(py, &tree, &leaves)
    }

    /// Every episode, as the dataset grows: what reads over all of them are methods of.
    fn all_episodes(&self) -> PySelection {
        PySelection::new(self.reader.clone(), Subset::default())
    }

    /// A subset of episodes (dataset indexes) to sample from, with its own step numbering.
    fn selection(&self, py: Python<'_>, episodes: PyReadonlyArray1<'_, i64>) -> PyResult<PySelection> {
        let subset = self.reader.read(|d| d.subset_at(&episodes.as_array().to_vec())).py_err(py)?;
        Ok(PySelection::new(self.reader.clone(), subset))
    }

    /// The episodes sampling draws from once a bounded recording evicted some (see the core's
    /// `live_episodes`); None while none is.
    fn live_selection(&self) -> Option<PySelection> {
        Some(PySelection::new(self.reader.clone(), self.reader.read(Dataset::live_subset)?))
    }

    /// Re-reads shards that grew or appeared: (episodes added, problems, notices), the last two
    /// as many as `report("listing")` has (a refresh asks for the listing only when they grew:
    /// it costs as much as the dataset, and a learner refreshes at every step). Batch plans it
    /// made stale are made again at their next use (`Dataset::plan_generation`).
    fn refresh(&self, py: Python<'_>) -> PyResult<(usize, usize, usize)> {
        py.detach(|| {
            let mut d = self.reader.dataset.write().unwrap_or_else(|p| p.into_inner());
            Ok((d.refresh()?, d.problems().len(), d.notices().len()))
        })
        .py_err(py)
    }

    fn __repr__(&self) -> String {
        let (episodes, steps) = self.reader.read(|d| (d.episodes().len(), d.num_steps()));
        format!("<trajcore._core.Dataset {episodes} episodes, {steps} steps at {:?}>", self.path)
    }
}
