//! Columns made on first sight (info entries, custom data, rendered frames): the column of each
//! key path, the spec a new one gets from its first value, the paths whose values could not make
//! one yet, and the values left out (`Skips`). `C` is the caller's column, `T` what it keeps of
//! a value that made no column (a Python type in the bindings, to refuse the same type again
//! without asking numpy each step).

use std::collections::HashMap;

use super::skips::Skips;
use crate::schema::escape_key;
use crate::writer::NewColumn;
use crate::{CodecSpec, DType, Error, Result, Timeline};

/// The path of custom data `name` (`record`): names starting with `_` are kept for masks.
pub fn data_path(name: &str) -> Result<String> {
    if name.is_empty() || name.starts_with('_') {
        return Err(Error::Invalid(format!("custom data name '{name}' must be non-empty and not start with '_'")));
    }
    Ok(escape_key(name))
}

#[derive(Debug)]
pub struct DynamicColumns<C, T> {
    prefix: &'static str,
    timeline: Timeline,
    codec: CodecSpec,
    columns: Vec<C>,
    by_path: HashMap<String, usize>,
    unsupported: HashMap<String, (T, String)>,
    /// For each column, the one that continues it with a wider type, once made (see `widen`).
    wider: Vec<Option<usize>>,
    pub skips: Skips,
}

impl<C, T> DynamicColumns<C, T> {
    pub fn new(prefix: &'static str, timeline: Timeline, codec: CodecSpec) -> Self {
        let (columns, by_path, unsupported) = (Vec::new(), HashMap::new(), HashMap::new());
        let wider = Vec::new();
        DynamicColumns { prefix, timeline, codec, columns, by_path, unsupported, wider, skips: Skips::new(prefix) }
    }

    /// Column `index` (as `find` and `add` give it).
    pub fn get(&self, index: usize) -> &C {
        &self.columns[index]
    }

    /// The column of `path` (below the prefix), if made.
    pub fn find(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied()
    }

    /// What the last value of `path` that could make no column was, and why it could not.
    pub fn unsupported(&self, path: &str) -> Option<&(T, String)> {
        self.unsupported.get(path)
    }

    /// The spec of a new masked column of `path` for values of `dtype` and per-row `shape`
    /// (str columns are not delta-coded: their offsets are, by the format).
    pub fn spec(&self, path: &str, dtype: DType, shape: &[usize]) -> NewColumn {
        let codec = CodecSpec { delta: self.codec.delta && dtype != DType::Utf8, ..self.codec.clone() };
        NewColumn {
            name: self.name_of(path),
            dtype,
            shape: shape.iter().map(|&d| d as u64).collect(),
            timeline: self.timeline,
            masked: true,
            codec,
            widens: None,
        }
    }

    /// Keeps `column`, made for `path`; its index.
    pub fn add(&mut self, path: &str, column: C) -> usize {
        self.columns.push(column);
        self.wider.push(None);
        self.by_path.insert(path.to_owned(), self.columns.len() - 1);
        self.unsupported.remove(path);
        self.columns.len() - 1
    }

    /// A value `kind` of `path` could make no column, for reason `why`.
    pub fn refuse(&mut self, path: &str, kind: T, why: String) {
        self.unsupported.insert(path.to_owned(), (kind, why));
    }

    /// The column name of `path`.
    pub fn name_of(&self, path: &str) -> String {
        format!("{}/{path}", self.prefix)
    }

    /// The path below the prefix of a column name.
    pub fn path_of<'a>(&self, name: &'a str) -> &'a str {
        let path = &name[self.prefix.len() + 1..];
        // A widened column's name ends in `%W<dtype>` (see `widened_spec`).
        path.split_once("%W").map_or(path, |(key, _)| key)
    }

    /// The spec of the column that continues `path`'s column `widens` (its id in the recording)
    /// with values of the wider `dtype`. Its name is the key's with `%W<dtype>`, which no key
    /// escapes to (`escape_key` escapes every '%'); readers find it by `widens`, not by name.
    pub fn widened_spec(&self, path: &str, dtype: DType, shape: &[usize], widens: u32) -> NewColumn {
        let mut spec = self.spec(path, dtype, shape);
        spec.name = format!("{}%W{}", spec.name, dtype.name());
        spec.widens = Some(widens);
        spec
    }

    /// Keeps `column`, made by `widened_spec` to continue column `from` (an index): `path`'s
    /// values go to it from now on. Its index.
    pub fn add_widened(&mut self, from: usize, path: &str, column: C) -> usize {
        let index = self.add(path, column);
        self.wider[from] = Some(index);
        index
    }

    /// The column that now takes the values of column `index`: itself, or the last that
    /// widened it.
    pub fn latest(&self, mut index: usize) -> usize {
        while let Some(next) = self.wider[index] {
            index = next;
        }
        index
    }
}

/// Custom data recorded for the coming step (`record`), by path: a path recorded again keeps its
/// place and takes the new value.
#[derive(Debug)]
pub struct PendingData<V> {
    values: Vec<(String, V)>,
}

impl<V> Default for PendingData<V> {
    fn default() -> Self {
        PendingData { values: Vec::new() }
    }
}

impl<V> PendingData<V> {
    pub fn set(&mut self, path: String, value: V) {
        match self.values.iter_mut().find(|(p, _)| *p == path) {
            Some(slot) => slot.1 = value,
            None => self.values.push((path, value)),
        }
    }

    /// The values for the step, in the order their paths were first recorded; leaves none.
    pub fn take(&mut self) -> Vec<(String, V)> {
        std::mem::take(&mut self.values)
    }

    pub fn clear(&mut self) {
        self.values.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_data_keeps_the_last_value_of_each_path_in_first_order() {
        let mut p = PendingData::default();
        for (path, value) in [("a", 1), ("b", 2), ("a", 3)] {
            p.set(path.to_owned(), value);
        }
        assert_eq!(p.take(), [("a".to_owned(), 3), ("b".to_owned(), 2)]);
        assert!(p.take().is_empty());
        p.set("c".to_owned(), 4);
        p.clear();
        assert!(p.take().is_empty());
    }

    #[test]
    fn columns_are_found_by_path_and_refusals_forgotten_once_made() {
        let codec = CodecSpec { delta: true, ..CodecSpec::default() };
        let mut d = DynamicColumns::<&str, char>::new("info", Timeline::Obs, codec);
        assert_eq!(d.find("a%2Fb"), None);
        d.refuse("a%2Fb", 's', "why".into());
        assert_eq!(d.unsupported("a%2Fb"), Some(&('s', "why".to_string())));
        let spec = d.spec("a%2Fb", DType::F32, &[2, 3]);
        assert_eq!((spec.name.as_str(), spec.shape.as_slice(), spec.masked), ("info/a%2Fb", &[2u64, 3][..], true));
        assert!(spec.codec.delta && !d.spec("s", DType::Utf8, &[]).codec.delta);
        let i = d.add("a%2Fb", "column");
        assert_eq!((d.find("a%2Fb"), *d.get(i), d.unsupported("a%2Fb")), (Some(i), "column", None));
        assert_eq!((d.path_of("info/a%2Fb"), d.name_of("x").as_str()), ("a%2Fb", "info/x"));
    }

    #[test]
    fn widened_columns_take_the_values_from_then_on() {
        let mut d = DynamicColumns::<&str, char>::new("info", Timeline::Obs, CodecSpec::default());
        let first = d.add("prob", "int64");
        let spec = d.widened_spec("prob", DType::F64, &[], 7);
        assert_eq!((spec.name.as_str(), spec.widens, spec.masked), ("info/prob%Wfloat64", Some(7), true));
        assert_eq!(d.latest(first), first);
        let second = d.add_widened(first, "prob", "float64");
        assert_eq!((d.latest(first), d.latest(second), d.find("prob")), (second, second, Some(second)));
        assert_eq!(d.path_of("info/prob%Wfloat64"), "prob");
    }

    #[test]
    fn data_names_are_checked_then_escaped() {
        let cases = [("x", Some("x")), ("a/b", Some("a%2Fb")), ("", None), ("_x", None), ("x_", Some("x_"))];
        for (name, path) in cases {
            assert_eq!(data_path(name).ok().as_deref(), path, "{name:?}");
        }
    }
}
