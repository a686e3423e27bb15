//! `trajcore._core.Recorder`: the step path. One call per (vector) step walks the values in Rust,
//! copies them once into the ring and returns. The class is frozen, its state behind one lock
//! (threads and forks: see the class's docstring in `_core.pyi`).

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyList, PyString};
use trajcore_core::writer::entries::call_values::CallValues;
use trajcore_core::writer::{Faults, Recorder, RecorderConfig};
use trajcore_core::Error;

use crate::dataset::from_json;
use crate::errors::{warn, IntoPy};
use crate::values::{ColInfo, Objects, TypeOf};

#[pyclass(module = "trajcore._core", name = "Recorder", frozen)]
pub struct PyRecorder {
    state: Mutex<State>,
    /// The process that made it: checked before taking the lock (a lock held by a parent's
    /// thread at fork time would never be released in the child).
    owner_pid: u32,
    #[pyo3(get)]
    num_envs: u32,
}

/// Everything a call changes: the recorder and what its calls keep between them.
type State = CallValues<ColInfo, TypeOf, Py<PyString>, Py<PyAny>, Py<PyAny>>;

/// A core result as a Python one: a wait that a signal ended raises the signal's exception,
/// which the interrupt check (run with the GIL re-acquired every 20 ms) left in the core.
fn interrupted<T>(py: Python<'_>, rec: &mut Recorder, result: Result<T, Error>) -> PyResult<T> {
    match (&result, rec.take_interrupt().map(|p| p.downcast::<PyErr>())) {
        (Err(Error::Interrupted(_)), Some(Ok(signal))) => Err(*signal),
        _ => result.py_err(py),
    }
}

/// Waits for ring space for a message of `len` bytes with the GIL released.
fn wait_for_space(py: Python<'_>) -> impl FnOnce(&mut Recorder, usize) -> Result<(), Error> + '_ {
    move |rec, len| py.detach(|| rec.wait_for_space(len))
}

/// `work` on the recorder with the GIL released (it waits: for the writer, for ring space).
fn detached<T: Send>(
    py: Python<'_>,
    rec: &mut Recorder,
    work: impl FnOnce(&mut Recorder) -> Result<T, Error> + Send,
) -> PyResult<T> {
    let result = py.detach(|| work(rec));
    interrupted(py, rec, result)
}

impl PyRecorder {
    /// The state, for one call. Checks the process first; waits for another thread's call with
    /// the GIL released (holding it would deadlock with a call that waits for the GIL itself).
    fn lock(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, State>> {
        trajcore_core::process::check_owner(self.owner_pid).py_err(py)?;
        // Waits for the lock detached from the interpreter and keeps it while re-attaching, so
        // a thread that keeps calling cannot starve another.
        Ok(self.state.lock_py_attached(py).unwrap_or_else(|p| p.into_inner()))
    }
}

#[pymethods]
impl PyRecorder {
    #[new]
    #[pyo3(signature = (path, config_json, *, report_ended=false, test_faults=None, test_no_info_plans=false))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        config_json: &str,
        report_ended: bool,
        test_faults: Option<&str>,
        test_no_info_plans: bool,
    ) -> PyResult<Self> {
        let faults = test_faults.map_or(Ok(Faults::default()), Faults::from_json).py_err(py)?;
        let config = RecorderConfig::from_json(config_json).py_err(py)?;
        let mut rec = py.detach(|| Recorder::create_with_faults(&path, config, faults)).py_err(py)?;
        rec.report_ended(report_ended);
        rec.set_interrupt_check(Box::new(|| Python::attach(|py| py.check_signals()).map_err(|e| Box::new(e) as _)));
        let state = State::new(Objects(py), rec, !test_no_info_plans)?;
        let (num_envs, owner_pid) = (state.rec.config().num_envs, trajcore_core::process::current_pid());
        Ok(PyRecorder { state: Mutex::new(state), owner_pid, num_envs })
    }

    #[pyo3(signature = (observation, info, mask=None, frame=None))]
    fn reset(
        &self,
        py: Python<'_>,
        observation: &Bound<'_, PyAny>,
        info: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        frame: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let st = &mut *self.lock(py)?;
        let sent = st.reset(Objects(py), (observation, info), mask, frame, wait_for_space(py))?;
        interrupted(py, &mut st.rec, sent)
    }

    /// None when the step ended no episode: most steps allocate nothing for it.
    #[allow(clippy::too_many_arguments)] // gymnasium's step tuple, and the frame
    #[pyo3(signature = (action, observation, reward, terminated, truncated, info, frame=None))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        action: &Bound<'py, PyAny>,
        observation: &Bound<'py, PyAny>,
        reward: &Bound<'py, PyAny>,
        terminated: &Bound<'py, PyAny>,
        truncated: &Bound<'py, PyAny>,
        info: &Bound<'py, PyAny>,
        frame: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let st = &mut *self.lock(py)?;
        let values = [action, observation, reward, terminated, truncated, info];
        let sent = st.step(Objects(py), values, frame, wait_for_space(py))?;
        interrupted(py, &mut st.rec, sent)?;
        for warning in st.rec.step_warnings() {
            warn(py, &warning)?;
        }
        let ended = st.rec.episodes_ended().iter();
        let items = ended.map(|e| (e.lane, e.length, e.episode_return, e.terminated, e.truncated));
        Ok(if items.len() == 0 { None } else { Some(PyList::new(py, items)?) })
    }

    fn record(&self, py: Python<'_>, name: &str, value: Py<PyAny>) -> PyResult<()> {
        self.lock(py)?.record(Objects(py), name, value)
    }

    fn set_episode_metadata(&self, py: Python<'_>, env_index: i64, metadata_json: &str) -> PyResult<()> {
        detached(py, &mut self.lock(py)?.rec, |rec| rec.set_episode_metadata(env_index, metadata_json))
    }

    fn set_episode_defaults(&self, py: Python<'_>, metadata_json: &str) -> PyResult<()> {
        detached(py, &mut self.lock(py)?.rec, |rec| rec.set_episode_defaults(metadata_json))
    }

    fn discard(&self, py: Python<'_>, env_index: i64) -> PyResult<()> {
        self.lock(py)?.rec.discard(env_index).py_err(py)
    }

    fn mark_start_lost(&self, py: Python<'_>, env_index: i64) -> PyResult<()> {
        self.lock(py)?.rec.mark_start_lost(env_index).py_err(py)
    }

    /// The core's `abort` does not check the recorder (a failed call ends its episodes with it):
    /// checked after, as every call is, so that an index out of range is named first.
    #[pyo3(signature = (env_index=None))]
    fn abort(&self, py: Python<'_>, env_index: Option<i64>) -> PyResult<()> {
        let rec = &mut self.lock(py)?.rec;
        rec.abort(env_index).and_then(|()| rec.check()).py_err(py)
    }

    #[pyo3(signature = (for_readers=false))]
    fn flush(&self, py: Python<'_>, for_readers: bool) -> PyResult<()> {
        detached(py, &mut self.lock(py)?.rec, if for_readers { Recorder::flush_for_readers } else { Recorder::flush })
    }

    /// Waits with the GIL released; a close that a signal interrupted is not closed yet, and a
    /// later call finishes it (and warns then).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let st = &mut *self.lock(py)?;
        if st.rec.is_closed() {
            return Ok(());
        }
        let closed = detached(py, &mut st.rec, Recorder::close);
        if !st.rec.is_closed() {
            return closed;
        }
        for warning in st.close_warnings() {
            warn(py, &warning)?;
        }
        closed
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.lock(py)?.rec.is_closed())
    }

    #[getter]
    fn shard_paths(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.lock(py)?.rec.shard_paths().iter().map(|p| p.display().to_string()).collect())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_json(py, serde_json::to_string(&self.lock(py)?.stats()))
    }
}
