//! Layout trees: how a nested observation or action (dicts and tuples of arrays) maps onto leaf
//! columns. Walked once per call in Rust, so nesting costs no Python code per step.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;

use crate::errors::{invalid, schema_error};
use crate::values::type_name;

pub enum Layout {
    Leaf(usize),
    Dict(Vec<(Py<PyString>, String, Layout)>),
    Tuple(Vec<Layout>),
}

impl Layout {
    /// Parses a tree; `column_index` turns a leaf's column name into an index of the caller's.
    pub fn parse(py: Python<'_>, tree: &Value, column_index: &dyn Fn(&str) -> Option<usize>) -> PyResult<Self> {
        let node = tree.as_object().ok_or_else(|| invalid(py, format!("layout node must be an object, got {tree}")))?;
        if let Some(Value::String(name)) = node.get("leaf") {
            return column_index(name)
                .map(Layout::Leaf)
                .ok_or_else(|| invalid(py, format!("layout leaf '{name}' names no column")));
        }
        if let Some(Value::Array(items)) = node.get("dict") {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let pair = item.as_array().filter(|p| p.len() == 2 && p[0].is_string());
                let pair = pair.ok_or_else(|| invalid(py, format!("dict layout items are [key, tree], got {item}")))?;
                let key = pair[0].as_str().unwrap_or_default();
                out.push((
                    PyString::intern(py, key).unbind(),
                    key.to_string(),
                    Layout::parse(py, &pair[1], column_index)?,
                ));
            }
            return Ok(Layout::Dict(out));
        }
        if let Some(Value::Array(items)) = node.get("tuple") {
            return items
                .iter()
                .map(|t| Layout::parse(py, t, column_index))
                .collect::<PyResult<_>>()
                .map(Layout::Tuple);
        }
        Err(invalid(py, format!("layout node must have 'leaf', 'dict' or 'tuple', got {tree}")))
    }

    /// Calls `leaf(column index, value)` for every leaf of `value`, checking that the nesting
    /// matches. `what` names the place for errors ("observation").
    pub fn walk<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        what: &str,
        leaf: &mut dyn FnMut(usize, &Bound<'py, PyAny>) -> PyResult<()>,
    ) -> PyResult<()> {
        match self {
            Layout::Leaf(i) => leaf(*i, value),
            Layout::Dict(items) => {
                let dict = value.cast::<PyDict>().ok();
                for (key, key_text, sub) in items {
                    let item = match dict {
                        Some(d) => d.get_item(key.bind(py))?,
                        None => value.get_item(key.bind(py)).ok(),
                    };
                    let item = item.ok_or_else(|| {
                        schema_error(
                            py,
                            what,
                            format!("expected a dict with key '{key_text}', got {}", type_name(value)),
                        )
                    })?;
                    sub.walk(py, &item, &format!("{what}/{key_text}"), leaf)?;
                }
                Ok(())
            }
            Layout::Tuple(items) => {
                let n = value
                    .len()
                    .map_err(|_| schema_error(py, what, format!("expected a tuple, got {}", type_name(value))))?;
                if n != items.len() {
                    return Err(schema_error(py, what, format!("expected a tuple of {} items, got {n}", items.len())));
                }
                for (i, sub) in items.iter().enumerate() {
                    sub.walk(py, &value.get_item(i)?, &format!("{what}/{i}"), leaf)?;
                }
                Ok(())
            }
        }
    }
}
