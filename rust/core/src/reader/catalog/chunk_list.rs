//! Where a column's rows are: its chunks, each with the shard holding it, per (recording, lane,
//! column), sorted by first row.

use crate::format::chunks::ChunkRef;
use crate::schema::ColumnId;

/// A chunk and the shard it lives in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    pub shard: usize,
    pub chunk: ChunkRef,
    /// Id of its Chunks record in `Dataset::verified`.
    pub record: u32,
}

impl Located {
    pub fn first_row(&self) -> u64 {
        self.chunk.first_row
    }
    /// Checked when the chunk was taken in, so it does not overflow.
    pub fn end_row(&self) -> u64 {
        self.chunk.first_row.saturating_add(self.chunk.n_rows as u64)
    }
}

pub(crate) type ListKey = (usize, u32, ColumnId);

/// The chunks of one (recording, lane, column), sorted by first row and disjoint.
#[derive(Debug, Default)]
pub(crate) struct ChunkList {
    pub chunks: Vec<Located>,
    /// Their end rows, packed: a batched read binary-searches them for every row it gathers,
    /// and 72-byte `Located`s would spread a search over many cache lines.
    pub ends: Vec<u64>,
}

/// Where a new chunk goes in a list sorted by first row and free of overlaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    At(usize),
    /// Repeated rows (`CHUNK_REPEAT`) another chunk holds: left out.
    Repeat,
    /// Rows another chunk holds.
    Clash,
}

/// Where `c` goes in `list` (see `Insert`): repeated rows only fill in for a shard the dataset
/// lacks, so lists stay sorted and a row has at most one chunk.
pub(crate) fn place_chunk(list: &[Located], c: &Located) -> Insert {
    let at = list.partition_point(|x| x.first_row() < c.first_row());
    let clash = (at > 0 && list[at - 1].end_row() > c.first_row())
        || list.get(at).is_some_and(|next| next.first_row() < c.end_row());
    match (clash, c.chunk.is_repeat()) {
        (false, _) => Insert::At(at),
        (true, true) => Insert::Repeat,
        (true, false) => Insert::Clash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::chunks::CHUNK_REPEAT;

    fn at(first_row: u64, n_rows: u32) -> Located {
        Located { shard: 0, chunk: ChunkRef { first_row, n_rows, ..Default::default() }, record: 0 }
    }

    #[test]
    fn placing_a_chunk() {
        let l = [at(0, 10), at(10, 5), at(20, 5)];
        let repeat = Located { chunk: ChunkRef { flags: CHUNK_REPEAT, ..at(12, 3).chunk }, ..at(12, 3) };
        let cases = [
            (at(15, 5), Insert::At(2)),
            (at(25, 1), Insert::At(3)),
            (at(14, 2), Insert::Clash),
            (at(19, 2), Insert::Clash),
            (repeat, Insert::Repeat),
        ];
        for (c, want) in cases {
            assert_eq!(place_chunk(&l, &c), want, "rows {}..{}", c.first_row(), c.end_row());
        }
    }
}
