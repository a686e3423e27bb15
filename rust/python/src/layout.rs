//! The core's layout trees (`trajcore_core::layout`) over Python values: a tree whose leaves are
//! the caller's column indexes and whose keys are interned Python strings, walked once per call
//! by the core (`Layout::walk_value` with `Access`), so nesting costs no Python code per step.
//! This file only reads Python values.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;
use trajcore_core::layout::{self, ValueAccess};
use trajcore_core::Error;

use crate::errors::{invalid, to_py};
use crate::values::type_name;

pub type Layout = layout::Layout<usize, Py<PyString>>;

/// Python values as the core's walk reads them: a dict (or any mapping) by key, a sequence by
/// position.
pub struct Access<'py>(pub Python<'py>);

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

    /// As the mapping's `keys()` lists them: a str as it is, another as its `repr`.
    fn keys(&self, value: &Self::Value) -> PyResult<Vec<String>> {
        let text = |k: Bound<'py, PyAny>| match k.cast::<PyString>() {
            Ok(s) => s.to_string(),
            Err(_) => k.repr().map(|r| r.to_string()).unwrap_or_default(),
        };
        value.call_method0("keys")?.try_iter()?.map(|k| k.map(text)).collect()
    }

    fn at(&self, value: &Self::Value, index: usize) -> PyResult<Self::Value> {
        value.get_item(index)
    }

    fn type_name(&self, value: &Self::Value) -> String {
        type_name(value)
    }

    fn misfit(&self, error: Error) -> PyErr {
        to_py(self.0, error)
    }
}

/// Parses a tree; `column_index` turns a leaf's column name into an index of the caller's.
pub fn parse(py: Python<'_>, tree: &Value, column_index: &dyn Fn(&str) -> Option<usize>) -> PyResult<Layout> {
    let intern = &mut |key: &str| PyString::intern(py, key).unbind();
    Layout::parse_as(tree, column_index, intern).map_err(|why| invalid(py, format!("layout: {why}")))
}
