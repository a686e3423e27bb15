//! numpy arrays made from Rust: the outputs of a read, laid out in one block that a gather
//! writes whole with the GIL released, and read-only views over rows stored raw in a memory map.
//! Each array's numpy base keeps its memory alive, even after the dataset is closed or
//! refreshed: a `BatchMemory` (through a uint8 buffer) or a `MappedRows` (the map).

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr;

use numpy::npyffi::{
    get_type_object, npy_intp, NpyTypes, PyArrayObject, PyArray_Descr, NPY_ARRAY_WRITEABLE, PY_ARRAY_API,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use trajcore_core::reader::{ArenaLayout, RowsView, BATCH_BLOCKS};
use trajcore_core::DType;

use crate::errors::invalid;

/// Keeps raw rows of a shard's memory map alive for the numpy arrays viewing them.
#[pyclass(module = "trajcore._core", name = "MappedRows", frozen)]
pub struct MappedRows {
    view: RowsView,
}

/// A read's memory (see `arena`), handed back to the core's block pool when numpy lets go of it
/// (see `trajcore_core::reader::BlockPool`: a large block is kept for the next large batch).
#[pyclass(module = "trajcore._core", name = "BatchMemory", frozen)]
pub struct BatchMemory {
    data: UnsafeCell<Vec<MaybeUninit<u8>>>,
}

// SAFETY: the Vec is only touched through `Arena::parts`' contract (one writer before the arrays
// reach Python) and by `Drop` (no other reference left).
unsafe impl Sync for BatchMemory {}

impl Drop for BatchMemory {
    fn drop(&mut self) {
        BATCH_BLOCKS.give_back(std::mem::take(self.data.get_mut()));
    }
}

/// A C-order array of `descr` and `dims` over `data`, with `owner` as its base (which must keep
/// `data` alive), numpy flags `flags`.
///
/// # Safety
/// `data` must address the array's bytes (the product of `dims` times the item size), suitably
/// aligned for the dtype, for as long as `owner` lives.
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

pub fn descr<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    PyArrayDescr::new(py, dtype.name())
}

fn dims(shape: &[usize]) -> PyResult<Vec<npy_intp>> {
    shape
        .iter()
        .map(|&d| npy_intp::try_from(d).map_err(|_| pyo3::exceptions::PyOverflowError::new_err("array too large")))
        .collect()
}

/// Several arrays in one block (see `trajcore_core::reader::ArenaLayout`), not initialized, one
/// per (`descr`, `shape`) part: the caller writes the parts whole (`Arena::parts`), then takes
/// each as an array (`Arena::view`) or, one element, as a numpy scalar (`Arena::scalar`).
pub fn arena<'py>(py: Python<'py>, parts: Vec<(Bound<'py, PyArrayDescr>, Vec<usize>)>) -> PyResult<Arena<'py>> {
    let layout = ArenaLayout::new(parts.iter().map(|(d, shape)| (d.itemsize(), &shape[..])))
        .ok_or_else(|| pyo3::exceptions::PyOverflowError::new_err("batch too large"))?;
    let block = BATCH_BLOCKS.take(layout.len).unwrap_or_else(|| Box::new_uninit_slice(layout.len).into_vec());
    let owner = Bound::new(py, BatchMemory { data: UnsafeCell::new(block) })?;
    // SAFETY: the block lives as long as `owner`, the base of every array over it.
    let base = unsafe { (*owner.get().data.get()).as_mut_ptr() };
    let (u8s, len) = (descr(py, DType::U8)?, dims(&[layout.len])?);
    // SAFETY: `base` addresses the block's `layout.len` bytes, owned by `owner`, the buffer's
    // base; uint8 needs no alignment.
    let buffer = unsafe { array_over(py, u8s, len, base.cast(), NPY_ARRAY_WRITEABLE, owner.clone().into_any())? };
    Ok(Arena { parts, owner, buffer, base, layout })
}

/// What `arena` makes: the block, held by `owner` and viewed whole by `buffer` (the numpy base
/// of every view of a part, so the block outlives them).
pub struct Arena<'py> {
    parts: Vec<(Bound<'py, PyArrayDescr>, Vec<usize>)>,
    owner: Bound<'py, BatchMemory>,
    buffer: Bound<'py, PyAny>,
    base: *mut MaybeUninit<u8>,
    layout: ArenaLayout,
}

impl<'py> Arena<'py> {
    /// The memory of each part, for writing whole (`ArenaLayout::split` zeroes the bytes
    /// between them).
    ///
    /// # Safety
    /// Nothing else may touch the block while the slices live: no `view` of it may have been
    /// handed to Python code yet.
    pub unsafe fn parts(&mut self) -> Vec<&mut [MaybeUninit<u8>]> {
        // SAFETY: per the contract, these slices are the only access to the block.
        self.layout.split(unsafe { &mut *self.owner.get().data.get() })
    }

    /// Part `i` as a writeable array over the block.
    ///
    /// # Safety
    /// The part was written whole.
    pub unsafe fn view(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        let ((descr, shape), range) = (&self.parts[i], &self.layout.ranges[i]);
        let py = self.buffer.py();
        // SAFETY: `base + range.start` addresses `range.len()` bytes inside the block, exactly
        // `shape` elements of `descr` (the layout's sizes), 64-byte aligned relative to the
        // block's (malloc-aligned) start; the buffer is the view's base, so the memory outlives it.
        unsafe {
            let data = self.base.add(range.start).cast::<c_void>();
            array_over(py, descr.clone(), dims(shape)?, data, NPY_ARRAY_WRITEABLE, self.buffer.clone())
        }
    }

    /// The first element of part `i` as a numpy scalar (a copy): a step's value of a scalar
    /// column, without the cost of an array.
    ///
    /// # Safety
    /// The part was written whole, and holds an element (its shape has none of size 0).
    pub unsafe fn scalar(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        let py = self.buffer.py();
        // SAFETY: per the contract the part's first element is written; it lies 64-byte aligned
        // in the block (see `view`). PyArray_Scalar copies it (a base object is only needed for
        // void scalars, which trajcore never makes) and does not steal the descriptor reference;
        // it returns a new reference or NULL with an exception set.
        unsafe {
            let data = self.base.add(self.layout.ranges[i].start).cast::<c_void>();
            let descr = self.parts[i].0.as_ptr().cast::<PyArray_Descr>();
            Bound::from_owned_ptr_or_err(py, PY_ARRAY_API.PyArray_Scalar(py, data, descr, ptr::null_mut()))
        }
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
    unsafe { array_over(py, descr, dims, data as *mut c_void, 0, owner.into_any()) }
}
