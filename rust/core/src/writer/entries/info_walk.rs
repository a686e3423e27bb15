//! The walk of an info dict: which of its values become entries of which columns, under which
//! masks. Supported values are numbers, bools, strings and fixed-shape arrays; nested dicts
//! become nested paths (at most `MAX_DEPTH` levels). A value that cannot be recorded (an
//! unsupported type, or one that does not fit the column its key got) is left out of its row,
//! which then reads as missing: one warning per key at the first, a count per key at close, and
//! the key keeps recording every value that fits.
//!
//! Vector infos follow gymnasium's convention: `_key` is the mask of `key` (a nested dict's
//! mask applies to every entry below it). A key `_key` without a `key` beside it, or with its own
//! `__key` mask, is a value of its own. Column names escape `/`, `%` and a leading `_` (see
//! `escape_key`), so a key `_x` never takes the name of the mask column of `x`.
//!
//! A dict is walked by a plan of its shape (see `info_keys`) when one matches, else its keys are
//! looked up one by one and kept as a plan; either way its values are then put by the same code.
//! The caller (`Dicts`) only reads its dicts, keys and values.

use super::collect::{Collector, Place, Src};
use super::dynamic::{DynamicColumns, Host, To};
use super::info_keys::{check_depth, same_column_why, KeyTree, Role};
use super::reading::Object;
use crate::host::{HostDicts, HostValues};
use crate::writer::message::Slot;
use crate::{CodecSpec, Timeline};

/// What the walk asks of its caller beside reading values (`Host`): the host's dicts and keys
/// (`values`), and what is done with a mask, a value left out and a dict refused.
pub trait Dicts<C, T, K>: Host<C, T, K> {
    /// The host's values (a copy of a handle: the walk asks them while it calls the caller),
    /// read as the value reading reads them.
    type Values: HostDicts<Value = Self::Value, Error = Self::Error> + Object<C, K> + Copy;
    fn values(&self) -> Self::Values;
    /// A `_key` mask over `n` envs, one byte per env (`_key` arrays, as gymnasium makes them).
    fn mask(&mut self, value: &Self::Value, n: usize, coll: &mut Collector<K>) -> Result<Src, Self::Error>;
    /// Tells the user a value is not recorded.
    fn warn(&self, warning: &str) -> Result<(), Self::Error>;
    /// The error of a dict that cannot be walked (`column`: its path's name).
    fn refuse(&self, column: &str, why: String) -> Self::Error;
}

/// The info columns: columns by key path, and the keys of the dicts seen so far with their
/// plans. `S` and `V`: the host's `HostDicts::Str` and `HostDicts::Held`.
#[derive(Debug)]
pub struct InfoColumns<C, T, S, V> {
    /// The columns by path, the types of values that made none, and the values left out.
    pub columns: DynamicColumns<C, T>,
    keys: KeyTree<S>,
    /// Whether dicts are walked by their plans when they have one (tests compare both ways).
    plans: bool,
    /// The values of the dicts being walked with what each is, a stack (nested dicts push
    /// above).
    values: Vec<(V, Role)>,
}

impl<C, T: PartialEq, S, V> InfoColumns<C, T, S, V> {
    /// With `plans` false, walks every dict key by key, as a dict that matches no plan.
    pub fn new(codec: CodecSpec, plans: bool) -> Self {
        let columns = DynamicColumns::new("info", Timeline::Obs, codec);
        InfoColumns { columns, keys: KeyTree::default(), plans, values: Vec::new() }
    }

    /// Adds entries at `at` for every supported value of `info` (vector infos: with their
    /// `_key` masks).
    pub fn put_info<D, K>(
        &mut self,
        d: &mut D,
        coll: &mut Collector<K>,
        at: Place,
        info: &<D::Values as HostDicts>::Dict,
    ) -> Result<(), D::Error>
    where
        D: Dicts<C, T, K>,
        D::Values: HostDicts<Str = S, Held = V>,
    {
        self.put_dict(d, coll, at, (info, KeyTree::<S>::ROOT), None, 0)
    }

    /// Adds entries for the values of `dict`, under key node `node`, where `mask` (the
    /// parent's) says which envs have it at all.
    fn put_dict<D, K>(
        &mut self,
        d: &mut D,
        coll: &mut Collector<K>,
        at: Place,
        (dict, node): (&<D::Values as HostDicts>::Dict, usize),
        mask: Option<Src>,
        depth: usize,
    ) -> Result<(), D::Error>
    where
        D: Dicts<C, T, K>,
        D::Values: HostDicts<Str = S, Held = V>,
    {
        let h = d.values();
        check_depth(depth).map_err(|why| d.refuse(&self.columns.name_of(&self.keys.node(node).path), why))?;
        if h.dict_len(dict) == 0 {
            return Ok(()); // nothing to record, nor to plan (half of CartPole's steps)
        }
        // Its values are pushed on `values` (by a plan, else key by key), then put one by one.
        let start = self.values.len();
        let regular = at.slot == Slot::Regular;
        let result = (|| {
            let items = || h.dict_items(dict);
            if !(self.plans
                && self.keys.push_planned(
                    node,
                    regular,
                    h.dict_len(dict),
                    items,
                    |k, p| h.same(k, p),
                    &mut self.values,
                )?)
            {
                self.push_key_by_key(d, dict, node, at)?;
            }
            for position in start..self.values.len() {
                let Role::Value { node: child, mask: mask_at } = self.values[position].1 else { continue };
                let value = h.held(&self.values[position].0);
                // Its own `_key` mask, if any, under the parent's `mask` (checked when its dict was
                // entered: only a mask of the key's own can leave no env).
                let own_mask = match (at.rows, mask_at) {
                    (Some(n), Some(m)) => Some(d.mask(&h.held(&self.values[start + m].0), n, coll)?),
                    _ => None,
                };
                let mask = coll.and_masks(mask, own_mask);
                if own_mask.is_some() && coll.none_set(mask) {
                    continue; // no env has it at this step
                }
                // A nested dict is walked, other values become entries.
                match h.dict(&value) {
                    Some(inner) => self.put_dict(d, coll, at, (inner, child), mask, depth + 1)?,
                    None => self.put_key(d, coll, (at, mask), child, &value)?,
                }
            }
            Ok(())
        })();
        self.values.truncate(start);
        result
    }

    /// Pushes the values of `dict` with what each key is, found key by key, and keeps that as
    /// a plan of node `node` when its keys are all str and not too many.
    fn push_key_by_key<D, K>(
        &mut self,
        d: &D,
        dict: &<D::Values as HostDicts>::Dict,
        node: usize,
        at: Place,
    ) -> Result<(), D::Error>
    where
        D: Dicts<C, T, K>,
        D::Values: HostDicts<Str = S, Held = V>,
    {
        let h = d.values();
        let mut keys = Vec::with_capacity(h.dict_len(dict));
        for (key, value) in h.dict_items(dict) {
            let (name, is_str) = h.name(&key)?;
            keys.push((key, self.keys.child(node, &name, |text| h.intern(text)), is_str));
            self.values.push((value, Role::Skip));
        }
        let (batched, regular) = (at.rows.is_some(), at.slot == Slot::Regular);
        let mut seen = Vec::with_capacity(keys.len());
        for &(_, child, is_str) in &keys {
            // In vector infos, a mask (read with its key) or same-step autoreset data (taken
            // apart by the recorder) is no value.
            let no_value = self.keys.node(child).is_no_value(batched, is_str, regular, |base, own_mask| {
                Ok(h.contains(dict, base)? && !h.contains(dict, own_mask)?)
            })?;
            seen.push((child, is_str, no_value));
        }
        let start = self.values.len() - keys.len();
        let plan_keys = || keys.iter().map(|k| h.str_key(&k.0)).collect();
        let values = &mut self.values[start..];
        for (i, first) in self.keys.set_roles(node, regular, &seen, values, self.plans.then_some(plan_keys))? {
            let node = self.keys.node(keys[i].1);
            // A key with no repr (its `__repr__` raised) is shown by its name.
            let shown = |key| Some(h.repr(key)).filter(|r| !r.is_empty()).unwrap_or_else(|| node.name.clone());
            let why = same_column_why(&shown(&keys[first].0), &shown(&keys[i].0));
            if let Some(warning) = self.columns.skips.skip(&node.path, why) {
                d.warn(&warning)?;
            }
        }
        Ok(())
    }

    /// The value of the key at `node`: its column is found through the node once made.
    fn put_key<D, K>(
        &mut self,
        d: &mut D,
        coll: &mut Collector<K>,
        entry: (Place, Option<Src>),
        node: usize,
        value: &D::Value,
    ) -> Result<(), D::Error>
    where
        D: Dicts<C, T, K>,
        D::Values: HostDicts<Str = S, Held = V>,
    {
        let known = self.keys.node(node).column;
        // The usual value first: an array whose bytes are the rows of its column as they are.
        if let Some(column) = known {
            if let Some(data) = d.values().rows(value, self.columns.get(column), entry.0.rows, coll) {
                coll.push(self.columns.id(column), entry.0, entry.1, data);
                return Ok(());
            }
        }
        let path = &self.keys.node(node).path;
        let warning = match known {
            Some(column) => self.columns.put(d, value, coll, entry, To::Column(column))?,
            None => match self.columns.column(d, value, coll, (entry.0.rows, entry.1), path)? {
                Ok(column) => {
                    self.keys.set_column(node, column);
                    self.columns.put(d, value, coll, entry, To::Column(column))?
                }
                Err(why) => self.columns.skips.skip(path, why),
            },
        };
        warning.map_or(Ok(()), |warning| d.warn(&warning))
    }
}

/// The test host of the info walk, shared with `call_values`'s tests.
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::writer::entries::reading::value::{Array, Input, Like, Number};
    use crate::writer::entries::reading::values::Misfit;
    use crate::writer::entries::reading::Class;
    use crate::writer::{EntryKind, NewColumn};
    use crate::DType;
    use std::rc::Rc;

    /// A value of a test info: a dict, a number, a mask over the envs or a value no column takes;
    /// for a recorder's calls (`call_values`), also None, a sequence, an array and a value whose
    /// every reading fails.
    #[derive(Debug, Clone)]
    pub(in crate::writer::entries) enum V {
        Dict(Rc<Vec<(V, V)>>),
        /// A str (a key).
        Str(&'static str),
        Int(i128),
        Mask(Vec<bool>),
        Set,
        None,
        List(Vec<V>),
        /// An array of one dimension: numpy's kind character and its items' bytes, by this host's
        /// convention exactly the rows of the column it is put into.
        Array(u8, Vec<u8>),
        /// A value no call may read (an item of it is an error).
        Unreadable,
    }

    impl V {
        pub(in crate::writer::entries) fn ints(items: &[i64]) -> V {
            V::Array(b'i', items.iter().flat_map(|i| i.to_le_bytes()).collect())
        }

        fn itemsize(kind: u8) -> usize {
            if kind == b'b' {
                1
            } else {
                8
            }
        }
    }

    pub(in crate::writer::entries) fn dict(items: &[(&'static str, V)]) -> V {
        V::Dict(Rc::new(items.iter().map(|(k, v)| (V::Str(k), v.clone())).collect()))
    }

    /// The caller over test values: columns are their names; warnings are counted.
    #[derive(Default)]
    struct Fake {
        added: Vec<String>,
        warnings: std::cell::Cell<usize>,
    }

    impl Host<String, u8, ()> for Fake {
        type Value = V;
        type Error = String;
        fn kind(&mut self, _: &V) -> Result<Option<u8>, String> {
            Ok(None)
        }
        /// An int is a Python int, or an int64 array over the envs when batched.
        fn read(
            &mut self,
            v: &V,
            _: Option<&String>,
            (rows, _): (Option<usize>, Option<Src>),
            coll: &mut Collector<()>,
        ) -> Result<Input, String> {
            Ok(match (v, rows) {
                (V::Int(i), None) => {
                    let number = Number { int: Some(*i), float: Some(*i as f64), is_float: false };
                    Input::Number(number, Like::Weak(DType::I64))
                }
                (V::Int(_), Some(n)) => {
                    let data = coll.own(&vec![0; 8 * n]);
                    Input::Array(Array { kind: b'i', itemsize: 8, shown: "<i8".into(), shape: vec![n], data })
                }
                _ => Input::Unsupported("set".into()),
            })
        }
        fn add(&mut self, spec: NewColumn) -> Result<(u32, String), String> {
            self.added.push(spec.name.clone());
            Ok((self.added.len() as u32 - 1, spec.name))
        }
        fn why(&self, _: &V, _: DType, misfit: Misfit) -> String {
            format!("{misfit:?}")
        }
    }

    /// Test values as the host's: a key is a str or an int.
    #[derive(Clone, Copy)]
    pub(in crate::writer::entries) struct Infos;

    impl HostValues for Infos {
        type Value = V;
        type Error = String;
        fn len(&self, value: &V) -> Option<usize> {
            match value {
                V::List(items) => Some(items.len()),
                V::Array(kind, bytes) => Some(bytes.len() / V::itemsize(*kind)),
                _ => self.dict(value).map(|d| d.len()),
            }
        }
        /// An item of a sequence, or of a mask (an int); an unreadable one is an error.
        fn item(&self, value: &V, index: usize) -> Result<V, String> {
            match value {
                V::List(items) => match &items[index] {
                    V::Unreadable => Err(format!("item {index} is unreadable")),
                    item => Ok(item.clone()),
                },
                V::Mask(m) => Ok(V::Int(m[index] as i128)),
                _ => Err("no item by index".into()),
            }
        }
        fn items(&self, _: &V) -> Result<Vec<V>, String> {
            Err("the info walk iterates over dicts only".into())
        }
        fn type_name(&self, _: &V) -> String {
            "V".into()
        }
        fn repr(&self, value: &V) -> String {
            match value {
                V::Str(s) => format!("'{s}'"),
                V::Int(i) => i.to_string(),
                _ => format!("{value:?}"),
            }
        }
    }

    impl HostDicts for Infos {
        type Held = V;
        type Dict = Rc<Vec<(V, V)>>;
        type Str = String;
        fn get(&self, value: &V, key: &String) -> Result<Option<V>, String> {
            let same = |k: &&(V, V)| matches!(k.0, V::Str(s) if s == key);
            Ok(self.dict(value).and_then(|d| d.iter().find(same).map(|kv| kv.1.clone())))
        }
        fn keys(&self, value: &V) -> Result<Vec<String>, String> {
            Ok(self.dict(value).map(|d| d.iter().map(|kv| self.repr(&kv.0)).collect()).unwrap_or_default())
        }
        fn held(&self, held: &V) -> V {
            held.clone()
        }
        fn dict<'v>(&self, value: &'v V) -> Option<&'v Self::Dict> {
            if let V::Dict(d) = value {
                Some(d)
            } else {
                None
            }
        }
        fn dict_len(&self, dict: &Self::Dict) -> usize {
            dict.len()
        }
        fn dict_items(&self, dict: &Self::Dict) -> impl Iterator<Item = (V, V)> {
            dict.iter().cloned()
        }
        fn contains(&self, dict: &Self::Dict, key: &String) -> Result<bool, String> {
            Ok(self.get(&V::Dict(dict.clone()), key)?.is_some())
        }
        fn name(&self, key: &V) -> Result<(String, bool), String> {
            Ok(match key {
                V::Str(s) => (s.to_string(), true),
                other => (self.repr(other), false),
            })
        }
        fn same(&self, key: &V, planned: &String) -> Result<bool, String> {
            Ok(matches!(key, V::Str(s) if s == planned))
        }
        fn str_key(&self, key: &V) -> Result<String, String> {
            self.name(key).map(|n| n.0)
        }
        fn intern(&self, text: &str) -> String {
            text.to_owned()
        }
        fn error(&self, error: crate::Error) -> String {
            error.to_string()
        }
    }

    /// The info walk's values are no arrays (it reads them through `Host::read`); a call's
    /// arrays are exactly their column's rows.
    impl<C> Object<C, ()> for Infos {
        fn is(&self, value: &V, class: Class) -> Result<bool, String> {
            Ok(match (class, value) {
                (_, V::Unreadable) => return Err("an unreadable value was read".into()),
                (Class::ExactInt | Class::Int, V::Int(_)) | (Class::None, V::None) => true,
                (Class::Str, V::Str(_)) | (Class::Dict, V::Dict(_)) | (Class::Sequence, V::List(_)) => true,
                _ => false,
            })
        }
        fn is_scalar_of(&self, _: &V, _: &C) -> bool {
            false
        }
        fn array_kind(&self, value: &V) -> Option<(u8, usize)> {
            matches!(value, V::Array(..)).then(|| (self.array_of(value).0, 1))
        }
        fn shape(&self, value: &V) -> Vec<usize> {
            self.len(value).into_iter().collect()
        }
        fn array(&self, value: &V, _: Option<&C>, coll: &mut Collector<()>) -> Result<Array, String> {
            let (kind, bytes) = self.array_of(value);
            let (itemsize, data) = (V::itemsize(kind), coll.own(bytes));
            Ok(Array { kind, itemsize, shown: String::new(), shape: self.len(value).into_iter().collect(), data })
        }
        fn rows(&self, value: &V, _: &C, _: Option<usize>, coll: &mut Collector<()>) -> Option<Src> {
            matches!(value, V::Array(..)).then(|| coll.own(self.array_of(value).1))
        }
        fn bool_rows(&self, _: &V, _: usize, _: &mut Collector<()>) -> Option<Src> {
            None
        }
        fn truths(&self, _: &V) -> Result<Vec<bool>, String> {
            Err("no array".into())
        }
        fn asarray(&self, _: &V) -> Result<V, String> {
            Err("no array".into())
        }
        fn zeros_like(&self, _: &V) -> Result<V, String> {
            Err("no array".into())
        }
        fn stack(&self, _: Vec<V>) -> Option<V> {
            None
        }
        fn int(&self, value: &V) -> Option<i128> {
            if let V::Int(i) = value {
                Some(*i)
            } else {
                None
            }
        }
        fn float(&self, value: &V) -> Option<f64> {
            <Self as Object<C, ()>>::int(self, value).map(|i| i as f64)
        }
        fn text<'v>(&self, value: &'v V) -> Result<Option<&'v str>, String> {
            Ok(if let V::Str(s) = value { Some(s) } else { None })
        }
    }

    impl Infos {
        fn array_of<'v>(&self, value: &'v V) -> (u8, &'v [u8]) {
            match value {
                V::Array(kind, bytes) => (*kind, bytes),
                _ => (b'O', &[]),
            }
        }
    }

    impl Dicts<String, u8, ()> for Fake {
        type Values = Infos;
        fn values(&self) -> Infos {
            Infos
        }
        fn mask(&mut self, value: &V, n: usize, coll: &mut Collector<()>) -> Result<Src, String> {
            match value {
                V::Mask(m) if m.len() == n => Ok(coll.own(&m.iter().map(|&b| b as u8).collect::<Vec<_>>())),
                _ => Err("no mask".into()),
            }
        }
        fn warn(&self, _: &str) -> Result<(), String> {
            self.warnings.set(self.warnings.get() + 1);
            Ok(())
        }
        fn refuse(&self, column: &str, why: String) -> String {
            format!("{column}: {why}")
        }
    }

    /// Entries as (column name, masked envs).
    type Entered = Vec<(String, Option<Vec<u8>>)>;

    /// What the second of two walks of `info` (its env count `rows`) entered, and the paths left
    /// out with their counts (each warned of once).
    fn walk(info: &V, rows: Option<usize>, plans: bool) -> (Entered, Vec<(String, u64)>) {
        let mut columns = InfoColumns::<String, u8, String, V>::new(CodecSpec::default(), plans);
        let (mut fake, mut coll) = (Fake::default(), Collector::<()>::default());
        let V::Dict(info) = info else { panic!() };
        // Twice: the second by the plan the first made (when `plans`).
        for _ in 0..2 {
            coll.clear();
            columns.put_info(&mut fake, &mut coll, Place::regular(rows), info).unwrap();
        }
        let entries = coll.entries();
        let got = entries
            .iter()
            .map(|e| {
                assert_eq!(e.kind == EntryKind::Masked, e.mask.is_some());
                (fake.added[e.column as usize].clone(), e.mask.map(<[u8]>::to_vec))
            })
            .collect();
        let skipped: Vec<(String, u64)> = columns.columns.skips.counts().collect();
        assert_eq!(fake.warnings.get(), skipped.len());
        (got, skipped)
    }

    #[test]
    fn vector_infos_become_masked_columns_by_their_keys() {
        let (t, f) = (true, false);
        // RecordEpisodeStatistics over 3 envs, env 1 ending: `episode` and its `_episode` mask.
        let stats = dict(&[
            ("episode", dict(&[("r", V::Int(9)), ("l", V::Int(9)), ("_r", V::Mask(vec![f, t, f]))])),
            ("_episode", V::Mask(vec![f, t, t])),
        ]);
        let masked = |name: &str, m: &[u8]| (name.to_string(), Some(m.to_vec()));
        // (the info, its env count, what was entered, the paths left out with their counts)
        type Case = (V, Option<usize>, Entered, Vec<(String, u64)>);
        let table: Vec<Case> = vec![
            (
                stats.clone(),
                Some(3),
                vec![masked("info/episode/r", &[0, 1, 0]), masked("info/episode/l", &[0, 1, 1])],
                vec![],
            ),
            // One env: `_episode` is a value of its own, and no mask is read.
            (
                dict(&[("x", V::Int(1)), ("_x", V::Int(2))]),
                None,
                vec![("info/x".into(), None), ("info/%5Fx".into(), None)],
                vec![],
            ),
            // `_x` with no `x` beside it: a value of its own, here masked by its `__x`.
            (
                dict(&[("_x", V::Int(2)), ("__x", V::Mask(vec![t, f]))]),
                Some(2),
                vec![masked("info/%5Fx", &[1, 0])],
                vec![],
            ),
            // A mask with no env set: nothing of its key; same-step autoreset data is no value.
            (dict(&[("x", V::Int(1)), ("_x", V::Mask(vec![f, f])), ("final_obs", V::Int(3))]), Some(2), vec![], vec![]),
            // A value no column takes is left out, each time.
            (dict(&[("s", V::Set)]), None, vec![], vec![("info/s".into(), 2)]),
            // 1 and "1" name one column: the first is recorded.
            (
                V::Dict(Rc::new(vec![(V::Int(1), V::Int(5)), (V::Str("1"), V::Int(6))])),
                None,
                vec![("info/1".into(), None)],
                vec![("info/1".into(), 2)],
            ),
        ];
        for (info, rows, entered, skipped) in table {
            for plans in [true, false] {
                let (got, left_out) = walk(&info, rows, plans);
                assert_eq!(got, entered, "{info:?} plans {plans}");
                assert_eq!(left_out, skipped, "{info:?} plans {plans}");
            }
        }
    }

    #[test]
    fn dicts_that_contain_themselves_are_refused() {
        let mut columns = InfoColumns::<String, u8, String, V>::new(CodecSpec::default(), true);
        let mut info = V::Int(0);
        for _ in 0..super::super::info_keys::MAX_DEPTH + 1 {
            info = dict(&[("a", info)]);
        }
        let V::Dict(info) = info else { panic!() };
        let got = columns.put_info(&mut Fake::default(), &mut Collector::default(), Place::regular(None), &info);
        assert!(got.unwrap_err().starts_with("info/a/a/"), "nested too deep");
    }
}
