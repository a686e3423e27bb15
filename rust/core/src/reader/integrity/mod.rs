//! Damage: finding it (`verify`: every checksum, every chunk decoded; `unfinished`: a shard
//! without its end), which episodes it takes (`damage`), what a dataset leaves out after a
//! verification (`exclusions`), training reads that go on past it (`lenient`, recording what
//! they left out in `found_damage`), and what still reads of each episode (`salvage`: the plan
//! `recover` replays).

pub(in crate::reader) mod damage;
pub(in crate::reader) mod exclusions;
pub(in crate::reader) mod found_damage;
pub(in crate::reader) mod lenient;
pub(in crate::reader) mod problem;
pub(in crate::reader) mod salvage;
pub(in crate::reader) mod unfinished;
pub(in crate::reader) mod verify;
