//! The keys of info dicts seen so far, as a tree: each key gets a node holding its column path,
//! the strings its mask lookups need (`S`: interned Python strings in the bindings) and, once
//! made, its column. Each node also keeps plans of the dict it holds: gymnasium builds the same
//! keys in the same order step after step, so what each key of a dict is (a value and the
//! position of its mask, or a key to skip) is decided once per dict shape; a dict whose keys are
//! a plan's, in its order, is walked by the plan without looking any key up.

use std::collections::HashMap;

use crate::schema::escape_key;
use crate::writer::message::Slot;

/// Plans kept per dict (its key node): a few shapes, such as the steps with and without an
/// episode's statistics.
const PLANS_PER_DICT: usize = 4;
/// Plans made per dict at most: past this its keys change too often for plans to pay.
const PLANS_MADE_PER_DICT: u32 = 256;
/// Larger dicts are walked key by key.
const MAX_PLANNED_KEYS: usize = 64;

/// Nested dicts deeper than this are refused: deeper is a dict that contains itself.
pub const MAX_DEPTH: usize = 32;

/// Whether a dict nested `depth` levels below the info is walked; why not.
pub fn check_depth(depth: usize) -> Result<(), String> {
    if depth >= MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels (does the dict contain itself?)"));
    }
    Ok(())
}

/// What one key of a dict is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A mask read with its key, same-step autoreset data, or a key naming the column of
    /// another key of its dict.
    Skip,
    /// The value of key node `node`, with its `_key` mask at position `mask` of the dict.
    Value { node: usize, mask: Option<usize> },
}

/// The keys of one dict shape, in order, with what each is.
#[derive(Debug)]
pub struct Plan<S> {
    /// Made for a dict of regular rows (same-step autoreset data is skipped only there).
    pub regular: bool,
    pub keys: Vec<(S, Role)>,
}

#[derive(Debug)]
pub struct KeyNode<S> {
    /// The column path below the prefix (escaped names joined by '/').
    pub path: String,
    /// The key's name (`str(key)` for a key of another type than str).
    pub name: String,
    /// "_" + the key: the name of its mask (none for the top-level dict, which is no key).
    pub mask_key: Option<S>,
    /// For a key "_x": "x", the key it would be the mask of.
    pub base_key: Option<S>,
    /// `final_obs` or `final_info` in the top-level dict: same-step autoreset data.
    pub autoreset_data: bool,
    /// Its column (an index of the caller's), once made.
    pub column: Option<usize>,
    children: HashMap<String, usize>,
    /// Plans of the dict this key holds, the latest first, and how many were made.
    pub plans: Vec<Plan<S>>,
    plans_made: u32,
}

/// Node 0 (`ROOT`) is the top-level dict.
#[derive(Debug)]
pub struct KeyTree<S> {
    nodes: Vec<KeyNode<S>>,
}

impl<S> Default for KeyTree<S> {
    fn default() -> Self {
        KeyTree { nodes: vec![KeyNode::new(String::new(), "", None, None)] }
    }
}

impl<S> KeyNode<S> {
    fn new(path: String, name: &str, mask_key: Option<S>, base_key: Option<S>) -> Self {
        KeyNode {
            path,
            name: name.to_owned(),
            mask_key,
            base_key,
            autoreset_data: false,
            column: None,
            children: HashMap::new(),
            plans: Vec::new(),
            plans_made: 0,
        }
    }
}

impl<S> KeyNode<S> {
    /// Whether this key is no value of its dict: in vector infos (`batched`), a str key that is
    /// the mask of a key beside it (`lacks_own_mask(base, mask)`: the dict has the key `base`
    /// and no `mask` of this key's own), or same-step autoreset data of regular rows (taken
    /// apart by the recorder).
    pub fn is_no_value<E>(
        &self,
        batched: bool,
        is_str: bool,
        regular: bool,
        lacks_own_mask: impl FnOnce(&S, &S) -> Result<bool, E>,
    ) -> Result<bool, E> {
        if !(batched && is_str) {
            return Ok(false);
        }
        match (&self.base_key, &self.mask_key) {
            (Some(base), Some(mask)) => lacks_own_mask(base, mask),
            _ => Ok(self.autoreset_data && regular),
        }
    }
}

/// Why the value of a key is left out when an earlier key of its dict named its column.
pub fn same_column_why(first: &str, second: &str) -> String {
    format!("keys {first} and {second} of one dict both name this column; only {first} is recorded")
}

impl<S> KeyTree<S> {
    pub const ROOT: usize = 0;

    pub fn node(&self, id: usize) -> &KeyNode<S> {
        &self.nodes[id]
    }

    pub fn set_column(&mut self, id: usize, column: usize) {
        self.nodes[id].column = Some(column);
    }

    /// Whether a dict of node `id` with `keys` keys, all str, is worth a plan.
    pub fn wants_plan(&self, id: usize, keys: usize) -> bool {
        self.nodes[id].plans_made < PLANS_MADE_PER_DICT && keys <= MAX_PLANNED_KEYS
    }

    /// Keeps a plan of the dict of node `id`, first, in place of the oldest beyond a few.
    pub fn add_plan(&mut self, id: usize, plan: Plan<S>) {
        let node = &mut self.nodes[id];
        node.plans.insert(0, plan);
        node.plans.truncate(PLANS_PER_DICT);
        node.plans_made += 1;
    }

    /// Pushes the values of a dict of node `id` onto `values` with what each is, by a plan for
    /// `regular` rows whose keys are the dict's in its order (`same(key, planned)` compares
    /// one); whether a plan matched. `items` gives the dict's `len` keys and values afresh at
    /// each call.
    // Inlined into the bindings' step path (every dict of every info): as a call of its own it
    // added to the instructions of each step.
    #[inline(always)]
    pub fn push_planned<K, V, E, I: Iterator<Item = (K, V)>>(
        &self,
        id: usize,
        regular: bool,
        len: usize,
        items: impl Fn() -> I,
        same: impl Fn(&K, &S) -> Result<bool, E>,
        values: &mut Vec<(V, Role)>,
    ) -> Result<bool, E> {
        'plans: for plan in self.nodes[id].plans.iter().filter(|p| p.regular == regular && p.keys.len() == len) {
            let start = values.len();
            for ((key, value), (planned, role)) in items().zip(&plan.keys) {
                if !same(&key, planned)? {
                    values.truncate(start);
                    continue 'plans;
                }
                values.push((value, *role));
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Sets what each value of a dict of node `id` walked key by key is (`values`, one per key;
    /// `seen`: each key's node, whether it is a str and whether it is no value, see `key_roles`)
    /// and keeps that as a plan for `regular` rows when its keys are all str and not too many
    /// (`plan_keys` gives them; `None`: no plans are made). The keys left out for naming the
    /// column of an earlier key: (its position, the earlier key's).
    pub fn set_roles<V, E>(
        &mut self,
        id: usize,
        regular: bool,
        seen: &[(usize, bool, bool)],
        values: &mut [(V, Role)],
        plan_keys: Option<impl FnOnce() -> Result<Vec<S>, E>>,
    ) -> Result<Vec<(usize, usize)>, E> {
        let named: Vec<SeenKey<'_>> = seen
            .iter()
            .map(|&(node, is_str, no_value)| (node, self.nodes[node].name.as_str(), is_str, no_value))
            .collect();
        let mut left_out = Vec::new();
        for (i, role) in key_roles(&named).into_iter().enumerate() {
            match role {
                Ok(role) => values[i].1 = role,
                Err(first) => left_out.push((i, first)),
            }
        }
        if let Some(plan_keys) = plan_keys.filter(|_| seen.iter().all(|k| k.1) && self.wants_plan(id, seen.len())) {
            let keys = plan_keys()?.into_iter().zip(values.iter().map(|v| v.1)).collect();
            self.add_plan(id, Plan { regular, keys });
        }
        Ok(left_out)
    }

    /// The node of the key named `name` in the dict of node `parent`, made on first sight;
    /// `string` makes the strings of its mask lookups.
    pub fn child(&mut self, parent: usize, name: &str, string: impl Fn(&str) -> S) -> usize {
        if let Some(&id) = self.nodes[parent].children.get(name) {
            return id;
        }
        let component = escape_key(name);
        let parent_path = &self.nodes[parent].path;
        let path = if parent_path.is_empty() { component } else { format!("{parent_path}/{component}") };
        let mask_key = string(&format!("_{name}"));
        let base_key = name.strip_prefix('_').map(&string);
        let mut node = KeyNode::new(path, name, Some(mask_key), base_key);
        node.autoreset_data = parent == Self::ROOT && (name == "final_obs" || name == "final_info");
        let id = self.nodes.len();
        self.nodes.push(node);
        self.nodes[parent].children.insert(name.to_owned(), id);
        id
    }
}

/// The position of each key's `_key` mask among a dict's keys (their names, and whether each
/// is a str, as only a str key is looked up as a mask).
pub fn mask_positions(keys: &[(&str, bool)]) -> Vec<Option<usize>> {
    let masks: HashMap<&str, usize> =
        keys.iter().enumerate().filter(|(_, k)| k.1).filter_map(|(i, k)| Some((k.0.strip_prefix('_')?, i))).collect();
    keys.iter().map(|k| masks.get(k.0).copied()).collect()
}

/// One key of a dict walked key by key: its node, its name, whether it is a str, and whether it
/// is no value (a mask read with its key, or same-step autoreset data).
pub type SeenKey<'a> = (usize, &'a str, bool, bool);

/// What each key of a dict is; `Err(j)` for a key naming the column key `j` already took. Str
/// keys of one dict differ, and so do the names they give (`escape_key`); a key of another type
/// can name the same column as another key (1 and "1"): then only the first is recorded.
pub fn key_roles(keys: &[SeenKey<'_>]) -> Vec<Result<Role, usize>> {
    let masks = mask_positions(&keys.iter().map(|k| (k.1, k.2)).collect::<Vec<_>>());
    let all_str = keys.iter().all(|k| k.2);
    let mut roles: Vec<Result<Role, usize>> = Vec::with_capacity(keys.len());
    for (i, &(node, _, _, skipped)) in keys.iter().enumerate() {
        let taken = |j: &usize| matches!(roles[*j], Ok(Role::Value { node: n, .. }) if n == node);
        roles.push(match (0..i).find(|j| !all_str && taken(j)) {
            _ if skipped => Ok(Role::Skip),
            Some(first) => Err(first),
            None => Ok(Role::Value { node, mask: masks[i] }),
        });
    }
    roles
}

/// What an info that is no dict should have been, by the row it was given for (`Final`: same-step
/// autoreset's `final_info`).
pub fn info_expected(slot: Slot) -> &'static str {
    match slot {
        Slot::Final => "infos['final_info'] must be a dict of arrays over the envs (gymnasium >= 1.0)",
        _ => "info must be a dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dicts_nest_a_bounded_number_of_levels() {
        for (depth, walked) in [(0, true), (MAX_DEPTH - 1, true), (MAX_DEPTH, false), (MAX_DEPTH + 1, false)] {
            assert_eq!(check_depth(depth).is_ok(), walked, "{depth}");
        }
        assert_eq!(check_depth(MAX_DEPTH).unwrap_err(), "nested deeper than 32 levels (does the dict contain itself?)");
    }

    #[test]
    fn infos_that_are_no_dicts_are_told_what_they_should_be() {
        assert_eq!(info_expected(Slot::Regular), "info must be a dict");
        assert!(info_expected(Slot::Final).starts_with("infos['final_info'] must be a dict of arrays"));
    }

    #[test]
    fn dicts_walked_key_by_key_get_roles_and_plans_that_later_dicts_follow() {
        let mut tree = KeyTree::<&str>::default();
        let root = KeyTree::<&str>::ROOT;
        let (x, mask) = (tree.child(root, "x", |_| "m"), tree.child(root, "_x", |_| "m"));
        let mut values = vec![(10, Role::Skip), (11, Role::Skip)];
        let left_out = tree.set_roles(
            root,
            true,
            &[(x, true, false), (mask, true, true)],
            &mut values,
            Some(|| Ok::<_, ()>(vec!["x", "_x"])),
        );
        assert_eq!(left_out, Ok(vec![]));
        assert_eq!(values, [(10, Role::Value { node: x, mask: Some(1) }), (11, Role::Skip)]);
        // (the dict's keys, regular rows, whether the plan walks it)
        let table: [(&[&str], bool, bool); 5] = [
            (&["x", "_x"], true, true),
            (&["x", "_x"], false, false), // a plan of regular rows only
            (&["_x", "x"], true, false),  // another order
            (&["x", "_y"], true, false),
            (&["x"], true, false),
        ];
        for (keys, regular, walked) in table {
            let items = || keys.iter().enumerate().map(|(i, &k)| (k, 20 + i));
            let mut values = vec![(0, Role::Skip)];
            let same = |key: &&str, planned: &&str| Ok::<_, ()>(key == planned);
            assert_eq!(tree.push_planned(root, regular, keys.len(), items, same, &mut values), Ok(walked), "{keys:?}");
            let pushed: &[(usize, Role)] =
                if walked { &[(20, Role::Value { node: x, mask: Some(1) }), (21, Role::Skip)] } else { &[] };
            assert_eq!(&values[1..], pushed, "{keys:?}");
        }
        // Keys of other types name columns a str key may take, and make no plan.
        let one = tree.child(root, "1", |_| "m");
        let mut values = vec![(1, Role::Skip), (2, Role::Skip)];
        let no_plan = None::<fn() -> Result<Vec<&'static str>, ()>>;
        assert_eq!(
            tree.set_roles(root, true, &[(one, false, false), (one, true, false)], &mut values, no_plan),
            Ok(vec![(1, 0)])
        );
        assert_eq!(values, [(1, Role::Value { node: one, mask: None }), (2, Role::Skip)]);
        let mut values = vec![(1, Role::Skip), (2, Role::Skip)];
        let plan_keys = Some(|| Ok::<_, ()>(vec!["1", "x"]));
        assert_eq!(
            tree.set_roles(root, false, &[(one, false, false), (x, true, false)], &mut values, plan_keys),
            Ok(vec![])
        );
        assert_eq!(tree.node(root).plans.len(), 1);
    }

    #[test]
    fn masks_and_autoreset_data_are_no_values_in_vector_infos() {
        let mut tree = KeyTree::<String>::default();
        let root = KeyTree::<String>::ROOT;
        let (mask, plain, final_obs) = (
            tree.child(root, "_x", str::to_owned),
            tree.child(root, "x", str::to_owned),
            tree.child(root, "final_obs", str::to_owned),
        );
        // (node, batched, str key, regular rows, whether the dict lacks its own mask, no value)
        let table = [
            (mask, true, true, true, true, true),
            (mask, true, true, true, false, false), // `__x` beside it: a value of its own
            (mask, false, true, true, true, false), // one env: keys are values
            (mask, true, false, true, true, false), // not a str
            (plain, true, true, true, true, false),
            (final_obs, true, true, true, true, true),
            (final_obs, true, true, false, true, false), // in `final_info`
        ];
        for (node, batched, is_str, regular, lacks, want) in table {
            let asked = |base: &String, own: &String| {
                assert_eq!((base.as_str(), own.as_str()), ("x", "__x"));
                Ok::<_, ()>(lacks)
            };
            assert_eq!(
                tree.node(node).is_no_value(batched, is_str, regular, asked),
                Ok(want),
                "{node} {batched} {is_str} {regular} {lacks}"
            );
        }
        assert_eq!(same_column_why("1", "'1'"), "keys 1 and '1' of one dict both name this column; only 1 is recorded");
    }

    #[test]
    fn keys_get_their_roles_and_the_first_of_a_column_wins() {
        let value = |node, mask| Ok(Role::Value { node, mask });
        type Roles = Vec<Result<Role, usize>>;
        let cases: [(&[SeenKey<'_>], Roles); 4] = [
            (&[(1, "x", true, false), (2, "_x", true, true)], vec![value(1, Some(1)), Ok(Role::Skip)]),
            // Only a str key is a mask: `_x` of another type is a value of its own.
            (&[(1, "x", true, false), (2, "_x", false, false)], vec![value(1, None), value(2, None)]),
            // 1 and "1" name one column: the first is recorded, a skipped one takes none.
            (
                &[(3, "1", false, true), (3, "1", true, false), (3, "1", false, false)],
                vec![Ok(Role::Skip), value(3, None), Err(1)],
            ),
            (&[(4, "a", true, false), (5, "b", true, false)], vec![value(4, None), value(5, None)]),
        ];
        for (keys, roles) in cases {
            assert_eq!(key_roles(keys), roles, "{keys:?}");
        }
    }

    #[test]
    fn masks_are_found_by_their_names() {
        let keys = [("episode", true), ("_episode", true), ("_x", true), ("__x", true), ("y", true), ("_y", false)];
        assert_eq!(mask_positions(&keys), vec![Some(1), None, Some(3), None, None, None]);
    }

    #[test]
    fn nodes_carry_escaped_paths_and_mask_names() {
        let mut tree = KeyTree::<String>::default();
        let episode = tree.child(KeyTree::<String>::ROOT, "episode", str::to_owned);
        let r = tree.child(episode, "_r/x", str::to_owned);
        assert_eq!(tree.child(KeyTree::<String>::ROOT, "episode", str::to_owned), episode);
        let final_info = tree.child(KeyTree::<String>::ROOT, "final_info", str::to_owned);
        let nested_final = tree.child(episode, "final_info", str::to_owned);
        let (e, n) = (tree.node(episode), tree.node(r));
        assert_eq!(
            (e.path.as_str(), e.mask_key.as_deref(), e.base_key.as_deref()),
            ("episode", Some("_episode"), None)
        );
        assert_eq!((n.path.as_str(), n.name.as_str()), ("episode/%5Fr%2Fx", "_r/x"));
        assert_eq!((n.mask_key.as_deref(), n.base_key.as_deref()), (Some("__r/x"), Some("r/x")));
        assert!(tree.node(final_info).autoreset_data && !tree.node(nested_final).autoreset_data);
    }

    #[test]
    fn plans_are_kept_latest_first_and_capped() {
        let mut tree = KeyTree::<&str>::default();
        for i in 0..PLANS_PER_DICT + 2 {
            tree.add_plan(0, Plan { regular: i % 2 == 0, keys: vec![("k", Role::Value { node: i, mask: None })] });
        }
        let plans = &tree.node(0).plans;
        assert_eq!(plans.len(), PLANS_PER_DICT);
        assert_eq!(plans[0].keys[0].1, Role::Value { node: PLANS_PER_DICT + 1, mask: None });
        assert!(tree.wants_plan(0, MAX_PLANNED_KEYS) && !tree.wants_plan(0, MAX_PLANNED_KEYS + 1));
    }
}
