//! Which values a copy keeps when `convert` is given keys (sources whose spaces differ merge on
//! the values they share): a column is kept when a key names it or a '/'-bounded prefix of it,
//! and the Meta record's layout tree and the space it describes lose what is not kept. Pure:
//! JSON in, JSON out, so a table test covers every shape.

use serde_json::{json, Value};

/// Whether `name` is kept by `keys`: a key equal to it, or a prefix of it ending before a '/'.
pub fn keeps(keys: &[String], name: &str) -> bool {
    keys.iter().any(|k| name == k || (name.starts_with(k.as_str()) && name.as_bytes().get(k.len()) == Some(&b'/')))
}

/// The layout tree (`{"leaf"}`, `{"dict"}`, `{"tuple"}`) and its space description (the
/// `observation_space` / `action_space` JSON: `{"type": "Dict", "spaces": [[key, space]...]}`,
/// `{"type": "Tuple", "spaces": [...]}`; `Null` when the recording has none) restricted to the
/// leaves `keep` keeps; `None` when it keeps none.
///
/// Errors: a key that keeps part of a Tuple (its positions would change), a space that does not
/// follow its layout.
pub fn trim(layout: &Value, space: &Value, keep: &dyn Fn(&str) -> bool) -> Result<Option<(Value, Value)>, String> {
    if let Some(leaf) = layout.get("leaf").and_then(Value::as_str) {
        return Ok(keep(leaf).then(|| (layout.clone(), space.clone())));
    }
    let parts = |tree: &Value, key: &str| tree.get(key).and_then(Value::as_array).cloned();
    let subspaces = space.get("spaces").and_then(Value::as_array).cloned();
    if let Some(entries) = parts(layout, "dict") {
        let mut kept_layout = Vec::new();
        let mut kept_space = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let key = entry.get(0).cloned().unwrap_or(Value::Null);
            let sub = subspaces.as_ref().and_then(|s| s.get(i)).cloned();
            let sub_space = match (&sub, space.is_null()) {
                (_, true) => Value::Null,
                (Some(pair), false) if pair.get(0) == Some(&key) => pair.get(1).cloned().unwrap_or(Value::Null),
                _ => return Err(format!("the space does not follow its layout at key {key}")),
            };
            if let Some((l, s)) = trim(entry.get(1).unwrap_or(&Value::Null), &sub_space, keep)? {
                kept_layout.push(json!([key, l]));
                kept_space.push(json!([key, s]));
            }
        }
        if kept_layout.is_empty() {
            return Ok(None);
        }
        let mut space = space.clone();
        if let Some(map) = space.as_object_mut() {
            map.insert("spaces".into(), Value::Array(kept_space));
        }
        return Ok(Some((json!({ "dict": kept_layout }), space)));
    }
    if let Some(items) = parts(layout, "tuple") {
        let mut kept = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let sub = subspaces.as_ref().and_then(|s| s.get(i)).cloned().unwrap_or(Value::Null);
            kept.push(trim(item, &sub, keep)?);
        }
        return match kept.iter().filter(|k| k.is_some()).count() {
            0 => Ok(None),
            n if n == kept.len() => Ok(Some((layout.clone(), space.clone()))),
            _ => Err("the keys keep part of a Tuple space (its positions would change): keep all of it or none".into()),
        };
    }
    Err(format!("not a layout tree: {layout}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn keys_keep_names_and_bounded_prefixes() {
        let k = keys(&["obs/pos", "info"]);
        for (name, kept) in
            [("obs/pos", true), ("obs/pos/x", true), ("obs/position", false), ("info/a", true), ("obs", false)]
        {
            assert_eq!(keeps(&k, name), kept, "{name}");
        }
    }

    #[test]
    fn trees_and_spaces_lose_what_is_not_kept() {
        let layout = json!({"dict": [["pos", {"leaf": "obs/pos"}], ["vel", {"leaf": "obs/vel"}]]});
        let space = json!({"type": "Dict", "spaces": [["pos", {"type": "Box"}], ["vel", {"type": "Discrete"}]]});
        let tuple = json!({"tuple": [{"leaf": "action/0"}, {"leaf": "action/1"}]});
        let tuple_space = json!({"type": "Tuple", "spaces": [{"type": "Discrete"}, {"type": "Discrete"}]});
        let k = keys(&["obs/pos", "action"]);
        let keep = |n: &str| keeps(&k, n);
        let (l, s) = trim(&layout, &space, &keep).unwrap().unwrap();
        assert_eq!(l, json!({"dict": [["pos", {"leaf": "obs/pos"}]]}));
        assert_eq!(s, json!({"type": "Dict", "spaces": [["pos", {"type": "Box"}]]}));
        assert_eq!(trim(&tuple, &tuple_space, &keep).unwrap().unwrap(), (tuple.clone(), tuple_space.clone()));
        // A space-less recording keeps a null space.
        assert_eq!(trim(&layout, &Value::Null, &keep).unwrap().unwrap().1, Value::Null);
        // Nothing kept; part of a tuple; a space that does not follow its layout.
        assert_eq!(trim(&layout, &space, &|_: &str| false).unwrap(), None);
        let part = keys(&["action/0"]);
        assert!(trim(&tuple, &tuple_space, &|n: &str| keeps(&part, n)).unwrap_err().contains("part of a Tuple"));
        let other = json!({"type": "Dict", "spaces": [["x", {"type": "Box"}], ["vel", {"type": "Box"}]]});
        assert!(trim(&layout, &other, &keep).unwrap_err().contains("does not follow"));
    }
}
