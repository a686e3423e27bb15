//! A value as the bindings read it, once (`Input`): what a Python object is and the data it
//! carries. The core decides everything after: the column a first value makes
//! (`Input::column`), whether a later one widens its column (`Input::widening`), and its bytes in
//! a column, or why it does not fit (`Fit::put`).

use super::values::{array_column_type, ints_fit, row_shape};
use super::widen::{widen_to, widened_weak};
use crate::writer::entries::collect::Src;
use crate::DType;

/// A number as read once: as an integer and as a float, each where the value reads so;
/// `is_float`: it is a Python float (which never goes into an integer column).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number {
    pub int: Option<i128>,
    pub float: Option<f64>,
    pub is_float: bool,
}

/// What a number is, for the column it makes or widens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Like {
    /// Python's own bool, int or float: numpy's weak types (`Bool`, `I64`, `F64`; see `widen`).
    Weak(DType),
    /// A numpy scalar of the column's own type (every value of it fits).
    Typed(DType),
    /// Another int (an IntEnum): as numpy makes an array of it, an int64, else a uint64.
    Int,
    /// Another float (a float subclass): a float64.
    Float,
    /// Neither (a Decimal, a str): it makes and widens no column, but a scalar column takes it
    /// where it reads as a number (`__index__`, `__float__`).
    Other,
}

/// An array's items in C order and native byte order: numpy's kind character, item size and
/// text (`shown`, left empty when the dtype is the column's own), its shape and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Array {
    pub kind: u8,
    pub itemsize: usize,
    pub shown: String,
    pub shape: Vec<usize>,
    pub data: Src,
}

/// A value as read once. Read for a column: `Rows`, `Number`, `Array`, `Strs` or `Refused`, as
/// the column reads values (`Fit::reading`). Read for the column it would make: `Number` (of
/// Python's own bool, int, float), `Str`, `Array`, `Objects`, `NotOverEnvs` or `Unsupported`.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Bytes that are the column's rows as they are (an ndarray of exactly its dtype and rows).
    Rows(Src),
    /// A number, one row.
    Number(Number, Like),
    /// A str, one row.
    Str,
    /// An array: numpy's, or what numpy made of a list, tuple or number.
    Array(Array),
    /// str rows, each a `u32` length and UTF-8 bytes.
    Strs(Src),
    /// A value the column's reading refused, and why (not str rows, no array of numbers).
    Refused(String),
    /// An object array of a batched value (vector infos of strings come so, None where an env
    /// had no entry): the type of what the first env with a value holds and whether it is a str
    /// (`None`: no env has one).
    Objects { shape: Vec<usize>, first: Option<(String, bool)> },
    /// A batched value numpy makes no array of: its type and numpy's error.
    NotOverEnvs { type_name: String, error: String },
    /// A value of a type no column takes.
    Unsupported(String),
}

impl Like {
    /// The column type of a number that is `self`, read as `number`.
    fn dtype(self, number: &Number) -> Option<DType> {
        match self {
            Like::Weak(dtype) | Like::Typed(dtype) => Some(dtype),
            Like::Int => match number.int? {
                v if ints_fit(DType::I64, v, v) => Some(DType::I64),
                v if ints_fit(DType::U64, v, v) => Some(DType::U64),
                _ => None,
            },
            Like::Float => Some(DType::F64),
            Like::Other => None,
        }
    }
}

impl Input {
    /// The column type and per-row shape this value gives its column as its first (`rows`: the
    /// env count of a batched value, `None` for one row); why not (a later value may make one).
    pub fn column(&self, rows: Option<usize>) -> Result<(DType, Vec<usize>), String> {
        let unsupported = |type_name: &str| Err(format!("values of type {type_name} are not supported"));
        // A scalar is no array over the envs: numpy would make a 0-d array of it.
        let scalar = |dtype: DType| row_shape(rows, &[]).map(|_| (dtype, vec![]));
        match self {
            Input::Number(number, like) => like.dtype(number).map_or_else(|| unsupported("this number"), scalar),
            Input::Str => scalar(DType::Utf8),
            Input::Unsupported(type_name) => unsupported(type_name),
            Input::NotOverEnvs { type_name, error } => {
                Err(format!("{type_name} is not an array over the envs: {error}"))
            }
            Input::Objects { shape, first } => match (row_shape(rows, shape)?, first) {
                (_, None) => Err("no env had a value".into()),
                ([], Some((_, true))) => Ok((DType::Utf8, vec![])),
                (_, Some((type_name, _))) => unsupported(type_name),
            },
            Input::Array(Array { kind, itemsize, shown, shape, .. }) => {
                let row_shape = row_shape(rows, shape)?;
                array_column_type(*kind, *itemsize, shown, row_shape).map(|dtype| (dtype, row_shape.to_vec()))
            }
            Input::Refused(why) => Err(why.clone()),
            Input::Rows(_) | Input::Strs(_) => Err("rows read for their column".into()), // never a first value
        }
    }

    /// The type and rows of the column made to continue a column of `dtype` with rows of `shape`
    /// for this value; `None` when it does not widen (see `widen_to`). `refused`: the value did not
    /// fit the column, so a Python scalar widens it as its numpy type would (else by its kind only).
    pub fn widening(
        &self,
        dtype: DType,
        shape: &[usize],
        rows: Option<usize>,
        refused: bool,
    ) -> Option<(DType, Vec<usize>)> {
        let weak = match self {
            // Read for their column: rows as they are and str rows never widen it.
            Input::Rows(_) | Input::Strs(_) | Input::Refused(_) => return None,
            Input::Number(_, Like::Weak(value)) if !refused => Some(*value),
            Input::Str if !refused => Some(DType::Utf8),
            _ => None,
        };
        if weak.is_some_and(|value| widened_weak(dtype, value).is_none()) {
            return None;
        }
        let (value, value_shape) = self.column(rows).ok()?;
        widen_to(dtype, shape, value, &value_shape, weak.is_some()).map(|wider| (wider, value_shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(kind: u8, itemsize: usize, shown: &str, shape: &[usize]) -> Input {
        let data = Src::Own(0, 0);
        Input::Array(Array { kind, itemsize, shown: shown.into(), shape: shape.to_vec(), data })
    }

    fn int(v: i128, like: Like) -> Input {
        Input::Number(Number { int: Some(v), float: Some(v as f64), is_float: false }, like)
    }

    fn float(v: f64, like: Like) -> Input {
        Input::Number(Number { int: None, float: Some(v), is_float: like != Like::Other }, like)
    }

    #[test]
    fn first_values_make_their_columns_or_say_why_not() {
        let err = |why: &str| Err(why.to_string());
        let objects = |shape: &[usize], first: Option<(&str, bool)>| Input::Objects {
            shape: shape.to_vec(),
            first: first.map(|(name, is_str)| (name.to_owned(), is_str)),
        };
        // (what the value is, the env count of a batched value, the column or why not)
        type Column = Result<(DType, Vec<usize>), String>;
        let table: [(Input, Option<usize>, Column); 16] = [
            (int(1, Like::Weak(DType::I64)), None, Ok((DType::I64, vec![]))),
            (Input::Str, Some(4), err("expected one value per env (4), got shape []")),
            (Input::Str, None, Ok((DType::Utf8, vec![]))),
            (array(b'f', 4, "<f4", &[2, 3]), None, Ok((DType::F32, vec![2, 3]))),
            (array(b'f', 4, "<f4", &[4, 3]), Some(4), Ok((DType::F32, vec![3]))),
            (array(b'f', 4, "<f4", &[3]), Some(4), err("expected one value per env (4), got shape [3]")),
            (array(b'c', 8, "<c8", &[]), None, err("dtype <c8 is not supported")),
            (array(b'U', 12, "<U3", &[4]), Some(4), Ok((DType::Utf8, vec![]))),
            (objects(&[4], Some(("str", true))), Some(4), Ok((DType::Utf8, vec![]))),
            (objects(&[4, 2], Some(("str", true))), Some(4), err("values of type str are not supported")),
            (objects(&[4], Some(("dict", false))), Some(4), err("values of type dict are not supported")),
            (objects(&[4], None), Some(4), err("no env had a value")),
            (objects(&[], None), Some(4), err("expected one value per env (4), got shape []")),
            (
                Input::NotOverEnvs { type_name: "list".into(), error: "ragged".into() },
                Some(4),
                err("list is not an array over the envs: ragged"),
            ),
            (Input::Unsupported("set".into()), None, err("values of type set are not supported")),
            (Input::Refused("expected numbers, got set".into()), None, err("expected numbers, got set")),
        ];
        for (value, rows, want) in table {
            assert_eq!(value.column(rows), want, "{value:?} {rows:?}");
        }
    }

    #[test]
    fn later_values_widen_their_column_by_numpy_rules() {
        use DType::*;
        // (the value, its env count, whether the column refused it, the column's type and rows,
        // the wider column)
        type Case<'a> = (Input, Option<usize>, bool, DType, &'a [usize], Option<(DType, Vec<usize>)>);
        let table: [Case<'_>; 10] = [
            (float(0.5, Like::Weak(F64)), None, false, I64, &[], Some((F64, vec![]))),
            (int(1, Like::Weak(I64)), None, false, I8, &[], None), // a Python int keeps its int8 column
            (int(1, Like::Weak(I64)), None, true, I8, &[], Some((I64, vec![]))), // unless it did not fit
            (int(1, Like::Weak(Bool)), None, false, I64, &[], None),
            (float(0.5, Like::Weak(F64)), Some(2), false, I64, &[], None), // no array over the envs
            (array(b'f', 8, "<f8", &[2]), Some(2), false, I64, &[], Some((F64, vec![]))),
            (array(b'f', 8, "<f8", &[3]), None, false, I64, &[2], None), // other rows
            (Input::Unsupported("set".into()), None, true, I64, &[], None),
            (Input::Str, None, false, F64, &[], None), // no type holds a str and a number
            (Input::Rows(Src::Own(0, 8)), None, true, I64, &[], None),
        ];
        for (value, rows, refused, dtype, shape, want) in table {
            assert_eq!(value.widening(dtype, shape, rows, refused), want, "{value:?} {rows:?} {refused}");
        }
    }

    /// The odd Python values, as the bindings read them for a column of scalars: an IntEnum is
    /// an int as numpy makes an array of it (int64, else uint64, else none), a float subclass a
    /// float64, a Decimal or a str none at all (they widen nothing: a column that takes them as
    /// numbers still does), a numpy scalar its own type.
    #[test]
    fn odd_numbers_widen_as_numpy_would_make_arrays_of_them() {
        use DType::*;
        // (the value read, the column's type, the wider column)
        let table: [(Input, DType, Option<DType>); 10] = [
            (int(5, Like::Int), I8, Some(I64)),        // IntEnum: as numpy's int64 0-d array
            (int(1 << 63, Like::Int), I64, Some(F64)), // beyond int64: numpy's uint64
            (int(1 << 64, Like::Int), I64, None),      // beyond uint64: numpy's object array
            (int(300, Like::Int), I64, None),
            (float(0.5, Like::Float), F32, Some(F64)), // a float subclass: float64, not weak
            (float(0.5, Like::Weak(F64)), F32, None),  // Python's float is weak
            (float(1.5, Like::Other), F32, None),      // a Decimal
            (Input::Number(Number { int: None, float: None, is_float: false }, Like::Other), F64, None), // a str
            (int(1, Like::Typed(U8)), U8, None),       // a numpy scalar of the column's type
            (int(1, Like::Weak(Bool)), Bool, None),    // a bool is no int
        ];
        for (value, dtype, want) in table {
            let got = value.widening(dtype, &[], None, false).map(|(wider, _)| wider);
            assert_eq!(got, want, "{value:?} into {dtype:?}");
        }
    }
}
