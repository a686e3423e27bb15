//! Whether a value's bytes can be borrowed as a column's rows, answered from the numpy array's
//! C struct: its type, descriptor, shape and flags are fields, so an env's arrays (the usual
//! case, step after step) are checked with a few loads, where numpy's API would look up its
//! type table, hand out a new reference to the dtype and build a shape slice per value. Any
//! value that is not exactly such an array (a subclass, another descriptor, a strided view, a
//! scalar) gets `None` and goes the general way (`values`), which knows every case. It earns its
//! unsafe reads: the same checks through numpy's safe API make the vector step's recorder call
//! measurably slower (docs/BENCHMARKS.md, issue 32).

use numpy::npyffi::{get_type_object, NpyTypes, PyArrayObject, NPY_ARRAY_C_CONTIGUOUS};
use numpy::PyArrayDescr;
use pyo3::prelude::*;

/// What a column takes as borrowed bytes: an ndarray of exactly `descr` (numpy's built-in
/// descriptors are singletons, so an env's arrays of the column's dtype carry this very
/// object), C-contiguous, of rows of `row_shape`.
pub struct ExactArray {
    /// numpy's ndarray type object, an address (it lives as long as the process's numpy).
    array_type: usize,
    descr: Py<PyArrayDescr>,
    row_shape: Vec<usize>,
    row_bytes: usize,
}

impl ExactArray {
    pub fn new(py: Python<'_>, descr: Py<PyArrayDescr>, row_shape: &[usize], item_bytes: usize) -> Self {
        // SAFETY: the GIL is held; the numpy crate loads numpy's API table on first use.
        let array_type = unsafe { get_type_object(py, NpyTypes::PyArray_Type) } as usize;
        let row_bytes = row_shape.iter().product::<usize>() * item_bytes;
        ExactArray { array_type, descr, row_shape: row_shape.to_vec(), row_bytes }
    }

    /// The address and byte length of `value`'s data if it is such an array of `rows` rows
    /// (`None`: one row, shaped `row_shape` itself).
    pub fn data(&self, value: &Bound<'_, PyAny>, rows: Option<usize>) -> Option<(usize, usize)> {
        let object = value.as_ptr();
        // SAFETY: `value` is a live object and the GIL is held. Its fields are read as an
        // ndarray's only once its type is numpy's ndarray itself (not a subclass, whose layout
        // numpy also guarantees, but which may mean something else by its data); `dimensions`
        // holds `nd` entries.
        unsafe {
            if pyo3::ffi::Py_TYPE(object) as usize != self.array_type {
                return None;
            }
            let fields = &(*object.cast::<PyArrayObject>()).fields;
            if fields.descr.cast::<pyo3::ffi::PyObject>() != self.descr.as_ptr()
                || fields.flags & NPY_ARRAY_C_CONTIGUOUS == 0
            {
                return None;
            }
            let lead = usize::from(rows.is_some());
            if fields.nd as usize != lead + self.row_shape.len() {
                return None;
            }
            let dims: &[isize] =
                if fields.nd == 0 { &[] } else { std::slice::from_raw_parts(fields.dimensions, fields.nd as usize) };
            if rows.is_some_and(|n| dims[0] as usize != n)
                || !dims[lead..].iter().zip(&self.row_shape).all(|(&d, &s)| d as usize == s)
            {
                return None;
            }
            Some((fields.data as usize, rows.unwrap_or(1) * self.row_bytes))
        }
    }
}
