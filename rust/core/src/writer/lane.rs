//! One lane (sub-env): its rows buffered per column until they are sealed into chunks, its row
//! counts, the episode running in it and the one that just ended.

use serde_json::{Map, Value};

use crate::format::chunks::PendingChunk;
use crate::format::codec::Encoder;
use crate::format::episode::EpisodeSummary;
use crate::format::metrics::MetricsAcc;
use crate::schema::{ColumnSpec, Timeline};

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
}

impl ColumnBuffer {
    pub fn starting_at(first_row: u64) -> Self {
        ColumnBuffer { first_row, ..Default::default() }
    }

    pub fn push_fixed(&mut self, row: &[u8]) {
        self.data.extend_from_slice(row);
        self.rows += 1;
    }

    pub fn push_zeros(&mut self, row_bytes: Option<usize>) {
        match row_bytes {
            Some(n) => self.data.resize(self.data.len() + n, 0),
            None => self.ends.push(self.data.len() as u64),
        }
        self.rows += 1;
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
        let (codec, data) = encoder.encode(&spec.codec, spec.row_layout(), raw);
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
        // Keep the allocation for the next rows unless it grew far past a chunk.
        if self.data.capacity() == 0 {
            self.data = Vec::with_capacity(capacity.min(chunk.raw_len as usize * 2));
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
