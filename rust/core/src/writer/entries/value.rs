//! A value as the core sees it: the bindings look at a Python object once to say what it is
//! (`Value`), and the core decides the column a first value makes (`Value::column`) and whether a
//! later one widens its column (`Value::widening`).

use super::values::{array_column_type, row_shape};
use super::widen::{widen_to, widened_weak};
use crate::DType;

/// What a value is, for the column it makes or widens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Python's own bool, int, float or str: numpy's weak types (see `widen`).
    Scalar(DType),
    /// An array: numpy's, or what numpy made of a list, tuple or number (`kind`, `name`, `shown`:
    /// its dtype's, see `array_column_type`).
    Array { kind: u8, name: String, shown: String, shape: Vec<usize> },
    /// An object array of a batched value (vector infos of strings come so, None where an env
    /// had no entry): the type of what the first env with a value holds and whether it is a str
    /// (`None`: no env has one).
    Objects { shape: Vec<usize>, first: Option<(String, bool)> },
    /// A batched value numpy makes no array of: its type and numpy's error.
    NotOverEnvs { type_name: String, error: String },
    /// A value of a type no column takes.
    Unsupported(String),
}

impl Value {
    /// The column type and per-row shape this value gives its column as its first (`rows`: the
    /// env count of a batched value, `None` for one row); why not (a later value may make one).
    pub fn column(&self, rows: Option<usize>) -> Result<(DType, Vec<usize>), String> {
        let unsupported = |type_name: &str| Err(format!("values of type {type_name} are not supported"));
        match self {
            // A scalar is no array over the envs: numpy would make a 0-d array of it.
            Value::Scalar(dtype) => row_shape(rows, &[]).map(|_| (*dtype, vec![])),
            Value::Unsupported(type_name) => unsupported(type_name),
            Value::NotOverEnvs { type_name, error } => {
                Err(format!("{type_name} is not an array over the envs: {error}"))
            }
            Value::Objects { shape, first } => match (row_shape(rows, shape)?, first) {
                (_, None) => Err("no env had a value".into()),
                ([], Some((_, true))) => Ok((DType::Utf8, vec![])),
                (_, Some((type_name, _))) => unsupported(type_name),
            },
            Value::Array { kind, name, shown, shape } => {
                let row_shape = row_shape(rows, shape)?;
                array_column_type(*kind, name, shown, row_shape).map(|dtype| (dtype, row_shape.to_vec()))
            }
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
            Value::Scalar(value) if !refused => Some(*value),
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

    fn array(kind: u8, name: &str, shown: &str, shape: &[usize]) -> Value {
        Value::Array { kind, name: name.into(), shown: shown.into(), shape: shape.to_vec() }
    }

    #[test]
    fn first_values_make_their_columns_or_say_why_not() {
        let err = |why: &str| Err(why.to_string());
        let objects = |shape: &[usize], first: Option<(&str, bool)>| Value::Objects {
            shape: shape.to_vec(),
            first: first.map(|(name, is_str)| (name.to_owned(), is_str)),
        };
        // (what the value is, the env count of a batched value, the column or why not)
        type Column = Result<(DType, Vec<usize>), String>;
        let table: [(Value, Option<usize>, Column); 14] = [
            (Value::Scalar(DType::I64), None, Ok((DType::I64, vec![]))),
            (Value::Scalar(DType::Utf8), Some(4), err("expected one value per env (4), got shape []")),
            (array(b'f', "float32", "<f4", &[2, 3]), None, Ok((DType::F32, vec![2, 3]))),
            (array(b'f', "float32", "<f4", &[4, 3]), Some(4), Ok((DType::F32, vec![3]))),
            (array(b'f', "float32", "<f4", &[3]), Some(4), err("expected one value per env (4), got shape [3]")),
            (array(b'c', "complex64", "<c8", &[]), None, err("dtype <c8 is not supported")),
            (array(b'U', "str96", "<U3", &[4]), Some(4), Ok((DType::Utf8, vec![]))),
            (objects(&[4], Some(("str", true))), Some(4), Ok((DType::Utf8, vec![]))),
            (objects(&[4, 2], Some(("str", true))), Some(4), err("values of type str are not supported")),
            (objects(&[4], Some(("dict", false))), Some(4), err("values of type dict are not supported")),
            (objects(&[4], None), Some(4), err("no env had a value")),
            (objects(&[], None), Some(4), err("expected one value per env (4), got shape []")),
            (
                Value::NotOverEnvs { type_name: "list".into(), error: "ragged".into() },
                Some(4),
                err("list is not an array over the envs: ragged"),
            ),
            (Value::Unsupported("set".into()), None, err("values of type set are not supported")),
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
        type Case<'a> = (Value, Option<usize>, bool, DType, &'a [usize], Option<(DType, Vec<usize>)>);
        let table: [Case<'_>; 8] = [
            (Value::Scalar(F64), None, false, I64, &[], Some((F64, vec![]))),
            (Value::Scalar(I64), None, false, I8, &[], None), // a Python int keeps its int8 column
            (Value::Scalar(I64), None, true, I8, &[], Some((I64, vec![]))), // unless it did not fit
            (Value::Scalar(Bool), None, false, I64, &[], None),
            (Value::Scalar(F64), Some(2), false, I64, &[], None), // no array over the envs
            (array(b'f', "float64", "<f8", &[2]), Some(2), false, I64, &[], Some((F64, vec![]))),
            (array(b'f', "float64", "<f8", &[3]), None, false, I64, &[2], None), // other rows
            (Value::Unsupported("set".into()), None, true, I64, &[], None),
        ];
        for (value, rows, refused, dtype, shape, want) in table {
            assert_eq!(value.widening(dtype, shape, rows, refused), want, "{value:?} {rows:?} {refused}");
        }
    }
}
