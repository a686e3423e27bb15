//! Rendered frames (`render_frames=True`): what `env.render()` returned after each reset and
//! step, one frame per observation row, in the observation-timeline column `render/frame`. The
//! column is made on the first frame and masked, exactly like an info entry (`DynamicColumns`):
//! a sub-env without a frame at a row, or a frame that does not fit the column (another shape),
//! leaves that row masked, with the same warnings and counts as an info value left out.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use trajcore_core::writer::{EntryKind, Recorder};
use trajcore_core::{CodecSpec, Timeline};

use crate::collect::Collector;
use crate::errors::invalid;
use crate::infos::{DynamicColumns, Place};

/// The column's name is `render/frame`: the group, then the frame's name in it.
const GROUP: &str = "render";
const PATH: &str = "frame";

pub struct Frames {
    columns: DynamicColumns,
}

impl Frames {
    pub fn new(codec: CodecSpec) -> Self {
        Frames { columns: DynamicColumns::new(GROUP, Timeline::Obs, codec) }
    }

    /// Entries for the frames of a reset or a step. `frames` is one frame (one env), or for a
    /// vector recorder (`rows` = the env count) a sequence of one frame per sub-env (what
    /// `envs.render()` returns) or one array over the sub-envs. `None` (for the whole call or
    /// one sub-env) leaves those rows masked. Each frame is borrowed, then copied once, into the
    /// ring: a sequence is not stacked first.
    pub fn put(
        &mut self,
        py: Python<'_>,
        frames: &Bound<'_, PyAny>,
        rows: Option<usize>,
        recorder: &mut Recorder,
        coll: &mut Collector,
    ) -> PyResult<()> {
        if frames.is_none() {
            return Ok(());
        }
        let at = Place::regular;
        let Some(n) = rows else {
            return self.columns.put_one(py, PATH, frames, at(None), recorder, coll);
        };
        if let Ok(array) = frames.cast::<PyUntypedArray>() {
            if array.dtype().kind() != b'O' {
                return self.columns.put_one(py, PATH, frames, at(Some(n)), recorder, coll);
            }
        }
        let given = frames.len()?;
        if given != n {
            return Err(invalid(py, format!("render_frames: expected one frame per sub-env ({n}), got {given}")));
        }
        for env in 0..n {
            let frame = frames.get_item(env)?;
            if frame.is_none() {
                continue;
            }
            let before = coll.entries.len();
            self.columns.put_one(py, PATH, &frame, at(None), recorder, coll)?;
            // One row, for this sub-env only (nothing was added if the frame was left out).
            if let Some(entry) = coll.entries.get_mut(before) {
                entry.kind = EntryKind::PerEnv;
                entry.env = env as u32;
            }
        }
        Ok(())
    }

    /// See `DynamicColumns::warn_skipped`.
    pub fn warn_skipped(&mut self, py: Python<'_>) -> PyResult<()> {
        self.columns.warn_skipped(py)
    }

    /// Frames left out so far, by column name (for `stats()`).
    pub fn skipped_counts(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.columns.skipped_counts()
    }
}
