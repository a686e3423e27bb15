//! An array's items cast into a column's type, as numpy's `astype` casts them, under the rule
//! `values::cast_rule` gives: an env's arrays of another dtype (float32 rewards into a float64
//! column, int8 actions into int64) cost no numpy call, and a value the cast would change is
//! refused by name instead of stored changed.

use super::values::{cast_rule, f64_to_f16_bits, ints_fit, overflow, Cast};
use super::widen;
use crate::DType;

/// Appends the items of `data` (numpy kind `kind`, `itemsize` bytes each, native byte order, C
/// order) as values of column type `to`; why not when the rule refuses the pair, an integer
/// does not fit `to`, or a finite number would become inf. `shown`: the dtype as numpy prints
/// it, for the message. On refusal `out` is left as it was.
pub fn cast_items(
    kind: u8,
    itemsize: usize,
    shown: &str,
    to: DType,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let from = widen::make(kind, itemsize).filter(|_| cast_rule(kind, itemsize, to) != Cast::Refused);
    let Some(from) = from else {
        return Err(format!("expected dtype {}, got {shown} which does not cast safely", to.name()));
    };
    let start = out.len();
    let misfit = match from {
        DType::Bool | DType::U8 => items::<u8>(to, data, out),
        DType::U16 => items::<u16>(to, data, out),
        DType::U32 => items::<u32>(to, data, out),
        DType::U64 => items::<u64>(to, data, out),
        DType::I8 => items::<i8>(to, data, out),
        DType::I16 => items::<i16>(to, data, out),
        DType::I32 => items::<i32>(to, data, out),
        DType::I64 => items::<i64>(to, data, out),
        DType::F16 => items::<Half>(to, data, out),
        DType::F32 => items::<f32>(to, data, out),
        DType::F64 => items::<f64>(to, data, out),
        DType::Utf8 => unreachable!("`widen::make` makes no str type"),
    };
    let Err(misfit) = misfit else { return Ok(()) };
    out.truncate(start);
    Err(match misfit {
        Misfit::NotHeld => format!("expected dtype {}, got {shown} with values it does not hold", to.name()),
        Misfit::Beyond(_) if to == DType::F16 => {
            format!("values of {shown} beyond the range of {} (they would be stored as inf)", to.name())
        }
        Misfit::Beyond(v) => overflow(v, to),
    })
}

/// Why an item is not stored: an integer the column does not hold, a finite number beyond it.
enum Misfit {
    NotHeld,
    Beyond(f64),
}

/// An item of an array, read in native byte order, and what it is as each column type takes it.
trait Item: Copy {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Self;
    /// The integer; only asked of integers and bools (`cast_rule` refuses floats into integers).
    fn int(self) -> i128;
    fn f64(self) -> f64;
    /// Rounded once, as numpy converts each type to float32 (an int64 is not rounded twice).
    fn f32(self) -> f32;
}

macro_rules! item {
    ($($t:ty),*) => {$(
        impl Item for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().expect("chunks of the item size"))
            }
            fn int(self) -> i128 {
                self as i128
            }
            fn f64(self) -> f64 {
                self as f64
            }
            fn f32(self) -> f32 {
                self as f32
            }
        }
    )*};
}
item!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

/// A float16 item, by its bits.
#[derive(Clone, Copy)]
struct Half(u16);

impl Item for Half {
    const SIZE: usize = 2;
    fn read(bytes: &[u8]) -> Self {
        Half(u16::from_ne_bytes(bytes.try_into().expect("chunks of the item size")))
    }
    fn int(self) -> i128 {
        unreachable!("`cast_rule` refuses floats into integers")
    }
    fn f64(self) -> f64 {
        crate::format::metrics::f16_to_f64(self.0)
    }
    fn f32(self) -> f32 {
        self.f64() as f32
    }
}

/// Every item of `data` as a value of `to` (the target chosen once, outside the loop).
fn items<T: Item>(to: DType, data: &[u8], out: &mut Vec<u8>) -> Result<(), Misfit> {
    let items = data.chunks_exact(T::SIZE).map(T::read);
    match to {
        DType::Bool => items.for_each(|v| out.push((v.int() != 0) as u8)),
        DType::F64 => items.for_each(|v| out.extend_from_slice(&v.f64().to_le_bytes())),
        DType::F32 => {
            for v in items {
                let stored = v.f32();
                if stored.is_infinite() && v.f64().is_finite() {
                    return Err(Misfit::Beyond(v.f64()));
                }
                out.extend_from_slice(&stored.to_le_bytes());
            }
        }
        DType::F16 => {
            for v in items {
                let bits = f64_to_f16_bits(v.f64());
                if bits & 0x7fff == 0x7c00 && v.f64().is_finite() {
                    return Err(Misfit::Beyond(v.f64()));
                }
                out.extend_from_slice(&bits.to_le_bytes());
            }
        }
        int => {
            let size = int.size().unwrap_or(8);
            for v in items {
                if !ints_fit(int, v.int(), v.int()) {
                    return Err(Misfit::NotHeld);
                }
                out.extend_from_slice(&v.int().to_le_bytes()[..size]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ne<const N: usize>(items: &[[u8; N]]) -> Vec<u8> {
        items.concat()
    }

    #[test]
    fn items_cast_as_numpy_casts_them_or_are_named() {
        let le = |items: &[&[u8]]| Ok(items.concat());
        // (numpy kind, item size, shown, items, column type, the column's bytes or why not)
        type Case = (u8, usize, &'static str, Vec<u8>, DType, Result<Vec<u8>, String>);
        let table: Vec<Case> = vec![
            (b'f', 4, "<f4", ne(&[1.5f32.to_ne_bytes()]), DType::F64, le(&[&1.5f64.to_le_bytes()])),
            (b'f', 8, "<f8", ne(&[0.1f64.to_ne_bytes()]), DType::F32, le(&[&0.1f32.to_le_bytes()])),
            (b'i', 2, "<i2", ne(&[(-3i16).to_ne_bytes()]), DType::F32, le(&[&(-3.0f32).to_le_bytes()])),
            (b'u', 8, "<u8", ne(&[u64::MAX.to_ne_bytes()]), DType::F64, le(&[&(u64::MAX as f64).to_le_bytes()])),
            // Rounded once, as numpy: through float64 first, 2**60 + 2**36 + 1 would round twice.
            (b'i', 8, "<i8", ne(&[(1i64 << 60 | 1 << 36 | 1).to_ne_bytes()]), DType::F32, {
                le(&[&((1i64 << 60 | 1 << 36 | 1) as f32).to_le_bytes()])
            }),
            (b'b', 1, "|b1", vec![1, 0], DType::F32, le(&[&1.0f32.to_le_bytes(), &0.0f32.to_le_bytes()])),
            (b'b', 1, "|b1", vec![1, 0], DType::I16, le(&[&1i16.to_le_bytes(), &0i16.to_le_bytes()])),
            (b'f', 2, "<f2", ne(&[0x3c00u16.to_ne_bytes()]), DType::F32, le(&[&1.0f32.to_le_bytes()])),
            (b'f', 4, "<f4", ne(&[1.5f32.to_ne_bytes()]), DType::F16, le(&[&0x3e00u16.to_le_bytes()])),
            (b'i', 4, "<i4", ne(&[7i32.to_ne_bytes()]), DType::I64, le(&[&7i64.to_le_bytes()])),
            (b'u', 1, "|u1", vec![200], DType::I16, le(&[&200i16.to_le_bytes()])),
            (b'i', 8, "<i8", ne(&[5i64.to_ne_bytes(), (1i64 << 40).to_ne_bytes()]), DType::I32, {
                Err("expected dtype int32, got <i8 with values it does not hold".into())
            }),
            (b'i', 2, "<i2", ne(&[(-1i16).to_ne_bytes()]), DType::U64, {
                Err("expected dtype uint64, got <i2 with values it does not hold".into())
            }),
            (b'f', 8, "<f8", ne(&[1.0f64.to_ne_bytes(), 1e40f64.to_ne_bytes()]), DType::F32, {
                Err(overflow(1e40, DType::F32))
            }),
            (b'f', 8, "<f8", ne(&[f64::NEG_INFINITY.to_ne_bytes()]), DType::F32, {
                le(&[&f32::NEG_INFINITY.to_le_bytes()]) // inf stays inf
            }),
            (b'f', 4, "<f4", ne(&[7e4f32.to_ne_bytes()]), DType::F16, {
                Err("values of <f4 beyond the range of float16 (they would be stored as inf)".into())
            }),
            (b'u', 2, "<u2", ne(&[65535u16.to_ne_bytes()]), DType::F16, {
                Err("values of <u2 beyond the range of float16 (they would be stored as inf)".into())
            }),
            (b'f', 8, "<f8", ne(&[1.0f64.to_ne_bytes()]), DType::I64, {
                Err("expected dtype int64, got <f8 which does not cast safely".into())
            }),
            (b'c', 16, "<c16", vec![0; 16], DType::F64, {
                Err("expected dtype float64, got <c16 which does not cast safely".into())
            }),
            (b'i', 8, "<i8", ne(&[1i64.to_ne_bytes()]), DType::Bool, {
                Err("expected dtype bool, got <i8 which does not cast safely".into())
            }),
        ];
        for (kind, size, shown, data, to, want) in table {
            let mut out = vec![9];
            let got = cast_items(kind, size, shown, to, &data, &mut out).map(|()| out[1..].to_vec());
            assert_eq!(got, want, "{shown} -> {to:?}");
            assert_eq!(out[0], 9, "what was there stays");
        }
    }
}
