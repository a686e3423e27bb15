//! Columns made on first sight (info entries, custom data, rendered frames): the column of each
//! key path, the spec a new one gets from its first value, the paths whose values could not make
//! one yet, and the values left out (`Skips`); and what happens to a value (`put`, `put_into`,
//! `check`): which column takes it, when a column widens, when a value is left out. The caller
//! (`Host`) only converts the value and writes it. `C` is the caller's column, `T` what it keeps
//! of a value that made no column (a Python type in the bindings, to refuse the same type again
//! without asking numpy each step).

use std::collections::HashMap;

use super::skips::Skips;
use super::value::Value;
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
    /// For each column: its path, its id in the recording, its type and rows.
    made: Vec<Made>,
    pub skips: Skips,
}

impl<C, T> DynamicColumns<C, T> {
    pub fn new(prefix: &'static str, timeline: Timeline, codec: CodecSpec) -> Self {
        let (columns, by_path, unsupported) = (Vec::new(), HashMap::new(), HashMap::new());
        let (wider, made, skips) = (Vec::new(), Vec::new(), Skips::new(prefix));
        DynamicColumns { prefix, timeline, codec, columns, by_path, unsupported, wider, made, skips }
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
    fn spec(&self, path: &str, dtype: DType, shape: &[usize]) -> NewColumn {
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

    /// Keeps `column`, made for `path` as column `id` of the recording, for values of `dtype`
    /// with rows of `shape`; its index.
    fn add(&mut self, path: &str, (dtype, shape): (DType, Vec<usize>), id: u32, column: C) -> usize {
        self.columns.push(column);
        self.wider.push(None);
        self.made.push(Made { path: path.to_owned(), id, dtype, shape });
        self.by_path.insert(path.to_owned(), self.columns.len() - 1);
        self.unsupported.remove(path);
        self.columns.len() - 1
    }

    /// A value `kind` of `path` could make no column, for reason `why`.
    fn refuse(&mut self, path: &str, kind: T, why: String) {
        self.unsupported.insert(path.to_owned(), (kind, why));
    }

    /// The column name of `path`.
    pub fn name_of(&self, path: &str) -> String {
        format!("{}/{path}", self.prefix)
    }

    /// The spec of the column that continues `path`'s column `widens` (its id in the recording)
    /// with values of the wider `dtype`. Its name is the key's with `%W<dtype>`, which no key
    /// escapes to (`escape_key` escapes every '%'); readers find it by `widens`, not by name.
    fn widened_spec(&self, path: &str, dtype: DType, shape: &[usize], widens: u32) -> NewColumn {
        let mut spec = self.spec(path, dtype, shape);
        spec.name = format!("{}%W{}", spec.name, dtype.name());
        spec.widens = Some(widens);
        spec
    }

    /// Keeps `column`, made by `widened_spec` to continue column `from` (an index): `path`'s
    /// values go to it from now on. Its index.
    fn add_widened(&mut self, from: usize, path: &str, made: (DType, Vec<usize>), id: u32, column: C) -> usize {
        let index = self.add(path, made, id, column);
        self.wider[from] = Some(index);
        index
    }

    /// The column that now takes the values of column `index`: itself, or the last that
    /// widened it.
    fn latest(&self, mut index: usize) -> usize {
        while let Some(next) = self.wider[index] {
            index = next;
        }
        index
    }

    /// The column of `path` (an index), made from the host's value on first sight; `Err(why)`
    /// when the value can make none (a later value may). A value of the type refused last is
    /// refused again without a conversion, unless the host says another of its type may fit.
    pub fn column<H: Host<C, T>>(&mut self, host: &mut H, path: &str) -> Result<Result<usize, String>, H::Error>
    where
        T: PartialEq,
    {
        if let Some(column) = self.find(path) {
            return Ok(Ok(column));
        }
        let kind = host.kind();
        if let Some((refused, why)) = self.unsupported.get(path) {
            if *refused == kind && !host.retries()? {
                return Ok(Err(why.clone()));
            }
        }
        let rows = host.rows();
        match host.value()?.column(rows) {
            Ok((dtype, shape)) => {
                let (id, column) = host.add(self.spec(path, dtype, &shape))?;
                Ok(Ok(self.add(path, (dtype, shape), id, column)))
            }
            Err(why) => {
                self.refuse(path, kind, why.clone());
                Ok(Err(why))
            }
        }
    }

    /// The column made now to continue column `index` with a wider type, when the host's value
    /// asks for one (see `Value::widening`).
    fn widen<H: Host<C, T>>(&mut self, host: &mut H, index: usize, refused: bool) -> Result<Option<usize>, H::Error> {
        let (made, rows) = (&self.made[index], host.rows());
        let Some((dtype, shape)) = host.value()?.widening(made.dtype, &made.shape, rows, refused) else {
            return Ok(None);
        };
        let path = made.path.clone();
        let (id, column) = host.add(self.widened_spec(&path, dtype, &shape, made.id))?;
        Ok(Some(self.add_widened(index, &path, (dtype, shape), id, column)))
    }

    /// The host's value into `path`'s column, made on first sight; the warning to give when it
    /// is left out (see `skip`).
    pub fn put<H: Host<C, T>>(&mut self, host: &mut H, path: &str) -> Result<Option<String>, H::Error>
    where
        T: PartialEq,
    {
        match self.column(host, path)? {
            Ok(column) => self.put_into(host, column),
            Err(why) => Ok(self.skips.skip(path, why)),
        }
    }

    /// The host's value into column `index` (or the one that widened it), widened first when
    /// its type asks for it, or after it did not fit; left out with the warning to give when no
    /// wider type holds it.
    pub fn put_into<H: Host<C, T>>(&mut self, host: &mut H, index: usize) -> Result<Option<String>, H::Error> {
        let index = self.latest(index);
        let index = self.widen(host, index, false)?.unwrap_or(index);
        let Err(error) = host.put(&self.columns[index]) else { return Ok(None) };
        let Some(why) = host.misfit(&error) else { return Err(error) };
        if let Some(wider) = self.widen(host, index, true)? {
            return self.put_into(host, wider);
        }
        let path = self.made[index].path.clone();
        Ok(self.skips.skip(&path, format!("{why} (its first value set the column's type)")))
    }

    /// Checks the host's value of `path` now (`record`), making its column on first sight and
    /// widening it as `put_into` would: `Ok(Err(why))` when it can make no column, the host's
    /// error when it fits none.
    pub fn check<H: Host<C, T>>(&mut self, host: &mut H, path: &str) -> Result<Result<(), String>, H::Error>
    where
        T: PartialEq,
    {
        let index = match self.column(host, path)? {
            Ok(index) => index,
            Err(why) => return Ok(Err(why)),
        };
        let index = self.widen(host, index, false)?.unwrap_or(index);
        match host.put(&self.columns[index]) {
            Err(_) if self.widen(host, index, true)?.is_some() => Ok(Ok(())),
            result => result.map(Ok),
        }
    }
}

/// A column as the core knows it.
#[derive(Debug)]
struct Made {
    path: String,
    id: u32,
    dtype: DType,
    shape: Vec<usize>,
}

/// What `DynamicColumns` asks of its caller for one value: the caller converts and writes, the
/// core decides.
pub trait Host<C, T> {
    type Error;
    /// The env count of a batched value, `None` for one row.
    fn rows(&self) -> Option<usize>;
    /// What is kept of a value that made no column, to refuse the same again.
    fn kind(&self) -> T;
    /// Whether a value of a kind refused before may fit now (a sequence may, where another did not).
    fn retries(&mut self) -> Result<bool, Self::Error>;
    /// The value as the core sees it (converted once, on the first ask).
    fn value(&mut self) -> Result<&Value, Self::Error>;
    /// Adds a column of `spec` to the recording: its id and the caller's column.
    fn add(&mut self, spec: NewColumn) -> Result<(u32, C), Self::Error>;
    /// Writes the value as an entry of `column`.
    fn put(&mut self, column: &C) -> Result<(), Self::Error>;
    /// Why the value does not fit its column, when `error` says so (else it is a failure).
    fn misfit(&self, error: &Self::Error) -> Option<String>;
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
        let i = d.add("a%2Fb", (DType::F32, vec![2, 3]), 3, "column");
        assert_eq!((d.find("a%2Fb"), *d.get(i), d.unsupported("a%2Fb")), (Some(i), "column", None));
        assert_eq!(d.name_of("x"), "info/x");
    }

    #[test]
    fn widened_columns_take_the_values_from_then_on() {
        let mut d = DynamicColumns::<&str, char>::new("info", Timeline::Obs, CodecSpec::default());
        let first = d.add("prob", (DType::I64, vec![]), 7, "int64");
        let spec = d.widened_spec("prob", DType::F64, &[], 7);
        assert_eq!((spec.name.as_str(), spec.widens, spec.masked), ("info/prob%Wfloat64", Some(7), true));
        assert_eq!(d.latest(first), first);
        let second = d.add_widened(first, "prob", (DType::F64, vec![]), 8, "float64");
        assert_eq!((d.latest(first), d.latest(second), d.find("prob")), (second, second, Some(second)));
    }

    /// A host whose columns are their types: a value fits a column of its own type, or of any
    /// type it is `fits` for; errors are texts, a misfit's starting with "misfit".
    struct Fake {
        value: Value,
        fits: Vec<DType>,
        added: Vec<(String, Option<u32>)>,
        put: Vec<DType>,
    }

    impl Host<DType, &'static str> for Fake {
        type Error = String;
        fn rows(&self) -> Option<usize> {
            None
        }
        fn kind(&self) -> &'static str {
            if matches!(self.value, Value::Unsupported(_)) {
                "set"
            } else {
                "other"
            }
        }
        fn retries(&mut self) -> Result<bool, String> {
            Ok(false)
        }
        fn value(&mut self) -> Result<&Value, String> {
            Ok(&self.value)
        }
        fn add(&mut self, spec: NewColumn) -> Result<(u32, DType), String> {
            self.added.push((spec.name.clone(), spec.widens));
            Ok((self.added.len() as u32 + 9, spec.dtype))
        }
        fn put(&mut self, column: &DType) -> Result<(), String> {
            if !self.fits.contains(column) {
                return Err(format!("misfit {}", column.name()));
            }
            self.put.push(*column);
            Ok(())
        }
        fn misfit(&self, error: &String) -> Option<String> {
            error.starts_with("misfit").then(|| error.clone())
        }
    }

    #[test]
    fn values_go_to_their_column_widen_it_or_are_left_out() {
        use DType::*;
        let float = || Value::Array { kind: b'f', name: "float64".into(), shown: "<f8".into(), shape: vec![] };
        // (the value, the column types it fits, the columns added (name, widens), where it went,
        // whether it was left out)
        type Case = (Value, Vec<DType>, Vec<(&'static str, Option<u32>)>, Vec<DType>, bool);
        let table: [Case; 5] = [
            (Value::Scalar(I64), vec![I64], vec![], vec![I64], false),
            (Value::Scalar(F64), vec![F64], vec![("info/x%Wfloat64", Some(10))], vec![F64], false),
            (float(), vec![F64], vec![("info/x%Wfloat64", Some(10))], vec![F64], false),
            // A Python int that does not fit widens the column as an int64 (here: no wider type).
            (Value::Scalar(I64), vec![], vec![], vec![], true),
            (Value::Unsupported("set".into()), vec![], vec![], vec![], true),
        ];
        for (value, fits, added, put, left_out) in table {
            let mut d = DynamicColumns::<DType, &str>::new("info", Timeline::Obs, CodecSpec::default());
            let mut first = Fake { value: Value::Scalar(I64), fits: vec![I64], added: vec![], put: vec![] };
            assert_eq!(d.put(&mut first, "x"), Ok(None));
            assert_eq!(first.added, [("info/x".to_string(), None)]);
            let mut host = Fake { value: value.clone(), fits, added: vec![], put: vec![] };
            let warned = d.put(&mut host, "x").unwrap();
            let added: Vec<_> = added.into_iter().map(|(name, widens)| (name.to_owned(), widens)).collect();
            assert_eq!((&host.added, &host.put, warned.is_some()), (&added, &put, left_out), "{value:?}");
        }
    }

    #[test]
    fn values_that_make_no_column_are_refused_until_one_does() {
        let mut d = DynamicColumns::<DType, &str>::new("data", Timeline::Obs, CodecSpec::default());
        let set = Value::Unsupported("set".into());
        let mut host = Fake { value: set, fits: vec![], added: vec![], put: vec![] };
        let why = "values of type set are not supported".to_string();
        assert_eq!(d.check(&mut host, "x"), Ok(Err(why.clone())));
        assert_eq!(d.unsupported("x"), Some(&("set", why)));
        let mut host = Fake { value: Value::Scalar(DType::U8), fits: vec![], added: vec![], put: vec![] };
        // It makes its column, then does not fit it: the host's error.
        assert_eq!(d.check(&mut host, "x"), Err("misfit uint8".into()));
        assert_eq!((d.find("x"), d.unsupported("x")), (Some(0), None));
    }

    #[test]
    fn data_names_are_checked_then_escaped() {
        let cases = [("x", Some("x")), ("a/b", Some("a%2Fb")), ("", None), ("_x", None), ("x_", Some("x_"))];
        for (name, path) in cases {
            assert_eq!(data_path(name).ok().as_deref(), path, "{name:?}");
        }
    }
}
