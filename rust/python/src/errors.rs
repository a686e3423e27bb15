//! The one mapping from the core's error type to Python exceptions. The classes are defined in
//! `trajcore.errors` (each with two bases: a trajcore class and the builtin a user would catch)
//! and looked up there once.

use pyo3::call::PyCallArgs;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use trajcore_core::Error;

pub struct Classes {
    pub corrupt: Py<PyType>,
    pub schema: Py<PyType>,
    pub invalid: Py<PyType>,
    pub out_of_range: Py<PyType>,
    pub recorder: Py<PyType>,
    pub io: Py<PyType>,
    pub not_found: Py<PyType>,
    pub warning: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn load(py: Python<'_>) -> PyResult<Classes> {
    let module = py.import("trajcore.errors")?;
    let class = |name: &str| -> PyResult<Py<PyType>> { Ok(module.getattr(name)?.cast_into::<PyType>()?.unbind()) };
    Ok(Classes {
        corrupt: class("CorruptFileError")?,
        schema: class("SchemaError")?,
        invalid: class("InvalidArgumentError")?,
        out_of_range: class("TrajcoreIndexError")?,
        recorder: class("RecorderError")?,
        io: class("TrajcoreIOError")?,
        not_found: class("TrajcoreFileNotFoundError")?,
        warning: class("TrajcoreWarning")?,
    })
}

pub fn classes(py: Python<'_>) -> &Classes {
    CLASSES
        .get_or_try_init(py, || load(py))
        .expect("trajcore.errors defines the exception classes the extension raises")
}

fn new_err(py: Python<'_>, class: &Py<PyType>, message: String) -> PyErr {
    instance(class.bind(py), (message.clone(),), || PyRuntimeError::new_err(message))
}

/// An instance of `class` made from `args`; `fallback` should making it fail.
fn instance<'py>(class: &Bound<'py, PyType>, args: impl PyCallArgs<'py>, fallback: impl FnOnce() -> PyErr) -> PyErr {
    class.call1(args).map_or_else(|_| fallback(), PyErr::from_value)
}

/// Converts a core error to the matching Python exception.
pub fn to_py(py: Python<'_>, error: Error) -> PyErr {
    let c = classes(py);
    let message = error.to_string();
    match error {
        Error::NotTrajcore { .. } | Error::Corrupt { .. } | Error::Version { .. } | Error::Unsupported { .. } => {
            new_err(py, &c.corrupt, message)
        }
        Error::Schema { .. } => new_err(py, &c.schema, message),
        Error::Invalid(_) => new_err(py, &c.invalid, message),
        Error::OutOfRange(_) => new_err(py, &c.out_of_range, message),
        Error::RingFull { .. }
        | Error::WriterStopped(_)
        | Error::ForeignProcess { .. }
        | Error::Interrupted(_)
        | Error::Upload { .. } => new_err(py, &c.recorder, message),
        Error::Io { source, .. } => match source.raw_os_error() {
            Some(errno) => instance(c.io.bind(py), (errno, message.clone()), || PyOSError::new_err(message)),
            None => new_err(py, &c.io, message), // no "[Errno 0]" before a store's error
        },
        Error::NotFound { path } => {
            let args = (2, "No such file or directory", path.display().to_string());
            instance(c.not_found.bind(py), args, || PyFileNotFoundError::new_err(message))
        }
        Error::NoShard { path, why } => {
            let args = (2, why, path.display().to_string());
            instance(c.not_found.bind(py), args, || PyFileNotFoundError::new_err(message))
        }
    }
}

pub fn schema_error(py: Python<'_>, column: &str, why: impl Into<String>) -> PyErr {
    to_py(py, Error::schema(column, why))
}

pub fn invalid(py: Python<'_>, why: impl Into<String>) -> PyErr {
    to_py(py, Error::Invalid(why.into()))
}

pub fn recorder_error(py: Python<'_>, why: impl Into<String>) -> PyErr {
    new_err(py, &classes(py).recorder, why.into())
}

/// Issues a `TrajcoreWarning`.
pub fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let category = classes(py).warning.bind(py).clone().into_any();
    let message = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    PyErr::warn(py, &category, &message, 2)
}

/// Extension trait: `core_result.py_err(py)?`.
pub trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
