//! The core's layout trees (`trajcore_core::layout`) over Python values: a tree whose leaves are
//! the caller's column indexes and whose keys are interned Python strings, walked once per call
//! by the core, so nesting costs no Python code per step (the core asks `Objects` about values).

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;
use trajcore_core::layout;

use crate::errors::invalid;

pub type Layout = layout::Layout<usize, Py<PyString>>;

/// Parses a tree; `column_index` turns a leaf's column name into an index of the caller's.
pub fn parse(py: Python<'_>, tree: &Value, column_index: &dyn Fn(&str) -> Option<usize>) -> PyResult<Layout> {
    let intern = &mut |key: &str| PyString::intern(py, key).unbind();
    Layout::parse_as(tree, column_index, intern).map_err(|why| invalid(py, format!("layout: {why}")))
}
