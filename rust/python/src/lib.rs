//! `trajcore._core`: the thin PyO3 layer over trajcore-core. One file per exposed class; this
//! file only lists them.

use pyo3::prelude::*;

mod arrays;
mod batch;
mod collect;
mod dataset;
mod errors;
mod functions;
mod infos;
mod keys;
mod layout;
mod open_dataset;
mod recorder;
mod selection;
mod values;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "FORMAT_VERSION",
        (trajcore_core::format::header::VERSION_MAJOR, trajcore_core::format::header::VERSION_MINOR),
    )?;
    m.add("SHARD_EXTENSION", trajcore_core::format::SHARD_EXTENSION)?;
    m.add("ANNOTATION_EXTENSION", trajcore_core::format::ANNOTATION_EXTENSION)?;
    m.add("MAX_INFO_DEPTH", trajcore_core::writer::entries::info_keys::MAX_DEPTH)?;
    m.add_class::<recorder::PyRecorder>()?;
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<selection::PySelection>()?;
    m.add_class::<arrays::MappedRows>()?;
    m.add_class::<arrays::BatchMemory>()?;
    m.add_function(wrap_pyfunction!(functions::convert, m)?)?;
    m.add_function(wrap_pyfunction!(functions::verify, m)?)?;
    m.add_function(wrap_pyfunction!(functions::recover, m)?)?;
    m.add_function(wrap_pyfunction!(functions::set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(functions::num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(functions::layout_leaves, m)?)?;
    m.add_function(wrap_pyfunction!(functions::configure_store, m)?)?;
    m.add_function(wrap_pyfunction!(functions::remote_stats, m)?)?;
    m.add_function(wrap_pyfunction!(functions::upload_file, m)?)?;
    m.add_function(wrap_pyfunction!(functions::recover_segments, m)?)?;
    m.add_function(wrap_pyfunction!(functions::live_store_shards, m)?)?;
    m.add_function(wrap_pyfunction!(keys::escape_key, m)?)?;
    m.add_function(wrap_pyfunction!(keys::unescape_key, m)?)?;
    m.add_function(wrap_pyfunction!(functions::annotate, m)?)?;
    Ok(())
}
