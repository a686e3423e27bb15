//! Episode metrics by column name, over a dataset's episodes: one array per statistic, for
//! filtering and tables without reading any data. An episode without a value in a column (or
//! a part that began in a shard the dataset lacks, whose stored metrics cover rows it does not
//! list) has count 0 and NaN statistics there.

use std::collections::BTreeMap;

use crate::format::metrics::{keeps_metrics, Metric};
use crate::reader::{Dataset, EpisodeRef};

/// One value per episode of a field, in dataset order: what the bindings make one array of.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    I64(Vec<i64>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
}

/// The summary fields of every episode, by name, in dataset order.
pub fn episode_summaries(ds: &Dataset) -> Vec<(&'static str, Values)> {
    let eps = ds.episodes();
    let int = |f: fn(&EpisodeRef) -> u64| Values::I64(eps.iter().map(|e| f(e) as i64).collect());
    let flag = |f: fn(&EpisodeRef) -> bool| Values::Bool(eps.iter().map(f).collect());
    vec![
        ("recording", int(|e| e.recording as u64)),
        ("shard", int(|e| e.shard as u64)),
        ("env_index", int(|e| e.summary.lane as u64)),
        ("length", int(|e| e.summary.length)),
        ("episode_return", Values::F64(eps.iter().map(|e| e.summary.episode_return).collect())),
        ("complete", flag(|e| e.summary.complete())),
        ("terminated", flag(|e| e.summary.terminated())),
        ("truncated", flag(|e| e.summary.truncated())),
        ("start_ns", int(|e| e.summary.start_ns)),
        ("end_ns", int(|e| e.summary.end_ns)),
        ("episode_id", int(|e| e.summary.episode_id)),
        ("continued", flag(|e| e.continued)),
        ("continues", flag(|e| e.continues)),
    ]
}

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

    /// Its statistics by name: count, sum, mean, min, max.
    pub fn fields(self) -> Vec<(&'static str, Values)> {
        let mean = self.mean();
        let count = self.count.iter().map(|&c| c as i64).collect();
        vec![
            ("count", Values::I64(count)),
            ("sum", Values::F64(self.sum)),
            ("mean", Values::F64(mean)),
            ("min", Values::F64(self.min)),
            ("max", Values::F64(self.max)),
        ]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_fields_name_each_statistic_with_the_mean_nan_where_no_value() {
        let m = MetricColumn {
            count: vec![2, 0],
            sum: vec![3.0, f64::NAN],
            min: vec![1.0, f64::NAN],
            max: vec![2.0, f64::NAN],
        };
        let fields = m.fields();
        let names: Vec<_> = fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["count", "sum", "mean", "min", "max"]);
        assert_eq!(fields[0].1, Values::I64(vec![2, 0]));
        let Values::F64(mean) = &fields[2].1 else { panic!("mean is f64") };
        assert_eq!(mean[0], 1.5);
        assert!(mean[1].is_nan());
    }
}
