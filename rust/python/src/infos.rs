//! Python values as the core's columns made on first sight read them (`Host`: info entries,
//! custom data, rendered frames) and info dicts as its walk reads them (`Dicts`, see
//! `trajcore_core::writer::entries::info_walk`; their keys and values are `Objects`'s): this
//! file only reads Python objects and adds columns; the core decides which column, widening,
//! masks and what is left out.

use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};
use trajcore_core::writer::entries::collect::Src;
use trajcore_core::writer::entries::dynamic::Host;
use trajcore_core::writer::entries::info_walk::Dicts;
use trajcore_core::writer::entries::reading::value::Input;
use trajcore_core::writer::entries::reading::values::Misfit;
use trajcore_core::writer::entries::reading::{self, arrayish};
use trajcore_core::writer::{NewColumn, Recorder};
use trajcore_core::DType;

use crate::collect::Collector;
use crate::errors::{schema_error, warn, IntoPy};
use crate::values::{mask_bytes, ColInfo, Objects};

pub type Sight = trajcore_core::writer::entries::first_sight::FirstSight<ColInfo, TypeOf, Py<PyString>, Py<PyAny>>;

/// A call's values on their way into columns made on first sight: read here, the recorder
/// taking the new columns.
pub struct Values<'a, 'py> {
    pub py: Python<'py>,
    pub recorder: &'a mut Recorder,
    /// Whether an object array of per-env arrays is stacked first (see `reading::read_stacked`); a
    /// value of the user's own is checked as it is.
    pub stacks: bool,
}

/// Tells of a value left out, when the core says to.
pub fn warned(py: Python<'_>, warning: Option<String>) -> PyResult<()> {
    warning.map_or(Ok(()), |warning| warn(py, &warning))
}

impl<'py> Host<ColInfo, TypeOf, Py<PyAny>> for Values<'_, 'py> {
    type Value = Bound<'py, PyAny>;
    type Error = PyErr;

    fn kind(&mut self, value: &Self::Value) -> PyResult<Option<TypeOf>> {
        Ok((!arrayish(&Objects(self.py), value)?).then(|| TypeOf(value.get_type().unbind())))
    }

    fn read(
        &mut self,
        value: &Self::Value,
        column: Option<&ColInfo>,
        (rows, mask): (Option<usize>, Option<Src>),
        coll: &mut Collector,
    ) -> PyResult<Input> {
        let column = column.map(|c| (c, &c.fit));
        reading::read_stacked(&Objects(self.py), value, column, (rows, mask, self.stacks), coll)
    }

    fn add(&mut self, spec: NewColumn) -> PyResult<(u32, ColInfo)> {
        let id = self.recorder.add_column(spec).py_err(self.py)?;
        Ok((id, ColInfo::new(self.py, self.recorder, id)?))
    }

    fn why(&self, value: &Self::Value, dtype: DType, misfit: Misfit) -> String {
        reading::why(&Objects(self.py), value, dtype, misfit)
    }
}

impl<'py> Dicts<ColInfo, TypeOf, Py<PyAny>> for Values<'_, 'py> {
    type Values = Objects<'py>;

    fn values(&self) -> Objects<'py> {
        Objects(self.py)
    }

    fn mask(&mut self, value: &Self::Value, n: usize, coll: &mut Collector) -> PyResult<Src> {
        mask_bytes(self.py, value, n, "an info mask", coll)
    }

    fn warn(&self, warning: &str) -> PyResult<()> {
        warn(self.py, warning)
    }

    fn refuse(&self, column: &str, why: String) -> PyErr {
        schema_error(self.py, column, why)
    }
}

/// A Python type, the same as another when it is the same object.
pub struct TypeOf(Py<PyType>);

impl PartialEq for TypeOf {
    fn eq(&self, other: &Self) -> bool {
        self.0.is(&other.0)
    }
}
