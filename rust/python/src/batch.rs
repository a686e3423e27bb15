//! Batches for training: the core plans them (`BatchPlan`: keys -> fields; `Request`: which
//! windows) and reads them (`Dataset::read_batch`, `read_step`); this file allocates the numpy
//! outputs with the GIL, calls the core with it released, and nests the results like the
//! recorded spaces.

use numpy::{PyArrayDescr, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use trajcore_core::layout::Layout;
use trajcore_core::reader::{BatchOut, BatchPlan, Damage, Dataset, Field, Out, Window, WindowKind};
use trajcore_core::DType;

use crate::arrays::{arena, descr, empty, scalar, uninit_mut, Arena};
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
    /// A dict with the output keys of one step (values None), copied per step so the result is
    /// made at its final size.
    step_template: Py<PyDict>,
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
        let step_template = PyDict::new(py);
        for (key, _) in &entries {
            step_template.set_item(key.bind(py), py.None())?;
        }
        step_template.set_item(pyo3::intern!(py, "episode_index"), py.None())?;
        step_template.set_item(pyo3::intern!(py, "step_index"), py.None())?;
        Ok(Plan { core, descrs, entries, step_template: step_template.unbind() })
    }

    /// Puts each output key, nested over `leaves` (one per field), into `out`.
    fn nest<'py>(&self, py: Python<'py>, leaves: &[Bound<'py, PyAny>], out: &Bound<'py, PyDict>) -> PyResult<()> {
        for (key, node) in &self.entries {
            out.set_item(key.bind(py), nest(py, node, leaves)?)?;
        }
        Ok(())
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
    let (b, l) = (rows, kind.length);
    // Every numpy output in one allocation (see `arrays::arena`), shaped as the core says:
    // the fields stored fixed-size, then episode_index, step_index and (padded sequences) mask.
    let i64_descr = descr(py, DType::I64)?;
    let descrs = plan.descrs.iter().flatten().map(|d| d.bind(py).clone());
    let descrs = descrs.chain([i64_descr.clone(), i64_descr, descr(py, DType::Bool)?]);
    let parts: Vec<_> = descrs.zip(plan.core.batch_shapes(b, kind)).collect();
    let Arena { buffer: mut memory_owner, views, layout } = arena(py, &parts)?;
    let mut strings = plan.core.string_lists(b, kind);
    let damage = {
        // SAFETY: the arena was created above and is not visible to Python code until this
        // function returns; this is the only slice of it. `split` zeroes the bytes between the
        // parts, which the read writes whole (or it fails, and the arena is dropped unseen).
        let memory = unsafe { uninit_mut(&mut memory_owner) };
        let out = BatchOut::new(&plan.core, layout.split(memory), &mut strings);
        read(&plan.core.fields, out)?
    };
    let mut views = views.into_iter();
    let mut strings = strings.into_iter();
    let leaves: Vec<Bound<'py, PyAny>> = plan
        .descrs
        .iter()
        .map(|d| match d {
            Some(_) => Ok(views.next().expect("a view per fixed field").into_any()),
            // Str values as lists (of lists of `l`, for sequences).
            None if kind.sequence => {
                let v = strings.next().expect("a list per str field");
                let rows = v.chunks(l.max(1)).map(|c| PyList::new(py, c)).collect::<PyResult<Vec<_>>>()?;
                Ok(PyList::new(py, rows)?.into_any())
            }
            None => Ok(PyList::new(py, strings.next().expect("a list per str field"))?.into_any()),
        })
        .collect::<PyResult<_>>()?;
    let out = PyDict::new(py);
    plan.nest(py, &leaves, &out)?;
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
    enum One<'py> {
        Array(Bound<'py, PyUntypedArray>),
        Scalar(Vec<u8>),
        Strings(Vec<String>),
    }
    let mut buffers = Vec::with_capacity(plan.descrs.len());
    for (field, d) in plan.core.fields.iter().zip(&plan.descrs) {
        buffers.push(match (d, field.row_bytes) {
            (Some(d), _) if !field.shape.is_empty() => One::Array(empty(py, d.bind(py), &field.shape)?),
            (Some(_), Some(rb)) => One::Scalar(vec![0; rb]),
            _ => One::Strings(vec![String::new()]),
        });
    }
    let window = {
        // SAFETY: as in `batch`: fresh arrays, one slice each, not yet visible to Python, and
        // written whole by the read (or dropped unseen).
        let mut outs: Vec<Out<'_>> = buffers
            .iter_mut()
            .map(|buf| match buf {
                One::Array(a) => Out::Uninit(unsafe { uninit_mut(a) }),
                One::Scalar(bytes) => Out::Fixed(bytes),
                One::Strings(v) => Out::Strings(v),
            })
            .collect();
        read(&plan.core.fields, &mut outs)?
    };
    let leaves: Vec<Bound<'py, PyAny>> = buffers
        .into_iter()
        .zip(&plan.descrs)
        .map(|(buf, d)| match buf {
            One::Array(a) => Ok(a.into_any()),
            One::Scalar(bytes) => scalar(py, d.as_ref().expect("fixed-size").bind(py), &bytes),
            One::Strings(mut v) => Ok(PyString::new(py, &v.pop().unwrap_or_default()).into_any()),
        })
        .collect::<PyResult<_>>()?;
    let out = plan.step_template.bind(py).copy()?;
    plan.nest(py, &leaves, &out)?;
    out.set_item(pyo3::intern!(py, "episode_index"), window.episode)?;
    out.set_item(pyo3::intern!(py, "step_index"), window.start)?;
    Ok(out)
}
