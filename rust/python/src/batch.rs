//! Batches for training, built in Rust: which columns make up each output key (a *plan*, made
//! once per key set and cached on the dataset), numpy outputs allocated with the GIL, filled by
//! the core's gather with the GIL released, and nested like the recorded spaces.
//!
//! Output keys: `observations`, `actions`, `rewards`, `next_observations`, `terminations`,
//! `truncations` (nested like the spaces, batched along axis 0), any column named verbatim
//! (`info/<key>`, `data/<name>`, masks `info/_<key>`), then `episode_index`, `step_index` and,
//! for padded sequences, `mask`.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::RwLock;

use numpy::{PyArrayDescr, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use serde_json::Value;
use trajcore_core::reader::{
    sample_steps, sample_windows, Damage, Dataset, EpisodeSet, Field, IndexOut, Out, Redraw, Window, WindowKind,
};
use trajcore_core::{DType, Error};

use crate::arrays::{arena, descr, empty, scalar, uninit_mut, Arena};
use crate::errors::{invalid, to_py, IntoPy};
use crate::layout::Layout;

pub const DEFAULT_KEYS: [&str; 6] =
    ["observations", "actions", "rewards", "next_observations", "terminations", "truncations"];

/// The columns behind a set of output keys, and how they nest.
pub struct Plan {
    fields: Vec<Field>,
    /// numpy dtype per field (`None` for str fields, which come back as lists of str).
    descrs: Vec<Option<Py<PyArrayDescr>>>,
    /// Output keys in order, each a tree over field indexes.
    entries: Vec<(Py<PyString>, Layout)>,
    /// A dict with the output keys of one step (values None), copied per step so the result is
    /// made at its final size.
    step_template: Py<PyDict>,
}

fn leaf_names(tree: &Value, out: &mut Vec<String>) {
    if let Some(Value::String(name)) = tree.get("leaf") {
        out.push(name.clone());
    } else if let Some(Value::Array(items)) = tree.get("dict") {
        items.iter().filter_map(|p| p.get(1)).for_each(|t| leaf_names(t, out));
    } else if let Some(Value::Array(items)) = tree.get("tuple") {
        items.iter().for_each(|t| leaf_names(t, out));
    }
}

impl Plan {
    /// Resolves `keys` (the defaults when `None`) against the dataset: layouts come from the
    /// first recording's Meta record; columns are matched by name in every recording.
    pub fn new(py: Python<'_>, ds: &Dataset, keys: Option<&[String]>) -> PyResult<Plan> {
        let keys: Vec<String> = match keys {
            Some(k) => k.to_vec(),
            None => DEFAULT_KEYS.iter().map(|s| s.to_string()).collect(),
        };
        let rec = ds.recordings().first().ok_or_else(|| invalid(py, "the dataset has no recording"))?;
        let meta: Value = serde_json::from_str(&rec.meta_json).unwrap_or(Value::Null);
        let layout = |which: &str| -> PyResult<Value> {
            meta.get("layout").and_then(|l| l.get(which)).cloned().ok_or_else(|| {
                to_py(
                    py,
                    Error::Invalid(format!(
                        "the Meta record of the first recording is damaged or missing: its {which}s cannot be rebuilt"
                    )),
                )
            })
        };
        let mut fields: Vec<Field> = Vec::new();
        let mut index: HashMap<(String, bool), usize> = HashMap::new();
        let mut field = |name: &str, next: bool| -> PyResult<usize> {
            if let Some(&i) = index.get(&(name.to_string(), next)) {
                return Ok(i);
            }
            fields.push(ds.field(name, next).py_err(py)?);
            index.insert((name.to_string(), next), fields.len() - 1);
            Ok(fields.len() - 1)
        };
        let mut entries = Vec::new();
        for key in &keys {
            let node = match key.as_str() {
                "observations" | "next_observations" | "actions" => {
                    let (which, next) = match key.as_str() {
                        "actions" => ("action", false),
                        k => ("observation", k == "next_observations"),
                    };
                    let tree = layout(which)?;
                    let mut names = Vec::new();
                    leaf_names(&tree, &mut names);
                    let ids: HashMap<String, usize> =
                        names.iter().map(|n| Ok((n.clone(), field(n, next)?))).collect::<PyResult<_>>()?;
                    Layout::parse(py, &tree, &|name| ids.get(name).copied())?
                }
                "rewards" => Layout::Leaf(field("reward", false)?),
                "terminations" => Layout::Leaf(field("terminated", false)?),
                "truncations" => Layout::Leaf(field("truncated", false)?),
                "episode_index" | "step_index" | "mask" => continue, // always there
                column => Layout::Leaf(field(column, false)?),
            };
            entries.push((PyString::intern(py, key).unbind(), node));
        }
        let descrs = fields
            .iter()
            .map(|f| match f.dtype {
                DType::Utf8 => Ok(None),
                d => Ok(Some(descr(py, d)?.unbind())),
            })
            .collect::<PyResult<_>>()?;
        let step_template = PyDict::new(py);
        for (key, _) in &entries {
            step_template.set_item(key.bind(py), py.None())?;
        }
        step_template.set_item(pyo3::intern!(py, "episode_index"), py.None())?;
        step_template.set_item(pyo3::intern!(py, "step_index"), py.None())?;
        Ok(Plan { fields, descrs, entries, step_template: step_template.unbind() })
    }
}

/// Which windows a batch holds.
pub enum Request {
    /// `n` steps (transitions) or windows (sequences) drawn from a seed.
    Sample { n: usize, seed: u64 },
    /// Step numbers (transitions) or window numbers (sequences) of the episode set.
    Numbers(Vec<i64>),
    /// (episode, step) pairs.
    Pairs(Vec<Window>),
    /// Steps `first .. first + n` of the episode set, read in bulk (transitions only).
    Range { first: u64, n: usize },
}

impl Request {
    fn len(&self) -> usize {
        match self {
            Request::Sample { n, .. } => *n,
            Request::Numbers(v) => v.len(),
            Request::Pairs(v) => v.len(),
            Request::Range { n, .. } => *n,
        }
    }

    /// How a window that falls in a damaged episode is replaced (lenient reads): a sample's
    /// from its seed, a numbered one's from its number; one asked for by (episode, step) is not.
    fn redraw(&self) -> Redraw {
        match self {
            Request::Sample { seed, .. } => Redraw::Seed(*seed),
            Request::Numbers(v) => Redraw::Numbers(v.iter().map(|&i| i as u64).collect()),
            Request::Pairs(_) => Redraw::Never,
            Request::Range { first, n } => Redraw::Numbers((*first..*first + *n as u64).collect()),
        }
    }
}

/// How windows are shaped: transitions (one step, no window axis) or sequences of `length`.
#[derive(Clone, Copy)]
pub struct Shape {
    pub length: usize,
    pub sequence: bool,
    pub pad: bool,
}

impl Shape {
    /// One step a row: transitions.
    pub const TRANSITION: Shape = Shape { length: 1, sequence: false, pad: false };
}

fn windows_of(set: &EpisodeSet, request: Request, shape: Shape) -> trajcore_core::Result<Vec<Window>> {
    let length = shape.length as u64;
    let number = |i: i64, total: u64, what: &str| -> trajcore_core::Result<u64> {
        let n = i64::try_from(total).unwrap_or(i64::MAX);
        let k = if i < 0 { i + n } else { i };
        if k < 0 || k >= n {
            return Err(Error::Invalid(format!("{what} {i} is out of range ({total} {what}s)")));
        }
        Ok(k as u64)
    };
    match request {
        Request::Pairs(v) => Ok(v),
        Request::Range { first, n } => Ok(set
            .runs(first, n as u64)?
            .iter()
            .flat_map(|r| (r.start..r.start + r.steps).map(|start| Window { episode: r.episode, start }))
            .collect()),
        Request::Sample { n, seed } if shape.sequence => sample_windows(set, n, length, shape.pad, seed),
        Request::Sample { n, seed } => sample_steps(set, n, seed),
        Request::Numbers(v) if shape.sequence => {
            let windows = set.windows(length, shape.pad)?;
            v.into_iter()
                .map(|i| {
                    let (episode, start) = set.locate_window(&windows, number(i, windows.num_windows(), "window")?)?;
                    Ok(Window { episode, start })
                })
                .collect()
        }
        Request::Numbers(v) => {
            let steps = v.into_iter().map(|i| number(i, set.num_steps(), "step")).collect::<Result<Vec<_>, _>>()?;
            Ok(set.locate_steps(&steps)?.into_iter().map(|(episode, start)| Window { episode, start }).collect())
        }
    }
}

/// Writes `src` into uninitialized bytes of the same length.
fn put(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d = MaybeUninit::new(s));
}

enum Buffer<'py> {
    Array(Bound<'py, PyUntypedArray>),
    Strings(Vec<String>),
}

fn build<'py>(py: Python<'py>, node: &Layout, leaves: &[Bound<'py, PyAny>]) -> PyResult<Bound<'py, PyAny>> {
    Ok(match node {
        Layout::Leaf(i) => leaves[*i].clone(),
        Layout::Dict(items) => {
            let d = PyDict::new(py);
            for (key, _, sub) in items {
                d.set_item(key.bind(py), build(py, sub, leaves)?)?;
            }
            d.into_any()
        }
        Layout::Tuple(items) => {
            PyTuple::new(py, items.iter().map(|t| build(py, t, leaves)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
    })
}

/// A batch: `[B, ...]` per field for transitions, `[B, L, ...]` for sequences; and the damage
/// found (lenient reads leave the episodes it affects out, see `Dataset::gather_lenient`).
pub fn batch<'py>(
    py: Python<'py>,
    lock: &RwLock<Dataset>,
    plan: &Plan,
    set: Option<&EpisodeSet>,
    request: Request,
    shape: Shape,
) -> PyResult<(Bound<'py, PyDict>, Vec<Damage>)> {
    let b = request.len();
    let l = shape.length;
    let lead: Vec<usize> = if shape.sequence { vec![b, l] } else { vec![b] };
    // Every numpy output in one allocation (see `arrays::arena`): the fields stored fixed-size,
    // then episode_index, step_index and (padded sequences) mask.
    let mut parts = Vec::with_capacity(plan.fields.len() + 3);
    for (field, d) in plan.fields.iter().zip(&plan.descrs) {
        if let Some(d) = d {
            parts.push((d.bind(py).clone(), lead.iter().chain(&field.shape).copied().collect::<Vec<_>>()));
        }
    }
    let i64_descr = descr(py, DType::I64)?;
    parts.push((i64_descr.clone(), vec![b]));
    parts.push((i64_descr, lead.clone()));
    let padded = shape.sequence && shape.pad;
    if padded {
        parts.push((descr(py, DType::Bool)?, lead.clone()));
    }
    let Arena { buffer: mut memory_owner, mut views, ranges } = arena(py, &parts)?;
    let mut strings: Vec<Vec<String>> =
        plan.descrs.iter().filter(|d| d.is_none()).map(|_| vec![String::new(); b * l]).collect();
    let damage;
    {
        // SAFETY: the arena was created above and is not visible to Python code until this
        // function returns; this is the only slice of it. Its parts are written whole: the
        // fields by the gather (or it fails, and the arena is dropped unseen), the index arrays
        // and the mask below.
        let memory = unsafe { uninit_mut(&mut memory_owner) };
        let mut parts_out: Vec<&mut [MaybeUninit<u8>]> = Vec::with_capacity(ranges.len());
        let mut rest = memory;
        let mut at = 0;
        for r in &ranges {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - at);
            let (part, tail) = tail.split_at_mut(r.len());
            parts_out.push(part);
            rest = tail;
            at = r.end;
        }
        let mut parts_out = parts_out.into_iter();
        let mut strings_out = strings.iter_mut();
        let mut outs: Vec<Out<'_>> = plan
            .descrs
            .iter()
            .map(|d| match d {
                Some(_) => Out::Uninit(parts_out.next().expect("a part per fixed field")),
                None => Out::Strings(strings_out.next().expect("a list per str field")),
            })
            .collect();
        let episodes_out = parts_out.next().expect("episode_index part");
        let steps_out = parts_out.next().expect("step_index part");
        let mask_out = parts_out.next();
        damage = py
            .detach(|| -> trajcore_core::Result<Vec<Damage>> {
                let guard = lock.read().unwrap_or_else(|p| p.into_inner());
                let ds: &Dataset = &guard;
                let set = set.unwrap_or_else(|| ds.all_episodes());
                if let (Request::Range { first, n }, false) = (&request, shape.sequence) {
                    let indexes = IndexOut { episodes: episodes_out, steps: steps_out };
                    let (_, found) = ds.read_range(set, &plan.fields, *first, *n as u64, &mut outs, Some(indexes))?;
                    return Ok(found);
                }
                let redraw = request.redraw();
                let mut windows = windows_of(set, request, shape)?;
                let mut bools = mask_out.as_ref().map(|m| vec![false; m.len()]);
                let kind = WindowKind { length: l, sequence: shape.sequence, pad: shape.pad };
                let found =
                    ds.gather_lenient(set, &redraw, kind, &plan.fields, &mut windows, &mut outs, bools.as_deref_mut())?;
                // The windows read (redrawn ones included) are what the indexes report.
                for (i, w) in windows.iter().enumerate() {
                    put(&mut episodes_out[i * 8..i * 8 + 8], &(w.episode as i64).to_le_bytes());
                    for j in 0..l {
                        let at = (i * l + j) * 8;
                        put(&mut steps_out[at..at + 8], &((w.start + j as u64) as i64).to_le_bytes());
                    }
                }
                if let (Some(m), Some(b)) = (mask_out, bools) {
                    m.iter_mut().zip(b).for_each(|(m, b)| *m = MaybeUninit::new(b as u8));
                }
                Ok(found)
            })
            .py_err(py)?;
    }
    let mask = padded.then(|| views.pop().expect("the mask view"));
    let step_index = views.pop().expect("the step_index view");
    let episode_index = views.pop().expect("the episode_index view");
    let mut views = views.into_iter();
    let mut strings = strings.into_iter();
    let buffers: Vec<Buffer<'py>> = plan
        .descrs
        .iter()
        .map(|d| match d {
            Some(_) => Buffer::Array(views.next().expect("a view per fixed field")),
            None => Buffer::Strings(strings.next().expect("a list per str field")),
        })
        .collect();
    let leaves: Vec<Bound<'py, PyAny>> = buffers
        .into_iter()
        .map(|buf| match buf {
            Buffer::Array(a) => Ok(a.into_any()),
            Buffer::Strings(v) if shape.sequence => {
                let rows: Vec<Bound<'py, PyList>> =
                    v.chunks(l.max(1)).map(|c| PyList::new(py, c)).collect::<PyResult<_>>()?;
                Ok(PyList::new(py, rows)?.into_any())
            }
            Buffer::Strings(v) => Ok(PyList::new(py, v)?.into_any()),
        })
        .collect::<PyResult<_>>()?;
    let out = PyDict::new(py);
    for (key, node) in &plan.entries {
        out.set_item(key.bind(py), build(py, node, &leaves)?)?;
    }
    out.set_item(pyo3::intern!(py, "episode_index"), episode_index)?;
    out.set_item(pyo3::intern!(py, "step_index"), step_index)?;
    if let Some(m) = mask {
        out.set_item(pyo3::intern!(py, "mask"), m)?;
    }
    Ok((out, damage))
}

/// One step, without a batch axis: arrays of the row shape, numpy scalars for scalar columns,
/// str for str columns; `episode_index` and `step_index` as int.
pub fn one_step<'py>(
    py: Python<'py>,
    lock: &RwLock<Dataset>,
    plan: &Plan,
    set: Option<&EpisodeSet>,
    number: i64,
) -> PyResult<Bound<'py, PyDict>> {
    enum One<'py> {
        Array(Bound<'py, PyUntypedArray>),
        /// A range of `scalars`.
        Scalar(usize, usize),
        Strings(Vec<String>),
    }
    // Scalar columns' bytes share one buffer: a step is a handful of small allocations at most.
    let mut scalars: Vec<u8> = Vec::new();
    let mut buffers = Vec::with_capacity(plan.fields.len());
    for (field, d) in plan.fields.iter().zip(&plan.descrs) {
        buffers.push(match (d, field.row_bytes) {
            (Some(d), _) if !field.shape.is_empty() => One::Array(empty(py, d.bind(py), &field.shape)?),
            (Some(_), Some(rb)) => {
                scalars.resize(scalars.len() + rb, 0);
                One::Scalar(scalars.len() - rb, scalars.len())
            }
            _ => One::Strings(vec![String::new()]),
        });
    }
    let mut located = (0usize, 0u64);
    {
        let mut rest: &mut [u8] = &mut scalars;
        // SAFETY: as in `batch`: fresh arrays, one slice each, not yet visible to Python, and
        // written whole by the gather (or dropped unseen).
        let mut outs: Vec<Out<'_>> = buffers
            .iter_mut()
            .map(|buf| match buf {
                One::Array(a) => Out::Uninit(unsafe { uninit_mut(a) }),
                One::Scalar(from, to) => {
                    let (mine, tail) = std::mem::take(&mut rest).split_at_mut(*to - *from);
                    rest = tail;
                    Out::Fixed(mine)
                }
                One::Strings(v) => Out::Strings(v),
            })
            .collect();
        py.detach(|| -> trajcore_core::Result<()> {
            let guard = lock.read().unwrap_or_else(|p| p.into_inner());
            let ds: &Dataset = &guard;
            let set = set.unwrap_or_else(|| ds.all_episodes());
            let total = set.num_steps();
            let step =
                if number < 0 { number.checked_add(i64::try_from(total).unwrap_or(i64::MAX)) } else { Some(number) };
            let step = step.and_then(|s| u64::try_from(s).ok()).filter(|&s| s < total).ok_or_else(|| {
                Error::Invalid(format!("step {number} is out of range (the episodes hold {total} steps)"))
            })?;
            let (episode, start) = set.locate_step(step)?;
            located = (episode, start);
            // One step asked for by number: a damaged episode is an error (noted for sampling).
            let kind = WindowKind { length: 1, sequence: false, pad: false };
            let mut windows = [Window { episode, start }];
            ds.gather_lenient(set, &Redraw::Never, kind, &plan.fields, &mut windows, &mut outs, None).map(drop)
        })
        .map_err(|e| match e {
            Error::Invalid(m) if m.contains("out of range") => pyo3::exceptions::PyIndexError::new_err(m),
            e => to_py(py, e),
        })?;
    }
    let leaves: Vec<Bound<'py, PyAny>> = buffers
        .into_iter()
        .zip(&plan.descrs)
        .map(|(buf, d)| match buf {
            One::Array(a) => Ok(a.into_any()),
            One::Scalar(from, to) => scalar(py, d.as_ref().expect("fixed-size").bind(py), &scalars[from..to]),
            One::Strings(mut v) => Ok(PyString::new(py, &v.pop().unwrap_or_default()).into_any()),
        })
        .collect::<PyResult<_>>()?;
    let out = plan.step_template.bind(py).copy()?;
    for (key, node) in &plan.entries {
        out.set_item(key.bind(py), build(py, node, &leaves)?)?;
    }
    out.set_item(pyo3::intern!(py, "episode_index"), located.0)?;
    out.set_item(pyo3::intern!(py, "step_index"), located.1)?;
    Ok(out)
}
