//! numpy arrays made from Rust: outputs over a batch's memory, which a read wrote whole with the
//! GIL released (one allocation per read), numpy scalars, and read-only views over rows stored
//! raw in a memory map. A view's base is a `MappedRows` object holding the rows (and through them
//! the map), so the map outlives every array over it, even after the dataset is closed or
//! refreshed.

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::ptr;

use numpy::npyffi::{
    get_type_object, npy_intp, NpyTypes, PyArrayObject, PyArray_Descr, NPY_ARRAY_WRITEABLE, PY_ARRAY_API,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use trajcore_core::dtype::ALL_DTYPES;
use trajcore_core::reader::{RowsView, BATCH_BLOCKS};
use trajcore_core::DType;

use crate::errors::invalid;

/// Keeps raw rows of a shard's memory map alive for the numpy arrays viewing them.
#[pyclass(module = "trajcore._core", name = "MappedRows", frozen)]
pub struct MappedRows {
    view: RowsView,
}

/// A batch's memory: one block for all its fixed-size outputs (see
/// `trajcore_core::reader::ArenaLayout`), written whole by the read before this object is made,
/// then the base of a uint8 buffer that the outputs' arrays view. A large block goes back to the
/// core's pool when numpy lets go of it (see `trajcore_core::reader::BlockPool`).
#[pyclass(module = "trajcore._core", name = "BatchMemory", frozen)]
pub struct BatchMemory {
    data: std::cell::UnsafeCell<Vec<MaybeUninit<u8>>>,
}

// SAFETY: Rust never touches the Vec after `buffer` made it but in `Drop` (no other reference left); numpy
// writes its bytes through the arrays over it, never resizing it.
unsafe impl Sync for BatchMemory {}

impl Drop for BatchMemory {
    fn drop(&mut self) {
        BATCH_BLOCKS.give_back(std::mem::take(self.data.get_mut()));
    }
}

impl BatchMemory {
    /// A block of `len` bytes, not initialized: a pooled one when large, else a new one.
    pub fn block(len: usize) -> Vec<MaybeUninit<u8>> {
        BATCH_BLOCKS.take(len).unwrap_or_else(|| vec![MaybeUninit::uninit(); len])
    }

    /// `block` as a 1-D uint8 array over it (its owner), and where its data starts.
    ///
    /// # Safety
    /// Every byte of `block` must be written.
    pub unsafe fn buffer(py: Python<'_>, block: Vec<MaybeUninit<u8>>) -> PyResult<(Bound<'_, PyAny>, *mut c_void)> {
        let len = block.len();
        let memory = Bound::new(py, BatchMemory { data: std::cell::UnsafeCell::new(block) })?;
        // SAFETY: the block lives as long as `memory`, the array's base, and is never resized.
        let data = unsafe { (*memory.get().data.get()).as_mut_ptr() }.cast::<c_void>();
        // SAFETY: `data` addresses `len` written bytes (the caller's promise) owned by `memory`;
        // uint8 needs no alignment.
        let buffer = unsafe {
            array_over(py, descr(py, DType::U8)?, dims(&[len])?, data, NPY_ARRAY_WRITEABLE, memory.into_any())?
        };
        Ok((buffer, data))
    }
}

/// A C-order array of `descr` and `dims` over `data`, with `owner` as its base (which must keep
/// `data` alive), numpy flags `flags`.
///
/// # Safety
/// `data` must address the array's bytes (the product of `dims` times the item size), suitably
/// aligned for the dtype and initialized, for as long as `owner` lives.
unsafe fn array_over<'py>(
    py: Python<'py>,
    descr: Bound<'py, PyArrayDescr>,
    mut dims: Vec<npy_intp>,
    data: *mut c_void,
    flags: c_int,
    owner: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller vouches for `data`. NULL strides: C order. The descriptor reference is
    // stolen (`into_ptr` gives a new one); the call returns a new reference or NULL with an
    // exception set.
    let array = unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            descr.into_ptr().cast::<PyArray_Descr>(),
            dims.len() as c_int,
            dims.as_mut_ptr(),
            ptr::null_mut(),
            data,
            flags,
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

/// numpy's descriptor of each dtype, made once (making one parses its name).
static DESCRS: PyOnceLock<Vec<Py<PyArrayDescr>>> = PyOnceLock::new();

pub fn descr<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    let all = DESCRS.get_or_try_init(py, || {
        ALL_DTYPES.iter().map(|d| Ok(PyArrayDescr::new(py, d.name())?.unbind())).collect::<PyResult<_>>()
    })?;
    Ok(all[ALL_DTYPES.iter().position(|d| *d == dtype).expect("every dtype is listed")].bind(py).clone())
}

fn dims(shape: &[usize]) -> PyResult<Vec<npy_intp>> {
    shape
        .iter()
        .map(|&d| npy_intp::try_from(d).map_err(|_| pyo3::exceptions::PyOverflowError::new_err("array too large")))
        .collect()
}

/// The part `range` of a batch's `buffer` (`BatchMemory::buffer`, at `data`): an array of
/// `dtype` and `shape` over it, writeable, its base the buffer; for shape `[]`, a numpy scalar.
///
/// # Safety
/// `data` must be the buffer's, `range` inside it.
pub unsafe fn part<'py>(
    py: Python<'py>,
    (buffer, data): &(Bound<'py, PyAny>, *mut c_void),
    range: Range<usize>,
    dtype: DType,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: inside the live buffer (the caller's promise).
    let data = unsafe { data.cast::<u8>().add(range.start) }.cast::<c_void>();
    let descr = descr(py, dtype)?;
    if shape.is_empty() {
        // SAFETY: `data` addresses one element of `descr`'s type, written, inside the live block
        // and aligned (see below). PyArray_Scalar copies it (a base object is only needed for
        // void scalars, which trajcore never makes) and does not steal the descriptor reference.
        // It returns a new reference or NULL with an exception set.
        return unsafe {
            let scalar = PY_ARRAY_API.PyArray_Scalar(py, data, descr.as_ptr().cast::<PyArray_Descr>(), ptr::null_mut());
            Bound::from_owned_ptr_or_err(py, scalar)
        };
    }
    // SAFETY: `data` addresses `range.len()` written bytes inside the buffer, exactly `shape`
    // elements of `dtype` (the layout's sizes), 64-byte aligned relative to the buffer's
    // (malloc-aligned) start; the buffer is the view's base, so the memory outlives the view.
    unsafe { array_over(py, descr, dims(shape)?, data, NPY_ARRAY_WRITEABLE, buffer.clone()) }
}

/// A read-only array of `dtype` and `shape` over rows in place in the memory map.
pub fn mapped<'py>(py: Python<'py>, view: RowsView, dtype: DType, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let descr = descr(py, dtype)?;
    let elements: usize = shape.iter().product();
    if elements.checked_mul(descr.itemsize()) != Some(view.bytes().len()) {
        return Err(invalid(py, format!("{} bytes do not hold {shape:?} {}", view.bytes().len(), dtype.name())));
    }
    let dims = dims(shape)?;
    let owner = Bound::new(py, MappedRows { view })?;
    let data = owner.get().view.bytes().as_ptr();
    // SAFETY: `data` addresses `elements * itemsize` bytes (checked above) of a read-only memory
    // map; `owner` keeps them mapped (RowsView holds an Arc of the map) and becomes the array's
    // base, so the array never outlives them. No WRITEABLE flag is passed, and the base exposes
    // no buffer, so numpy refuses to make the array writeable (writing would fault).
    unsafe { array_over(py, descr, dims, data as *mut c_void, 0, owner.into_any()) }
}
