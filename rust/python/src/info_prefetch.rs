//! Brings an info dict's memory into this core's cache one hop at a time, while the step call
//! collects its other values. Reading nested infos is a chain of loads, each address in the
//! memory the previous one brought (the dict, its key table, a nested dict, its key table, an
//! array, its data): when the env's objects are out of cache, each waits in turn. Asking for
//! one hop between the other values of the call overlaps those waits with that work instead.
//!
//! Prefetches are hints: they read nothing and never fault, whatever the address.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::collect::prefetch;
use crate::exact_array::prefetch_array;

/// Dicts with more entries are left for the walk itself: a hop must stay short.
const MAX_ENTRIES: usize = 16;

/// Where CPython keeps a dict's key table: `PyDictObject.ma_keys`, after the object header,
/// `ma_used` and `ma_version_tag` (3.11 to 3.14). The limited API has no accessor for it; any
/// other layout only makes the prefetch miss (the field read is inside the dict object).
const MA_KEYS_OFFSET: usize = 4 * std::mem::size_of::<usize>();

/// The hops of one info dict still to ask for, in order: its key table (1), its keys and
/// values (2), what they point to (3: key tables of nested dicts, arrays' dims and data). Its
/// header (0) is asked for with the call's other values. Deeper hops (the values of nested
/// dicts) measured no faster, each a walk of its own: the walk asks for them as it goes
/// (`info_fast`, `infos::put_planned`).
pub struct Hops<'a, 'py> {
    info: &'a Bound<'py, PyAny>,
    next: u8,
}

impl<'a, 'py> Hops<'a, 'py> {
    pub fn after_header(info: &'a Bound<'py, PyAny>) -> Self {
        Hops { info, next: 1 }
    }

    /// Asks for the next hop's memory, if any is left.
    pub fn ask_next(&mut self) {
        let info = self.info;
        match (self.next, info.cast_exact::<PyDict>()) {
            (1, _) => prefetch_contents(info),
            (2, Ok(info)) => for_each_entry(info, |key, value| {
                // A key made each step (an f-string) is compared by its hash and text.
                prefetch(key.as_ptr().cast(), 64);
                prefetch(value.as_ptr().cast(), 64);
            }),
            (3, Ok(info)) => for_each_entry(info, |_, value| prefetch_contents(&value)),
            _ => {}
        }
        self.next += 1;
    }

    /// Asks for every hop left.
    pub fn ask_rest(&mut self) {
        while self.next <= 3 {
            self.ask_next();
        }
    }
}

/// Calls `f` with each key and value of `dict` (borrowed: `f` runs no Python code), unless it
/// has more than `MAX_ENTRIES`.
fn for_each_entry<'py>(
    dict: &Bound<'py, PyDict>,
    mut f: impl FnMut(Borrowed<'_, 'py, PyAny>, Borrowed<'_, 'py, PyAny>),
) {
    if dict.len() > MAX_ENTRIES {
        return;
    }
    let py = dict.py();
    let (mut at, mut key, mut value) = (0, std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the GIL is held and `dict` is live; the borrowed references `PyDict_Next` hands
    // out stay valid while `f` runs, since it runs no Python code.
    unsafe {
        while ffi::PyDict_Next(dict.as_ptr(), &mut at, &mut key, &mut value) != 0 {
            f(Borrowed::from_ptr(py, key), Borrowed::from_ptr(py, value));
        }
    }
}

/// Asks for the memory `value`'s header points to (its header loaded or on its way): a dict's
/// key table, an ndarray's dims and data. Anything else is left be.
pub fn prefetch_contents(value: &Bound<'_, PyAny>) {
    let object = value.as_ptr();
    // SAFETY: `value` is live and the GIL is held; the field is read inside an exact dict.
    unsafe {
        if ffi::Py_TYPE(object) == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
            let keys = *object.cast::<u8>().add(MA_KEYS_OFFSET).cast::<*const u8>();
            prefetch(keys, 128);
        } else {
            prefetch_array(value);
        }
    }
}
