//! The core's layout trees (`trajcore_core::layout`) over Python values: a tree whose leaves are
//! the caller's column indexes and whose keys are interned Python strings, walked once per call
//! by the core, so nesting costs no Python code per step (the core asks `Objects` about values).

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;
use trajcore_core::layout::{self, WalkError};

use crate::errors::{invalid, to_py};
use crate::values::Objects;

pub struct Layout(pub layout::Layout<usize, Py<PyString>>);

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
        self.0.walk_value(&Objects(py), value, what, &mut |&i, v| leaf(i, v)).map_err(|e| match e {
            WalkError::Raised(e) => e,
            WalkError::Misfit(e) => to_py(py, e),
        })
    }
}
