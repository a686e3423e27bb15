//! Element types of fixed-size columns, named as numpy names them so both sides agree.

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    F32,
    F64,
    /// Variable-length UTF-8 text, one string a row (`Text` spaces, string infos).
    Utf8,
}

pub const ALL_DTYPES: [DType; 13] = [
    DType::Bool,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::Utf8,
];

impl DType {
    /// Bytes per element; `None` for variable-length types.
    pub fn size(self) -> Option<usize> {
        Some(match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
            DType::Utf8 => return None,
        })
    }

    /// The numpy dtype string (`np.dtype(name)` accepts it).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Utf8 => "str",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        ALL_DTYPES
            .iter()
            .copied()
            .find(|d| d.name() == name)
            .ok_or_else(|| Error::Invalid(format!("unknown dtype '{name}'")))
    }

    pub fn is_variable(self) -> bool {
        self.size().is_none()
    }
}
