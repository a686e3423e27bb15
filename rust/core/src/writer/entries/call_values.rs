//! One recorder call's values, from the host's objects to one message: a reset's or a step's
//! observation and action walked by their layout trees into the fixed columns, the step's
//! reward, terminated and truncated, the info dict, the rendered frames, same-step autoreset's
//! final observations and infos, and the custom data recorded for the step; checked, collected,
//! then sent (or, after a bad value, nothing sent and every env's episode ended: `call`). The
//! host (`Recording`, a Python object in the bindings) answers questions about its values and
//! makes its columns; which is asked when, and what the answers make, is decided here.

use std::fmt::Display;

use super::collect::{Collector, Place, Src};
use super::dynamic::{data_path, Host};
use super::first_sight::{frame_places, FirstSight, FRAME};
use super::info_keys::info_expected;
use super::info_walk::Dicts;
use super::reading::fit::Fit;
use super::reading::value::Input;
use super::reading::values::Misfit;
use super::reading::{self, arrayish, Class, Object};
use crate::host::{HostDicts, HostValues};
use crate::layout::Layout;
use crate::writer::{AutoresetMode, MessageKind, NewColumn, Recorder, Slot, Stats};
use crate::{DType, Error, Result};

/// What a recorder call asks of the host beside reading its values (`Object`, `HostDicts`):
/// `C` is the host's column, `K` the owners the collector keeps alive.
pub trait Recording<C, K>: Object<C, K> + HostDicts + Copy {
    /// What is kept of a value that made no column (a Python type), to refuse one of its kind
    /// again without reading it.
    type Kind: PartialEq;
    fn kind(&self, value: &Self::Value) -> Self::Kind;
    /// The host's column of a column whose values fit `fit` (made once, for the step path).
    fn column(&self, fit: Fit) -> std::result::Result<C, Self::Error>;
    /// How values fit `column` (the `Fit` it was made of).
    fn fit<'c>(&self, column: &'c C) -> &'c Fit;
    /// Its length, or the host's error where it has none.
    fn length(&self, value: &Self::Value) -> std::result::Result<usize, Self::Error>;
    /// The host's truth of a value (an item of gymnasium's `_final_obs` mask).
    fn truthy(&self, value: &Self::Value) -> std::result::Result<bool, Self::Error>;
    /// Tells the user a value is not recorded (a Python warning).
    fn warn(&self, warning: &str) -> std::result::Result<(), Self::Error>;
}

/// A result with the host's error (a Python exception in the bindings).
type Of<H, T> = std::result::Result<T, <H as HostValues>::Error>;

const OBSERVATION: usize = 0;
const ACTION: usize = 1;

/// A recorder and what its calls need between them. `C`, `T`, `S`, `V`, `K`: the host's column,
/// value kind (`Recording::Kind`), key text and held value (`HostDicts`), collector owners.
pub struct CallValues<C, T, S, V, K> {
    pub rec: Recorder,
    /// Observation and action leaf columns, then reward, terminated, truncated, by column id.
    fixed: Vec<C>,
    /// The observation and action layouts (`OBSERVATION`, `ACTION`), with what errors call them.
    trees: [(Layout<usize, S>, &'static str); 2],
    /// The env count when values carry a leading env axis (vector envs), `None` for one env.
    rows: Option<usize>,
    /// Info entries, custom data and rendered frames: columns made on first sight.
    sight: FirstSight<C, T, S, V>,
    /// Empty between calls, whatever happens.
    coll: Collector<K>,
    /// Same-step autoreset's info keys: `final_obs`, `_final_obs`, `final_info`.
    finals: [S; 3],
}

impl<C, T: PartialEq, S: Display, V, K> CallValues<C, T, S, V, K> {
    /// With `plans` false, info dicts are walked key by key (see `InfoColumns::new`).
    pub fn new<H>(h: H, rec: Recorder, plans: bool) -> Of<H, Self>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        let fit = |id| rec.fit(id).map_err(|e| h.error(e)).and_then(|fit| h.column(fit));
        let fixed = (0..rec.columns().len() as u32).map(fit).collect::<Of<H, Vec<C>>>()?;
        let leaf = |name: &str| rec.column_id(name).map(|id| id as usize);
        let parse = |tree| {
            let parsed = Layout::parse_as(tree, &leaf, &mut |key| h.intern(key));
            parsed.map_err(|why| h.error(Error::Invalid(format!("layout: {why}"))))
        };
        let trees = [(parse(&rec.config().observation)?, "observation"), (parse(&rec.config().action)?, "action")];
        Ok(CallValues {
            fixed,
            trees,
            rows: rec.config().rows(),
            sight: FirstSight::new(rec.config(), plans),
            coll: Collector::default(),
            finals: ["final_obs", "_final_obs", "final_info"].map(|key| h.intern(key)),
            rec,
        })
    }

    /// A reset's values (`mask`: the envs it starts, of a vector recorder); see `call` for the
    /// two results and `wait`.
    pub fn reset<H>(
        &mut self,
        h: H,
        (observation, info): (&H::Value, &H::Value),
        mask: Option<&H::Value>,
        frame: Option<&H::Value>,
        wait: impl FnOnce(&mut Recorder, usize) -> Result<()>,
    ) -> Of<H, Result<()>>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        self.call(h, MessageKind::Reset, wait, |cv| {
            cv.put_tree(h, OBSERVATION, observation, Place::regular(cv.rows))?;
            cv.put_info(h, info, Slot::Regular)?;
            cv.put_frame(h, frame)?;
            if let Some(mask) = mask {
                let n =
                    cv.rows.ok_or_else(|| h.error(Error::Invalid("a reset mask needs a vector recorder".into())))?;
                cv.coll.head_mask = Some(put_mask(h, mask, n, "reset mask", &mut cv.coll)?);
            }
            Ok(())
        })
    }

    /// A step's values: the action, then gymnasium's step tuple (observation, reward,
    /// terminated, truncated, info); see `call`.
    pub fn step<H>(
        &mut self,
        h: H,
        [action, observation, reward, terminated, truncated, info]: [&H::Value; 6],
        frame: Option<&H::Value>,
        wait: impl FnOnce(&mut Recorder, usize) -> Result<()>,
    ) -> Of<H, Result<()>>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        self.call(h, MessageKind::Step, wait, |cv| {
            let at = Place::regular(cv.rows);
            cv.put_tree(h, ACTION, action, at)?;
            cv.put_tree(h, OBSERVATION, observation, at)?;
            for (role, value) in cv.rec.role_columns().into_iter().zip([reward, terminated, truncated]) {
                put_leaf(h, (&cv.rec, &cv.fixed[..]), role as usize, value, at, &mut cv.coll)?;
            }
            cv.put_info(h, info, Slot::Regular)?;
            cv.put_frame(h, frame)?;
            if let (AutoresetMode::SameStep, Some(n)) = (cv.rec.config().autoreset_mode, cv.rows) {
                cv.put_finals(h, info, n)?;
            }
            for (path, value) in cv.sight.pending_data.take() {
                let (sight, coll, mut caller) = cv.caller(h, true);
                warned(h, sight.data.put(&mut caller, &h.held(&value), coll, (at, None), &path)?)?;
            }
            Ok(())
        })
    }

    /// Checks custom data `value` of `name` now (its column made on first sight), as it is (not
    /// stacked), and keeps it for the coming step; the collector is used as scratch.
    pub fn record<H>(&mut self, h: H, name: &str, value: V) -> Of<H, ()>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        let path = self.rec.check().and_then(|()| data_path(name)).map_err(|e| h.error(e))?;
        let rows = self.rows;
        let (sight, coll, mut caller) = self.caller(h, false);
        let checked = sight.data.check(&mut caller, &h.held(&value), coll, rows, &path);
        coll.clear();
        checked?.map_err(|e| h.error(e))?;
        sight.pending_data.set(path, value);
        Ok(())
    }

    /// The recorder's stats, with the values left out of the columns made on first sight.
    pub fn stats(&self) -> Stats {
        let mut stats = self.rec.stats();
        stats.values_not_recorded.extend(self.sight.not_recorded());
        stats
    }

    /// At close: the values left out, then the recorder's own warnings.
    pub fn close_warnings(&mut self) -> Vec<String> {
        let mut warnings = self.sight.close();
        warnings.extend(self.rec.close_warnings());
        warnings
    }

    /// Checks the recorder, collects a call's values with `collect` and sends them as a `kind`
    /// message; when the ring has no room yet, `wait(recorder, len)` waits for it (the bindings
    /// release the GIL there). A message that cannot be sent ends the episodes it touched
    /// (`autoreset::Splitter::refuse`): the inner result. After a bad value (the outer error)
    /// nothing is sent: the running episodes end incomplete, keeping what they recorded, and
    /// each env's next episode records again.
    fn call<H>(
        &mut self,
        h: H,
        kind: MessageKind,
        wait: impl FnOnce(&mut Recorder, usize) -> Result<()>,
        collect: impl FnOnce(&mut Self) -> Of<H, ()>,
    ) -> Of<H, Result<()>>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        self.rec.check().map_err(|e| h.error(e))?;
        if let Err(error) = collect(self) {
            self.coll.clear();
            self.sight.pending_data.clear();
            let _ = self.rec.abort(None); // every env: no index to refuse, it cannot fail
            return Err(error);
        }
        let sent = self.rec.send_collected(&self.coll, kind, wait);
        self.coll.clear();
        Ok(sent)
    }

    /// The first-sight columns, the collector and the caller that reads values into them,
    /// apart; `stacks`: see `Caller`.
    fn caller<H>(&mut self, host: H, stacks: bool) -> Apart<'_, C, T, S, V, K, H> {
        (&mut self.sight, &mut self.coll, Caller { host, rec: &mut self.rec, stacks })
    }

    fn put_tree<H>(&mut self, h: H, tree: usize, value: &H::Value, at: Place) -> Of<H, ()>
    where
        H: Recording<C, K, Str = S>,
    {
        let ((layout, what), fixed, coll) = (&self.trees[tree], (&self.rec, &self.fixed[..]), &mut self.coll);
        layout.walk_value(&h, value, what, &mut |&index, leaf| put_leaf(h, fixed, index, leaf, at, coll))
    }

    /// Entries for every supported entry of an info dict (vector infos: with their `_key`
    /// masks); `slot` Final: same-step autoreset's `final_info`.
    fn put_info<H>(&mut self, h: H, info: &H::Value, slot: Slot) -> Of<H, ()>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        let Some(dict) = h.dict(info) else {
            return Err(h.error(Error::Invalid(format!("{}, got {}", info_expected(slot), h.type_name(info)))));
        };
        let at = Place { slot, ..Place::regular(self.rows) };
        let (sight, coll, mut caller) = self.caller(h, true);
        sight.infos.put_info(&mut caller, coll, at, dict)
    }

    /// The frame(s) rendered after this reset or step (see `frame_places`): a sequence of one
    /// per sub-env (what `envs.render()` returns) is put frame by frame, each copied once into
    /// the ring, not stacked first; a `None` frame leaves its rows masked.
    fn put_frame<H>(&mut self, h: H, frames: Option<&H::Value>) -> Of<H, ()>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        let Some(frames) = frames else { return Ok(()) };
        // An array of numbers is the frames over the envs; a sequence (or object array) is per env.
        let whole = h.array_kind(frames).is_some_and(|(kind, _)| kind != b'O');
        let per_env = if whole || self.rows.is_none() { None } else { Some(h.length(frames)?) };
        for (env, at) in frame_places(self.rows, per_env).map_err(|e| h.error(e))? {
            let frame = env.map_or_else(|| Ok(frames.clone()), |env| h.item(frames, env))?;
            if !h.is(&frame, Class::None)? {
                let (sight, coll, mut caller) = self.caller(h, true);
                warned(h, sight.frames.put(&mut caller, &frame, coll, (at, None), FRAME)?)?;
            }
        }
        Ok(())
    }

    /// Same-step autoreset: the final observation and info of the envs whose episode ended
    /// (gymnasium's `_final_obs` mask, else a None observation, says which: read here item by
    /// item, as each observation is walked, so an env the mask leaves out is not read at all).
    fn put_finals<H>(&mut self, h: H, info: &H::Value, n: usize) -> Of<H, ()>
    where
        H: Recording<C, K, Kind = T, Str = S, Held = V>,
    {
        if let Some(final_obs) = h.get(info, &self.finals[0])? {
            let mask = h.get(info, &self.finals[1])?;
            for env in 0..n {
                let obs = match &mask {
                    Some(m) if !h.truthy(&h.item(m, env)?)? => continue,
                    _ => h.item(&final_obs, env)?,
                };
                if mask.is_some() || !h.is(&obs, Class::None)? {
                    self.put_tree(h, OBSERVATION, &obs, Place::env(env, Slot::Final))?;
                }
            }
        }
        if let Some(final_info) = h.get(info, &self.finals[2])? {
            self.put_info(h, &final_info, Slot::Final)?;
        }
        Ok(())
    }
}

/// A call's first-sight columns, its collector and the caller that reads values into them.
type Apart<'a, C, T, S, V, K, H> = (&'a mut FirstSight<C, T, S, V>, &'a mut Collector<K>, Caller<'a, H>);

/// One value of fixed column `id` (`fixed`: the recorder and its fixed columns) as one entry.
// Inlined into the tree walk and the step (a call per value), as `reading::put`.
#[inline]
fn put_leaf<H: Recording<C, K>, C, K>(
    h: H,
    (rec, fixed): (&Recorder, &[C]),
    id: usize,
    value: &H::Value,
    at: Place,
    coll: &mut Collector<K>,
) -> Of<H, ()> {
    let column = &fixed[id];
    let data = reading::put(&h, value, (column, h.fit(column)), at.rows, coll)?;
    let data = data.map_err(|why| h.error(Error::schema(&rec.column(id as u32).name, why)))?;
    coll.push(id as u32, at, None, data);
    Ok(())
}

/// A boolean mask over `n` envs (`reading::mask`); `what` names it in the error.
fn put_mask<H: Recording<C, K>, C, K>(
    h: H,
    mask: &H::Value,
    n: usize,
    what: &str,
    coll: &mut Collector<K>,
) -> Of<H, Src> {
    reading::mask(&h, mask, n, what, coll)?.map_err(|why| h.error(Error::Invalid(why)))
}

/// Tells of a value left out, when the core says to.
fn warned<H: Recording<C, K>, C, K>(h: H, warning: Option<String>) -> Of<H, ()> {
    warning.map_or(Ok(()), |warning| h.warn(&warning))
}

/// The caller of the columns made on first sight (`Host`, `Dicts`): the host's values, the
/// recorder that takes the columns they make, and whether an object array of per-env rows is
/// stacked first (see `reading::read_stacked`: an env's value is; a value of the user's own,
/// `record`'s, is checked as it is).
pub struct Caller<'r, H> {
    host: H,
    rec: &'r mut Recorder,
    stacks: bool,
}

impl<H: Recording<C, K>, C, K> Host<C, H::Kind, K> for Caller<'_, H> {
    type Value = H::Value;
    type Error = H::Error;

    fn kind(&mut self, value: &H::Value) -> Of<H, Option<H::Kind>> {
        Ok((!arrayish(&self.host, value)?).then(|| self.host.kind(value)))
    }

    fn read(
        &mut self,
        value: &H::Value,
        column: Option<&C>,
        (rows, mask): (Option<usize>, Option<Src>),
        coll: &mut Collector<K>,
    ) -> Of<H, Input> {
        let column = column.map(|c| (c, self.host.fit(c)));
        reading::read_stacked(&self.host, value, column, (rows, mask, self.stacks), coll)
    }

    fn add(&mut self, spec: NewColumn) -> Of<H, (u32, C)> {
        let id = self.rec.add_column(spec).map_err(|e| self.host.error(e))?;
        let fit = self.rec.fit(id).map_err(|e| self.host.error(e))?;
        Ok((id, self.host.column(fit)?))
    }

    fn why(&self, value: &H::Value, dtype: DType, misfit: Misfit) -> String {
        reading::why(&self.host, value, dtype, misfit)
    }
}

impl<H: Recording<C, K>, C, K> Dicts<C, H::Kind, K> for Caller<'_, H> {
    type Values = H;

    fn values(&self) -> H {
        self.host
    }

    fn mask(&mut self, value: &H::Value, n: usize, coll: &mut Collector<K>) -> Of<H, Src> {
        put_mask(self.host, value, n, "an info mask", coll)
    }

    fn warn(&self, warning: &str) -> Of<H, ()> {
        self.host.warn(warning)
    }

    fn refuse(&self, column: &str, why: String) -> H::Error {
        self.host.error(Error::schema(column, why))
    }
}

#[cfg(test)]
mod tests {
    use super::super::info_walk::tests::{dict, Infos, V};
    use super::*;
    use crate::reader::{ColumnData, Dataset, OpenOptions};
    use crate::writer::{mask_name, RecorderConfig};

    /// The info walk's test host, as a recorder's: its columns are their `Fit`s.
    impl Recording<Fit, ()> for Infos {
        type Kind = u8;
        fn kind(&self, _: &V) -> u8 {
            0
        }
        fn column(&self, fit: Fit) -> std::result::Result<Fit, String> {
            Ok(fit)
        }
        fn fit<'c>(&self, column: &'c Fit) -> &'c Fit {
            column
        }
        fn length(&self, value: &V) -> std::result::Result<usize, String> {
            self.len(value).ok_or_else(|| "no length".into())
        }
        fn truthy(&self, value: &V) -> std::result::Result<bool, String> {
            match value {
                V::Int(i) => Ok(*i != 0),
                _ => Err(format!("no truth of {value:?}")),
            }
        }
        fn warn(&self, _: &str) -> std::result::Result<(), String> {
            Ok(())
        }
    }

    type Calls = CallValues<Fit, u8, String, V, ()>;

    /// A recorder of an int64 `obs` and `act` over `envs` envs (`None`: one env, unbatched).
    fn calls(dir: &std::path::Path, envs: Option<usize>, mode: &str) -> Calls {
        let config = serde_json::json!({
            "num_envs": envs.unwrap_or(1), "batched": envs.is_some(), "autoreset_mode": mode,
            "columns": [
                {"id": 0, "name": "obs", "dtype": "int64", "shape": [], "timeline": "obs"},
                {"id": 0, "name": "act", "dtype": "int64", "shape": [], "timeline": "step"},
            ],
            "observation": {"leaf": "obs"},
            "action": {"leaf": "act"},
        });
        let rec = Recorder::create(dir, RecorderConfig::from_json(&config.to_string()).unwrap()).unwrap();
        Calls::new(Infos, rec, true).unwrap()
    }

    fn floats(items: &[f64]) -> V {
        V::Array(b'f', items.iter().flat_map(|f| f.to_le_bytes()).collect())
    }

    fn bools(items: &[bool]) -> V {
        V::Array(b'b', items.iter().map(|&b| b as u8).collect())
    }

    fn wait(rec: &mut Recorder, len: usize) -> Result<()> {
        rec.wait_for_space(len)
    }

    fn reset(cv: &mut Calls, obs: V, info: V, frame: Option<V>) {
        cv.reset(Infos, (&obs, &info), None, frame.as_ref(), wait).unwrap().unwrap();
    }

    /// A step of `obs`, `terminated` (the action: 0, no reward, not truncated) and `info`.
    fn step(cv: &mut Calls, obs: V, terminated: &[bool], info: V, frame: Option<V>) -> std::result::Result<(), String> {
        let n = terminated.len();
        let (act, reward, truncated) = (V::ints(&vec![0; n]), floats(&vec![0.0; n]), bools(&vec![false; n]));
        let values = [&act, &obs, &reward, &bools(terminated), &truncated, &info];
        cv.step(Infos, values, frame.as_ref(), wait).map(|sent| sent.unwrap())
    }

    /// One-row values: the vector recorder's are arrays of one env.
    fn one(items: &[i64]) -> V {
        V::ints(items)
    }

    fn int64s(data: ColumnData) -> Vec<i64> {
        let ColumnData::Fixed { bytes, .. } = data else { panic!("a str column") };
        bytes.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    /// Closes it and reads each episode back, by env: its env, whether complete, and
    /// `column`'s values with `None` where masked.
    fn episodes(mut cv: Calls, dir: &std::path::Path, column: &str) -> Vec<(u32, bool, Vec<Option<i64>>)> {
        cv.rec.close().unwrap();
        let ds = Dataset::open(dir, OpenOptions::default()).unwrap();
        let mut got: Vec<_> = (0..ds.episodes().len())
            .map(|i| {
                let values = int64s(ds.view().read_episode_column(i, column).unwrap());
                let mask = match ds.view().read_episode_column(i, &mask_name(column)) {
                    Ok(ColumnData::Fixed { bytes, .. }) => bytes.iter().map(|&b| b != 0).collect(),
                    _ => vec![true; values.len()],
                };
                let values = values.iter().zip(mask).map(|(&v, set)| set.then_some(v)).collect();
                let summary = &ds.episodes()[i].summary;
                (summary.lane, summary.complete(), values)
            })
            .collect();
        got.sort_by_key(|e| e.0);
        got
    }

    #[test]
    fn resets_and_steps_of_one_env_and_of_vector_envs_are_recorded() {
        type Episodes = Vec<(u32, bool, Vec<Option<i64>>)>;
        // (the env count of a vector recorder, the observations of a reset and two steps, which
        // envs each step terminates, the episodes by their observations)
        type Case = (Option<usize>, [Vec<i64>; 3], [Vec<bool>; 2], Episodes);
        let table: [Case; 2] = [
            (
                None,
                [vec![1], vec![2], vec![3]],
                [vec![false], vec![true]],
                vec![(0, true, vec![Some(1), Some(2), Some(3)])],
            ),
            (
                Some(2),
                [vec![1, 10], vec![2, 20], vec![3, 30]],
                [vec![false, false], vec![false, true]],
                vec![(0, false, vec![Some(1), Some(2), Some(3)]), (1, true, vec![Some(10), Some(20), Some(30)])],
            ),
        ];
        for (envs, [first, second, third], [done1, done2], want) in table {
            let dir = tempfile::tempdir().unwrap();
            let mut cv = calls(dir.path(), envs, "next_step");
            reset(&mut cv, one(&first), dict(&[]), None);
            step(&mut cv, one(&second), &done1, dict(&[]), None).unwrap();
            step(&mut cv, one(&third), &done2, dict(&[]), None).unwrap();
            assert_eq!(episodes(cv, dir.path(), "obs"), want, "{envs:?}");
        }
    }

    #[test]
    fn same_step_final_observations_are_read_by_the_mask_else_where_not_none() {
        let (t, f) = (true, false);
        // (`final_obs` of env 0 ending at the step, `_final_obs`): env 1 ended no episode, and
        // the mask leaves it out: its item is never read (reading it fails).
        let table = [
            (V::List(vec![one(&[9]), V::Unreadable]), Some(V::Mask(vec![t, f]))),
            (V::List(vec![one(&[9]), V::None]), None),
        ];
        for (final_obs, mask) in table {
            let dir = tempfile::tempdir().unwrap();
            let mut cv = calls(dir.path(), Some(2), "same_step");
            reset(&mut cv, one(&[1, 10]), dict(&[]), None);
            let mut info = vec![("final_obs", final_obs.clone())];
            info.extend(mask.clone().map(|m| ("_final_obs", m)));
            step(&mut cv, one(&[2, 20]), &[t, f], dict(&info), None).unwrap();
            // Env 0's next episode has its first observation only: no step, no listed episode.
            let want = vec![(0, true, vec![Some(1), Some(9)]), (1, false, vec![Some(10), Some(20)])];
            assert_eq!(episodes(cv, dir.path(), "obs"), want, "{mask:?}");
        }
    }

    #[test]
    fn frames_go_whole_or_one_per_env_and_a_none_frame_leaves_its_row_masked() {
        // (the frames of a reset and of a step over 2 envs, what env 0's and env 1's episodes hold)
        type Case = ([V; 2], [Vec<Option<i64>>; 2]);
        let table: [Case; 2] = [
            ([one(&[1, 2]), one(&[3, 4])], [vec![Some(1), Some(3)], vec![Some(2), Some(4)]]),
            (
                [V::List(vec![one(&[1]), V::None]), V::List(vec![V::None, one(&[4])])],
                [vec![Some(1), None], vec![None, Some(4)]],
            ),
        ];
        for ([at_reset, at_step], [env0, env1]) in table {
            let dir = tempfile::tempdir().unwrap();
            let mut cv = calls(dir.path(), Some(2), "next_step");
            reset(&mut cv, one(&[0, 0]), dict(&[]), Some(at_reset.clone()));
            step(&mut cv, one(&[0, 0]), &[false, false], dict(&[]), Some(at_step)).unwrap();
            let got = episodes(cv, dir.path(), "render/frame");
            assert_eq!(got, vec![(0, false, env0), (1, false, env1)], "{at_reset:?}");
        }
    }

    #[test]
    fn a_bad_value_sends_nothing_and_ends_every_running_episode() {
        let dir = tempfile::tempdir().unwrap();
        let mut cv = calls(dir.path(), Some(2), "next_step");
        reset(&mut cv, one(&[1, 10]), dict(&[]), None);
        step(&mut cv, one(&[2, 20]), &[false, false], dict(&[]), None).unwrap();
        cv.record(Infos, "x", V::ints(&[3, 3])).unwrap();
        // The reward is read after the action and observation were collected.
        let (act, obs, truncated) = (V::ints(&[0, 0]), one(&[5, 50]), bools(&[false, false]));
        let values = [&act, &obs, &V::Str("bad"), &truncated, &truncated, &dict(&[])];
        let refused = cv.step(Infos, values, None, wait).unwrap_err();
        assert!(refused.starts_with("column 'reward': "), "{refused}");
        assert!(cv.coll.entries.is_empty() && cv.coll.bytes.is_empty() && cv.sight.pending_data.take().is_empty());
        // Both envs' episodes ended (incomplete): each skips its rows until it ends that episode.
        step(&mut cv, one(&[3, 30]), &[false, false], dict(&[]), None).unwrap();
        let want = vec![(0, false, vec![Some(1), Some(2)]), (1, false, vec![Some(10), Some(20)])];
        assert_eq!(episodes(cv, dir.path(), "obs"), want, "nothing of the refused step");
    }

    #[test]
    fn custom_data_is_put_once_on_the_next_step() {
        let dir = tempfile::tempdir().unwrap();
        let mut cv = calls(dir.path(), None, "next_step");
        reset(&mut cv, one(&[1]), dict(&[]), None);
        assert_eq!(cv.record(Infos, "_x", V::Int(3)).unwrap_err().split(" must").next(), Some("custom data name '_x'"));
        cv.record(Infos, "x", V::Int(3)).unwrap();
        step(&mut cv, one(&[2]), &[false], dict(&[]), None).unwrap();
        step(&mut cv, one(&[3]), &[true], dict(&[]), None).unwrap();
        assert_eq!(episodes(cv, dir.path(), "data/x"), vec![(0, true, vec![Some(3), None])]);
    }
}
