//! Widening a column made on first sight (an info entry, custom data) when a later value does not
//! fit its type: gymnasium's FrozenLake gives `prob` as an int at reset and a float at each step.
//! A value whose type does not cast safely to the column's (numpy's "safe" casting) starts a new
//! column of the smallest type both cast safely to (numpy's type promotion), which continues the
//! first (`ColumnSpec::widens`); readers give the key's values in that wider type, the values
//! written before included (FORMAT.md, "Widened columns"). What has no such type (a str after a
//! number, an array after a scalar) keeps the rule of values that do not fit: left out, warned,
//! counted.
//!
//! Python's own scalars are numpy's "weak" types (NEP 50): a Python int fits any integer column
//! its value fits, a float any float column; only a kind the column cannot hold widens it.

use crate::dtype::DType;

/// The kind and size of a numeric dtype: (b'b' | b'u' | b'i' | b'f', bytes).
fn kind(d: DType) -> Option<(u8, usize)> {
    let k = match d {
        DType::Bool => b'b',
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => b'u',
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => b'i',
        DType::F16 | DType::F32 | DType::F64 => b'f',
        DType::Utf8 => return None,
    };
    Some((k, d.size()?))
}

/// The numeric dtype of numpy kind `kind` (b'b' | b'u' | b'i' | b'f') and `size` bytes.
pub(crate) fn make(kind: u8, size: usize) -> Option<DType> {
    Some(match (kind, size) {
        (b'b', 1) => DType::Bool,
        (b'u', 1) => DType::U8,
        (b'u', 2) => DType::U16,
        (b'u', 4) => DType::U32,
        (b'u', 8) => DType::U64,
        (b'i', 1) => DType::I8,
        (b'i', 2) => DType::I16,
        (b'i', 4) => DType::I32,
        (b'i', 8) => DType::I64,
        (b'f', 2) => DType::F16,
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        _ => return None,
    })
}

/// Whether numpy casts `from` to `to` with `casting="safe"` (every value keeps its meaning; as
/// numpy, an int64 into a float64 counts as safe).
pub fn casts_safely(from: DType, to: DType) -> bool {
    if from == to {
        return true;
    }
    let (Some((fk, fs)), Some((tk, ts))) = (kind(from), kind(to)) else { return false };
    match (fk, tk) {
        (b'b', _) => true,
        (b'u', b'u') | (b'i', b'i') | (b'f', b'f') => fs <= ts,
        (b'u', b'i') => fs < ts,
        // Integers into floats: as numpy, up to the float whose mantissa numpy deems enough.
        (b'u' | b'i', b'f') => ts > fs || ts == 8,
        _ => false,
    }
}

/// numpy's `promote_types` for two numeric dtypes: the smallest both cast safely to.
pub fn promote(a: DType, b: DType) -> Option<DType> {
    let ((ak, asz), (bk, bsz)) = (kind(a)?, kind(b)?);
    let wider = match (ak, bk) {
        _ if ak == bk => make(ak, asz.max(bsz))?,
        (b'b', _) => b,
        (_, b'b') => a,
        (b'u', b'i') | (b'i', b'u') => {
            let (u, i) = if ak == b'u' { (asz, bsz) } else { (bsz, asz) };
            if i > u {
                make(b'i', i)?
            } else {
                make(b'i', u * 2).unwrap_or(DType::F64)
            }
        }
        (b'f', _) | (_, b'f') => {
            let (f, int) = if ak == b'f' { (asz, bsz) } else { (bsz, asz) };
            // The smallest float an integer of `int` bytes casts safely to.
            let for_int = match int {
                1 => 2,
                2 => 4,
                _ => 8,
            };
            make(b'f', f.max(for_int))?
        }
        _ => return None,
    };
    (casts_safely(a, wider) && casts_safely(b, wider)).then_some(wider)
}

/// The type a column of `column` widens to for a numpy value of `value` that does not cast
/// safely to it; `None` when it does (no widening) or when no type holds both.
pub fn widened(column: DType, value: DType) -> Option<DType> {
    if casts_safely(value, column) {
        return None;
    }
    promote(column, value)
}

/// The same for a Python scalar (`value` is `Bool`, `I64` or `F64` by its type): a weak type,
/// which widens a column only by its kind (an int into a bool column, a float into an integer
/// or bool one). A Python int too large for its integer column is then widened as an int64.
pub fn widened_weak(column: DType, value: DType) -> Option<DType> {
    let (column_kind, value_kind) = (kind(column)?.0, kind(value)?.0);
    let holds = match value_kind {
        b'b' => true,
        b'u' | b'i' => column_kind != b'b',
        _ => column_kind == b'f',
    };
    if holds {
        return None;
    }
    promote(column, value)
}

/// The type a column of `column` with rows of `shape` widens to for a value of `value` with rows
/// of `value_shape`; `weak`: a Python scalar the column has not refused (see `widened_weak`).
/// `None` when it does not widen: the value fits, no type holds both, or the rows differ.
pub fn widen_to(column: DType, shape: &[usize], value: DType, value_shape: &[usize], weak: bool) -> Option<DType> {
    if shape != value_shape {
        return None;
    }
    if weak {
        widened_weak(column, value)
    } else {
        widened(column, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widens_rows_of_the_same_shape_only() {
        // (column type, its rows, value type, its rows, a Python scalar, the wider type)
        type Case<'a> = (DType, &'a [usize], DType, &'a [usize], bool, Option<DType>);
        let table: [Case<'_>; 6] = [
            (I64, &[], F64, &[], false, Some(F64)),
            (I64, &[], F64, &[], true, Some(F64)),
            (I8, &[], I64, &[], false, Some(I64)),
            (I8, &[], I64, &[], true, None), // a Python int keeps its int8 column
            (I64, &[2], F64, &[3], false, None),
            (I64, &[], F64, &[1], false, None), // an array after a scalar
        ];
        for (column, shape, value, value_shape, weak, want) in table {
            assert_eq!(widen_to(column, shape, value, value_shape, weak), want, "{column:?} <- {value:?} {weak}");
        }
    }
    use DType::*;

    #[test]
    fn promotes_as_numpy() {
        // numpy.promote_types(a, b) for each pair (checked against numpy 2).
        let table = [
            (Bool, I64, Some(I64)),
            (Bool, F32, Some(F32)),
            (I32, I64, Some(I64)),
            (I64, F64, Some(F64)),
            (I64, F32, Some(F64)),
            (I8, F16, Some(F16)),
            (I16, F16, Some(F32)),
            (I32, F16, Some(F64)),
            (U8, I8, Some(I16)),
            (U32, I32, Some(I64)),
            (U64, I64, Some(F64)),
            (U8, I16, Some(I16)),
            (U16, U64, Some(U64)),
            (F32, F64, Some(F64)),
            (Utf8, I64, None),
            (I64, Utf8, None),
        ];
        for (a, b, want) in table {
            assert_eq!(promote(a, b), want, "{a:?} {b:?}");
            assert_eq!(promote(b, a), want, "{b:?} {a:?}");
        }
    }

    #[test]
    fn widens_only_what_does_not_cast_safely() {
        let table = [
            (I64, F64, Some(F64)), // FrozenLake's prob
            (Bool, I64, Some(I64)),
            (I32, I64, Some(I64)),
            (F32, F64, Some(F64)),
            (I64, I32, None),
            (F64, I64, None),
            (F64, Bool, None),
            (I64, I64, None),
            (Utf8, Utf8, None),
            (I64, Utf8, None),
            (Utf8, F64, None),
        ];
        for (column, value, want) in table {
            assert_eq!(widened(column, value), want, "{column:?} <- {value:?}");
        }
    }

    #[test]
    fn python_scalars_widen_by_kind_only() {
        let table = [
            (Bool, I64, Some(I64)),
            (Bool, F64, Some(F64)),
            (I64, F64, Some(F64)),
            (I8, F64, Some(F64)),
            (I8, I64, None), // a Python int that fits int8 stays int8
            (F32, F64, None),
            (F32, I64, None),
            (U8, Bool, None),
            (Utf8, I64, None),
            (I64, Utf8, None),
        ];
        for (column, value, want) in table {
            assert_eq!(widened_weak(column, value), want, "{column:?} <- {value:?}");
        }
    }
}
