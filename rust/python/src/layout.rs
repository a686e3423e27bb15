//! The core's layout trees (`trajcore_core::layout`) over Python values: a tree whose leaves are
//! the caller's column indexes and whose keys are interned Python strings, walked once per call
//! in Rust, so nesting costs no Python code per step.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;
use trajcore_core::layout::{self, PathItem};

use crate::errors::{invalid, schema_error};
use crate::values::type_name;

pub struct Layout(pub layout::Layout<usize, Py<PyString>>);

/// Why a value does not fit the tree, and where (innermost first; built only on the way out).
enum Misfit {
    Raised(PyErr),
    Shape(Vec<PathItem>, String),
}

impl Misfit {
    fn under(self, item: PathItem) -> Misfit {
        match self {
            Misfit::Shape(mut path, why) => {
                path.push(item);
                Misfit::Shape(path, why)
            }
            raised => raised,
        }
    }
}

impl Layout {
    /// Parses a tree; `column_index` turns a leaf's column name into an index of the caller's.
    pub fn parse(py: Python<'_>, tree: &Value, column_index: &dyn Fn(&str) -> Option<usize>) -> PyResult<Self> {
        let parsed = layout::Layout::parse(tree, &|name| column_index(name).is_some())
            .map_err(|why| invalid(py, format!("layout: {why}")))?;
        parsed
            .try_map(
                &mut |name| {
                    column_index(name).ok_or_else(|| invalid(py, format!("layout: leaf '{name}' names no column")))
                },
                &mut |key| Ok(PyString::intern(py, key).unbind()),
            )
            .map(Layout)
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
        go(&self.0, py, value, leaf).map_err(|misfit| match misfit {
            Misfit::Raised(e) => e,
            Misfit::Shape(mut path, why) => {
                path.reverse();
                schema_error(py, &layout::path_name(what, &path), why)
            }
        })
    }
}

fn go<'py>(
    node: &layout::Layout<usize, Py<PyString>>,
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    leaf: &mut dyn FnMut(usize, &Bound<'py, PyAny>) -> PyResult<()>,
) -> Result<(), Misfit> {
    match node {
        layout::Layout::Leaf(i) => leaf(*i, value).map_err(Misfit::Raised),
        layout::Layout::Dict(items) => {
            let dict = value.cast::<PyDict>().ok();
            for (key, sub) in items {
                let key = key.bind(py);
                let item = match dict {
                    Some(d) => d.get_item(key).map_err(Misfit::Raised)?,
                    None => value.get_item(key).ok(),
                };
                let Some(item) = item else {
                    let why = format!("expected a dict with key '{key}', got {}", type_name(value));
                    return Err(Misfit::Shape(Vec::new(), why));
                };
                go(sub, py, &item, leaf).map_err(|m| m.under(PathItem::Key(key.to_string())))?;
            }
            Ok(())
        }
        layout::Layout::Tuple(items) => {
            let shape = |why: String| Misfit::Shape(Vec::new(), why);
            let n = value.len().map_err(|_| shape(format!("expected a tuple, got {}", type_name(value))))?;
            if n != items.len() {
                return Err(shape(format!("expected a tuple of {} items, got {n}", items.len())));
            }
            for (i, sub) in items.iter().enumerate() {
                let item = value.get_item(i).map_err(Misfit::Raised)?;
                go(sub, py, &item, leaf).map_err(|m| m.under(PathItem::Index(i)))?;
            }
            Ok(())
        }
    }
}
