//! Annotation sidecars (`crate::annotation`) in the catalog: which are taken (the latest version
//! of each name, per recording, among those that read whole), and the columns they add after a
//! recording's own, with their chunk lists. Attaching is redone at every `take_in`, after the
//! recording's own columns are listed, so a column the recording adds later (a live recorder)
//! never meets an annotation's id; a refresh drops the batch plans made with the old ids.
//!
//! Annotation columns are masked custom data: an episode without a value reads as no value
//! (mask false), never as another episode's. They take no part in deciding whether an episode
//! is listed: a damaged or missing sidecar never hides recorded data.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::trust::check_chunk;
use super::{Catalog, ShardFacts};
use crate::annotation::sidecar::COLUMN_PREFIX;
use crate::annotation::{latest, AnnotationMeta, Candidate};
use crate::reader::catalog::chunk_list::{ChunkList, ListKey, Located};
use crate::reader::store::checksummed::VerifiedRecords;
use crate::reader::store::shard::Found;
use crate::reader::{hex, Problem};
use crate::schema::{ColumnId, ColumnSpec};

/// A sidecar found in the dataset, as `Dataset::annotations` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AnnotationFile {
    /// Index into `Dataset::recordings`.
    pub recording: usize,
    pub name: String,
    pub version: u64,
    /// "step" or "episode" (one value per episode, stored on each of its steps).
    pub per: String,
    /// Episodes it holds values of.
    pub episodes: usize,
    #[serde(serialize_with = "crate::reader::path_text")]
    pub path: PathBuf,
    /// Readers take it: the latest version of its name, read whole.
    pub taken: bool,
    /// Why it is not read (damage, a name the recording records itself), if so.
    pub problem: Option<String>,
}

/// A sidecar as the catalog holds it.
pub(crate) struct Sidecar {
    pub file: AnnotationFile,
    pub recording_id: [u8; 16],
    /// Its shard index in the catalog.
    pub shard: usize,
    /// Its value and mask columns, ids 0 and 1 in the file; `None` while it cannot be read
    /// whole (then `file.problem` says why).
    pub columns: Option<[ColumnSpec; 2]>,
    pub chunks: Vec<Located>,
}

impl Sidecar {
    /// What `meta_json` and `columns` (the file's Meta and Column records) say, or why they
    /// cannot be read as an annotation.
    pub fn describe(
        meta_json: Option<&str>,
        columns: &[ColumnSpec],
    ) -> Result<(AnnotationMeta, [ColumnSpec; 2]), String> {
        let meta = AnnotationMeta::from_meta_json(meta_json.ok_or("its Meta record did not survive")?)?;
        let want = crate::annotation::sidecar::columns(&meta.name, "bool", &[]);
        let by_id = |id: ColumnId| columns.iter().find(|c| c.id == id).cloned();
        match (by_id(0), by_id(1)) {
            (Some(v), Some(m)) if v.name == want[0].name && m == want[1] && v.mask == Some(1) => Ok((meta, [v, m])),
            _ => Err(format!("its columns are not '{}' and its mask", want[0].name)),
        }
    }
}

/// The columns the taken annotations add after `own` (a recording's own columns), each with its
/// mask, ids following on; and, per annotation given, its (value, mask) ids or why it is not
/// attached (the recording records a column of that name itself).
pub(crate) fn attach(
    own: &[ColumnSpec],
    taken: &[&[ColumnSpec; 2]],
) -> (Vec<ColumnSpec>, Vec<Result<[ColumnId; 2], String>>) {
    let mut added: Vec<ColumnSpec> = Vec::new();
    let mut ids = Vec::with_capacity(taken.len());
    for [value, mask] in taken.iter().copied() {
        let clash = own.iter().chain(&added).find(|c| c.name == value.name || c.name == mask.name);
        if let Some(c) = clash {
            ids.push(Err(format!("the recording has a column '{}' of its own; the annotation is not read", c.name)));
            continue;
        }
        let base = (own.len() + added.len()) as ColumnId;
        added.push(ColumnSpec { id: base, mask: Some(base + 1), ..value.clone() });
        added.push(ColumnSpec { id: base + 1, mask_of: Some(base), ..mask.clone() });
        ids.push(Ok([base, base + 1]));
    }
    (added, ids)
}

/// Per recording index, the sidecars readers take (indexes into `sidecars`), in name order: the
/// latest version of each name, if it reads whole. A damaged latest version is not replaced by
/// an earlier one (its values are not the ones asked for): the annotation is not read at all.
pub(crate) fn taken_by_recording(sidecars: &[Sidecar]) -> BTreeMap<usize, Vec<usize>> {
    // A sidecar whose Meta record did not read has no name to rank it by.
    let ranked: Vec<usize> = (0..sidecars.len()).filter(|&i| !sidecars[i].file.name.is_empty()).collect();
    let candidates: Vec<Candidate> = ranked
        .iter()
        .map(|&i| Candidate {
            recording: sidecars[i].recording_id,
            name: sidecars[i].file.name.clone(),
            version: sidecars[i].file.version,
        })
        .collect();
    let mut out: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for t in latest(&candidates) {
        let i = ranked[t];
        if sidecars[i].columns.is_none() {
            continue;
        }
        out.entry(sidecars[i].file.recording).or_default().push(i);
    }
    for list in out.values_mut() {
        list.sort_by(|&a, &b| sidecars[a].file.name.cmp(&sidecars[b].file.name));
    }
    out
}

impl Catalog {
    /// Registers a sidecar with the recording it annotates (no place among its shards); `None`
    /// (and a problem) when the dataset does not hold that recording.
    pub(super) fn register_sidecar(&mut self, shard: ShardFacts) -> Option<usize> {
        let Some(recording) = self.recordings.iter().position(|r| r.id == shard.recording_id) else {
            let why = format!(
                "annotation sidecar of recording {}, which this dataset does not hold: left out",
                hex(&shard.recording_id)
            );
            self.own_problems.push(Problem::new(&shard.path, 0, why));
            return None;
        };
        let index = self.shards.len();
        self.shard_recording.push(recording);
        self.shards.push(shard);
        self.shard_damage.push(None);
        Some(index)
    }

    /// Takes in what scans of sidecars found: a sidecar is read whole or not at all (a problem
    /// names it and why).
    pub(super) fn take_in_sidecars(&mut self, found: Vec<(usize, Found)>, verified: &mut VerifiedRecords) {
        for (shard, f) in found {
            for &record in &f.verified {
                let id = verified.id((shard, record));
                verified.mark(id);
            }
            if self.sidecars.iter().any(|s| s.shard == shard) {
                continue; // a later scan of a file written whole finds nothing new
            }
            let columns: Vec<ColumnSpec> = f.columns.iter().map(|(_, c)| c.clone()).collect();
            let described = Sidecar::describe(f.metas.first().map(|(_, m)| m.as_str()), &columns);
            let path = self.shards[shard].path.clone();
            // The header's shard_seq is the version; a sidecar whose Meta record is damaged is
            // still named by its value column, so that its earlier versions are not read instead.
            let version = self.shards[shard].seq;
            let (name, per, episodes) = match &described {
                Ok((m, _)) => (m.name.clone(), m.per.clone(), m.episodes.len()),
                Err(_) => {
                    let named = columns.iter().find(|c| c.id == 0).and_then(|c| c.name.strip_prefix(COLUMN_PREFIX));
                    (named.unwrap_or_default().to_string(), String::new(), 0)
                }
            };
            let mut problem = described.as_ref().err().cloned();
            if let Ok((m, _)) = &described {
                if m.version != version {
                    problem = Some(format!("its Meta record says version {}, its header {version}", m.version));
                }
            }
            if let Some(offset) = self.shard_damage[shard] {
                problem.get_or_insert(format!("damaged at byte offset {offset}"));
            }
            let mut chunks = Vec::new();
            if let (Ok((_, cols)), None) = (&described, &problem) {
                let specs = cols.iter().map(|c| (c.id, c.clone())).collect();
                for chunk in &f.chunks {
                    if let Err(why) = check_chunk(&specs, chunk) {
                        problem = Some(why);
                        break;
                    }
                    let record = verified.id((shard, chunk.checked_at()));
                    chunks.push(Located { shard, chunk: *chunk, record });
                }
            }
            if let Some(why) = &problem {
                let why = format!("annotation sidecar left out (its column is not read): {why}");
                self.own_problems.push(Problem::new(&path, 0, why));
            }
            let file = AnnotationFile {
                recording: self.shard_recording[shard],
                name,
                version,
                per,
                episodes,
                path,
                taken: false,
                problem: problem.clone(),
            };
            let columns = match (described, problem) {
                (Ok((_, cols)), None) => Some(cols),
                _ => None,
            };
            let recording_id = self.shards[shard].recording_id;
            self.sidecars.push(Sidecar { file, recording_id, shard, columns, chunks });
        }
    }

    /// Takes away the chunk lists the annotations were given (`attach_annotations`), before a
    /// recording's own chunks are taken in: a column it adds may take an annotation's id.
    /// Returns their keys.
    pub(super) fn detach_annotations(&mut self) -> Vec<ListKey> {
        let before: Vec<ListKey> = std::mem::take(&mut self.attached);
        for key in &before {
            self.chunk_lists.remove(key);
        }
        before
    }

    /// Gives the taken annotations their columns after each recording's own (listed by
    /// `list_columns`) and their chunk lists; `before`: the keys `detach_annotations` took away.
    pub(super) fn attach_annotations(&mut self, before: &[ListKey]) {
        for s in &mut self.sidecars {
            s.file.taken = false;
        }
        for (recording, list) in taken_by_recording(&self.sidecars) {
            let specs: Vec<&[ColumnSpec; 2]> = list.iter().filter_map(|&i| self.sidecars[i].columns.as_ref()).collect();
            let (added, ids) = attach(self.recordings[recording].own_columns(), &specs);
            self.recordings[recording].columns.extend(added);
            let mut lists: BTreeMap<ListKey, Vec<Located>> = BTreeMap::new();
            for (&i, ids) in list.iter().zip(ids) {
                let sidecar = &mut self.sidecars[i];
                match ids {
                    Ok(ids) => {
                        sidecar.file.taken = true;
                        // The chunk keeps its column id in the file (its checksum covers it);
                        // the list key gives it the recording's.
                        for l in &sidecar.chunks {
                            lists.entry((recording, l.chunk.lane, ids[l.chunk.column as usize])).or_default().push(*l);
                        }
                    }
                    Err(why) => {
                        sidecar.file.problem = Some(why.clone());
                        if self.reported.insert(format!("annotation {}", sidecar.file.path.display())) {
                            self.own_problems.push(Problem::new(&sidecar.file.path, 0, why));
                        }
                    }
                }
            }
            for (key, mut chunks) in lists {
                chunks.sort_by_key(Located::first_row);
                // The writer never overlaps a sidecar's chunks; a file that does is not trusted.
                chunks.dedup_by(|b, a| b.first_row() < a.end_row());
                let ends = chunks.iter().map(Located::end_row).collect();
                self.chunk_lists.insert(key, ChunkList { chunks, ends });
                self.attached.push(key);
            }
        }
        // A batch plan made before holds the old ids: it must be made again.
        let ids = |keys: &[ListKey]| keys.iter().map(|&(r, _, c)| (r, c)).collect::<std::collections::BTreeSet<_>>();
        if ids(before) != ids(&self.attached) {
            self.columns_generation += 1;
        }
    }

    /// The sidecars found (`Dataset::annotations`).
    pub fn annotation_files(&self) -> Vec<AnnotationFile> {
        self.sidecars.iter().map(|s| s.file.clone()).collect()
    }

    /// Every sidecar whose version is known, for numbering the next one.
    pub fn annotation_candidates(&self) -> Vec<Candidate> {
        let named = self.sidecars.iter().filter(|s| !s.file.name.is_empty());
        named
            .map(|s| Candidate { recording: s.recording_id, name: s.file.name.clone(), version: s.file.version })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Timeline;

    fn own(names: &[&str]) -> Vec<ColumnSpec> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| ColumnSpec {
                id: i as ColumnId,
                name: n.to_string(),
                dtype: "float32".into(),
                shape: vec![],
                timeline: Timeline::Step,
                mask_of: None,
                mask: None,
                role: None,
                codec: Default::default(),
                widens: None,
            })
            .collect()
    }

    #[test]
    fn annotation_columns_follow_the_recordings_own() {
        let a = crate::annotation::sidecar::columns("score", "float32", &[2]);
        let b = crate::annotation::sidecar::columns("label", "bool", &[]);
        let clash = crate::annotation::sidecar::columns("x", "int64", &[]);
        let (added, ids) = attach(&own(&["obs", "action", "data/x"]), &[&a, &clash, &b]);
        assert_eq!(ids[0], Ok([3, 4]));
        assert!(ids[1].as_ref().unwrap_err().contains("a column 'data/x' of its own"));
        assert_eq!(ids[2], Ok([5, 6]));
        let named: Vec<(ColumnId, &str, Option<ColumnId>, Option<ColumnId>)> =
            added.iter().map(|c| (c.id, c.name.as_str(), c.mask, c.mask_of)).collect();
        assert_eq!(
            named,
            vec![
                (3, "data/score", Some(4), None),
                (4, "data/_score", None, Some(3)),
                (5, "data/label", Some(6), None),
                (6, "data/_label", None, Some(5)),
            ]
        );
        assert_eq!(added[0].shape, vec![2]);
    }

    #[test]
    fn only_a_sidecar_that_reads_as_an_annotation_is_described() {
        let cols = crate::annotation::sidecar::columns("score", "float32", &[]);
        let meta =
            AnnotationMeta { name: "score".into(), version: 1, created_ns: 0, per: "step".into(), episodes: vec![] };
        let json = String::from_utf8(meta.to_meta_json().unwrap()).unwrap();
        assert!(Sidecar::describe(Some(&json), &cols).is_ok());
        assert!(Sidecar::describe(None, &cols).unwrap_err().contains("Meta record"));
        let other = crate::annotation::sidecar::columns("other", "float32", &[]);
        assert!(Sidecar::describe(Some(&json), &other).unwrap_err().contains("'data/score'"));
    }
}
