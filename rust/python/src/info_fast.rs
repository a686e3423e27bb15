//! The fast walk of vector infos: when every dict of an info tree matches a plan of its node
//! (see `info_plan`) and every value is an array its column takes as it is, the usual step of
//! `RecordEpisodeStatistics` and the like, the tree is read with borrowed references and no
//! Python code runs, so nothing is counted or kept per value until the whole tree is known to
//! fit; then its entries are committed at once. Anything else (a value to convert, a key not
//! planned, a column not made yet, masks to combine) leaves nothing behind and the dict goes the
//! planned or key-by-key way (`infos`), which knows every case and decides the same.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trajcore_core::writer::Slot;

use crate::collect::{Collector, Src};
use crate::info_keys::KeyPaths;
use crate::info_plan::Role;
use crate::info_prefetch::prefetch_contents;
use crate::infos::{all_zero, push_entry, Place, MAX_DEPTH};
use crate::values::{exact_mask, ColInfo};

/// Consecutive dicts of a node the fast walk may leave to the other ways before it tries that
/// node only once in `RETRY_EVERY` (a key whose values always need converting costs the walk
/// nothing then; one whose values stop needing it gets the fast walk back).
const MAX_LEFT: u32 = 16;
const RETRY_EVERY: u32 = 256;

/// The fast walk's state, reused from step to step (nothing is allocated once warmed up).
#[derive(Default)]
pub struct FastWalk {
    /// The values of the dicts being walked, borrowed, a stack (nested dicts push above). As
    /// addresses: the state outlives the call, and each walk clears them before use.
    values: Vec<usize>,
    /// The objects whose bytes the entries borrow (arrays and masks), borrowed until committed.
    owners: Vec<usize>,
    entries: Vec<(u32, Option<Src>, Src)>,
    /// Per key node, dicts left to the other ways in a row (see `MAX_LEFT`).
    left: Vec<u32>,
}

impl FastWalk {
    /// Walks `dict` (of key node `node`, under the parent's checked `mask`) and commits its
    /// entries into `coll`, or returns false having committed nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &mut self,
        dict: &Bound<'_, PyDict>,
        node: usize,
        mask: Option<Src>,
        depth: usize,
        at: Place,
        keys: &KeyPaths,
        columns: &[ColInfo],
        coll: &mut Collector,
    ) -> bool {
        let Some(rows) = at.rows else { return false };
        if self.left.len() <= node {
            self.left.resize(node + 1, 0);
        }
        let left = &mut self.left[node];
        if *left >= MAX_LEFT {
            *left = left.wrapping_add(1);
            if !left.is_multiple_of(RETRY_EVERY) {
                return false;
            }
        }
        self.values.clear();
        self.owners.clear();
        self.entries.clear();
        let walk = Walk { keys, columns, rows, regular: at.slot == Slot::Regular, coll };
        // SAFETY: nothing from here to the commit runs Python code, so what `dict` holds stays
        // alive and in place while borrowed.
        let fits = unsafe { walk.dict(self, dict, node, mask, depth) };
        if !fits {
            let left = &mut self.left[node];
            if *left < MAX_LEFT {
                *left += 1;
            }
            return false;
        }
        self.left[node] = 0;
        let py = dict.py();
        for &owner in &self.owners {
            // SAFETY: a live object borrowed from the tree, which gets a reference of its own.
            coll.keep.push(unsafe { Borrowed::from_ptr(py, owner as *mut ffi::PyObject) }.to_owned().unbind());
        }
        for &(column, mask, data) in &self.entries {
            push_entry(column, mask, at, data, coll);
        }
        true
    }
}

struct Walk<'a> {
    keys: &'a KeyPaths,
    columns: &'a [ColInfo],
    rows: usize,
    regular: bool,
    coll: &'a Collector,
}

impl Walk<'_> {
    /// Whether `dict` and everything below it fit the fast walk; its entries are pushed on
    /// `state` (the caller drops them all when this is false).
    ///
    /// # Safety
    /// No Python code runs while the borrowed values are in use.
    unsafe fn dict(
        &self,
        state: &mut FastWalk,
        dict: &Bound<'_, PyDict>,
        node: usize,
        mask: Option<Src>,
        depth: usize,
    ) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        let start = state.values.len();
        let plans = &self.keys.node(node).plans;
        let Some(plan) = plans.iter().find(|plan| {
            state.values.truncate(start);
            plan.matches_borrowed(dict, self.regular, |v| state.values.push(v.as_ptr() as usize)).unwrap_or(false)
        }) else {
            return false;
        };
        let py = dict.py();
        let len = state.values.len() - start;
        // Their headers were asked for while matching: now their arrays' data and nested dicts'
        // key tables.
        for &value in &state.values[start..] {
            prefetch_contents(&Borrowed::from_ptr(py, value as *mut ffi::PyObject));
        }
        for position in 0..len {
            let Role::Value { node: child, mask: mask_at } = plan.role(position) else { continue };
            let value = Borrowed::from_ptr(py, state.values[start + position] as *mut ffi::PyObject);
            let mask = match mask_at {
                None => mask,
                // Combining two masks takes a buffer: left to the planned walk.
                Some(_) if mask.is_some() => return false,
                Some(m) => {
                    let own = Borrowed::from_ptr(py, state.values[start + m] as *mut ffi::PyObject);
                    let Some((data, len)) = exact_mask(&own, self.rows) else { return false };
                    state.owners.push(own.as_ptr() as usize);
                    if all_zero(self.coll.slice(Src::External(data, len))) {
                        continue; // no env has it at this step
                    }
                    Some(Src::External(data, len))
                }
            };
            // By its type's address: a failed `cast` builds an error, which costs a reference
            // to the type each way.
            if ffi::PyDict_CheckExact(value.as_ptr()) != 0 {
                if !self.dict(state, &value.cast_unchecked::<PyDict>(), child, mask, depth + 1) {
                    return false;
                }
                continue;
            }
            let Some(column) = self.keys.node(child).column else { return false };
            let col = &self.columns[column];
            let Some((data, len)) = col.exact.as_ref().and_then(|e| e.data(&value, Some(self.rows))) else {
                return false;
            };
            state.owners.push(value.as_ptr() as usize);
            state.entries.push((col.id, mask, Src::External(data, len)));
        }
        state.values.truncate(start);
        true
    }
}
