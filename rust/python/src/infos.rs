//! Columns made on first sight: info entries (observation timeline) and custom per-step data
//! (step timeline). Supported values are numbers, bools, strings and fixed-shape arrays; nested
//! dicts become nested paths. Anything else is skipped with one `TrajcoreWarning` per key, and so
//! is a value that no longer fits the column its key got (the row then reads as missing).

use std::collections::{HashMap, HashSet};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use trajcore_core::writer::{EntryKind, NewColumn, Recorder, Slot};
use trajcore_core::{CodecSpec, DType, Timeline};

use crate::collect::{Collector, Src};
use crate::errors::{warn, IntoPy};
use crate::values::{mask_bytes, put_value, type_name, ColInfo};

/// Escapes a key so '/' can separate nesting levels in column names.
pub fn escape_key(key: &str) -> String {
    key.replace('%', "%25").replace('/', "%2F")
}

pub struct DynamicColumns {
    prefix: &'static str,
    timeline: Timeline,
    codec: CodecSpec,
    columns: HashMap<String, Option<ColInfo>>,
    warned: HashSet<String>,
}

impl DynamicColumns {
    pub fn new(prefix: &'static str, timeline: Timeline, codec: CodecSpec) -> Self {
        DynamicColumns { prefix, timeline, codec, columns: HashMap::new(), warned: HashSet::new() }
    }

    fn skip(&mut self, py: Python<'_>, path: &str, why: String) -> PyResult<()> {
        if self.warned.insert(path.to_string()) {
            warn(py, &format!("trajcore: {} entry '{}' is not recorded: {why}", self.prefix, path))?;
        }
        Ok(())
    }

    /// Adds entries for every supported value of `dict` (infos, or vector infos with `_key` masks).
    #[allow(clippy::too_many_arguments)]
    pub fn put_dict(
        &mut self,
        py: Python<'_>,
        dict: &Bound<'_, PyDict>,
        path: &str,
        rows: Option<usize>,
        slot: Slot,
        recorder: &mut Recorder,
        coll: &mut Collector,
    ) -> PyResult<()> {
        for (key, value) in dict.iter() {
            let key = match key.cast::<PyString>() {
                Ok(s) => s.to_str()?.to_owned(),
                Err(_) => key.str()?.to_str()?.to_owned(),
            };
            let batched = rows.is_some();
            if batched && key.starts_with('_') {
                continue; // a mask, read with its key
            }
            if batched && path.is_empty() && (key == "final_obs" || key == "final_info") {
                continue; // same-step autoreset data, taken apart by the recorder
            }
            let sub = if path.is_empty() { escape_key(&key) } else { format!("{path}/{}", escape_key(&key)) };
            if let Ok(inner) = value.cast::<PyDict>() {
                self.put_dict(py, inner, &sub, rows, slot, recorder, coll)?;
                continue;
            }
            let mask = match rows {
                Some(n) => match dict.get_item(format!("_{key}"))? {
                    Some(m) => Some(mask_bytes(py, &m, n, "an info mask", coll)?),
                    None => None,
                },
                None => None,
            };
            self.put_one(py, &sub, &value, rows, mask, slot, recorder, coll)?;
        }
        Ok(())
    }

    /// One value under `path` (without the prefix).
    #[allow(clippy::too_many_arguments)]
    pub fn put_one(
        &mut self,
        py: Python<'_>,
        path: &str,
        value: &Bound<'_, PyAny>,
        rows: Option<usize>,
        mask: Option<Src>,
        slot: Slot,
        recorder: &mut Recorder,
        coll: &mut Collector,
    ) -> PyResult<()> {
        if !self.columns.contains_key(path) {
            let made = match infer(py, value, rows, mask.map(|m| coll.slice(m).to_vec()))? {
                Ok((dtype, shape)) => {
                    let name = format!("{}/{path}", self.prefix);
                    let new = NewColumn {
                        name: name.clone(),
                        dtype,
                        shape: shape.iter().map(|&d| d as u64).collect(),
                        timeline: self.timeline,
                        masked: true,
                        codec: if dtype == DType::Utf8 {
                            CodecSpec { delta: false, ..self.codec.clone() }
                        } else {
                            self.codec.clone()
                        },
                    };
                    let id = recorder.add_column(new).py_err(py)?;
                    Some(ColInfo::new(py, recorder.column(id))?)
                }
                Err(why) => {
                    self.skip(py, path, why)?;
                    None
                }
            };
            self.columns.insert(path.to_string(), made);
        }
        let Some(col) = self.columns.get(path).and_then(|c| c.as_ref()) else { return Ok(()) };
        match put_value(py, value, col, rows, coll) {
            Ok(data) => {
                let kind = if mask.is_some() { EntryKind::Masked } else { EntryKind::Dense };
                coll.push(col.id, kind, slot, 0, mask, data);
                Ok(())
            }
            Err(e) if e.is_instance(py, crate::errors::classes(py).schema.bind(py)) => {
                let why = e.value(py).to_string();
                self.skip(py, path, format!("{why} (its first value set the column's type)"))
            }
            Err(e) => Err(e),
        }
    }
}

/// The dtype and per-row shape a first value gives its column, or why it cannot be recorded.
fn infer(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    rows: Option<usize>,
    mask: Option<Vec<u8>>,
) -> PyResult<Result<(DType, Vec<usize>), String>> {
    let np = py.import("numpy")?;
    let of_array = |array: &Bound<'_, PyUntypedArray>,
                    batched: bool|
     -> PyResult<Result<(DType, Vec<usize>), String>> {
        let shape = array.shape();
        let row_shape = if batched { shape.get(1..).unwrap_or(&[]).to_vec() } else { shape.to_vec() };
        let dtype = array.dtype();
        if dtype.kind() == b'U' {
            return Ok(if row_shape.is_empty() {
                Ok((DType::Utf8, vec![]))
            } else {
                Err("arrays of strings are not supported".into())
            });
        }
        if dtype.kind() == b'O' && batched {
            // Vector infos of strings are object arrays (None where the env had no entry).
            let first = (0..shape[0]).find(|&i| mask.as_ref().is_none_or(|m| m.get(i) == Some(&1)));
            let item = match first {
                Some(i) => Some(array.get_item(i)?),
                None => None,
            };
            return Ok(match item {
                Some(item) if item.is_instance_of::<PyString>() && row_shape.is_empty() => Ok((DType::Utf8, vec![])),
                Some(item) => Err(format!("values of type {} are not supported", type_name(&item))),
                None => Err("no env had a value".into()),
            });
        }
        let name = dtype.str()?.to_string();
        let canonical: String = np.call_method1("dtype", (dtype,))?.getattr("name")?.extract()?;
        match DType::from_name(&canonical) {
            Ok(d) if d != DType::Utf8 => Ok(Ok((d, row_shape))),
            _ => Ok(Err(format!("dtype {name} is not supported"))),
        }
    };
    match rows {
        Some(n) => {
            let array = match value.cast::<PyUntypedArray>() {
                Ok(a) => a.clone(),
                Err(_) => np.call_method1("asarray", (value,))?.cast_into::<PyUntypedArray>()?,
            };
            if array.shape().first() != Some(&n) {
                return Ok(Err(format!("expected one value per env ({n}), got shape {:?}", array.shape())));
            }
            of_array(&array, true)
        }
        None => {
            if value.is_instance_of::<PyBool>() {
                return Ok(Ok((DType::Bool, vec![])));
            }
            if value.is_exact_instance_of::<PyInt>() {
                return Ok(Ok((DType::I64, vec![])));
            }
            if value.is_exact_instance_of::<PyFloat>() {
                return Ok(Ok((DType::F64, vec![])));
            }
            if value.is_instance_of::<PyString>() {
                return Ok(Ok((DType::Utf8, vec![])));
            }
            let numeric = value.is_instance_of::<PyList>()
                || value.is_instance_of::<PyTuple>()
                || value.is_instance(&np.getattr("generic")?)?
                || value.is_instance_of::<PyInt>()
                || value.is_instance_of::<PyFloat>();
            if let Ok(array) = value.cast::<PyUntypedArray>() {
                return of_array(array, false);
            }
            if numeric {
                if let Ok(array) = np.call_method1("asarray", (value,)) {
                    if let Ok(array) = array.cast::<PyUntypedArray>() {
                        if array.dtype().kind() != b'O' {
                            return of_array(array, false);
                        }
                    }
                }
            }
            Ok(Err(format!("values of type {} are not supported", type_name(value))))
        }
    }
}
