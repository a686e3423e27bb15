//! The bytes of one value of a column, where the rule is the core's: numbers into a column's
//! dtype (integers only when they fit, floats rounded as numpy rounds), strings with their
//! length prefix, and the texts errors show shapes and values in.

use crate::schema::MAX_STR_BYTES;
use crate::DType;

/// How an array of numpy kind `from` (its dtype's kind character) goes into a column of type
/// `to`: as numpy's same-kind cast goes (bool into anything, integers into integers and floats,
/// floats into floats), and signed integers into unsigned ones only when every value fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cast {
    Safe,
    IfValuesFit,
    Refused,
}

pub fn cast_rule(from: u8, to: DType) -> Cast {
    match (from, to) {
        (_, DType::Utf8) => Cast::Refused,
        (b'b', _) => Cast::Safe,
        (b'i', DType::U8 | DType::U16 | DType::U32 | DType::U64) => Cast::IfValuesFit,
        (b'i' | b'u', DType::Bool) => Cast::Refused,
        (b'i' | b'u', _) => Cast::Safe,
        (b'f', DType::F16 | DType::F32 | DType::F64) => Cast::Safe,
        _ => Cast::Refused,
    }
}

/// The column type of an array's values (rows of `row_shape`), from its numpy dtype: `kind` (its
/// kind character), `name` (its canonical name, "float32") and `shown` (as numpy prints it);
/// why not when no column holds them.
pub fn array_column_type(kind: u8, name: &str, shown: &str, row_shape: &[usize]) -> Result<DType, String> {
    match (kind, DType::from_name(name)) {
        (b'U', _) if row_shape.is_empty() => Ok(DType::Utf8),
        (b'U', _) => Err("arrays of strings are not supported".into()),
        (_, Ok(dtype)) if dtype != DType::Utf8 => Ok(dtype),
        _ => Err(format!("dtype {shown} is not supported")),
    }
}

/// Whether integers from `lo` to `hi` fit integer column type `dtype`.
pub fn ints_fit(dtype: DType, lo: i128, hi: i128) -> bool {
    let (min, max): (i128, i128) = match dtype {
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    };
    min <= lo && hi <= max
}

/// Integer `v` as a value of integer column type `dtype`, appended to `out`; why not if it does
/// not fit.
pub fn put_int(dtype: DType, v: i128, out: &mut Vec<u8>) -> Result<(), String> {
    if !ints_fit(dtype, v, v) {
        return Err(format!("value {v} is out of range for {}", dtype.name()));
    }
    out.extend_from_slice(&v.to_le_bytes()[..dtype.size().unwrap_or(8)]);
    Ok(())
}

/// Number `v` as a value of float column type `dtype` (float16, float32, float64).
pub fn put_float(dtype: DType, v: f64, out: &mut Vec<u8>) {
    match dtype {
        DType::F16 => out.extend_from_slice(&f64_to_f16_bits(v).to_le_bytes()),
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        _ => out.extend_from_slice(&v.to_le_bytes()),
    }
}

/// A str row: `u32` length and UTF-8 bytes; why not when it is too long.
pub fn put_str(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    if text.len() as u64 > MAX_STR_BYTES {
        return Err(format!("a str of {} bytes; at most {MAX_STR_BYTES} bytes of UTF-8 a value", text.len()));
    }
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// Round-to-nearest-even conversion to IEEE half precision (through float32, as numpy does).
pub fn f64_to_f16_bits(v: f64) -> u16 {
    let x = v as f32;
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = (man | 0x80_0000) >> (1 - e);
        let round = (m >> 12) & 1 != 0 && ((m & 0x1fff) != 0x1000 || (m >> 13) & 1 != 0);
        return sign | ((m >> 13) as u16 + round as u16);
    }
    let round = (man >> 12) & 1 != 0 && ((man & 0x1fff) != 0x1000 || (man >> 13) & 1 != 0);
    let h = ((e as u32) << 10 | (man >> 13)) + round as u32;
    sign | h as u16
}

/// A shape as Python writes it: `(3,)`, `(2, 3)`, `()`; with a leading env count `rows`.
pub fn shape_text(rows: Option<usize>, shape: &[usize]) -> String {
    let dims: Vec<String> = rows.into_iter().chain(shape.iter().copied()).map(|d| d.to_string()).collect();
    match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    }
}

/// A value's text for a message: past 60 bytes, its first 57 characters and "...".
pub fn short_text(text: String) -> String {
    if text.len() <= 60 {
        return text;
    }
    let cut = text.char_indices().nth(57).map_or(text.len(), |(i, _)| i);
    format!("{}...", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_fit_or_say_why() {
        let table: [(DType, i128, Option<&[u8]>); 6] = [
            (DType::U8, 255, Some(&[255])),
            (DType::U8, 256, None),
            (DType::I8, -1, Some(&[0xff])),
            (DType::U16, -1, None),
            (DType::I64, i64::MIN as i128 - 1, None),
            (DType::U32, 0x0102_0304, Some(&[4, 3, 2, 1])),
        ];
        for (dtype, v, want) in table {
            let mut out = Vec::new();
            match (put_int(dtype, v, &mut out), want) {
                (Ok(()), Some(bytes)) => assert_eq!(out, bytes),
                (Err(why), None) => assert_eq!(why, format!("value {v} is out of range for {}", dtype.name())),
                (got, _) => panic!("{dtype:?} {v}: {got:?}"),
            }
        }
    }

    #[test]
    fn casts_follow_numpy_same_kind() {
        use Cast::*;
        let kinds = [b'b', b'i', b'u', b'f', b'c', b'M', b'm', b'O', b'U', b'S', b'V'];
        let table = [
            (
                DType::Bool,
                [Safe, Refused, Refused, Refused, Refused, Refused, Refused, Refused, Refused, Refused, Refused],
            ),
            (DType::I8, [Safe, Safe, Safe, Refused, Refused, Refused, Refused, Refused, Refused, Refused, Refused]),
            (
                DType::U64,
                [Safe, IfValuesFit, Safe, Refused, Refused, Refused, Refused, Refused, Refused, Refused, Refused],
            ),
            (DType::F16, [Safe, Safe, Safe, Safe, Refused, Refused, Refused, Refused, Refused, Refused, Refused]),
            (DType::Utf8, [Refused; 11]),
        ];
        for (to, rules) in table {
            for (from, rule) in kinds.iter().zip(rules) {
                assert_eq!(cast_rule(*from, to), rule, "{} -> {to:?}", *from as char);
            }
        }
        assert!(ints_fit(DType::U8, 0, 255) && !ints_fit(DType::U8, -1, 3) && !ints_fit(DType::I16, 0, 1 << 15));
    }

    #[test]
    fn arrays_give_their_column_type() {
        assert_eq!(array_column_type(b'f', "float32", "<f4", &[2]), Ok(DType::F32));
        assert_eq!(array_column_type(b'U', "str96", "<U3", &[]), Ok(DType::Utf8));
        assert_eq!(array_column_type(b'U', "str96", "<U3", &[2]), Err("arrays of strings are not supported".into()));
        assert_eq!(array_column_type(b'c', "complex64", "<c8", &[]), Err("dtype <c8 is not supported".into()));
        assert_eq!(array_column_type(b'O', "object", "|O", &[]), Err("dtype |O is not supported".into()));
        assert_eq!(array_column_type(b'O', "str", "|O", &[]), Err("dtype |O is not supported".into()));
    }

    #[test]
    fn half_floats_round_to_nearest_even() {
        let table = [
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00),
            (1e-8, 0x0000),
            (6e-8, 0x0001),
            (1.0 + 1.0 / 2048.0, 0x3c00),
            (1.0 + 3.0 / 2048.0, 0x3c02),
            (f64::INFINITY, 0x7c00),
            (f64::NAN, 0x7e00),
        ];
        for (v, bits) in table {
            assert_eq!(f64_to_f16_bits(v), bits, "{v}");
        }
        let mut out = Vec::new();
        put_float(DType::F32, 0.5, &mut out);
        assert_eq!(out, 0.5f32.to_le_bytes());
    }

    #[test]
    fn strs_carry_their_length() {
        let mut out = Vec::new();
        put_str("hé", &mut out).unwrap();
        assert_eq!(out, [3, 0, 0, 0, b'h', 0xc3, 0xa9]);
        let long = "x".repeat(MAX_STR_BYTES as usize + 1);
        assert!(put_str(&long, &mut out).unwrap_err().starts_with(&format!("a str of {} bytes", long.len())));
    }

    #[test]
    fn texts_for_messages() {
        assert_eq!(shape_text(None, &[]), "()");
        assert_eq!(shape_text(None, &[3]), "(3,)");
        assert_eq!(shape_text(Some(4), &[]), "(4,)");
        assert_eq!(shape_text(Some(4), &[2, 3]), "(4, 2, 3)");
        assert_eq!(short_text("abc".into()), "abc");
        assert_eq!(short_text("é".repeat(30)), "é".repeat(30));
        assert_eq!(short_text("é".repeat(61)), format!("{}...", "é".repeat(57)));
    }
}
