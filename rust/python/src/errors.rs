//! The one mapping from the core's error type to Python exceptions. The classes are made at module
//! import with two bases each (a trajcore class and the builtin a user would catch), which
//! `create_exception!` cannot express.

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyRuntimeError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use trajcore_core::Error;

pub struct Classes {
    pub corrupt: Py<PyType>,
    pub schema: Py<PyType>,
    pub invalid: Py<PyType>,
    pub recorder: Py<PyType>,
    pub io: Py<PyType>,
    pub not_found: Py<PyType>,
    pub warning: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn make<'py>(py: Python<'py>, name: &str, bases: &[Bound<'py, PyType>], doc: &str) -> PyResult<Bound<'py, PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "trajcore")?;
    namespace.set_item("__doc__", doc)?;
    let bases = PyTuple::new(py, bases)?;
    let class = py.get_type::<PyType>().call1((name, bases, namespace))?;
    Ok(class.cast_into::<PyType>()?)
}

/// Creates the classes and adds them to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base =
        make(py, "TrajcoreError", &[py.get_type::<pyo3::exceptions::PyException>()], "Root of every trajcore error.")?;
    let value = py.get_type::<PyValueError>();
    let corrupt = make(
        py,
        "CorruptFileError",
        &[base.clone(), value.clone()],
        "A file is not a trajcore file, or is damaged; the message names the file and byte offset.",
    )?;
    let schema = make(
        py,
        "SchemaError",
        &[base.clone(), value.clone()],
        "A value does not fit its column (dtype, shape, kind); the message names the column.",
    )?;
    let invalid = make(py, "InvalidArgumentError", &[base.clone(), value], "An argument or option is invalid.")?;
    let recorder = make(
        py,
        "RecorderError",
        &[base.clone(), py.get_type::<PyRuntimeError>()],
        "The recorder cannot take the call: closed, writer thread stopped, buffer full.",
    )?;
    let io =
        make(py, "TrajcoreIOError", &[base.clone(), py.get_type::<PyOSError>()], "Reading or writing a file failed.")?;
    let not_found = make(
        py,
        "TrajcoreFileNotFoundError",
        &[io.clone(), py.get_type::<PyFileNotFoundError>()],
        "A path that should exist does not.",
    )?;
    let warning = make(
        py,
        "TrajcoreWarning",
        &[py.get_type::<PyUserWarning>()],
        "Something was skipped (an unsupported info entry) or damaged data was left out.",
    )?;
    for class in [&base, &corrupt, &schema, &invalid, &recorder, &io, &not_found, &warning] {
        m.add(class.name()?, class)?;
    }
    let _ = CLASSES.set(
        py,
        Classes {
            corrupt: corrupt.unbind(),
            schema: schema.unbind(),
            invalid: invalid.unbind(),
            recorder: recorder.unbind(),
            io: io.unbind(),
            not_found: not_found.unbind(),
            warning: warning.unbind(),
        },
    );
    Ok(())
}

pub fn classes(py: Python<'_>) -> &Classes {
    CLASSES.get(py).expect("trajcore._core registers its exception classes at import")
}

fn new_err(py: Python<'_>, class: &Py<PyType>, message: String) -> PyErr {
    match class.bind(py).call1((message.clone(),)) {
        Ok(instance) => PyErr::from_value(instance),
        Err(_) => PyRuntimeError::new_err(message),
    }
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
        Error::RingFull { .. } | Error::WriterStopped(_) | Error::ForeignProcess { .. } | Error::Interrupted(_) => {
            new_err(py, &c.recorder, message)
        }
        Error::Io { source, .. } => {
            let errno = source.raw_os_error().unwrap_or(0);
            match c.io.bind(py).call1((errno, message.clone())) {
                Ok(instance) => PyErr::from_value(instance),
                Err(_) => PyOSError::new_err(message),
            }
        }
        Error::NotFound { path } => {
            match c.not_found.bind(py).call1((2, "No such file or directory", path.display().to_string())) {
                Ok(instance) => PyErr::from_value(instance),
                Err(_) => PyFileNotFoundError::new_err(message),
            }
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
