//! The plan of a batch: which columns (fields) make up each output key, and how they nest.
//!
//! Output keys: `observations`, `actions`, `rewards`, `next_observations`, `terminations`,
//! `truncations` (nested like the recorded spaces), any column named verbatim (`info/<key>`,
//! `data/<name>`, masks `info/_<key>`), or named with `next:` before it for the row of the next
//! observation (`next:info/<key>`: the info a step returned, beside `next_observations`; the step
//! tables of the exports and Ray Data read those); `episode_index`, `step_index` and `mask` are
//! always there and name no field.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::gather::Field;
use crate::layout::Layout;
use crate::reader::dataset_view::DatasetView;
use crate::reader::reads::steps::WindowKind;
use crate::{DType, Error, Result};

pub const DEFAULT_KEYS: [&str; 6] =
    ["observations", "actions", "rewards", "next_observations", "terminations", "truncations"];

/// Before a column's name in a key: its row of the next observation (an observation-timeline
/// column only).
pub const NEXT_ROW: &str = "next:";

/// What an output key reads: a column, or a tree of columns (observations and actions).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// (column, on the next observation row).
    Column(&'static str, bool),
    /// (which layout of the Meta record, on the next observation row).
    Tree(&'static str, bool),
    Named,
    /// A column named after `NEXT_ROW`: on the next observation row.
    NamedNext,
    /// `episode_index`, `step_index`, `mask`: every batch has them.
    Index,
}

/// Where output key `key` comes from.
fn source(key: &str) -> Source {
    match key {
        "observations" => Source::Tree("observation", false),
        "next_observations" => Source::Tree("observation", true),
        "actions" => Source::Tree("action", false),
        "rewards" => Source::Column("reward", false),
        "terminations" => Source::Column("terminated", false),
        "truncations" => Source::Column("truncated", false),
        "episode_index" | "step_index" | "mask" => Source::Index,
        _ if key.starts_with(NEXT_ROW) => Source::NamedNext,
        _ => Source::Named,
    }
}

/// The fields behind a set of output keys, each read once however many keys name it.
#[derive(Debug)]
pub struct BatchPlan {
    pub fields: Vec<Field>,
    /// Output keys in order, each a tree over indexes into `fields`.
    pub entries: Vec<(String, Layout<usize>)>,
}

impl BatchPlan {
    /// Resolves `keys` (`DEFAULT_KEYS` when `None`) against `ds`, over the recordings flagged
    /// in `among` (None: every one; see `Dataset::recordings_among`): layouts come from the
    /// first of them's Meta record; columns are matched by name in each of them.
    ///
    /// Errors: `Invalid` (no recording; a layout damaged or missing), those of `Dataset::field`.
    pub fn among(ds: &DatasetView<'_>, keys: Option<&[String]>, among: Option<&[bool]>) -> Result<BatchPlan> {
        let keys: Vec<String> = match keys {
            Some(k) => k.to_vec(),
            None => DEFAULT_KEYS.iter().map(|s| s.to_string()).collect(),
        };
        let first = among.map_or(Some(0), |a| a.iter().position(|&x| x));
        let rec = first
            .and_then(|r| ds.recordings().get(r))
            .ok_or_else(|| Error::Invalid("the dataset has no recording".into()))?;
        let mut plan = BatchPlan { fields: Vec::new(), entries: Vec::new() };
        let mut index: HashMap<(String, bool), usize> = HashMap::new();
        let mut field = |name: &str, next: bool| -> Result<usize> {
            if let Some(&i) = index.get(&(name.to_string(), next)) {
                return Ok(i);
            }
            plan.fields.push(ds.field_among(name, next, among)?);
            index.insert((name.to_string(), next), plan.fields.len() - 1);
            Ok(plan.fields.len() - 1)
        };
        let mut entries = Vec::with_capacity(keys.len());
        for key in keys {
            let node = match source(&key) {
                Source::Tree(which, next) => {
                    let layout = meta_layout(&rec.layouts, which, &|_| true).map_err(|why| {
                        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
                        Error::Invalid(format!(
                            "the Meta record of the first recording is damaged or missing: its {which}s cannot be rebuilt{why}"
                        ))
                    })?;
                    layout.try_map(&mut |name| field(name, next), &mut |k| Ok(k.clone()))?
                }
                Source::Column(name, next) => Layout::Leaf(field(name, next)?),
                Source::Named => Layout::Leaf(field(&key, false)?),
                Source::NamedNext => Layout::Leaf(field(&key[NEXT_ROW.len()..], true)?),
                Source::Index => continue,
            };
            entries.push((key, node));
        }
        plan.entries = entries;
        Ok(plan)
    }

    /// The outputs of a batch of `b` windows of `kind`, in order: one per field (`[b, ...row]`
    /// for transitions, `[b, length, ...row]` for sequences), then `INDEX_KEYS`: episode_index
    /// `[b]`, step_index (as windows) and, for padded sequences only, mask (bool, as windows).
    pub fn outputs(&self, b: usize, kind: WindowKind) -> Vec<OutputSpec> {
        batch_outputs(self.fields.iter().map(|f| (f.dtype, f.shape.as_slice())), b, kind)
    }

    /// The outputs of one step, without a batch axis: one per field, of its row's shape.
    pub fn step_outputs(&self) -> Vec<OutputSpec> {
        self.fields.iter().map(|f| OutputSpec { dtype: f.dtype, shape: f.shape.clone() }).collect()
    }
}

/// The keys of a batch's outputs past its fields (`BatchPlan::outputs`), in order.
pub const INDEX_KEYS: [&str; 3] = ["episode_index", "step_index", "mask"];

/// `BatchPlan::outputs` over the fields' (dtype, row shape).
fn batch_outputs<'a>(
    fields: impl Iterator<Item = (DType, &'a [usize])>,
    b: usize,
    kind: WindowKind,
) -> Vec<OutputSpec> {
    let lead: Vec<usize> = if kind.sequence { vec![b, kind.length] } else { vec![b] };
    let mut outputs: Vec<OutputSpec> =
        fields.map(|(dtype, row)| OutputSpec { dtype, shape: lead.iter().chain(row).copied().collect() }).collect();
    outputs.push(OutputSpec { dtype: DType::I64, shape: vec![b] });
    outputs.push(OutputSpec { dtype: DType::I64, shape: lead.clone() });
    if kind.sequence && kind.pad {
        outputs.push(OutputSpec { dtype: DType::Bool, shape: lead });
    }
    outputs
}

/// One output of a read, for the caller to allocate: `shape` elements of `dtype`, row-major.
/// Str outputs hold one `String` per element (a caller hands them out nested like `shape`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSpec {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Plans (or what a caller makes of one) by key set (`None`: the default keys) and the
/// recordings they are planned over (`None`: all; see `BatchPlan::among`), made on first use. A
/// training loop uses a few sets; past `PlanCache::CAPACITY` the oldest made goes, so a caller
/// asking for ever new sets does not grow it without bound.
pub struct PlanCache<T> {
    plans: Mutex<Vec<Keyed<T>>>,
    /// The dataset's `plan_generation` the plans were made at.
    generation: Mutex<u64>,
}

/// A plan and the key set and recordings it was made for.
type Keyed<T> = (Option<Vec<String>>, Option<Vec<bool>>, Arc<T>);

impl<T> Default for PlanCache<T> {
    fn default() -> Self {
        PlanCache { plans: Mutex::new(Vec::new()), generation: Mutex::new(0) }
    }
}

impl<T> PlanCache<T> {
    pub const CAPACITY: usize = 16;

    /// The plan of `keys` over `among`, made by `make` if there is none yet.
    pub fn get_or_make<E>(
        &self,
        keys: Option<Vec<String>>,
        among: Option<&[bool]>,
        make: impl FnOnce(Option<&[String]>, Option<&[bool]>) -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, plan)) = plans.iter().find(|(k, a, _)| *k == keys && a.as_deref() == among) {
            return Ok(plan.clone());
        }
        let plan = Arc::new(make(keys.as_deref(), among)?);
        if plans.len() >= Self::CAPACITY {
            plans.remove(0);
        }
        plans.push((keys, among.map(<[bool]>::to_vec), plan.clone()));
        Ok(plan)
    }

    /// `get_or_make`, forgetting the plans made at another `Dataset::plan_generation` (a
    /// plan holds column ids, and annotation columns move when a recording adds its own).
    pub fn get_or_make_at<E>(
        &self,
        generation: u64,
        keys: Option<Vec<String>>,
        among: Option<&[bool]>,
        make: impl FnOnce(Option<&[String]>, Option<&[bool]>) -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut at = self.generation.lock().unwrap_or_else(|p| p.into_inner());
        if *at != generation {
            self.clear();
            *at = generation;
        }
        drop(at);
        self.get_or_make(keys, among, make)
    }

    /// Forgets every plan (the dataset's recordings changed).
    pub fn clear(&self) {
        self.plans.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// The `which` ("observation" or "action") layout tree of a Meta record's layouts
/// (`Recording::layouts`), each leaf accepted by `is_column`: `Err(None)` when the record holds
/// none, `Err(Some(why))` when it is malformed.
fn meta_layout(layouts: &Value, which: &str, is_column: &dyn Fn(&str) -> bool) -> Result<Layout, Option<String>> {
    let tree = layouts.get(which).ok_or(None)?;
    Layout::parse(tree, is_column).map_err(Some)
}

impl DatasetView<'_> {
    /// The `which` ("observation" or "action") layout of episode `episode`'s recording, over
    /// columns the recording has: how to nest the episode's leaf columns like its space.
    ///
    /// Errors: `OutOfRange`; `Unsupported` (a corrupt file to Python) when the Meta record
    /// holds no such tree or a malformed one.
    pub fn episode_layout(&self, episode: i64, which: &str) -> Result<Layout> {
        let episode = self.episode_index(episode)?;
        let recording = self.episode(episode)?.recording;
        let rec = self.recording(recording)?;
        meta_layout(&rec.layouts, which, &|name| rec.columns.iter().any(|c| c.name == name)).map_err(|why| {
            let why = why.unwrap_or_else(|| "it is damaged or missing".into());
            Error::Unsupported {
                path: self.path().to_path_buf(),
                why: format!(
                    "the {which} layout in the Meta record of recording {recording} is invalid ({why}): \
                     episode {episode}'s {which}s cannot be rebuilt"
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::catalog::layouts_of;

    #[test]
    fn meta_layouts_are_found_checked_or_missing() {
        let meta = r#"{"layout": {"observation": {"dict": [["a", {"leaf": "x"}]]}, "action": {"leaf": "nope"}}}"#;
        let is_column = |name: &str| name == "x";
        type Want = Result<Layout, Option<&'static str>>;
        let table: &[(&str, &str, Want)] = &[
            (meta, "observation", Ok(Layout::Dict(vec![("a".into(), Layout::Leaf("x".into()))]))),
            (meta, "action", Err(Some("leaf 'nope' names no column"))),
            (r#"{"layout": {}}"#, "action", Err(None)),
            ("{}", "observation", Err(None)),
            ("not json", "observation", Err(None)),
        ];
        for (meta, which, want) in table {
            let got = meta_layout(&layouts_of(meta), which, &is_column);
            assert_eq!(got.as_ref().map_err(|e| e.as_deref()), want.as_ref().map_err(|e| *e), "{meta} {which}");
        }
    }

    #[test]
    fn plans_are_made_once_per_key_set_and_recordings_and_the_oldest_goes_first() {
        let cache = PlanCache::<String>::default();
        let made = std::cell::Cell::new(0);
        let get_among = |keys: Option<Vec<String>>, among: Option<&[bool]>| {
            cache
                .get_or_make(keys, among, |k, a| {
                    made.set(made.get() + 1);
                    Ok::<_, ()>(format!("{k:?} {a:?}"))
                })
                .unwrap()
        };
        let get = |keys| get_among(keys, None);
        let a = get(None);
        assert!(Arc::ptr_eq(&a, &get(None)), "made once");
        assert_eq!((a.as_str(), made.get()), ("None None", 1));
        for i in 0..PlanCache::<String>::CAPACITY {
            get(Some(vec![i.to_string()]));
        }
        assert_eq!(made.get(), 17);
        get(Some(vec!["15".into()]));
        assert_eq!(made.get(), 17, "still held");
        get(None);
        assert_eq!(made.get(), 18, "the oldest (None) went");
        assert_eq!(cache.get_or_make(Some(vec![]), None, |_, _| Err("no")), Err("no"), "an error is not kept");
        cache.clear();
        get(None);
        assert_eq!(made.get(), 19);
        // The same keys over other recordings are another plan, made once too.
        let (one, other): (&[bool], &[bool]) = (&[true, false], &[false, true]);
        assert_eq!(get_among(None, Some(one)).as_str(), "None Some([true, false])");
        get_among(None, Some(one));
        get_among(None, Some(other));
        get(None);
        assert_eq!(made.get(), 21);
    }

    #[test]
    fn outputs_lead_with_the_windows_then_the_indexes() {
        type Outputs<'a> = &'a [(DType, &'a [usize])];
        let fields: Outputs = &[(DType::F32, &[3, 2]), (DType::Utf8, &[])];
        let seq = |pad| WindowKind { length: 4, sequence: true, pad };
        let (f32, str, i64, bool) = (DType::F32, DType::Utf8, DType::I64, DType::Bool);
        let table: [(WindowKind, Outputs<'_>); 3] = [
            (WindowKind::TRANSITION, &[(f32, &[5, 3, 2]), (str, &[5]), (i64, &[5]), (i64, &[5])]),
            (seq(false), &[(f32, &[5, 4, 3, 2]), (str, &[5, 4]), (i64, &[5]), (i64, &[5, 4])]),
            (seq(true), &[(f32, &[5, 4, 3, 2]), (str, &[5, 4]), (i64, &[5]), (i64, &[5, 4]), (bool, &[5, 4])]),
        ];
        for (kind, want) in table {
            let want: Vec<_> = want.iter().map(|&(dtype, shape)| OutputSpec { dtype, shape: shape.to_vec() }).collect();
            assert_eq!(batch_outputs(fields.iter().copied(), 5, kind), want, "{kind:?}");
        }
    }

    #[test]
    fn keys_name_their_sources() {
        let table = [
            ("observations", Source::Tree("observation", false)),
            ("next_observations", Source::Tree("observation", true)),
            ("actions", Source::Tree("action", false)),
            ("rewards", Source::Column("reward", false)),
            ("terminations", Source::Column("terminated", false)),
            ("truncations", Source::Column("truncated", false)),
            ("episode_index", Source::Index),
            ("step_index", Source::Index),
            ("mask", Source::Index),
            ("info/x", Source::Named),
            ("next:info/x", Source::NamedNext),
            ("reward", Source::Named),
        ];
        for (key, want) in table {
            assert_eq!(source(key), want, "{key}");
        }
    }
}
