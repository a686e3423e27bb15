//! The core's layout trees (`trajcore_core::layout`) over Python values: a tree whose leaves are
//! the caller's column indexes and whose keys are interned Python strings, walked once per call
//! by the core, so nesting costs no Python code per step. This file only reads Python values.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;
use trajcore_core::layout::{self, ValueAccess, WalkError};

use crate::errors::{invalid, to_py};
use crate::values::type_name;

pub struct Layout(pub layout::Layout<usize, Py<PyString>>);

/// Python values as the core's walk reads them: a dict (or any mapping) by key, a sequence by
/// position.
struct Access<'py>(Python<'py>);

impl<'py> ValueAccess<Py<PyString>> for Access<'py> {
    type Value = Bound<'py, PyAny>;
    type Error = PyErr;

    fn item(&self, value: &Self::Value, key: &Py<PyString>) -> PyResult<Option<Self::Value>> {
        match value.cast::<PyDict>() {
            Ok(dict) => dict.get_item(key.bind(self.0)),
            Err(_) => Ok(value.get_item(key.bind(self.0)).ok()),
        }
    }

    fn len(&self, value: &Self::Value) -> Option<usize> {
        value.len().ok()
    }

    fn keys(&self, value: &Self::Value) -> PyResult<Vec<String>> {
        let text = |k: Bound<'py, PyAny>| match k.cast::<PyString>() {
            Ok(s) => s.to_string(),
            Err(_) => k.repr().map(|r| r.to_string()).unwrap_or_default(),
        };
        match value.cast::<PyDict>() {
            Ok(dict) => Ok(dict.keys().into_iter().map(text).collect()),
            Err(_) => value.call_method0("keys")?.try_iter()?.map(|k| k.map(text)).collect(),
        }
    }

    fn at(&self, value: &Self::Value, index: usize) -> PyResult<Self::Value> {
        value.get_item(index)
    }

    fn type_name(&self, value: &Self::Value) -> String {
        type_name(value)
    }

    fn key_text(&self, key: &Py<PyString>) -> String {
        key.bind(self.0).to_string()
    }
}

impl Layout {
    /// Parses a tree; `column_index` turns a leaf's column name into an index of the caller's.
    pub fn parse(py: Python<'_>, tree: &Value, column_index: &dyn Fn(&str) -> Option<usize>) -> PyResult<Self> {
        let parsed = layout::Layout::parse(tree, &|name| column_index(name).is_some())
            .map_err(|why| invalid(py, format!("layout: {why}")))?;
        let intern = &mut |key: &String| Ok(PyString::intern(py, key).unbind());
        Ok(Layout(parsed.try_map(&mut |name| column_index(name).ok_or(()), intern).expect("parse checked every leaf")))
    }

    /// Calls `leaf(column index, value)` for every leaf of `value`, checking that the nesting
    /// matches. `what` names the place for errors ("observation").
    pub fn walk<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        what: &str,
        mut leaf: impl FnMut(usize, &Bound<'py, PyAny>) -> PyResult<()>,
    ) -> PyResult<()> {
        self.0.walk_value(&Access(py), value, what, &mut |&i, v| leaf(i, v)).map_err(|e| match e {
            WalkError::Raised(e) => e,
            WalkError::Misfit(e) => to_py(py, e),
        })
    }
}
