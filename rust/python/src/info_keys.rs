//! The keys of info dicts seen so far, as a tree: each key gets a node holding its column path,
//! the Python strings its mask lookups need and, once made, its column. Each node also keeps
//! plans of the dict it holds: gymnasium builds the same keys in the same order step after step,
//! so what each key of a dict is (a value and the position of its mask, or a key to skip) is
//! decided once per dict shape. A dict whose keys are a plan's, in its order (each the same str
//! object, or an exact str of the same text), is walked by the plan: no key is looked up.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// Plans kept per dict (its key node): a few shapes, such as the steps with and without an
/// episode's statistics.
const PLANS_PER_DICT: usize = 4;
/// Plans made per dict at most: past this its keys change too often for plans to pay.
pub const PLANS_MADE_PER_DICT: u32 = 256;
/// Larger dicts are walked key by key.
pub const MAX_PLANNED_KEYS: usize = 64;

/// Escapes a key as one component of a column name: '%' -> %25, '/' -> %2F (so '/' can separate
/// nesting levels) and a leading '_' -> %5F (so no key is named like a mask column).
pub fn escape_key(key: &str) -> String {
    let escaped = key.replace('%', "%25").replace('/', "%2F");
    match escaped.strip_prefix('_') {
        Some(rest) => format!("%5F{rest}"),
        None => escaped,
    }
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
pub struct DictPlan {
    /// Made for a dict of regular rows (same-step autoreset data is skipped only there).
    regular: bool,
    keys: Vec<(Py<PyString>, Role)>,
}

impl DictPlan {
    pub fn new(regular: bool, keys: Vec<(Py<PyString>, Role)>) -> Self {
        DictPlan { regular, keys }
    }

    /// Whether `dict` has the plan's keys in its order; if so its values, with their roles,
    /// are pushed on `values`.
    pub fn push_values(
        &self,
        dict: &Bound<'_, PyDict>,
        regular: bool,
        values: &mut Vec<(Py<PyAny>, Role)>,
    ) -> PyResult<bool> {
        if self.regular != regular || dict.len() != self.keys.len() {
            return Ok(false);
        }
        let start = values.len();
        for ((key, value), (planned, role)) in dict.iter().zip(&self.keys) {
            if !(key.is(planned) || same_text(&key, planned.bind(dict.py()))?) {
                values.truncate(start);
                return Ok(false);
            }
            values.push((value.unbind(), *role));
        }
        Ok(true)
    }
}

/// A str key of the planned text that is another object (an f-string made each step). Only
/// exact str: a subclass could hash otherwise (its dicts are walked key by key).
fn same_text(key: &Bound<'_, PyAny>, planned: &Bound<'_, PyString>) -> PyResult<bool> {
    let Ok(key) = key.cast_exact::<PyString>() else { return Ok(false) };
    Ok(key.hash()? == planned.hash()? && key.to_str()? == planned.to_str()?)
}

pub struct KeyNode {
    /// The column path below the prefix (escaped names joined by '/').
    pub path: String,
    /// The key's name (`str(key)` for a key of another type than str).
    pub name: String,
    /// "_" + the key: the name of its mask (none for the top-level dict, which is no key).
    pub mask_key: Option<Py<PyString>>,
    /// For a key "_x": "x", the key it would be the mask of.
    pub base_key: Option<Py<PyString>>,
    /// `final_obs` or `final_info` in the top-level dict: same-step autoreset data.
    pub autoreset_data: bool,
    /// Its column (an index of `DynamicColumns`), once made.
    pub column: Option<usize>,
    /// Children by name.
    children: HashMap<String, usize>,
    /// Plans of the dict this key holds, the latest first, and how many were made.
    pub plans: Vec<DictPlan>,
    pub plans_made: u32,
}

impl KeyNode {
    fn new(path: String, name: &str, mask_key: Option<Py<PyString>>, base_key: Option<Py<PyString>>) -> Self {
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

    /// The child named `name`, if seen.
    pub fn child(&self, name: &str) -> Option<usize> {
        self.children.get(name).copied()
    }
}

/// Node 0 is the top-level dict.
pub struct KeyPaths {
    nodes: Vec<KeyNode>,
}

impl Default for KeyPaths {
    fn default() -> Self {
        KeyPaths { nodes: vec![KeyNode::new(String::new(), "", None, None)] }
    }
}

impl KeyPaths {
    pub const ROOT: usize = 0;

    pub fn node(&self, id: usize) -> &KeyNode {
        &self.nodes[id]
    }

    pub fn set_column(&mut self, id: usize, column: usize) {
        self.nodes[id].column = Some(column);
    }

    /// Keeps a plan of the dict of node `id`, first, in place of the oldest beyond a few.
    pub fn add_plan(&mut self, id: usize, plan: DictPlan) {
        let node = &mut self.nodes[id];
        node.plans.insert(0, plan);
        node.plans.truncate(PLANS_PER_DICT);
        node.plans_made += 1;
    }

    /// The node of `key` in the dict of node `parent`, made on first sight, and whether `key`
    /// is a str (a key of another type is named by `str(key)`).
    pub fn child(&mut self, py: Python<'_>, parent: usize, key: &Bound<'_, PyAny>) -> PyResult<(usize, bool)> {
        let shown;
        let (name, is_str) = match key.cast::<PyString>() {
            Ok(s) => (s.to_str()?, true),
            Err(_) => {
                shown = key.str()?;
                (shown.to_str()?, false)
            }
        };
        if let Some(id) = self.nodes[parent].child(name) {
            return Ok((id, is_str));
        }
        let component = escape_key(name);
        let parent_path = &self.nodes[parent].path;
        let path = if parent_path.is_empty() { component } else { format!("{parent_path}/{component}") };
        let mask_key = PyString::intern(py, &format!("_{name}")).unbind();
        let base_key = name.strip_prefix('_').map(|base| PyString::intern(py, base).unbind());
        let mut node = KeyNode::new(path, name, Some(mask_key), base_key);
        node.autoreset_data = parent == Self::ROOT && (name == "final_obs" || name == "final_info");
        let id = self.nodes.len();
        self.nodes.push(node);
        self.nodes[parent].children.insert(name.to_owned(), id);
        Ok((id, is_str))
    }
}

/// The position of each key's `_key` mask among a dict's keys (their names, and whether each
/// is a str, as only a str key is looked up as a mask).
pub fn mask_positions(keys: &[(&str, bool)]) -> Vec<Option<usize>> {
    let masks: HashMap<&str, usize> =
        keys.iter().enumerate().filter(|(_, k)| k.1).filter_map(|(i, k)| Some((k.0.strip_prefix('_')?, i))).collect();
    keys.iter().map(|k| masks.get(k.0).copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::{escape_key, mask_positions};

    #[test]
    fn masks_are_found_by_their_names() {
        let keys = [("episode", true), ("_episode", true), ("_x", true), ("__x", true), ("y", true), ("_y", false)];
        assert_eq!(mask_positions(&keys), vec![Some(1), None, Some(3), None, None, None]);
    }

    #[test]
    fn keys_never_take_a_mask_name() {
        assert_eq!(escape_key("lives"), "lives");
        assert_eq!(escape_key("_lives"), "%5Flives");
        assert_eq!(escape_key("a/b%"), "a%2Fb%25");
        assert_eq!(escape_key("x_y"), "x_y");
    }
}
