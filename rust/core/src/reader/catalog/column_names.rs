//! Columns are found by name (a key's value and its mask, a layout's leaves): a recording whose
//! Column records give one name twice, or a mask a name that is not its column's mask name
//! (`<parent>/_<leaf>`, as every writer names it), cannot be read by name without reading one
//! column for another (a hostile file with valid checksums: an info mask renamed to another
//! column's name made `ep.infos` fail deep inside numpy). Such columns are damage, named with
//! their Column record; the rest of the recording reads.

use std::collections::HashMap;

use crate::schema::{ColumnId, ColumnSpec};
use crate::writer::mask_name;

/// The columns that cannot be read by name, each with why.
pub fn name_problems(columns: &[ColumnSpec]) -> Vec<(ColumnId, String)> {
    let mut problems = Vec::new();
    let mut first: HashMap<&str, ColumnId> = HashMap::new();
    for spec in columns {
        if let Some(&earlier) = first.get(spec.name.as_str()) {
            let why = format!("column {} has the name of column {earlier}: names must be unique", spec.id);
            problems.push((spec.id, why.clone()));
            if !problems.iter().any(|(id, _)| *id == earlier) {
                problems.push((earlier, why));
            }
            continue;
        }
        first.insert(&spec.name, spec.id);
    }
    for spec in columns {
        let Some(value) = spec.mask_of.and_then(|v| columns.get(v as usize)) else { continue };
        if spec.name != mask_name(&value.name) {
            let why = format!("the mask of column '{}' must be named '{}'", value.name, mask_name(&value.name));
            problems.push((spec.id, why.clone()));
            problems.push((value.id, why));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Timeline;

    fn column(id: ColumnId, name: &str, mask: Option<ColumnId>, mask_of: Option<ColumnId>) -> ColumnSpec {
        let mut spec: ColumnSpec =
            serde_json::from_value(serde_json::json!({"name": name, "dtype": "bool", "shape": [], "timeline": "obs"}))
                .unwrap();
        (spec.id, spec.mask, spec.mask_of, spec.timeline) = (id, mask, mask_of, Timeline::Obs);
        spec
    }

    #[test]
    fn names_must_be_unique_and_masks_named_after_their_columns() {
        let good = vec![
            column(0, "obs", None, None),
            column(1, "info/a", Some(2), None),
            column(2, "info/_a", None, Some(1)),
            column(3, "info/p%Wfloat64", Some(4), None),
            column(4, "info/_p%Wfloat64", None, Some(3)),
        ];
        assert!(name_problems(&good).is_empty());
        let cases: [(usize, &str, Vec<ColumnId>); 3] = [
            (2, "obs", vec![0, 1, 2]),     // a mask renamed to another column's name
            (2, "info/_b", vec![1, 2]),    // a mask renamed to a name of its own
            (4, "info/_a", vec![2, 3, 4]), // a mask renamed to another mask's name
        ];
        for (at, name, want) in cases {
            let mut columns = good.clone();
            columns[at].name = name.into();
            let mut got: Vec<ColumnId> = name_problems(&columns).into_iter().map(|(id, _)| id).collect();
            got.sort();
            got.dedup();
            assert_eq!(got, want, "{name}");
        }
    }
}
