//! Episode metrics: for each numeric scalar info and custom-data column, how many rows of the
//! episode have a value and their sum, min and max (in row order, float64). Computed by the
//! writer as rows arrive and stored with the episode's record, so a reader filters and
//! summarizes episodes by them without reading any data (RLlib's per-episode custom metrics,
//! without a callback).
//!
//! Blob: empty, or a `format::table` of entries of at least 32 bytes: `column u32, count u32,
//! sum f64, min f64, max f64`; readers skip the bytes they do not know.

use super::{f64_at, table, u32_at};
use crate::dtype::DType;
use crate::schema::ColumnSpec;

pub const ENTRY_LEN: usize = 32;

/// One column's metric over one episode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    pub column: u32,
    pub count: u32,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

impl Metric {
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum / self.count as f64
        }
    }
}

/// Accumulates metrics by column id as rows arrive.
#[derive(Debug, Clone, Default)]
pub struct MetricsAcc {
    /// Indexed by column id; `count == 0` means no value yet.
    by_column: Vec<Metric>,
}

impl MetricsAcc {
    pub fn add(&mut self, column: u32, value: f64) {
        let i = column as usize;
        if self.by_column.len() <= i {
            self.by_column.resize(i + 1, Metric { column: 0, count: 0, sum: 0.0, min: 0.0, max: 0.0 });
        }
        let m = &mut self.by_column[i];
        if m.count == 0 {
            *m = Metric { column, count: 1, sum: value, min: value, max: value };
        } else {
            m.count = m.count.saturating_add(1);
            m.sum += value;
            // NaN propagates into sum; min/max keep the finite extremes (a NaN is still counted).
            m.min = m.min.min(value);
            m.max = m.max.max(value);
        }
    }

    pub fn metrics(&self) -> Vec<Metric> {
        self.by_column.iter().filter(|m| m.count > 0).copied().collect()
    }
}

pub fn encode(metrics: &[Metric]) -> Vec<u8> {
    if metrics.is_empty() {
        return Vec::new();
    }
    let mut out = table::start(metrics.len(), ENTRY_LEN);
    for m in metrics {
        out.extend_from_slice(&m.column.to_le_bytes());
        out.extend_from_slice(&m.count.to_le_bytes());
        out.extend_from_slice(&m.sum.to_le_bytes());
        out.extend_from_slice(&m.min.to_le_bytes());
        out.extend_from_slice(&m.max.to_le_bytes());
    }
    out
}

pub fn decode(blob: &[u8]) -> Result<Vec<Metric>, String> {
    if blob.is_empty() {
        return Ok(Vec::new());
    }
    Ok(table::entries(blob, ENTRY_LEN, "metrics table")?
        .map(|e| Metric {
            column: u32_at(e, 0),
            count: u32_at(e, 4),
            sum: f64_at(e, 8),
            min: f64_at(e, 16),
            max: f64_at(e, 24),
        })
        .collect())
}

/// The dtype a column's metrics are kept in, if they are: numeric scalar columns that may miss
/// rows (info entries and custom data, which always have a mask).
pub fn keeps_metrics(spec: &ColumnSpec) -> Option<DType> {
    let dtype = spec.dtype().ok()?;
    (spec.shape.is_empty() && spec.mask.is_some() && scalar(dtype, &[0; 8]).is_some()).then_some(dtype)
}

/// The value of one scalar row of a numeric dtype, as float64 (`None` for str and bool).
pub fn scalar(dtype: DType, bytes: &[u8]) -> Option<f64> {
    let b = |n: usize| bytes.get(..n);
    Some(match dtype {
        DType::U8 => b(1)?[0] as f64,
        DType::I8 => b(1)?[0] as i8 as f64,
        DType::U16 => u16::from_le_bytes(b(2)?.try_into().ok()?) as f64,
        DType::I16 => i16::from_le_bytes(b(2)?.try_into().ok()?) as f64,
        DType::U32 => u32::from_le_bytes(b(4)?.try_into().ok()?) as f64,
        DType::I32 => i32::from_le_bytes(b(4)?.try_into().ok()?) as f64,
        DType::U64 => u64::from_le_bytes(b(8)?.try_into().ok()?) as f64,
        DType::I64 => i64::from_le_bytes(b(8)?.try_into().ok()?) as f64,
        DType::F32 => f32::from_le_bytes(b(4)?.try_into().ok()?) as f64,
        DType::F64 => f64::from_le_bytes(b(8)?.try_into().ok()?),
        DType::F16 => f16_to_f64(u16::from_le_bytes(b(2)?.try_into().ok()?)),
        DType::Bool | DType::Utf8 => return None,
    })
}

pub(crate) fn f16_to_f64(h: u16) -> f64 {
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f64;
    match exp {
        0 => sign * man * 2f64.powi(-24),
        0x1f if man == 0.0 => sign * f64::INFINITY,
        0x1f => f64::NAN,
        e => sign * (1.0 + man / 1024.0) * 2f64.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_stats() {
        let mut acc = MetricsAcc::default();
        for (c, v) in [(5, 1.0), (5, -2.0), (2, 7.5), (5, 4.0)] {
            acc.add(c, v);
        }
        let m = acc.metrics();
        assert_eq!(m.len(), 2);
        assert_eq!((m[1].column, m[1].count, m[1].sum, m[1].min, m[1].max), (5, 3, 3.0, -2.0, 4.0));
        assert_eq!(m[1].mean(), 1.0);
        assert_eq!(decode(&encode(&m)).unwrap(), m);
        assert!(decode(&encode(&m)[..10]).is_err());
        assert_eq!(scalar(DType::I16, &(-3i16).to_le_bytes()), Some(-3.0));
        assert_eq!(scalar(DType::F16, &0x3c00u16.to_le_bytes()), Some(1.0));
        assert_eq!(scalar(DType::Bool, &[1]), None);
    }
}
