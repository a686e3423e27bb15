//! `trajcore._core.Selection`: a fixed subset of a dataset's episodes (what a filter kept), with
//! its own step and window numbering, made once and reused by every batch drawn from it.

use std::sync::Arc;

use numpy::PyArray1;
use pyo3::prelude::*;
use trajcore_core::reader::{Dataset, EpisodeSet};

#[pyclass(module = "trajcore._core", name = "Selection", frozen)]
pub struct PySelection {
    pub set: Arc<EpisodeSet>,
    /// The recordings its episodes come from, when not all: its batches are planned over those
    /// (one agent's, in a multi-agent dataset).
    pub among: Option<Vec<bool>>,
}

impl PySelection {
    pub fn of(d: &Dataset, set: Arc<EpisodeSet>) -> Self {
        PySelection { among: d.view().recordings_among(&set), set }
    }
}

#[pymethods]
impl PySelection {
    #[getter]
    fn num_episodes(&self) -> usize {
        self.set.len()
    }

    #[getter]
    fn num_steps(&self) -> u64 {
        self.set.num_steps()
    }

    /// The dataset indexes of its episodes, in order.
    fn episodes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        PyArray1::from_vec(py, self.set.episodes().into_iter().map(|i| i as i64).collect())
    }

    fn __len__(&self) -> usize {
        self.set.len()
    }

    fn __repr__(&self) -> String {
        format!("<trajcore._core.Selection {} episodes, {} steps>", self.set.len(), self.set.num_steps())
    }
}
