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
//!
//! A dict is walked by a plan of its shape (see the core's `writer::entries::info_keys`) when one
//! matches, else its keys are looked up one by one and kept as a plan; either way its values
//! are then put by the same code.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyType};
use trajcore_core::writer::entries::collect::Place;
use trajcore_core::writer::entries::dynamic::Host;
use trajcore_core::writer::entries::info_keys::{check_depth, same_column_why, Role};
use trajcore_core::writer::entries::value::Input;
use trajcore_core::writer::entries::values::{first_present, present, Misfit};
use trajcore_core::writer::{NewColumn, Recorder, Slot};
use trajcore_core::{CodecSpec, DType, Timeline};

use crate::collect::{Collector, Src};
use crate::errors::{schema_error, warn, IntoPy};
use crate::values::{arrayish, exact, mask_bytes, read, why, ColInfo};

type KeyTree = trajcore_core::writer::entries::info_keys::KeyTree<Py<PyString>>;

/// One call's walk: where its values go, the recorder new columns are added to, and where
/// the entries are collected.
pub struct Walk<'a, 'py> {
    pub py: Python<'py>,
    pub at: Place,
    pub recorder: &'a mut Recorder,
    pub coll: &'a mut Collector,
}

pub struct DynamicColumns {
    /// The columns by path, the types of values that made none, and the values left out.
    pub columns: trajcore_core::writer::entries::dynamic::DynamicColumns<ColInfo, TypeOf>,
    keys: KeyTree,
    /// Whether dicts are walked by their plans when they have one (tests compare both ways).
    plans: bool,
    /// The values of the dicts being walked with what each is, a stack (nested dicts push
    /// above); holding a reference to each, so what a conversion runs cannot free them.
    values: Vec<(Py<PyAny>, Role)>,
}

impl DynamicColumns {
    pub fn new(prefix: &'static str, timeline: Timeline, codec: CodecSpec) -> Self {
        let columns = trajcore_core::writer::entries::dynamic::DynamicColumns::new(prefix, timeline, codec);
        DynamicColumns { columns, keys: KeyTree::default(), plans: true, values: Vec::new() }
    }

    /// With `plans` false, walks every dict key by key, as a dict that matches no plan (tests
    /// compare both ways).
    pub fn with_plans(mut self, plans: bool) -> Self {
        self.plans = plans;
        self
    }

    /// One value of `path` is not recorded: warns at the first, counts the rest.
    fn skip(&mut self, py: Python<'_>, path: &str, why: String) -> PyResult<()> {
        self.columns.skips.skip(path, why).map_or(Ok(()), |warning| warn(py, &warning))
    }

    /// Adds entries for every supported value of an info dict (vector infos: with their `_key`
    /// masks).
    pub fn put_info(&mut self, w: &mut Walk<'_, '_>, info: &Bound<'_, PyDict>) -> PyResult<()> {
        self.put_dict(w, info, KeyTree::ROOT, None, 0)
    }

    /// Adds entries for the values of `dict`, under key node `node`, where `mask` (the
    /// parent's) says which envs have it at all.
    fn put_dict(
        &mut self,
        w: &mut Walk<'_, '_>,
        dict: &Bound<'_, PyDict>,
        node: usize,
        mask: Option<Src>,
        depth: usize,
    ) -> PyResult<()> {
        check_depth(depth).map_err(|why| schema_error(w.py, &self.columns.name_of(&self.keys.node(node).path), why))?;
        if dict.is_empty() {
            return Ok(()); // nothing to record, nor to plan (half of CartPole's steps)
        }
        // Its values are pushed on `values` (by a plan, else key by key), then put one by one.
        let start = self.values.len();
        let result = (|| {
            if !self.push_planned(dict, node, w.at.slot == Slot::Regular)? {
                self.push_key_by_key(w, dict, node)?;
            }
            for position in start..self.values.len() {
                let Role::Value { node: child, mask: mask_at } = self.values[position].1 else { continue };
                // Owned handles (a reference count each): `self` is borrowed for the entry.
                let value = self.values[position].0.bind(w.py).clone();
                let own_mask = mask_at.map(|m| self.values[start + m].0.bind(w.py).clone());
                // Its own `_key` mask, if any, under the parent's `mask` (checked when its dict was
                // entered: only a mask of the key's own can leave no env).
                let own_mask = match (w.at.rows, own_mask) {
                    (Some(n), Some(m)) => Some(mask_bytes(w.py, &m, n, "an info mask", w.coll)?),
                    _ => None,
                };
                let mask = w.coll.and_masks(mask, own_mask);
                if own_mask.is_some() && w.coll.none_set(mask) {
                    continue; // no env has it at this step
                }
                // A nested dict is walked, other values become entries.
                match value.cast::<PyDict>() {
                    Ok(inner) => self.put_dict(w, inner, child, mask, depth + 1)?,
                    Err(_) => self.put_key(w, child, &value, mask)?,
                }
            }
            Ok(())
        })();
        self.values.truncate(start);
        result
    }

    /// Whether a plan of node `node` matches `dict`: its keys in its order (each the same str
    /// object, or an exact str of the same text); its values, with their roles, are pushed if so.
    fn push_planned(&mut self, dict: &Bound<'_, PyDict>, node: usize, regular: bool) -> PyResult<bool> {
        if !self.plans {
            return Ok(false);
        }
        let items = || dict.iter().map(|(key, value)| (key, value.unbind()));
        let same = |key: &Bound<'_, PyAny>, planned: &Py<PyString>| {
            Ok(key.is(planned) || same_text(key, planned.bind(dict.py()))?)
        };
        self.keys.push_planned(node, regular, dict.len(), items, same, &mut self.values)
    }

    /// Pushes the values of `dict` with what each key is, found key by key, and keeps that as
    /// a plan of node `node` when its keys are all str and not too many.
    fn push_key_by_key(&mut self, w: &mut Walk<'_, '_>, dict: &Bound<'_, PyDict>, node: usize) -> PyResult<()> {
        let py = w.py;
        let intern = |text: &str| PyString::intern(py, text).unbind();
        let mut keys = Vec::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            // A key of another type than str is named by `str(key)`.
            let (name, is_str) = match key.cast::<PyString>() {
                Ok(s) => (s.clone(), true),
                Err(_) => (key.str()?, false),
            };
            keys.push((key, self.keys.child(node, name.to_str()?, intern), is_str));
            self.values.push((value.unbind(), Role::Skip));
        }
        let (batched, regular) = (w.at.rows.is_some(), w.at.slot == Slot::Regular);
        let mut seen = Vec::with_capacity(keys.len());
        for &(_, child, is_str) in &keys {
            // In vector infos, a mask (read with its key) or same-step autoreset data (taken
            // apart by the recorder) is no value.
            let no_value = self.keys.node(child).is_no_value(batched, is_str, regular, |base, own_mask| {
                Ok::<_, PyErr>(dict.contains(base.bind(py))? && !dict.contains(own_mask.bind(py))?)
            })?;
            seen.push((child, is_str, no_value));
        }
        let start = self.values.len() - keys.len();
        let plan_keys = || keys.iter().map(|k| PyResult::Ok(k.0.cast::<PyString>()?.clone().unbind())).collect();
        let values = &mut self.values[start..];
        for (i, first) in self.keys.set_roles(node, regular, &seen, values, self.plans.then_some(plan_keys))? {
            let node = self.keys.node(keys[i].1);
            let shown = |key: &Bound<'_, PyAny>| key.repr().map_or_else(|_| node.name.clone(), |r| r.to_string());
            let (why, path) = (same_column_why(&shown(&keys[first].0), &shown(&keys[i].0)), node.path.clone());
            self.skip(py, &path, why)?;
        }
        Ok(())
    }

    /// The value of the key at `node`: its column is found through the node once made.
    fn put_key(
        &mut self,
        w: &mut Walk<'_, '_>,
        node: usize,
        value: &Bound<'_, PyAny>,
        mask: Option<Src>,
    ) -> PyResult<()> {
        let known = self.keys.node(node).column;
        // The usual value first: an array whose bytes are the rows of its column as they are
        // (no object array, which `stacked_rows` would take apart).
        if let Some(col) = known.map(|c| self.columns.get(c)) {
            if let Some(data) = exact(value, col, w.at.rows, w.coll) {
                w.coll.push(col.id, w.at, mask, data);
                return Ok(());
            }
        }
        let host = &mut OneValue { recorder: w.recorder, value, rows: w.at.rows, mask, stacks: true };
        let (entry, path) = ((w.at, mask), &self.keys.node(node).path);
        let warning = match known {
            Some(column) => self.columns.put_into(host, w.coll, entry, column)?,
            None => match self.columns.column(host, w.coll, w.at.rows, path)? {
                Ok(column) => {
                    self.keys.set_column(node, column);
                    self.columns.put_into(host, w.coll, entry, column)?
                }
                Err(why) => self.columns.skips.skip(path, why),
            },
        };
        warning.map_or(Ok(()), |warning| warn(w.py, &warning))
    }

    /// One value under `path` (without the prefix) for every env; a value that cannot be
    /// recorded is skipped with a warning (see `skip`).
    pub fn put_one(&mut self, w: &mut Walk<'_, '_>, path: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let host = &mut OneValue { recorder: w.recorder, value, rows: w.at.rows, mask: None, stacks: true };
        let warning = self.columns.put(host, w.coll, (w.at, None), path)?;
        warning.map_or(Ok(()), |warning| warn(w.py, &warning))
    }

    /// Checks a value of the user's own (`record`) now, as it is (not stacked), creating its
    /// column on first sight: a value that cannot be recorded raises `SchemaError` naming the
    /// column. The collector is used as scratch and left empty.
    pub fn check_value(&mut self, w: &mut Walk<'_, '_>, path: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let host = &mut OneValue { recorder: w.recorder, value, rows: w.at.rows, mask: None, stacks: false };
        let result = match self.columns.check(host, w.coll, w.at.rows, path) {
            Ok(Err((column, why))) => Err(schema_error(w.py, &column, why)),
            other => other.map(|_| ()),
        };
        w.coll.clear();
        result
    }
}

/// One value on its way into a column: the core's `DynamicColumns` decides which column, when
/// it widens, whether it fits and when it is left out; this reads the value and adds columns.
struct OneValue<'h, 'py> {
    recorder: &'h mut Recorder,
    value: &'h Bound<'py, PyAny>,
    rows: Option<usize>,
    mask: Option<Src>,
    /// Whether an object array of per-env arrays is stacked first (see `stacked_rows`).
    stacks: bool,
}

impl Host<ColInfo, TypeOf, Py<PyAny>> for OneValue<'_, '_> {
    type Error = PyErr;

    /// Arrays, lists, tuples and numpy scalars: the same type may fit where an earlier value did
    /// not.
    fn kind(&mut self) -> PyResult<Option<TypeOf>> {
        Ok((!arrayish(self.value)?).then(|| TypeOf(self.value.get_type().unbind())))
    }

    fn read(&mut self, column: Option<&ColInfo>, coll: &mut Collector) -> PyResult<Input> {
        let mask = self.mask.map(|m| coll.slice(m));
        let stacked = if self.stacks { stacked_rows(self.value, self.rows, mask)? } else { None };
        read(stacked.as_ref().unwrap_or(self.value), column, self.rows, self.mask, coll)
    }

    fn add(&mut self, spec: NewColumn) -> PyResult<(u32, ColInfo)> {
        let id = self.recorder.add_column(spec).py_err(self.value.py())?;
        Ok((id, ColInfo::new(self.value.py(), self.recorder.column(id))?))
    }

    fn why(&self, dtype: DType, misfit: Misfit) -> String {
        why(self.value, dtype, misfit)
    }
}

/// A Python type, the same as another when it is the same object.
pub struct TypeOf(Py<PyType>);

impl PartialEq for TypeOf {
    fn eq(&self, other: &Self) -> bool {
        self.0.is(&other.0)
    }
}

/// A vector info of per-env arrays or tuples of numbers (ALE's `seeds`) arrives as an object
/// array: stacked into one numeric array (zeros where `mask` says no value), or `None` when it
/// is not such an array (strings stay as they are) or the value is not batched (`rows`).
fn stacked_rows<'py>(
    value: &Bound<'py, PyAny>,
    rows: Option<usize>,
    mask: Option<&[u8]>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Ok(array) = value.cast::<PyUntypedArray>() else { return Ok(None) };
    if rows.is_none() || array.dtype().kind() != b'O' || array.ndim() != 1 {
        return Ok(None);
    }
    let (py, n) = (value.py(), array.shape()[0]);
    let np = py.import("numpy")?;
    let Some(first) = first_present(mask, n) else { return Ok(None) };
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
        rows.append(if present(mask, i) { array.get_item(i)? } else { zeros.clone() })?;
    }
    // Rows of different shapes do not stack: then the value stays unsupported, and says so.
    Ok(np.call_method1("stack", (rows,)).ok())
}

/// A str key of the planned text that is another object (an f-string made each step). Only
/// exact str: a subclass could hash otherwise (its dicts are walked key by key).
fn same_text(key: &Bound<'_, PyAny>, planned: &Bound<'_, PyString>) -> PyResult<bool> {
    let Ok(key) = key.cast_exact::<PyString>() else { return Ok(false) };
    Ok(key.hash()? == planned.hash()? && key.to_str()? == planned.to_str()?)
}
