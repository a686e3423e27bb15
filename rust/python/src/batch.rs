//! Batches for training: the core plans them (`BatchPlan`: keys -> fields, and the outputs to
//! allocate; `Request`: which windows) and reads them (`Dataset::read_batch`, `read_step`); this
//! file allocates the outputs with the GIL, calls the core with it released, and nests the
//! results like the recorded spaces.

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyList, PyString, PyTuple};
use trajcore_core::layout::Layout;
use trajcore_core::reader::{ArenaLayout, BatchPlan, Dataset, Out, OutputSpec, INDEX_KEYS};
use trajcore_core::DType;

use crate::arrays::{part, BatchMemory};
use crate::errors::IntoPy;

/// A layout tree over field indexes, its keys interned for Python.
type Tree = Layout<usize, Py<PyString>>;

/// The core's plan of a set of output keys, with its keys made Python strings once.
pub struct Plan {
    pub core: BatchPlan,
    /// Output keys in order, each a tree over field indexes.
    entries: Vec<(Py<PyString>, Tree)>,
    /// `INDEX_KEYS`, the keys of the outputs past the fields.
    index_keys: Vec<Py<PyString>>,
    /// The outputs of one step, made once (a step is read in about 2 µs).
    pub step_outputs: Vec<OutputSpec>,
    /// A dict with the output keys of one step (values None), copied per step so the result is
    /// made at its final size.
    pub step_template: Py<PyDict>,
}

impl Plan {
    pub fn new(py: Python<'_>, ds: &Dataset, keys: Option<&[String]>, among: Option<&[bool]>) -> PyResult<Plan> {
        let core = BatchPlan::among(&ds.view(), keys, among).py_err(py)?;
        let intern = |k: &str| Ok::<_, PyErr>(PyString::intern(py, k).unbind());
        let entries: Vec<_> = core
            .entries
            .iter()
            .map(|(key, tree)| Ok((intern(key)?, tree.try_map(&mut |&i| Ok(i), &mut |k| intern(k))?)))
            .collect::<PyResult<_>>()?;
        let index_keys = INDEX_KEYS.iter().map(|k| intern(k)).collect::<PyResult<Vec<_>>>()?;
        let step_keys = entries.iter().map(|(key, _)| key).chain(&index_keys[..2]);
        let step_template = step_keys.map(|key| (key.bind(py), py.None())).into_py_dict(py)?;
        let step_outputs = core.step_outputs();
        Ok(Plan { core, entries, index_keys, step_outputs, step_template: step_template.unbind() })
    }

    /// `out` with `values` (one per output) put in: the fields' nested under the output keys,
    /// the indexes' under `INDEX_KEYS`.
    pub fn nest<'py>(
        &self,
        py: Python<'py>,
        values: &[Bound<'py, PyAny>],
        out: Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        for (key, node) in &self.entries {
            out.set_item(key.bind(py), nest(py, node, &mut |&i| Ok(values[i].clone()))?)?;
        }
        for (key, value) in self.index_keys.iter().zip(&values[self.core.fields.len()..]) {
            out.set_item(key.bind(py), value)?;
        }
        Ok(out)
    }
}

/// The Python value of a layout tree: dicts and tuples as the tree nests them, each leaf's made
/// by `leaf`.
pub fn nest<'py, L>(
    py: Python<'py>,
    node: &Layout<L, Py<PyString>>,
    leaf: &mut dyn FnMut(&L) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match node {
        Layout::Leaf(l) => leaf(l)?,
        Layout::Dict(items) => {
            let d = PyDict::new(py);
            for (key, sub) in items {
                d.set_item(key.bind(py), nest(py, sub, leaf)?)?;
            }
            d.into_any()
        }
        Layout::Tuple(items) => {
            PyTuple::new(py, items.iter().map(|t| nest(py, t, leaf)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
    })
}

/// `outputs`, written by `read` (which releases the GIL), as Python values: the fixed-size ones
/// over one block (`BatchMemory`), str ones as str in lists nested like their shape.
pub fn read_outputs<'py, R>(
    py: Python<'py>,
    outputs: &[OutputSpec],
    read: impl FnOnce(Vec<Out<'_>>) -> PyResult<R>,
) -> PyResult<(Vec<Bound<'py, PyAny>>, R)> {
    let fixed = outputs.iter().filter(|o| o.dtype != DType::Utf8);
    let layout = ArenaLayout::new(fixed.map(|o| (o.dtype.size().unwrap_or(0), o.shape.as_slice())))
        .ok_or_else(|| PyOverflowError::new_err("batch too large"))?;
    let mut block = BatchMemory::block(layout.len);
    let strs = outputs.iter().filter(|o| o.dtype == DType::Utf8);
    let mut strings: Vec<Vec<String>> = strs.map(|o| vec![String::new(); o.shape.iter().product()]).collect();
    let got = {
        // The read writes every part whole, or fails and the block is dropped unseen.
        let mut parts = layout.split(&mut block).into_iter();
        let mut lists = strings.iter_mut();
        let outs = outputs.iter().map(|o| match o.dtype {
            DType::Utf8 => Out::Strings(lists.next().expect("a list per str output")),
            _ => Out::Uninit(parts.next().expect("a part per fixed-size output")),
        });
        read(outs.collect())?
    };
    // SAFETY: the read wrote every part whole, and `split` zeroed the bytes between them.
    let buffer = unsafe { BatchMemory::buffer(py, block)? };
    let (mut ranges, mut lists) = (layout.ranges.into_iter(), strings.into_iter());
    let values = outputs.iter().map(|o| match o.dtype {
        DType::Utf8 => str_values(py, &lists.next().expect("a list per str output"), &o.shape),
        // SAFETY: the buffer's own data; the layout's ranges lie inside it.
        dtype => unsafe { part(py, &buffer, ranges.next().expect("a part per fixed-size output"), dtype, &o.shape) },
    });
    Ok((values.collect::<PyResult<_>>()?, got))
}

/// Str values of `shape`, row-major: one str for shape `[]`, else lists nested like it.
fn str_values<'py>(py: Python<'py>, values: &[String], shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let Some((_, rest)) = shape.split_first() else {
        return Ok(PyString::new(py, values.first().map_or("", |s| s)).into_any());
    };
    let rows = values.chunks(rest.iter().product::<usize>().max(1)).map(|row| str_values(py, row, rest));
    Ok(PyList::new(py, rows.collect::<PyResult<Vec<_>>>()?)?.into_any())
}
