//! Python values as the core reads them (`HostValues`, `HostDicts`: the layout walk, the info
//! walk and the value reading ask them; `reading::Object`; a recorder call's `Recording`):
//! Python's and numpy's answers and conversions only (is it exactly a float, an ndarray; numpy's
//! array of it), a column's numpy descriptor and warnings; the core decides which is asked when
//! and what a value is for a column, whether it fits and its bytes, the column it makes or
//! widens. Errors name the column.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use pyo3::PyTypeInfo;
use trajcore_core::host::{HostDicts, HostValues};
use trajcore_core::writer::entries::call_values::Recording;
use trajcore_core::writer::entries::reading::fit::Fit;
use trajcore_core::writer::entries::reading::value::Array;
use trajcore_core::writer::entries::reading::{Class, Object};
use trajcore_core::DType;

use crate::collect::{borrow_array, Collector, Src};

/// A column as the step path needs it.
pub struct ColInfo {
    /// Its type, rows and bounds, as the core fits values to them.
    pub fit: Fit,
    pub descr: Option<Py<PyArrayDescr>>,
    /// A row's bytes (`None` for str columns), known once for the step path.
    pub row_bytes: Option<usize>,
}

/// `value`'s bytes, borrowed, when it is an ndarray of exactly `descr`, C-contiguous, of `rows`
/// rows of `row_shape` (`row_bytes` each; `None`: one row, shaped `row_shape` itself):
/// the usual value, step after step. Anything else (a subclass, another descriptor, a strided
/// view, a scalar) gets `None` and goes the general way, which knows every case. numpy's
/// built-in descriptors are singletons: an env's arrays of the column's dtype carry this one.
#[inline(always)]
fn exact_rows(
    value: &Bound<'_, PyAny>,
    (descr, row_bytes): (&Py<PyArrayDescr>, usize),
    row_shape: &[usize],
    rows: Option<usize>,
    coll: &mut Collector,
) -> Option<Src> {
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
        // Item by item: a slice's `==` calls libc's memcmp, most of this check's time per value.
        && shape[lead..].iter().zip(row_shape).all(|(d, s)| d == s);
    // Its size from the column's (numpy's own would ask the descriptor again).
    fits.then(|| borrow_array(coll, array, rows.unwrap_or(1) * row_bytes))
}

/// Python's values, as the core asks about them.
#[derive(Clone, Copy)]
pub struct Objects<'py>(pub Python<'py>);

impl<'py> HostValues for Objects<'py> {
    type Value = Bound<'py, PyAny>;
    type Error = PyErr;

    fn len(&self, value: &Self::Value) -> Option<usize> {
        value.len().ok()
    }

    fn item(&self, value: &Self::Value, index: usize) -> PyResult<Self::Value> {
        value.get_item(index)
    }

    fn items(&self, value: &Self::Value) -> PyResult<Vec<Self::Value>> {
        value.try_iter()?.collect()
    }

    fn type_name(&self, value: &Self::Value) -> String {
        value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
    }

    fn repr(&self, value: &Self::Value) -> String {
        value.repr().map(|r| r.to_string()).unwrap_or_default()
    }
}

/// A dict (or any mapping) by key; keys are interned Python strs.
impl<'py> HostDicts for Objects<'py> {
    type Held = Py<PyAny>;
    type Dict = Bound<'py, PyDict>;
    type Str = Py<PyString>;

    fn get(&self, value: &Self::Value, key: &Py<PyString>) -> PyResult<Option<Self::Value>> {
        match value.cast::<PyDict>() {
            Ok(dict) => dict.get_item(key.bind(self.0)),
            Err(_) => Ok(value.get_item(key.bind(self.0)).ok()),
        }
    }

    fn keys(&self, value: &Self::Value) -> PyResult<Vec<String>> {
        let text = |k: Bound<'py, PyAny>| match k.cast::<PyString>() {
            Ok(s) => s.to_string(),
            Err(_) => self.repr(&k),
        };
        match value.cast::<PyDict>() {
            Ok(dict) => Ok(dict.keys().into_iter().map(text).collect()),
            Err(_) => value.call_method0("keys")?.try_iter()?.map(|k| k.map(text)).collect(),
        }
    }

    fn held(&self, held: &Py<PyAny>) -> Self::Value {
        held.bind(self.0).clone()
    }

    fn dict<'v>(&self, value: &'v Self::Value) -> Option<&'v Self::Dict> {
        value.cast::<PyDict>().ok()
    }

    fn dict_len(&self, dict: &Self::Dict) -> usize {
        dict.len()
    }

    fn dict_items(&self, dict: &Self::Dict) -> impl Iterator<Item = (Self::Value, Py<PyAny>)> {
        dict.iter().map(|(key, value)| (key, value.unbind()))
    }

    fn contains(&self, dict: &Self::Dict, key: &Py<PyString>) -> PyResult<bool> {
        dict.contains(key.bind(self.0))
    }

    fn name(&self, key: &Self::Value) -> PyResult<(String, bool)> {
        match key.cast::<PyString>() {
            Ok(s) => Ok((s.to_str()?.to_owned(), true)),
            Err(_) => Ok((key.str()?.to_str()?.to_owned(), false)),
        }
    }

    /// Only an exact str is compared by text: a subclass could hash otherwise (its dicts are
    /// walked key by key).
    fn same(&self, key: &Self::Value, planned: &Py<PyString>) -> PyResult<bool> {
        if key.is(planned) {
            return Ok(true);
        }
        let (Ok(key), planned) = (key.cast_exact::<PyString>(), planned.bind(self.0)) else { return Ok(false) };
        Ok(key.hash()? == planned.hash()? && key.to_str()? == planned.to_str()?)
    }

    fn str_key(&self, key: &Self::Value) -> PyResult<Py<PyString>> {
        Ok(key.cast::<PyString>()?.clone().unbind())
    }

    fn intern(&self, text: &str) -> Py<PyString> {
        PyString::intern(self.0, text).unbind()
    }

    fn error(&self, error: trajcore_core::Error) -> PyErr {
        crate::errors::to_py(self.0, error)
    }
}

/// A Python type, the same as another when it is the same object.
pub struct TypeOf(Py<PyType>);

impl PartialEq for TypeOf {
    fn eq(&self, other: &Self) -> bool {
        self.0.is(&other.0)
    }
}

impl<'py> Recording<ColInfo, Py<PyAny>> for Objects<'py> {
    type Kind = TypeOf;

    fn kind(&self, value: &Self::Value) -> TypeOf {
        TypeOf(value.get_type().unbind())
    }

    fn column(&self, fit: Fit) -> PyResult<ColInfo> {
        let descr = match fit.dtype {
            DType::Utf8 => None,
            d => Some(PyArrayDescr::new(self.0, d.name())?.unbind()),
        };
        let row_bytes = fit.dtype.size().map(|size| size * fit.shape.iter().product::<usize>());
        Ok(ColInfo { fit, descr, row_bytes })
    }

    #[inline]
    fn fit<'c>(&self, column: &'c ColInfo) -> &'c Fit {
        &column.fit
    }

    fn length(&self, value: &Self::Value) -> PyResult<usize> {
        value.len()
    }

    fn truthy(&self, value: &Self::Value) -> PyResult<bool> {
        value.is_truthy()
    }

    fn warn(&self, warning: &str) -> PyResult<()> {
        crate::errors::warn(self.0, warning)
    }
}

impl<'py> Object<ColInfo, Py<PyAny>> for Objects<'py> {
    #[inline]
    fn is(&self, value: &Self::Value, class: Class) -> PyResult<bool> {
        Ok(match class {
            Class::ExactFloat => value.is_exact_instance_of::<PyFloat>(),
            Class::Bool => value.is_instance_of::<PyBool>(),
            Class::ExactInt => value.is_exact_instance_of::<PyInt>(),
            Class::Int => value.is_instance_of::<PyInt>(),
            Class::Float => value.is_instance_of::<PyFloat>(),
            Class::Str => value.is_instance_of::<PyString>(),
            Class::None => value.is_none(),
            Class::Dict => value.is_instance_of::<PyDict>(),
            Class::Sequence => value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>(),
            Class::NumpyScalar => value.is_instance(&self.0.import("numpy")?.getattr("generic")?)?,
        })
    }

    fn is_scalar_of(&self, value: &Self::Value, column: &ColInfo) -> bool {
        column.descr.as_ref().is_some_and(|descr| value.get_type().is(descr.bind(self.0).typeobj()))
    }

    #[inline]
    fn array_kind(&self, value: &Self::Value) -> Option<(u8, usize)> {
        value.cast::<PyUntypedArray>().ok().map(|array| (array.dtype().kind(), array.ndim()))
    }

    fn shape(&self, value: &Self::Value) -> Vec<usize> {
        value.cast::<PyUntypedArray>().map(|array| array.shape().to_vec()).unwrap_or_default()
    }

    fn array(&self, value: &Self::Value, column: Option<&ColInfo>, coll: &mut Collector) -> PyResult<Array> {
        let mut array = value.cast::<PyUntypedArray>()?.clone();
        let dtype = array.dtype();
        // numpy's built-in descriptors are singletons: pointer equality is the common, cheap case.
        let target = column.and_then(|c| c.descr.as_ref()).map(|d| d.bind(self.0));
        let own = target.is_some_and(|t| dtype.as_ptr() == t.as_ptr() || dtype.is_equiv_to(t));
        if !array.is_c_contiguous() || dtype.is_native_byteorder() == Some(false) {
            let native = dtype.call_method1("newbyteorder", ("=",))?;
            array = self.0.import("numpy")?.call_method1("ascontiguousarray", (array, native))?.cast_into()?;
        }
        // Its text only for a message (not asked for the column's own dtype).
        let shown = if own { String::new() } else { dtype.str()?.to_str()?.to_owned() };
        let (kind, itemsize, shape) = (dtype.kind(), dtype.itemsize(), array.shape().to_vec());
        let data = borrow_array(coll, &array, array.len() * itemsize);
        Ok(Array { kind, itemsize, shown, shape, data })
    }

    #[inline]
    fn rows(&self, value: &Self::Value, column: &ColInfo, rows: Option<usize>, coll: &mut Collector) -> Option<Src> {
        exact_rows(value, (column.descr.as_ref()?, column.row_bytes?), &column.fit.shape, rows, coll)
    }

    fn bool_rows(&self, value: &Self::Value, n: usize, coll: &mut Collector) -> Option<Src> {
        static BOOL: PyOnceLock<Py<PyArrayDescr>> = PyOnceLock::new();
        let bool_descr = BOOL.get_or_init(self.0, || PyArrayDescr::of::<bool>(self.0).unbind());
        exact_rows(value, (bool_descr, 1), &[], Some(n), coll)
    }

    fn truths(&self, value: &Self::Value) -> PyResult<Vec<bool>> {
        let array = self.0.import("numpy")?.call_method1("asarray", (value, "bool"))?;
        array.call_method0("ravel")?.call_method0("tolist")?.extract()
    }

    fn asarray(&self, value: &Self::Value) -> PyResult<Self::Value> {
        self.0.import("numpy")?.call_method1("asarray", (value,))
    }

    fn zeros_like(&self, value: &Self::Value) -> PyResult<Self::Value> {
        self.0.import("numpy")?.call_method1("zeros_like", (value,))
    }

    fn stack(&self, rows: Vec<Self::Value>) -> Option<Self::Value> {
        self.0.import("numpy").ok()?.call_method1("stack", (PyList::new(self.0, rows).ok()?,)).ok()
    }

    fn int(&self, value: &Self::Value) -> Option<i128> {
        value.extract().ok()
    }

    fn float(&self, value: &Self::Value) -> Option<f64> {
        value.extract().ok()
    }

    fn text<'v>(&self, value: &'v Self::Value) -> PyResult<Option<&'v str>> {
        value.cast::<PyString>().ok().map(|s| s.to_str()).transpose()
    }
}
