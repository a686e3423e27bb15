//! The reads: a dataset's rows into caller buffers, by column (`rows`), batched for training
//! (`gather`, copying `pieces`; `batch` whole, from a `plan` of keys and a `request` of windows),
//! in order (`scan`: ranges of steps, runs, the file's order), as frame tables (`frames_of`),
//! with the numbering of steps and windows (`steps`), sampling, output memory (`pool`) and
//! reads over some recordings (`among`).

pub(in crate::reader) mod among;
pub(in crate::reader) mod batch;
pub(in crate::reader) mod frames_of;
pub(in crate::reader) mod gather;
pub(in crate::reader) mod pieces;
pub(in crate::reader) mod plan;
pub(in crate::reader) mod pool;
pub(in crate::reader) mod request;
pub(in crate::reader) mod rows;
pub(in crate::reader) mod sampling;
pub(in crate::reader) mod scan;
pub(in crate::reader) mod steps;
pub(in crate::reader) mod stream;
