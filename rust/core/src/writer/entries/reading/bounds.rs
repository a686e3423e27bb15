//! The values a discrete space's column may hold: `Discrete(3)` takes 0, 1 and 2, and an action
//! 7 is no action of it, whatever its dtype could store. The caller gives each such column its
//! inclusive bounds (`RecorderConfig::value_bounds`, from gymnasium's `Discrete`,
//! `MultiDiscrete` and `MultiBinary`); every value of it is checked against them on the bytes
//! the column gets, so one rule holds whichever way the value came (a Python int, a numpy
//! scalar, an array, a cast). Box bounds are not checked: an env's Box values outside its bounds
//! are its real values (gymnasium's own checker only warns), and are stored as given.

use serde::Deserialize;

use crate::dtype::DType;

/// Inclusive bounds of a column's elements: one pair for every element of a row, or one
/// pair per element (in the row's C order).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntBounds {
    pub low: Vec<i64>,
    pub high: Vec<i64>,
    /// The space as the caller shows it ("Discrete(3)"), for messages.
    pub space: String,
}

impl IntBounds {
    /// Whether these bounds fit rows of `elements` elements of `dtype`; why not.
    pub fn check_spec(&self, dtype: DType, elements: usize) -> Result<(), String> {
        let fits = |n: usize| n == 1 || n == elements;
        if !integer(dtype) {
            return Err(format!("bounds are for integer columns, not {}", dtype.name()));
        }
        if !fits(self.low.len()) || self.low.len() != self.high.len() {
            return Err(format!(
                "bounds have {} low and {} high values for rows of {elements} elements",
                self.low.len(),
                self.high.len()
            ));
        }
        Ok(())
    }

    /// Whether every element of `data` (rows of `elements` elements of `dtype`, little-endian)
    /// lies within the bounds; why not, naming the first that does not (`batched`: the rows are
    /// one per env, which the message names).
    pub fn check(&self, dtype: DType, data: &[u8], elements: usize, batched: bool) -> Result<(), String> {
        let Some(size) = dtype.size().filter(|_| integer(dtype)) else { return Ok(()) };
        let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
        if let ([lo], [hi]) = (&self.low[..], &self.high[..]) {
            if all_within(data, size, signed, *lo, *hi) {
                return Ok(());
            }
        }
        let uniform = self.low.len() == 1;
        for (i, item) in data.chunks_exact(size).enumerate() {
            let v = read_int(item, signed);
            let at = if uniform { 0 } else { i % elements.max(1) };
            let (lo, hi) = (self.low[at] as i128, self.high[at] as i128);
            if lo <= v && v <= hi {
                continue;
            }
            let env = if batched { format!("env {}: ", i / elements.max(1)) } else { String::new() };
            let element = if elements > 1 { format!("element {}: ", i % elements) } else { String::new() };
            return Err(format!("{env}{element}value {v} is not in {} (it takes {lo} to {hi})", self.space));
        }
        Ok(())
    }
}

fn integer(dtype: DType) -> bool {
    matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

/// Whether every item of `data` (little-endian integers of `size` bytes) lies in `lo..=hi`: the
/// common case (one pair of bounds, a `Discrete` action) read at the item's own width, as it runs
/// on every recorder call; `check`'s loop names a misfit.
fn all_within(data: &[u8], size: usize, signed: bool, lo: i64, hi: i64) -> bool {
    let (lo, hi) = (lo as i128, hi as i128);
    macro_rules! within {
        ($t:ty) => {
            data.chunks_exact(size).all(|item| {
                let v = <$t>::from_le_bytes(item.try_into().expect("items of the type's size")) as i128;
                lo <= v && v <= hi
            })
        };
    }
    match (size, signed) {
        (1, true) => within!(i8),
        (2, true) => within!(i16),
        (4, true) => within!(i32),
        (8, true) => within!(i64),
        (1, false) => within!(u8),
        (2, false) => within!(u16),
        (4, false) => within!(u32),
        (8, false) => within!(u64),
        _ => false,
    }
}

/// A little-endian integer of 1, 2, 4 or 8 bytes.
fn read_int(bytes: &[u8], signed: bool) -> i128 {
    let mut wide = [0u8; 16];
    wide[..bytes.len()].copy_from_slice(bytes);
    if signed && bytes.last().is_some_and(|b| b & 0x80 != 0) {
        wide[bytes.len()..].fill(0xff);
    }
    i128::from_le_bytes(wide)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(low: &[i64], high: &[i64], space: &str) -> IntBounds {
        IntBounds { low: low.to_vec(), high: high.to_vec(), space: space.into() }
    }

    fn le(values: &[i64], size: usize) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()[..size].to_vec()).collect()
    }

    #[test]
    fn values_in_their_space_pass_and_others_are_named() {
        let discrete = bounds(&[0], &[2], "Discrete(3)");
        let shifted = bounds(&[-1], &[1], "Discrete(3, start=-1)");
        let multi = bounds(&[0, 0], &[2, 4], "MultiDiscrete([3 5])");
        let binary = bounds(&[0], &[1], "MultiBinary(3)");
        // (bounds, dtype, values, elements a row, batched, the error)
        type Case<'a> = (&'a IntBounds, DType, Vec<u8>, usize, bool, Option<&'a str>);
        let table: Vec<Case<'_>> = vec![
            (&discrete, DType::I64, le(&[0], 8), 1, false, None),
            (&discrete, DType::I64, le(&[2], 8), 1, false, None),
            (&discrete, DType::I64, le(&[7], 8), 1, false, Some("value 7 is not in Discrete(3) (it takes 0 to 2)")),
            (&discrete, DType::I64, le(&[-1], 8), 1, false, Some("value -1 is not in Discrete(3) (it takes 0 to 2)")),
            (&discrete, DType::I64, le(&[1, 0, 3], 8), 1, true, Some("env 2: value 3 is not in Discrete(3)")),
            (&shifted, DType::I8, le(&[-1, 1], 1), 1, true, None),
            (&shifted, DType::I8, le(&[-2], 1), 1, false, Some("value -2 is not in Discrete(3, start=-1)")),
            (&discrete, DType::U8, vec![255], 1, false, Some("value 255 is not in Discrete(3)")),
            (&discrete, DType::U64, u64::MAX.to_le_bytes().to_vec(), 1, false, Some("value 18446744073709551615")),
            (&multi, DType::I64, le(&[2, 4], 8), 2, false, None),
            (&multi, DType::I64, le(&[2, 5], 8), 2, false, Some("element 1: value 5 is not in MultiDiscrete([3 5])")),
            (&multi, DType::I32, le(&[0, 0, 3, 0], 4), 2, true, Some("env 1: element 0: value 3 is not in")),
            (&binary, DType::I8, le(&[0, 1, 1], 1), 3, false, None),
            (&binary, DType::I8, le(&[0, 2, 1], 1), 3, false, Some("element 1: value 2 is not in MultiBinary(3)")),
            (&discrete, DType::I64, Vec::new(), 1, true, None),
            (&discrete, DType::F32, 7.0f32.to_le_bytes().to_vec(), 1, false, None), // not an integer column
        ];
        for (b, dtype, data, elements, batched, want) in table {
            let got = b.check(dtype, &data, elements, batched);
            match want {
                None => assert_eq!(got, Ok(()), "{b:?} {dtype:?} {data:?}"),
                Some(start) => {
                    let why = got.expect_err(start);
                    assert!(why.starts_with(start), "{why} does not start with {start}");
                }
            }
        }
    }

    #[test]
    fn bounds_fit_their_column_or_say_why() {
        let table = [
            (bounds(&[0], &[2], "D"), DType::I64, 1, Ok(())),
            (bounds(&[0], &[2], "D"), DType::I64, 4, Ok(())),
            (bounds(&[0, 0], &[2, 2], "M"), DType::I64, 2, Ok(())),
            (
                bounds(&[0, 0], &[2, 2], "M"),
                DType::I64,
                3,
                Err("bounds have 2 low and 2 high values for rows of 3 elements"),
            ),
            (
                bounds(&[0], &[2, 2], "M"),
                DType::I64,
                2,
                Err("bounds have 1 low and 2 high values for rows of 2 elements"),
            ),
            (bounds(&[0], &[1], "B"), DType::F32, 1, Err("bounds are for integer columns, not float32")),
        ];
        for (b, dtype, elements, want) in table {
            assert_eq!(b.check_spec(dtype, elements), want.map_err(str::to_owned), "{b:?}");
        }
    }
}
