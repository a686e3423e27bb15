//! A host's value read once as an `Input`: for a column, the way its `Fit` says (str rows, a
//! number, or an array: borrowed when it is exactly the column's rows), or for the column it
//! would make (`read`); a value put into a column (`put`), and why it does not fit, in words
//! (`why`). The host (`Object`: a Python object in the bindings) answers only primitive
//! questions (is it exactly a float, an ndarray, ...) and makes numpy's conversions; which
//! question is asked when, and what the answers make, is decided here.
//!
//! Beside it, what it reads into: what a value is (`value`), whether a value read once fits a
//! column of fixed type (`fit`), a value's bytes (`values`, with the discrete spaces' `bounds`),
//! the casts that keep every value (`cast`) and the wider type a column continues with
//! (`widen`).

pub mod bounds;
pub mod cast;
pub mod fit;
pub mod value;
pub mod values;
pub mod widen;

use fit::{Fit, Reading};
use value::{Array, Input, Like, Number};
use values::{first_present, present, put_str, scalar_wrong, shape_text, Misfit};

use super::collect::{Collector, Src};
use crate::host::HostValues;
use crate::DType;

/// What a value may be, as `Object::is` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Exactly Python's float (no subclass).
    ExactFloat,
    /// A bool (Python's bool has no subclass).
    Bool,
    /// Exactly Python's int (no subclass, no bool).
    ExactInt,
    /// An int, a subclass (an IntEnum) or a bool included.
    Int,
    /// A float, a subclass included (numpy's float64 is one).
    Float,
    /// A str, a subclass included (numpy's str_ is one).
    Str,
    None,
    Dict,
    /// A list or tuple.
    Sequence,
    /// A numpy scalar (numpy's `generic`).
    NumpyScalar,
}

/// What the reading asks of the host about its values, beside the primitive questions of
/// `HostValues` (its length, items, type and repr): `C` is the host's column (the reading passes it back where a conversion needs
/// it), `K` the owners the collector keeps alive.
pub trait Object<C, K>: HostValues {
    fn is(&self, value: &Self::Value, class: Class) -> Result<bool, Self::Error>;
    /// Whether `value` is a numpy scalar of `column`'s own type.
    fn is_scalar_of(&self, value: &Self::Value, column: &C) -> bool;
    /// An ndarray's (a subclass included) dtype kind character and dimension count; `None` for
    /// any other value.
    fn array_kind(&self, value: &Self::Value) -> Option<(u8, usize)>;
    /// An ndarray's shape.
    fn shape(&self, value: &Self::Value) -> Vec<usize>;
    /// An ndarray's items in C order and native byte order, borrowed into `coll` (a copy of them
    /// where they are not so); `shown` may be left empty when its dtype is `column`'s own.
    fn array(&self, value: &Self::Value, column: Option<&C>, coll: &mut Collector<K>) -> Result<Array, Self::Error>;
    /// `value`'s bytes as the rows of `column` as they are (`rows`: the env count of a batched
    /// value), borrowed, when it is exactly them: an ndarray of the column's dtype and rows.
    fn rows(&self, value: &Self::Value, column: &C, rows: Option<usize>, coll: &mut Collector<K>) -> Option<Src>;
    /// `value`'s bytes, borrowed, when it is exactly a C-contiguous bool array of `n` items.
    fn bool_rows(&self, value: &Self::Value, n: usize, coll: &mut Collector<K>) -> Option<Src>;
    /// numpy's truth of each of its items, in C order.
    fn truths(&self, value: &Self::Value) -> Result<Vec<bool>, Self::Error>;
    /// What numpy makes of `value` (`numpy.asarray`).
    fn asarray(&self, value: &Self::Value) -> Result<Self::Value, Self::Error>;
    /// numpy's zeros of an array's dtype and shape (`numpy.zeros_like`).
    fn zeros_like(&self, value: &Self::Value) -> Result<Self::Value, Self::Error>;
    /// numpy's stack of `rows` (`numpy.stack`); `None` when they do not stack.
    fn stack(&self, rows: Vec<Self::Value>) -> Option<Self::Value>;
    /// `value` as an integer, where it reads as one (`__index__`).
    fn int(&self, value: &Self::Value) -> Option<i128>;
    /// `value` as a float, where it reads as one (`__float__`).
    fn float(&self, value: &Self::Value) -> Option<f64>;
    /// A str's text (`None`: no str); an error where it is no UTF-8 (a lone surrogate).
    fn text<'v>(&self, value: &'v Self::Value) -> Result<Option<&'v str>, Self::Error>;
}

/// A column as the reading needs it: the host's own, and how values fit it.
pub type Col<'c, C> = (&'c C, &'c Fit);

/// `value` read once: for `column` as its `Fit` reads values (`rows`: the env count of a batched
/// value, `None` for one row), or for the column it would make (`None`; `mask`: which envs
/// have it). Arrays are borrowed into `coll`.
pub fn read<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    column: Option<Col<'_, C>>,
    (rows, mask): (Option<usize>, Option<Src>),
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    let Some(column) = column else { return first(o, value, rows, mask, coll) };
    if let Some(src) = o.rows(value, column.0, rows, coll) {
        return Ok(Input::Rows(src));
    }
    read_for(o, value, column, rows, coll)
}

/// `value` read as `read` does, stacked first where `stacks` (a value of the env's: an info
/// entry, a frame) and it is an object array of per-env rows (see `stacked_rows`); a value of
/// the user's own is read as it is.
pub fn read_stacked<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    column: Option<Col<'_, C>>,
    (rows, mask, stacks): (Option<usize>, Option<Src>, bool),
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    let stacked = if stacks { stacked_rows(o, value, rows, mask.map(|m| coll.slice(m)))? } else { None };
    read(o, stacked.as_ref().unwrap_or(value), column, (rows, mask), coll)
}

/// `value`'s bytes in `column` (see `read`), or why it does not fit, in words.
#[inline]
pub fn put<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    (column, fit): Col<'_, C>,
    rows: Option<usize>,
    coll: &mut Collector<K>,
) -> Result<Result<Src, String>, O::Error> {
    let misfit = |misfit| why(o, value, fit.dtype, misfit);
    // The usual value (every step's arrays) without an `Input`: its bytes are the rows.
    if let Some(src) = o.rows(value, column, rows, coll) {
        if fit.bounds.is_none() {
            return Ok(Ok(src)); // most columns have no bounds: their rows need no look
        }
        return Ok(fit.check_bounds(coll.slice(src), rows).map(|()| src).map_err(|why| misfit(Misfit::Value(why))));
    }
    let input = read_for(o, value, (column, fit), rows, coll)?;
    Ok(fit.put(coll, rows, &input).map_err(misfit))
}

/// `misfit` of `value` into a column of `dtype`, in words: a value that is not what the column
/// takes is named by its type and text.
pub fn why<O: Object<C, K>, C, K>(o: &O, value: &O::Value, dtype: DType, misfit: Misfit) -> String {
    match misfit {
        Misfit::Wrong(what) => scalar_wrong(dtype, what, &o.type_name(value), o.repr(value)),
        Misfit::Value(why) => why,
    }
}

/// A boolean mask over `n` envs as one byte per env: borrowed when it is already a contiguous
/// bool array of that length (as masks come: gymnasium's `_key` arrays, reset masks), else
/// numpy's truth of each item; why not (`what` names it).
pub fn mask<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    n: usize,
    what: &str,
    coll: &mut Collector<K>,
) -> Result<Result<Src, String>, O::Error> {
    if let Some(src) = o.bool_rows(value, n, coll) {
        return Ok(Ok(src));
    }
    let truths = o.truths(value)?;
    if truths.len() != n {
        return Ok(Err(format!("{what} has {} entries for {n} envs", truths.len())));
    }
    Ok(Ok(coll.own_with(|out| out.extend(truths.iter().map(|&b| u8::from(b))))))
}

/// Whether `value` is a list, tuple, ndarray or numpy scalar: what numpy makes arrays of (the
/// same type may fit where an earlier value did not).
pub fn arrayish<O: Object<C, K>, C, K>(o: &O, value: &O::Value) -> Result<bool, O::Error> {
    Ok(o.is(value, Class::Sequence)? || o.array_kind(value).is_some() || o.is(value, Class::NumpyScalar)?)
}

/// `value` read for `column` as its `Fit` reads values, once it is known not to be the
/// column's exact rows.
fn read_for<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    (column, fit): Col<'_, C>,
    rows: Option<usize>,
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    match (fit.reading(rows), o.array_kind(value)) {
        (Reading::Strs, _) => strings(o, value, rows, coll),
        (_, Some(_)) => Ok(Input::Array(o.array(value, Some(column), coll)?)),
        (Reading::Number, None) => number(o, value, (column, fit), coll),
        (Reading::Array, None) => as_array(o, value, (column, fit), rows, coll),
    }
}

/// What numpy makes of a list, tuple or number for a column of arrays; refused unless numbers.
fn as_array<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    (column, fit): Col<'_, C>,
    rows: Option<usize>,
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    let array = match o.asarray(value) {
        Ok(array) => array,
        Err(e) => {
            let expected = shape_text(rows, &fit.shape);
            let why = format!("expected an array of shape {expected}, got {}: {e}", o.type_name(value));
            return Ok(Input::Refused(why));
        }
    };
    if o.array_kind(&array).is_some_and(|(kind, _)| kind == b'O') {
        return Ok(Input::Refused(format!("expected numbers, got {}", o.type_name(value))));
    }
    Ok(Input::Array(o.array(&array, Some(column), coll)?))
}

/// Python's own bool, int or float, read as a number (numpy's weak types); `None` for another
/// value.
fn weak<O: Object<C, K>, C, K>(o: &O, value: &O::Value) -> Result<Option<Input>, O::Error> {
    let dtype = match () {
        () if o.is(value, Class::ExactFloat)? => DType::F64,
        () if o.is(value, Class::Bool)? => DType::Bool,
        () if o.is(value, Class::ExactInt)? => DType::I64,
        () => return Ok(None),
    };
    let int = if dtype == DType::F64 { None } else { o.int(value) };
    let float = int.map(|v| v as f64).or_else(|| o.float(value));
    Ok(Some(Input::Number(Number { int, float, is_float: dtype == DType::F64 }, Like::Weak(dtype))))
}

/// A one-row value of a scalar column that is no array: a number, read once; a numpy scalar of
/// the column's own type read as a number (every value of it fits), another as numpy's 0-d
/// array of it; another object (an IntEnum, a Decimal) as an integer and as a float where it
/// reads so. `Like` is the value's class, for the column it makes or widens.
fn number<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    (column, fit): Col<'_, C>,
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    if let Some(input) = weak(o, value)? {
        return Ok(input);
    }
    if o.is_scalar_of(value, column) {
        // A float column's scalar has no exact integer: read as the column reads.
        let number = match fit.dtype {
            DType::F16 | DType::F32 | DType::F64 => {
                o.float(value).map(|f| Number { int: None, float: Some(f), is_float: false })
            }
            _ => o.int(value).map(|i| Number { int: Some(i), float: None, is_float: false }),
        };
        if let Some(number) = number {
            return Ok(Input::Number(number, Like::Typed(fit.dtype)));
        }
    }
    if o.is(value, Class::NumpyScalar)? {
        return Ok(Input::Array(o.array(&o.asarray(value)?, Some(column), coll)?));
    }
    let (int, float) = (o.int(value), o.float(value));
    let like = match () {
        () if o.is(value, Class::Int)? => Like::Int,
        () if o.is(value, Class::Float)? => Like::Float,
        () => Like::Other,
    };
    Ok(Input::Number(Number { int, float, is_float: like == Like::Float }, like))
}

/// Str rows as `u32 len` + UTF-8 bytes, written straight into the collector as each item is
/// read; batched values are any sequence of str (or None where a mask says the row is missing,
/// which then reads as an empty string).
fn strings<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    rows: Option<usize>,
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    let one = |v: &O::Value, out: &mut Vec<u8>| -> Result<Result<(), String>, O::Error> {
        let text = match o.text(v)? {
            Some(text) => text,
            None if o.is(v, Class::None)? => "",
            None => return Ok(Err(format!("expected str, got {}", o.type_name(v)))),
        };
        Ok(put_str(text, out))
    };
    let start = coll.bytes.len();
    let fits = match rows {
        None => one(value, &mut coll.bytes)?,
        Some(n) => match o.len(value) {
            None => Err(format!("expected {n} strings, got {}", o.type_name(value))),
            Some(len) if len != n => Err(format!("expected {n} strings, got {len}")),
            Some(_) => {
                let mut fits = Ok(());
                for item in o.items(value)? {
                    fits = one(&item, &mut coll.bytes)?;
                    if fits.is_err() {
                        break;
                    }
                }
                fits
            }
        },
    };
    Ok(fits.map_or_else(Input::Refused, |()| Input::Strs(Src::Own(start, coll.bytes.len() - start))))
}

/// What `value` is for the column it would make: Python's own scalars by their type, arrays by
/// their dtype, anything else by what numpy makes of it (a list, a number: yes; a set, a str:
/// no); `rows`, the env count of a batched value; `mask`, which envs have it.
fn first<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    rows: Option<usize>,
    mask: Option<Src>,
    coll: &mut Collector<K>,
) -> Result<Input, O::Error> {
    if let Some(input) = weak(o, value)? {
        return Ok(input);
    }
    if o.is(value, Class::Str)? {
        return Ok(Input::Str);
    }
    let made;
    let array = match (rows, o.array_kind(value)) {
        (_, Some(_)) => value,
        (Some(_), None) => match o.asarray(value) {
            Ok(array) => {
                made = array;
                &made
            }
            Err(e) => return Ok(Input::NotOverEnvs { type_name: o.type_name(value), error: e.to_string() }),
        },
        (None, None) => {
            let numeric = arrayish(o, value)? || o.is(value, Class::Int)? || o.is(value, Class::Float)?;
            match numeric.then(|| o.asarray(value).ok()).flatten() {
                Some(array) if o.array_kind(&array).is_some_and(|(kind, _)| kind != b'O') => {
                    made = array;
                    &made
                }
                _ => return Ok(Input::Unsupported(o.type_name(value))),
            }
        }
    };
    if o.array_kind(array).is_some_and(|(kind, _)| kind == b'O') && rows.is_some() {
        let shape = o.shape(array);
        let at = first_present(mask.map(|m| coll.slice(m)), shape.first().copied().unwrap_or(0));
        let first = at.map(|i| o.item(array, i)).transpose()?;
        let first = first.map(|item| Ok::<_, O::Error>((o.type_name(&item), o.is(&item, Class::Str)?))).transpose()?;
        return Ok(Input::Objects { shape, first });
    }
    Ok(Input::Array(o.array(array, None, coll)?))
}

/// A vector info of per-env arrays or tuples of numbers (ALE's `seeds`) arrives as an object
/// array: stacked into one numeric array (zeros where `mask` says no value), or `None` when it
/// is not such an array (strings stay as they are) or the value is not batched (`rows`).
/// numpy's `stack` decides the common type of the rows (as it would for the user); rows of
/// different shapes do not stack: then the value stays unsupported, and says so.
pub fn stacked_rows<O: Object<C, K>, C, K>(
    o: &O,
    value: &O::Value,
    rows: Option<usize>,
    mask: Option<&[u8]>,
) -> Result<Option<O::Value>, O::Error> {
    if rows.is_none() || o.array_kind(value) != Some((b'O', 1)) {
        return Ok(None);
    }
    let n = o.shape(value)[0];
    let Some(first) = first_present(mask, n) else { return Ok(None) };
    let first = o.item(value, first)?;
    if o.is(&first, Class::None)? || o.is(&first, Class::Str)? || o.is(&first, Class::Dict)? {
        return Ok(None);
    }
    let Ok(template) = o.asarray(&first) else { return Ok(None) };
    if o.array_kind(&template).is_some_and(|(kind, _)| kind == b'O') {
        return Ok(None);
    }
    let zeros = o.zeros_like(&template)?;
    let rows = (0..n).map(|i| if present(mask, i) { o.item(value, i) } else { Ok(zeros.clone()) });
    Ok(o.stack(rows.collect::<Result<_, _>>()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Python value as the reading sees it.
    #[derive(Debug, Clone, PartialEq)]
    enum V {
        Float(f64),
        /// A float subclass.
        FloatSub(f64),
        Bool(bool),
        Int(i128),
        /// An IntEnum.
        IntSub(i128),
        Str(&'static str),
        None,
        Dict,
        List(Vec<V>),
        /// A numpy scalar: its dtype and value.
        Scalar(DType, f64),
        /// An ndarray: kind, itemsize, shape, and its items (for object arrays).
        Nd(u8, usize, Vec<usize>, Vec<V>),
        /// Anything else (a set, a Decimal reading as a float).
        Other(&'static str, Option<f64>),
    }

    /// The host: its columns are their dtypes.
    struct Host;

    fn nd(kind: u8, itemsize: usize, shape: &[usize]) -> V {
        V::Nd(kind, itemsize, shape.to_vec(), vec![])
    }

    impl Object<DType, ()> for Host {
        fn is(&self, v: &V, class: Class) -> Result<bool, String> {
            Ok(match (class, v) {
                (Class::ExactFloat, V::Float(_)) | (Class::Bool, V::Bool(_)) | (Class::ExactInt, V::Int(_)) => true,
                (Class::Int, V::Int(_) | V::IntSub(_) | V::Bool(_)) => true,
                (Class::Float, V::Float(_) | V::FloatSub(_)) => true,
                (Class::Float, V::Scalar(d, _)) => *d == DType::F64,
                (Class::Str, V::Str(_)) | (Class::None, V::None) | (Class::Dict, V::Dict) => true,
                (Class::Sequence, V::List(_)) | (Class::NumpyScalar, V::Scalar(..)) => true,
                _ => false,
            })
        }
        fn is_scalar_of(&self, v: &V, column: &DType) -> bool {
            matches!(v, V::Scalar(d, _) if d == column)
        }
        fn array_kind(&self, v: &V) -> Option<(u8, usize)> {
            match v {
                V::Nd(kind, _, shape, _) => Some((*kind, shape.len())),
                _ => None,
            }
        }
        fn shape(&self, v: &V) -> Vec<usize> {
            match v {
                V::Nd(_, _, shape, _) => shape.clone(),
                _ => unreachable!(),
            }
        }
        fn array(&self, v: &V, column: Option<&DType>, _: &mut Collector<()>) -> Result<Array, String> {
            let V::Nd(kind, itemsize, shape, _) = v else { return Err("no array".into()) };
            let shown = format!("{}{itemsize}", *kind as char);
            let own = column.is_some_and(|c| widen::make(*kind, *itemsize) == Some(*c));
            let shown = if own { String::new() } else { shown };
            Ok(Array { kind: *kind, itemsize: *itemsize, shown, shape: shape.clone(), data: Src::Own(0, 0) })
        }
        fn rows(&self, v: &V, column: &DType, _: Option<usize>, _: &mut Collector<()>) -> Option<Src> {
            // Exactly the rows: an f32 column's f32 arrays (shapes unchecked here).
            matches!((v, column), (V::Nd(b'f', 4, ..), DType::F32)).then_some(Src::Own(0, 0))
        }
        fn bool_rows(&self, v: &V, n: usize, _: &mut Collector<()>) -> Option<Src> {
            (*v == nd(b'b', 1, &[n])).then_some(Src::Own(0, 0))
        }
        fn truths(&self, v: &V) -> Result<Vec<bool>, String> {
            let truth = |v: &V| self.float(v).map(|f| f != 0.0).ok_or_else(|| "no number".to_string());
            match v {
                V::List(items) => items.iter().map(truth).collect(),
                _ => Ok(vec![truth(v)?]),
            }
        }
        fn asarray(&self, v: &V) -> Result<V, String> {
            Ok(match v {
                V::Nd(..) => v.clone(),
                V::Float(_) | V::FloatSub(_) => nd(b'f', 8, &[]),
                V::Int(_) | V::IntSub(_) => nd(b'i', 8, &[]),
                V::Bool(_) => nd(b'b', 1, &[]),
                V::Scalar(d, _) => nd(if *d == DType::F32 { b'f' } else { b'i' }, d.size().unwrap(), &[]),
                V::List(items) => match items.first().map(|i| self.asarray(i)).transpose()? {
                    // An empty list among the items: ragged, by this fake's convention.
                    _ if items.iter().any(|i| *i == V::List(vec![])) => return Err("ragged".into()),
                    Some(V::Nd(kind, size, shape, _)) => {
                        V::Nd(kind, size, [vec![items.len()], shape].concat(), items.clone())
                    }
                    _ => V::Nd(b'f', 8, vec![0], vec![]),
                },
                _ => V::Nd(b'O', 8, vec![], vec![v.clone()]),
            })
        }
        fn zeros_like(&self, v: &V) -> Result<V, String> {
            Ok(v.clone())
        }
        fn stack(&self, rows: Vec<V>) -> Option<V> {
            self.asarray(&V::List(rows)).ok()
        }
        fn int(&self, v: &V) -> Option<i128> {
            match v {
                V::Int(i) | V::IntSub(i) => Some(*i),
                V::Bool(b) => Some(*b as i128),
                V::Scalar(_, f) if f.fract() == 0.0 => Some(*f as i128),
                _ => None,
            }
        }
        fn float(&self, v: &V) -> Option<f64> {
            match v {
                V::Float(f) | V::FloatSub(f) | V::Scalar(_, f) | V::Other(_, Some(f)) => Some(*f),
                V::Int(i) | V::IntSub(i) => Some(*i as f64),
                _ => None,
            }
        }
        fn text<'v>(&self, v: &'v V) -> Result<Option<&'v str>, String> {
            Ok(match v {
                V::Str(s) => Some(s),
                _ => None,
            })
        }
    }

    impl HostValues for Host {
        type Value = V;
        type Error = String;
        fn len(&self, v: &V) -> Option<usize> {
            match v {
                V::List(items) | V::Nd(_, _, _, items) => Some(items.len()),
                _ => None,
            }
        }
        fn items(&self, v: &V) -> Result<Vec<V>, String> {
            match v {
                V::List(items) | V::Nd(_, _, _, items) => Ok(items.clone()),
                _ => Err("not iterable".into()),
            }
        }
        fn item(&self, v: &V, index: usize) -> Result<V, String> {
            self.items(v)?.get(index).cloned().ok_or_else(|| "index".into())
        }
        fn type_name(&self, v: &V) -> String {
            match v {
                V::Float(_) => "float",
                V::FloatSub(_) => "MyFloat",
                V::Bool(_) => "bool",
                V::Int(_) => "int",
                V::IntSub(_) => "MyEnum",
                V::Str(_) => "str",
                V::None => "NoneType",
                V::Dict => "dict",
                V::List(_) => "list",
                V::Scalar(..) => "numpy.generic",
                V::Nd(..) => "ndarray",
                V::Other(name, _) => name,
            }
            .into()
        }
        fn repr(&self, v: &V) -> String {
            format!("{v:?}")
        }
    }

    fn number(int: Option<i128>, float: Option<f64>, is_float: bool, like: Like) -> Input {
        Input::Number(Number { int, float, is_float }, like)
    }

    fn array(kind: u8, itemsize: usize, shown: &str, shape: &[usize]) -> Input {
        Input::Array(Array { kind, itemsize, shown: shown.into(), shape: shape.to_vec(), data: Src::Own(0, 0) })
    }

    fn fit(dtype: DType, shape: &[usize]) -> Fit {
        Fit { dtype, shape: shape.to_vec(), bounds: None }
    }

    #[test]
    fn values_are_read_as_their_column_reads_them() {
        use DType::*;
        let strs = |len| Input::Strs(Src::Own(0, len));
        let refused = |why: &str| Input::Refused(why.into());
        // (the value, the column's type and rows, the env count of a batched value, what it reads as)
        type Case<'a> = (V, DType, &'a [usize], Option<usize>, Input);
        let table: Vec<Case<'_>> = vec![
            // Python's own scalars are numpy's weak types, whatever the column.
            (V::Float(0.5), I64, &[], None, number(None, Some(0.5), true, Like::Weak(F64))),
            (V::Bool(true), F32, &[], None, number(Some(1), Some(1.0), false, Like::Weak(Bool))),
            (V::Int(7), U8, &[], None, number(Some(7), Some(7.0), false, Like::Weak(I64))),
            // A numpy scalar of the column's type is read as it; another goes through numpy.
            (V::Scalar(F32, 1.5), F32, &[], None, number(None, Some(1.5), false, Like::Typed(F32))),
            (V::Scalar(I64, 3.0), I64, &[], None, number(Some(3), None, false, Like::Typed(I64))),
            (V::Scalar(F32, 1.5), I64, &[], None, array(b'f', 4, "f4", &[])),
            // Other numbers by their class.
            (V::IntSub(5), I8, &[], None, number(Some(5), Some(5.0), false, Like::Int)),
            (V::FloatSub(0.5), F32, &[], None, number(None, Some(0.5), true, Like::Float)),
            (V::Other("Decimal", Some(1.5)), F64, &[], None, number(None, Some(1.5), false, Like::Other)),
            (V::Str("x"), F64, &[], None, number(None, None, false, Like::Other)),
            // Arrays: exactly the rows, else their items (the dtype shown unless the column's).
            (nd(b'f', 4, &[2]), F32, &[2], None, Input::Rows(Src::Own(0, 0))),
            (nd(b'f', 8, &[2]), F32, &[2], None, array(b'f', 8, "f8", &[2])),
            (nd(b'f', 8, &[]), F64, &[], None, array(b'f', 8, "", &[])),
            // numpy's array of a list; refused unless numbers.
            (V::List(vec![V::Int(1), V::Int(2)]), I64, &[2], None, array(b'i', 8, "", &[2])),
            (V::Other("set", None), I64, &[], Some(4), refused("expected numbers, got set")),
            (
                V::List(vec![V::List(vec![]), V::Int(1)]),
                I64,
                &[2],
                None,
                refused("expected an array of shape (2,), got list: ragged"),
            ),
            // str columns: a str, None (a missing row, empty), a sequence of one per env.
            (V::Str("ab"), Utf8, &[], None, strs(6)),
            (V::None, Utf8, &[], None, strs(4)),
            (V::Int(1), Utf8, &[], None, refused("expected str, got int")),
            (V::List(vec![V::Str("a"), V::None]), Utf8, &[], Some(2), strs(9)),
            (V::List(vec![V::Str("a")]), Utf8, &[], Some(2), refused("expected 2 strings, got 1")),
            (V::Int(1), Utf8, &[], Some(2), refused("expected 2 strings, got int")),
            (V::List(vec![V::Str("a"), V::Int(1)]), Utf8, &[], Some(2), refused("expected str, got int")),
        ];
        for (value, dtype, shape, rows, want) in table {
            let (mut coll, fit) = (Collector::<()>::default(), fit(dtype, shape));
            let got = read(&Host, &value, Some((&dtype, &fit)), (rows, None), &mut coll);
            assert_eq!(got, Ok(want), "{value:?} for {dtype:?}{shape:?} {rows:?}");
        }
    }

    #[test]
    fn first_values_are_read_for_the_column_they_would_make() {
        use DType::*;
        let objects = |shape: &[usize], first: Option<(&str, bool)>| Input::Objects {
            shape: shape.to_vec(),
            first: first.map(|(name, is_str)| (name.to_owned(), is_str)),
        };
        let strs = V::Nd(b'O', 8, vec![2], vec![V::None, V::Str("a")]);
        // (the value, its env count when batched, which envs have it, what it reads as)
        type Case<'a> = (V, Option<usize>, Option<&'a [u8]>, Input);
        let table: Vec<Case<'_>> = vec![
            (V::Float(0.5), None, None, number(None, Some(0.5), true, Like::Weak(F64))),
            (V::Int(2), Some(2), None, number(Some(2), Some(2.0), false, Like::Weak(I64))),
            (V::Str("a"), None, None, Input::Str),
            (nd(b'f', 4, &[2, 3]), Some(2), None, array(b'f', 4, "f4", &[2, 3])),
            (V::List(vec![V::Float(1.0), V::Float(2.0)]), Some(2), None, array(b'f', 8, "f8", &[2])),
            (V::Scalar(I64, 3.0), None, None, array(b'i', 8, "i8", &[])),
            (V::IntSub(3), None, None, array(b'i', 8, "i8", &[])),
            // Numbers only where numpy makes numbers of them.
            (V::Other("set", None), None, None, Input::Unsupported("set".into())),
            (V::Dict, None, None, Input::Unsupported("dict".into())),
            (V::None, None, None, Input::Unsupported("NoneType".into())),
            (
                V::List(vec![V::List(vec![]), V::Int(1)]),
                Some(2),
                None,
                Input::NotOverEnvs { type_name: "list".into(), error: "ragged".into() },
            ),
            // An object array over the envs: what its first env with a value holds.
            (strs.clone(), Some(2), None, objects(&[2], Some(("NoneType", false)))),
            (strs.clone(), Some(2), Some(&[0, 1]), objects(&[2], Some(("str", true)))),
            (strs.clone(), Some(2), Some(&[0, 0]), objects(&[2], None)),
            (strs, None, None, array(b'O', 8, "O8", &[2])),
        ];
        for (value, rows, mask, want) in table {
            let mut coll = Collector::<()>::default();
            let mask = mask.map(|m| coll.own(m));
            let got = read(&Host, &value, None, (rows, mask), &mut coll);
            assert_eq!(got, Ok(want), "{value:?} {rows:?}");
        }
    }

    #[test]
    fn misfits_name_the_value_and_exact_rows_are_put_as_they_are() {
        let (mut coll, f32s) = (Collector::<()>::default(), fit(DType::F32, &[2]));
        let rows = put(&Host, &nd(b'f', 4, &[2]), (&DType::F32, &f32s), None, &mut coll);
        assert_eq!(rows, Ok(Ok(Src::Own(0, 0))));
        let odd = put(&Host, &V::List(vec![V::List(vec![]), V::Int(1)]), (&DType::F32, &f32s), None, &mut coll);
        assert_eq!(odd, Ok(Err("expected an array of shape (2,), got list: ragged".into())));
        let why = why(&Host, &V::Str("a"), DType::I64, Misfit::Wrong("integer"));
        assert_eq!(why, scalar_wrong(DType::I64, "integer", "str", "Str(\"a\")".into()));
        assert!(arrayish(&Host, &V::Scalar(DType::U8, 1.0)) == Ok(true) && arrayish(&Host, &V::Dict) == Ok(false));
    }

    #[test]
    fn masks_are_borrowed_bools_or_numpys_truths_of_one_item_per_env() {
        let list = |items: &[f64]| V::List(items.iter().map(|&f| V::Float(f)).collect());
        // (the mask, the env count, its bytes or why not)
        type Case = (V, usize, Result<&'static [u8], &'static str>);
        let table: [Case; 4] = [
            (nd(b'b', 1, &[3]), 3, Ok(&[])), // borrowed (this fake's bytes: none)
            (list(&[1.0, 0.0, 2.0]), 3, Ok(&[1, 0, 1])),
            (list(&[1.0]), 3, Err("reset mask has 1 entries for 3 envs")),
            (nd(b'b', 1, &[2]), 3, Err("no number")),
        ];
        for (value, n, want) in table {
            let mut coll = Collector::<()>::default();
            let got = match mask(&Host, &value, n, "reset mask", &mut coll) {
                Ok(Ok(src)) => Ok(coll.slice(src).to_vec()),
                Ok(Err(why)) | Err(why) => Err(why),
            };
            assert_eq!(got, want.map(<[u8]>::to_vec).map_err(String::from), "{value:?} {n}");
        }
    }

    #[test]
    fn object_arrays_over_the_envs_are_stacked_when_they_hold_numbers() {
        let objects = |items: Vec<V>| V::Nd(b'O', 8, vec![items.len()], items);
        let pair = || V::List(vec![V::Int(1), V::Int(2)]);
        let template = V::Nd(b'i', 8, vec![2], vec![V::Int(1), V::Int(2)]);
        let stacked = V::Nd(b'i', 8, vec![2, 2], vec![template, pair()]);
        // (the value, its env count when batched, which envs have it, the array it stacks to)
        type Case<'a> = (V, Option<usize>, Option<&'a [u8]>, Option<V>);
        let table: Vec<Case<'_>> = vec![
            (objects(vec![pair(), pair()]), Some(2), None, Some(V::Nd(b'i', 8, vec![2, 2], vec![pair(), pair()]))),
            // An env without a value gets zeros of the first's shape.
            (objects(vec![V::None, pair()]), Some(2), Some(&[0, 1]), Some(stacked)),
            (objects(vec![pair(), pair()]), None, None, None), // not batched
            (objects(vec![V::Str("a"), V::Str("b")]), Some(2), None, None),
            (objects(vec![V::Dict, V::Dict]), Some(2), None, None),
            (objects(vec![V::None, V::None]), Some(2), Some(&[0, 0]), None), // no env has one
            (objects(vec![V::Other("set", None)]), Some(1), None, None),     // no numbers
            (nd(b'f', 8, &[2]), Some(2), None, None),
        ];
        for (value, rows, mask, want) in table {
            assert_eq!(stacked_rows(&Host, &value, rows, mask), Ok(want), "{value:?}");
        }
    }
}
