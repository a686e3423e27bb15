//! Reads one Python value for a column of fixed type, the way the core's `Fit` says (str rows,
//! a number, or an array: borrowed when it is exactly the column's rows), and hands it to
//! `Fit`, which decides whether it fits (shape, cast, range, bounds) and its bytes. Errors name
//! the column.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use trajcore_core::writer::entries::fit::{Fit, Items, Number, Reading};
use trajcore_core::writer::entries::values::{put_str, scalar_wrong, shape_text, ScalarMisfit};
use trajcore_core::{ColumnSpec, DType};

use crate::collect::{borrow_array, borrow_data, Collector, Src};
use crate::errors::schema_error;
use crate::exact_array::ExactArray;

/// A column as the step path needs it.
pub struct ColInfo {
    pub id: u32,
    pub name: String,
    /// Its type, rows and bounds, as the core fits values to them.
    pub fit: Fit,
    pub descr: Option<Py<PyArrayDescr>>,
    /// The arrays whose bytes are the rows as they are (none for str columns).
    pub exact: Option<ExactArray>,
}

impl ColInfo {
    pub fn new(py: Python<'_>, spec: &ColumnSpec) -> PyResult<Self> {
        let fit = Fit::of(spec).map_err(|e| crate::errors::to_py(py, e))?;
        let descr = match fit.dtype {
            DType::Utf8 => None,
            d => Some(PyArrayDescr::new(py, d.name())?.unbind()),
        };
        let exact = descr
            .as_ref()
            .zip(fit.dtype.size())
            .map(|(d, size)| ExactArray::new(py, d.clone_ref(py), &fit.shape, size));
        Ok(ColInfo { id: spec.id, name: spec.name.clone(), fit, descr, exact })
    }

    /// The error for a value that does not fit, naming the column.
    fn refused(&self, py: Python<'_>, why: String) -> PyErr {
        schema_error(py, &self.name, why)
    }
}

/// Encodes `value` for `col`: `rows` is the env count for batched values, `None` for one row.
pub fn put_value(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> PyResult<Src> {
    let src = match col.exact.as_ref().and_then(|e| e.data(value, rows)) {
        Some((data, len)) => borrow_data(coll, value, data, len),
        None => match (col.fit.reading(rows), value.cast::<PyUntypedArray>()) {
            (Reading::Strs, _) => strings(value, col, rows, coll)?,
            (_, Ok(array)) => put_array(array, col, rows, coll)?,
            (Reading::Number, Err(_)) => number(value, col, coll)?,
            (Reading::Array, Err(_)) => put_array(&as_array(value, col, rows)?, col, rows, coll)?,
        },
    };
    col.fit.check_bounds(coll.slice(src), rows).map_err(|why| col.refused(value.py(), why))?;
    Ok(src)
}

/// A boolean mask over `n` envs as one byte per env: borrowed when it is already a contiguous
/// bool ndarray of that length, converted otherwise. `what` names it in the error.
pub fn mask_bytes(
    py: Python<'_>,
    mask: &Bound<'_, PyAny>,
    n: usize,
    what: &str,
    coll: &mut Collector,
) -> PyResult<Src> {
    // Bool arrays over the envs, as masks come (gymnasium's `_key` arrays, reset masks).
    static ROWS: PyOnceLock<ExactArray> = PyOnceLock::new();
    let rows = ROWS.get_or_init(py, || ExactArray::new(py, PyArrayDescr::of::<bool>(py).unbind(), &[], 1));
    if let Some((data, len)) = rows.data(mask, Some(n)) {
        return Ok(borrow_data(coll, mask, data, len));
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
fn as_array<'py>(
    value: &Bound<'py, PyAny>,
    col: &ColInfo,
    rows: Option<usize>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = value.py();
    let array = py.import("numpy")?.call_method1("asarray", (value,)).map_err(|e| {
        let expected = shape_text(rows, &col.fit.shape);
        col.refused(py, format!("expected an array of shape {expected}, got {}: {e}", type_name(value)))
    })?;
    let array = array.cast_into::<PyUntypedArray>()?;
    if array.dtype().kind() == b'O' {
        return Err(col.refused(py, format!("expected numbers, got {}", type_name(value))));
    }
    Ok(array)
}

/// An array's items in C order and native byte order (borrowed when they are so already),
/// put into the column by the core.
fn put_array(
    array: &Bound<'_, PyUntypedArray>,
    col: &ColInfo,
    rows: Option<usize>,
    coll: &mut Collector,
) -> PyResult<Src> {
    let py = array.py();
    let target = col.descr.as_ref().expect("fixed-size column").bind(py);
    let dtype = array.dtype();
    // numpy's built-in descriptors are singletons: pointer equality is the common, cheap case.
    let same = dtype.as_ptr() == target.as_ptr() || dtype.is_equiv_to(target);
    let mut array = array.clone();
    if !array.is_c_contiguous() || dtype.is_native_byteorder() == Some(false) {
        let native = dtype.call_method1("newbyteorder", ("=",))?;
        array = py.import("numpy")?.call_method1("ascontiguousarray", (array, native))?.cast_into()?;
    }
    // Its text only for a message of the cast (not asked for the column's own dtype).
    let shown = if same { None } else { Some(dtype.str()?) };
    let shown = shown.as_ref().map_or(Ok(""), |s| s.to_str())?;
    let (kind, itemsize, data) = (dtype.kind(), dtype.itemsize(), borrow_array(coll, &array));
    let items = Items { kind, itemsize, shown, same, shape: array.shape(), data };
    col.fit.items(coll, rows, items).map_err(|why| col.refused(py, why))
}

/// A one-row value of a scalar column that is no array: a number, read once and put by the
/// core; a numpy scalar, as numpy's 0-d array of it.
fn number(value: &Bound<'_, PyAny>, col: &ColInfo, coll: &mut Collector) -> PyResult<Src> {
    let py = value.py();
    let exact_float = value.is_exact_instance_of::<PyFloat>();
    let is_int = !exact_float && (value.is_exact_instance_of::<PyInt>() || value.is_instance_of::<PyBool>());
    if !(is_int || exact_float) {
        if let Some(src) = numpy_scalar(value, col, coll) {
            return Ok(src);
        }
        let np = py.import("numpy")?;
        if value.is_instance(&np.getattr("generic")?)? {
            return put_array(&np.call_method1("asarray", (value,))?.cast_into()?, col, None, coll);
        }
    }
    // Python's own int and float by their value; another object (an IntEnum, a Decimal) as an
    // integer and as a float where it reads so.
    let int = if exact_float { None } else { value.extract().ok() };
    let float = match (is_int, int) {
        (true, Some(v)) => Some(v as f64),
        _ => value.extract().ok(),
    };
    let mut misfit = None;
    let is_float = exact_float || value.is_instance_of::<PyFloat>();
    let src = coll.own_with(|out| misfit = col.fit.number(Number { int, float, is_float }, out).err());
    match misfit {
        None => Ok(src),
        Some(ScalarMisfit::Wrong(what)) => {
            let text = value.repr().map(|r| r.to_string()).unwrap_or_default();
            Err(col.refused(py, scalar_wrong(col.fit.dtype, what, &type_name(value), text)))
        }
        Some(ScalarMisfit::Value(why)) => Err(col.refused(py, why)),
    }
}

/// A numpy scalar of the column's own type (an env's `np.int64` action, `np.float32` info),
/// read as a number without a 0-d array: every value of it fits. `None` for anything else (the
/// caller goes through numpy, which checks casts).
fn numpy_scalar(value: &Bound<'_, PyAny>, col: &ColInfo, coll: &mut Collector) -> Option<Src> {
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
    let mut fits = false;
    let src = coll.own_with(|out| fits = col.fit.number(number, out).is_ok());
    fits.then_some(src)
}

/// Str rows as `u32 len` + UTF-8 bytes; batched values are any sequence of str (or None
/// where a mask says the row is missing, which then reads as an empty string).
fn strings(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> PyResult<Src> {
    let py = value.py();
    let one = |v: &Bound<'_, PyAny>, out: &mut Vec<u8>| -> PyResult<()> {
        let text = match v.cast::<PyString>() {
            // A lone surrogate cannot be UTF-8: to_str fails with a clear error.
            Ok(s) => s.to_str()?,
            Err(_) if v.is_none() => "",
            Err(_) => return Err(col.refused(py, format!("expected str, got {}", type_name(v)))),
        };
        put_str(text, out).map_err(|why| col.refused(py, why))
    };
    let mut result = Ok(());
    let src = coll.own_with(|out| {
        result = match rows {
            None => one(value, out),
            Some(n) => (|| {
                let len = value
                    .len()
                    .map_err(|_| col.refused(py, format!("expected {n} strings, got {}", type_name(value))))?;
                if len != n {
                    return Err(col.refused(py, format!("expected {n} strings, got {len}")));
                }
                value.try_iter()?.try_for_each(|item| one(&item?, out))
            })(),
        }
    });
    result.map(|()| src)
}

pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
}
