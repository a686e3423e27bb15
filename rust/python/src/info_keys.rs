//! The keys of info dicts seen so far, as a tree: each key gets a node holding its column path,
//! the Python strings its mask lookups need and, once made, its column. A str key is found by
//! its Python hash (cached in the str object) and then by identity (keys are interned strings
//! most of the time) or by text: a step hashes no text and allocates nothing per key.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::info_plan::{DictPlan, PLANS_PER_DICT};

/// Escapes a key as one component of a column name: '%' -> %25, '/' -> %2F (so '/' can separate
/// nesting levels) and a leading '_' -> %5F (so no key is named like a mask column).
pub fn escape_key(key: &str) -> String {
    let escaped = key.replace('%', "%25").replace('/', "%2F");
    match escaped.strip_prefix('_') {
        Some(rest) => format!("%5F{rest}"),
        None => escaped,
    }
}

/// A dict key's name (`str(key)` for a key of another type), and whether the key is a str.
pub fn key_name(key: &Bound<'_, PyAny>) -> PyResult<(String, bool)> {
    Ok(match key.cast::<PyString>() {
        Ok(s) => (s.to_str()?.to_owned(), true),
        Err(_) => (key.str()?.to_str()?.to_owned(), false),
    })
}

/// Python's hash of a str is already well mixed: used as it is.
#[derive(Default)]
struct PyHashHasher(u64);

impl Hasher for PyHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_isize(&mut self, i: isize) {
        self.0 = i as u64;
    }
}

pub struct KeyNode {
    /// The column path below the prefix (escaped names joined by '/').
    pub path: String,
    /// The key's text, and the interned str of it (a key that is this object is this key);
    /// none for the top-level dict.
    name: String,
    key: Option<Py<PyString>>,
    /// "_" + the key: the name of its mask (none for the top-level dict, which is no key).
    pub mask_key: Option<Py<PyString>>,
    /// For a key "_x": "x", the key it would be the mask of.
    pub base_key: Option<Py<PyString>>,
    /// `final_obs` or `final_info` in the top-level dict: same-step autoreset data.
    pub autoreset_data: bool,
    /// Its column (an index of `DynamicColumns`), once made.
    pub column: Option<usize>,
    /// Children by the Python hash of their name, and by name.
    by_hash: HashMap<isize, Vec<usize>, BuildHasherDefault<PyHashHasher>>,
    by_name: HashMap<String, usize>,
    /// Plans of the dict this key holds (see `info_plan`), the latest first, and how many were
    /// made.
    pub plans: Vec<DictPlan>,
    pub plans_made: u32,
}

/// Node 0 is the top-level dict.
pub struct KeyPaths {
    nodes: Vec<KeyNode>,
}

impl Default for KeyPaths {
    fn default() -> Self {
        let root = KeyNode {
            path: String::new(),
            name: String::new(),
            key: None,
            mask_key: None,
            base_key: None,
            autoreset_data: false,
            column: None,
            by_hash: HashMap::default(),
            by_name: HashMap::new(),
            plans: Vec::new(),
            plans_made: 0,
        };
        KeyPaths { nodes: vec![root] }
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

    /// The node of `key` in the dict of node `parent`, and whether `key` is a str.
    pub fn child(&mut self, py: Python<'_>, parent: usize, key: &Bound<'_, PyAny>) -> PyResult<(usize, bool)> {
        let Ok(s) = key.cast::<PyString>() else {
            let (name, _) = key_name(key)?;
            return Ok((self.child_named(py, parent, &name)?, false));
        };
        // A str subclass may hash otherwise: then it is found by its text below.
        if let Some(ids) = self.nodes[parent].by_hash.get(&s.hash()?) {
            if let Some(&id) =
                ids.iter().find(|&&id| self.nodes[id].key.as_ref().is_some_and(|k| k.as_ptr() == s.as_ptr()))
            {
                return Ok((id, true));
            }
            let text = s.to_str()?;
            if let Some(&id) = ids.iter().find(|&&id| self.nodes[id].name == text) {
                return Ok((id, true));
            }
        }
        Ok((self.child_named(py, parent, s.to_str()?)?, true))
    }

    /// The node of the key named `name` in the dict of node `parent`, made on first sight.
    fn child_named(&mut self, py: Python<'_>, parent: usize, name: &str) -> PyResult<usize> {
        if let Some(&id) = self.nodes[parent].by_name.get(name) {
            return Ok(id);
        }
        let component = escape_key(name);
        let parent_path = &self.nodes[parent].path;
        let path = if parent_path.is_empty() { component } else { format!("{parent_path}/{component}") };
        let key = PyString::intern(py, name);
        let hash = key.hash()?;
        let id = self.nodes.len();
        self.nodes.push(KeyNode {
            path,
            name: name.to_owned(),
            key: Some(key.unbind()),
            mask_key: Some(PyString::intern(py, &format!("_{name}")).unbind()),
            base_key: name.strip_prefix('_').map(|base| PyString::intern(py, base).unbind()),
            autoreset_data: parent == Self::ROOT && (name == "final_obs" || name == "final_info"),
            column: None,
            by_hash: HashMap::default(),
            by_name: HashMap::new(),
            plans: Vec::new(),
            plans_made: 0,
        });
        let parent = &mut self.nodes[parent];
        parent.by_name.insert(name.to_owned(), id);
        parent.by_hash.entry(hash).or_default().push(id);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::escape_key;

    #[test]
    fn keys_never_take_a_mask_name() {
        assert_eq!(escape_key("lives"), "lives");
        assert_eq!(escape_key("_lives"), "%5Flives");
        assert_eq!(escape_key("a/b%"), "a%2Fb%25");
        assert_eq!(escape_key("x_y"), "x_y");
    }
}
