//! The bytes of one value of a column, where the rule is the core's: numbers into a column's
//! dtype (integers only when they fit, floats rounded as numpy rounds), strings with their
//! length prefix, and the texts errors show shapes and values in.

use crate::schema::MAX_STR_BYTES;
use crate::DType;

/// How an array of numpy kind `from` (its dtype's kind character) and item size `itemsize` goes
/// into a column of type `to`: as numpy's same-kind cast goes (bool into anything, integers into
/// integers and floats, floats into floats), but a cast that could change a value is made only
/// when it does not: integers into a type that does not hold every value of theirs only when
/// every value fits, numbers into a float type of a smaller range only when no finite value
/// becomes infinite. Rounding to the nearest float of the column's type is no change of value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cast {
    Safe,
    IfValuesFit,
    IfFinite,
    Refused,
}

pub fn cast_rule(from: u8, itemsize: usize, to: DType) -> Cast {
    let source = super::widen::make(from, itemsize);
    match (from, to) {
        (_, DType::Utf8) => Cast::Refused,
        (b'b', _) => Cast::Safe,
        (b'i' | b'u', DType::Bool) => Cast::Refused,
        (b'i' | b'u', DType::F16) if itemsize > 1 => Cast::IfFinite,
        (b'i' | b'u', DType::F16 | DType::F32 | DType::F64) => Cast::Safe,
        (b'i' | b'u', _) if source.is_some_and(|s| super::widen::casts_safely(s, to)) => Cast::Safe,
        (b'i' | b'u', _) => Cast::IfValuesFit,
        (b'f', DType::F16 | DType::F32 | DType::F64) if to.size().is_some_and(|size| size >= itemsize) => Cast::Safe,
        (b'f', DType::F16 | DType::F32 | DType::F64) => Cast::IfFinite,
        _ => Cast::Refused,
    }
}

/// The column type of an array's values (rows of `row_shape`), from its numpy dtype: `kind` (its
/// kind character), `itemsize` and `shown` (as numpy prints it); why not when no column holds
/// them.
pub fn array_column_type(kind: u8, itemsize: usize, shown: &str, row_shape: &[usize]) -> Result<DType, String> {
    match (kind, super::widen::make(kind, itemsize)) {
        (b'U', _) if row_shape.is_empty() => Ok(DType::Utf8),
        (b'U', _) => Err("arrays of strings are not supported".into()),
        (_, Some(dtype)) => Ok(dtype),
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

/// Number `v` as a value of float column type `dtype` (float16, float32, float64); why not when
/// it is finite and the type's range is not large enough for it (it would be stored as inf).
pub fn put_float(dtype: DType, v: f64, out: &mut Vec<u8>) -> Result<(), String> {
    let overflows = match dtype {
        DType::F16 => {
            let bits = f64_to_f16_bits(v);
            out.extend_from_slice(&bits.to_le_bytes());
            bits & 0x7fff == 0x7c00
        }
        DType::F32 => {
            out.extend_from_slice(&(v as f32).to_le_bytes());
            (v as f32).is_infinite()
        }
        _ => {
            out.extend_from_slice(&v.to_le_bytes());
            false
        }
    };
    if overflows && v.is_finite() {
        return Err(overflow(v, dtype));
    }
    Ok(())
}

/// The message for a finite value beyond the range of float type `dtype`.
pub fn overflow(v: f64, dtype: DType) -> String {
    format!("value {v:e} is out of range for {} (it would be stored as inf)", dtype.name())
}

/// How a Python scalar (a number, or an object that converts to one) is read for a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarRead {
    Float,
    Int,
    /// Not at all: the column takes no such value (what it takes, for the message).
    Refused(&'static str),
}

/// A Python scalar as read (see `scalar_read`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Float(f64),
    Int(i128),
}

/// Why a value is not recorded in a column: a Python scalar that is not what the column takes
/// (`Wrong`, naming what it takes; the bindings add the value's type and text), or a value that
/// does not fit (its shape, a cast, its range, a discrete space's bounds: why, in words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    Wrong(&'static str),
    Value(String),
}

/// How a Python scalar is read for a column of `dtype` (`is_float`: it is a Python float): as a
/// number for float columns, as an integer for integer and bool columns (a bool is the int 0 or
/// 1), and not at all for a float into an integer column (nor for a str column).
pub fn scalar_read(dtype: DType, is_float: bool) -> ScalarRead {
    match dtype {
        DType::F16 | DType::F32 | DType::F64 => ScalarRead::Float,
        DType::Bool => ScalarRead::Int,
        DType::Utf8 => ScalarRead::Refused("str"),
        _ if is_float => ScalarRead::Refused("integer; floats do not cast safely to integers"),
        _ => ScalarRead::Int,
    }
}

/// A Python scalar read as `scalar_read` says (`None`: it could not be read so) as a value of
/// column type `dtype`, appended to `out`.
pub fn put_scalar(dtype: DType, value: Option<Scalar>, out: &mut Vec<u8>) -> Result<(), Misfit> {
    match (dtype, value) {
        (DType::Bool, Some(Scalar::Int(v @ (0 | 1)))) => out.push(v as u8),
        (DType::Bool, _) => return Err(Misfit::Wrong("bool")),
        (DType::F16 | DType::F32 | DType::F64, Some(Scalar::Float(v))) => {
            put_float(dtype, v, out).map_err(Misfit::Value)?
        }
        (DType::F16 | DType::F32 | DType::F64, _) => return Err(Misfit::Wrong("number")),
        (DType::Utf8, _) => return Err(Misfit::Wrong("str")),
        (int, Some(Scalar::Int(v))) => put_int(int, v, out).map_err(Misfit::Value)?,
        (_, _) => return Err(Misfit::Wrong("integer")),
    }
    Ok(())
}

/// The message for a Python scalar that is not what a column of `dtype` takes (`what`, see
/// `Misfit::Wrong`): its type's name and its text.
pub fn scalar_wrong(dtype: DType, what: &str, type_name: &str, text: String) -> String {
    format!("expected {} (a {what}), got {type_name} {}", dtype.name(), short_text(text))
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

/// Whether an array of `shape` holds a column's rows of `row_shape` (`rows`: the env count of a
/// batched value, `None` for one row); why not.
pub fn check_shape(rows: Option<usize>, shape: &[usize], row_shape: &[usize]) -> Result<(), String> {
    // By hand: slice equality calls memcmp, which costs more than these one or two dims.
    let same = |a: &[usize], b: &[usize]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
    let matches = match rows {
        Some(n) => shape.first() == Some(&n) && same(&shape[1..], row_shape),
        None => same(shape, row_shape),
    };
    if matches {
        return Ok(());
    }
    Err(format!("expected shape {}, got {}", shape_text(rows, row_shape), shape_text(None, shape)))
}

/// The per-row shape a first value of `shape` gives its column: without its env axis when
/// batched (`rows`: the env count), which must then lead; why not.
pub fn row_shape(rows: Option<usize>, shape: &[usize]) -> Result<&[usize], String> {
    match rows {
        Some(n) if shape.first() != Some(&n) => Err(format!("expected one value per env ({n}), got shape {shape:?}")),
        Some(_) => Ok(&shape[1..]),
        None => Ok(shape),
    }
}

/// Whether env `env` has a value where `mask` (one byte per env, `None`: every env) says which do.
pub fn present(mask: Option<&[u8]>, env: usize) -> bool {
    mask.is_none_or(|m| m.get(env) == Some(&1))
}

/// The first of `n` envs that has a value (see `present`).
pub fn first_present(mask: Option<&[u8]>, n: usize) -> Option<usize> {
    (0..n).find(|&env| present(mask, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_scalars_are_read_by_their_column() {
        use ScalarRead::*;
        let table = [
            (DType::F32, false, Float),
            (DType::F64, true, Float),
            (DType::Bool, true, Int),
            (DType::I8, false, Int),
            (DType::U64, true, Refused("integer; floats do not cast safely to integers")),
            (DType::Utf8, false, Refused("str")),
        ];
        for (dtype, is_float, want) in table {
            assert_eq!(scalar_read(dtype, is_float), want, "{dtype:?} {is_float}");
        }
    }

    #[test]
    fn python_scalars_fit_or_say_why() {
        use Scalar::*;
        let wrong = |what| Err(Misfit::Wrong(what));
        type Case<'a> = (DType, Option<Scalar>, Result<&'a [u8], Misfit>);
        let table: [Case<'_>; 9] = [
            (DType::Bool, Some(Int(1)), Ok(&[1])),
            (DType::Bool, Some(Int(2)), wrong("bool")),
            (DType::Bool, None, wrong("bool")),
            (DType::F32, Some(Float(0.5)), Ok(&[0, 0, 0, 0x3f])),
            (DType::F64, None, wrong("number")),
            (DType::I16, Some(Int(-2)), Ok(&[0xfe, 0xff])),
            (DType::U8, Some(Int(256)), Err(Misfit::Value("value 256 is out of range for uint8".into()))),
            (DType::I64, None, wrong("integer")),
            (DType::I64, Some(Float(1.0)), wrong("integer")),
        ];
        for (dtype, value, want) in table {
            let mut out = Vec::new();
            let got = put_scalar(dtype, value, &mut out).map(|()| out.as_slice());
            assert_eq!(got, want, "{dtype:?} {value:?}");
        }
        let long = format!("'{}'", "x".repeat(70));
        let text = scalar_wrong(DType::U8, "integer", "str", long);
        assert_eq!(text, format!("expected uint8 (a integer), got str '{}...", "x".repeat(56)));
    }

    #[test]
    fn shapes_are_checked_with_their_env_axis() {
        type Case<'a> = (Option<usize>, &'a [usize], &'a [usize], Result<(), &'a str>);
        let table: [Case<'_>; 6] = [
            (None, &[2, 3], &[2, 3], Ok(())),
            (None, &[], &[], Ok(())),
            (Some(4), &[4], &[], Ok(())),
            (Some(4), &[4, 3], &[3], Ok(())),
            (Some(4), &[3, 3], &[3], Err("expected shape (4, 3), got (3, 3)")),
            (None, &[3], &[], Err("expected shape (), got (3,)")),
        ];
        for (rows, shape, row, want) in table {
            assert_eq!(check_shape(rows, shape, row), want.map_err(str::to_owned), "{rows:?} {shape:?} {row:?}");
        }
    }

    #[test]
    fn first_values_give_their_row_shape() {
        type Case<'a> = (Option<usize>, &'a [usize], Result<&'a [usize], &'a str>);
        let table: [Case<'_>; 5] = [
            (None, &[], Ok(&[])),
            (None, &[3], Ok(&[3])),
            (Some(2), &[2, 3], Ok(&[3])),
            (Some(2), &[3, 2], Err("expected one value per env (2), got shape [3, 2]")),
            (Some(2), &[], Err("expected one value per env (2), got shape []")),
        ];
        for (rows, shape, want) in table {
            assert_eq!(row_shape(rows, shape), want.map_err(str::to_owned), "{rows:?} {shape:?}");
        }
    }

    #[test]
    fn envs_have_values_where_their_mask_is_one() {
        type Case<'a> = (Option<&'a [u8]>, usize, Option<usize>);
        let table: [Case<'_>; 5] = [
            (None, 3, Some(0)),
            (None, 0, None),
            (Some(&[0, 0, 1]), 3, Some(2)),
            (Some(&[0, 2, 0]), 3, None), // only 1 counts, as numpy's bools are
            (Some(&[0]), 3, None),
        ];
        for (mask, n, want) in table {
            assert_eq!(first_present(mask, n), want, "{mask:?} {n}");
        }
    }

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
    fn casts_follow_numpy_same_kind_unless_a_value_would_change() {
        use Cast::*;
        // (numpy kind, item size, column type, the rule)
        let table = [
            (b'b', 1, DType::Bool, Safe),
            (b'b', 1, DType::F16, Safe),
            (b'i', 8, DType::Bool, Refused),
            (b'u', 1, DType::Bool, Refused),
            (b'i', 1, DType::I8, Safe),
            (b'i', 4, DType::I64, Safe),
            (b'u', 4, DType::I64, Safe),
            (b'i', 8, DType::I32, IfValuesFit), // 2**40 would wrap
            (b'u', 8, DType::I64, IfValuesFit), // 2**63 would wrap
            (b'i', 2, DType::U64, IfValuesFit), // -1 would wrap
            (b'u', 1, DType::U64, Safe),
            (b'i', 1, DType::F16, Safe),
            (b'u', 2, DType::F16, IfFinite), // 65535 is beyond float16
            (b'i', 8, DType::F32, Safe),     // rounded, never beyond float32
            (b'f', 4, DType::F64, Safe),
            (b'f', 8, DType::F32, IfFinite), // 1e40 is beyond float32
            (b'f', 4, DType::F16, IfFinite),
            (b'f', 2, DType::F32, Safe),
            (b'f', 8, DType::I64, Refused),
            (b'c', 16, DType::F64, Refused), // the imaginary part would be lost
            (b'M', 8, DType::I64, Refused),
            (b'm', 8, DType::I64, Refused),
            (b'O', 8, DType::F64, Refused),
            (b'U', 4, DType::Utf8, Refused),
            (b'S', 1, DType::U8, Refused),
            (b'V', 4, DType::I32, Refused),
        ];
        for (from, size, to, rule) in table {
            assert_eq!(cast_rule(from, size, to), rule, "{}{size} -> {to:?}", from as char);
        }
        assert!(ints_fit(DType::U8, 0, 255) && !ints_fit(DType::U8, -1, 3) && !ints_fit(DType::I16, 0, 1 << 15));
    }

    #[test]
    fn floats_beyond_their_column_are_refused() {
        let mut out = Vec::new();
        let why = "value 1e40 is out of range for float32 (it would be stored as inf)";
        assert_eq!(put_float(DType::F32, 1e40, &mut out), Err(why.to_string()));
        assert_eq!(put_float(DType::F16, 7e4, &mut out), Err(overflow(7e4, DType::F16)));
        for (dtype, v) in [(DType::F32, f64::INFINITY), (DType::F32, f64::NAN), (DType::F16, 6e4), (DType::F64, 1e300)]
        {
            assert_eq!(put_float(dtype, v, &mut out), Ok(()), "{dtype:?} {v}");
        }
    }

    #[test]
    fn arrays_give_their_column_type() {
        assert_eq!(array_column_type(b'f', 4, "<f4", &[2]), Ok(DType::F32));
        assert_eq!(array_column_type(b'f', 2, "<f2", &[]), Ok(DType::F16));
        assert_eq!(array_column_type(b'b', 1, "|b1", &[]), Ok(DType::Bool));
        assert_eq!(array_column_type(b'U', 12, "<U3", &[]), Ok(DType::Utf8));
        assert_eq!(array_column_type(b'U', 12, "<U3", &[2]), Err("arrays of strings are not supported".into()));
        assert_eq!(array_column_type(b'c', 8, "<c8", &[]), Err("dtype <c8 is not supported".into()));
        assert_eq!(array_column_type(b'f', 16, "<f16", &[]), Err("dtype <f16 is not supported".into()));
        assert_eq!(array_column_type(b'O', 8, "|O", &[]), Err("dtype |O is not supported".into()));
        assert_eq!(array_column_type(b'S', 1, "|S1", &[]), Err("dtype |S1 is not supported".into()));
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
        put_float(DType::F32, 0.5, &mut out).unwrap();
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
