//! Running specs: parse (with overrides), run one point or all, and return the CLI's JSON
//! summary plus the series.

use std::path::PathBuf;

use fairlane_sim::{AnyError, Experiment, RunOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::json;

use crate::{sim_error, spec_error};

/// A Python value (bool, int, float, str, list, tuple, dict) as TOML.
fn to_toml(v: &Bound<'_, PyAny>, at: &str) -> PyResult<toml::Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(toml::Value::Integer(v.extract()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(v.extract()?));
    }
    if let Ok(d) = v.downcast::<PyDict>() {
        let mut t = toml::map::Map::new();
        for (k, x) in d.iter() {
            let k: String = k.extract().map_err(|_| {
                PyTypeError::new_err(format!("{at}: dictionary keys must be strings"))
            })?;
            let path = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            t.insert(k, to_toml(&x, &path)?);
        }
        return Ok(toml::Value::Table(t));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut a = Vec::new();
        for (i, x) in v.try_iter()?.enumerate() {
            a.push(to_toml(&x?, &format!("{at}[{i}]"))?);
        }
        return Ok(toml::Value::Array(a));
    }
    // numpy scalars and the like: anything float()- or int()-convertible.
    if let Ok(i) = v.extract::<i64>() {
        return Ok(toml::Value::Integer(i));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(toml::Value::Float(f));
    }
    Err(PyTypeError::new_err(format!(
        "{}: cannot express a {} in a spec (use bool, int, float, str, list or dict)",
        if at.is_empty() { "spec" } else { at },
        v.get_type().name()?
    )))
}

/// A spec given as a dict, as TOML text.
#[pyfunction]
pub fn dict_to_toml(spec: &Bound<'_, PyDict>) -> PyResult<String> {
    let v = to_toml(spec.as_any(), "")?;
    toml::to_string(&v).map_err(|e| PyTypeError::new_err(format!("spec dict: {e}")))
}

/// Parse `text` (named `file`, traces relative to `dir`) and apply `overrides`, a list of
/// `(field path, value)`, in order.
fn load(
    py: Python<'_>,
    text: &str,
    file: &str,
    dir: &str,
    overrides: &Bound<'_, PyList>,
) -> PyResult<Box<dyn Experiment>> {
    let mut spec = fairlane_sim::parse(text, file, PathBuf::from(dir))
        .map_err(|e| spec_error(py, &e.file, &e.field, &e.message))?;
    for item in overrides.iter() {
        let (path, value): (String, Bound<'_, PyAny>) = item.extract()?;
        let value = to_toml(&value, &path)?;
        spec.set(&path, value)
            .map_err(|e| spec_error(py, &e.file, &e.field, &e.message))?;
    }
    Ok(spec)
}

/// How many tasks a spec splits into: its points (sweep points or suite runs; 1 for a spec
/// without them).
#[pyfunction]
pub fn count_points(
    py: Python<'_>,
    text: &str,
    file: &str,
    dir: &str,
    overrides: &Bound<'_, PyList>,
) -> PyResult<usize> {
    load(py, text, file, dir, overrides)?
        .points()
        .map_err(|e| spec_error(py, &e.file, &e.field, &e.message))
}

/// Run a spec (every point, or only point `point`) and return JSON text:
/// `{"summary": <the CLI's --json object>, "order": [[tenant names in spec order] per run],
/// "series": [...], "occupancy": [...]}`. The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (text, file, dir, overrides, jobs, max_events, point=None))]
#[allow(clippy::too_many_arguments)]
pub fn run_spec(
    py: Python<'_>,
    text: &str,
    file: &str,
    dir: &str,
    overrides: &Bound<'_, PyList>,
    jobs: usize,
    max_events: u64,
    point: Option<usize>,
) -> PyResult<String> {
    let spec = load(py, text, file, dir, overrides)?;
    let opts = RunOptions {
        jobs: jobs.max(1),
        max_events,
        point,
    };
    let out = py.allow_threads(move || -> Result<String, AnyError> {
        let runs = spec.run(&opts, &mut |_| {})?;
        Ok(json!({
            "name": spec.name(),
            "summary": runs.summary_json(),
            "order": runs.tenants(),
            "series": runs.series_json(),
            "occupancy": runs.occupancy_json(),
        })
        .to_string())
    });
    out.map_err(|e| match e {
        AnyError::Spec(e) => spec_error(py, &e.file, &e.field, &e.message),
        // A run error, or a kind added later: reported as a run failure.
        e => sim_error(py, &e.to_string()),
    })
}
