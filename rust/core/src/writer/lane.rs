//! One lane (sub-env): its rows buffered per column until they are sealed into chunks, its row
//! counts, and the episode running in it.

use serde_json::{Map, Value};

use crate::format::chunks::PendingChunk;
use crate::format::codec::Encoder;
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

    /// Encodes the buffered rows as a chunk and empties the buffer.
    pub fn seal(&mut self, lane: u32, spec: &ColumnSpec, encoder: &mut Encoder) -> Option<PendingChunk> {
        if self.rows == 0 {
            return None;
        }
        let row_bytes = spec.row_bytes();
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
        let (codec, data) = encoder.encode(&spec.codec, row_bytes, raw);
        let chunk =
            PendingChunk { lane, column: spec.id, first_row: self.first_row, n_rows: self.rows, codec, raw_len, data };
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
    pub obs_first_row: u64,
    pub step_first_row: u64,
    pub length: u64,
    pub episode_return: f64,
    pub start_ns: u64,
    pub metadata: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneState {
    /// No episode: rows are ignored until a reset starts one.
    Idle,
    Running,
    /// The episode ended; with next-step autoreset the lane's next row starts the next episode.
    Ended,
    /// The running episode was discarded or aborted: rows are ignored until it ends, then the
    /// lane behaves as `Ended`.
    Skipping,
}

pub struct Lane {
    pub index: u32,
    /// Rows appended so far on each timeline (sealed or not).
    pub obs_rows: u64,
    pub step_rows: u64,
    pub state: LaneState,
    pub episode: Option<OpenEpisode>,
    /// Position in the writer's pending list of the last episode this lane ended, while unwritten.
    pub last_ended: Option<u64>,
    pub buffers: Vec<ColumnBuffer>,
}

impl Lane {
    pub fn new(index: u32) -> Self {
        Lane {
            index,
            obs_rows: 0,
            step_rows: 0,
            state: LaneState::Idle,
            episode: None,
            last_ended: None,
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
