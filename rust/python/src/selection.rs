//! `trajcore._core.Selection`: episodes of a dataset (every one, or a fixed subset: what a filter
//! kept) with their own step and window numbering, and every training read over them. Reads
//! release the GIL. What each method does is said in `trajcore/_core.pyi`.

use std::sync::Arc;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyRange, PyRangeMethods, PyTuple};
use trajcore_core::reader::{BatchOut, Request, Subset, WindowKind};

use crate::batch::{self, Plan};
use crate::errors::{warn, IntoPy};
use crate::open_dataset::{over, OpenDataset};

#[pyclass(module = "trajcore._core", name = "Selection", frozen)]
pub struct PySelection {
    pub(crate) reader: Arc<OpenDataset>,
    pub(crate) subset: Subset,
}

impl PySelection {
    fn batch<'py>(
        &self,
        py: Python<'py>,
        keys: Option<Vec<String>>,
        request: Request,
        kind: WindowKind,
    ) -> PyResult<Bound<'py, PyDict>> {
        let plan = self.reader.plan(keys, self.subset.among.as_deref(), |d, k, a| Plan::new(py, d, k, a))?;
        let fields = &plan.core.fields;
        // Lenient reads leave the episodes damage affects out, and say which (`gather_lenient`).
        let (values, damage) = batch::read_outputs(py, &plan.core.outputs(request.len(), kind), |outs| {
            let out = BatchOut::new(outs, fields.len());
            over(py, &self.reader, |d| d.view().read_batch(self.subset.episodes(d), fields, request, kind, out))
        })?;
        for d in damage {
            warn(py, &d.warning())?;
        }
        plan.nest(py, &values, PyDict::new(py))
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

#[pymethods]
impl PySelection {
    #[getter]
    fn num_steps(&self) -> u64 {
        self.reader.read(|d| self.subset.episodes(d).num_steps())
    }

    fn episodes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        let episodes = self.reader.read(|d| self.subset.episodes(d).episodes());
        PyArray1::from_vec(py, episodes.into_iter().map(|i| i as i64).collect())
    }

    fn __len__(&self) -> usize {
        self.reader.read(|d| self.subset.episodes(d).len())
    }

    fn __repr__(&self) -> String {
        self.reader.read(|d| format!("<trajcore._core.Selection {}>", self.subset.episodes(d)))
    }

    fn file_order(&self, py: Python<'_>) -> PyResult<PySelection> {
        let subset = over(py, &self.reader, |d| d.subset_in_file_order(&self.subset))?;
        Ok(PySelection { reader: self.reader.clone(), subset })
    }

    #[pyo3(signature = (length, pad=false))]
    fn num_windows(&self, py: Python<'_>, length: u64, pad: bool) -> PyResult<u64> {
        over(py, &self.reader, |d| Ok(self.subset.episodes(d).windows(length, pad)?.num_windows()))
    }

    #[pyo3(signature = (n, seed, length=None, pad=false, keys=None))]
    fn sample<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        seed: u64,
        length: Option<usize>,
        pad: bool,
        keys: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, keys, Request::Sample { n, seed }, WindowKind::of(length, pad))
    }

    #[pyo3(signature = (which, length=None, pad=false, keys=None))]
    fn gather<'py>(
        &self,
        py: Python<'py>,
        which: &Bound<'py, PyAny>,
        length: Option<usize>,
        pad: bool,
        keys: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, keys, request_of(which)?, WindowKind::of(length, pad))
    }

    #[pyo3(signature = (index, keys=None))]
    fn step<'py>(&self, py: Python<'py>, index: i64, keys: Option<Vec<String>>) -> PyResult<Bound<'py, PyDict>> {
        let plan = self.reader.plan(keys, self.subset.among.as_deref(), |d, k, a| Plan::new(py, d, k, a))?;
        let (mut values, window) = batch::read_outputs(py, &plan.step_outputs, |mut outs| {
            over(py, &self.reader, |d| d.view().read_step(self.subset.episodes(d), &plan.core.fields, index, &mut outs))
        })?;
        values.extend([window.episode.into_pyobject(py)?.into_any(), window.start.into_pyobject(py)?.into_any()]);
        plan.nest(py, &values, plan.step_template.bind(py).copy()?)
    }

    fn frames_of<'py>(&self, py: Python<'py>, column: &str, max_bytes: u64) -> PyResult<Bound<'py, PyTuple>> {
        let t = over(py, &self.reader, |d| d.view().frames_of(column, self.subset.episodes(d), max_bytes))?;
        (PyArray1::from_vec(py, t.frames), PyArray1::from_vec(py, t.ids), t.stack).into_pyobject(py)
    }
}
