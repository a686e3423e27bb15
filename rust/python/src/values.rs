//! Reads a Python value once as a core `Input` (`read`): for a column, the way its `Fit` says
//! (str rows, a number, or an array: borrowed when it is exactly the column's rows), or for the
//! column it would make. The core decides everything after: whether it fits (shape, cast,
//! range, bounds) and its bytes (`Fit::put`), the column it makes or widens (`DynamicColumns`).
//! Errors name the column. The choices left here are made on Python types and numpy's own
//! conversions, which the core cannot see; each says so where it is made.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyModule, PyString, PyTuple};
use pyo3::PyTypeInfo;
use trajcore_core::writer::entries::fit::{Fit, Reading};
use trajcore_core::writer::entries::value::{Array, Input, Like, Number};
use trajcore_core::writer::entries::values::{first_present, put_str, scalar_wrong, shape_text, Misfit};
use trajcore_core::writer::Recorder;
use trajcore_core::DType;

use crate::collect::{borrow_array, Collector, Src};
use crate::errors::schema_error;

/// A column as the step path needs it.
pub struct ColInfo {
    pub id: u32,
    pub name: String,
    /// Its type, rows and bounds, as the core fits values to them.
    pub fit: Fit,
    pub descr: Option<Py<PyArrayDescr>>,
}

impl ColInfo {
    pub fn new(py: Python<'_>, recorder: &Recorder, id: u32) -> PyResult<Self> {
        let fit = recorder.fit(id).map_err(|e| crate::errors::to_py(py, e))?;
        let descr = match fit.dtype {
            DType::Utf8 => None,
            d => Some(PyArrayDescr::new(py, d.name())?.unbind()),
        };
        Ok(ColInfo { id, name: recorder.column(id).name.clone(), fit, descr })
    }
}

/// Encodes `value` for `col`: `rows` is the env count for batched values, `None` for one row.
pub fn put_value(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> PyResult<Src> {
    let misfit = |misfit| schema_error(value.py(), &col.name, why(value, col.fit.dtype, misfit));
    // The usual value (every step's arrays) without an `Input`: its bytes are the rows.
    if let Some(src) = exact(value, col, rows, coll) {
        return col.fit.check_bounds(coll.slice(src), rows).map(|()| src).map_err(|why| misfit(Misfit::Value(why)));
    }
    let input = read_for(value, col, rows, coll)?;
    col.fit.put(coll, rows, &input).map_err(misfit)
}

/// `misfit` of `value` into a column of `dtype`, in words: a value that is not what the column
/// takes is named by its type and text.
pub fn why(value: &Bound<'_, PyAny>, dtype: DType, misfit: Misfit) -> String {
    match misfit {
        Misfit::Wrong(what) => {
            let text = value.repr().map(|r| r.to_string()).unwrap_or_default();
            scalar_wrong(dtype, what, &type_name(value), text)
        }
        Misfit::Value(why) => why,
    }
}

/// `value` as the exact rows of `col`, borrowed, when it is an ndarray of them.
#[inline]
pub fn exact(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> Option<Src> {
    let array = exact_rows(value, col.descr.as_ref()?, &col.fit.shape, rows)?;
    Some(borrow_array(coll, array))
}

/// `value` as an ndarray of exactly `descr`, C-contiguous, of `rows` rows of `row_shape`
/// (`None`: one row, shaped `row_shape` itself): the usual value, step after step, whose bytes
/// are borrowed as they are. Anything else (a subclass, another descriptor, a strided view, a
/// scalar) gets `None` and goes the general way, which knows every case. numpy's built-in
/// descriptors are singletons, so an env's arrays of the column's dtype carry this very object.
#[inline]
fn exact_rows<'a, 'py>(
    value: &'a Bound<'py, PyAny>,
    descr: &Py<PyArrayDescr>,
    row_shape: &[usize],
    rows: Option<usize>,
) -> Option<&'a Bound<'py, PyUntypedArray>> {
    // numpy's ndarray type, looked up once: numpy's own check looks it up in its API table per value.
    static NDARRAY: PyOnceLock<usize> = PyOnceLock::new();
    let ndarray = *NDARRAY.get_or_init(value.py(), || PyUntypedArray::type_object_raw(value.py()) as usize);
    if value.get_type_ptr() as usize != ndarray {
        return None;
    }
    // SAFETY: `value`'s type is numpy's ndarray itself, so it is a `PyUntypedArray`.
    let array = unsafe { value.cast_unchecked::<PyUntypedArray>() };
    let (shape, lead) = (array.shape(), usize::from(rows.is_some()));
    let fits = array.dtype().is(descr)
        && array.is_c_contiguous()
        && shape.len() == lead + row_shape.len()
        && rows.is_none_or(|n| shape[0] == n)
        && shape[lead..] == *row_shape;
    fits.then_some(array)
}

/// `value` read once: for `col` as its `Fit` reads values (`rows`: the env count of a batched
/// value, `None` for one row), or for the column it would make (`None`; `mask`: which envs
/// have it). Arrays are borrowed into `coll`.
pub fn read(
    value: &Bound<'_, PyAny>,
    col: Option<&ColInfo>,
    rows: Option<usize>,
    mask: Option<Src>,
    coll: &mut Collector,
) -> PyResult<Input> {
    let Some(col) = col else { return first(value, rows, mask, coll) };
    if let Some(src) = exact(value, col, rows, coll) {
        return Ok(Input::Rows(src));
    }
    read_for(value, col, rows, coll)
}

/// `value` read for `col` as its `Fit` reads values, once it is known not to be the column's
/// exact rows (`exact`).
fn read_for(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> PyResult<Input> {
    match (col.fit.reading(rows), value.cast::<PyUntypedArray>()) {
        (Reading::Strs, _) => strings(value, rows, coll),
        (_, Ok(array)) => array_of(array, Some(col), coll),
        (Reading::Number, Err(_)) => number(value, col, coll),
        (Reading::Array, Err(_)) => as_array(value, col, rows, coll),
    }
}

/// A boolean mask over `n` envs as one byte per env: borrowed when it is already a contiguous
/// bool ndarray of that length, converted otherwise (numpy's truth of each item). `what` names
/// it in the error.
pub fn mask_bytes(
    py: Python<'_>,
    mask: &Bound<'_, PyAny>,
    n: usize,
    what: &str,
    coll: &mut Collector,
) -> PyResult<Src> {
    // Bool arrays over the envs, as masks come (gymnasium's `_key` arrays, reset masks).
    static BOOL: PyOnceLock<Py<PyArrayDescr>> = PyOnceLock::new();
    let bool_descr = BOOL.get_or_init(py, || PyArrayDescr::of::<bool>(py).unbind());
    if let Some(array) = exact_rows(mask, bool_descr, &[], Some(n)) {
        return Ok(borrow_array(coll, array));
    }
    let values: Vec<bool> = py
        .import("numpy")?
        .call_method1("asarray", (mask, "bool"))?
        .call_method0("ravel")?
        .call_method0("tolist")?
        .extract()?;
    if values.len() != n {
        return Err(crate::errors::invalid(py, format!("{what} has {} entries for {n} envs", values.len())));
    }
    Ok(coll.own_with(|out| out.extend(values.iter().map(|&b| b as u8))))
}

/// What numpy makes of a list, tuple or number for a column of arrays; refused unless numbers.
fn as_array(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> PyResult<Input> {
    let array = match numpy(value.py())?.call_method1("asarray", (value,)) {
        Ok(array) => array.cast_into::<PyUntypedArray>()?,
        Err(e) => {
            let expected = shape_text(rows, &col.fit.shape);
            return Ok(Input::Refused(format!("expected an array of shape {expected}, got {}: {e}", type_name(value))));
        }
    };
    if array.dtype().kind() == b'O' {
        return Ok(Input::Refused(format!("expected numbers, got {}", type_name(value))));
    }
    array_of(&array, Some(col), coll)
}

/// An array's items in C order and native byte order (borrowed when they are so already).
fn array_of(array: &Bound<'_, PyUntypedArray>, col: Option<&ColInfo>, coll: &mut Collector) -> PyResult<Input> {
    let py = array.py();
    let dtype = array.dtype();
    // numpy's built-in descriptors are singletons: pointer equality is the common, cheap case.
    let target = col.and_then(|c| c.descr.as_ref()).map(|d| d.bind(py));
    let own = target.is_some_and(|t| dtype.as_ptr() == t.as_ptr() || dtype.is_equiv_to(t));
    let mut array = array.clone();
    if !array.is_c_contiguous() || dtype.is_native_byteorder() == Some(false) {
        let native = dtype.call_method1("newbyteorder", ("=",))?;
        array = numpy(py)?.call_method1("ascontiguousarray", (array, native))?.cast_into()?;
    }
    // Its text only for a message (not asked for the column's own dtype).
    let shown = if own { String::new() } else { dtype.str()?.to_str()?.to_owned() };
    let (kind, itemsize, shape) = (dtype.kind(), dtype.itemsize(), array.shape().to_vec());
    Ok(Input::Array(Array { kind, itemsize, shown, shape, data: borrow_array(coll, &array) }))
}

/// Python's own bool, int or float, read as a number (numpy's weak types); `None` for another
/// value. Kept here: which Python type a value has (exactly, or a bool) is known only here.
fn weak(value: &Bound<'_, PyAny>) -> Option<Input> {
    let dtype = match () {
        () if value.is_exact_instance_of::<PyFloat>() => DType::F64,
        () if value.is_instance_of::<PyBool>() => DType::Bool,
        () if value.is_exact_instance_of::<PyInt>() => DType::I64,
        () => return None,
    };
    let int = if dtype == DType::F64 { None } else { value.extract().ok() };
    let float = int.map(|v| v as f64).or_else(|| value.extract().ok());
    Some(Input::Number(Number { int, float, is_float: dtype == DType::F64 }, Like::Weak(dtype)))
}

/// A one-row value of a scalar column that is no array: a number, read once; a numpy scalar, as
/// numpy's 0-d array of it; another object (an IntEnum, a Decimal) as an integer and as a
/// float where it reads so. Kept here: `Like` is the Python type's class, named once for the
/// core, which decides from it (`Input::column`, `Input::widening`, `Fit::number`).
fn number(value: &Bound<'_, PyAny>, col: &ColInfo, coll: &mut Collector) -> PyResult<Input> {
    if let Some(input) = weak(value).or_else(|| numpy_scalar(value, col)) {
        return Ok(input);
    }
    let np = numpy(value.py())?;
    if value.is_instance(&np.getattr("generic")?)? {
        return array_of(&np.call_method1("asarray", (value,))?.cast_into()?, Some(col), coll);
    }
    let (int, float) = (value.extract().ok(), value.extract().ok());
    let like = match () {
        () if value.is_instance_of::<PyInt>() => Like::Int,
        () if value.is_instance_of::<PyFloat>() => Like::Float,
        () => Like::Other,
    };
    Ok(Input::Number(Number { int, float, is_float: like == Like::Float }, like))
}

/// A numpy scalar of the column's own type (an env's `np.int64` action, `np.float32` info),
/// read as a number without a 0-d array: every value of it fits. `None` for anything else (the
/// caller goes through numpy, which checks casts). Kept here: which of the two to extract is
/// the Python call to make (a float column's scalar has no exact integer).
fn numpy_scalar(value: &Bound<'_, PyAny>, col: &ColInfo) -> Option<Input> {
    let descr = col.descr.as_ref()?.bind(value.py());
    if !value.get_type().is(descr.typeobj()) {
        return None;
    }
    let number = match col.fit.dtype {
        DType::F16 | DType::F32 | DType::F64 => {
            Number { int: None, float: Some(value.extract().ok()?), is_float: false }
        }
        _ => Number { int: Some(value.extract().ok()?), float: None, is_float: false },
    };
    Some(Input::Number(number, Like::Typed(col.fit.dtype)))
}

/// Str rows as `u32 len` + UTF-8 bytes; batched values are any sequence of str (or None
/// where a mask says the row is missing, which then reads as an empty string). Kept here: the
/// text is written straight into the collector as each item is read (no list of strings first);
/// the core decides what a str row is (`put_str`) and the column's fit of the result.
fn strings(value: &Bound<'_, PyAny>, rows: Option<usize>, coll: &mut Collector) -> PyResult<Input> {
    let one = |v: &Bound<'_, PyAny>, out: &mut Vec<u8>| -> PyResult<Result<(), String>> {
        let text = match v.cast::<PyString>() {
            // A lone surrogate cannot be UTF-8: to_str fails with a clear error.
            Ok(s) => s.to_str()?,
            Err(_) if v.is_none() => "",
            Err(_) => return Ok(Err(format!("expected str, got {}", type_name(v)))),
        };
        Ok(put_str(text, out))
    };
    let start = coll.bytes.len();
    let fits = match rows {
        None => one(value, &mut coll.bytes)?,
        Some(n) => match value.len() {
            Err(_) => Err(format!("expected {n} strings, got {}", type_name(value))),
            Ok(len) if len != n => Err(format!("expected {n} strings, got {len}")),
            Ok(_) => {
                let mut fits = Ok(());
                for item in value.try_iter()? {
                    fits = one(&item?, &mut coll.bytes)?;
                    if fits.is_err() {
                        break;
                    }
                }
                fits
            }
        },
    };
    Ok(fits.map_or_else(Input::Refused, |()| Input::Strs(Src::Own(start, coll.bytes.len() - start))))
}

/// What `value` is for the column it would make: Python's own scalars by their type, arrays by
/// their dtype, anything else by what numpy makes of it; `rows`, the env count of a batched
/// value; `mask`, which envs have it. Kept here: which values numpy is asked to convert (a list,
/// a number: yes; a set, a str: no) is a question of Python types; the column is the core's.
fn first(value: &Bound<'_, PyAny>, rows: Option<usize>, mask: Option<Src>, coll: &mut Collector) -> PyResult<Input> {
    if let Some(input) = weak(value) {
        return Ok(input);
    }
    if value.is_instance_of::<PyString>() {
        return Ok(Input::Str);
    }
    let np = numpy(value.py())?;
    let array = match (rows, value.cast::<PyUntypedArray>()) {
        (_, Ok(array)) => array.clone(),
        (Some(_), Err(_)) => match np.call_method1("asarray", (value,)) {
            Ok(a) => a.cast_into::<PyUntypedArray>()?,
            Err(e) => return Ok(Input::NotOverEnvs { type_name: type_name(value), error: e.to_string() }),
        },
        (None, Err(_)) => {
            let numeric = arrayish(value)? || value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>();
            let array = numeric.then(|| np.call_method1("asarray", (value,)).ok()).flatten();
            match array.and_then(|a| a.cast_into::<PyUntypedArray>().ok()) {
                Some(a) if a.dtype().kind() != b'O' => a,
                _ => return Ok(Input::Unsupported(type_name(value))),
            }
        }
    };
    if array.dtype().kind() == b'O' && rows.is_some() {
        let shape = array.shape().to_vec();
        let at = first_present(mask.map(|m| coll.slice(m)), shape.first().copied().unwrap_or(0));
        let first = at.map(|i| array.get_item(i)).transpose()?;
        let first = first.map(|item| (type_name(&item), item.is_instance_of::<PyString>()));
        return Ok(Input::Objects { shape, first });
    }
    array_of(&array, None, coll)
}

/// Whether `value` is a list, tuple, ndarray or numpy scalar: what numpy makes arrays of.
pub fn arrayish(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(value.is_instance_of::<PyList>()
        || value.is_instance_of::<PyTuple>()
        || value.cast::<PyUntypedArray>().is_ok()
        || value.is_instance(&numpy(value.py())?.getattr("generic")?)?)
}

fn numpy(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("numpy")
}

pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
}
