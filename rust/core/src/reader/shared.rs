//! A dataset read from several threads at once (a host's dataset object and the selections over
//! it): behind a lock that only `refresh` takes for writing, with one cache of the batch plans
//! its readers make (`P`: a plan as the caller keeps it, e.g. with its keys made host strings).

use std::sync::{Arc, RwLock};

use crate::error::Result;
use crate::reader::{Dataset, PlanCache};

pub struct SharedDataset<P> {
    dataset: RwLock<Dataset>,
    plans: PlanCache<P>,
}

impl<P> SharedDataset<P> {
    pub fn new(dataset: Dataset) -> Arc<Self> {
        Arc::new(SharedDataset { dataset: RwLock::new(dataset), plans: PlanCache::default() })
    }

    /// `f` of the dataset. A reader that panicked leaves it readable: no read changes it.
    pub fn read<R>(&self, f: impl FnOnce(&Dataset) -> R) -> R {
        f(&self.dataset.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// `Dataset::refresh`, with the listing's counts after it: (episodes added, problems,
    /// notices). With the counts, a refresh asks for the listing only when they grew (it costs
    /// as much as the dataset; a learner refreshes at every step). Batch plans it made stale are
    /// made again at their next use (`Dataset::plan_generation`).
    pub fn refresh(&self) -> Result<(usize, usize, usize)> {
        let mut d = self.dataset.write().unwrap_or_else(|p| p.into_inner());
        Ok((d.refresh()?, d.problems().len(), d.notices().len()))
    }

    /// The batch plan of `keys` over the recordings `among` (`None`: all), made by `make` on
    /// first use and again once the dataset's plans went stale.
    pub fn plan<E>(
        &self,
        keys: Option<Vec<String>>,
        among: Option<&[bool]>,
        make: impl FnOnce(&Dataset, Option<&[String]>, Option<&[bool]>) -> std::result::Result<P, E>,
    ) -> std::result::Result<Arc<P>, E> {
        self.read(|d| self.plans.get_or_make_at(d.plan_generation(), keys, among, |keys, among| make(d, keys, among)))
    }
}
