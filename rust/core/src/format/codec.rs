//! Codec pipelines. A chunk names its pipeline in a `u32`: up to four codec ids, lowest byte
//! first, applied in that order when writing and undone in reverse when reading; 0 ends the list.
//! New codecs get new ids, so they need no change to the framing.

use std::borrow::Cow;

use super::stack;
use crate::schema::{CodecSpec, RowLayout};

pub const CODEC_ZSTD: u8 = 1;
/// Byte-wise wrapping difference to the same byte of the previous row (first row kept as is).
pub const CODEC_DELTA: u8 = 2;
/// Frame stacks: a row that is the previous row shifted by one frame stores the new frame only
/// (see `stack`).
pub const CODEC_STACK: u8 = 3;

/// Compression must save at least this fraction of the bytes to be kept; otherwise the chunk is
/// stored raw, which reads faster and can be viewed without copying.
const MIN_SAVING: f64 = 0.05;

/// Whether `packed` bytes for `raw` save enough to be kept (see `MIN_SAVING`).
fn saves_enough(packed: usize, raw: usize) -> bool {
    (packed as f64) < raw as f64 * (1.0 - MIN_SAVING)
}

pub fn codec_ids(codec: u32) -> impl Iterator<Item = u8> {
    codec.to_le_bytes().into_iter().take_while(|&b| b != 0)
}

pub fn pipeline(ids: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    bytes[..ids.len()].copy_from_slice(ids);
    u32::from_le_bytes(bytes)
}

/// Encodes one chunk's raw rows.
pub fn encode(spec: &CodecSpec, layout: RowLayout, raw: &[u8]) -> (u32, Vec<u8>) {
    Encoder::default().encode(spec, layout, raw.to_vec())
}

/// Encodes chunks with reused state: one zstd context per level (making one per chunk costs a
/// few percent of the writer's time on image data) and one buffer for the filters.
#[derive(Default)]
pub struct Encoder {
    compressors: Vec<(i32, zstd::bulk::Compressor<'static>)>,
    filtered: Vec<u8>,
    /// The raw rows of the last chunk stored encoded, for the caller to buffer the next rows in
    /// (a fresh multi-megabyte buffer per chunk costs the kernel's zeroing of its pages).
    spare: Option<Vec<u8>>,
}

impl Encoder {
    /// Takes the raw rows by value so a chunk stored raw is not copied. Frame stacks whose rows
    /// shift get the frame-stack filter (delta, which compares each frame with the one the
    /// previous row held at that place, measured larger on them); otherwise delta if the column
    /// asks for it, or, on small integer rows (`try_delta`), whichever of with and without delta
    /// compresses smaller (counters such as frame numbers shrink ten-fold with it, random
    /// integers grow); then zstd.
    pub fn encode(&mut self, spec: &CodecSpec, layout: RowLayout, raw: Vec<u8>) -> (u32, Vec<u8>) {
        let Some(level) = spec.zstd_level else { return (0, raw) };
        let mut ids = Vec::with_capacity(2);
        let row_bytes = layout.row_bytes.filter(|&r| r > 0);
        let mut filtered = std::mem::take(&mut self.filtered);
        if let (Some(row), Some(frames), true) = (row_bytes, layout.stack, spec.frame_stack) {
            if stack::encode_into(&raw, row, frames, &mut filtered).is_some() {
                ids.push(CODEC_STACK);
            }
        }
        let mut alternative = None;
        if let (true, Some(row)) = (ids.is_empty() && (spec.delta || layout.try_delta), row_bytes) {
            if !spec.delta {
                alternative = self.compress(level, &raw); // without delta, to compare
            }
            delta_encode_into(&raw, row, &mut filtered);
            ids.push(CODEC_DELTA);
        }
        let mut packed = self.compress(level, if ids.is_empty() { &raw } else { &filtered });
        self.filtered = filtered;
        if let Some(plain) = alternative {
            if packed.as_ref().is_none_or(|p| plain.len() <= p.len()) {
                (ids, packed) = (Vec::new(), Some(plain));
            }
        }
        match packed {
            Some(packed) if saves_enough(packed.len(), raw.len()) => {
                ids.push(CODEC_ZSTD);
                self.spare = Some(raw);
                (pipeline(&ids), packed)
            }
            _ => (0, raw),
        }
    }

    /// Encodes a chunk of frame stacks buffered as the frame-stack filter stores them: `body`
    /// holds each row whole or, where `kinds` says it shifts the row before, its new frame
    /// alone. The same result as `encode` on the rows themselves.
    pub fn encode_frames(
        &mut self,
        spec: &CodecSpec,
        layout: RowLayout,
        body: Vec<u8>,
        kinds: &[u8],
    ) -> (u32, Vec<u8>) {
        // Rows are buffered as frames only where they split in frames.
        let (Some(row), Some(stack)) = (layout.row_bytes, layout.stack) else {
            return self.encode(spec, layout, body);
        };
        if !kinds.contains(&stack::SHIFT) {
            // Every row whole: the body is the rows, and the filter has nothing to store once.
            return self.encode(spec, RowLayout { stack: None, ..layout }, body);
        }
        let Some(level) = spec.zstd_level else { return (0, stack::expand(&body, kinds, row, row / stack)) };
        let raw_len = kinds.len() * row;
        let mut filtered = std::mem::take(&mut self.filtered);
        filtered.clear();
        filtered.extend_from_slice(&(stack as u32).to_le_bytes());
        filtered.extend_from_slice(kinds);
        filtered.extend_from_slice(&body);
        let packed = self.compress(level, &filtered);
        self.filtered = filtered;
        match packed {
            Some(packed) if saves_enough(packed.len(), raw_len) => {
                self.spare = Some(body);
                (pipeline(&[CODEC_STACK, CODEC_ZSTD]), packed)
            }
            _ => (0, stack::expand(&body, kinds, row, row / stack)),
        }
    }

    /// The raw rows of the last chunk stored encoded (emptied, their memory kept), if any.
    pub fn take_spare(&mut self) -> Option<Vec<u8>> {
        let mut spare = self.spare.take()?;
        spare.clear();
        Some(spare)
    }

    fn compress(&mut self, level: i32, input: &[u8]) -> Option<Vec<u8>> {
        match self.compressor(level) {
            Some(c) => c.compress(input).ok(),
            None => zstd::bulk::compress(input, level).ok(),
        }
    }

    fn compressor(&mut self, level: i32) -> Option<&mut zstd::bulk::Compressor<'static>> {
        let at = match self.compressors.iter().position(|(l, _)| *l == level) {
            Some(at) => at,
            None => {
                self.compressors.push((level, zstd::bulk::Compressor::new(level).ok()?));
                self.compressors.len() - 1
            }
        };
        Some(&mut self.compressors[at].1)
    }
}

/// The most bytes the zstd stage of pipeline `codec` may give for a chunk of `raw_len` decoded
/// bytes: exactly `raw_len` unless the frame-stack filter comes before zstd, whose output holds a
/// header and a byte a row more than the rows (at most). Readers check a zstd frame's declared
/// size against this before decompressing.
pub fn zstd_output_limit(codec: u32, row_bytes: Option<usize>, raw_len: u64) -> (u64, bool) {
    match row_bytes.filter(|&r| r > 0) {
        Some(row) if codec_ids(codec).any(|id| id == CODEC_STACK) => {
            (raw_len.saturating_add(stack::HEADER_LEN as u64).saturating_add(raw_len / row as u64), false)
        }
        _ => (raw_len, true),
    }
}

/// Runs `f` with this thread's zstd decompression context: making one per chunk (what
/// `zstd::bulk::decompress` does) costs ~5% of a random batch.
fn with_dctx<R>(f: impl FnOnce(&mut zstd::zstd_safe::DCtx<'static>) -> Result<R, String>) -> Result<R, String> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::zstd_safe::DCtx::try_create().ok_or("zstd: no memory for a context")?);
        }
        let dctx = slot.as_mut().expect("set just above");
        // A frame left half-read (a prefix, an error) must not leak into the next one.
        dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly).map_err(zstd_error)?;
        f(dctx)
    })
}

fn zstd_error(code: usize) -> String {
    format!("zstd: {}", zstd::zstd_safe::get_error_name(code))
}

/// Decompresses one zstd frame of at most `capacity` bytes.
pub(crate) fn zstd_decompress(data: &[u8], capacity: usize) -> Result<Vec<u8>, String> {
    with_dctx(|dctx| {
        let mut out = Vec::with_capacity(capacity);
        dctx.decompress(&mut out, data).map_err(zstd_error)?;
        Ok(out)
    })
}

/// The first `prefix` bytes of a chunk, decoding its zstd frame only as far as they need: a
/// random row then costs the rows before it, not the whole chunk. For zstd alone, and for the
/// frame-stack filter then zstd (whole rows: the row kinds first, then the stored bytes of the
/// rows wanted). `None` for other codecs (decode them whole), and when the prefix is the whole
/// chunk.
pub fn decode_prefix(
    codec: u32,
    row_bytes: Option<usize>,
    stored: &[u8],
    raw_len: usize,
    prefix: usize,
) -> Option<Result<Vec<u8>, String>> {
    if prefix >= raw_len {
        return None;
    }
    if codec == pipeline(&[CODEC_ZSTD]) {
        return Some(with_dctx(|dctx| {
            let mut input = zstd::zstd_safe::InBuffer::around(stored);
            let mut out = Vec::new();
            stream_until(dctx, &mut input, &mut out, prefix)?;
            if out.len() < prefix {
                return Err(format!("zstd frame ends after {} bytes, before the chunk's {raw_len}", out.len()));
            }
            out.truncate(prefix);
            Ok(out)
        }));
    }
    let row = row_bytes.filter(|&r| r > 0 && raw_len.is_multiple_of(r))?;
    let (rows, wanted) = (raw_len / row, prefix.div_ceil(row));
    let filtered = stack_frames(codec, row_bytes, stored, raw_len, wanted)?;
    Some(filtered.and_then(|f| stack::decode_rows(&f, row, rows, wanted)))
}

/// The frame-stack filter's bytes of a chunk stored as frame stacks then zstd, the stacks not
/// rebuilt (see `stack::Frames`): decoded as far as the first `wanted` rows need (the row kinds,
/// then their stored bytes), or whole when `wanted` is every row. `None` for other pipelines.
pub fn stack_frames(
    codec: u32,
    row_bytes: Option<usize>,
    stored: &[u8],
    raw_len: usize,
    wanted: usize,
) -> Option<Result<Vec<u8>, String>> {
    let row = row_bytes.filter(|&r| r > 0 && raw_len.is_multiple_of(r))?;
    if codec != pipeline(&[CODEC_STACK, CODEC_ZSTD]) {
        return None;
    }
    let rows = raw_len / row;
    if wanted >= rows {
        // Room for what the frame declares (checked against the limit by the caller; a frame
        // that gives more fails), not the limit: the stacks' size, which a cache would count.
        let (limit, _) = zstd_output_limit(codec, row_bytes, raw_len as u64);
        let declared = zstd::zstd_safe::get_frame_content_size(stored).ok().flatten().unwrap_or(limit);
        return Some(zstd_decompress(stored, declared.min(limit) as usize));
    }
    Some(with_dctx(|dctx| {
        let mut input = zstd::zstd_safe::InBuffer::around(stored);
        let mut filtered = Vec::new();
        stream_until(dctx, &mut input, &mut filtered, stack::HEADER_LEN + rows)?;
        let need = stack::prefix_len(&filtered, row, rows, wanted)?;
        stream_until(dctx, &mut input, &mut filtered, need)?;
        if filtered.len() < need {
            return Err(format!("zstd frame ends after {} bytes, before row {wanted} of the chunk", filtered.len()));
        }
        filtered.truncate(need);
        Ok(filtered)
    }))
}

/// Decompresses from `input` into `out` (after what it holds) until it holds at least `upto`
/// bytes or the frame ends.
fn stream_until(
    dctx: &mut zstd::zstd_safe::DCtx<'static>,
    input: &mut zstd::zstd_safe::InBuffer<'_>,
    out: &mut Vec<u8>,
    upto: usize,
) -> Result<(), String> {
    if out.len() >= upto {
        return Ok(());
    }
    out.reserve_exact(upto - out.len());
    let pos = out.len();
    let mut output = zstd::zstd_safe::OutBuffer::around_pos(out, pos);
    while output.pos() < upto {
        let before = (output.pos(), input.pos());
        let hint = dctx.decompress_stream(&mut output, input).map_err(zstd_error)?;
        if hint == 0 || (output.pos(), input.pos()) == before {
            break; // the frame ended (or its data did): the caller checks the length
        }
    }
    Ok(())
}

/// Undoes `encode`. Errors are strings: the caller knows the file and offset to report.
pub fn decode(codec: u32, row_bytes: Option<usize>, stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let ids: Vec<u8> = codec_ids(codec).collect();
    // Borrowed until a stage makes new bytes: zstd reads the stored bytes where they lie.
    let mut data = Cow::Borrowed(stored);
    for &id in ids.iter().rev() {
        data = match id {
            CODEC_ZSTD => {
                let (limit, exact) = zstd_output_limit(codec, row_bytes, raw_len as u64);
                let out = zstd_decompress(&data, limit as usize)?;
                if exact && out.len() != raw_len {
                    return Err(format!("zstd gave {} bytes, the chunk says {raw_len}", out.len()));
                }
                Cow::Owned(out)
            }
            CODEC_STACK => {
                let row = row_bytes.filter(|&r| r > 0).ok_or("frame-stack codec on a variable-length column")?;
                Cow::Owned(stack::decode(&data, row, raw_len)?)
            }
            CODEC_DELTA => {
                let row = row_bytes.filter(|&r| r > 0).ok_or("delta codec on a variable-length column")?;
                delta_decode(data.to_mut(), row);
                data
            }
            other => return Err(format!("unknown codec id {other}")),
        };
    }
    if data.len() != raw_len {
        return Err(format!("decoded {} bytes, the chunk says {raw_len}", data.len()));
    }
    Ok(data.into_owned())
}

#[cfg(test)]
fn delta_encode(raw: &[u8], row: usize) -> Vec<u8> {
    let mut out = Vec::new();
    delta_encode_into(raw, row, &mut out);
    out
}

/// Byte-wise difference of each row to the previous one, into a reused buffer.
fn delta_encode_into(raw: &[u8], row: usize, out: &mut Vec<u8>) {
    // Whole rows only (a chunk holds nothing else); bytes past the last whole row stay as is.
    let whole = raw.len() / row * row;
    out.clear();
    out.extend_from_slice(&raw[..row.min(whole)]);
    if whole > row {
        out.extend(raw[row..whole].iter().zip(raw).map(|(c, p)| c.wrapping_sub(*p)));
    }
    out.extend_from_slice(&raw[whole.max(out.len())..]);
}

fn delta_decode(data: &mut [u8], row: usize) {
    let rows = data.len() / row;
    for r in 1..rows {
        let (prev, cur) = data.split_at_mut(r * row);
        for (c, p) in cur[..row].iter_mut().zip(&prev[(r - 1) * row..]) {
            *c = c.wrapping_add(*p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_round_trip() {
        let raw: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        for row in [1, 3, 10, 1000] {
            let enc = delta_encode(&raw, row);
            let mut dec = enc.clone();
            delta_decode(&mut dec, row);
            assert_eq!(dec, raw, "row {row}");
        }
    }

    #[test]
    fn pipelines_round_trip_and_fall_back_to_raw() {
        let smooth: Vec<u8> = (0..64 * 1024).map(|i| (i / 64) as u8).collect();
        let spec = CodecSpec { delta: true, zstd_level: Some(3), chunk_bytes: None, frame_stack: true };
        let (codec, stored) = encode(&spec, RowLayout { row_bytes: Some(64), stack: None, try_delta: false }, &smooth);
        assert_eq!(codec_ids(codec).collect::<Vec<_>>(), vec![CODEC_DELTA, CODEC_ZSTD]);
        assert!(stored.len() < smooth.len() / 10);
        assert_eq!(decode(codec, Some(64), &stored, smooth.len()).unwrap(), smooth);

        // splitmix64 output: the top byte of `i * constant` alone is regular enough for zstd.
        let noise: Vec<u8> = (1..=4096u64)
            .map(|i| {
                let mut z = i.wrapping_mul(0x9E3779B97F4A7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
                (z ^ (z >> 31)) as u8
            })
            .collect();
        let (codec, stored) =
            encode(&CodecSpec::default(), RowLayout { row_bytes: Some(4), stack: Some(2), try_delta: true }, &noise);
        assert_eq!(codec, 0, "incompressible data is stored raw");
        assert_eq!(stored, noise);
    }

    #[test]
    fn frame_stacks_take_the_stack_filter_even_when_delta_is_asked() {
        // 30 rows of 4 frames of 256 bytes, each row the previous one shifted plus a new frame,
        // but an episode start (rows 10, 20) that is not.
        let frame = |i: usize| (0..256).map(|b| ((b * 31 + i * 17) % 253) as u8).collect::<Vec<u8>>();
        let mut raw = Vec::new();
        for r in 0..30 {
            let start = if r >= 20 {
                r + 500
            } else if r >= 10 {
                r + 100
            } else {
                r
            };
            (start..start + 4).for_each(|i| raw.extend(frame(i)));
        }
        let layout = RowLayout { row_bytes: Some(1024), stack: Some(4), try_delta: false };
        let spec = CodecSpec { delta: true, ..CodecSpec::default() };
        let (codec, stored) = encode(&spec, layout, &raw);
        assert_eq!(codec_ids(codec).collect::<Vec<_>>(), vec![CODEC_STACK, CODEC_ZSTD]);
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&stored).unwrap(), Some(4 + 30 + 3 * 1024 + 27 * 256));
        assert_eq!(decode(codec, Some(1024), &stored, raw.len()).unwrap(), raw);
        // Without shifts (one row a chunk) the column's own choice holds.
        let (codec, _) = encode(&spec, layout, &raw[..1024]);
        assert_eq!(codec_ids(codec).collect::<Vec<_>>(), vec![CODEC_DELTA, CODEC_ZSTD]);
    }

    #[test]
    fn small_integer_rows_take_delta_only_where_it_pays() {
        let layout = RowLayout { row_bytes: Some(8), stack: None, try_delta: true };
        // A frame counter (+4 a step): delta makes it a constant.
        let counter: Vec<u8> = (0..4096u64).flat_map(|i| (1000 + 4 * i).to_le_bytes()).collect();
        let (codec, stored) = encode(&CodecSpec::default(), layout, &counter);
        assert_eq!(codec_ids(codec).collect::<Vec<_>>(), vec![CODEC_DELTA, CODEC_ZSTD]);
        let (plain_codec, plain) = encode(&CodecSpec::default(), RowLayout { try_delta: false, ..layout }, &counter);
        assert_eq!(plain_codec, pipeline(&[CODEC_ZSTD]));
        assert!(stored.len() < plain.len());
        assert_eq!(decode(codec, Some(8), &stored, counter.len()).unwrap(), counter);
        // Actions drawn from 0..4 in a repeating pattern: delta would not pay, so zstd alone.
        let actions: Vec<u8> = (0..4096u64).flat_map(|i| ((i * i / 3) % 4).to_le_bytes()).collect();
        let (codec, stored) = encode(&CodecSpec::default(), layout, &actions);
        let (_, with_delta) = encode(&CodecSpec { delta: true, ..CodecSpec::default() }, layout, &actions);
        assert!(stored.len() <= with_delta.len());
        assert_eq!(decode(codec, Some(8), &stored, actions.len()).unwrap(), actions);
    }

    #[test]
    fn prefixes_decode_like_the_whole_chunk() {
        let raw: Vec<u8> = (0..300_000u32).map(|i| ((i / 7) ^ (i % 251)) as u8).collect();
        let spec = CodecSpec { delta: false, zstd_level: Some(3), chunk_bytes: None, frame_stack: true };
        let layout = RowLayout { row_bytes: Some(100), stack: None, try_delta: false };
        let (codec, stored) = encode(&spec, layout, &raw);
        assert_eq!(codec, pipeline(&[CODEC_ZSTD]));
        for prefix in [0, 1, 99, 4096, 131_072, 131_073, 299_999] {
            let got = decode_prefix(codec, Some(100), &stored, raw.len(), prefix).expect("zstd alone").unwrap();
            assert_eq!(got, raw[..prefix], "prefix {prefix}");
        }
        assert!(
            decode_prefix(codec, Some(100), &stored, raw.len(), raw.len()).is_none(),
            "the whole chunk: decode it whole"
        );
        // Frame stacks (4 frames of 25 bytes, each row a shift of the one before but every 7th):
        // whole rows, read from the stored frames only as far as they go.
        let frame = |i: usize| (0..25).map(|b| ((b * 13 + i * 7) % 241) as u8).collect::<Vec<u8>>();
        let stacks: Vec<u8> = (0..3000usize).flat_map(|r| (r / 7 * 3 + r..r / 7 * 3 + r + 4).flat_map(frame)).collect();
        let stacked = RowLayout { row_bytes: Some(100), stack: Some(4), try_delta: false };
        let (codec3, stored3) = encode(&spec, stacked, &stacks);
        assert_eq!(codec_ids(codec3).collect::<Vec<_>>(), vec![CODEC_STACK, CODEC_ZSTD]);
        for prefix in [1, 100, 700, 4200, 150_000, 299_900] {
            let got =
                decode_prefix(codec3, Some(100), &stored3, stacks.len(), prefix).expect("stack then zstd").unwrap();
            assert_eq!(got, stacks[..prefix.div_ceil(100) * 100], "prefix {prefix}");
        }
        assert!(decode_prefix(codec3, Some(100), &stored3[..stored3.len() / 3], stacks.len(), 299_900)
            .unwrap()
            .is_err());
        assert!(decode_prefix(codec3, None, &stored3, stacks.len(), 100).is_none(), "rows needed");
        let (delta, stored_delta) = encode(&CodecSpec { delta: true, ..spec }, layout, &raw);
        assert!(decode_prefix(delta, Some(100), &stored_delta, raw.len(), 10).is_none());
        // A cut or damaged frame is an error, and the next decode on this thread is unharmed.
        assert!(decode_prefix(codec, Some(100), &stored[..stored.len() / 4], raw.len(), 299_999).unwrap().is_err());
        assert!(decode_prefix(codec, Some(100), b"not zstd at all", raw.len(), 10).unwrap().is_err());
        assert_eq!(decode(codec, Some(100), &stored, raw.len()).unwrap(), raw);
        assert_eq!(decode_prefix(codec, Some(100), &stored, raw.len(), 5000).unwrap().unwrap(), raw[..5000]);
    }

    #[test]
    fn unknown_codec_is_an_error() {
        assert!(decode(pipeline(&[9]), Some(1), b"abc", 3).is_err());
        assert!(decode(pipeline(&[CODEC_ZSTD]), Some(1), b"not zstd", 3).is_err());
    }
}
