//! Episode metrics by column name, over a dataset's episodes: one array per statistic, for
//! filtering and tables without reading any data. An episode without a value in a column (or
//! a part that began in a shard the dataset lacks, whose stored metrics cover rows it does not
//! list) has count 0 and NaN statistics there.

use std::collections::BTreeMap;

use super::Dataset;
use crate::format::metrics::{keeps_metrics, Metric};

/// One column's metrics, one entry per episode of the dataset, in dataset order.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricColumn {
    pub count: Vec<u64>,
    pub sum: Vec<f64>,
    pub min: Vec<f64>,
    pub max: Vec<f64>,
}

impl MetricColumn {
    fn empty(n: usize) -> Self {
        MetricColumn { count: vec![0; n], sum: vec![f64::NAN; n], min: vec![f64::NAN; n], max: vec![f64::NAN; n] }
    }

    fn set(&mut self, i: usize, m: &Metric) {
        self.count[i] = m.count as u64;
        self.sum[i] = m.sum;
        self.min[i] = m.min;
        self.max[i] = m.max;
    }

    /// sum / count, NaN where there is no value.
    pub fn mean(&self) -> Vec<f64> {
        self.count.iter().zip(&self.sum).map(|(&c, &s)| if c == 0 { f64::NAN } else { s / c as f64 }).collect()
    }
}

/// Metrics by column name (sorted). A metric naming a column its recording does not list as
/// metric-bearing (numeric, scalar, masked) is ignored: it cannot be named honestly.
pub fn episode_metrics(ds: &Dataset) -> BTreeMap<String, MetricColumn> {
    let episodes = ds.episodes();
    let mut out: BTreeMap<String, MetricColumn> = BTreeMap::new();
    for (i, e) in episodes.iter().enumerate() {
        if e.continued {
            continue;
        }
        let columns = &ds.recordings()[e.recording].columns;
        for m in &e.summary.metrics {
            let Some(spec) = columns.get(m.column as usize).filter(|s| keeps_metrics(s).is_some()) else {
                continue;
            };
            out.entry(spec.name.clone()).or_insert_with(|| MetricColumn::empty(episodes.len())).set(i, m);
        }
    }
    out
}
