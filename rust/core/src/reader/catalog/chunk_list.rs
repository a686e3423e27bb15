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

impl ChunkList {
    /// Puts `c` where `place_chunk` said (see `put_chunk`), its end row with it: a refresh
    /// appends a few chunks to lists of hundreds, and must not pack every end again.
    pub fn put(&mut self, c: Located, place: Insert) -> bool {
        let end = c.end_row();
        match &place {
            Insert::At(at) => self.ends.insert(*at, end),
            Insert::Over(range) => drop(self.ends.splice(range.clone(), [end])),
            Insert::Repeat | Insert::Clash => return false,
        }
        put_chunk(&mut self.chunks, c, place)
    }
}

/// Where a new chunk goes in a list sorted by first row and free of overlaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Insert {
    At(usize),
    /// Rows only repeats hold (`list[range]`): they filled in for the chunk's shard while the
    /// dataset lacked it (a shard listed after the one that follows it), and make way for it.
    Over(std::ops::Range<usize>),
    /// Repeated rows (`CHUNK_REPEAT`) another chunk holds: left out.
    Repeat,
    /// Rows another chunk holds.
    Clash,
}

/// Where `c` goes in `list` (see `Insert`): repeated rows only fill in for a shard the dataset
/// lacks, so lists stay sorted and a row has at most one chunk.
pub(crate) fn place_chunk(list: &[Located], c: &Located) -> Insert {
    let at = list.partition_point(|x| x.first_row() < c.first_row());
    // The chunks it overlaps: `list[from..to]` (the list is sorted and disjoint).
    let from = if at > 0 && list[at - 1].end_row() > c.first_row() { at - 1 } else { at };
    let to = at + list[at..].partition_point(|x| x.first_row() < c.end_row());
    match (from == to, c.chunk.is_repeat()) {
        (true, _) => Insert::At(at),
        (false, true) => Insert::Repeat,
        (false, false) if list[from..to].iter().all(|x| x.chunk.is_repeat()) => Insert::Over(from..to),
        (false, false) => Insert::Clash,
    }
}

/// Puts `c` into `list` where `place_chunk` said (`At` or `Over`); returns whether it did.
pub(crate) fn put_chunk(list: &mut Vec<Located>, c: Located, place: Insert) -> bool {
    match place {
        Insert::At(at) => list.insert(at, c),
        Insert::Over(range) => drop(list.splice(range, [c])),
        Insert::Repeat | Insert::Clash => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::chunks::CHUNK_REPEAT;

    fn at(first_row: u64, n_rows: u32) -> Located {
        Located { shard: 0, chunk: ChunkRef { first_row, n_rows, ..Default::default() }, record: 0 }
    }

    fn repeat(first_row: u64, n_rows: u32) -> Located {
        let c = at(first_row, n_rows);
        Located { chunk: ChunkRef { flags: CHUNK_REPEAT, ..c.chunk }, ..c }
    }

    #[test]
    fn placing_a_chunk() {
        let l = [at(0, 10), at(10, 5), at(20, 5)];
        let cases = [
            (at(15, 5), Insert::At(2)),
            (at(25, 1), Insert::At(3)),
            (at(14, 2), Insert::Clash),
            (at(19, 2), Insert::Clash),
            (repeat(12, 3), Insert::Repeat),
        ];
        for (c, want) in cases {
            assert_eq!(place_chunk(&l, &c), want, "rows {}..{}", c.first_row(), c.end_row());
        }
        // The next shard's repeat of row 19 and the shard after's of row 29 filled in for
        // shards listed late (rows 15..20 and 25..30 missing).
        let l = [at(0, 10), at(10, 5), repeat(19, 1), at(20, 5), repeat(29, 1), at(30, 5)];
        let cases = [
            ("the late shard's rows take the repeat's place", at(15, 5), Insert::Over(2..3)),
            ("not over a shard's rows between repeats", at(15, 15), Insert::Clash),
            ("not over rows a shard holds", at(18, 3), Insert::Clash),
            ("rows before the repeat", at(15, 4), Insert::At(2)),
            ("over the repeat alone", at(19, 1), Insert::Over(2..3)),
            ("another repeat of the same row", repeat(19, 1), Insert::Repeat),
            ("the last one", at(25, 5), Insert::Over(4..5)),
        ];
        for (name, c, want) in cases {
            assert_eq!(place_chunk(&l, &c), want, "{name}");
        }
        let only_repeats = [at(0, 10), repeat(14, 1), repeat(19, 1)];
        assert_eq!(place_chunk(&only_repeats, &at(10, 10)), Insert::Over(1..3));
        let mut list = l.to_vec();
        assert!(put_chunk(&mut list, at(15, 5), Insert::Over(2..3)));
        let rows: Vec<(u64, u64, bool)> =
            list.iter().map(|c| (c.first_row(), c.end_row(), c.chunk.is_repeat())).collect();
        assert_eq!(
            rows,
            [(0, 10, false), (10, 15, false), (15, 20, false), (20, 25, false), (29, 30, true), (30, 35, false)]
        );
        assert!(!put_chunk(&mut list, at(0, 1), Insert::Clash));
    }

    #[test]
    fn a_list_keeps_its_ends_as_chunks_are_put() {
        let mut list = ChunkList::default();
        let chunks = [at(10, 5), at(0, 5), repeat(19, 1), at(30, 5), at(15, 5), at(5, 5), repeat(2, 2), at(19, 11)];
        for c in chunks {
            let place = place_chunk(&list.chunks, &c);
            list.put(c, place);
            let ends: Vec<u64> = list.chunks.iter().map(Located::end_row).collect();
            assert_eq!(list.ends, ends, "after rows {}..{}", c.first_row(), c.end_row());
        }
        let rows: Vec<(u64, u64)> = list.chunks.iter().map(|c| (c.first_row(), c.end_row())).collect();
        assert_eq!(rows, [(0, 5), (5, 10), (10, 15), (15, 20), (30, 35)], "the clash (19..30) and the repeat left out");
    }
}
