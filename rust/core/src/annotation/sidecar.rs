//! What a sidecar says of itself: its Meta record's `annotation` object (which annotation,
//! which version, which episodes' rows it holds), its file name, and its two columns.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::ANNOTATION_EXTENSION;
use crate::schema::{CodecSpec, ColumnSpec, Timeline};

/// The key of the Meta record's JSON object that holds an `AnnotationMeta`.
pub const META_KEY: &str = "annotation";
/// Where annotation columns are named: as custom per-step data, so every read path that
/// reads `data/...` reads them.
pub const COLUMN_PREFIX: &str = "data/";

/// One annotated episode's steps: `rows` step rows of `lane` from `first_row`. The episode id
/// is kept for people and tools; rows alone identify the episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub lane: u32,
    pub episode_id: u64,
    pub first_row: u64,
    pub rows: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationMeta {
    pub name: String,
    pub version: u64,
    pub created_ns: u64,
    /// "step" (a value per step) or "episode" (one value per episode, stored on each step).
    pub per: String,
    pub episodes: Vec<Span>,
}

impl AnnotationMeta {
    /// The Meta record's JSON.
    pub fn to_meta_json(&self) -> Result<Vec<u8>> {
        let meta = serde_json::json!({ META_KEY: self, "metadata": null, "user": null });
        serde_json::to_vec(&meta).map_err(|e| Error::Invalid(format!("annotation meta: {e}")))
    }

    /// From a sidecar's Meta record JSON.
    ///
    /// Errors: `Invalid`, saying what is missing or malformed.
    pub fn from_meta_json(text: &str) -> std::result::Result<AnnotationMeta, String> {
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let meta = value.get_mut(META_KEY).map(serde_json::Value::take).ok_or("no 'annotation' in its Meta record")?;
        let meta: AnnotationMeta = serde_json::from_value(meta).map_err(|e| format!("its 'annotation': {e}"))?;
        check_name(&meta.name).map_err(|e| e.to_string())?;
        Ok(meta)
    }

    /// The sidecar's file name (its contents, not its name, say what it is).
    pub fn file_name(&self, recording: &[u8; 16]) -> String {
        let rec: String = recording.iter().map(|b| format!("{b:02x}")).collect();
        format!("annotation-{}-{rec}-v{:05}.{ANNOTATION_EXTENSION}", self.name, self.version)
    }
}

/// Refuses a name that is not 1 to 64 of `A-Z a-z 0-9 _ . -`, starting with a letter or digit:
/// it is used as a column key and in a file name, and needs no escaping in either.
///
/// Errors: `Invalid`, naming the name.
pub fn check_name(name: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if name.len() > 64 || !first_ok || !name.chars().all(ok_char) {
        return Err(Error::Invalid(format!(
            "annotation name {name:?}: use 1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or digit"
        )));
    }
    Ok(())
}

/// The column an annotation `name` reads as, and its mask: ids 0 and 1 in the sidecar.
pub fn columns(name: &str, dtype: &str, shape: &[u64]) -> [ColumnSpec; 2] {
    let value = ColumnSpec {
        id: 0,
        name: format!("{COLUMN_PREFIX}{name}"),
        dtype: dtype.to_string(),
        shape: shape.to_vec(),
        timeline: Timeline::Step,
        mask_of: None,
        mask: Some(1),
        role: None,
        codec: CodecSpec::default(),
        widens: None,
    };
    let mask = ColumnSpec {
        id: 1,
        name: format!("{COLUMN_PREFIX}_{name}"),
        dtype: "bool".into(),
        shape: Vec::new(),
        mask_of: Some(0),
        mask: None,
        ..value.clone()
    };
    [value, mask]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_need_no_escaping() {
        for good in ["score", "success_label", "v1.2", "A-b", "0"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "_x", "a/b", "a b", "é", ".x", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_meta_json_round_trips() {
        let meta = AnnotationMeta {
            name: "score".into(),
            version: 3,
            created_ns: 7,
            per: "step".into(),
            episodes: vec![Span { lane: 1, episode_id: 2, first_row: 30, rows: 4 }],
        };
        let text = String::from_utf8(meta.to_meta_json().unwrap()).unwrap();
        assert_eq!(AnnotationMeta::from_meta_json(&text).unwrap(), meta);
        assert!(AnnotationMeta::from_meta_json("{}").unwrap_err().contains("no 'annotation'"));
        assert!(meta.file_name(&[0xab; 16]).ends_with("-v00003.trja"));
    }
}
