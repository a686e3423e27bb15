//! Rendered frames (`render_frames=True`): what `env.render()` returned after each reset and
//! step, one frame per observation row, in the observation-timeline column `render/frame`. The
//! column is made on the first frame and masked, exactly like an info entry (`DynamicColumns`):
//! a sub-env without a frame at a row, or a frame that does not fit the column (another shape),
//! leaves that row masked, with the same warnings and counts as an info value left out.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trajcore_core::writer::EntryKind;

use crate::errors::invalid;
use crate::infos::{DynamicColumns, Walk};
use trajcore_core::writer::entries::collect::Place;

/// The column's name is `render/frame`: the group, then the frame's name in it.
pub const GROUP: &str = "render";
const PATH: &str = "frame";

/// Entries for the frames of a reset or a step. `frames` is one frame (one env), or for a
/// vector recorder (`rows` = the env count) a sequence of one frame per sub-env (what
/// `envs.render()` returns) or one array over the sub-envs. `None` (for the whole call or
/// one sub-env) leaves those rows masked. Each frame is borrowed, then copied once, into the
/// ring: a sequence is not stacked first.
pub fn put(columns: &mut DynamicColumns, w: &mut Walk<'_, '_>, frames: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let Some(frames) = frames.filter(|f| !f.is_none()) else { return Ok(()) };
    let Some(n) = w.at.rows else { return columns.put_one(w, PATH, frames) };
    if let Ok(array) = frames.cast::<PyUntypedArray>() {
        if array.dtype().kind() != b'O' {
            return columns.put_one(w, PATH, frames);
        }
    }
    let given = frames.len()?;
    if given != n {
        return Err(invalid(w.py, format!("render_frames: expected one frame per sub-env ({n}), got {given}")));
    }
    for env in 0..n {
        let frame = frames.get_item(env)?;
        if frame.is_none() {
            continue;
        }
        // One row, for this sub-env only.
        let at = Place { kind: EntryKind::PerEnv, env: env as u32, ..Place::regular(None) };
        let one = &mut Walk { py: w.py, at, recorder: &mut *w.recorder, coll: &mut *w.coll };
        columns.put_one(one, PATH, &frame)?;
    }
    Ok(())
}
