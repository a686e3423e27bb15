//! The decisions about what a file's records may be trusted with, as pure functions: whether a
//! chunk's claims fit its column, whether a column and its mask describe each other, where an
//! episode's rows lie on a timeline, and the first run of rows no chunk holds. Nothing here does
//! I/O: table tests cover the cases.

use std::collections::BTreeMap;

use super::chunk_list::Located;
use crate::format::chunks::ChunkRef;
use crate::format::codec::{codec_ids, CODEC_DELTA, CODEC_STACK, CODEC_ZSTD};
use crate::format::episode::EpisodeSummary;
use crate::schema::{ColumnId, ColumnSpec, Timeline};

/// Why a column and its mask do not describe each other, if they do not.
pub(in crate::reader) fn mask_pair_problem(columns: &[ColumnSpec], spec: &ColumnSpec) -> Option<String> {
    // (value, mask) must point at each other, the mask a bool scalar on the value's timeline.
    let pair_holds = |value: &ColumnSpec, mask: &ColumnSpec| {
        value.mask == Some(mask.id)
            && mask.mask_of == Some(value.id)
            && mask.dtype == "bool"
            && mask.shape.is_empty()
            && mask.timeline == value.timeline
    };
    if let Some(m) = spec.mask {
        let Some(mask) = columns.get(m as usize) else { return Some(format!("its mask column {m} is not described")) };
        if !pair_holds(spec, mask) {
            return Some(format!("column {m} ('{}') is not a mask of it", mask.name));
        }
    }
    if let Some(v) = spec.mask_of {
        let Some(value) = columns.get(v as usize) else {
            return Some(format!("the column {v} it masks is not described"));
        };
        if !pair_holds(value, spec) {
            return Some(format!("it is not the mask of column {v} ('{}')", value.name));
        }
    }
    None
}

/// Columns that hold a value on every row: neither a masked column nor a mask.
pub(crate) fn is_required(spec: &ColumnSpec) -> bool {
    spec.mask.is_none() && spec.mask_of.is_none()
}

/// (first row, number of rows) of an episode on a timeline; `None` on overflow.
pub(crate) fn episode_span(s: &EpisodeSummary, timeline: Timeline) -> Option<(u64, u64)> {
    let (first, n) = match timeline {
        Timeline::Obs => (s.obs_first_row, s.length.checked_add(1)?),
        Timeline::Step => (s.step_first_row, s.length),
    };
    first.checked_add(n)?;
    Some((first, n))
}

/// The first run of rows in `start..end` that no chunk of the (sorted, disjoint) list holds.
pub(in crate::reader) fn first_gap(list: &[Located], start: u64, end: u64) -> Option<(u64, u64)> {
    let mut cursor = start;
    let from = list.partition_point(|c| c.end_row() <= start);
    for c in &list[from..] {
        if cursor >= end {
            return None;
        }
        if c.first_row() > cursor {
            return Some((cursor, c.first_row().min(end)));
        }
        cursor = c.end_row();
    }
    (cursor < end).then_some((cursor, end))
}

/// Checks what a chunk claims against its column, so reads can trust the lengths. A refresh
/// checks every chunk it finds: the message is made only for a chunk that fails.
pub(in crate::reader) fn check_chunk(specs: &BTreeMap<ColumnId, ColumnSpec>, c: &ChunkRef) -> Result<(), String> {
    let refuse =
        |why: String| Err(format!("chunk of column {} lane {} (rows from {}): {why}", c.column, c.lane, c.first_row));
    let Some(spec) = specs.get(&c.column) else { return refuse("no description of the column survived".into()) };
    if c.n_rows == 0 || c.first_row.checked_add(c.n_rows as u64).is_none() {
        return refuse(format!("impossible row count {}", c.n_rows));
    }
    let ids = || codec_ids(c.codec);
    let zstd = ids().filter(|&id| id == CODEC_ZSTD).count();
    // zstd must come last (undone first) so its frame header can vouch for the decoded size;
    // the frame-stack filter first (undone last), as it changes the length.
    let known = ids().all(|id| [CODEC_ZSTD, CODEC_DELTA, CODEC_STACK].contains(&id));
    let stack_misplaced = ids().skip(1).any(|id| id == CODEC_STACK);
    if !known || zstd > 1 || (zstd == 1 && ids().last() != Some(CODEC_ZSTD)) || stack_misplaced {
        return refuse(format!("unsupported codec pipeline {:?}", ids().collect::<Vec<u8>>()));
    }
    let has = |codec: u8| ids().any(|id| id == codec);
    if zstd == 0 && !has(CODEC_STACK) && c.stored_len != c.raw_len {
        return refuse(format!("stored uncompressed in {} bytes but says {}", c.stored_len, c.raw_len));
    }
    let most = spec.max_decoded_chunk();
    if c.raw_len > most {
        return refuse(format!(
            "claims {} decoded bytes, more than a chunk of its column may hold ({most})",
            c.raw_len
        ));
    }
    match spec.row_bytes() {
        Some(row) => {
            if (c.n_rows as u64).checked_mul(row as u64) != Some(c.raw_len) {
                return refuse(format!("{} bytes for {} rows of {row} bytes", c.raw_len, c.n_rows));
            }
        }
        None => {
            if has(CODEC_DELTA) || has(CODEC_STACK) {
                return refuse("the delta or frame-stack codec on a variable-length column".into());
            }
            if (c.n_rows as u64 + 1) * 8 > c.raw_len {
                return refuse(format!("{} bytes cannot hold the offsets of {} strings", c.raw_len, c.n_rows));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::codec::pipeline;
    use crate::schema::CodecSpec;

    fn spec(id: ColumnId, name: &str, dtype: &str, shape: &[u64]) -> ColumnSpec {
        ColumnSpec {
            id,
            name: name.into(),
            dtype: dtype.into(),
            shape: shape.to_vec(),
            timeline: Timeline::Step,
            mask_of: None,
            mask: None,
            role: None,
            codec: CodecSpec::default(),
            widens: None,
        }
    }

    fn chunk(column: ColumnId, first_row: u64, n_rows: u32, codec: u32, stored: u64, raw: u64) -> ChunkRef {
        ChunkRef {
            lane: 0,
            column,
            first_row,
            n_rows,
            codec,
            record_offset: 64,
            data_offset: 100,
            stored_len: stored,
            raw_len: raw,
            flags: 0,
            crc: 0,
        }
    }

    /// An episode of `length` steps from rows (obs_first_row, step_first_row) of lane `lane`.
    pub(crate) fn summary(lane: u32, obs_first_row: u64, step_first_row: u64, length: u64) -> EpisodeSummary {
        EpisodeSummary {
            lane,
            flags: crate::format::episode::FLAG_COMPLETE,
            obs_first_row,
            step_first_row,
            length,
            episode_return: 0.0,
            start_ns: 0,
            end_ns: 0,
            episode_id: 0,
            record_offset: 0,
            position: 0,
            metadata_len: 0,
            metrics_len: 0,
            piece_obs_first_row: obs_first_row,
            piece_step_first_row: step_first_row,
            piece_return: 0.0,
            first_shard_seq: 0,
            metrics: Vec::new(),
        }
    }

    #[test]
    fn chunks_checked_against_their_column() {
        let specs: BTreeMap<ColumnId, ColumnSpec> =
            [spec(0, "reward", "float32", &[]), spec(1, "s", "str", &[])].into_iter().map(|s| (s.id, s)).collect();
        let zstd = pipeline(&[CODEC_ZSTD]);
        // (chunk, error contains; None = sane)
        let table: Vec<(ChunkRef, Option<&str>)> = vec![
            (chunk(0, 0, 10, 0, 40, 40), None),
            (chunk(0, 0, 10, zstd, 12, 40), None),
            (chunk(0, 0, 10, pipeline(&[CODEC_DELTA, CODEC_ZSTD]), 12, 40), None),
            (chunk(7, 0, 10, 0, 40, 40), Some("no description of the column")),
            (chunk(0, 0, 0, 0, 0, 0), Some("impossible row count")),
            (chunk(0, u64::MAX, 1, 0, 4, 4), Some("impossible row count")),
            (chunk(0, 0, 10, 0, 12, 40), Some("stored uncompressed")),
            (chunk(0, 0, 10, pipeline(&[CODEC_ZSTD, CODEC_DELTA]), 12, 40), Some("unsupported codec")),
            (chunk(0, 0, 10, pipeline(&[CODEC_ZSTD, CODEC_ZSTD]), 12, 40), Some("unsupported codec")),
            (chunk(0, 0, 10, pipeline(&[CODEC_DELTA, CODEC_STACK, CODEC_ZSTD]), 12, 40), Some("unsupported codec")),
            (chunk(0, 0, 10, pipeline(&[99u8]), 40, 40), Some("unsupported codec")),
            (chunk(0, 0, 10, 0, 44, 44), Some("44 bytes for 10 rows of 4 bytes")),
            (chunk(0, 0, 1 << 30, zstd, 12, 4 << 30), Some("more than a chunk of its column may hold")),
            (chunk(1, 0, 2, 0, 30, 30), None),
            (chunk(1, 0, 5, 0, 30, 30), Some("cannot hold the offsets of 5 strings")),
            (chunk(1, 0, 2, pipeline(&[CODEC_DELTA, CODEC_ZSTD]), 9, 30), Some("variable-length column")),
        ];
        for (c, want) in table {
            let got = check_chunk(&specs, &c);
            match want {
                None => assert_eq!(got, Ok(()), "{c:?}"),
                Some(text) => assert!(got.as_ref().is_err_and(|e| e.contains(text)), "{c:?}: {got:?}"),
            }
        }
    }

    fn located(first_row: u64, n_rows: u32) -> Located {
        Located { shard: 0, chunk: chunk(0, first_row, n_rows, 0, 4 * n_rows as u64, 4 * n_rows as u64), record: 0 }
    }

    #[test]
    fn first_gap_finds_the_first_run_no_chunk_holds() {
        let list = [located(0, 10), located(10, 5), located(20, 10)];
        type Gap = Option<(u64, u64)>;
        let table: &[(u64, u64, Gap)] = &[
            (0, 15, None),
            (3, 12, None),
            (0, 30, Some((15, 20))),
            (16, 19, Some((16, 19))),
            (14, 25, Some((15, 20))),
            (20, 30, None),
            (25, 35, Some((30, 35))),
            (40, 50, Some((40, 50))),
            (5, 5, None),
        ];
        for &(start, end, want) in table {
            assert_eq!(first_gap(&list, start, end), want, "{start}..{end}");
        }
        assert_eq!(first_gap(&[], 0, 3), Some((0, 3)));
    }

    #[test]
    fn a_column_and_its_mask_describe_each_other() {
        let value = |mask| ColumnSpec { mask, ..spec(0, "info/x", "int64", &[]) };
        let mask =
            |mask_of, dtype: &str, timeline| ColumnSpec { mask_of, timeline, ..spec(1, "info/x/_mask", dtype, &[]) };
        let table: Vec<(Vec<ColumnSpec>, usize, Option<&str>)> = vec![
            (vec![value(Some(1)), mask(Some(0), "bool", Timeline::Step)], 0, None),
            (vec![value(Some(1)), mask(Some(0), "bool", Timeline::Step)], 1, None),
            (vec![value(Some(1))], 0, Some("its mask column 1 is not described")),
            (vec![value(Some(1)), mask(Some(0), "int8", Timeline::Step)], 0, Some("is not a mask of it")),
            (vec![value(Some(1)), mask(Some(0), "bool", Timeline::Obs)], 1, Some("it is not the mask of column 0")),
            (vec![value(None), mask(Some(0), "bool", Timeline::Step)], 1, Some("it is not the mask of column 0")),
            (vec![value(None)], 0, None),
        ];
        for (columns, i, want) in table {
            let got = mask_pair_problem(&columns, &columns[i]);
            match want {
                None => assert_eq!(got, None, "{:?}", columns[i]),
                Some(text) => assert!(got.as_ref().is_some_and(|e| e.contains(text)), "{got:?}"),
            }
        }
        assert!(!is_required(&value(Some(1))) && is_required(&value(None)));
    }

    #[test]
    fn episode_spans_by_timeline() {
        let s = summary(0, 7, 5, 3);
        assert_eq!(episode_span(&s, Timeline::Obs), Some((7, 4)));
        assert_eq!(episode_span(&s, Timeline::Step), Some((5, 3)));
        let huge = summary(0, u64::MAX - 1, 0, 3);
        assert_eq!(episode_span(&huge, Timeline::Obs), None);
    }
}
