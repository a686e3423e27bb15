//! numpy arrays made from Rust: zeroed outputs that a gather fills with the GIL released, numpy
//! scalars, and read-only views over rows stored raw in a memory map. A view's base is a
//! `MappedRows` object holding the rows (and through them the map), so the map outlives every
//! array over it, even after the dataset is closed or refreshed.

use std::ffi::{c_int, c_void};
use std::ptr;

use numpy::npyffi::{get_type_object, npy_intp, NpyTypes, PyArrayObject, PyArray_Descr, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trajcore_core::reader::RowsView;
use trajcore_core::DType;

use crate::errors::invalid;

/// Keeps raw rows of a shard's memory map alive for the numpy arrays viewing them.
#[pyclass(module = "trajcore._core", name = "MappedRows", frozen)]
pub struct MappedRows {
    view: RowsView,
}

#[pymethods]
impl MappedRows {
    /// Bytes viewed.
    fn __len__(&self) -> usize {
        self.view.bytes().len()
    }
}

pub fn descr<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    PyArrayDescr::new(py, dtype.name())
}

fn dims(shape: &[usize]) -> PyResult<Vec<npy_intp>> {
    shape
        .iter()
        .map(|&d| npy_intp::try_from(d).map_err(|_| pyo3::exceptions::PyOverflowError::new_err("array too large")))
        .collect()
}

/// A new C-contiguous array of zeros.
pub fn zeros<'py>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let mut dims = dims(shape)?;
    // SAFETY: `dims` holds `nd` dimensions and outlives the call; PyArray_Zeros steals a
    // reference to the descriptor, and `into_ptr` hands it a new one. It returns a new reference
    // or NULL with an exception set, which `from_owned_ptr_or_err` turns into an error.
    let array = unsafe {
        let ptr = PY_ARRAY_API.PyArray_Zeros(
            py,
            dims.len() as c_int,
            dims.as_mut_ptr(),
            descr.clone().into_ptr().cast::<PyArray_Descr>(),
            0,
        );
        Bound::from_owned_ptr_or_err(py, ptr)?
    };
    Ok(array.cast_into::<PyUntypedArray>()?)
}

/// The bytes of an array made by `zeros`, for filling.
///
/// # Safety
///
/// The array must be C-contiguous and writeable (as `zeros` makes them), and nothing else may
/// read or write its memory while the slice lives: in practice, it was just created and has not
/// been handed to Python code yet.
pub unsafe fn bytes_mut<'a>(array: &'a Bound<'_, PyUntypedArray>) -> &'a mut [u8] {
    let len = array.len() * array.dtype().itemsize();
    // SAFETY: per the contract, the array's data pointer addresses `len` contiguous bytes that
    // only this slice touches while it lives; numpy never returns a NULL data pointer (it
    // allocates at least one byte), as `from_raw_parts_mut` requires even for `len == 0`.
    unsafe {
        let data = (*array.as_array_ptr()).fields.data.cast::<u8>();
        std::slice::from_raw_parts_mut(data, len)
    }
}

/// A numpy scalar of `dtype` from its little-endian bytes (exactly one element).
pub fn scalar<'py>(py: Python<'py>, descr: &Bound<'py, PyArrayDescr>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    if bytes.len() != descr.itemsize() {
        return Err(invalid(py, format!("{} bytes for one {}-byte element", bytes.len(), descr.itemsize())));
    }
    // Copied into an 8-aligned buffer: numpy may read the element with an aligned load.
    let mut aligned = [0u64; 2];
    // SAFETY: `aligned` has 16 bytes, more than any fixed-size dtype trajcore stores (8).
    let dst = unsafe { std::slice::from_raw_parts_mut(aligned.as_mut_ptr().cast::<u8>(), 16) };
    dst[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: `aligned` holds one element of the descriptor's type; PyArray_Scalar copies it
    // (a base object is only needed for void scalars, which trajcore never makes) and does not
    // steal the descriptor reference. It returns a new reference or NULL with an exception set.
    unsafe {
        let ptr = PY_ARRAY_API.PyArray_Scalar(
            py,
            aligned.as_mut_ptr().cast::<c_void>(),
            descr.as_ptr().cast::<PyArray_Descr>(),
            ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, ptr)
    }
}

/// A read-only array of `dtype` and `shape` over rows in place in the memory map.
pub fn mapped<'py>(py: Python<'py>, view: RowsView, dtype: DType, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let descr = descr(py, dtype)?;
    let elements: usize = shape.iter().product();
    if elements.checked_mul(descr.itemsize()) != Some(view.bytes().len()) {
        return Err(invalid(py, format!("{} bytes do not hold {shape:?} {}", view.bytes().len(), dtype.name())));
    }
    let mut dims = dims(shape)?;
    let owner = Bound::new(py, MappedRows { view })?;
    let data = owner.get().view.bytes().as_ptr();
    // SAFETY: `data` addresses `elements * itemsize` bytes (checked above) of a read-only memory
    // map; `owner` keeps them mapped (RowsView holds an Arc of the map) and becomes the array's
    // base below, so the array never outlives them. No WRITEABLE flag is passed, and the base
    // exposes no buffer, so numpy refuses to make the array writeable (writing would fault).
    // NULL strides: C order. The descriptor reference is stolen (`into_ptr` gives a new one);
    // the call returns a new reference or NULL with an exception set.
    let array = unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            descr.into_ptr().cast::<PyArray_Descr>(),
            dims.len() as c_int,
            dims.as_mut_ptr(),
            ptr::null_mut(),
            data as *mut c_void,
            0,
            ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, ptr)?
    };
    // SAFETY: `array` is a new ndarray without a base; PyArray_SetBaseObject steals the
    // reference `into_ptr` gives it, also on failure (-1, with an exception set).
    let status =
        unsafe { PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast::<PyArrayObject>(), owner.into_ptr()) };
    if status < 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(array)
}
