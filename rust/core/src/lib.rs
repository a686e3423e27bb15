//! trajcore-core: a plain Rust library (no Python) that records RL episodes into an append-only,
//! chunked, checksummed, indexed file format and reads them back through a memory map.
//!
//! - `format`: the bytes on disk (`docs/FORMAT.md` is the spec).
//! - `writer`: a lock-free ring from the caller to a background thread that splits vector steps
//!   into per-env episodes, compresses column chunks and appends them.
//! - `reader`: opens shards and datasets (directories of shards), recovers unfinished files and
//!   reads rows by episode through the index; batched gathers and sampling for training.
//! - `convert`: rewrites a dataset with other codecs and chunk sizes.
//! - `annotation`, `annotate`: columns added beside a dataset (sidecars), and the tool that
//!   writes them.
//! - `recover`: writes what of a damaged dataset still reads into a new one.

/// A fieldless enum whose numbers are written as bytes (records, ring messages), declared with
/// the one way back from a number (`from_repr`; an unknown number is `None`), so no second list
/// of its variants can drift from the first. Such a value is plain data: copied, compared and
/// printed like the number it stands for.
macro_rules! numbered_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident: $repr:ident {
        $($(#[$vmeta:meta])* $variant:ident = $value:literal,)*
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr($repr)]
        $vis enum $name {
            $($(#[$vmeta])* $variant = $value,)*
        }

        impl $name {
            pub fn from_repr(v: $repr) -> Option<Self> {
                match v {
                    $($value => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

pub mod annotate;
pub mod annotation;
pub mod convert;
pub mod copy_origin;
pub mod dtype;
pub mod error;
mod file_identity;
pub mod format;
pub mod host;
pub mod kept_keys;
pub mod layout;
pub mod objstore;
pub mod process;
pub mod reader;
pub mod recover;
pub mod schema;
pub mod writer;

pub use dtype::DType;
pub use error::{Error, Result};
pub use schema::{CodecSpec, ColumnId, ColumnSpec, Role, Timeline};
