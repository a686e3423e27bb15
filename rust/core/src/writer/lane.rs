//! One lane (sub-env): its rows buffered per column until they are sealed into chunks, its row
//! counts, the episode running in it and the one that just ended.

use serde_json::{Map, Value};

use crate::format::chunks::PendingChunk;
use crate::format::codec::{Encoder, RowLayout};
use crate::format::episode::EpisodeSummary;
use crate::format::metrics::MetricsAcc;
use crate::format::stack::RowKinds;
use crate::schema::{ColumnSpec, Timeline};

/// When a column's buffered rows (of one lane) are sealed into a chunk.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLimit {
    /// Bytes of `ColumnBuffer::fill` (stored bytes for frame stacks, raw bytes otherwise).
    pub fill: usize,
    /// Raw bytes: the `chunk_bytes` the column declares, which bounds its decoded chunks.
    pub raw: usize,
    /// Frame-stack columns: the bytes of a frame (see `ColumnSpec::stack_seal_factor`).
    pub frame: Option<usize>,
}

impl ChunkLimit {
    /// The limit of column `spec`; `default_bytes` where it declares no `chunk_bytes`.
    pub fn of(spec: &ColumnSpec, default_bytes: usize) -> Self {
        let bytes = |b: Option<u64>| b.map_or(default_bytes, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let frame = match (spec.stack_seal_factor(), spec.row_layout()) {
            (2.., RowLayout { row_bytes: Some(row), stack: Some(frames), .. }) => Some(row / frames),
            _ => None,
        };
        ChunkLimit { fill: bytes(spec.requested_chunk_bytes()), raw: bytes(spec.codec.chunk_bytes), frame }
    }
}

/// The most a buffer reserves ahead for a chunk (larger chunks grow as rows come).
const MAX_RESERVED_CHUNK: usize = 64 << 20;

/// Rows of one column of one lane not yet written.
#[derive(Debug, Default)]
pub struct ColumnBuffer {
    /// Lane row number of the first buffered row.
    pub first_row: u64,
    pub rows: u32,
    pub data: Vec<u8>,
    /// Str columns: end offset of each row in `data`.
    pub ends: Vec<u64>,
    /// The last row sealed (its raw bytes; text bytes for str), so a rollover can repeat it.
    pub last_sealed_row: Option<Vec<u8>>,
    /// Frame-stack columns sealed on their stored size: the bytes of a frame.
    pub frame: Option<usize>,
    /// Frame-stack columns: the bytes the frame-stack filter will store for the rows buffered
    /// (a whole row, or the new frame of a row that shifts the one before), and their kinds.
    pub stored: usize,
    pub kinds: RowKinds,
}

impl ColumnBuffer {
    /// A buffer for a column's rows from `first_row`; `frame` (a frame's bytes) for a column
    /// sealed on the bytes the frame-stack filter stores.
    pub fn starting_at(first_row: u64, frame: Option<usize>) -> Self {
        ColumnBuffer { first_row, frame, ..Default::default() }
    }

    pub fn push_fixed(&mut self, row: &[u8]) {
        self.data.extend_from_slice(row);
        self.rows += 1;
        self.note_kind(row.len());
    }

    pub fn push_zeros(&mut self, row_bytes: Option<usize>) {
        match row_bytes {
            Some(n) => {
                self.data.resize(self.data.len() + n, 0);
                self.note_kind(n);
            }
            None => self.ends.push(self.data.len() as u64),
        }
        self.rows += 1;
    }

    /// Frame-stack columns: room for a whole chunk at its first row (`raw` bytes, the column's
    /// bound, and a row more), rather than growing by doubling, which copies megabytes and
    /// faults in fresh pages at each step up; the buffer then keeps it from chunk to chunk.
    pub fn reserve_chunk(&mut self, raw: usize, row: usize) {
        if self.frame.is_some() && self.data.capacity() == 0 {
            self.data.reserve_exact(raw.min(MAX_RESERVED_CHUNK).saturating_add(2 * row));
        }
    }

    /// Frame-stack columns: the kind of the row of `row` bytes just buffered.
    fn note_kind(&mut self, row: usize) {
        if let Some(frame) = self.frame {
            let (before, cur) = self.data.split_at(self.data.len() - row);
            self.stored += self.kinds.push(before, cur, frame);
        }
    }

    /// Whether the rows buffered make a chunk to seal.
    pub fn is_full(&self, limit: &ChunkLimit) -> bool {
        self.fill() >= limit.fill || self.raw_len() >= limit.raw || self.rows == u32::MAX
    }

    /// The bytes a chunk of the rows buffered would be sealed on: what the frame-stack filter
    /// stores of them for a frame-stack column, their raw bytes otherwise.
    pub fn fill(&self) -> usize {
        match self.frame {
            Some(_) => self.stored,
            None => self.raw_len(),
        }
    }

    pub fn push_str(&mut self, text: &[u8]) {
        self.data.extend_from_slice(text);
        self.ends.push(self.data.len() as u64);
        self.rows += 1;
    }

    pub fn raw_len(&self) -> usize {
        self.data.len() + self.ends.len() * 8
    }

    /// The bytes of the last row this buffer took (buffered, or the last one sealed).
    pub fn last_row(&self, row_bytes: Option<usize>) -> Option<Vec<u8>> {
        if self.rows == 0 {
            return self.last_sealed_row.clone();
        }
        Some(match row_bytes {
            Some(n) => self.data[self.data.len() - n..].to_vec(),
            None => {
                let end = *self.ends.last()? as usize;
                let start = self.ends.len().checked_sub(2).map_or(0, |i| self.ends[i] as usize);
                self.data[start..end].to_vec()
            }
        })
    }

    /// The row after the last one this buffer took, in its lane's numbering.
    pub fn end_row(&self) -> u64 {
        self.first_row + self.rows as u64
    }

    /// Encodes the buffered rows as a chunk and empties the buffer.
    pub fn seal(&mut self, lane: u32, spec: &ColumnSpec, encoder: &mut Encoder) -> Option<PendingChunk> {
        if self.rows == 0 {
            return None;
        }
        let row_bytes = spec.row_bytes();
        self.last_sealed_row = self.last_row(row_bytes);
        let raw = if row_bytes.is_some() {
            std::mem::take(&mut self.data)
        } else {
            // Str chunks: (rows + 1) u64 offsets, then the bytes.
            let mut raw = Vec::with_capacity(8 * (self.ends.len() + 1) + self.data.len());
            raw.extend_from_slice(&0u64.to_le_bytes());
            for end in self.ends.drain(..) {
                raw.extend_from_slice(&end.to_le_bytes());
            }
            raw.extend_from_slice(&self.data);
            self.data.clear();
            raw
        };
        let raw_len = raw.len() as u64;
        let capacity = raw.capacity();
        let kinds = self.frame.map(|_| self.kinds.0.as_slice());
        let (codec, data) = encoder.encode(&spec.codec, spec.row_layout(), raw, kinds);
        let chunk = PendingChunk {
            lane,
            column: spec.id,
            first_row: self.first_row,
            n_rows: self.rows,
            codec,
            raw_len,
            data,
            flags: 0,
        };
        self.first_row += self.rows as u64;
        self.rows = 0;
        self.stored = 0;
        self.kinds.0.clear();
        // Keep the allocation for the next rows unless it grew far past a chunk.
        if self.data.capacity() == 0 {
            let fits = capacity.min(chunk.raw_len as usize * 2);
            self.data = match encoder.take_spare() {
                Some(spare) if spare.capacity() <= fits => spare,
                _ => Vec::with_capacity(fits),
            };
        }
        Some(chunk)
    }
}

/// The episode running in a lane.
#[derive(Debug, Clone)]
pub struct OpenEpisode {
    /// Its number in the recording, in start order (shared by its parts).
    pub episode_id: u64,
    /// Lane rows of the episode's first observation and step row; set when its reset row is
    /// written, which waits for the first step (an episode that never steps writes nothing).
    pub obs_first_row: u64,
    pub step_first_row: u64,
    pub length: u64,
    pub episode_return: f64,
    pub start_ns: u64,
    pub metadata: Map<String, Value>,
    /// Where its part in the current shard starts (after a rollover: the repeated last
    /// observation row), the return of that part's steps, and the shard of its first rows.
    pub piece_obs_first_row: u64,
    pub piece_step_first_row: u64,
    pub piece_return: f64,
    pub first_shard_seq: u64,
    /// A part of it was written at a rollover: dropping it must be written too.
    pub parts_written: bool,
    /// Its metrics so far (numeric scalar info and custom-data columns).
    pub metrics: MetricsAcc,
}

/// An ended episode (or a part, or the notice that a parted episode was discarded) whose record
/// is not written yet.
#[derive(Debug, Clone)]
pub struct EndedEpisode {
    pub summary: EpisodeSummary,
    pub metadata: Map<String, Value>,
    /// Its metrics blob (see `format::episode`).
    pub metrics: Vec<u8>,
}

/// The reset row of the lane's open episode, kept until its first step: per observation-timeline
/// row column (in the writer's row order) the value's range in `data`, or `None` if missing.
#[derive(Debug, Default)]
pub struct StashedRow {
    pub data: Vec<u8>,
    pub values: Vec<Option<(usize, usize)>>,
}

impl StashedRow {
    pub fn clear(&mut self) {
        self.data.clear();
        self.values.clear();
    }

    pub fn push(&mut self, value: Option<&[u8]>) {
        self.values.push(value.map(|v| {
            let start = self.data.len();
            self.data.extend_from_slice(v);
            (start, v.len())
        }));
    }

    /// The k-th stashed value (`None` too for columns added after the row was stashed).
    pub fn get(&self, k: usize) -> Option<&[u8]> {
        self.values.get(k).copied().flatten().map(|(s, n)| &self.data[s..s + n])
    }
}

pub struct Lane {
    pub index: u32,
    /// Rows appended so far on each timeline (sealed or not).
    pub obs_rows: u64,
    pub step_rows: u64,
    pub open: Option<OpenEpisode>,
    /// The open episode's reset row, until its first step writes it.
    pub reset_row: StashedRow,
    /// The episode that ended at the last row message, while `discard` and metadata reach it.
    pub held: Option<EndedEpisode>,
    pub buffers: Vec<ColumnBuffer>,
}

impl Lane {
    pub fn new(index: u32) -> Self {
        Lane {
            index,
            obs_rows: 0,
            step_rows: 0,
            open: None,
            reset_row: StashedRow::default(),
            held: None,
            buffers: Vec::new(),
        }
    }

    pub fn rows_of(&self, timeline: Timeline) -> u64 {
        match timeline {
            Timeline::Obs => self.obs_rows,
            Timeline::Step => self.step_rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::stack;
    use proptest::prelude::*;

    proptest! {
        /// The kinds and stored bytes a buffer keeps as rows come are what the frame-stack
        /// filter decides on the whole chunk, so the encoder may take them instead of comparing
        /// the rows again, and a chunk is sealed on the bytes it will store.
        #[test]
        fn kinds_kept_as_rows_come_are_the_filters(
            draws in prop::collection::vec((0u8..3, any::<bool>(), prop::collection::vec(0u8..2, 3)), 1..40),
        ) {
            let (stack_frames, frame) = (4usize, 3usize);
            let row = stack_frames * frame;
            let mut buffer = ColumnBuffer::starting_at(0, Some(frame));
            let mut last: Vec<u8> = vec![0; row];
            for (what, zeros, fresh) in draws {
                match (what, zeros) {
                    (_, true) => {
                        buffer.push_zeros(Some(row));
                        last = vec![0; row];
                    }
                    (0, _) => {
                        // A shift: the previous row's frames 1.. and a new frame.
                        last = [&last[frame..], &fresh[..]].concat();
                        buffer.push_fixed(&last);
                    }
                    _ => {
                        last = fresh.iter().copied().cycle().take(row).collect();
                        buffer.push_fixed(&last);
                    }
                }
            }
            let expected = stack::RowKinds::of(&buffer.data, row, frame);
            prop_assert_eq!(&buffer.kinds.0, &expected.0);
            let stored: usize = expected.0.iter().map(|&k| if k == stack::SHIFT { frame } else { row }).sum();
            prop_assert_eq!(buffer.stored, stored);
            let (mut given, mut decided) = (Vec::new(), Vec::new());
            let a = stack::encode_kinds_into(&buffer.data, row, stack_frames, &buffer.kinds.0, &mut given);
            let b = stack::encode_into(&buffer.data, row, stack_frames, &mut decided);
            prop_assert_eq!(a, b);
            if a.is_some() {
                prop_assert_eq!(given, decided);
            }
        }
    }
}
