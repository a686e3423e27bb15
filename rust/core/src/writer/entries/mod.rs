//! What one call's values become, on the caller's thread (a call's values walked, checked and
//! sent as one message: `call_values`): a host's value read and fitted to a
//! column, its bytes (`reading/`), columns made on first sight and widened later (`dynamic`; a
//! recorder's, with their frames, in `first_sight`), the walk of an info dict (`info_walk`, with
//! its keys and plans in `info_keys`), the values not recorded and what the user is told
//! (`skips`), the call's entries gathered (`collect`) and sent as one message through the ring
//! (`send`, `ring_fit`: no call blocks forever).

pub mod call_values;
pub mod collect;
pub mod dynamic;
pub mod first_sight;
pub mod info_keys;
pub mod info_walk;
pub mod reading;
pub mod ring_fit;
pub(in crate::writer) mod send;
pub mod skips;
