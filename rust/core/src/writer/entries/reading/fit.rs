//! Whether a value read once fits a column, and its bytes there: how the value is read
//! (`Fit::reading`), a number or an array's items put into the column's type, and a discrete
//! space's bounds checked on the bytes, however they came (`Fit::put`). A host's value is read
//! as `reading` says (an `Input`, see `entries::reading`) and handed to `put`.

use super::bounds::IntBounds;
use super::cast::cast_items;
use super::value::{Array, Input, Number};
use super::values::{check_shape, put_scalar, scalar_read, Misfit, Scalar, ScalarRead};
use super::widen::make;
use crate::writer::entries::collect::{Collector, Src};
use crate::{ColumnSpec, DType, Result};

/// A column's values as they are fitted: its type, its rows' shape, a discrete space's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bounds: Option<IntBounds>,
}

/// How a value is read for a column (see `Fit::reading`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// As str rows (one str, or a sequence of one per env).
    Strs,
    /// As one number: a one-row value of a column of scalars.
    Number,
    /// As an array (numpy makes one of a list, tuple or number).
    Array,
}

impl Fit {
    pub fn of(spec: &ColumnSpec) -> Result<Self> {
        let shape = spec.shape.iter().map(|&d| d as usize).collect();
        Ok(Fit { dtype: spec.dtype()?, shape, bounds: None })
    }

    /// How a value for this column is read (`rows`: the env count of a batched value, `None`
    /// for one row): str columns take strs, a one-row value of a scalar column is a number,
    /// anything else an array.
    // Inlined into the bindings' step path (a call per value), as `check_bounds`.
    #[inline]
    pub fn reading(&self, rows: Option<usize>) -> Reading {
        match (self.dtype, rows, self.shape.is_empty()) {
            (DType::Utf8, _, _) => Reading::Strs,
            (_, None, true) => Reading::Number,
            _ => Reading::Array,
        }
    }

    /// `number` as a value of this (scalar) column, appended to `out`: read as the column
    /// reads numbers (see `scalar_read`); why not.
    pub fn number(&self, number: Number, out: &mut Vec<u8>) -> std::result::Result<(), Misfit> {
        let read = match scalar_read(self.dtype, number.is_float) {
            ScalarRead::Float => number.float.map(Scalar::Float),
            ScalarRead::Int => number.int.map(Scalar::Int),
            ScalarRead::Refused(what) => return Err(Misfit::Wrong(what)),
        };
        put_scalar(self.dtype, read, out)
    }

    /// The bytes of `input` as rows of this column (`rows`: the env count of a batched value,
    /// `None` for one row), within its bounds; why not.
    pub fn put<K>(
        &self,
        coll: &mut Collector<K>,
        rows: Option<usize>,
        input: &Input,
    ) -> std::result::Result<Src, Misfit> {
        let src = match input {
            Input::Rows(src) | Input::Strs(src) => *src,
            Input::Number(number, _) => {
                let mut fits = Ok(());
                let src = coll.own_with(|out| fits = self.number(*number, out));
                fits.map(|()| src)?
            }
            Input::Array(array) => self.items(coll, rows, array).map_err(Misfit::Value)?,
            Input::Refused(why) => return Err(Misfit::Value(why.clone())),
            _ => return Err(Misfit::Value("a value read for no column".into())),
        };
        self.check_bounds(coll.slice(src), rows).map_err(Misfit::Value)?;
        Ok(src)
    }

    /// The bytes of an array's items as rows of this column: the items themselves when their
    /// dtype is the column's, else cast (see `cast_items`); why not (another shape, a cast
    /// that would change a value).
    fn items<K>(
        &self,
        coll: &mut Collector<K>,
        rows: Option<usize>,
        array: &Array,
    ) -> std::result::Result<Src, String> {
        check_shape(rows, &array.shape, &self.shape)?;
        if make(array.kind, array.itemsize) == Some(self.dtype) {
            return Ok(array.data);
        }
        let mut cast = Ok(());
        let src = coll.own_from(array.data, |data, out| {
            cast = cast_items(array.kind, array.itemsize, &array.shown, self.dtype, data, out)
        });
        cast.map(|()| src)
    }

    /// Whether the rows in `data` lie within a discrete space's bounds, when the column has
    /// them (`rows`: batched, which the message names); why not.
    #[inline]
    pub fn check_bounds(&self, data: &[u8], rows: Option<usize>) -> std::result::Result<(), String> {
        let Some(bounds) = &self.bounds else { return Ok(()) };
        bounds.check(self.dtype, data, self.shape.iter().product(), rows.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::entries::reading::value::Like;

    fn fit(dtype: DType, shape: &[usize]) -> Fit {
        Fit { dtype, shape: shape.to_vec(), bounds: None }
    }

    #[test]
    fn values_are_read_as_their_column_takes_them() {
        use Reading::*;
        // (the column's type and rows, the env count of a batched value, how it is read)
        let table: [(DType, &[usize], Option<usize>, Reading); 6] = [
            (DType::Utf8, &[], None, Strs),
            (DType::Utf8, &[], Some(4), Strs),
            (DType::F32, &[], None, Number),
            (DType::F32, &[], Some(4), Array),
            (DType::I64, &[2], None, Array),
            (DType::Bool, &[2], Some(4), Array),
        ];
        for (dtype, shape, rows, want) in table {
            assert_eq!(fit(dtype, shape).reading(rows), want, "{dtype:?} {shape:?} {rows:?}");
        }
    }

    #[test]
    fn numbers_fit_as_their_column_reads_them() {
        let int = |v: i128| Number { int: Some(v), float: Some(v as f64), is_float: false };
        let float = |v: f64| Number { int: None, float: Some(v), is_float: true };
        let wrong = |what| Err(Misfit::Wrong(what));
        type Case<'a> = (DType, Number, std::result::Result<&'a [u8], Misfit>);
        let table: [Case<'_>; 8] = [
            (DType::F32, int(1), Ok(&[0, 0, 0x80, 0x3f])),
            (DType::F64, float(0.5), Ok(&[0, 0, 0, 0, 0, 0, 0xe0, 0x3f])),
            (DType::Bool, int(1), Ok(&[1])),
            (DType::Bool, float(1.0), wrong("bool")), // a float reads as no integer
            (DType::I8, float(1.0), wrong("integer; floats do not cast safely to integers")),
            (DType::I8, int(-1), Ok(&[0xff])),
            (DType::U8, int(256), Err(Misfit::Value("value 256 is out of range for uint8".into()))),
            // An int beyond i128 reads only as a float: no integer column takes it.
            (DType::I64, Number { int: None, float: Some(1e60), is_float: false }, wrong("integer")),
        ];
        for (dtype, number, want) in table {
            let mut out = Vec::new();
            let got = fit(dtype, &[]).number(number, &mut out).map(|()| out.as_slice());
            assert_eq!(got, want, "{dtype:?} {number:?}");
        }
    }

    #[test]
    fn arrays_fit_their_rows_as_they_are_or_cast() {
        let f64s: Vec<u8> = [1.5f64, -2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let i64s: Vec<u8> = [3i64, 300].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let f32s: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        // (column type and rows, env count, dtype (kind, size, text), shape, items, bytes or why)
        type Case<'a> = (
            DType,
            &'a [usize],
            Option<usize>,
            (u8, usize, &'a str),
            &'a [usize],
            &'a [u8],
            std::result::Result<Vec<u8>, &'a str>,
        );
        let table: [Case<'_>; 6] = [
            (DType::F64, &[], Some(2), (b'f', 8, ""), &[2], &f64s, Ok(f64s.clone())),
            (DType::F32, &[2], None, (b'f', 8, "<f8"), &[2], &f64s, Ok(f32s)),
            (DType::F64, &[], Some(3), (b'f', 8, ""), &[2], &f64s, Err("expected shape (3,), got (2,)")),
            (DType::I64, &[2], None, (b'i', 8, ">i8"), &[2], &i64s, Ok(i64s.clone())), // made native
            (
                DType::U8,
                &[],
                Some(2),
                (b'i', 8, "<i8"),
                &[2],
                &i64s,
                Err("expected dtype uint8, got <i8 with values it does not hold"),
            ),
            (
                DType::I64,
                &[2],
                None,
                (b'f', 8, "<f8"),
                &[2],
                &f64s,
                Err("expected dtype int64, got <f8 which does not cast safely"),
            ),
        ];
        for (dtype, shape, rows, (kind, itemsize, shown), value_shape, bytes, want) in table {
            let mut coll = Collector::<()>::default();
            let data = coll.own(bytes);
            let array = Array { kind, itemsize, shown: shown.into(), shape: value_shape.to_vec(), data };
            let got = fit(dtype, shape).put(&mut coll, rows, &Input::Array(array)).map(|src| coll.slice(src).to_vec());
            assert_eq!(got, want.map_err(|why| Misfit::Value(why.to_owned())), "{dtype:?} {shape:?} {shown}");
        }
    }

    #[test]
    fn inputs_read_for_their_column_are_put_or_refused() {
        let mut column = fit(DType::I64, &[]);
        column.bounds = Some(IntBounds { low: vec![0], high: vec![2], space: "Discrete(3)".into() });
        let number = |int, float, is_float| Input::Number(Number { int, float, is_float }, Like::Other);
        let mut coll = Collector::<()>::default();
        let two = coll.own(&2i64.to_le_bytes());
        // (the value as read, its bytes or why not)
        let table: [(Input, std::result::Result<&[u8], Misfit>); 6] = [
            (Input::Rows(two), Ok(&[2, 0, 0, 0, 0, 0, 0, 0])),
            (number(Some(1), Some(1.0), false), Ok(&[1, 0, 0, 0, 0, 0, 0, 0])),
            (
                number(Some(3), Some(3.0), false),
                Err(Misfit::Value("value 3 is not in Discrete(3) (it takes 0 to 2)".into())),
            ),
            (number(None, Some(1.5), false), Err(Misfit::Wrong("integer"))), // a Decimal
            (
                Input::Refused("expected numbers, got set".into()),
                Err(Misfit::Value("expected numbers, got set".into())),
            ),
            (Input::Str, Err(Misfit::Value("a value read for no column".into()))),
        ];
        for (input, want) in table {
            let got = column.put(&mut coll, None, &input).map(|src| coll.slice(src).to_vec());
            assert_eq!(got, want.map(<[u8]>::to_vec), "{input:?}");
        }
    }

    #[test]
    fn bounds_are_checked_when_the_column_has_them() {
        let mut column = fit(DType::I64, &[]);
        let data: Vec<u8> = [0i64, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(column.check_bounds(&data, Some(2)), Ok(()));
        column.bounds = Some(IntBounds { low: vec![0], high: vec![2], space: "Discrete(3)".into() });
        let why = "env 1: value 3 is not in Discrete(3) (it takes 0 to 2)";
        assert_eq!(column.check_bounds(&data, Some(2)), Err(why.to_string()));
        assert_eq!(column.check_bounds(&data[..8], None), Ok(()));
    }
}
