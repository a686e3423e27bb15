//! numpy arrays made from Rust: uninitialized outputs that a read writes whole with the GIL
//! released (one allocation per read), numpy scalars, and read-only views over rows stored raw
//! in a memory map. A view's base is a `MappedRows` object holding the rows (and through them
//! the map), so the map outlives every array over it, even after the dataset is closed or
//! refreshed.

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::ptr;

use numpy::npyffi::{
    get_type_object, npy_intp, NpyTypes, PyArrayObject, PyArray_Descr, NPY_ARRAY_WRITEABLE, PY_ARRAY_API,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use trajcore_core::dtype::ALL_DTYPES;
use trajcore_core::reader::{ArenaLayout, RowsView, BATCH_BLOCKS};
use trajcore_core::DType;

use crate::errors::invalid;

/// Keeps raw rows of a shard's memory map alive for the numpy arrays viewing them.
#[pyclass(module = "trajcore._core", name = "MappedRows", frozen)]
pub struct MappedRows {
    view: RowsView,
}

/// A large batch's memory (a bulk read's output), handed back to the core's block pool when
/// numpy lets go of it (see `trajcore_core::reader::BlockPool`).
#[pyclass(module = "trajcore._core", name = "BatchMemory", frozen)]
pub struct BatchMemory {
    data: std::cell::UnsafeCell<Vec<MaybeUninit<u8>>>,
}

// SAFETY: the Vec is only touched through `uninit_mut`'s contract (one writer before the array
// reaches Python) and by `Drop` (no other reference left).
unsafe impl Sync for BatchMemory {}

impl Drop for BatchMemory {
    fn drop(&mut self) {
        BATCH_BLOCKS.give_back(std::mem::take(self.data.get_mut()));
    }
}

/// A C-order array of `descr` and `dims` over `data`, with `owner` as its base (which must keep
/// `data` alive), numpy flags `flags`; with NULL `data` (and no owner), over memory numpy
/// allocates, not initialized.
///
/// # Safety
/// A non-NULL `data` must address the array's bytes (the product of `dims` times the item
/// size), suitably aligned for the dtype, for as long as `owner` lives.
unsafe fn array_over<'py>(
    py: Python<'py>,
    descr: Bound<'py, PyArrayDescr>,
    mut dims: Vec<npy_intp>,
    data: *mut c_void,
    flags: c_int,
    owner: Option<Bound<'py, PyAny>>,
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
    let Some(owner) = owner else { return Ok(array) };
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

/// One uninitialized allocation for several outputs (`parts`: dtype and shape of each; see
/// `trajcore_core::reader::ArenaLayout`): a 1-D uint8 buffer and where each part lies in it.
/// The caller writes the parts whole (`uninit_mut`, `layout.split`), then hands them out (`part`).
pub fn arena<'py, 'a>(
    py: Python<'py>,
    parts: impl IntoIterator<Item = (DType, &'a [usize])>,
) -> PyResult<(Bound<'py, PyUntypedArray>, ArenaLayout)> {
    let layout = ArenaLayout::new(parts.into_iter().map(|(dtype, shape)| (dtype.size().unwrap_or(0), shape)))
        .ok_or_else(|| pyo3::exceptions::PyOverflowError::new_err("batch too large"))?;
    let (data, flags, owner) = match BATCH_BLOCKS.take(layout.len) {
        // NULL data: numpy allocates the memory (uint8: not initialized), owned by the array.
        None => (ptr::null_mut(), 0, None),
        // A pooled block, its numpy base a `BatchMemory` that hands it back when numpy lets go.
        Some(block) => {
            let owner = Bound::new(py, BatchMemory { data: std::cell::UnsafeCell::new(block) })?;
            // SAFETY: the block lives as long as `owner`, which becomes the array's base below.
            let data = unsafe { (*owner.get().data.get()).as_mut_ptr() }.cast::<c_void>();
            (data, NPY_ARRAY_WRITEABLE, Some(owner.into_any()))
        }
    };
    // SAFETY: `data` is NULL, or addresses `layout.len` bytes (the block's length) owned by
    // `owner`, the array's base; uint8 needs no alignment. Not initialized: only reached through
    // `uninit_mut` (as `MaybeUninit`) until written whole.
    let buffer = unsafe { array_over(py, descr(py, DType::U8)?, dims(&[layout.len])?, data, flags, owner)? };
    Ok((buffer.cast_into::<PyUntypedArray>()?, layout))
}

/// The part `range` of an arena's `buffer`, once written: an array of `dtype` and `shape` over
/// it, writeable, its base the buffer; for shape `[]`, a numpy scalar of it.
pub fn part<'py>(
    py: Python<'py>,
    buffer: &Bound<'py, PyUntypedArray>,
    range: Range<usize>,
    dtype: DType,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: reading the data pointer field of a live ndarray (the buffer, held by the caller);
    // `range` lies inside it (its layout's).
    let data = unsafe { (*buffer.as_array_ptr()).fields.data.cast::<u8>().add(range.start) }.cast::<c_void>();
    let descr = descr(py, dtype)?;
    if shape.is_empty() {
        // SAFETY: `data` addresses one element of `descr`'s type, written, inside the live buffer
        // and aligned (see below). PyArray_Scalar copies it (a base object is only needed for
        // void scalars, which trajcore never makes) and does not steal the descriptor reference.
        // It returns a new reference or NULL with an exception set.
        return unsafe {
            let scalar = PY_ARRAY_API.PyArray_Scalar(py, data, descr.as_ptr().cast::<PyArray_Descr>(), ptr::null_mut());
            Bound::from_owned_ptr_or_err(py, scalar)
        };
    }
    // SAFETY: `data` addresses `range.len()` bytes inside the buffer, exactly `shape` elements of
    // `dtype` (the layout's sizes), 64-byte aligned relative to the buffer's (malloc-aligned)
    // start; the buffer is the view's base, so the memory outlives it.
    let owner = Some(buffer.clone().into_any());
    unsafe { array_over(py, descr, dims(shape)?, data, NPY_ARRAY_WRITEABLE, owner) }
}

/// The memory of a buffer made by `arena`, for writing whole.
///
/// # Safety
///
/// The array must be C-contiguous and writeable (as `arena` makes them), and nothing else may
/// touch its memory while the slice lives: in practice, it was just created and has not been
/// handed to Python code yet. The caller must write every byte before it reaches Python code.
pub unsafe fn uninit_mut<'a>(array: &'a mut Bound<'_, PyUntypedArray>) -> &'a mut [MaybeUninit<u8>] {
    let len = array.len() * array.dtype().itemsize();
    // SAFETY: per the contract, `len` bytes at the (non-NULL) data pointer belong to this slice
    // alone; `MaybeUninit<u8>` makes no claim that they are initialized.
    unsafe {
        let data = (*array.as_array_ptr()).fields.data.cast::<MaybeUninit<u8>>();
        std::slice::from_raw_parts_mut(data, len)
    }
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
    unsafe { array_over(py, descr, dims, data as *mut c_void, 0, Some(owner.into_any())) }
}
