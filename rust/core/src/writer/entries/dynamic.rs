//! Columns made on first sight (info entries, custom data, rendered frames): the column of each
//! key path, the spec a new one gets from its first value, the paths whose values could not make
//! one yet, and the values left out (`Skips`); and what happens to a value (`put`, `check`):
//! which column takes it, when a column widens, whether it fits (`Fit`), when it is left out.
//! The caller (`Host`) only reads the value and adds columns. `C` is the caller's column, `T`
//! what it keeps of a value that made no column (a Python type in the bindings, to refuse the
//! same type again without asking numpy each step), `K` the owners the collector keeps alive.

use std::collections::HashMap;

use super::collect::{Collector, Place, Src};
use super::reading::fit::Fit;
use super::reading::value::Input;
use super::reading::values::Misfit;
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

/// The column a value goes to (`put`): that of a path (below the prefix), made on first sight,
/// or one found before (as `find` and `column` give it), or in both cases the one that widened
/// it. A path converts from `&str` or `&String`.
#[derive(Debug, Clone, Copy)]
pub enum To<'p> {
    Path(&'p str),
    Column(usize),
}

impl<'p, S: AsRef<str> + ?Sized> From<&'p S> for To<'p> {
    fn from(path: &'p S) -> Self {
        To::Path(path.as_ref())
    }
}

#[derive(Debug)]
pub struct DynamicColumns<C, T> {
    prefix: &'static str,
    timeline: Timeline,
    codec: CodecSpec,
    columns: Vec<C>,
    by_path: HashMap<String, usize>,
    /// What the last value of each path that made no column was (`None`: a kind that may fit
    /// later), and why it made none.
    unsupported: HashMap<String, (Option<T>, String)>,
    /// For each column, the one that continues it with a wider type, once made (see `widen`).
    wider: Vec<Option<usize>>,
    /// For each column: its path, name and id in the recording, how values fit it.
    made: Vec<Made>,
    pub skips: Skips,
}

impl<C, T> DynamicColumns<C, T> {
    pub fn new(prefix: &'static str, timeline: Timeline, codec: CodecSpec) -> Self {
        let (columns, by_path, unsupported) = (Vec::new(), HashMap::new(), HashMap::new());
        let (wider, made, skips) = (Vec::new(), Vec::new(), Skips::new(prefix));
        DynamicColumns { prefix, timeline, codec, columns, by_path, unsupported, wider, made, skips }
    }

    /// Column `index` (as `find` and `column` give it).
    pub fn get(&self, index: usize) -> &C {
        &self.columns[index]
    }

    /// The id in the recording of column `index`.
    pub fn id(&self, index: usize) -> u32 {
        self.made[index].id
    }

    /// The column of `path` (below the prefix), if made.
    pub fn find(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied()
    }

    /// What the last value of `path` that could make no column was, and why it could not.
    pub fn unsupported(&self, path: &str) -> Option<&(Option<T>, String)> {
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

    /// Keeps `column`, made for `path` as column `id` of the recording, named `name`, for values
    /// of `dtype` with rows of `shape`; its index.
    fn add(&mut self, path: &str, name: String, (dtype, shape): (DType, Vec<usize>), id: u32, column: C) -> usize {
        self.columns.push(column);
        self.wider.push(None);
        let fit = Fit { dtype, shape, bounds: None };
        self.made.push(Made { path: path.to_owned(), name, id, fit });
        self.by_path.insert(path.to_owned(), self.columns.len() - 1);
        self.unsupported.remove(path);
        self.columns.len() - 1
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

    /// The column that now takes the values of column `index`: itself, or the last that
    /// widened it.
    fn latest(&self, mut index: usize) -> usize {
        while let Some(next) = self.wider[index] {
            index = next;
        }
        index
    }

    /// The column of `path` (an index), made from `value` on first sight (`rows`: its env count
    /// when batched; `mask`: which envs have it); `Err(why)` when the value can make none (a
    /// later value may). A value of the kind refused last is refused again without reading it,
    /// unless the host says another of its kind may fit.
    pub fn column<H: Host<C, T, K>, K>(
        &mut self,
        host: &mut H,
        value: &H::Value,
        coll: &mut Collector<K>,
        (rows, mask): (Option<usize>, Option<Src>),
        path: &str,
    ) -> Result<Result<usize, String>, H::Error>
    where
        T: PartialEq,
    {
        if let Some(column) = self.find(path) {
            return Ok(Ok(column));
        }
        let kind = host.kind(value)?;
        if let (Some(kind), Some((Some(refused), why))) = (&kind, self.unsupported.get(path)) {
            if refused == kind {
                return Ok(Err(why.clone()));
            }
        }
        match host.read(value, None, (rows, mask), coll)?.column(rows) {
            Ok((dtype, shape)) => {
                let spec = self.spec(path, dtype, &shape);
                let name = spec.name.clone();
                let (id, column) = host.add(spec)?;
                Ok(Ok(self.add(path, name, (dtype, shape), id, column)))
            }
            Err(why) => {
                self.unsupported.insert(path.to_owned(), (kind, why.clone()));
                Ok(Err(why))
            }
        }
    }

    /// The column made now to continue column `index` with a wider type, when `input` asks for
    /// one (see `Input::widening`).
    fn widen<H: Host<C, T, K>, K>(
        &mut self,
        host: &mut H,
        index: usize,
        input: &Input,
        rows: Option<usize>,
        refused: bool,
    ) -> Result<Option<usize>, H::Error> {
        let made = &self.made[index];
        let Some((dtype, shape)) = input.widening(made.fit.dtype, &made.fit.shape, rows, refused) else {
            return Ok(None);
        };
        let path = made.path.clone();
        let spec = self.widened_spec(&path, dtype, &shape, made.id);
        let name = spec.name.clone();
        let (id, column) = host.add(spec)?;
        let wider = self.add(&path, name, (dtype, shape), id, column);
        self.wider[index] = Some(wider);
        Ok(Some(wider))
    }

    /// `value` into the column `to` names (see `To`), as an entry at `at` masked by `mask`,
    /// read once for it; widened first when its type asks for it, or after it did not fit. The
    /// warning to give when it is left out (see `skip`): it makes no column, or no wider type
    /// holds it.
    pub fn put<'p, H: Host<C, T, K>, K>(
        &mut self,
        host: &mut H,
        value: &H::Value,
        coll: &mut Collector<K>,
        (at, mask): (Place, Option<Src>),
        to: impl Into<To<'p>>,
    ) -> Result<Option<String>, H::Error>
    where
        T: PartialEq,
    {
        let found = match to.into() {
            To::Column(index) => index,
            To::Path(path) => match self.column(host, value, coll, (at.rows, mask), path)? {
                Ok(index) => index,
                Err(why) => return Ok(self.skips.skip(path, why)),
            },
        };
        let mut index = self.latest(found);
        let input = host.read(value, Some(&self.columns[index]), (at.rows, mask), coll)?;
        let misfit = loop {
            index = self.widen(host, index, &input, at.rows, false)?.unwrap_or(index);
            let misfit = match self.made[index].fit.put(coll, at.rows, &input) {
                Ok(data) => {
                    coll.push(self.made[index].id, at, mask, data);
                    return Ok(None);
                }
                Err(misfit) => misfit,
            };
            match self.widen(host, index, &input, at.rows, true)? {
                Some(wider) => index = wider,
                None => break misfit,
            }
        };
        let made = &self.made[index];
        let why = Error::schema(&made.name, host.why(value, made.fit.dtype, misfit));
        let path = made.path.clone();
        Ok(self.skips.skip(&path, format!("{why} (its first value set the column's type)")))
    }

    /// Checks `value` of `path` now (`record`), making its column on first sight and widening
    /// it as `put` would: `Ok(Err)`, a schema error that names the column, when it makes no
    /// column or fits none. The collector is used as scratch.
    pub fn check<H: Host<C, T, K>, K>(
        &mut self,
        host: &mut H,
        value: &H::Value,
        coll: &mut Collector<K>,
        rows: Option<usize>,
        path: &str,
    ) -> Result<Result<()>, H::Error>
    where
        T: PartialEq,
    {
        let index = match self.column(host, value, coll, (rows, None), path)? {
            Ok(index) => self.latest(index),
            Err(why) => return Ok(Err(Error::schema(self.name_of(path), why))),
        };
        let input = host.read(value, Some(&self.columns[index]), (rows, None), coll)?;
        let index = self.widen(host, index, &input, rows, false)?.unwrap_or(index);
        let Err(misfit) = self.made[index].fit.put(coll, rows, &input) else { return Ok(Ok(())) };
        if self.widen(host, index, &input, rows, true)?.is_some() {
            return Ok(Ok(()));
        }
        Ok(Err(Error::schema(&self.made[index].name, host.why(value, self.made[index].fit.dtype, misfit))))
    }
}

/// A column as the core knows it.
#[derive(Debug)]
struct Made {
    path: String,
    name: String,
    id: u32,
    fit: Fit,
}

/// What `DynamicColumns` asks of its caller for its values: the caller reads them and adds
/// columns, the core decides the rest (which column, when it widens, whether the value fits).
pub trait Host<C, T, K> {
    /// A value as the caller holds it (a Python object in the bindings).
    type Value;
    type Error;
    /// What is kept of a value that made no column, to refuse one of its kind again without
    /// reading it; `None` when another value of its kind may fit (a sequence may, where another
    /// did not).
    fn kind(&mut self, value: &Self::Value) -> Result<Option<T>, Self::Error>;
    /// `value` read once for `column`, or for the column it would make (`None`), given its env
    /// count when batched and which envs have it (`at`); what it borrows or converts goes into
    /// `coll`.
    fn read(
        &mut self,
        value: &Self::Value,
        column: Option<&C>,
        at: (Option<usize>, Option<Src>),
        coll: &mut Collector<K>,
    ) -> Result<Input, Self::Error>;
    /// Adds a column of `spec` to the recording: its id and the caller's column.
    fn add(&mut self, spec: NewColumn) -> Result<(u32, C), Self::Error>;
    /// Why `value` does not fit a column of `dtype`, in words (see `Misfit`).
    fn why(&self, value: &Self::Value, dtype: DType, misfit: Misfit) -> String;
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
    use crate::writer::entries::reading::value::{Array, Like, Number};

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
        d.unsupported.insert("a%2Fb".into(), (Some('s'), "why".into()));
        assert_eq!(d.unsupported("a%2Fb"), Some(&(Some('s'), "why".to_string())));
        let spec = d.spec("a%2Fb", DType::F32, &[2, 3]);
        assert_eq!((spec.name.as_str(), spec.shape.as_slice(), spec.masked), ("info/a%2Fb", &[2u64, 3][..], true));
        assert!(spec.codec.delta && !d.spec("s", DType::Utf8, &[]).codec.delta);
        let i = d.add("a%2Fb", spec.name, (DType::F32, vec![2, 3]), 3, "column");
        assert_eq!((d.find("a%2Fb"), d.columns[i], d.unsupported("a%2Fb")), (Some(i), "column", None));
        assert_eq!(d.made[i].fit, Fit { dtype: DType::F32, shape: vec![2, 3], bounds: None });
        assert_eq!(d.name_of("x"), "info/x");
        let spec = d.widened_spec("a%2Fb", DType::F64, &[2, 3], 3);
        assert_eq!((spec.name.as_str(), spec.widens, spec.masked), ("info/a%2Fb%Wfloat64", Some(3), true));
    }

    /// A host whose value is always `input`, whatever it is read for, and whose columns are
    /// their types, with ids from `next` on.
    struct Fake {
        input: Input,
        reads: usize,
        added: Vec<(String, Option<u32>)>,
        next: u32,
    }

    impl Fake {
        fn of(input: Input, next: u32) -> Self {
            Fake { input, reads: 0, added: Vec::new(), next }
        }
    }

    impl Host<DType, &'static str, ()> for Fake {
        type Value = ();
        type Error = String;
        fn kind(&mut self, _: &()) -> Result<Option<&'static str>, String> {
            Ok(match self.input {
                Input::Unsupported(_) => Some("set"),
                Input::Array(_) => None,
                _ => Some("other"),
            })
        }
        fn read(
            &mut self,
            _: &(),
            _: Option<&DType>,
            _: (Option<usize>, Option<Src>),
            _: &mut Collector<()>,
        ) -> Result<Input, String> {
            self.reads += 1;
            Ok(self.input.clone())
        }
        fn add(&mut self, spec: NewColumn) -> Result<(u32, DType), String> {
            self.added.push((spec.name.clone(), spec.widens));
            self.next += 1;
            Ok((self.next - 1, spec.dtype))
        }
        fn why(&self, _: &(), dtype: DType, misfit: Misfit) -> String {
            format!("{misfit:?} in {}", dtype.name())
        }
    }

    fn number(int: Option<i128>, float: Option<f64>, like: Like) -> Input {
        Input::Number(Number { int, float, is_float: like == Like::Weak(DType::F64) }, like)
    }

    #[test]
    fn values_go_to_their_column_widen_it_or_are_left_out() {
        use DType::*;
        let float =
            Input::Array(Array { kind: b'f', itemsize: 8, shown: "<f8".into(), shape: vec![], data: Src::Own(0, 0) });
        let widened = || vec![("info/x%Wfloat64".to_string(), Some(10))];
        // (the second value of a key whose first was a Python int, the columns it added (name,
        // widens), the column its entry went to, or the warning it was left out with)
        type Case = (Input, Vec<(String, Option<u32>)>, Result<u32, &'static str>);
        let table: [Case; 6] = [
            (number(Some(2), Some(2.0), Like::Weak(I64)), vec![], Ok(10)),
            (number(None, Some(0.5), Like::Weak(F64)), widened(), Ok(20)),
            (float, widened(), Ok(20)),
            // A Python int that does not fit widens the column as an int64 (here: no wider type).
            (
                number(Some(1 << 70), Some(1e21), Like::Weak(I64)),
                vec![],
                Err("Value(\"value 1180591620717411303424 is out of range for int64\") in int64"),
            ),
            // A Decimal reads as no integer.
            (number(None, Some(1.5), Like::Other), vec![], Err("Wrong(\"integer\") in int64")),
            (
                Input::Refused("expected numbers, got set".into()),
                vec![],
                Err("Value(\"expected numbers, got set\") in int64"),
            ),
        ];
        for (input, added, want) in table {
            let mut d = DynamicColumns::<DType, &str>::new("info", Timeline::Obs, CodecSpec::default());
            let mut coll = Collector::<()>::default();
            let at = (Place::regular(None), None);
            let mut first = Fake::of(number(Some(1), Some(1.0), Like::Weak(I64)), 10);
            assert_eq!(d.put(&mut first, &(), &mut coll, at, "x"), Ok(None));
            assert_eq!(first.added, [("info/x".to_string(), None)]);
            let mut host = Fake::of(input.clone(), 20);
            let warned = d.put(&mut host, &(), &mut coll, at, "x").unwrap();
            let went = match warned {
                None => Ok(coll.entries().last().unwrap().column),
                Some(warning) => Err(warning),
            };
            let lead = "trajcore: info entry 'x': a value is not recorded (its row reads as missing)";
            let want =
                want.map_err(|why| format!("{lead}: column 'info/x': {why} (its first value set the column's type)"));
            let went = went.map_err(|w| w.split(". The entry").next().unwrap().to_owned());
            assert_eq!((&host.added, went), (&added, want), "{input:?}");
            assert_eq!(host.reads, 1, "{input:?}: read once for its column");
        }
    }

    #[test]
    fn values_that_make_no_column_are_refused_until_one_does() {
        let mut d = DynamicColumns::<DType, &str>::new("data", Timeline::Obs, CodecSpec::default());
        let mut coll = Collector::<()>::default();
        let mut host = Fake::of(Input::Unsupported("set".into()), 10);
        let why = "values of type set are not supported".to_string();
        let refused = Ok(Err(format!("column 'data/x': {why}")));
        let mut check = |d: &mut DynamicColumns<DType, &'static str>, host: &mut Fake| {
            d.check(host, &(), &mut coll, None, "x").map(|checked| checked.map_err(|e| e.to_string()))
        };
        assert_eq!(check(&mut d, &mut host), refused);
        assert_eq!(d.unsupported("x"), Some(&(Some("set"), why.clone())));
        // The same kind again is refused without being read.
        assert_eq!(check(&mut d, &mut host), refused);
        assert_eq!(host.reads, 1);
        // It makes its column, then does not fit it.
        let mut host = Fake::of(number(Some(300), Some(300.0), Like::Typed(DType::U8)), 10);
        let misfit = "column 'data/x': Value(\"value 300 is out of range for uint8\") in uint8".to_string();
        assert_eq!(check(&mut d, &mut host), Ok(Err(misfit)));
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
