//! What one call's values become, on the caller's thread: the bytes of a value of a column
//! (`value`: what a value is; `reading`: a host's value read once as one; `fit`: whether a value read once fits a column of fixed type;
//! `values`, with the discrete spaces' `bounds`, and `cast`: the casts that keep every value),
//! columns made on first sight and widened later (`dynamic`, `widen`; a recorder's, with their frames, in `first_sight`), the walk of an info dict
//! (`info_walk`, with its keys and plans in `info_keys`), the values not recorded and what the
//! user is told (`skips`), the call's entries gathered (`collect`) and sent as one message
//! through the ring (`send`, `ring_fit`: no call blocks forever).

pub mod bounds;
pub mod cast;
pub mod collect;
pub mod dynamic;
pub mod first_sight;
pub mod fit;
pub mod info_keys;
pub mod info_walk;
pub mod reading;
pub mod ring_fit;
pub(in crate::writer) mod send;
pub mod skips;
pub mod value;
pub mod values;
pub mod widen;
