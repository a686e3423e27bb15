//! A recorder's columns made on first sight, by where their values come from: info entries,
//! custom data (`record`, kept for the coming step) and rendered frames; the values left out of
//! them, for `stats()` and at close; and which rows a call's rendered frames go to
//! (`frame_places`). `C`, `T`, `S`, `V`: the caller's column, value kind, key text and held value
//! (see `DynamicColumns` and `InfoColumns`).

use super::collect::Place;
use super::dynamic::{DynamicColumns, PendingData};
use super::info_walk::InfoColumns;
use crate::writer::message::Slot;
use crate::writer::RecorderConfig;
use crate::{Error, Result, Timeline};

#[derive(Debug)]
pub struct FirstSight<C, T, S, V> {
    pub infos: InfoColumns<C, T, S, V>,
    pub data: DynamicColumns<C, T>,
    /// Rendered frames (`render/frame`: what `env.render()` returned after each reset and step,
    /// one per observation row), when the caller passes them: made and masked as an info entry.
    pub frames: DynamicColumns<C, T>,
    /// Custom data recorded for the coming step.
    pub pending_data: PendingData<V>,
}

/// The frames' column is `render/frame`: the group, then the frame's name in it.
pub const FRAME: &str = "frame";

impl<C, T: PartialEq, S, V> FirstSight<C, T, S, V> {
    /// With `plans` false, info dicts are walked key by key (see `InfoColumns::new`).
    pub fn new(config: &RecorderConfig, plans: bool) -> Self {
        FirstSight {
            infos: InfoColumns::new(config.info_codec.clone(), plans),
            data: DynamicColumns::new("data", Timeline::Step, config.data_codec()),
            frames: DynamicColumns::new("render", Timeline::Obs, config.frame_codec()),
            pending_data: PendingData::default(),
        }
    }

    /// Values left out so far, by column name (for `stats()`).
    pub fn not_recorded(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        [&self.infos.columns, &self.data, &self.frames].into_iter().flat_map(|c| c.skips.counts())
    }

    /// At close: the warnings of the values left out (forgotten then); custom data recorded
    /// for a step that never came is dropped.
    pub fn close(&mut self) -> Vec<String> {
        self.pending_data.clear();
        [&mut self.infos.columns, &mut self.data, &mut self.frames]
            .into_iter()
            .flat_map(|c| c.skips.close_warnings())
            .collect()
    }
}

/// Where a call's rendered frames go, on the regular observation row: `(None, place)`, the
/// value as it is, for one env or an array over the envs (`per_env` None); else one frame per
/// sub-env, `(Some(env), place)`, of a sequence of `per_env` of them (`rows`: the env count of
/// a vector recorder). In same-step autoreset, an ended sub-env has already been reset when it
/// is rendered, so its frame is the new episode's first and the ended episode's final row has
/// none (masked).
pub fn frame_places(rows: Option<usize>, per_env: Option<usize>) -> Result<Vec<(Option<usize>, Place)>> {
    match (rows, per_env) {
        (Some(n), Some(given)) if given != n => {
            Err(Error::Invalid(format!("render_frames: expected one frame per sub-env ({n}), got {given}")))
        }
        (Some(n), Some(_)) => Ok((0..n).map(|env| (Some(env), Place::env(env, Slot::Regular))).collect()),
        _ => Ok(vec![(None, Place::regular(rows))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::EntryKind;

    #[test]
    fn frames_go_whole_or_one_per_sub_env() {
        let per_env = |env: u32| Place { kind: EntryKind::PerEnv, slot: Slot::Regular, env, rows: None };
        let why = "render_frames: expected one frame per sub-env (2), got 3";
        // (the env count of a vector recorder, the frames given one per sub-env, where they go)
        type Case = (Option<usize>, Option<usize>, std::result::Result<Vec<(Option<usize>, Place)>, &'static str>);
        let table: [Case; 5] = [
            (None, None, Ok(vec![(None, Place::regular(None))])),
            (None, Some(3), Ok(vec![(None, Place::regular(None))])), // one env: the value as it is
            (Some(2), None, Ok(vec![(None, Place::regular(Some(2)))])), // an array over the envs
            (Some(2), Some(2), Ok(vec![(Some(0), per_env(0)), (Some(1), per_env(1))])),
            (Some(2), Some(3), Err(why)),
        ];
        for (rows, given, want) in table {
            let got = frame_places(rows, given).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(String::from), "{rows:?} {given:?}");
        }
    }

    #[test]
    fn values_left_out_are_counted_then_told_at_close() {
        let config = serde_json::json!({
            "columns": [{"id": 0, "name": "action/a", "dtype": "int64", "shape": [], "timeline": "step"}],
            "observation": {"dict": []},
            "action": {"leaf": "action/a"},
        });
        let config = RecorderConfig::from_json(&config.to_string()).unwrap();
        let mut sight = FirstSight::<u8, u8, String, u8>::new(&config, true);
        assert!(sight.data.skips.skip("x", "why".into()).is_some());
        assert!(sight.frames.skips.skip(FRAME, "why".into()).is_some());
        sight.pending_data.set("x".into(), 1);
        let counted: Vec<_> = sight.not_recorded().collect();
        assert_eq!(counted, [("data/x".to_string(), 1), ("render/frame".to_string(), 1)]);
        assert_eq!(sight.close().len(), 2);
        assert!(sight.pending_data.take().is_empty() && sight.not_recorded().next().is_none());
    }
}
