//! Recovery: a new dataset holding what of a damaged one still reads.
//!
//! The source is verified (`reader::verify`), planned (`Dataset::salvage`: every intact episode
//! whole, the intact prefix of each damaged one, cut short and marked incomplete) and written
//! again through `convert`'s replay, recording by recording, into a sibling temporary directory
//! renamed into place at the end. The source is only read. The result verifies intact: it is a
//! fresh recording, and only rows that read were copied.
//!
//! A recording that cannot be written again (its Meta record or column descriptions are lost:
//! there is nothing to rebuild its spaces from; or the caller found its space descriptions
//! contradict its columns, which a copy would carry on) is left out and named in the result.

use std::path::{Path, PathBuf};

use crate::convert::{into_place, moved, ConvertOptions, Replay};
use crate::error::{Error, Result};
use crate::reader::{verify_store, Dataset, OpenOptions, Problem, SalvagePlan, VerifyReport};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Recovered {
    /// Episodes written whole.
    pub whole: usize,
    /// Damaged episodes written as their intact prefix (incomplete).
    pub cut: usize,
    /// Damaged episodes of which no step reads.
    pub lost: usize,
    /// Steps written.
    pub steps: u64,
    #[serde(serialize_with = "crate::reader::paths_text")]
    pub shards: Vec<PathBuf>,
    /// Recordings left out, and why.
    pub recordings_lost: Vec<Problem>,
    /// The verification of the source.
    pub source: VerifyReport,
}

/// Writes what of the dataset at `src` still reads into the new dataset directory `dst` (which
/// must not exist, or be empty).
///
/// Errors: `NotFound`, `NotTrajcore` (`src` is one file that is not a trajcore shard), `Version`,
/// `Invalid` (`dst` is not empty; or nothing of `src` reads: no episode has a step to copy, and
/// `dst` is left as it was rather than made a folder that is no dataset), `Io`, and those of the
/// writer.
pub fn recover(src: &Path, dst: &Path) -> Result<Recovered> {
    recover_leaving_out(src, dst, &[])
}

/// `recover`, leaving out the recordings `left_out` names (index, why): their episodes count
/// as lost and each is named in `recordings_lost`.
pub fn recover_leaving_out(src: &Path, dst: &Path, left_out: &[(usize, String)]) -> Result<Recovered> {
    if src.is_dir() {
        // What a compaction killed part way left there, which nothing else would remove.
        crate::writer::files::leftovers::remove_leftovers(src);
    }
    let ds = Dataset::open(src, OpenOptions::default())?;
    crate::reader::store::no_shard::check_dataset(&ds)?;
    let report = verify_store(&ds)?;
    let plan = ds.view().salvage(&report);
    let written = into_place(dst, "recovering", |tmp| {
        let written = write_plan(&ds, &plan, left_out, tmp)?;
        if written.shards.is_empty() {
            return Err(nothing_to_recover(src, dst, &written));
        }
        Ok(written)
    })?;
    Ok(Recovered { shards: moved(&written.shards, dst), source: report, ..written })
}

/// The error of a recovery that wrote no shard: why nothing of `src` was copied.
fn nothing_to_recover(src: &Path, dst: &Path, written: &Recovered) -> Error {
    let why = match (written.recordings_lost.first(), written.lost) {
        (Some(p), _) => format!("its recordings cannot be written again ({}: {})", p.file.display(), p.why),
        (None, 0) => "it holds no episode".to_string(),
        (None, lost) => format!("none of its {lost} episode(s) has an intact step"),
    };
    Error::Invalid(format!("{}: nothing to recover: {why}; {} was not written", src.display(), dst.display()))
}

fn write_plan(ds: &Dataset, plan: &SalvagePlan, left_out: &[(usize, String)], dir: &Path) -> Result<Recovered> {
    let mut out = Recovered {
        whole: 0,
        cut: 0,
        lost: plan.lost,
        steps: 0,
        shards: Vec::new(),
        recordings_lost: Vec::new(),
        source: VerifyReport::default(),
    };
    let opts = ConvertOptions::default();
    let mut start = 0;
    while start < plan.episodes.len() {
        let recording = plan.episodes[start].recording;
        let end = start + plan.episodes[start..].iter().take_while(|e| e.recording == recording).count();
        let mine = &plan.episodes[start..end];
        start = end;
        if let Some((_, why)) = left_out.iter().find(|(r, _)| *r == recording) {
            let file = ds.recording(recording)?.shards.first().map(|&s| ds.shard_paths()[s].clone());
            out.lost += mine.len();
            out.recordings_lost.push(Problem::new(file.unwrap_or_else(|| ds.path().to_path_buf()), 0, why.clone()));
            continue;
        }
        let mut replay = match Replay::start(ds, recording, dir, &opts, "recover") {
            Ok(r) => r,
            Err(Error::Corrupt { path, offset, why }) => {
                out.lost += mine.len();
                out.recordings_lost.push(Problem::new(path, offset, why));
                continue;
            }
            Err(e) => return Err(e),
        };
        for e in mine {
            let label = match e.listed {
                Some(i) => format!("episode {i}"),
                None => format!("episode {} (not listed)", e.summary.episode_id),
            };
            replay.episode(ds, recording, &e.summary, &e.metadata, &label)?;
            out.steps += e.summary.length;
            if e.is_cut() {
                out.cut += 1;
            } else {
                out.whole += 1;
            }
        }
        out.shards.extend(replay.finish()?);
    }
    Ok(out)
}
