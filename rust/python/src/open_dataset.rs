//! What a `Dataset` and its `Selection`s read through (shared, so that a selection holds the
//! reader, not the Python object): the core's dataset behind a lock (`refresh` writes it) and
//! one cache of batch plans.

use std::sync::{Arc, RwLock};

use pyo3::prelude::*;
use trajcore_core::reader::{Dataset, PlanCache};

use crate::batch::Plan;
use crate::errors::IntoPy;

pub struct OpenDataset {
    pub dataset: RwLock<Dataset>,
    /// Batch plans of the dataset's selections, made again when a refresh made them stale.
    plans: PlanCache<Plan>,
}

impl OpenDataset {
    pub fn new(dataset: Dataset) -> Arc<Self> {
        Arc::new(OpenDataset { dataset: RwLock::new(dataset), plans: PlanCache::default() })
    }

    pub fn read<R>(&self, f: impl FnOnce(&Dataset) -> R) -> R {
        let guard = self.dataset.read().unwrap_or_else(|p| p.into_inner());
        f(&guard)
    }

    /// `read` of a core call, with the GIL released.
    pub fn over<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Dataset) -> trajcore_core::Result<R> + Send,
    ) -> PyResult<R> {
        py.detach(|| self.read(f)).py_err(py)
    }

    /// The batch plan of `keys` over the recordings `among` (`None`: all), made on first use.
    pub fn plan(&self, py: Python<'_>, keys: Option<Vec<String>>, among: Option<&[bool]>) -> PyResult<Arc<Plan>> {
        let at = self.read(|d| d.plan_generation());
        self.plans.get_or_make_at(at, keys, among, |keys, among| self.read(|d| Plan::new(py, d, keys, among)))
    }
}
