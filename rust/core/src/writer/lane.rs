//! One lane (sub-env): its rows buffered per column until they are sealed into chunks, its row
//! counts, the episode running in it and the one that just ended.

use serde_json::{Map, Value};

use crate::format::chunks::PendingChunk;
use crate::format::codec::Encoder;
use crate::format::episode::EpisodeSummary;
use crate::format::metrics::MetricsAcc;
use crate::format::stack::RowKinds;
use crate::schema::{ColumnSpec, RowLayout, Timeline};

/// When a column's buffered rows (of one lane) are sealed into a chunk.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLimit {
    /// Bytes of `ColumnBuffer::fill` (stored bytes for frame stacks, raw bytes otherwise).
    pub fill: usize,
    /// Raw bytes: the `chunk_bytes` the column declares, which bounds its decoded chunks.
    pub raw: usize,
    /// Frame-stack columns: the bytes of a frame (see `ColumnSpec::stack_seal_factor`).
    pub frame: Option<usize>,
    /// Rows: a chunk holds at most `CHUNK_ROWS`.
    pub rows: u32,
}

/// The most rows a chunk holds, whatever their size. A chunk is what one damaged byte costs
/// (it carries its own checksum): 1 MiB of CartPole observations is 65,536 rows, about 3,000
/// episodes of one lane; 4,096 rows is under 200, and each chunk still compresses as one zstd
/// frame of its column (`benches/test_damage_locality.py` measures both).
pub const CHUNK_ROWS: u32 = 4096;

impl ChunkLimit {
    /// The limit of column `spec`; `default_bytes` where it declares no `chunk_bytes`.
    pub fn of(spec: &ColumnSpec, default_bytes: usize) -> Self {
        let bytes = |b: Option<u64>| b.map_or(default_bytes, |b| usize::try_from(b).unwrap_or(usize::MAX));
        let frame = match (spec.stack_seal_factor(), spec.row_layout()) {
            (2.., RowLayout { row_bytes: Some(row), stack: Some(frames), .. }) => Some(row / frames),
            _ => None,
        };
        ChunkLimit {
            fill: bytes(spec.requested_chunk_bytes()),
            raw: bytes(spec.codec.chunk_bytes),
            frame,
            rows: CHUNK_ROWS,
        }
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
    /// The rows (str: their text). Frame-stack columns: the rows as the frame-stack filter
    /// stores them, each row whole or, when it shifts the one before, its new frame alone: a
    /// quarter of the bytes for stacks of 4 to copy and keep. The last row is still the last
    /// `row` bytes (see `stack::Frames`).
    pub data: Vec<u8>,
    /// Str columns: end offset of each row in `data`.
    pub ends: Vec<u64>,
    /// The last row sealed (its raw bytes; text bytes for str), so a rollover can repeat it.
    pub last_sealed_row: Option<Vec<u8>>,
    /// Frame-stack columns (sealed on their stored size): the bytes of a frame, and each
    /// buffered row's kind.
    pub frame: Option<usize>,
    pub kinds: RowKinds,
    /// Frame-stack columns: the raw bytes of the rows buffered, and the stored bytes a chunk
    /// is sealed at (room for them is reserved at a chunk's first row).
    raw: usize,
    fill: usize,
}

impl ColumnBuffer {
    /// A buffer for a column's rows from `first_row`, sealed at `limit`.
    pub fn starting_at(first_row: u64, limit: &ChunkLimit) -> Self {
        ColumnBuffer { first_row, frame: limit.frame, fill: limit.fill, ..Default::default() }
    }

    pub fn push_fixed(&mut self, row: &[u8]) {
        match self.frame {
            Some(frame) => {
                if self.data.capacity() == 0 {
                    // Room for a whole chunk (and the two rows a step may add past it) at once
                    // rather than growing by doubling, which copies megabytes and faults in
                    // fresh pages at each step up; the buffer keeps it from chunk to chunk.
                    self.data.reserve_exact(self.fill.min(MAX_RESERVED_CHUNK).saturating_add(2 * row.len()));
                }
                // The row before is the last `row.len()` bytes, however it was stored.
                let before = &self.data[self.data.len().saturating_sub(row.len())..];
                let stored = self.kinds.push(if self.rows == 0 { &[] } else { before }, row, frame);
                self.data.extend_from_slice(&row[row.len() - stored..]);
                self.raw += row.len();
            }
            None => self.data.extend_from_slice(row),
        }
        self.rows += 1;
    }

    pub fn push_zeros(&mut self, row_bytes: Option<usize>) {
        match (row_bytes, self.frame) {
            (Some(n), Some(_)) => return self.push_fixed(&vec![0; n]),
            (Some(n), None) => self.data.resize(self.data.len() + n, 0),
            (None, _) => self.ends.push(self.data.len() as u64),
        }
        self.rows += 1;
    }

    /// Whether the rows buffered make a chunk to seal.
    pub fn is_full(&self, limit: &ChunkLimit) -> bool {
        self.fill() >= limit.fill || self.raw_len() >= limit.raw || self.rows >= limit.rows
    }

    /// The bytes a chunk of the rows buffered is sealed on: what the frame-stack filter stores
    /// of them for a frame-stack column, their raw bytes otherwise.
    pub fn fill(&self) -> usize {
        match self.frame {
            Some(_) => self.data.len(),
            None => self.raw_len(),
        }
    }

    pub fn push_str(&mut self, text: &[u8]) {
        self.data.extend_from_slice(text);
        self.ends.push(self.data.len() as u64);
        self.rows += 1;
    }

    pub fn raw_len(&self) -> usize {
        match self.frame {
            Some(_) => self.raw,
            None => self.data.len() + self.ends.len() * 8,
        }
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
        // Frame-stack columns buffer fewer bytes than their rows hold.
        let raw_len = if self.frame.is_some() { self.raw } else { raw.len() } as u64;
        let capacity = raw.capacity();
        let (codec, data) = match self.frame {
            Some(_) => encoder.encode_frames(&spec.codec, spec.row_layout(), raw, &self.kinds.0),
            None => encoder.encode(&spec.codec, spec.row_layout(), raw),
        };
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
        self.raw = 0;
        self.kinds.0.clear();
        // Keep the allocation for the next rows unless it grew far past a chunk.
        if self.data.capacity() == 0 {
            let fits = capacity.min(chunk.data.len().max(chunk.raw_len as usize) * 2);
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
    /// A part of it was written (at a rollover, or a flush's progress part): dropping it must
    /// be written too.
    pub parts_written: bool,
    /// Its start is lost (a copy of a part listed on its own): it ends incomplete, with its flags.
    pub start_lost: bool,
    /// Its length when its last part was written: a flush writes a progress part only past it.
    pub listed_length: u64,
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

/// An episode that ended at the last row message, while `discard` and metadata reach it.
#[derive(Debug, Clone)]
pub struct HeldEpisode {
    pub ended: EndedEpisode,
    /// A part of it was written (at a rollover, or a flush's progress part): dropping it must be
    /// written too.
    pub parts_written: bool,
    /// A part lists every step of it already (no progress part is due).
    pub listed: bool,
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
    pub held: Option<HeldEpisode>,
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
    use crate::schema::CodecSpec;
    use proptest::prelude::*;

    proptest! {
        /// A frame-stack buffer holds the rows as the filter stores them, with the kinds the
        /// filter decides on the whole chunk: the rows come back whole, it is sealed on what it
        /// will store, and its chunk is the one the rows themselves encode to.
        #[test]
        fn frames_buffered_as_rows_come_are_the_filters(
            draws in prop::collection::vec((0u8..3, any::<bool>(), prop::collection::vec(0u8..2, 3)), 1..40),
            zstd in any::<bool>(),
        ) {
            let (stack_frames, frame) = (4usize, 3usize);
            let row = stack_frames * frame;
            let mut buffer = ColumnBuffer::starting_at(0, &ChunkLimit { fill: 1 << 20, raw: 4 << 20, frame: Some(frame), rows: CHUNK_ROWS });
            let mut rows: Vec<u8> = Vec::new();
            let mut last: Vec<u8> = vec![0; row];
            for (what, zeros, fresh) in draws {
                if zeros {
                    buffer.push_zeros(Some(row));
                    last = vec![0; row];
                } else {
                    last = match what {
                        0 => [&last[frame..], &fresh[..]].concat(), // a shift: frames 1.. and a new one
                        _ => fresh.iter().copied().cycle().take(row).collect(),
                    };
                    buffer.push_fixed(&last);
                }
                rows.extend_from_slice(&last);
            }
            let expected = stack::RowKinds::of(&rows, row, frame);
            prop_assert_eq!(&buffer.kinds.0, &expected.0);
            prop_assert_eq!(stack::expand(&buffer.data, &buffer.kinds.0, row, frame), rows.clone());
            let stored: usize = expected.0.iter().map(|&k| if k == stack::SHIFT { frame } else { row }).sum();
            prop_assert_eq!((buffer.fill(), buffer.raw_len()), (stored, rows.len()));
            prop_assert_eq!(buffer.last_row(Some(row)).unwrap(), last);
            let spec = CodecSpec { zstd_level: zstd.then_some(3), ..CodecSpec::default() };
            let layout = RowLayout { row_bytes: Some(row), stack: Some(stack_frames), try_delta: false };
            let from_frames = Encoder::default().encode_frames(&spec, layout, buffer.data.clone(), &buffer.kinds.0);
            prop_assert_eq!(from_frames, Encoder::default().encode(&spec, layout, rows));
        }
    }
}
