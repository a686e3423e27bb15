//! A host language's values (Python's, in the bindings) as the core asks about them: the value
//! reading (`writer::entries::reading`, beside numpy's answers) asks `HostValues`, the layout walk
//! (`layout`) and the info walk (`writer::entries::info_walk`) ask `HostDicts` too, and a
//! recorder call (`writer::entries::call_values::Recording`) all of them. They ask these
//! primitive questions only and decide the rest themselves; a host answers them once, for all.

use std::fmt::Display;

pub trait HostValues {
    /// A value as the host holds it (a Python object in the bindings).
    type Value: Clone;
    /// The host's error; its text goes into messages where a conversion failed.
    type Error: Display;
    /// Its length, where it has one.
    fn len(&self, value: &Self::Value) -> Option<usize>;
    /// Its item `index` (`value[index]`).
    fn item(&self, value: &Self::Value, index: usize) -> Result<Self::Value, Self::Error>;
    /// Its items, as iterating over it gives them.
    fn items(&self, value: &Self::Value) -> Result<Vec<Self::Value>, Self::Error>;
    /// How messages name its type.
    fn type_name(&self, value: &Self::Value) -> String;
    /// Its text as messages show it (its repr), empty when it has none.
    fn repr(&self, value: &Self::Value) -> String;
}

/// What the walks ask of a host about its mappings and their keys (a key is a value).
pub trait HostDicts: HostValues {
    /// A value held while the core walks a dict (a Python reference, so that what a conversion
    /// runs cannot free it).
    type Held;
    /// A dict (the host's own mapping, walked fast; other mappings are read by key).
    type Dict;
    /// A key's text as the core keeps it to look keys up (an interned Python str).
    type Str;
    /// The item of `key` in a mapping; `None` when it has none (or is no mapping at all).
    fn get(&self, value: &Self::Value, key: &Self::Str) -> Result<Option<Self::Value>, Self::Error>;
    /// The keys of a mapping, as messages show them (a str's text, else its repr).
    fn keys(&self, value: &Self::Value) -> Result<Vec<String>, Self::Error>;
    /// The value of a held one.
    fn held(&self, held: &Self::Held) -> Self::Value;
    /// `value` as a dict, when it is one (borrowed: a walk takes no reference of its own).
    fn dict<'v>(&self, value: &'v Self::Value) -> Option<&'v Self::Dict>;
    fn dict_len(&self, dict: &Self::Dict) -> usize;
    /// The keys and values of `dict`, in its order.
    fn dict_items(&self, dict: &Self::Dict) -> impl Iterator<Item = (Self::Value, Self::Held)>;
    fn contains(&self, dict: &Self::Dict, key: &Self::Str) -> Result<bool, Self::Error>;
    /// A key's name (`str(key)` for a key of another type than str) and whether it is a str.
    fn name(&self, key: &Self::Value) -> Result<(String, bool), Self::Error>;
    /// Whether `key` is `planned` (the same str object, or an exact str of the same text).
    fn same(&self, key: &Self::Value, planned: &Self::Str) -> Result<bool, Self::Error>;
    /// A str key, as the core keeps it.
    fn str_key(&self, key: &Self::Value) -> Result<Self::Str, Self::Error>;
    fn intern(&self, text: &str) -> Self::Str;
    /// The host's error of a core error: a value that does not fit a layout tree (a `Schema`
    /// error naming the place, as `layout::path_name` names it), a bad argument, a stopped writer.
    fn error(&self, error: crate::Error) -> Self::Error;
}
