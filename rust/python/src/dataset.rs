//! `trajcore._core.Dataset`: a read-only, memory-mapped view of a directory of shards (or one
//! shard). Reads release the GIL; the object pickles as its path and options so data-loader
//! workers reopen it.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyRange, PyRangeMethods, PyString, PyTuple};
use trajcore_core::reader::{
    episode_metrics, episode_summaries, ColumnData, Dataset, EpisodeSet, OpenOptions, PlanCache, Report, Request,
    Values, WindowKind, CACHE_AUTO,
};

use crate::arrays;
use crate::batch::{self, Plan};
use crate::errors::{invalid, warn, IntoPy};
use crate::selection::PySelection;

/// (episode indexes, steps within them).
type Located<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

#[pyclass(module = "trajcore._core", name = "Dataset", frozen)]
pub struct PyDataset {
    path: PathBuf,
    #[pyo3(get)]
    strict: bool,
    #[pyo3(get)]
    cache_bytes: Option<usize>,
    inner: RwLock<Dataset>,
    /// Batch plans of this dataset and its selections; cleared by `refresh` (recordings may
    /// have appeared).
    plans: PlanCache<Plan>,
}

/// The shards an episode handed out reads, kept while it lives (see `reader::pin`).
#[pyclass(module = "trajcore._core", name = "EpisodePin", frozen)]
pub struct PyEpisodePin(#[allow(dead_code)] trajcore_core::reader::EpisodePin);

/// The episodes of a selection, if given.
fn set_of<'a>(selection: Option<&'a Bound<'_, PySelection>>) -> Option<&'a EpisodeSet> {
    selection.map(|s| &*s.get().set)
}

impl PyDataset {
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Dataset) -> R) -> R {
        let guard = self.inner.read().unwrap_or_else(|p| p.into_inner());
        f(&guard)
    }

    /// `f` over the dataset and `set` (default: every episode), with the GIL released.
    pub(crate) fn over<R: Send>(
        &self,
        py: Python<'_>,
        set: Option<&EpisodeSet>,
        f: impl FnOnce(&Dataset, &EpisodeSet) -> trajcore_core::Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| self.read(|d| f(d, set.unwrap_or_else(|| d.all_episodes())))).py_err(py)
    }

    fn plan(
        &self,
        py: Python<'_>,
        keys: Option<Vec<String>>,
        sel: Option<&Bound<'_, PySelection>>,
    ) -> PyResult<Arc<Plan>> {
        let at = self.read(|d| d.columns_generation());
        let among = sel.and_then(|s| s.get().among.as_deref());
        self.plans.get_or_make_at(at, keys, among, |keys, among| self.read(|d| Plan::new(py, d, keys, among)))
    }

    fn batch<'py>(
        &self,
        py: Python<'py>,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
        request: Request,
        kind: WindowKind,
    ) -> PyResult<Bound<'py, PyDict>> {
        let plan = self.plan(py, keys, selection)?;
        let set = set_of(selection);
        let (out, damage) = batch::batch(py, &plan, request.len(), kind, |fields, out| {
            self.over(py, set, |d, set| d.view().read_batch(set, fields, request, kind, out))
        })?;
        for d in damage {
            warn(py, &d.warning())?;
        }
        Ok(out)
    }
}

/// The core's request for the windows `gather` names: numbers (an int64 array), (episodes, first
/// steps) as a tuple of two arrays, or a `range` of steps. Type checks come before extractions:
/// a failed extraction makes an exception, which every batch would pay for.
fn request_of(which: &Bound<'_, PyAny>) -> PyResult<Request> {
    let py = which.py();
    if let Ok(range) = which.cast::<PyRange>() {
        return Request::range(range.start()? as i64, range.stop()? as i64, range.step()? as i64).py_err(py);
    }
    if which.is_instance_of::<PyTuple>() {
        let (episodes, steps): (PyReadonlyArray1<i64>, PyReadonlyArray1<i64>) = which.extract()?;
        return Request::pairs(episodes.as_array().to_vec(), steps.as_array().to_vec()).py_err(py);
    }
    Ok(Request::Numbers(which.extract::<PyReadonlyArray1<i64>>()?.as_array().to_vec()))
}

/// A plain value of the core, made a Python one through its JSON.
pub fn from_json(py: Python<'_>, json: serde_json::Result<String>) -> PyResult<Bound<'_, PyAny>> {
    let text = json.map_err(|e| invalid(py, e.to_string()))?;
    py.import("json")?.getattr("loads")?.call1((text,))
}

/// One array per named field.
fn arrays_dict<'py>(py: Python<'py>, fields: Vec<(&str, Values)>) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, values) in fields {
        match values {
            Values::I64(v) => out.set_item(name, PyArray1::from_vec(py, v))?,
            Values::F64(v) => out.set_item(name, PyArray1::from_vec(py, v))?,
            Values::Bool(v) => out.set_item(name, PyArray1::from_vec(py, v))?,
        }
    }
    Ok(out)
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
        Ok(PyDataset { path, strict, cache_bytes, inner: RwLock::new(dataset), plans: PlanCache::default() })
    }

    /// What a verification at open left out, as JSON (None when nothing was).
    fn exclusions_json(&self) -> Option<String> {
        self.read(|d| (!d.exclusions().is_empty()).then(|| d.exclusions().to_json()))
    }

    /// What the dataset says about itself (see the core's `Report`), with the GIL released:
    /// a store prefix's eviction log is a request.
    #[pyo3(signature = (name, recording=None))]
    fn report<'py>(&self, py: Python<'py>, name: &str, recording: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let report = Report::parse(name, recording).py_err(py)?;
        from_json(py, Ok(py.detach(|| self.read(|d| d.report(report))).py_err(py)?))
    }

    /// The listing as it is now (see the core's `Report::Listing`).
    fn listing<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.report(py, "listing", None)
    }

    fn meta_json(&self, py: Python<'_>, recording: usize) -> PyResult<String> {
        self.read(|d| d.report(Report::Meta(recording))).py_err(py)
    }

    /// (problems, notices) as many as `listing` has: a refresh asks for the listing only when
    /// they grew (it costs as much as the dataset; a learner refreshes at every step).
    fn news_counts(&self) -> (usize, usize) {
        self.read(|d| (d.problems().len(), d.notices().len()))
    }

    #[getter]
    fn mmap(&self) -> bool {
        self.read(|d| d.options().mmap)
    }

    /// (recording, transitions) of each shard, in `shards` order.
    #[getter]
    fn shard_steps(&self) -> Vec<(usize, u64)> {
        self.read(|d| d.shard_steps())
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

    /// Column specs of a recording, as dicts.
    fn columns<'py>(&self, py: Python<'py>, recording: usize) -> PyResult<Bound<'py, PyAny>> {
        from_json(py, self.read(|d| d.recording(recording).map(|r| serde_json::to_string(&r.columns))).py_err(py)?)
    }

    /// Storage per column of each recording, from the index (nothing is decoded): dicts with
    /// recording, name, chunks, raw_bytes, stored_bytes.
    fn column_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_json(py, serde_json::to_string(&self.read(Dataset::column_stats)))
    }

    /// One array per summary field over all episodes, in dataset order.
    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        arrays_dict(py, self.read(episode_summaries))
    }

    /// Episode metrics by column name: {name: {count, sum, mean, min, max}}, one array entry per
    /// episode in dataset order (count 0 and NaN where an episode has no value).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, m) in self.read(episode_metrics) {
            out.set_item(name, arrays_dict(py, m.fields())?)?;
        }
        Ok(out)
    }

    /// Keeps the shards episode `episode` reads open while the pin lives (an evicted shard is let
    /// go of at the first refresh no pin holds it).
    fn pin_episode(&self, py: Python<'_>, episode: i64) -> PyResult<PyEpisodePin> {
        self.read(|d| d.pin_episode(d.view().episode_index(episode)?)).map(PyEpisodePin).py_err(py)
    }

    fn episode_metadata_json(&self, py: Python<'_>, episode: i64) -> PyResult<String> {
        py.detach(|| self.read(|d| d.view().episode_metadata(d.view().episode_index(episode)?))).py_err(py)
    }

    /// All rows of one column of one episode (T+1 on the observation timeline, T on the step
    /// timeline); str columns come back as a list of str.
    /// Rows stored raw in one chunk come back as a read-only view of the memory map (no copy).
    fn read_column<'py>(&self, py: Python<'py>, episode: i64, column: &str) -> PyResult<Bound<'py, PyAny>> {
        match py.detach(|| self.read(|d| d.view().episode_column(episode, column))).py_err(py)? {
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
        let layout = self.read(|d| d.view().episode_layout(episode, which)).py_err(py)?;
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

    /// A subset of episodes (dataset indexes) to sample from, with its own step numbering.
    fn selection(&self, py: Python<'_>, episodes: PyReadonlyArray1<'_, i64>) -> PyResult<PySelection> {
        let set = self.read(|d| d.view().episode_set_at(&episodes.as_array().to_vec())).py_err(py)?;
        Ok(self.read(|d| PySelection::of(d, Arc::new(set))))
    }

    /// The episodes of the selection (default: every episode) in file order: grouped by
    /// recording, then by sub-env, each one's in the order recorded. Reading it in bulk copies
    /// whole chunks (`Transitions.blocks(order="file")`).
    #[pyo3(signature = (selection=None))]
    fn file_order(&self, py: Python<'_>, selection: Option<&Bound<'_, PySelection>>) -> PyResult<PySelection> {
        let set = self.over(py, set_of(selection), |d, set| d.view().file_order(set))?;
        Ok(self.read(|d| PySelection::of(d, set)))
    }

    /// Windows of `length` steps inside single episodes (with `pad`, shorter episodes count once).
    #[pyo3(signature = (length, pad=false, selection=None))]
    fn num_windows(
        &self,
        py: Python<'_>,
        length: u64,
        pad: bool,
        selection: Option<&Bound<'_, PySelection>>,
    ) -> PyResult<u64> {
        self.over(py, set_of(selection), |_, set| Ok(set.windows(length, pad)?.num_windows()))
    }

    /// (episode indexes, steps within them) of global step numbers (of the selection, if given).
    #[pyo3(signature = (steps, selection=None))]
    fn locate<'py>(
        &self,
        py: Python<'py>,
        steps: PyReadonlyArray1<'py, i64>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Located<'py>> {
        let steps = steps.as_array().to_vec();
        let found = self.over(py, set_of(selection), |_, set| set.locate_numbers(&steps))?;
        let (e, t): (Vec<i64>, Vec<i64>) = found.into_iter().map(|(e, t)| (e as i64, t as i64)).unzip();
        Ok((PyArray1::from_vec(py, e), PyArray1::from_vec(py, t)))
    }

    /// `n` windows drawn uniformly (with replacement), reproducibly from `seed`: of `length`
    /// steps inside single episodes (padded with `pad`), or transitions (`length=None`).
    #[pyo3(signature = (n, seed, length=None, pad=false, keys=None, selection=None))]
    fn sample<'py>(
        slf: &Bound<'py, Self>,
        n: usize,
        seed: u64,
        length: Option<usize>,
        pad: bool,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        slf.get().batch(slf.py(), keys, selection, Request::Sample { n, seed }, WindowKind::of(length, pad))
    }

    /// The windows `which` names (see `request_of`; numbers of the selection, if given): `length=None`
    /// reads transitions, else windows of `length` steps (padded with `pad`).
    #[pyo3(signature = (which, length=None, pad=false, keys=None, selection=None))]
    fn gather<'py>(
        &self,
        py: Python<'py>,
        which: &Bound<'py, PyAny>,
        length: Option<usize>,
        pad: bool,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, keys, selection, request_of(which)?, WindowKind::of(length, pad))
    }

    /// One step by global number (of the selection, if given), without a batch axis.
    #[pyo3(signature = (index, keys=None, selection=None))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        index: i64,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let plan = self.plan(py, keys, selection)?;
        let set = set_of(selection);
        batch::one_step(py, &plan, |fields, outs| {
            self.over(py, set, |d, set| d.view().read_step(set, fields, index, outs))
        })
    }

    /// Re-reads shards that grew or appeared; returns how many episodes were added.
    fn refresh(&self, py: Python<'_>) -> PyResult<usize> {
        let (added, schema_changed) = py
            .detach(|| {
                let mut d = self.inner.write().unwrap_or_else(|p| p.into_inner());
                let before = d.schema_generation();
                d.refresh().map(|added| (added, d.schema_generation() != before))
            })
            .py_err(py)?;
        if schema_changed {
            self.plans.clear();
        }
        Ok(added)
    }

    /// The episodes sampling draws from once a bounded recording evicted some (see the core's
    /// `live_episodes`); None while none is.
    fn live_selection(&self) -> Option<PySelection> {
        self.read(|d| {
            let set = d.live_episodes()?.clone();
            Some(PySelection { set, among: d.live_recordings() })
        })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let args = (me.path.clone(), me.strict, me.cache_bytes, false, me.exclusions_json(), me.mmap());
        PyTuple::new(py, [slf.get_type().into_any(), args.into_pyobject(py)?.into_any()])
    }

    fn __len__(&self) -> usize {
        self.num_episodes()
    }

    fn __repr__(&self) -> String {
        let (episodes, steps) = (self.num_episodes(), self.num_steps());
        format!("<trajcore._core.Dataset {episodes} episodes, {steps} steps at {:?}>", self.path)
    }

    /// A column's frames once, as bytes, and `stack` frame ids per observation row (see the
    /// core's `FrameTable`); refused past `max_bytes`.
    #[pyo3(signature = (column, max_bytes, selection=None))]
    fn frames_of<'py>(
        &self,
        py: Python<'py>,
        column: &str,
        max_bytes: u64,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let t = self.over(py, set_of(selection), |d, set| d.view().frames_of(column, set, max_bytes))?;
        (PyArray1::from_vec(py, t.frames), PyArray1::from_vec(py, t.ids), t.stack).into_pyobject(py)
    }
}
