//! What a dataset knows about damage beyond what opening found: listings to leave out (a
//! verification found their data damaged), and episodes left out when listed (kept for
//! recovery). Damage found while reading is `read_damage`'s.
//!
//! Leaving out is decided where episodes are listed (the catalog asks `Exclusions::excludes`), so a dataset opened with exclusions lists, numbers and samples as if
//! those episodes had never been written; the damage that decided it is listed with the
//! dataset's problems. Exclusions are plain values (keys that do not depend on the order files
//! are opened in), so a dataset pickled into a data-loader worker reopens with the same listing
//! without verifying again.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::format::episode::EpisodeSummary;
use crate::reader::{hex, Problem};

/// One listing of an episode (or of the part of it a shard holds), independent of the order
/// files are opened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpisodeKey {
    pub recording_id: [u8; 16],
    pub episode_id: u64,
    /// Tells the parts of one episode apart.
    pub obs_first_row: u64,
}

impl EpisodeKey {
    pub fn of(recording_id: [u8; 16], summary: &EpisodeSummary) -> Self {
        EpisodeKey { recording_id, episode_id: summary.episode_id, obs_first_row: summary.obs_first_row }
    }
}

/// Listings to leave out, and the damage that decided it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusions {
    pub episodes: HashSet<EpisodeKey>,
    /// Reported with the dataset's problems.
    pub problems: Vec<Problem>,
}

impl Exclusions {
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty() && self.problems.is_empty()
    }

    /// `{"episodes": [[recording id hex, episode id, first obs row], ...], "problems": [[file,
    /// offset, why], ...]}`.
    pub fn to_json(&self) -> String {
        let mut episodes: Vec<&EpisodeKey> = self.episodes.iter().collect();
        episodes.sort_by_key(|k| (k.recording_id, k.episode_id, k.obs_first_row));
        let episodes: Vec<Value> =
            episodes.iter().map(|k| json!([hex(&k.recording_id), k.episode_id, k.obs_first_row])).collect();
        let problems: Vec<Value> =
            self.problems.iter().map(|p| json!([p.file.display().to_string(), p.offset, p.why])).collect();
        json!({ "episodes": episodes, "problems": problems }).to_string()
    }

    /// Errors: `Invalid` (not what `to_json` writes).
    pub fn from_json(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::Invalid(format!("exclusions: {why}"));
        let value: Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
        let list = |key: &str| value.get(key).and_then(Value::as_array).ok_or_else(|| bad(&format!("no '{key}' list")));
        let mut out = Exclusions::default();
        for item in list("episodes")? {
            let (id, episode, row) = match item.as_array().map(Vec::as_slice) {
                Some([id, episode, row]) => (id.as_str(), episode.as_u64(), row.as_u64()),
                _ => (None, None, None),
            };
            match (id.and_then(unhex), episode, row) {
                (Some(recording_id), Some(episode_id), Some(obs_first_row)) => {
                    out.episodes.insert(EpisodeKey { recording_id, episode_id, obs_first_row });
                }
                _ => return Err(bad(&format!("bad episode key {item}"))),
            }
        }
        for item in list("problems")? {
            match item.as_array().map(Vec::as_slice) {
                Some([Value::String(file), offset, Value::String(why)]) if offset.is_u64() => {
                    out.problems.push(Problem::new(file, offset.as_u64().unwrap_or_default(), why.clone()));
                }
                _ => return Err(bad(&format!("bad problem {item}"))),
            }
        }
        Ok(out)
    }
}

/// An episode left out when it was listed (some of its rows are lost), kept so that recovery
/// can save what precedes the loss.
#[derive(Debug, Clone)]
pub(crate) struct LeftOut {
    pub recording: usize,
    pub shard: usize,
    pub summary: EpisodeSummary,
}

impl Exclusions {
    /// Whether a listing is to be left out.
    pub fn excludes(&self, recording_id: &[u8; 16], summary: &EpisodeSummary) -> bool {
        !self.episodes.is_empty() && self.episodes.contains(&EpisodeKey::of(*recording_id, summary))
    }
}

fn unhex(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_round_trip_through_json() {
        let mut ex = Exclusions::default();
        ex.episodes.insert(EpisodeKey { recording_id: [7; 16], episode_id: 3, obs_first_row: 40 });
        ex.episodes.insert(EpisodeKey { recording_id: [0xab; 16], episode_id: u64::MAX, obs_first_row: 0 });
        ex.problems.push(Problem::new("/a/b.trj", 1400, "chunks record payload checksum mismatch"));
        assert_eq!(Exclusions::from_json(&ex.to_json()).unwrap(), ex);
        assert!(Exclusions::from_json(&Exclusions::default().to_json()).unwrap().is_empty());
        for bad in
            ["", "{}", r#"{"episodes": [["zz", 1, 2]], "problems": []}"#, r#"{"episodes": [], "problems": [[1]]}"#]
        {
            assert!(matches!(Exclusions::from_json(bad), Err(Error::Invalid(_))), "{bad}");
        }
    }
}
