//! Columns made on first sight: info entries (observation timeline) and custom per-step data
//! (step timeline). Supported values are numbers, bools, strings and fixed-shape arrays; nested
//! dicts become nested paths (at most `MAX_DEPTH` levels). A value that cannot be recorded (an
//! unsupported type, or one that does not fit the column its key got) is left out of its row,
//! which then reads as missing: one `TrajcoreWarning` per key at the first, a count per key at
//! close, and the key keeps recording every value that fits.
//!
//! Vector infos follow gymnasium's convention: `_key` is the mask of `key` (a nested dict's
//! mask applies to every entry below it). A key `_key` without a `key` beside it, or with its own
//! `__key` mask, is a value of its own. Column names escape `/`, `%` and a leading `_` (see
//! `escape_key`), so a key `_x` never takes the name of the mask column of `x`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use trajcore_core::writer::{EntryKind, NewColumn, Recorder, Slot};
use trajcore_core::{CodecSpec, DType, Timeline};

use crate::collect::{Collector, Src};
use crate::errors::{schema_error, warn, IntoPy};
use crate::values::{mask_bytes, put_value, type_name, ColInfo};

/// Nested dicts deeper than this are refused: deeper is a dict that contains itself.
pub const MAX_DEPTH: usize = 32;

/// Escapes a key as one component of a column name: '%' -> %25, '/' -> %2F (so '/' can separate
/// nesting levels) and a leading '_' -> %5F (so no key is named like a mask column).
pub fn escape_key(key: &str) -> String {
    let escaped = key.replace('%', "%25").replace('/', "%2F");
    match escaped.strip_prefix('_') {
        Some(rest) => format!("%5F{rest}"),
        None => escaped,
    }
}

/// Where the values of one dict go: env rows and observation slot.
#[derive(Clone, Copy)]
pub struct Place {
    /// The env count for batched values, `None` for one row.
    pub rows: Option<usize>,
    pub slot: Slot,
}

/// Values of one key that were not recorded.
struct Skipped {
    count: u64,
    first_why: String,
}

/// A key whose first values could not make a column: their Python type, to skip the same type
/// again without asking numpy each step.
struct Unsupported {
    kind: Py<PyType>,
    why: String,
}

pub struct DynamicColumns {
    prefix: &'static str,
    timeline: Timeline,
    codec: CodecSpec,
    columns: HashMap<String, ColInfo>,
    keys: KeyPaths,
    unsupported: HashMap<String, Unsupported>,
    skipped: BTreeMap<String, Skipped>,
}

impl DynamicColumns {
    pub fn new(prefix: &'static str, timeline: Timeline, codec: CodecSpec) -> Self {
        DynamicColumns {
            prefix,
            timeline,
            codec,
            columns: HashMap::new(),
            keys: KeyPaths::default(),
            unsupported: HashMap::new(),
            skipped: BTreeMap::new(),
        }
    }

    /// One value of `path` is not recorded: warns at the first, counts the rest.
    fn skip(&mut self, py: Python<'_>, path: &str, why: String) -> PyResult<()> {
        match self.skipped.get_mut(path) {
            Some(s) => s.count += 1,
            None => {
                warn(
                    py,
                    &format!(
                        "trajcore: {} entry '{}': a value is not recorded (its row reads as missing): {why}. \
                         The entry goes on recording the values that fit; close() reports how many were left out.",
                        self.prefix, path
                    ),
                )?;
                self.skipped.insert(path.to_string(), Skipped { count: 1, first_why: why });
            }
        }
        Ok(())
    }

    /// Warns once per key with the number of values left out (at close).
    pub fn warn_skipped(&mut self, py: Python<'_>) -> PyResult<()> {
        for (path, s) in std::mem::take(&mut self.skipped) {
            warn(
                py,
                &format!(
                    "trajcore: {} entry '{path}': {} value(s) were not recorded (first: {})",
                    self.prefix, s.count, s.first_why
                ),
            )?;
        }
        Ok(())
    }

    /// Values left out so far, per key path (for `stats()`).
    pub fn skipped_counts(&self) -> impl Iterator<Item = (&str, u64)> {
        self.skipped.iter().map(|(p, s)| (p.as_str(), s.count))
    }

    /// Adds entries for every supported value of `dict` (infos, or vector infos with `_key`
    /// masks), under key node `node` (`KeyPaths::ROOT` at the top), where `mask` (the parent's)
    /// says which envs have it at all. Paths, and the Python strings masks are looked up by,
    /// come from `keys`: a step allocates nothing per key.
    #[allow(clippy::too_many_arguments)]
    pub fn put_dict(
        &mut self,
        py: Python<'_>,
        dict: &Bound<'_, PyDict>,
        node: usize,
        mask: Option<Src>,
        depth: usize,
        at: Place,
        recorder: &mut Recorder,
        coll: &mut Collector,
    ) -> PyResult<()> {
        if depth >= MAX_DEPTH {
            return Err(schema_error(
                py,
                &format!("{}/{}", self.prefix, self.keys.path(node)),
                format!("nested deeper than {MAX_DEPTH} levels (does the dict contain itself?)"),
            ));
        }
        let batched = at.rows.is_some();
        // Str keys of one dict differ, and so do the names they give (`escape_key`); a key of
        // another type can name the same column as another key (1 and "1"): then the keys seen.
        let all_str = dict.iter().all(|(key, _)| key.is_instance_of::<PyString>());
        let mut taken: Vec<(usize, Bound<'_, PyAny>)> = Vec::new();
        for (key, value) in dict.iter() {
            let (name, is_str) = key_name(&key)?;
            let child = self.keys.child(py, node, &name);
            let keys = &self.keys.nodes[child];
            let mask_key = keys.mask_key.as_ref().expect("a key's node").bind(py);
            if batched && is_str {
                if let Some(base) = &keys.base_key {
                    if dict.contains(base.bind(py))? && !dict.contains(mask_key)? {
                        continue; // a mask, read with its key
                    }
                }
                if depth == 0 && at.slot == Slot::Regular && (name == "final_obs" || name == "final_info") {
                    continue; // same-step autoreset data, taken apart by the recorder
                }
            }
            if !all_str {
                if let Some((_, first)) = taken.iter().find(|(n, _)| *n == child) {
                    let (first, shown) = (shown_key(first, &name), shown_key(&key, &name));
                    let why =
                        format!("keys {first} and {shown} of one dict both name this column; only {first} is recorded");
                    let path = self.keys.path(child);
                    self.skip(py, &path, why)?;
                    continue;
                }
                taken.push((child, key.clone()));
            }
            let own_mask = match at.rows {
                Some(n) => match dict.get_item(mask_key)? {
                    Some(m) => Some(mask_bytes(py, &m, n, "an info mask", coll)?),
                    None => None,
                },
                None => None,
            };
            let mask = and_masks(coll, mask, own_mask);
            if mask.is_some_and(|m| coll.slice(m).iter().all(|&b| b == 0)) {
                continue; // no env has it at this step
            }
            if let Ok(inner) = value.cast::<PyDict>() {
                self.put_dict(py, inner, child, mask, depth + 1, at, recorder, coll)?;
                continue;
            }
            let path = self.keys.path(child);
            self.put_one(py, &path, &value, mask, at, recorder, coll)?;
        }
        Ok(())
    }

    /// One value under `path` (without the prefix); a value that cannot be recorded is skipped
    /// with a warning (see `skip`).
    #[allow(clippy::too_many_arguments)]
    pub fn put_one(
        &mut self,
        py: Python<'_>,
        path: &str,
        value: &Bound<'_, PyAny>,
        mask: Option<Src>,
        at: Place,
        recorder: &mut Recorder,
        coll: &mut Collector,
    ) -> PyResult<()> {
        let stacked;
        let value = match at.rows {
            Some(_) => match stack_object_rows(py, value, mask.map(|m| coll.slice(m)))? {
                Some(v) => {
                    stacked = v;
                    &stacked
                }
                None => value,
            },
            None => value,
        };
        match self.column(py, path, value, at.rows, mask, recorder, coll)? {
            Err(why) => self.skip(py, path, why),
            Ok(()) => {
                let col = &self.columns[path];
                match put_value(py, value, col, at.rows, coll) {
                    Ok(data) => {
                        let kind = if mask.is_some() { EntryKind::Masked } else { EntryKind::Dense };
                        coll.push(col.id, kind, at.slot, 0, mask, data);
                        Ok(())
                    }
                    Err(e) if is_schema_error(py, &e) => {
                        let why = e.value(py).to_string();
                        self.skip(py, path, format!("{why} (its first value set the column's type)"))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Checks a value of the user's own (`record`) now, creating its column on first sight:
    /// a value that cannot be recorded raises `SchemaError` naming the column. The collector is
    /// used as scratch and left empty.
    pub fn check_value(
        &mut self,
        py: Python<'_>,
        path: &str,
        value: &Bound<'_, PyAny>,
        rows: Option<usize>,
        recorder: &mut Recorder,
        coll: &mut Collector,
    ) -> PyResult<()> {
        let result = (|| match self.column(py, path, value, rows, None, recorder, coll)? {
            Err(why) => Err(schema_error(py, &format!("{}/{path}", self.prefix), why)),
            Ok(()) => put_value(py, value, &self.columns[path], rows, coll).map(|_| ()),
        })();
        coll.clear();
        result
    }

    /// Makes sure `path` has a column, creating it from `value` on first sight; `Err(why)` when
    /// `value` cannot make one (a later value may).
    #[allow(clippy::too_many_arguments)]
    fn column(
        &mut self,
        py: Python<'_>,
        path: &str,
        value: &Bound<'_, PyAny>,
        rows: Option<usize>,
        mask: Option<Src>,
        recorder: &mut Recorder,
        coll: &Collector,
    ) -> PyResult<Result<(), String>> {
        if self.columns.contains_key(path) {
            return Ok(Ok(()));
        }
        let value_type = value.get_type();
        if let Some(u) = self.unsupported.get(path) {
            if u.kind.bind(py).is(&value_type) && !is_sequence_like(py, value)? {
                return Ok(Err(u.why.clone()));
            }
        }
        match infer(py, value, rows, mask.map(|m| coll.slice(m).to_vec()))? {
            Ok((dtype, shape)) => {
                let new = NewColumn {
                    name: format!("{}/{path}", self.prefix),
                    dtype,
                    shape: shape.iter().map(|&d| d as u64).collect(),
                    timeline: self.timeline,
                    masked: true,
                    codec: if dtype == DType::Utf8 {
                        CodecSpec { delta: false, ..self.codec.clone() }
                    } else {
                        self.codec.clone()
                    },
                };
                let id = recorder.add_column(new).py_err(py)?;
                self.columns.insert(path.to_string(), ColInfo::new(py, recorder.column(id))?);
                self.unsupported.remove(path);
                Ok(Ok(()))
            }
            Err(why) => {
                self.unsupported.insert(path.to_string(), Unsupported { kind: value_type.unbind(), why: why.clone() });
                Ok(Err(why))
            }
        }
    }
}

/// A dict key's name (`str(key)` for a key of another type), and whether the key is a str.
fn key_name<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<(Cow<'a, str>, bool)> {
    Ok(match key.cast::<PyString>() {
        Ok(s) => (Cow::Borrowed(s.to_str()?), true),
        Err(_) => (Cow::Owned(key.str()?.to_str()?.to_owned()), false),
    })
}

/// A key as a message shows it.
fn shown_key(key: &Bound<'_, PyAny>, name: &str) -> String {
    key.repr().map(|r| r.to_string()).unwrap_or_else(|_| name.to_owned())
}

/// The column path (below the prefix) of every dict key seen, as a tree of key names, with
/// the Python strings its mask lookups need: made on first sight, then found by name without
/// allocating. Node 0 is the top-level dict.
pub struct KeyPaths {
    nodes: Vec<KeyNode>,
}

struct KeyNode {
    path: Arc<str>,
    /// "_" + the key: the name of its mask (none for the top-level dict, which is no key).
    mask_key: Option<Py<PyString>>,
    /// For a key "_x": "x", the key it would be the mask of.
    base_key: Option<Py<PyString>>,
    children: HashMap<String, usize>,
}

impl Default for KeyPaths {
    fn default() -> Self {
        let root = KeyNode { path: Arc::from(""), mask_key: None, base_key: None, children: HashMap::new() };
        KeyPaths { nodes: vec![root] }
    }
}

impl KeyPaths {
    pub const ROOT: usize = 0;

    /// The node of key `name` in the dict of node `parent`.
    fn child(&mut self, py: Python<'_>, parent: usize, name: &str) -> usize {
        if let Some(&id) = self.nodes[parent].children.get(name) {
            return id;
        }
        let component = escape_key(name);
        let parent_path = &self.nodes[parent].path;
        let path = if parent_path.is_empty() { component } else { format!("{parent_path}/{component}") };
        let id = self.nodes.len();
        self.nodes.push(KeyNode {
            path: Arc::from(path),
            mask_key: Some(PyString::intern(py, &format!("_{name}")).unbind()),
            base_key: name.strip_prefix('_').map(|base| PyString::intern(py, base).unbind()),
            children: HashMap::new(),
        });
        self.nodes[parent].children.insert(name.to_owned(), id);
        id
    }

    fn path(&self, node: usize) -> Arc<str> {
        self.nodes[node].path.clone()
    }
}

fn is_schema_error(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance(py, crate::errors::classes(py).schema.bind(py))
}

/// Arrays, lists and tuples: the same type may fit where an earlier value did not.
fn is_sequence_like(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(value.is_instance_of::<PyList>()
        || value.is_instance_of::<PyTuple>()
        || value.cast::<PyUntypedArray>().is_ok()
        || value.is_instance(&py.import("numpy")?.getattr("generic")?)?)
}

/// A vector info of per-env arrays or tuples of numbers (ALE's `seeds`) arrives as an object
/// array: stacked into one numeric array (zeros where the mask says no value), or `None` when
/// it is not such an array (strings stay as they are).
fn stack_object_rows<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    mask: Option<&[u8]>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Ok(array) = value.cast::<PyUntypedArray>() else { return Ok(None) };
    if array.dtype().kind() != b'O' || array.ndim() != 1 {
        return Ok(None);
    }
    let n = array.shape()[0];
    let present = |i: usize| mask.is_none_or(|m| m.get(i) == Some(&1));
    let np = py.import("numpy")?;
    let Some(first) = (0..n).find(|&i| present(i)) else { return Ok(None) };
    let first = array.get_item(first)?;
    if first.is_none() || first.is_instance_of::<PyString>() || first.is_instance_of::<PyDict>() {
        return Ok(None);
    }
    let Ok(template) = np.call_method1("asarray", (&first,)) else { return Ok(None) };
    let template = template.cast_into::<PyUntypedArray>()?;
    if template.dtype().kind() == b'O' {
        return Ok(None);
    }
    let zeros = np.call_method1("zeros_like", (&template,))?;
    let rows = PyList::empty(py);
    for i in 0..n {
        rows.append(if present(i) { array.get_item(i)? } else { zeros.clone() })?;
    }
    // Rows of different shapes do not stack: then the value stays unsupported, and says so.
    Ok(np.call_method1("stack", (rows,)).ok())
}

/// The envs where both masks are set (`None`: every env).
fn and_masks(coll: &mut Collector, a: Option<Src>, b: Option<Src>) -> Option<Src> {
    match (a, b) {
        (None, m) | (m, None) => m,
        (Some(a), Some(b)) => {
            let both: Vec<u8> =
                coll.slice(a).iter().zip(coll.slice(b)).map(|(&x, &y)| (x != 0 && y != 0) as u8).collect();
            Some(coll.own(&both))
        }
    }
}

/// The dtype and per-row shape a first value gives its column, or why it cannot be recorded.
fn infer(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    rows: Option<usize>,
    mask: Option<Vec<u8>>,
) -> PyResult<Result<(DType, Vec<usize>), String>> {
    let np = py.import("numpy")?;
    let of_array = |array: &Bound<'_, PyUntypedArray>,
                    batched: bool|
     -> PyResult<Result<(DType, Vec<usize>), String>> {
        let shape = array.shape();
        let row_shape = if batched { shape.get(1..).unwrap_or(&[]).to_vec() } else { shape.to_vec() };
        let dtype = array.dtype();
        if dtype.kind() == b'U' {
            return Ok(if row_shape.is_empty() {
                Ok((DType::Utf8, vec![]))
            } else {
                Err("arrays of strings are not supported".into())
            });
        }
        if dtype.kind() == b'O' && batched {
            // Vector infos of strings are object arrays (None where the env had no entry).
            let first = (0..shape[0]).find(|&i| mask.as_ref().is_none_or(|m| m.get(i) == Some(&1)));
            let item = match first {
                Some(i) => Some(array.get_item(i)?),
                None => None,
            };
            return Ok(match item {
                Some(item) if item.is_instance_of::<PyString>() && row_shape.is_empty() => Ok((DType::Utf8, vec![])),
                Some(item) => Err(format!("values of type {} are not supported", type_name(&item))),
                None => Err("no env had a value".into()),
            });
        }
        let name = dtype.str()?.to_string();
        let canonical: String = np.call_method1("dtype", (dtype,))?.getattr("name")?.extract()?;
        match DType::from_name(&canonical) {
            Ok(d) if d != DType::Utf8 => Ok(Ok((d, row_shape))),
            _ => Ok(Err(format!("dtype {name} is not supported"))),
        }
    };
    match rows {
        Some(n) => {
            let array = match value.cast::<PyUntypedArray>() {
                Ok(a) => a.clone(),
                Err(_) => match np.call_method1("asarray", (value,)) {
                    Ok(a) => a.cast_into::<PyUntypedArray>()?,
                    Err(e) => return Ok(Err(format!("{} is not an array over the envs: {e}", type_name(value)))),
                },
            };
            if array.shape().first() != Some(&n) {
                return Ok(Err(format!("expected one value per env ({n}), got shape {:?}", array.shape())));
            }
            of_array(&array, true)
        }
        None => {
            if value.is_instance_of::<PyBool>() {
                return Ok(Ok((DType::Bool, vec![])));
            }
            if value.is_exact_instance_of::<PyInt>() {
                return Ok(Ok((DType::I64, vec![])));
            }
            if value.is_exact_instance_of::<PyFloat>() {
                return Ok(Ok((DType::F64, vec![])));
            }
            if value.is_instance_of::<PyString>() {
                return Ok(Ok((DType::Utf8, vec![])));
            }
            let numeric = value.is_instance_of::<PyList>()
                || value.is_instance_of::<PyTuple>()
                || value.is_instance(&np.getattr("generic")?)?
                || value.is_instance_of::<PyInt>()
                || value.is_instance_of::<PyFloat>();
            if let Ok(array) = value.cast::<PyUntypedArray>() {
                return of_array(array, false);
            }
            if numeric {
                if let Ok(array) = np.call_method1("asarray", (value,)) {
                    if let Ok(array) = array.cast::<PyUntypedArray>() {
                        if array.dtype().kind() != b'O' {
                            return of_array(array, false);
                        }
                    }
                }
            }
            Ok(Err(format!("values of type {} are not supported", type_name(value))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::escape_key;

    #[test]
    fn keys_never_take_a_mask_name() {
        assert_eq!(escape_key("lives"), "lives");
        assert_eq!(escape_key("_lives"), "%5Flives");
        assert_eq!(escape_key("a/b%"), "a%2Fb%25");
        assert_eq!(escape_key("x_y"), "x_y");
    }
}
