//! numpy arrays made from Rust: uninitialized outputs that a gather writes whole with the GIL
//! released (one allocation per batch), numpy scalars, and read-only views over rows stored raw
//! in a memory map. A view's base is a
//! `MappedRows` object holding the rows (and through them the map), so the map outlives every
//! array over it, even after the dataset is closed or refreshed.

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr;

use numpy::npyffi::{
    get_type_object, npy_intp, NpyTypes, PyArrayObject, PyArray_Descr, NPY_ARRAY_WRITEABLE, PY_ARRAY_API,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
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

pub fn descr<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    PyArrayDescr::new(py, dtype.name())
}

fn dims(shape: &[usize]) -> PyResult<Vec<npy_intp>> {
    shape
        .iter()
        .map(|&d| npy_intp::try_from(d).map_err(|_| pyo3::exceptions::PyOverflowError::new_err("array too large")))
        .collect()
}

/// A new C-contiguous array whose memory is not initialized, for outputs a gather writes whole
/// (no zeroing pass first).
pub fn empty<'py>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    // SAFETY: NULL data: numpy allocates the memory (uninitialized for every dtype trajcore
    // stores), owned by the array. It is only reached through `uninit_mut` (as `MaybeUninit`)
    // until written whole.
    let array = unsafe { array_over(py, descr.clone(), dims(shape)?, ptr::null_mut(), 0, None)? };
    Ok(array.cast_into::<PyUntypedArray>()?)
}

/// Several arrays in one uninitialized allocation (see `trajcore_core::reader::ArenaLayout`):
/// a 1-D uint8 buffer, and a view of each (`descr`, `shape`) part, writeable, its numpy base the
/// buffer. The caller writes the parts whole, through `layout.split` of the buffer's memory.
pub fn arena<'py>(py: Python<'py>, parts: &[(Bound<'py, PyArrayDescr>, Vec<usize>)]) -> PyResult<Arena<'py>> {
    let layout = ArenaLayout::new(parts.iter().map(|(d, shape)| (d.itemsize(), &shape[..])))
        .ok_or_else(|| pyo3::exceptions::PyOverflowError::new_err("batch too large"))?;
    let u8s = descr(py, DType::U8)?;
    let buffer = match BATCH_BLOCKS.take(layout.len) {
        None => empty(py, &u8s, &[layout.len])?,
        // A pooled block, its numpy base a `BatchMemory` that hands it back when numpy lets go.
        Some(block) => {
            let owner = Bound::new(py, BatchMemory { data: std::cell::UnsafeCell::new(block) })?;
            // SAFETY: the block lives as long as `owner`, which becomes the array's base below.
            let data = unsafe { (*owner.get().data.get()).as_mut_ptr() }.cast::<c_void>();
            let (dims, owner) = (dims(&[layout.len])?, Some(owner.into_any()));
            // SAFETY: `data` addresses `layout.len` bytes (the block's length) owned by `owner`,
            // the array's base; uint8 needs no alignment. Not initialized (see `empty`).
            unsafe { array_over(py, u8s, dims, data, NPY_ARRAY_WRITEABLE, owner)? }.cast_into::<PyUntypedArray>()?
        }
    };
    // SAFETY: reading the data pointer field of a live ndarray (the buffer, held here).
    let base = (unsafe { (*buffer.as_array_ptr()).fields.data }).cast::<u8>();
    let mut views = Vec::with_capacity(parts.len());
    for ((descr, shape), range) in parts.iter().zip(&layout.ranges) {
        // SAFETY: `base + range.start` addresses `range.len()` bytes inside the buffer, exactly
        // `shape` elements of `descr` (the layout's sizes), 64-byte aligned relative to the
        // buffer's (malloc-aligned) start; the buffer is the view's base, so the memory outlives it.
        let view = unsafe {
            let data = base.add(range.start).cast::<c_void>();
            array_over(py, descr.clone(), dims(shape)?, data, NPY_ARRAY_WRITEABLE, Some(buffer.clone().into_any()))?
        };
        views.push(view.cast_into::<PyUntypedArray>()?);
    }
    Ok(Arena { buffer, views, layout })
}

/// What `arena` makes.
pub struct Arena<'py> {
    pub buffer: Bound<'py, PyUntypedArray>,
    pub views: Vec<Bound<'py, PyUntypedArray>>,
    pub layout: ArenaLayout,
}

/// The memory of an array made by `empty`, for writing whole.
///
/// # Safety
///
/// The array must be C-contiguous and writeable (as `empty` makes them), and nothing else may
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
    let dims = dims(shape)?;
    let owner = Bound::new(py, MappedRows { view })?;
    let data = owner.get().view.bytes().as_ptr();
    // SAFETY: `data` addresses `elements * itemsize` bytes (checked above) of a read-only memory
    // map; `owner` keeps them mapped (RowsView holds an Arc of the map) and becomes the array's
    // base, so the array never outlives them. No WRITEABLE flag is passed, and the base exposes
    // no buffer, so numpy refuses to make the array writeable (writing would fault).
    unsafe { array_over(py, descr, dims, data as *mut c_void, 0, Some(owner.into_any())) }
}
