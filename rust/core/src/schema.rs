//! Columns: what each recorded array is called, its element type, its per-row shape, and which
//! timeline its rows follow.

use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::error::{Error, Result};

pub type ColumnId = u32;

/// An episode of T steps has T+1 rows on the observation timeline (the reset row, then one per
/// step) and T rows on the step timeline (actions, rewards, done flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timeline {
    Obs,
    Step,
}

/// Columns the core itself reads to compute episode summaries and to end episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Reward,
    Terminated,
    Truncated,
}

/// How a column's rows are laid out, as the encoder needs it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowLayout {
    /// Bytes of a row; `None` for variable-length columns.
    pub row_bytes: Option<usize>,
    /// Frames along axis 0 for the frame-stack filter to look for shifts in (`None`: do not).
    pub stack: Option<usize>,
    /// Small integer rows: try delta and keep it where it compresses smaller.
    pub try_delta: bool,
}

/// How a column's chunks are stored. Applied in order when writing, undone in reverse when reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodecSpec {
    /// Byte-wise difference to the previous row before compression (image-like data).
    #[serde(default)]
    pub delta: bool,
    /// zstd level; `None` stores the column raw (zero-copy reads).
    #[serde(default)]
    pub zstd_level: Option<i32>,
    /// Raw bytes of one lane's rows after which a chunk is sealed; the recorder's `chunk_bytes`
    /// when absent. Small chunks read faster at random, large ones compress better.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_bytes: Option<u64>,
    /// Look for frame stacks (rows of two or more axes that are the previous row shifted by one
    /// along axis 0) and store each frame once (codec 3); on unless turned off.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub frame_stack: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

impl Default for CodecSpec {
    fn default() -> Self {
        CodecSpec { delta: false, zstd_level: Some(3), chunk_bytes: None, frame_stack: true }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnSpec {
    /// Given by the core (callers may leave it out).
    #[serde(default)]
    pub id: ColumnId,
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub timeline: Timeline,
    /// Set on the boolean column that says which rows of column `mask_of` hold a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_of: Option<ColumnId>,
    /// Set on a column whose rows may be missing; the id of its mask column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<ColumnId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default)]
    pub codec: CodecSpec,
    /// Set on a column made when a later value of a key did not fit its column's type: the id of
    /// the column it continues with a wider type (see `writer::entries::reading::widen`,
    /// FORMAT.md "Widened columns").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widens: Option<ColumnId>,
}

/// Integer rows up to this size get delta where it compresses smaller (scalars and small
/// vectors: counters, step numbers); larger rows keep the column's choice.
const MAX_TRY_DELTA_ROW: usize = 64;

impl ColumnSpec {
    pub fn dtype(&self) -> Result<DType> {
        DType::from_name(&self.dtype)
    }

    /// Elements per row.
    pub fn row_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes per row for fixed-size dtypes; `None` for variable-length ones.
    pub fn row_bytes(&self) -> Option<usize> {
        let size = DType::from_name(&self.dtype).ok()?.size()?;
        Some(size * self.row_elements() as usize)
    }

    /// How the encoder sees a row: its size, the frames along axis 0 it looks for shifts in (a
    /// frame-stacked observation: at least two axes, at least two frames; any dtype), and
    /// whether it is a small integer row on which delta may pay (counters).
    pub fn row_layout(&self) -> RowLayout {
        let row_bytes = self.row_bytes();
        let stack = match self.shape.as_slice() {
            [frames, _, ..] if *frames >= 2 && row_bytes.is_some() => Some(*frames as usize),
            _ => None,
        };
        let integer =
            matches!(self.dtype(), Ok(DType::U16 | DType::U32 | DType::U64 | DType::I16 | DType::I32 | DType::I64));
        let try_delta = integer && row_bytes.is_some_and(|r| r <= MAX_TRY_DELTA_ROW);
        RowLayout { row_bytes, stack, try_delta }
    }

    pub fn validate(&self) -> Result<()> {
        let dtype = self.dtype()?;
        if self.name.is_empty() {
            return Err(Error::Invalid("a column needs a non-empty name".into()));
        }
        if dtype.is_variable() && !self.shape.is_empty() {
            return Err(Error::schema(&self.name, "variable-length columns hold one value a row (shape must be ())"));
        }
        if self.codec.chunk_bytes == Some(0) {
            return Err(Error::schema(&self.name, "chunk_bytes must be positive"));
        }
        if self.shape.len() > MAX_AXES {
            return Err(Error::schema(&self.name, format!("a row has {} axes, at most {MAX_AXES}", self.shape.len())));
        }
        if dtype.is_variable() && self.codec.delta {
            return Err(Error::schema(&self.name, "the delta filter needs a fixed-size dtype"));
        }
        let elements = self.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        match elements.and_then(|e| e.checked_mul(dtype.size().unwrap_or(1) as u64)) {
            Some(bytes) if bytes <= MAX_ROW_BYTES => Ok(()),
            _ => Err(Error::schema(
                &self.name,
                format!("shape {:?} is too large (at most {MAX_ROW_BYTES} bytes a row)", self.shape),
            )),
        }
    }
}

/// The most frames a column's rows may split in to be sealed as frame stacks (on their stored
/// bytes): `FrameStackObservation` stacks a few frames; a first axis longer than this is an
/// image's rows (84, 210, 400), sealed on its raw bytes like any column.
pub const MAX_SEALED_STACK: u64 = 8;

/// The most axes a row may have: reads add up to two (steps, a batch's windows) and numpy arrays
/// have at most 64, so every read of a column stays an array.
pub const MAX_AXES: usize = 32;

/// A cap that keeps one row well inside the ring buffer and any chunk.
pub const MAX_ROW_BYTES: u64 = 1 << 30;
/// The largest `chunk_bytes` a writer uses (larger settings are clamped to it).
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// The largest str value a writer accepts, in bytes of UTF-8.
pub const MAX_STR_BYTES: u64 = 16 << 20;

impl ColumnSpec {
    /// How many times its requested `chunk_bytes` of raw rows a chunk of this column may hold.
    /// A column the frame-stack filter applies to is sealed on the bytes the filter stores
    /// (each frame once) rather than on its stacks, which hold every frame `stack` times: its
    /// chunks then take as many steps as other columns' chunks of that size would (4x more
    /// for stacks of 4: better compression, fewer chunks). 1 for other columns, and for rows
    /// of more than `MAX_SEALED_STACK` frames.
    pub fn stack_seal_factor(&self) -> u64 {
        match (self.codec.zstd_level, self.codec.frame_stack, self.row_layout().stack) {
            (Some(_), true, Some(frames)) if frames as u64 <= MAX_SEALED_STACK => frames as u64,
            _ => 1,
        }
    }

    /// Sets the `chunk_bytes` the column declares from the size asked for: that size times
    /// `stack_seal_factor`, the bound readers hold its decoded chunks to.
    pub fn declare_chunk_bytes(&mut self, requested: u64) {
        let requested = requested.min(MAX_CHUNK_BYTES);
        self.codec.chunk_bytes = Some(requested.saturating_mul(self.stack_seal_factor()).min(MAX_CHUNK_BYTES));
    }

    /// The chunk size the column was asked for (what `declare_chunk_bytes` was given, as the
    /// stored bytes a frame-stack chunk is sealed at); `None` where it declares none.
    pub fn requested_chunk_bytes(&self) -> Option<u64> {
        self.codec.chunk_bytes.map(|declared| (declared / self.stack_seal_factor()).max(1))
    }

    /// The most bytes a decoded chunk of this column may hold: a chunk is sealed once it
    /// reaches `chunk_bytes` after a step, and one step adds at most two rows to a lane (an
    /// episode's reset row with its first observation), so it ends within two rows of it (a str
    /// row: its offset and at most `MAX_STR_BYTES` of text; plus the leading offset). Readers
    /// refuse larger claims before allocating (zstd can expand a few bytes into gigabytes).
    /// Files that do not state `chunk_bytes` get `MAX_CHUNK_BYTES`.
    pub fn max_decoded_chunk(&self) -> u64 {
        let limit = self.codec.chunk_bytes.unwrap_or(MAX_CHUNK_BYTES).min(MAX_CHUNK_BYTES);
        match self.row_bytes() {
            Some(row) => limit + 2 * row as u64,
            None => limit + 8 + 2 * (8 + MAX_STR_BYTES),
        }
    }
}

/// A key (of a Dict space, an info dict or custom data) as one component of a column name:
/// '%' -> %25, '/' -> %2F (so '/' separates nesting levels) and a leading '_' -> %5F (so no key
/// is named like the mask column `_key` of another). The one rule; Python calls it too.
pub fn escape_key(key: &str) -> String {
    let escaped = key.replace('%', "%25").replace('/', "%2F");
    match escaped.strip_prefix('_') {
        Some(rest) => format!("%5F{rest}"),
        None => escaped,
    }
}

/// The key of a column name component: the inverse of `escape_key`.
pub fn unescape_key(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    let mut rest = part;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3);
        let plain = match code {
            Some("25") => Some('%'),
            Some("2F") => Some('/'),
            Some("5F") => Some('_'),
            _ => None,
        };
        match plain {
            Some(c) => {
                out.push(c);
                rest = &rest[at + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{escape_key, unescape_key};

    #[test]
    fn keys_escape_and_unescape() {
        let table = [
            ("lives", "lives"),
            ("_lives", "%5Flives"),
            ("__x", "%5F_x"),
            ("a/b%", "a%2Fb%25"),
            ("x_y", "x_y"),
            ("%5F", "%255F"),
            ("", ""),
            ("é/_", "é%2F_"),
        ];
        for (key, name) in table {
            assert_eq!(escape_key(key), name, "{key}");
            assert_eq!(unescape_key(name), key, "{name}");
        }
        // Other escapes and a lone '%' stay as they are.
        assert_eq!(unescape_key("%41%2f%"), "%41%2f%");
    }
}
