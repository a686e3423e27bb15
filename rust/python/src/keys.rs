//! The key escaping rule of column names (`trajcore_core::schema::escape_key`), for Python.

use pyo3::prelude::*;

/// A key as one component of a column name.
#[pyfunction]
pub fn escape_key(key: &str) -> String {
    trajcore_core::schema::escape_key(key)
}

/// The key of a column name component.
#[pyfunction]
pub fn unescape_key(part: &str) -> String {
    trajcore_core::schema::unescape_key(part)
}
