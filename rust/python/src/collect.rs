//! Gathers one call's values as entries for the ring without copying them: numpy arrays are
//! borrowed where their dtype, shape and layout already match the column, scalars and strings
//! are encoded into one reused byte buffer.

use numpy::PyArrayDescrMethods;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trajcore_core::writer::{EntryKind, EntryRef, Slot};

/// Where an entry's bytes are: memory of a Python object kept alive in `keep`, or `bytes`.
#[derive(Clone, Copy)]
pub enum Src {
    /// Address and length inside a kept numpy array.
    External(usize, usize),
    /// Range of the collector's own buffer.
    Own(usize, usize),
}

#[derive(Clone, Copy)]
pub struct Pending {
    pub column: u32,
    pub kind: EntryKind,
    pub slot: Slot,
    pub env: u32,
    pub mask: Option<Src>,
    pub data: Src,
}

/// Reused between calls so the step path allocates nothing once warmed up.
#[derive(Default)]
pub struct Collector {
    pub bytes: Vec<u8>,
    pub keep: Vec<Py<PyAny>>,
    pub entries: Vec<Pending>,
    pub head_mask: Option<Src>,
}

impl Collector {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.keep.clear();
        self.entries.clear();
        self.head_mask = None;
    }

    /// Borrows a C-contiguous array's data; the array is kept alive until `clear`.
    pub fn borrow_array(&mut self, array: &Bound<'_, PyUntypedArray>) -> Src {
        let nbytes = array.len() * array.dtype().itemsize();
        // SAFETY: the array object is a live numpy array (we hold a reference), so its data
        // pointer and header are valid to read while the GIL is held.
        let data = unsafe { (*array.as_array_ptr()).fields.data } as usize;
        self.borrow_data(array.as_any(), data, nbytes)
    }

    /// Borrows `len` bytes at `data`, memory of `owner`, which is kept alive until `clear`.
    pub fn borrow_data(&mut self, owner: &Bound<'_, PyAny>, data: usize, len: usize) -> Src {
        self.keep.push(owner.clone().unbind());
        Src::External(data, len)
    }

    pub fn own(&mut self, bytes: &[u8]) -> Src {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        Src::Own(start, bytes.len())
    }

    /// Appends bytes to the own buffer with a closure; returns their range.
    pub fn own_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) -> Src {
        let start = self.bytes.len();
        fill(&mut self.bytes);
        Src::Own(start, self.bytes.len() - start)
    }

    pub fn push(&mut self, column: u32, kind: EntryKind, slot: Slot, env: u32, mask: Option<Src>, data: Src) {
        self.entries.push(Pending { column, kind, slot, env, mask, data });
    }

    pub fn slice(&self, src: Src) -> &[u8] {
        match src {
            Src::Own(start, len) => &self.bytes[start..start + len],
            // SAFETY: External sources point into arrays held in `self.keep` (not freed, and a
            // numpy array with live references cannot be resized); the GIL is held by the caller
            // of `entries`, and the returned slice does not outlive `&self`.
            Src::External(addr, len) => {
                if len == 0 {
                    &[]
                } else {
                    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
                }
            }
        }
    }

    pub fn entries(&self) -> Vec<EntryRef<'_>> {
        self.entries
            .iter()
            .map(|p| EntryRef {
                column: p.column,
                kind: p.kind,
                slot: p.slot,
                env: p.env,
                mask: p.mask.map(|m| self.slice(m)),
                data: self.slice(p.data),
            })
            .collect()
    }
}
