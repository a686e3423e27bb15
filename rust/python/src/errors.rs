//! The one mapping from the core's error type to Python exceptions: the core says an error's
//! kind and OS error (`Error::kind`, `Error::os_error`); the classes are defined in
//! `trajcore.errors` (each with two bases: a trajcore class and the builtin a user would catch).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyType};
use trajcore_core::error::ErrorKind;
use trajcore_core::Error;

/// The class of `trajcore.errors` that raises each kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Corrupt => "CorruptFileError",
        ErrorKind::Schema => "SchemaError",
        ErrorKind::Invalid => "InvalidArgumentError",
        ErrorKind::OutOfRange => "TrajcoreIndexError",
        ErrorKind::Recorder => "RecorderError",
        ErrorKind::Io => "TrajcoreIOError",
        ErrorKind::NotFound => "TrajcoreFileNotFoundError",
    }
}

static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The class `name` of `trajcore.errors` (imported once).
pub fn class<'py>(py: Python<'py>, name: &str) -> Bound<'py, PyType> {
    let module = MODULE.get_or_try_init(py, || py.import("trajcore.errors").map(Bound::unbind));
    let class = module.and_then(|m| Ok(m.bind(py).getattr(name)?.cast_into::<PyType>()?));
    class.expect("trajcore.errors defines the exception classes the extension raises")
}

/// Converts a core error to the matching Python exception (a RuntimeError with its message
/// should making that fail).
pub fn to_py(py: Python<'_>, error: Error) -> PyErr {
    let message = error.to_string();
    let args = match error.os_error() {
        Some(os) => match os.filename {
            Some(file) => (os.errno, os.strerror, file).into_pyobject(py),
            None => (os.errno, os.strerror).into_pyobject(py),
        },
        None => (message.as_str(),).into_pyobject(py),
    };
    let made = args.and_then(|args| class(py, class_name(error.kind())).call1(args));
    made.map_or_else(|_| PyRuntimeError::new_err(message), PyErr::from_value)
}

pub fn invalid(py: Python<'_>, why: impl Into<String>) -> PyErr {
    to_py(py, Error::Invalid(why.into()))
}

/// Issues a `TrajcoreWarning`.
pub fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let message = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    PyErr::warn(py, &class(py, "TrajcoreWarning"), &message, 2)
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
