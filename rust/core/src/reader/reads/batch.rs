//! A batch for training read whole into caller-owned outputs: the windows a request asks for
//! (`request`), the fields of a plan (`plan`), which episode and step each row is, and the
//! padding mask; lenient reads leave damaged episodes out and say so (`Damage::warning`).

use std::mem::MaybeUninit;

use super::gather::{Field, Out, Window};
use super::request::Request;
use super::steps::{resolve_index, EpisodeSet};
use super::stream::put_i64s;
use crate::reader::dataset_view::DatasetView;
use crate::reader::integrity::damage::Damage;
use crate::reader::integrity::lenient::{Draw, Redraw};
use crate::reader::reads::scan::runs::IndexOut;
use crate::reader::reads::steps::WindowKind;
use crate::Result;

/// Where a batch goes: one output per field (`len * kind.length` rows each), the episode of
/// each window and the step of each row (little-endian int64), and for padded sequences which
/// rows are real (one byte each, 0 or 1). Every byte gets written.
pub struct BatchOut<'a> {
    pub fields: Vec<Out<'a>>,
    pub episodes: &'a mut [MaybeUninit<u8>],
    pub steps: &'a mut [MaybeUninit<u8>],
    pub mask: Option<&'a mut [MaybeUninit<u8>]>,
}

impl<'a> BatchOut<'a> {
    /// The outputs of a batch in `BatchPlan::outputs`' order: `fields` field outputs, then the
    /// indexes (fixed-size, as the plan makes them).
    ///
    /// Panics if an index output is missing or is a str output.
    pub fn new(mut outs: Vec<Out<'a>>, fields: usize) -> Self {
        let mut indexes = outs.split_off(fields).into_iter().map(|out| match out {
            Out::Uninit(bytes) => bytes,
            _ => panic!("index outputs are uninitialized bytes"),
        });
        let episodes = indexes.next().expect("an episode_index output");
        let steps = indexes.next().expect("a step_index output");
        BatchOut { fields: outs, episodes, steps, mask: indexes.next() }
    }
}

impl DatasetView<'_> {
    /// Reads the windows `request` asks for of `set` into `out`. Returns the damage found
    /// (lenient reads redraw the windows it affects; see `gather_lenient`).
    ///
    /// Errors: those of `Request::windows`, `gather_lenient` and `read_range`.
    pub fn read_batch(
        &self,
        set: &EpisodeSet,
        fields: &[Field],
        request: Request,
        kind: WindowKind,
        mut out: BatchOut<'_>,
    ) -> Result<Vec<Damage>> {
        if let (Request::Range { first, n }, false) = (&request, kind.sequence) {
            let indexes = IndexOut { episodes: out.episodes, steps: out.steps };
            let (_, found) = self.read_range(set, fields, *first, *n as u64, &mut out.fields, Some(indexes))?;
            return Ok(found);
        }
        let redraw = request.redraw();
        let mut windows = request.windows(set, self.episodes().len(), kind)?;
        let mut bools = out.mask.as_ref().map(|m| vec![false; m.len()]);
        let draw = Draw { set, redraw: &redraw, kind, fields };
        let found = self.gather_lenient(draw, &mut windows, &mut out.fields, bools.as_deref_mut())?;
        // The windows read (redrawn ones included) are what the indexes report.
        let l = kind.length;
        put_i64s(out.episodes, windows.iter().map(|w| w.episode as i64));
        put_i64s(out.steps, windows.iter().flat_map(|w| (0..l as u64).map(move |j| (w.start + j) as i64)));
        if let (Some(m), Some(b)) = (out.mask, bools) {
            m.iter_mut().zip(b).for_each(|(m, b)| *m = MaybeUninit::new(b as u8));
        }
        Ok(found)
    }

    /// Reads step `number` of `set` (negative from the end) into `fields` (one row each).
    /// Returns (episode, step within it). A step asked for by number is not redrawn: its
    /// episode's damage is an error (and sampling leaves the episode out).
    ///
    /// Errors: `OutOfRange`; those of `gather_lenient`.
    pub fn read_step(&self, set: &EpisodeSet, fields: &[Field], number: i64, out: &mut [Out<'_>]) -> Result<Window> {
        let (episode, start) = set.locate_step(resolve_index(number, set.num_steps(), "step")?)?;
        let mut windows = [Window { episode, start }];
        let draw = Draw { set, redraw: &Redraw::Never, kind: WindowKind::TRANSITION, fields };
        self.gather_lenient(draw, &mut windows, out, None)?;
        Ok(windows[0])
    }

    /// The dataset index of episode `index` (negative from the end).
    ///
    /// Errors: `OutOfRange`.
    pub fn episode_index(&self, index: i64) -> Result<usize> {
        Ok(resolve_index(index, self.episodes().len() as u64, "episode")? as usize)
    }

    /// The set of dataset episodes `indexes` (negative from the end), in that order.
    ///
    /// Errors: `OutOfRange`.
    pub fn episode_set_at(&self, indexes: &[i64]) -> Result<EpisodeSet> {
        self.episode_set(&indexes.iter().map(|&i| self.episode_index(i)).collect::<Result<Vec<_>>>()?)
    }
}
