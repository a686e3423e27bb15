//! The one mapping from the core's error type to Python exceptions. The classes are made at module
//! import with two bases each (a trajcore class and the builtin a user would catch), which
//! `create_exception!` cannot express.

use pyo3::call::PyCallArgs;
use pyo3::exceptions::{
    PyException, PyFileNotFoundError, PyIndexError, PyOSError, PyRuntimeError, PyUserWarning, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
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

/// Creates the classes and adds them to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let class = |name: &str, bases: &[&Bound<'_, PyType>], doc: &str| -> PyResult<Py<PyType>> {
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "trajcore")?;
        namespace.set_item("__doc__", doc)?;
        let class = py.get_type::<PyType>().call1((name, PyTuple::new(py, bases)?, namespace))?;
        m.add(name, &class)?;
        Ok(class.cast_into::<PyType>()?.unbind())
    };
    let base = class("TrajcoreError", &[&py.get_type::<PyException>()], "Root of every trajcore error.")?;
    let base = base.bind(py);
    let value = py.get_type::<PyValueError>();
    let invalid = class("InvalidArgumentError", &[base, &value], "An argument or option is invalid.")?;
    let io = class("TrajcoreIOError", &[base, &py.get_type::<PyOSError>()], "Reading or writing a file failed.")?;
    let classes = Classes {
        corrupt: class(
            "CorruptFileError",
            &[base, &value],
            "A file is not a trajcore file, or is damaged; the message names the file and byte offset.",
        )?,
        schema: class(
            "SchemaError",
            &[base, &value],
            "A value does not fit its column (dtype, shape, kind); the message names the column.",
        )?,
        // Also an InvalidArgumentError: code that caught an index out of range as a bad
        // argument before it was an IndexError still does.
        out_of_range: class(
            "TrajcoreIndexError",
            &[invalid.bind(py), &py.get_type::<PyIndexError>()],
            "An index (of an episode, a step, a window, a recording) is past the end of what it counts.",
        )?,
        recorder: class(
            "RecorderError",
            &[base, &py.get_type::<PyRuntimeError>()],
            "The recorder cannot take the call: closed, writer thread stopped, buffer full.",
        )?,
        not_found: class(
            "TrajcoreFileNotFoundError",
            &[io.bind(py), &py.get_type::<PyFileNotFoundError>()],
            "A path that should exist does not.",
        )?,
        warning: class(
            "TrajcoreWarning",
            &[&py.get_type::<PyUserWarning>()],
            "Something was skipped (an unsupported info entry) or damaged data was left out.",
        )?,
        invalid,
        io,
    };
    let _ = CLASSES.set(py, classes);
    Ok(())
}

pub fn classes(py: Python<'_>) -> &Classes {
    CLASSES.get(py).expect("trajcore._core registers its exception classes at import")
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
        Error::RingFull { .. } | Error::WriterStopped(_) | Error::ForeignProcess { .. } | Error::Interrupted(_) => {
            new_err(py, &c.recorder, message)
        }
        Error::Io { source, .. } => {
            let errno = source.raw_os_error().unwrap_or(0);
            instance(c.io.bind(py), (errno, message.clone()), || PyOSError::new_err(message))
        }
        Error::NotFound { path } => {
            let args = (2, "No such file or directory", path.display().to_string());
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
