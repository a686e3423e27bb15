//! `trajcore._core`: the thin PyO3 layer over trajcore-core. One file per exposed class; this
//! file only lists them.

use pyo3::prelude::*;

mod collect;
mod dataset;
mod errors;
mod infos;
mod layout;
mod recorder;
mod values;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "FORMAT_VERSION",
        (trajcore_core::format::header::VERSION_MAJOR, trajcore_core::format::header::VERSION_MINOR),
    )?;
    m.add_class::<recorder::PyRecorder>()?;
    m.add_class::<dataset::PyDataset>()?;
    Ok(())
}
