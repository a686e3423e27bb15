//! Batches for training: the core plans them (`BatchPlan`: keys -> fields; `Request`: which
//! windows) and reads them (`Dataset::read_batch`, `read_step`); this file allocates the numpy
//! outputs with the GIL, calls the core with it released, and nests the results like the
//! recorded spaces.

use std::mem::MaybeUninit;

use numpy::PyArrayDescr;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use trajcore_core::layout::Layout;
use trajcore_core::reader::{field_outs, BatchOut, BatchPlan, Damage, Dataset, Field, Out, Window, WindowKind};
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

/// The outputs `Plan::read` filled: the arrays, then the str lists, in the plan's field order.
type Filled<'py, R> = (std::vec::IntoIter<Bound<'py, PyAny>>, std::vec::IntoIter<Vec<String>>, R);

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

    /// Arrays of `shapes` (the fixed-size fields' as the core gives them, then one per `extra`
    /// dtype) in one arena, and the str lists `strings`, filled by `read` (which releases the
    /// GIL) through the arena's parts.
    fn read<'py, R>(
        &self,
        py: Python<'py>,
        shapes: Vec<Vec<usize>>,
        extra: &[DType],
        mut strings: Vec<Vec<String>>,
        read: impl FnOnce(Vec<&mut [MaybeUninit<u8>]>, &mut [Vec<String>]) -> PyResult<R>,
    ) -> PyResult<Filled<'py, R>> {
        let fixed = self.descrs.iter().flatten().map(|d| Ok(d.bind(py).clone()));
        let descrs = fixed.chain(extra.iter().map(|&dtype| descr(py, dtype)));
        let parts = descrs.zip(shapes).map(|(d, shape)| Ok((d?, shape))).collect::<PyResult<Vec<_>>>()?;
        let mut arena = arena(py, &parts)?;
        // SAFETY: the arena was made above and its views are not visible to Python code until
        // this returns; the read writes the parts whole (or fails, and they are dropped unseen).
        let done = read(unsafe { arena.parts() }, &mut strings)?;
        Ok((arena.views.into_iter(), strings.into_iter(), done))
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
/// `read` fills the outputs (the dataset's `read_batch` over the request, with the GIL released).
pub fn batch<'py>(
    py: Python<'py>,
    plan: &Plan,
    rows: usize,
    kind: WindowKind,
    read: impl FnOnce(&[Field], BatchOut<'_>) -> PyResult<Vec<Damage>>,
) -> PyResult<(Bound<'py, PyDict>, Vec<Damage>)> {
    // Shaped as the core says: the fields stored fixed-size, then episode_index, step_index and
    // (padded sequences) mask.
    let (shapes, strings) = (plan.core.batch_shapes(rows, kind), plan.core.string_lists(rows, kind));
    let index_dtypes = [DType::I64, DType::I64, DType::Bool];
    let (mut views, mut strings, damage) = plan.read(py, shapes, &index_dtypes, strings, |parts, strings| {
        read(&plan.core.fields, BatchOut::new(&plan.core, parts, strings))
    })?;
    let out = plan.nest(
        py,
        plan.descrs.iter().map(|d| match d {
            Some(_) => Ok(views.next().expect("a view per fixed field")),
            // Str values as lists (of lists of `l`, for sequences).
            None if kind.sequence => {
                let v = strings.next().expect("a list per str field");
                let rows = v.chunks(kind.length.max(1)).map(|c| PyList::new(py, c)).collect::<PyResult<Vec<_>>>()?;
                Ok(PyList::new(py, rows)?.into_any())
            }
            None => Ok(PyList::new(py, strings.next().expect("a list per str field"))?.into_any()),
        }),
    )?;
    // In `batch_shapes`' order (mask only for padded sequences).
    let names = [pyo3::intern!(py, "episode_index"), pyo3::intern!(py, "step_index"), pyo3::intern!(py, "mask")];
    for (name, view) in names.into_iter().zip(views) {
        out.set_item(name, view)?;
    }
    Ok((out, damage))
}

/// One step, without a batch axis: arrays of the row shape, numpy scalars for scalar columns,
/// str for str columns; `episode_index` and `step_index` as int. `read` fills the outputs (the
/// dataset's `read_step`).
pub fn one_step<'py>(
    py: Python<'py>,
    plan: &Plan,
    read: impl FnOnce(&[Field], &mut [Out<'_>]) -> PyResult<Window>,
) -> PyResult<Bound<'py, PyDict>> {
    let strings = plan.core.string_lists(1, WindowKind::TRANSITION);
    let (mut views, mut strings, window) = plan.read(py, plan.core.step_shapes(), &[], strings, |parts, strings| {
        read(&plan.core.fields, &mut field_outs(&plan.core, &mut parts.into_iter(), strings))
    })?;
    let out =
        plan.nest(
            py,
            plan.core.fields.iter().zip(&plan.descrs).map(|(field, d)| match d {
                // A scalar column's value is a numpy scalar: `[()]` of its 0-d array.
                Some(_) if field.shape.is_empty() => views.next().expect("a view per fixed field").get_item(()),
                Some(_) => Ok(views.next().expect("a view per fixed field")),
                None => Ok(PyString::new(py, &strings.next().expect("a list per str field").pop().unwrap_or_default())
                    .into_any()),
            }),
        )?;
    out.set_item(pyo3::intern!(py, "episode_index"), window.episode)?;
    out.set_item(pyo3::intern!(py, "step_index"), window.start)?;
    Ok(out)
}
