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
