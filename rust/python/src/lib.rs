//! `trajcore._core`: the thin PyO3 layer over trajcore-core. One file per exposed class; this
//! file only lists them.

mod arrays;
mod batch;
mod collect;
mod dataset;
mod errors;
mod functions;
mod open_dataset;
mod recorder;
mod selection;
mod values;

#[pyo3::pymodule]
mod _core {
    use pyo3::prelude::*;
    use trajcore_core::format::{header, ANNOTATION_EXTENSION, SHARD_EXTENSION};

    #[pymodule_export]
    use crate::{
        arrays::{BatchMemory, MappedRows},
        dataset::PyDataset,
        functions::{
            annotate, configure_store, convert, escape_key, layout_leaves, live_store_shards, num_threads, recover,
            recover_segments, remote_stats, unescape_key, upload_file, verify,
        },
        recorder::PyRecorder,
        selection::PySelection,
    };

    #[pymodule_init]
    fn constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("FORMAT_VERSION", (header::VERSION_MAJOR, header::VERSION_MINOR))?;
        m.add("SHARD_EXTENSION", SHARD_EXTENSION)?;
        m.add("ANNOTATION_EXTENSION", ANNOTATION_EXTENSION)?;
        m.add("MAX_INFO_DEPTH", trajcore_core::writer::entries::info_keys::MAX_DEPTH)
    }
}
