//! Codec pipelines. A chunk names its pipeline in a `u32`: up to four codec ids, lowest byte
//! first, applied in that order when writing and undone in reverse when reading; 0 ends the list.
//! New codecs get new ids, so they need no change to the framing.

use crate::schema::CodecSpec;

pub const CODEC_ZSTD: u8 = 1;
/// Byte-wise wrapping difference to the same byte of the previous row (first row kept as is).
pub const CODEC_DELTA: u8 = 2;

/// Compression must save at least this fraction of the bytes to be kept; otherwise the chunk is
/// stored raw, which reads faster and can be viewed without copying.
const MIN_SAVING: f64 = 0.05;

pub fn codec_ids(codec: u32) -> impl Iterator<Item = u8> {
    codec.to_le_bytes().into_iter().take_while(|&b| b != 0)
}

pub fn pipeline(ids: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    bytes[..ids.len()].copy_from_slice(ids);
    u32::from_le_bytes(bytes)
}

/// Encodes one chunk's raw rows. `row_bytes` is `None` for variable-length columns.
pub fn encode(spec: &CodecSpec, row_bytes: Option<usize>, raw: &[u8]) -> (u32, Vec<u8>) {
    Encoder::default().encode(spec, row_bytes, raw.to_vec())
}

/// Encodes chunks with reused state: one zstd context per level (making one per chunk costs a
/// few percent of the writer's time on image data) and one buffer for the delta filter.
#[derive(Default)]
pub struct Encoder {
    compressors: Vec<(i32, zstd::bulk::Compressor<'static>)>,
    delta: Vec<u8>,
}

impl Encoder {
    /// Takes the raw rows by value so a chunk stored raw is not copied.
    pub fn encode(&mut self, spec: &CodecSpec, row_bytes: Option<usize>, raw: Vec<u8>) -> (u32, Vec<u8>) {
        let Some(level) = spec.zstd_level else { return (0, raw) };
        let mut ids = Vec::with_capacity(2);
        let delta_row = row_bytes.filter(|&r| r > 0 && spec.delta);
        if let Some(row) = delta_row {
            delta_encode_into(&raw, row, &mut self.delta);
            ids.push(CODEC_DELTA);
        }
        let delta = std::mem::take(&mut self.delta);
        let input: &[u8] = if delta_row.is_some() { &delta } else { &raw };
        let packed = match self.compressor(level) {
            Some(c) => c.compress(input).ok(),
            None => zstd::bulk::compress(input, level).ok(),
        };
        self.delta = delta;
        match packed {
            Some(packed) if (packed.len() as f64) < raw.len() as f64 * (1.0 - MIN_SAVING) => {
                ids.push(CODEC_ZSTD);
                (pipeline(&ids), packed)
            }
            _ => (0, raw),
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
fn zstd_decompress(data: &[u8], capacity: usize) -> Result<Vec<u8>, String> {
    with_dctx(|dctx| {
        let mut out = Vec::with_capacity(capacity);
        dctx.decompress(&mut out, data).map_err(zstd_error)?;
        Ok(out)
    })
}

/// The first `prefix` bytes of a chunk stored with zstd alone, decoding the frame only that far:
/// a random row then costs the rows before it, not the whole chunk. `None` for other codecs
/// (decode them whole), and when the prefix is the whole chunk.
pub fn decode_prefix(codec: u32, stored: &[u8], raw_len: usize, prefix: usize) -> Option<Result<Vec<u8>, String>> {
    if codec != pipeline(&[CODEC_ZSTD]) || prefix >= raw_len {
        return None;
    }
    Some(with_dctx(|dctx| {
        let mut out: Vec<u8> = Vec::with_capacity(prefix);
        let mut input = zstd::zstd_safe::InBuffer::around(stored);
        let mut output = zstd::zstd_safe::OutBuffer::around(&mut out);
        while output.pos() < prefix {
            let before = (output.pos(), input.pos());
            let hint = dctx.decompress_stream(&mut output, &mut input).map_err(zstd_error)?;
            if hint == 0 || (output.pos(), input.pos()) == before {
                break; // the frame ended (or its data did) before the prefix: an error below
            }
        }
        if out.len() != prefix {
            return Err(format!("zstd frame ends after {} bytes, before the chunk's {raw_len}", out.len()));
        }
        Ok(out)
    }))
}

/// Undoes `encode`. Errors are strings: the caller knows the file and offset to report.
pub fn decode(codec: u32, row_bytes: Option<usize>, stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let ids: Vec<u8> = codec_ids(codec).collect();
    let mut data = stored.to_vec();
    for &id in ids.iter().rev() {
        data = match id {
            CODEC_ZSTD => {
                let out = zstd_decompress(&data, raw_len)?;
                if out.len() != raw_len {
                    return Err(format!("zstd gave {} bytes, the chunk says {raw_len}", out.len()));
                }
                out
            }
            CODEC_DELTA => {
                let row = row_bytes.filter(|&r| r > 0).ok_or("delta codec on a variable-length column")?;
                delta_decode(&mut data, row);
                data
            }
            other => return Err(format!("unknown codec id {other}")),
        };
    }
    if data.len() != raw_len {
        return Err(format!("decoded {} bytes, the chunk says {raw_len}", data.len()));
    }
    Ok(data)
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
        let spec = CodecSpec { delta: true, zstd_level: Some(3), chunk_bytes: None };
        let (codec, stored) = encode(&spec, Some(64), &smooth);
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
        let (codec, stored) = encode(&CodecSpec::default(), Some(4), &noise);
        assert_eq!(codec, 0, "incompressible data is stored raw");
        assert_eq!(stored, noise);
    }

    #[test]
    fn prefixes_decode_like_the_whole_chunk() {
        let raw: Vec<u8> = (0..300_000u32).map(|i| ((i / 7) ^ (i % 251)) as u8).collect();
        let spec = CodecSpec { delta: false, zstd_level: Some(3), chunk_bytes: None };
        let (codec, stored) = encode(&spec, Some(100), &raw);
        assert_eq!(codec, pipeline(&[CODEC_ZSTD]));
        for prefix in [0, 1, 99, 4096, 131_072, 131_073, 299_999] {
            let got = decode_prefix(codec, &stored, raw.len(), prefix).expect("zstd alone").unwrap();
            assert_eq!(got, raw[..prefix], "prefix {prefix}");
        }
        assert!(decode_prefix(codec, &stored, raw.len(), raw.len()).is_none(), "the whole chunk: decode it whole");
        let (delta, stored_delta) = encode(&CodecSpec { delta: true, ..spec }, Some(100), &raw);
        assert!(decode_prefix(delta, &stored_delta, raw.len(), 10).is_none());
        // A cut or damaged frame is an error, and the next decode on this thread is unharmed.
        assert!(decode_prefix(codec, &stored[..stored.len() / 4], raw.len(), 299_999).unwrap().is_err());
        assert!(decode_prefix(codec, b"not zstd at all", raw.len(), 10).unwrap().is_err());
        assert_eq!(decode(codec, Some(100), &stored, raw.len()).unwrap(), raw);
        assert_eq!(decode_prefix(codec, &stored, raw.len(), 5000).unwrap().unwrap(), raw[..5000]);
    }

    #[test]
    fn unknown_codec_is_an_error() {
        assert!(decode(pipeline(&[9]), Some(1), b"abc", 3).is_err());
        assert!(decode(pipeline(&[CODEC_ZSTD]), Some(1), b"not zstd", 3).is_err());
    }
}
