//! `trajcore._core.Dataset`: a read-only, memory-mapped view of a directory of shards (or one
//! shard). Reads release the GIL; the object pickles as its path and options so data-loader
//! workers reopen it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use trajcore_core::reader::{
    open_verified, resolve_index, ColumnData, Dataset, EpisodeSet, Exclusions, OpenOptions, Recording, Request,
    WindowKind,
};

use crate::arrays;
use crate::batch::{self, Plan};
use crate::errors::{invalid, warn, IntoPy};
use crate::selection::PySelection;

/// (file, byte offset, what was wrong), as `problems` gives them.
type ProblemTuple = (String, u64, String);

/// (episode indexes, steps within them).
type Located<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

/// Plans by key set (`None`: the default keys); few distinct sets are ever used.
type Plans = Vec<(Option<Vec<String>>, Arc<Plan>)>;

#[pyclass(module = "trajcore._core", name = "Dataset", frozen)]
pub struct PyDataset {
    path: PathBuf,
    strict: bool,
    cache_bytes: usize,
    inner: RwLock<Dataset>,
    /// Made on first use per key set; cleared by `refresh` (recordings may have appeared).
    plans: Mutex<Plans>,
    /// Every episode in file order, made on first use, for as many episodes as it holds (a
    /// `refresh` that adds some makes it again).
    file_order: Mutex<Option<Arc<EpisodeSet>>>,
}

impl PyDataset {
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Dataset) -> R) -> R {
        let guard = self.inner.read().unwrap_or_else(|p| p.into_inner());
        f(&guard)
    }

    fn plan(&self, py: Python<'_>, keys: Option<Vec<String>>) -> PyResult<Arc<Plan>> {
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, plan)) = plans.iter().find(|(k, _)| *k == keys) {
            return Ok(plan.clone());
        }
        let plan = Arc::new(self.read(|d| Plan::new(py, d, keys.as_deref()))?);
        if plans.len() >= 16 {
            plans.remove(0);
        }
        plans.push((keys, plan.clone()));
        Ok(plan)
    }

    fn batch<'py>(
        &self,
        py: Python<'py>,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
        request: Request,
        kind: WindowKind,
    ) -> PyResult<Bound<'py, PyDict>> {
        let plan = self.plan(py, keys)?;
        let set = selection.map(|s| s.get().set.clone());
        let (out, damage) = batch::batch(py, &self.inner, &plan, set.as_deref(), request, kind)?;
        for d in damage {
            warn(py, &d.warning())?;
        }
        Ok(out)
    }

    /// A recording's field, read by `f`.
    fn recording<R>(&self, py: Python<'_>, recording: usize, f: impl FnOnce(&Recording) -> R) -> PyResult<R> {
        self.read(|d| d.recording(recording).map(f)).py_err(py)
    }
}

fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.getattr("loads")?.call1((text,))
}

#[pymethods]
impl PyDataset {
    /// `verify`: check every chunk at open and leave damaged episodes out (strict: raise).
    /// `exclusions_json`: what an earlier verification left out (`exclusions_json()`), applied
    /// without verifying again (a dataset pickled into a worker).
    /// `mmap`: read through memory maps (else positioned reads: no SIGBUS if a file is truncated).
    #[new]
    #[pyo3(signature = (path, strict=false, cache_bytes=256 << 20, verify=false, exclusions_json=None, mmap=true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        strict: bool,
        cache_bytes: usize,
        verify: bool,
        exclusions_json: Option<&str>,
        mmap: bool,
    ) -> PyResult<Self> {
        let options = OpenOptions { strict, cache_bytes, mmap };
        let exclusions = exclusions_json.map(Exclusions::from_json).transpose().py_err(py)?;
        let dataset = py
            .detach(|| match exclusions {
                Some(ex) => Dataset::open_excluding(&path, options, ex),
                None if verify => open_verified(&path, options).map(|(ds, _)| ds),
                None => Dataset::open(&path, options),
            })
            .py_err(py)?;
        Ok(PyDataset {
            path,
            strict,
            cache_bytes,
            inner: RwLock::new(dataset),
            plans: Mutex::new(Vec::new()),
            file_order: Mutex::new(None),
        })
    }

    /// What a verification at open left out, as JSON (None when nothing was).
    fn exclusions_json(&self) -> Option<String> {
        self.read(|d| (!d.exclusions().is_empty()).then(|| d.exclusions().to_json()))
    }

    /// Where damage lost descriptions of a recording's columns (so columns may be missing
    /// from `columns`): (file, byte offset, why), or None.
    fn schema_damage(&self, py: Python<'_>, recording: usize) -> PyResult<Option<(String, u64, String)>> {
        let damage = self.recording(py, recording, |r| r.schema_damage.clone())?;
        Ok(damage.map(|p| (p.file.display().to_string(), p.offset, p.why)))
    }

    /// Episodes reads found damaged (lenient mode), ascending.
    fn damaged_episodes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        PyArray1::from_vec(py, self.read(|d| d.damaged_episodes().into_iter().map(|e| e as i64).collect()))
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

    /// Damage found while opening (and by a verification at open): (file, byte offset, what was
    /// wrong).
    #[getter]
    fn mmap(&self) -> bool {
        self.read(|d| d.options().mmap)
    }

    /// Files replaced or deleted under the reader since opening (not damage): (file, 0, what).
    #[getter]
    fn notices(&self) -> Vec<ProblemTuple> {
        self.read(|d| d.notices().iter().map(|p| (p.file.display().to_string(), p.offset, p.why.clone())).collect())
    }

    #[getter]
    fn problems(&self) -> Vec<ProblemTuple> {
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
        self.recording(py, recording, |r| r.meta_json.clone())
    }

    /// Column specs of a recording, as dicts.
    fn columns<'py>(&self, py: Python<'py>, recording: usize) -> PyResult<Bound<'py, PyAny>> {
        let json = self
            .recording(py, recording, |r| serde_json::to_string(&r.columns))?
            .map_err(|e| invalid(py, e.to_string()))?;
        json_loads(py, &json)
    }

    /// Storage per column of each recording, from the index (nothing is decoded): dicts with
    /// recording, name, chunks, raw_bytes, stored_bytes.
    fn column_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.read(|d| {
            d.column_stats()
                .into_iter()
                .map(|c| {
                    let name = d.recordings()[c.recording].columns.get(c.column as usize).map(|s| s.name.clone());
                    (c, name.unwrap_or_else(|| format!("#{}", c.column)))
                })
                .collect::<Vec<_>>()
        });
        let out = PyList::empty(py);
        for (c, name) in rows {
            let d = PyDict::new(py);
            d.set_item("recording", c.recording)?;
            d.set_item("name", name)?;
            d.set_item("chunks", c.chunks)?;
            d.set_item("raw_bytes", c.raw_bytes)?;
            d.set_item("stored_bytes", c.stored_bytes)?;
            out.append(d)?;
        }
        Ok(out)
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
            field!("continued", bool, |e| e.continued);
            field!("continues", bool, |e| e.continues);
            Ok(())
        })?;
        Ok(out)
    }

    /// Episode metrics by column name: {name: {count, sum, mean, min, max}}, one array entry per
    /// episode in dataset order (count 0 and NaN where an episode has no value).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, m) in self.read(trajcore_core::reader::episode_metrics) {
            let d = PyDict::new(py);
            let mean = m.mean();
            d.set_item("count", PyArray1::<i64>::from_vec(py, m.count.iter().map(|&c| c as i64).collect()))?;
            d.set_item("sum", PyArray1::from_vec(py, m.sum))?;
            d.set_item("mean", PyArray1::from_vec(py, mean))?;
            d.set_item("min", PyArray1::from_vec(py, m.min))?;
            d.set_item("max", PyArray1::from_vec(py, m.max))?;
            out.set_item(name, d)?;
        }
        Ok(out)
    }

    /// The timelog stored by `recording`'s writer: (samples as JSON, damage that left some out).
    fn timelog_json(&self, py: Python<'_>, recording: usize) -> PyResult<(String, Vec<ProblemTuple>)> {
        let (samples, problems) = self.read(|d| d.timelog(recording));
        let json = serde_json::to_string(&samples).map_err(|e| invalid(py, e.to_string()))?;
        Ok((json, problems.into_iter().map(|p| (p.file.display().to_string(), p.offset, p.why)).collect()))
    }

    fn episode_metadata_json(&self, py: Python<'_>, episode: i64) -> PyResult<String> {
        py.detach(|| self.read(|d| d.episode_metadata(d.episode_index(episode)?))).py_err(py)
    }

    /// All rows of one column of one episode (T+1 on the observation timeline, T on the step
    /// timeline); str columns come back as a list of str.
    /// Rows stored raw in one chunk come back as a read-only view of the memory map (no copy).
    fn read_column<'py>(&self, py: Python<'py>, episode: i64, column: &str) -> PyResult<Bound<'py, PyAny>> {
        match py.detach(|| self.read(|d| d.episode_column(episode, column))).py_err(py)? {
            Ok(data) => column_to_py(py, data),
            Err((dtype, shape, view)) => arrays::mapped(py, view, dtype, &shape),
        }
    }

    /// A subset of episodes (dataset indexes) to sample from, with its own step numbering.
    fn selection(&self, py: Python<'_>, episodes: PyReadonlyArray1<'_, i64>) -> PyResult<PySelection> {
        let episodes = episodes.as_array();
        let set = self
            .read(|d| d.episode_set(&episodes.iter().map(|&i| d.episode_index(i)).collect::<Result<Vec<_>, _>>()?))
            .py_err(py)?;
        Ok(PySelection::new(set))
    }

    /// The episodes of the selection (default: every episode) in file order: grouped by
    /// recording, then by sub-env, each one's in the order recorded. Reading it in bulk copies
    /// whole chunks (`Transitions.blocks(order="file")`).
    #[pyo3(signature = (selection=None))]
    fn file_order(&self, py: Python<'_>, selection: Option<&Bound<'_, PySelection>>) -> PyResult<PySelection> {
        let ordered = match selection {
            Some(sel) => {
                let sel = sel.get();
                match sel.file_order.get() {
                    Some(set) => set.clone(),
                    None => {
                        let set = Arc::new(py.detach(|| self.read(|d| d.file_order(&sel.set))).py_err(py)?);
                        sel.file_order.get_or_init(|| set).clone()
                    }
                }
            }
            None => {
                let episodes = self.read(|d| d.episodes().len());
                let cached = self.file_order.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match cached.filter(|set| set.len() == episodes) {
                    Some(set) => set,
                    None => {
                        // Made without holding the lock: another thread may wait on it with the GIL.
                        let set = Arc::new(py.detach(|| self.read(|d| d.file_order(d.all_episodes()))).py_err(py)?);
                        *self.file_order.lock().unwrap_or_else(|p| p.into_inner()) = Some(set.clone());
                        set
                    }
                }
            }
        };
        // Already in file order: its own file order.
        Ok(PySelection { set: ordered.clone(), file_order: OnceLock::from(ordered) })
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
        let windows = match selection {
            Some(s) => s.get().set.windows(length, pad),
            None => self.read(|d| d.all_episodes().windows(length, pad)),
        };
        Ok(windows.py_err(py)?.num_windows())
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
        let set = selection.map(|s| s.get().set.clone());
        let found = self
            .read(|d| {
                let set = set.as_deref().unwrap_or_else(|| d.all_episodes());
                steps
                    .iter()
                    .map(|&g| set.locate_step(resolve_index(g, set.num_steps(), "step")?))
                    .collect::<Result<Vec<_>, _>>()
            })
            .py_err(py)?;
        let (e, t): (Vec<i64>, Vec<i64>) = found.into_iter().map(|(e, t)| (e as i64, t as i64)).unzip();
        Ok((PyArray1::from_vec(py, e), PyArray1::from_vec(py, t)))
    }

    /// `n` transitions drawn uniformly (with replacement) from the steps, reproducibly from `seed`.
    #[pyo3(signature = (n, seed, keys=None, selection=None))]
    fn sample_transitions<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        seed: u64,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, keys, selection, Request::Sample { n, seed }, WindowKind::TRANSITION)
    }

    /// The transitions at global step numbers (of the selection, if given; negative from the end).
    #[pyo3(signature = (steps, keys=None, selection=None))]
    fn gather_transitions<'py>(
        &self,
        py: Python<'py>,
        steps: PyReadonlyArray1<'py, i64>,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, keys, selection, Request::Numbers(steps.as_array().to_vec()), WindowKind::TRANSITION)
    }

    /// Steps `start .. stop` (global numbers of the selection, if given), read in bulk: a run
    /// per episode instead of a window per step; the same batch as `gather_transitions` over
    /// those numbers, damage included.
    #[pyo3(signature = (start, stop, keys=None, selection=None))]
    fn read_transitions<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        stop: u64,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let n = usize::try_from(stop.saturating_sub(start))
            .map_err(|_| invalid(py, format!("steps {start}..{stop} are too many to read at once")))?;
        self.batch(py, keys, selection, Request::Range { first: start, n }, WindowKind::TRANSITION)
    }

    /// `n` windows of `length` steps inside single episodes, drawn uniformly from `seed`.
    #[pyo3(signature = (n, length, seed, pad=false, keys=None, selection=None))]
    fn sample_sequences<'py>(
        slf: &Bound<'py, Self>,
        n: usize,
        length: usize,
        seed: u64,
        pad: bool,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kind = WindowKind { length, sequence: true, pad };
        slf.get().batch(slf.py(), keys, selection, Request::Sample { n, seed }, kind)
    }

    /// The windows with these numbers (0 .. `num_windows(length, pad)`).
    #[pyo3(signature = (windows, length, pad=false, keys=None, selection=None))]
    fn gather_sequences<'py>(
        &self,
        py: Python<'py>,
        windows: PyReadonlyArray1<'py, i64>,
        length: usize,
        pad: bool,
        keys: Option<Vec<String>>,
        selection: Option<&Bound<'py, PySelection>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kind = WindowKind { length, sequence: true, pad };
        self.batch(py, keys, selection, Request::Numbers(windows.as_array().to_vec()), kind)
    }

    /// Windows given as (episode, first step) pairs; `length=None`: transitions (no window axis).
    #[pyo3(signature = (episodes, steps, length=None, pad=false, keys=None))]
    fn gather_windows<'py>(
        &self,
        py: Python<'py>,
        episodes: PyReadonlyArray1<'py, i64>,
        steps: PyReadonlyArray1<'py, i64>,
        length: Option<usize>,
        pad: bool,
        keys: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (e, t) = (episodes.as_array(), steps.as_array());
        if e.len() != t.len() {
            return Err(invalid(py, format!("{} episodes for {} steps", e.len(), t.len())));
        }
        let pairs = e.iter().copied().zip(t.iter().copied()).collect();
        let kind = match length {
            Some(length) => WindowKind { length, sequence: true, pad },
            None => WindowKind::TRANSITION,
        };
        self.batch(py, keys, None, Request::Pairs(pairs), kind)
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
        let plan = self.plan(py, keys)?;
        let set = selection.map(|s| s.get().set.clone());
        batch::one_step(py, &self.inner, &plan, set.as_deref(), index)
    }

    /// Re-reads shards that grew or appeared; returns how many episodes were added.
    fn refresh(&self, py: Python<'_>) -> PyResult<usize> {
        let added = py
            .detach(|| {
                let mut guard = self.inner.write().unwrap_or_else(|p| p.into_inner());
                guard.refresh()
            })
            .py_err(py)?;
        self.plans.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(added)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let mmap = me.read(|d| d.options().mmap);
        let args = (me.path.clone(), me.strict, me.cache_bytes, false, me.exclusions_json(), mmap).into_pyobject(py)?;
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
