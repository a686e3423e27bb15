//! Batches for training: the core plans them (`BatchPlan`: keys -> fields; `Request`: which
//! windows, or one step) and reads them (`Dataset::read_batch`); this file allocates the numpy
//! outputs with the GIL, calls the core with it released, and nests the results like the
//! recorded spaces.

use numpy::PyArrayDescr;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use trajcore_core::layout::Layout;
use trajcore_core::reader::{BatchOut, BatchPlan, Damage, Dataset, Field, WindowKind};
use trajcore_core::DType;

use crate::arrays::{arena, descr};
use crate::errors::IntoPy;

/// A layout tree over field indexes, its keys interned for Python.
pub type Tree = Layout<usize, Py<PyString>>;

/// The core's plan of a set of output keys, with what Python needs to build its results.
pub struct Plan {
    core: BatchPlan,
    /// numpy dtype per field (`None` for str fields, which come back as lists of str).
    descrs: Vec<Option<Py<PyArrayDescr>>>,
    /// Output keys in order, each a tree over field indexes.
    entries: Vec<(Py<PyString>, Tree)>,
}

impl Plan {
    pub fn new(py: Python<'_>, ds: &Dataset, keys: Option<&[String]>, among: Option<&[bool]>) -> PyResult<Plan> {
        let core = BatchPlan::among(&ds.view(), keys, among).py_err(py)?;
        let descrs = core
            .fields
            .iter()
            .map(|f| Ok(if f.dtype == DType::Utf8 { None } else { Some(descr(py, f.dtype)?.unbind()) }))
            .collect::<PyResult<_>>()?;
        let intern = |k: &String| PyString::intern(py, k).unbind();
        let entries: Vec<_> = core
            .entries
            .iter()
            .map(|(key, tree)| {
                let tree = tree.try_map(&mut |&i| Ok::<_, PyErr>(i), &mut |k| Ok(intern(k)))?;
                Ok((intern(key), tree))
            })
            .collect::<PyResult<_>>()?;
        Ok(Plan { core, descrs, entries })
    }

    /// A dict of each output key nested over `leaves` (one per field).
    fn nest<'py>(
        &self,
        py: Python<'py>,
        leaves: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let leaves = leaves.collect::<PyResult<Vec<_>>>()?;
        let out = PyDict::new(py);
        for (key, node) in &self.entries {
            out.set_item(key.bind(py), nest(py, node, &leaves)?)?;
        }
        Ok(out)
    }
}

/// The Python value of a layout tree: dicts and tuples as the tree nests them, leaf `i` being
/// `leaves[i]`.
pub fn nest<'py>(py: Python<'py>, node: &Tree, leaves: &[Bound<'py, PyAny>]) -> PyResult<Bound<'py, PyAny>> {
    Ok(match node {
        Layout::Leaf(i) => leaves[*i].clone(),
        Layout::Dict(items) => {
            let d = PyDict::new(py);
            for (key, sub) in items {
                d.set_item(key.bind(py), nest(py, sub, leaves)?)?;
            }
            d.into_any()
        }
        Layout::Tuple(items) => {
            PyTuple::new(py, items.iter().map(|t| nest(py, t, leaves)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
    })
}

/// A batch: `[B, ...]` per field for transitions, `[B, L, ...]` for sequences; and the damage
/// found (lenient reads leave the episodes it affects out, see `Dataset::gather_lenient`).
/// `one`: a batch of one transition given without its batch axis (`Selection.step`): arrays of
/// the row shape, numpy scalars for scalar columns, str for str columns, the indexes as int.
/// `read` fills the outputs (the dataset's `read_batch` over the request, with the GIL released).
pub fn batch<'py>(
    py: Python<'py>,
    plan: &Plan,
    rows: usize,
    kind: WindowKind,
    one: bool,
    read: impl FnOnce(&[Field], BatchOut<'_>) -> PyResult<Vec<Damage>>,
) -> PyResult<(Bound<'py, PyDict>, Vec<Damage>)> {
    // Every numpy output in one block, shaped as the core says: the fields stored fixed-size,
    // then episode_index, step_index and (padded sequences) mask.
    let fixed = plan.descrs.iter().flatten().map(|d| Ok(d.bind(py).clone()));
    let descrs = fixed.chain([DType::I64, DType::I64, DType::Bool].map(|dtype| descr(py, dtype)));
    let shapes = plan.core.batch_shapes(rows, kind);
    let parts = descrs.zip(shapes).map(|(d, shape)| Ok((d?, shape))).collect::<PyResult<Vec<_>>>()?;
    let indexes = parts.len() - plan.descrs.iter().flatten().count();
    let mut arena = arena(py, parts)?;
    let mut strings = plan.core.string_lists(rows, kind);
    // SAFETY: the arena was made above and no view of it exists yet; the read writes the parts
    // whole (or fails, and the arena is dropped unseen), before any is taken below.
    let damage = read(&plan.core.fields, BatchOut::new(&plan.core, unsafe { arena.parts() }, &mut strings))?;
    let mut strings = strings.into_iter();
    // Without the batch axis (`one`): a numpy scalar for a scalar column, else the row's array
    // (`[0]` of the view: a view of the row).
    let mut next = 0..;
    let mut part = |scalar: bool| {
        let i = next.next().expect("counts up");
        // SAFETY: the read above wrote every part; a batch of one holds an element in each.
        unsafe {
            if !one {
                arena.view(i)
            } else if scalar {
                arena.scalar(i)
            } else {
                arena.view(i)?.get_item(0)
            }
        }
    };
    let out = plan.nest(
        py,
        plan.core.fields.iter().zip(&plan.descrs).map(|(field, d)| match d {
            Some(_) => part(field.shape.is_empty()),
            None => {
                let v = strings.next().expect("a list per str field");
                match (one, kind.sequence) {
                    (true, _) => Ok(PyString::new(py, v.first().map_or("", String::as_str)).into_any()),
                    // Lists of lists of `l`, for sequences.
                    (false, true) => {
                        let rows = v.chunks(kind.length.max(1)).map(|c| PyList::new(py, c));
                        Ok(PyList::new(py, rows.collect::<PyResult<Vec<_>>>()?)?.into_any())
                    }
                    (false, false) => Ok(PyList::new(py, v)?.into_any()),
                }
            }
        }),
    )?;
    // In `batch_shapes`' order (mask only for padded sequences); one step's indexes as int.
    let names = [pyo3::intern!(py, "episode_index"), pyo3::intern!(py, "step_index"), pyo3::intern!(py, "mask")];
    for name in names.into_iter().take(indexes) {
        let index = part(true)?;
        out.set_item(name, if one { index.call_method0(pyo3::intern!(py, "item"))? } else { index })?;
    }
    Ok((out, damage))
}
