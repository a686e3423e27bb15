//! The frame-stack filter (codec 3). A frame-stacked observation (gymnasium's
//! `FrameStackObservation`) repeats, at each step, the previous row's frames 1.. plus one new
//! frame: the filter stores that new frame alone, so each frame is stored once instead of once
//! per stack it is part of. Rows are split along axis 0 (`stack` frames of `row_bytes / stack`
//! bytes); any row that is not such a shift (an episode's first stack, padding, anything else) is
//! stored whole, so every row round-trips exactly whatever it holds.
//!
//! Encoded: `stack u32`, then one kind byte per row (`KEEP` or `SHIFT`), then per row in order
//! its bytes (the whole row, or its last frame). The chunk's first row is always whole, so a chunk
//! decodes on its own.

/// The row is stored whole.
pub const KEEP: u8 = 0;
/// The row is the previous row's frames 1.. followed by the one frame stored.
pub const SHIFT: u8 = 1;

pub const HEADER_LEN: usize = 4;

/// Frames of `frame` bytes in a row of `row` bytes split in `stack`; `None` if it does not split.
fn frame_bytes(row: usize, stack: usize) -> Option<usize> {
    (stack >= 2 && row > 0 && row.is_multiple_of(stack)).then(|| row / stack)
}

/// Whether `cur` is `prev` shifted by one frame (its first frames are `prev`'s last ones).
fn is_shift(prev: &[u8], cur: &[u8], frame: usize) -> bool {
    cur[..cur.len() - frame] == prev[frame..]
}

/// Encodes whole rows of `row` bytes into `out`; `None` (and `out` unspecified) when no row is
/// a shift of the one before, so the filter would only add bytes. The kinds are decided first,
/// so a column that never shifts (an image of two or more axes) costs a comparison that fails
/// within its first bytes a row, not a copy of the chunk.
pub fn encode_into(raw: &[u8], row: usize, stack: usize, out: &mut Vec<u8>) -> Option<()> {
    let frame = frame_bytes(row, stack)?;
    if !raw.len().is_multiple_of(row) {
        return None;
    }
    let RowKinds(kinds) = RowKinds::of(raw, row, frame);
    let shifts = kinds.iter().filter(|&&k| k == SHIFT).count();
    if shifts == 0 {
        return None;
    }
    let rows = kinds.len();
    out.clear();
    out.reserve(HEADER_LEN + rows + rows * row - shifts * (row - frame));
    out.extend_from_slice(&(stack as u32).to_le_bytes());
    out.extend_from_slice(&kinds);
    for (r, &kind) in kinds.iter().enumerate() {
        let cur = &raw[r * row..(r + 1) * row];
        out.extend_from_slice(if kind == SHIFT { &cur[row - frame..] } else { cur });
    }
    Some(())
}

/// The kind of each row of a column of frame stacks, decided as rows arrive (a writer buffering
/// rows compares each with the one before while it is in the CPU's caches, and keeps only what
/// the filter stores of it: see `Encoder::encode_frames`).
#[derive(Debug, Default, Clone)]
pub struct RowKinds(pub Vec<u8>);

impl RowKinds {
    /// The kinds of whole rows `raw` of `row` bytes in frames of `frame` bytes.
    pub fn of(raw: &[u8], row: usize, frame: usize) -> Self {
        let mut kinds = RowKinds::default();
        for r in 0..raw.len() / row {
            kinds.push(&raw[..r * row], &raw[r * row..(r + 1) * row], frame);
        }
        kinds
    }

    /// Adds the kind of row `cur` following the rows `before` (empty: the chunk's first row).
    /// Returns the bytes the filter stores for it.
    pub fn push(&mut self, before: &[u8], cur: &[u8], frame: usize) -> usize {
        let row = cur.len();
        let shift = before.len() >= row && is_shift(&before[before.len() - row..], cur, frame);
        self.0.push(if shift { SHIFT } else { KEEP });
        if shift {
            frame
        } else {
            row
        }
    }
}

/// The rows of `row` bytes that `body` stores as `kinds` say (each whole, or its last frame of
/// `frame` bytes when it shifts the row before): `body` is the stored part of an encoded chunk.
pub fn expand(body: &[u8], kinds: &[u8], row: usize, frame: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(kinds.len() * row);
    let mut end = 0;
    for &kind in kinds {
        end += if kind == SHIFT { frame } else { row };
        out.extend_from_slice(&body[end - row..end]);
    }
    out
}

/// Undoes `encode_into`: `raw_len` bytes of rows of `row` bytes.
pub fn decode(data: &[u8], row: usize, raw_len: usize) -> Result<Vec<u8>, String> {
    if row == 0 || !raw_len.is_multiple_of(row) {
        return Err(format!("frame-stack codec: {raw_len} bytes are not whole rows of {row}"));
    }
    decode_rows(data, row, raw_len / row, raw_len / row)
}

/// The header's frame size and the row kinds of a chunk of `rows` rows of `row` bytes.
fn kinds(data: &[u8], row: usize, rows: usize) -> Result<(usize, &[u8]), String> {
    if data.len() < HEADER_LEN {
        return Err("frame-stack codec: no header".into());
    }
    let stack = u32::from_le_bytes(data[..HEADER_LEN].try_into().unwrap()) as usize;
    let frame =
        frame_bytes(row, stack).ok_or_else(|| format!("frame-stack codec: {row}-byte rows in {stack} frames"))?;
    let kinds = data.get(HEADER_LEN..HEADER_LEN + rows).ok_or("frame-stack codec: row kinds cut short")?;
    Ok((frame, kinds))
}

/// The stored bytes of row `r` of kind `kind`.
fn stored_len(kind: u8, r: usize, row: usize, frame: usize) -> Result<usize, String> {
    match kind {
        KEEP => Ok(row),
        SHIFT if r > 0 => Ok(frame),
        SHIFT => Err("frame-stack codec: the first row is a shift".into()),
        other => Err(format!("frame-stack codec: unknown row kind {other}")),
    }
}

/// Where the stored bytes of each of the first `wanted` of `rows` rows end in an encoded
/// chunk `data` (header, kinds, rows), as its kinds say (`data` holds at least the kinds).
fn stored_ends(data: &[u8], row: usize, rows: usize, wanted: usize) -> Result<Vec<usize>, String> {
    let (frame, kinds) = kinds(data, row, rows)?;
    let mut end = HEADER_LEN + rows;
    let ends = kinds.iter().enumerate().take(wanted).map(|(r, &kind)| {
        end += stored_len(kind, r, row, frame)?;
        Ok(end)
    });
    ends.collect()
}

/// `stored_ends`, checked against `data`: every row wanted inside it and, when all rows are
/// wanted, nothing after the last.
fn checked_ends(data: &[u8], row: usize, rows: usize, wanted: usize) -> Result<Vec<usize>, String> {
    let ends = stored_ends(data, row, rows, wanted)?;
    let end = ends.last().copied().unwrap_or(HEADER_LEN + rows);
    if end > data.len() {
        return Err("frame-stack codec: rows cut short".into());
    }
    if wanted >= rows && end < data.len() {
        return Err(format!("frame-stack codec: {} bytes past the last row", data.len() - end));
    }
    Ok(ends)
}

/// The encoded bytes (header, kinds, rows) that the first `wanted` of `rows` rows need: what a
/// reader decompresses to read them (`data` holds at least the header and the kinds).
pub fn prefix_len(data: &[u8], row: usize, rows: usize, wanted: usize) -> Result<usize, String> {
    Ok(stored_ends(data, row, rows, wanted)?.last().copied().unwrap_or(HEADER_LEN + rows))
}

/// The first `wanted` rows of a chunk of `rows` rows (all of them: `data` must end at the last).
/// Each row is the `row` bytes ending where its own stored bytes end (see `Frames`).
pub fn decode_rows(data: &[u8], row: usize, rows: usize, wanted: usize) -> Result<Vec<u8>, String> {
    let ends = checked_ends(data, row, rows, wanted)?;
    let mut out = Vec::with_capacity(ends.len() * row);
    for end in ends {
        out.extend_from_slice(&data[end - row..end]);
    }
    Ok(out)
}

/// A frame-stack chunk held as the filter stored it (zstd undone, the stacks not rebuilt): what
/// a reader keeps in its cache, a `stack`th of the stacks' bytes. The stored bytes are the
/// sequence of frames itself: a whole row, then the new frame of each row that shifts, so every
/// row is the `row` bytes ending where its own stored bytes end, and reading one is one copy.
#[derive(Debug)]
pub struct Frames {
    /// Header, row kinds, then the stored bytes of the rows held (all, or a prefix of them).
    data: Vec<u8>,
    row: usize,
    /// Where each held row's bytes end in `data`.
    ends: Vec<usize>,
}

impl Frames {
    /// The first `wanted` of a chunk's `rows` rows of `row` bytes from its filtered bytes
    /// (`data` holds at least `prefix_len` of them; all of them, and no more, when `wanted`
    /// is every row).
    pub fn new(data: Vec<u8>, row: usize, rows: usize, wanted: usize) -> Result<Self, String> {
        let ends = checked_ends(&data, row, rows, wanted.min(rows))?;
        Ok(Frames { data, row, ends })
    }

    /// Rows held (from the chunk's first).
    pub fn rows(&self) -> usize {
        self.ends.len()
    }

    /// Row `r`'s bytes (`None` past the rows held). Every row after the first ends with its
    /// own new frame and starts with the previous row's frames 1.., which precede it: the
    /// first row is stored whole, so `row` bytes back from any row's end stay in the body.
    pub fn row(&self, r: usize) -> Option<&[u8]> {
        let end = *self.ends.get(r)?;
        Some(&self.data[end - self.row..end])
    }

    /// The memory this holds.
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.ends.capacity() * std::mem::size_of::<usize>()
    }

    /// Its bytes and where each held row ends in them (to copy it elsewhere, see `row`).
    pub fn parts(&self) -> (&[u8], &[usize]) {
        (&self.data, &self.ends)
    }

    /// The bytes of a row.
    pub fn row_bytes(&self) -> usize {
        self.row
    }

    /// The stored bytes of the rows held, from the first row's start (it is stored whole) to
    /// the last one's end: the frames in the order stored, each once; and where each held row
    /// ends in them. What a reader keeping frames apart from stacks takes as they are.
    pub fn stored(&self) -> (&[u8], impl Iterator<Item = usize> + '_) {
        let start = self.ends.first().map_or(0, |&e| e - self.row);
        let end = self.ends.last().copied().unwrap_or(start);
        (&self.data[start..end], self.ends.iter().map(move |&e| e - start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows of `stack` frames drawn from a few distinct frames, each row a shift of the one
    /// before unless `breaks` says otherwise (then random frames): what frame stacks look like,
    /// with episode starts and padding mixed in.
    fn rows_strategy() -> impl Strategy<Value = (usize, usize, Vec<u8>)> {
        (2usize..6, 1usize..9, 1usize..40).prop_flat_map(|(stack, frame, rows)| {
            (
                Just(stack),
                Just(frame),
                prop::collection::vec((any::<bool>(), prop::collection::vec(0u8..3, stack * frame)), rows),
            )
                .prop_map(|(stack, frame, draws)| {
                    let row = stack * frame;
                    let mut raw: Vec<u8> = Vec::new();
                    for (r, (shift, fresh)) in draws.into_iter().enumerate() {
                        if shift && r > 0 {
                            let prev = raw[raw.len() - row + frame..].to_vec();
                            raw.extend_from_slice(&prev);
                            raw.extend_from_slice(&fresh[..frame]);
                        } else {
                            raw.extend_from_slice(&fresh);
                        }
                    }
                    (stack, frame, raw)
                })
        })
    }

    proptest! {
        #[test]
        fn any_rows_round_trip((stack, frame, raw) in rows_strategy()) {
            let row = stack * frame;
            let mut enc = Vec::new();
            match encode_into(&raw, row, stack, &mut enc) {
                Some(()) => {
                    prop_assert!(enc.len() <= HEADER_LEN + raw.len() / row + raw.len());
                    prop_assert_eq!(decode(&enc, row, raw.len()).unwrap(), raw);
                }
                // Declined only when no row is a shift of the one before.
                None => prop_assert!(raw.chunks(row).zip(raw.chunks(row).skip(1)).all(|(p, c)| !is_shift(p, c, frame))),
            }
        }

        #[test]
        fn any_prefix_of_rows_decodes_from_its_own_bytes((stack, frame, raw) in rows_strategy(), cut in 0usize..40) {
            let row = stack * frame;
            let rows = raw.len() / row;
            let mut enc = Vec::new();
            if encode_into(&raw, row, stack, &mut enc).is_some() {
                let wanted = cut % (rows + 1);
                let need = prefix_len(&enc, row, rows, wanted).unwrap();
                prop_assert!(need <= enc.len());
                // The rows wanted need nothing past `need` bytes of the encoded chunk.
                prop_assert_eq!(decode_rows(&enc[..need], row, rows, wanted).unwrap(), &raw[..wanted * row]);
                if need > HEADER_LEN + rows && wanted > 0 {
                    prop_assert!(decode_rows(&enc[..need - 1], row, rows, wanted).is_err());
                    prop_assert!(Frames::new(enc[..need - 1].to_vec(), row, rows, wanted).is_err());
                }
                // Held as frames, the same rows, each one slice.
                let frames = Frames::new(enc[..need].to_vec(), row, rows, wanted).unwrap();
                prop_assert_eq!(frames.rows(), wanted);
                for r in 0..wanted {
                    prop_assert_eq!(frames.row(r).unwrap(), &raw[r * row..(r + 1) * row]);
                }
                prop_assert!(frames.row(wanted).is_none());
                let whole = Frames::new(enc.clone(), row, rows, rows).unwrap();
                prop_assert_eq!(whole.rows(), rows);
                let mut longer = enc.clone();
                longer.push(0);
                prop_assert!(Frames::new(longer, row, rows, rows).is_err(), "bytes past the last row");
            }
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(data in prop::collection::vec(any::<u8>(), 0..64), row in 1usize..16, rows in 0usize..6) {
            if let Ok(out) = decode(&data, row, row * rows) {
                prop_assert_eq!(out.len(), row * rows);
            }
            // Held as frames: the same rows, or the same refusal.
            match Frames::new(data.clone(), row, rows, rows) {
                Ok(frames) => {
                    let out = decode(&data, row, row * rows).unwrap();
                    for r in 0..rows {
                        prop_assert_eq!(frames.row(r).unwrap(), &out[r * row..(r + 1) * row]);
                    }
                }
                Err(_) => prop_assert!(decode(&data, row, row * rows).is_err()),
            }
        }
    }

    #[test]
    fn shifted_stacks_store_each_frame_once() {
        // Frames 0..10 of 3 bytes, stacks of 4: rows [f0 f1 f2 f3], [f1 f2 f3 f4], ...
        let frames: Vec<[u8; 3]> = (0..10u8).map(|i| [i, i + 100, i + 200]).collect();
        let raw: Vec<u8> = (0..7).flat_map(|r| frames[r..r + 4].concat()).collect();
        let mut enc = Vec::new();
        encode_into(&raw, 12, 4, &mut enc).unwrap();
        assert_eq!(enc.len(), HEADER_LEN + 7 + 12 + 6 * 3);
        assert_eq!(&enc[HEADER_LEN..HEADER_LEN + 7], &[KEEP, SHIFT, SHIFT, SHIFT, SHIFT, SHIFT, SHIFT]);
        assert_eq!(decode(&enc, 12, raw.len()).unwrap(), raw);
    }

    #[test]
    fn rows_without_shifts_are_declined_and_bad_input_is_an_error() {
        let raw: Vec<u8> = (0..48u8).collect();
        assert!(encode_into(&raw, 12, 4, &mut Vec::new()).is_none());
        assert!(encode_into(&raw, 12, 5, &mut Vec::new()).is_none(), "12 bytes do not split in 5");
        let mut bad = 4u32.to_le_bytes().to_vec();
        bad.extend_from_slice(&[SHIFT]);
        bad.extend_from_slice(&[0; 3]);
        assert!(decode(&bad, 12, 12).is_err(), "first row a shift");
        let mut short = 4u32.to_le_bytes().to_vec();
        short.extend_from_slice(&[KEEP, SHIFT]);
        short.extend_from_slice(&[0; 14]);
        assert!(decode(&short, 12, 24).is_err(), "rows cut short");
    }
}
