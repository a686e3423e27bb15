//! `trajcore._core.Recorder`: the step path. One call per (vector) step walks the values in Rust,
//! copies them once into the ring and returns. The class is frozen, its state behind one lock
//! (threads and forks: see the class's docstring in `_core.pyi`).

use std::sync::{Mutex, MutexGuard};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList};
use trajcore_core::host::HostValues;
use trajcore_core::writer::entries::collect::Place;
use trajcore_core::writer::entries::dynamic::data_path;
use trajcore_core::writer::entries::first_sight::{frame_places, FRAME};
use trajcore_core::writer::entries::info_keys::info_expected;
use trajcore_core::writer::{AutoresetMode, Faults, MessageKind, Recorder, RecorderConfig, Slot};
use trajcore_core::Error;

use crate::collect::Collector;
use crate::dataset::from_json;
use crate::errors::{invalid, warn, IntoPy};
use crate::infos::{warned, Sight, Values};
use crate::layout::{self, Layout};
use crate::values::{mask_bytes, put_value, ColInfo, Objects};

#[pyclass(module = "trajcore._core", name = "Recorder", frozen)]
pub struct PyRecorder {
    state: Mutex<State>,
    /// The process that made it: checked before taking the lock (a lock held by a parent's
    /// thread at fork time would never be released in the child).
    owner_pid: u32,
    #[pyo3(get)]
    num_envs: u32,
}

/// Everything a call changes.
struct State {
    rec: Recorder,
    /// Observation and action leaf columns, then reward, terminated, truncated.
    fixed: Vec<ColInfo>,
    /// The observation and action layouts (`OBSERVATION`, `ACTION`), with what errors call them.
    trees: [(Layout, &'static str); 2],
    /// The env count when values carry a leading env axis (vector envs), `None` for one env.
    rows: Option<usize>,
    /// Info entries, custom data and rendered frames: columns made on first sight.
    sight: Sight,
    coll: Collector,
}

/// A core result as a Python one: a wait that a signal ended raises the signal's exception,
/// which the interrupt check (run with the GIL re-acquired every 20 ms) left in the core.
fn interrupted<T>(py: Python<'_>, rec: &mut Recorder, result: Result<T, Error>) -> PyResult<T> {
    match (&result, rec.take_interrupt().map(|p| p.downcast::<PyErr>())) {
        (Err(Error::Interrupted(_)), Some(Ok(signal))) => Err(*signal),
        _ => result.py_err(py),
    }
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

impl State {
    /// The first-sight columns, the collector and the host that reads values into them, apart;
    /// `stacks`: see `Values`.
    fn host<'py>(&mut self, py: Python<'py>, stacks: bool) -> (&mut Sight, &mut Collector, Values<'_, 'py>) {
        (&mut self.sight, &mut self.coll, Values { py, recorder: &mut self.rec, stacks })
    }

    fn put_tree(&mut self, py: Python<'_>, tree: usize, value: &Bound<'_, PyAny>, at: Place) -> PyResult<()> {
        let ((layout, what), fixed, coll) = (&self.trees[tree], &self.fixed, &mut self.coll);
        layout.walk_value(&Objects(py), value, what, &mut |&index, leaf| put_leaf(&fixed[index], leaf, at, coll))
    }

    /// Entries for every supported entry of an info dict (vector infos: with their `_key` masks);
    /// `slot` Final: same-step autoreset's `final_info`.
    fn put_info(&mut self, py: Python<'_>, info: &Bound<'_, PyAny>, slot: Slot) -> PyResult<()> {
        let info = info
            .cast::<PyDict>()
            .map_err(|_| invalid(py, format!("{}, got {}", info_expected(slot), Objects(py).type_name(info))))?;
        let at = Place { slot, ..Place::regular(self.rows) };
        let (sight, coll, mut host) = self.host(py, true);
        sight.infos.put_info(&mut host, coll, at, info)
    }

    /// Checks the recorder, collects a call's values with `collect` and sends them as a `kind`
    /// message, waiting with the GIL released for ring space (a message that cannot be sent
    /// ends the episodes it touched: `autoreset::Splitter::refuse`). After a bad value nothing is
    /// sent: the running episodes end incomplete, keeping what they recorded, and each env's next
    /// episode records again. The collector is empty between calls, whatever happens.
    fn call(
        &mut self,
        py: Python<'_>,
        kind: MessageKind,
        collect: impl FnOnce(&mut Self) -> PyResult<()>,
    ) -> PyResult<()> {
        self.rec.check().py_err(py)?;
        if let Err(error) = collect(self) {
            self.coll.clear();
            self.sight.pending_data.clear();
            let _ = self.rec.abort(None); // every env: no index to refuse, it cannot fail
            return Err(error);
        }
        let result = self.rec.send_collected(&self.coll, kind, |rec, len| py.detach(|| rec.wait_for_space(len)));
        self.coll.clear();
        interrupted(py, &mut self.rec, result)
    }

    /// The frame(s) rendered after this reset or step (see `frame_places`): a sequence of one
    /// per sub-env (what `envs.render()` returns) is put frame by frame, each copied once into
    /// the ring, not stacked first; a `None` frame leaves its rows masked.
    fn put_frame(&mut self, py: Python<'_>, frames: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let Some(frames) = frames else { return Ok(()) };
        // An array of numbers is the frames over the envs; a sequence (or object array) is per env.
        let whole = frames.cast::<PyUntypedArray>().is_ok_and(|a| a.dtype().kind() != b'O');
        let per_env = if whole || self.rows.is_none() { None } else { Some(frames.len()?) };
        for (env, at) in frame_places(self.rows, per_env).py_err(py)? {
            let frame = env.map_or_else(|| Ok(frames.clone()), |env| frames.get_item(env))?;
            if !frame.is_none() {
                let (sight, coll, mut host) = self.host(py, true);
                warned(py, sight.frames.put(&mut host, &frame, coll, (at, None), FRAME)?)?;
            }
        }
        Ok(())
    }

    /// Same-step autoreset: the final observation and info of the envs whose episode ended
    /// (gymnasium's `_final_obs` mask, else a None observation, says which: read here item by
    /// item, as each observation is walked, so an env the mask leaves out is not read at all).
    fn collect_final(&mut self, py: Python<'_>, info: &Bound<'_, PyAny>, n: usize) -> PyResult<()> {
        let info = info.cast::<PyDict>()?;
        if let Some(final_obs) = info.get_item("final_obs")? {
            let mask = info.get_item("_final_obs")?;
            for env in 0..n {
                let obs = match &mask {
                    Some(m) if !m.get_item(env)?.is_truthy()? => continue,
                    _ => final_obs.get_item(env)?,
                };
                if mask.is_some() || !obs.is_none() {
                    self.put_tree(py, OBSERVATION, &obs, Place::env(env, Slot::Final))?;
                }
            }
        }
        if let Some(final_info) = info.get_item("final_info")? {
            self.put_info(py, &final_info, Slot::Final)?;
        }
        Ok(())
    }
}

/// One leaf value as one entry.
fn put_leaf(col: &ColInfo, value: &Bound<'_, PyAny>, at: Place, coll: &mut Collector) -> PyResult<()> {
    put_value(value, col, at.rows, coll).map(|data| coll.push(col.id, at, None, data))
}

const OBSERVATION: usize = 0;
const ACTION: usize = 1;

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
        let fixed: Vec<ColInfo> =
            rec.columns().iter().map(|spec| ColInfo::new(py, &rec, spec.id)).collect::<PyResult<_>>()?;
        let parse = |tree| layout::parse(py, tree, &|name| fixed.iter().position(|c| c.name == name));
        let trees = [(parse(&rec.config().observation)?, "observation"), (parse(&rec.config().action)?, "action")];
        let state = State {
            fixed,
            trees,
            rows: rec.config().rows(),
            sight: Sight::new(rec.config(), !test_no_info_plans),
            coll: Collector::default(),
            rec,
        };
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
        self.lock(py)?.call(py, MessageKind::Reset, |st| {
            st.put_tree(py, OBSERVATION, observation, Place::regular(st.rows))?;
            st.put_info(py, info, Slot::Regular)?;
            st.put_frame(py, frame)?;
            if let Some(mask) = mask {
                let n = st.rows.ok_or_else(|| invalid(py, "a reset mask needs a vector recorder"))?;
                st.coll.head_mask = Some(mask_bytes(py, mask, n, "reset mask", &mut st.coll)?);
            }
            Ok(())
        })
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
        st.call(py, MessageKind::Step, |st| {
            let at = Place::regular(st.rows);
            st.put_tree(py, ACTION, action, at)?;
            st.put_tree(py, OBSERVATION, observation, at)?;
            for (role, value) in st.rec.role_columns().into_iter().zip([reward, terminated, truncated]) {
                put_leaf(&st.fixed[role as usize], value, at, &mut st.coll)?;
            }
            st.put_info(py, info, Slot::Regular)?;
            st.put_frame(py, frame)?;
            if let (AutoresetMode::SameStep, Some(n)) = (st.rec.config().autoreset_mode, st.rows) {
                st.collect_final(py, info, n)?;
            }
            let (sight, coll, mut host) = st.host(py, true);
            for (path, value) in sight.pending_data.take() {
                warned(py, sight.data.put(&mut host, value.bind(py), coll, (at, None), &path)?)?;
            }
            Ok(())
        })?;
        for warning in st.rec.step_warnings() {
            warn(py, &warning)?;
        }
        let ended = st.rec.episodes_ended().iter();
        let items = ended.map(|e| (e.lane, e.length, e.episode_return, e.terminated, e.truncated));
        Ok(if items.len() == 0 { None } else { Some(PyList::new(py, items)?) })
    }

    /// Checks the value now (its column made on first sight), as it is (not stacked); the
    /// collector is used as scratch and left empty.
    fn record(&self, py: Python<'_>, name: &str, value: Py<PyAny>) -> PyResult<()> {
        let st = &mut *self.lock(py)?;
        let path = st.rec.check().and_then(|()| data_path(name)).py_err(py)?;
        let rows = st.rows;
        let (sight, coll, mut host) = st.host(py, false);
        let checked = sight.data.check(&mut host, value.bind(py), coll, rows, &path);
        coll.clear();
        checked?.py_err(py)?;
        sight.pending_data.set(path, value);
        Ok(())
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
        for warning in st.sight.close().iter().chain(&st.rec.close_warnings()) {
            warn(py, warning)?;
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
        let guard = self.lock(py)?;
        let mut stats = guard.rec.stats();
        stats.values_not_recorded.extend(guard.sight.not_recorded());
        from_json(py, serde_json::to_string(&stats))
    }
}
