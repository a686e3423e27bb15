//! Plans of info dicts: gymnasium builds the same keys in the same order step after step, so
//! what each key of a dict is (a value and the position of its mask, or a key to skip) is
//! decided once per dict shape and kept. A dict whose keys are a plan's, in its order (each the
//! same str object, or a str of the same text), is walked by the plan: no key is looked up.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::collect::prefetch;

/// Plans kept per dict (its key node): a few shapes, such as the steps with and without an
/// episode's statistics.
pub const PLANS_PER_DICT: usize = 4;
/// Plans made per dict at most: past this its keys change too often for plans to pay.
pub const PLANS_MADE_PER_DICT: u32 = 256;
/// Larger dicts are walked key by key.
pub const MAX_PLANNED_KEYS: usize = 64;

/// What one key of a planned dict is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A mask read with its key, or same-step autoreset data.
    Skip,
    /// The value of key node `node`, with its `_key` mask at position `mask` of the dict.
    Value { node: usize, mask: Option<usize> },
}

struct PlannedKey {
    key: Py<PyString>,
    hash: isize,
    text: String,
    role: Role,
}

pub struct DictPlan {
    /// Made for a dict of regular rows (same-step autoreset data is skipped only there).
    regular: bool,
    keys: Vec<PlannedKey>,
}

impl DictPlan {
    /// A plan of `dict`, whose keys are all str, with `roles` in its order.
    pub fn new(dict: &Bound<'_, PyDict>, regular: bool, roles: &[Role]) -> PyResult<Self> {
        let mut keys = Vec::with_capacity(roles.len());
        for ((key, _), &role) in dict.iter().zip(roles) {
            let key = key.cast_into::<PyString>()?;
            keys.push(PlannedKey { hash: key.hash()?, text: key.to_str()?.to_owned(), key: key.unbind(), role });
        }
        Ok(DictPlan { regular, keys })
    }

    pub fn role(&self, position: usize) -> Role {
        self.keys[position].role
    }

    /// Whether `dict` has the plan's keys in its order; if so its values, in that order, are
    /// pushed on `values`.
    pub fn matches(&self, dict: &Bound<'_, PyDict>, regular: bool, values: &mut Vec<Py<PyAny>>) -> PyResult<bool> {
        let start = values.len();
        // SAFETY: each value gets a reference of its own before anything can run Python code.
        let matched = unsafe { self.matches_borrowed(dict, regular, |v| values.push(v.to_owned().unbind())) };
        if !matched? {
            values.truncate(start);
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether `dict` has the plan's keys in its order; `push` is called with its values in
    /// that order, until a key differs (the caller drops those pushed when this is false).
    ///
    /// # Safety
    /// The values are borrowed from `dict`: they stay valid only as long as no Python code runs
    /// (which could take them out of it).
    pub unsafe fn matches_borrowed<'py>(
        &self,
        dict: &Bound<'py, PyDict>,
        regular: bool,
        mut push: impl FnMut(Borrowed<'_, 'py, PyAny>),
    ) -> PyResult<bool> {
        if self.regular != regular || dict.len() != self.keys.len() {
            return Ok(false);
        }
        let py = dict.py();
        let (mut at, mut key, mut value) = (0, std::ptr::null_mut(), std::ptr::null_mut());
        for planned in &self.keys {
            // SAFETY: the GIL is held and `dict` is a live dict; `PyDict_Next` hands out borrowed
            // references, and nothing here runs Python code (an exact str's hash and text are
            // computed in C).
            unsafe {
                if ffi::PyDict_Next(dict.as_ptr(), &mut at, &mut key, &mut value) == 0 {
                    return Ok(false);
                }
                // The value's header starts loading now, while keys are compared.
                prefetch(value.cast(), 64);
                if !(key == planned.key.as_ptr() || same_text(&Borrowed::from_ptr(py, key), planned)?) {
                    return Ok(false);
                }
                push(Borrowed::from_ptr(py, value));
            }
        }
        Ok(true)
    }
}

/// A str key of the planned text that is another object (an f-string made each step). Only
/// exact str: a subclass could hash otherwise (its dicts are walked key by key).
fn same_text(key: &Bound<'_, PyAny>, planned: &PlannedKey) -> PyResult<bool> {
    let Ok(key) = key.cast_exact::<PyString>() else { return Ok(false) };
    Ok(key.hash()? == planned.hash && key.to_str()? == planned.text)
}

/// The position of each key's `_key` mask among `texts` (a dict's str keys, in order).
pub fn mask_positions(texts: &[String]) -> Vec<Option<usize>> {
    texts.iter().map(|t| texts.iter().position(|m| m.len() == t.len() + 1 && m.strip_prefix('_') == Some(t))).collect()
}

#[cfg(test)]
mod tests {
    use super::mask_positions;

    #[test]
    fn masks_are_found_by_their_names() {
        let texts: Vec<String> = ["episode", "_episode", "_x", "__x", "y"].iter().map(|s| s.to_string()).collect();
        assert_eq!(mask_positions(&texts), vec![Some(1), None, Some(3), None, None]);
    }
}
