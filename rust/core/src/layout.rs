//! Layout trees: how a nested observation or action space (dicts and tuples of arrays) maps onto
//! leaf columns. The writer stores them as JSON in a recording's Meta record:
//! `{"leaf": "<column>"}`, `{"dict": [["key", tree], ...]}` or `{"tuple": [tree, ...]}`.
//!
//! This is the one reader of that JSON: the writer checks a tree with it before recording, the
//! reader nests batches with it, and the bindings walk Python values and list leaves with it.

use serde_json::Value;

use crate::host::HostDicts;
use crate::Error;

/// Trees nest no deeper than this (spaces nest a few levels in practice): a hostile Meta record
/// must not exhaust the stack.
pub const MAX_DEPTH: usize = 64;

/// A layout tree whose leaves are `L` (a column name, once parsed; a caller's column index
/// after `try_map`) and whose dict keys are `K` (text; a caller's key object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout<L = String, K = String> {
    Leaf(L),
    Dict(Vec<(K, Layout<L, K>)>),
    Tuple(Vec<Layout<L, K>>),
}

/// One step of a leaf's path: a dict key or a tuple position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathItem {
    Key(String),
    Index(usize),
}

impl std::fmt::Display for PathItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathItem::Key(k) => f.write_str(k),
            PathItem::Index(i) => write!(f, "{i}"),
        }
    }
}

/// `what/key/0`: how errors name a place inside a value (`what` is "observation" or "action").
pub fn path_name(what: &str, path: &[PathItem]) -> String {
    path.iter().fold(what.to_string(), |name, item| format!("{name}/{item}"))
}

impl Layout {
    /// Parses and checks a tree: every node is one of the three forms, and `is_column` accepts
    /// every leaf's name. The error says what is wrong, for the caller to wrap with where the
    /// tree came from.
    pub fn parse(tree: &Value, is_column: &dyn Fn(&str) -> bool) -> Result<Layout, String> {
        Self::parse_as(tree, &|name| is_column(name).then(|| name.to_string()), &mut str::to_string)
    }

    /// `parse` of the JSON text of a tree.
    pub fn from_json(text: &str, is_column: &dyn Fn(&str) -> bool) -> Result<Layout, String> {
        let tree: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        Self::parse(&tree, is_column)
    }
}

impl<L, K> Layout<L, K> {
    /// `parse`, with each leaf's name turned into the caller's column by `column` (`None`: it
    /// names no column) and each dict key by `key`, in one pass.
    pub fn parse_as(
        tree: &Value,
        column: &dyn Fn(&str) -> Option<L>,
        key: &mut dyn FnMut(&str) -> K,
    ) -> Result<Self, String> {
        Self::parse_at(tree, column, key, 0)
    }

    fn parse_at(
        tree: &Value,
        column: &dyn Fn(&str) -> Option<L>,
        key: &mut dyn FnMut(&str) -> K,
        depth: usize,
    ) -> Result<Self, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        let node = tree.as_object().filter(|o| o.len() == 1);
        let Some((kind, value)) = node.and_then(|o| o.iter().next()) else {
            return Err(format!("a node is {{\"leaf\"}}, {{\"dict\"}} or {{\"tuple\"}}, got {}", short(tree)));
        };
        match (kind.as_str(), value) {
            ("leaf", Value::String(name)) => {
                column(name).map(Layout::Leaf).ok_or_else(|| format!("leaf '{name}' names no column"))
            }
            ("leaf", name) => Err(format!("leaf {} names no column", short(name))),
            ("dict", Value::Array(items)) => items
                .iter()
                .map(|item| match item.as_array().map(Vec::as_slice) {
                    Some([Value::String(k), sub]) => Ok((key(k), Self::parse_at(sub, column, key, depth + 1)?)),
                    _ => Err(format!("dict items are [key, tree], got {}", short(item))),
                })
                .collect::<Result<_, _>>()
                .map(Layout::Dict),
            ("tuple", Value::Array(items)) => items
                .iter()
                .map(|t| Self::parse_at(t, column, key, depth + 1))
                .collect::<Result<_, _>>()
                .map(Layout::Tuple),
            ("dict" | "tuple", items) => Err(format!("{kind} items must be a list, got {}", short(items))),
            (kind, _) => Err(format!("unknown node kind '{kind}'")),
        }
    }
}

impl<L, K> Layout<L, K> {
    /// The same tree with each leaf and key converted; the first error stops it.
    pub fn try_map<L2, K2, E>(
        &self,
        leaf: &mut dyn FnMut(&L) -> Result<L2, E>,
        key: &mut dyn FnMut(&K) -> Result<K2, E>,
    ) -> Result<Layout<L2, K2>, E> {
        Ok(match self {
            Layout::Leaf(l) => Layout::Leaf(leaf(l)?),
            Layout::Dict(items) => Layout::Dict(
                items.iter().map(|(k, sub)| Ok((key(k)?, sub.try_map(leaf, key)?))).collect::<Result<_, E>>()?,
            ),
            Layout::Tuple(items) => {
                Layout::Tuple(items.iter().map(|sub| sub.try_map(leaf, key)).collect::<Result<_, E>>()?)
            }
        })
    }

    /// Calls `visit(path, leaf)` for every leaf, depth first in the tree's order.
    pub fn visit<'a>(&'a self, visit: &mut dyn FnMut(&[PathItem], &'a L))
    where
        K: std::fmt::Display,
    {
        fn go<'a, L, K: std::fmt::Display>(
            node: &'a Layout<L, K>,
            path: &mut Vec<PathItem>,
            visit: &mut dyn FnMut(&[PathItem], &'a L),
        ) {
            match node {
                Layout::Leaf(l) => visit(path, l),
                Layout::Dict(items) => {
                    for (k, sub) in items {
                        path.push(PathItem::Key(k.to_string()));
                        go(sub, path, visit);
                        path.pop();
                    }
                }
                Layout::Tuple(items) => {
                    for (i, sub) in items.iter().enumerate() {
                        path.push(PathItem::Index(i));
                        go(sub, path, visit);
                        path.pop();
                    }
                }
            }
        }
        go(self, &mut Vec::new(), visit);
    }

    /// Every leaf with its path, in the tree's order.
    pub fn leaves(&self) -> Vec<(Vec<PathItem>, &L)>
    where
        K: std::fmt::Display,
    {
        let mut out = Vec::new();
        self.visit(&mut |path, leaf| out.push((path.to_vec(), leaf)));
        out
    }
}

/// A misfit's path is gathered innermost first, on the way out: a walk that fits builds none.
enum Misfit<E> {
    Raised(E),
    Shape(Vec<PathItem>, String),
}

impl<E> Misfit<E> {
    fn under(self, item: PathItem) -> Self {
        match self {
            Misfit::Shape(mut path, why) => {
                path.push(item);
                Misfit::Shape(path, why)
            }
            raised => raised,
        }
    }
}

impl<L, K: std::fmt::Display> Layout<L, K> {
    /// Calls `leaf(leaf, value)` for every leaf of `value`, checking that its nesting matches
    /// the tree. `what` names the value in errors ("observation"); keys show as they display.
    pub fn walk_value<A, F>(&self, access: &A, value: &A::Value, what: &str, leaf: &mut F) -> Result<(), A::Error>
    where
        A: HostDicts<Str = K>,
        F: FnMut(&L, &A::Value) -> Result<(), A::Error>,
    {
        self.walk_at(access, value, leaf).map_err(|misfit| match misfit {
            Misfit::Raised(e) => e,
            Misfit::Shape(mut path, why) => {
                path.reverse();
                access.error(Error::schema(path_name(what, &path), why))
            }
        })
    }

    fn walk_at<A, F>(&self, access: &A, value: &A::Value, leaf: &mut F) -> Result<(), Misfit<A::Error>>
    where
        A: HostDicts<Str = K>,
        F: FnMut(&L, &A::Value) -> Result<(), A::Error>,
    {
        match self {
            Layout::Leaf(l) => leaf(l, value).map_err(Misfit::Raised),
            Layout::Dict(items) => {
                for (key, sub) in items {
                    let Some(item) = access.get(value, key).map_err(Misfit::Raised)? else {
                        let why = format!("expected a dict with key '{key}', got {}", access.type_name(value));
                        return Err(Misfit::Shape(Vec::new(), why));
                    };
                    sub.walk_at(access, &item, leaf).map_err(|m| m.under(PathItem::Key(key.to_string())))?;
                }
                // Every declared key was found: more keys than that are keys the space lacks,
                // which would otherwise be dropped without a word. One length asked per dict.
                if access.len(value).is_some_and(|n| n > items.len()) {
                    let declared: Vec<String> = items.iter().map(|(k, _)| k.to_string()).collect();
                    let keys = access.keys(value).map_err(Misfit::Raised)?;
                    if let Some(extra) = keys.iter().find(|k| !declared.contains(k)) {
                        let why = format!(
                            "the key '{extra}' is not in the space, whose keys are '{}': add it to the space, \
                             or record it as custom data (record) or in the info",
                            declared.join("', '")
                        );
                        return Err(Misfit::Shape(Vec::new(), why));
                    }
                }
                Ok(())
            }
            Layout::Tuple(items) => {
                let shape = |why: String| Misfit::Shape(Vec::new(), why);
                let n = access
                    .len(value)
                    .ok_or_else(|| shape(format!("expected a tuple, got {}", access.type_name(value))))?;
                if n != items.len() {
                    return Err(shape(format!("expected a tuple of {} items, got {n}", items.len())));
                }
                for (i, sub) in items.iter().enumerate() {
                    let item = access.item(value, i).map_err(Misfit::Raised)?;
                    sub.walk_at(access, &item, leaf).map_err(|m| m.under(PathItem::Index(i)))?;
                }
                Ok(())
            }
        }
    }
}

/// A value shortened for an error message (a hostile tree may be large).
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

impl Layout {
    /// `leaves` as JSON: `[[path, column], ...]`, each path item a dict key (str) or a tuple
    /// position (int).
    pub fn leaves_json(&self) -> String {
        let item = |item: &PathItem| match item {
            PathItem::Key(k) => Value::from(k.as_str()),
            PathItem::Index(i) => Value::from(*i),
        };
        let leaf = |(path, column): (Vec<PathItem>, &String)| {
            Value::from(vec![Value::from(path.iter().map(item).collect::<Vec<_>>()), Value::from(column.as_str())])
        };
        Value::from(self.leaves().into_iter().map(leaf).collect::<Vec<_>>()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::host::HostValues;

    fn parse(tree: Value) -> Result<Layout, String> {
        Layout::parse(&tree, &|name| name != "missing")
    }

    #[test]
    fn trees_parse_or_say_why_not() {
        let table: &[(Value, Result<Layout, &str>)] = &[
            (json!({"leaf": "obs"}), Ok(Layout::Leaf("obs".into()))),
            (
                json!({"dict": [["a", {"leaf": "x"}], ["b", {"tuple": [{"leaf": "y"}]}]]}),
                Ok(Layout::Dict(vec![
                    ("a".into(), Layout::Leaf("x".into())),
                    ("b".into(), Layout::Tuple(vec![Layout::Leaf("y".into())])),
                ])),
            ),
            (json!({"dict": []}), Ok(Layout::Dict(vec![]))),
            (json!({"leaf": "missing"}), Err("leaf 'missing' names no column")),
            (json!({"leaf": 3}), Err("leaf 3 names no column")),
            (json!([1]), Err("a node is {\"leaf\"}, {\"dict\"} or {\"tuple\"}, got [1]")),
            (json!({"leaf": "a", "tuple": []}), Err("a node is")),
            (json!({"dict": [["x"]]}), Err("dict items are [key, tree], got [\"x\"]")),
            (json!({"dict": [[1, {"leaf": "a"}]]}), Err("dict items are [key, tree]")),
            (json!({"tuple": {"leaf": "a"}}), Err("tuple items must be a list")),
            (json!({"list": []}), Err("unknown node kind 'list'")),
            (json!({"tuple": [{"dict": [["k", {"leaf": "missing"}]]}]}), Err("leaf 'missing' names no column")),
        ];
        for (tree, want) in table {
            match (parse(tree.clone()), want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{tree}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{tree}: {got}"),
                (got, want) => panic!("{tree}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_deep_tree_is_refused_before_the_stack_runs_out() {
        let mut tree = json!({"leaf": "x"});
        for _ in 0..=MAX_DEPTH {
            tree = json!({ "tuple": [tree] });
        }
        assert_eq!(parse(tree), Err(format!("nested deeper than {MAX_DEPTH} levels")));
    }

    #[test]
    fn leaves_come_with_their_paths_in_order() {
        let tree = json!({"dict": [["b", {"leaf": "x"}], ["a", {"tuple": [{"leaf": "y"}, {"dict": [["k", {"leaf": "z"}]]}]}]]});
        let layout = parse(tree).unwrap();
        let leaves: Vec<(String, &String)> =
            layout.leaves().into_iter().map(|(p, l)| (path_name("obs", &p), l)).collect();
        let want = [("obs/b", "x"), ("obs/a/0", "y"), ("obs/a/1/k", "z")];
        assert_eq!(leaves.len(), want.len());
        for ((path, leaf), (want_path, want_leaf)) in leaves.iter().zip(want) {
            assert_eq!((path.as_str(), leaf.as_str()), (want_path, want_leaf));
        }
        assert_eq!(Layout::<String>::Leaf("obs".to_string()).leaves()[0].0, Vec::<PathItem>::new());
    }

    #[test]
    fn parse_as_maps_leaves_to_the_callers_columns_and_keys_as_it_parses() {
        let ids = ["x", "y"];
        let column = |name: &str| ids.iter().position(|i| *i == name);
        // (tree, what it parses to: leaves the columns' positions, keys their lengths)
        type Case = (Value, Result<Layout<usize, usize>, &'static str>);
        let table: [Case; 4] = [
            (json!({"leaf": "y"}), Ok(Layout::Leaf(1))),
            (
                json!({"dict": [["ab", {"leaf": "x"}], ["c", {"tuple": [{"leaf": "y"}]}]]}),
                Ok(Layout::Dict(vec![(2, Layout::Leaf(0)), (1, Layout::Tuple(vec![Layout::Leaf(1)]))])),
            ),
            (json!({"tuple": [{"leaf": "x"}, {"leaf": "z"}]}), Err("leaf 'z' names no column")),
            (json!({"dict": [["k", {"leaf": 1}]]}), Err("leaf 1 names no column")),
        ];
        for (tree, want) in table {
            let got = Layout::parse_as(&tree, &column, &mut |key| key.len());
            assert_eq!(got, want.map_err(String::from), "{tree}");
        }
    }

    #[test]
    fn try_map_converts_leaves_and_keys_and_stops_at_the_first_error() {
        let layout = parse(json!({"dict": [["a", {"leaf": "x"}], ["b", {"leaf": "y"}]]})).unwrap();
        let ids = ["x", "y"];
        let mapped: Layout<usize, usize> =
            layout.try_map(&mut |l| ids.iter().position(|i| i == l).ok_or(()), &mut |k| Ok(k.len())).unwrap();
        assert_eq!(mapped, Layout::Dict(vec![(1, Layout::Leaf(0)), (1, Layout::Leaf(1))]));
        let failed: Result<Layout<usize>, String> =
            layout.try_map(&mut |l| if l == "y" { Err(l.clone()) } else { Ok(0) }, &mut |k| Ok(k.clone()));
        assert_eq!(failed, Err("y".to_string()));
    }

    /// JSON values as a caller's: objects are dicts, arrays are tuples.
    struct Json;

    impl HostValues for Json {
        type Value = Value;
        type Error = String;
        fn len(&self, value: &Value) -> Option<usize> {
            value.as_array().map(Vec::len).or(value.as_object().map(|o| o.len()))
        }
        fn item(&self, value: &Value, index: usize) -> Result<Value, String> {
            Ok(value[index].clone())
        }
        fn items(&self, value: &Value) -> Result<Vec<Value>, String> {
            Ok(value.as_array().cloned().unwrap_or_default())
        }
        fn type_name(&self, value: &Value) -> String {
            if value.is_object() {
                "dict"
            } else if value.is_array() {
                "list"
            } else {
                "scalar"
            }
            .into()
        }
        fn repr(&self, value: &Value) -> String {
            value.to_string()
        }
    }

    impl HostDicts for Json {
        type Held = Value;
        type Dict = serde_json::Map<String, Value>;
        type Str = String;
        fn get(&self, value: &Value, key: &String) -> Result<Option<Value>, String> {
            Ok(value.get(key).cloned())
        }
        fn keys(&self, value: &Value) -> Result<Vec<String>, String> {
            Ok(value.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default())
        }
        fn held(&self, held: &Value) -> Value {
            held.clone()
        }
        fn dict<'v>(&self, value: &'v Value) -> Option<&'v Self::Dict> {
            value.as_object()
        }
        fn dict_len(&self, dict: &Self::Dict) -> usize {
            dict.len()
        }
        fn dict_items(&self, dict: &Self::Dict) -> impl Iterator<Item = (Value, Value)> {
            dict.iter().map(|(k, v)| (Value::from(k.as_str()), v.clone()))
        }
        fn contains(&self, dict: &Self::Dict, key: &String) -> Result<bool, String> {
            Ok(dict.contains_key(key))
        }
        fn name(&self, key: &Value) -> Result<(String, bool), String> {
            Ok(key.as_str().map_or_else(|| (key.to_string(), false), |s| (s.to_owned(), true)))
        }
        fn same(&self, key: &Value, planned: &String) -> Result<bool, String> {
            Ok(key.as_str() == Some(planned))
        }
        fn str_key(&self, key: &Value) -> Result<String, String> {
            key.as_str().map(str::to_owned).ok_or_else(|| format!("{key} is no str"))
        }
        fn intern(&self, text: &str) -> String {
            text.to_owned()
        }
        fn error(&self, error: Error) -> String {
            error.to_string()
        }
    }

    #[test]
    fn a_walk_visits_the_leaves_or_names_where_a_value_does_not_fit() {
        let layout =
            parse(json!({"dict": [["a", {"leaf": "x"}], ["b", {"tuple": [{"leaf": "y"}, {"leaf": "z"}]}]]})).unwrap();
        let walk = |value: Value| {
            let mut seen = Vec::new();
            let result = layout.walk_value(&Json, &value, "obs", &mut |leaf, v| {
                if v == &json!("boom") {
                    return Err(format!("leaf {leaf} raised"));
                }
                seen.push((leaf.clone(), v.clone()));
                Ok(())
            });
            result.map(|()| seen)
        };
        let got = walk(json!({"b": [2, 3], "a": 1})).unwrap();
        assert_eq!(got, [("x".into(), json!(1)), ("y".into(), json!(2)), ("z".into(), json!(3))]);
        let extra = "the key 'extra' is not in the space, whose keys are 'a', 'b': add it to the space, or record it \
                     as custom data (record) or in the info";
        let table = [
            (json!({"a": 1, "b": [2, 3], "extra": 4}), "obs", extra),
            (json!({"b": [2, 3]}), "obs", "expected a dict with key 'a', got dict"),
            (json!(5), "obs", "expected a dict with key 'a', got scalar"),
            (json!({"a": 1, "b": 2}), "obs/b", "expected a tuple, got scalar"),
            (json!({"a": 1, "b": [2]}), "obs/b", "expected a tuple of 2 items, got 1"),
        ];
        for (value, place, why) in table {
            assert_eq!(walk(value), Err(Error::schema(place, why).to_string()));
        }
        assert_eq!(walk(json!({"a": 1, "b": [2, "boom"]})), Err("leaf z raised".to_string()));
    }

    #[test]
    fn from_json_refuses_text_that_is_not_json() {
        assert!(Layout::from_json("{", &|_| true).unwrap_err().starts_with("not JSON"));
        assert_eq!(Layout::from_json(r#"{"leaf": "a"}"#, &|_| true), Ok(Layout::Leaf("a".into())));
    }

    #[test]
    fn leaves_as_json_name_keys_and_positions() {
        let tree = r#"{"dict": [["a", {"tuple": [{"leaf": "x"}, {"leaf": "y"}]}], ["b", {"leaf": "z"}]]}"#;
        let table = [
            (tree, r#"[[["a",0],"x"],[["a",1],"y"],[["b"],"z"]]"#),
            (r#"{"leaf": "x"}"#, r#"[[[],"x"]]"#),
            (r#"{"tuple": []}"#, "[]"),
        ];
        for (tree, want) in table {
            assert_eq!(Layout::from_json(tree, &|_| true).unwrap().leaves_json(), want, "{tree}");
        }
    }
}
