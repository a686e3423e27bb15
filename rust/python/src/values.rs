//! Turns one Python value into the bytes of one column: the array fast path (matching dtype and
//! shape, borrowed), arrays of another dtype (cast by the core's `cast_items`, which decides
//! what casts and names what does not), scalars, and strings. Errors name the column.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use trajcore_core::{ColumnSpec, DType};

use trajcore_core::writer::entries::bounds::IntBounds;
use trajcore_core::writer::entries::cast::cast_items;
use trajcore_core::writer::entries::values::{
    check_shape, put_scalar, put_str, scalar_read, scalar_wrong, shape_text, Scalar, ScalarMisfit, ScalarRead,
};

use crate::collect::{borrow_array, borrow_data, Collector, Src};
use crate::errors::schema_error;
use crate::exact_array::ExactArray;

/// A column as the step path needs it.
pub struct ColInfo {
    pub id: u32,
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub descr: Option<Py<PyArrayDescr>>,
    /// The arrays whose bytes are the rows as they are (none for str columns).
    pub exact: Option<ExactArray>,
    /// The values a discrete space's column takes (see the core's `bounds`).
    pub bounds: Option<IntBounds>,
}

impl ColInfo {
    pub fn new(py: Python<'_>, spec: &ColumnSpec) -> PyResult<Self> {
        let dtype = spec.dtype().map_err(|e| crate::errors::to_py(py, e))?;
        let descr = match dtype {
            DType::Utf8 => None,
            d => Some(PyArrayDescr::new(py, d.name())?.unbind()),
        };
        let shape: Vec<usize> = spec.shape.iter().map(|&d| d as usize).collect();
        let exact =
            descr.as_ref().zip(dtype.size()).map(|(d, size)| ExactArray::new(py, d.clone_ref(py), &shape, size));
        Ok(ColInfo { id: spec.id, name: spec.name.clone(), dtype, shape, descr, exact, bounds: None })
    }

    /// The error for a value that does not fit, naming the column.
    fn refused(&self, py: Python<'_>, why: String) -> PyErr {
        schema_error(py, &self.name, why)
    }
}

/// Encodes `value` for `col`: `rows` is the env count for batched values, `None` for one row.
/// A discrete space's values are checked against its bounds, however they came.
pub fn put_value(value: &Bound<'_, PyAny>, col: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> PyResult<Src> {
    let src = match col.exact.as_ref().and_then(|e| e.data(value, rows)) {
        Some((data, len)) => borrow_data(coll, value, data, len),
        None => Put { col, rows, coll: &mut *coll }.value(value)?,
    };
    if let Some(bounds) = &col.bounds {
        let elements = col.shape.iter().product();
        bounds
            .check(col.dtype, coll.slice(src), elements, rows.is_some())
            .map_err(|why| col.refused(value.py(), why))?;
    }
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

/// One value's way into a column, past the borrowed fast path.
struct Put<'a> {
    col: &'a ColInfo,
    /// The env count for batched values, `None` for one row.
    rows: Option<usize>,
    coll: &'a mut Collector,
}

impl Put<'_> {
    fn value(&mut self, value: &Bound<'_, PyAny>) -> PyResult<Src> {
        let (py, col, rows) = (value.py(), self.col, self.rows);
        if col.dtype == DType::Utf8 {
            return self.strings(value);
        }
        if let Ok(array) = value.cast::<PyUntypedArray>() {
            return self.array(array);
        }
        if rows.is_none() && col.shape.is_empty() {
            return self.scalar(value);
        }
        // Lists, tuples, numbers for batched columns: let numpy build the array, then check it.
        let array = py.import("numpy")?.call_method1("asarray", (value,)).map_err(|e| {
            let expected = shape_text(rows, &col.shape);
            col.refused(py, format!("expected an array of shape {expected}, got {}: {e}", type_name(value)))
        })?;
        let array = array.cast::<PyUntypedArray>()?;
        if array.dtype().kind() == b'O' {
            return Err(col.refused(py, format!("expected numbers, got {}", type_name(value))));
        }
        self.array(array)
    }

    fn array(&mut self, array: &Bound<'_, PyUntypedArray>) -> PyResult<Src> {
        let (py, col, rows) = (array.py(), self.col, self.rows);
        check_shape(rows, array.shape(), &col.shape).map_err(|why| col.refused(py, why))?;
        let target = col.descr.as_ref().expect("fixed-size column").bind(py);
        let dtype = array.dtype();
        // numpy's built-in descriptors are singletons: pointer equality is the common, cheap case.
        let same = dtype.as_ptr() == target.as_ptr() || dtype.is_equiv_to(target);
        let mut array = array.clone();
        if !array.is_c_contiguous() || dtype.is_native_byteorder() == Some(false) {
            // The items in C order and native byte order: what the column and the core's cast read.
            let native = dtype.call_method1("newbyteorder", ("=",))?;
            array = py.import("numpy")?.call_method1("ascontiguousarray", (array, native))?.cast_into()?;
        }
        let items = borrow_array(self.coll, &array);
        if same {
            return Ok(items);
        }
        let shown = dtype.str()?;
        let mut cast = Ok(());
        let src = self.coll.own_from(items, |data, out| {
            cast = cast_items(dtype.kind(), dtype.itemsize(), shown.to_str().unwrap_or("?"), col.dtype, data, out)
        });
        cast.map(|()| src).map_err(|why| col.refused(py, why))
    }

    fn scalar(&mut self, value: &Bound<'_, PyAny>) -> PyResult<Src> {
        let (py, col, dtype) = (value.py(), self.col, self.col.dtype);
        let wrong = |what: &str| {
            let text = value.repr().map(|r| r.to_string()).unwrap_or_default();
            col.refused(py, scalar_wrong(dtype, what, &type_name(value), text))
        };
        // numpy scalars other than Python's own types go through numpy: it knows their exact kind.
        let is_builtin = value.is_exact_instance_of::<PyFloat>()
            || value.is_exact_instance_of::<PyInt>()
            || value.is_exact_instance_of::<PyBool>();
        if !is_builtin {
            if let Some(src) = self.numpy_scalar(value) {
                return Ok(src);
            }
            let np = py.import("numpy")?;
            if value.is_instance(&np.getattr("generic")?)? {
                return self.array(&np.call_method1("asarray", (value,))?.cast_into::<PyUntypedArray>()?);
            }
        }
        let read = match scalar_read(dtype, value.is_instance_of::<PyFloat>()) {
            ScalarRead::Float => value.extract().ok().map(Scalar::Float),
            ScalarRead::Int => value.extract().ok().map(Scalar::Int),
            ScalarRead::Refused(what) => return Err(wrong(what)),
        };
        let mut misfit = None;
        let src = self.coll.own_with(|out| misfit = put_scalar(dtype, read, out).err());
        match misfit {
            None => Ok(src),
            Some(ScalarMisfit::Wrong(what)) => Err(wrong(what)),
            Some(ScalarMisfit::Value(why)) => Err(col.refused(py, why)),
        }
    }

    /// A numpy scalar of the column's own type (an env's `np.int64` action, `np.float32` info):
    /// its number, stored as the column stores it, without a 0-d array. `None` for anything else
    /// (the caller goes through numpy, which checks casts).
    fn numpy_scalar(&mut self, value: &Bound<'_, PyAny>) -> Option<Src> {
        let descr = self.col.descr.as_ref()?.bind(value.py());
        if !value.get_type().is(descr.typeobj()) {
            return None;
        }
        let read = match self.col.dtype {
            DType::F16 | DType::F32 | DType::F64 => Scalar::Float(value.extract().ok()?),
            _ => Scalar::Int(value.extract().ok()?),
        };
        // Every value of the column's own type fits it.
        let mut fits = false;
        let src = self.coll.own_with(|out| fits = put_scalar(self.col.dtype, Some(read), out).is_ok());
        fits.then_some(src)
    }

    /// Str rows as `u32 len` + UTF-8 bytes; batched values are any sequence of str (or None
    /// where a mask says the row is missing, which then reads as an empty string).
    fn strings(&mut self, value: &Bound<'_, PyAny>) -> PyResult<Src> {
        let (py, col) = (value.py(), self.col);
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
        let src = self.coll.own_with(|out| {
            result = match self.rows {
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
}

pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
}
