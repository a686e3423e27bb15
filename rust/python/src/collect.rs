//! The core's collector (`trajcore_core::writer::entries::collect`) over Python values: numpy arrays are
//! borrowed, kept alive by a reference until the message is sent.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
pub use trajcore_core::writer::entries::collect::Src;

pub type Collector = trajcore_core::writer::entries::collect::Collector<Py<PyAny>>;

/// Borrows a C-contiguous array's data, `nbytes` long (at most its size).
#[inline]
pub fn borrow_array(coll: &mut Collector, array: &Bound<'_, PyUntypedArray>, nbytes: usize) -> Src {
    // SAFETY: a live numpy array (we hold a reference): its header is valid to read with the GIL.
    let data = unsafe { (*array.as_array_ptr()).fields.data } as usize;
    // SAFETY: `data` is the data of the live numpy array `array`, kept alive by the collector
    // until `clear`; a numpy array with live references cannot be resized, and the bindings read
    // the collector's slices only with the GIL held (`send` drops them before releasing it).
    unsafe { coll.borrow(array.as_any().clone().unbind(), data, nbytes) }
}
