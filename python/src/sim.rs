//! Running specs: parse (with overrides), run one point or all, and return the CLI's JSON
//! summary plus the series.

use std::path::PathBuf;

use fairlane_sim::{dbreport, report, AnyRuns, AnySpec, RunResult};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{json, Value};

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
/// `(field path, value)`.
fn load(
    py: Python<'_>,
    text: &str,
    file: &str,
    dir: &str,
    overrides: &Bound<'_, PyList>,
) -> PyResult<AnySpec> {
    let mut spec = AnySpec::parse(text, file, PathBuf::from(dir))
        .map_err(|e| spec_error(py, &e.file, &e.field, &e.message))?;
    for item in overrides.iter() {
        let (path, value): (String, Bound<'_, PyAny>) = item.extract()?;
        let value = to_toml(&value, &path)?;
        spec.set(&path, value)
            .map_err(|e| spec_error(py, &e.file, &e.field, &e.message))?;
    }
    Ok(spec)
}

/// How many tasks a spec splits into: its points (sweep points or suite runs; 1 for a plain
/// spec). A database-server or TAM spec runs as one task.
#[pyfunction]
pub fn count_points(
    py: Python<'_>,
    text: &str,
    file: &str,
    dir: &str,
    overrides: &Bound<'_, PyList>,
) -> PyResult<usize> {
    match load(py, text, file, dir, overrides)? {
        AnySpec::Pool(s) => s
            .scenarios()
            .map(|v| v.len())
            .map_err(|e| spec_error(py, &e.file, &e.field, &e.message)),
        AnySpec::Cores { .. } | AnySpec::Tam(_) => Ok(1),
    }
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
    let name = spec.name().to_string();
    let out = py.allow_threads(move || -> Result<String, (bool, String, String, String)> {
        let runs = match (&spec, point) {
            (AnySpec::Pool(s), Some(i)) => {
                let mut scenarios = s
                    .scenarios()
                    .map_err(|e| (true, e.file, e.field, e.message))?;
                if i >= scenarios.len() {
                    return Err((
                        false,
                        String::new(),
                        String::new(),
                        format!("point {i} out of range: the spec has {}", scenarios.len()),
                    ));
                }
                let mut one = scenarios.swap_remove(i);
                one.max_events = max_events;
                fairlane_sim::run_all_batch(&[one], jobs, &mut |_| {})
                    .map(AnyRuns::Pool)
                    .map_err(|e| (false, String::new(), String::new(), e.to_string()))?
            }
            _ => spec.run(jobs, max_events, &mut |_| {}).map_err(|e| match e {
                fairlane_sim::AnyError::Spec(e) => (true, e.file, e.field, e.message),
                // A run error, or a kind added later: reported as a run failure.
                e => (false, String::new(), String::new(), e.to_string()),
            })?,
        };
        Ok(match &runs {
            AnyRuns::Pool(r) => json!({
                "name": name,
                "summary": report::summary_json(r),
                "order": r.iter().map(|x| x.tenants.iter().map(|t| t.name.clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "series": r.iter().map(series_json).collect::<Vec<_>>(),
                "occupancy": r.iter().map(|x| json!({"t0": x.occupancy.t0, "dt": x.occupancy.dt, "cells": x.occupancy.cells})).collect::<Vec<_>>(),
            }),
            AnyRuns::Cores(r) => json!({
                "name": name,
                "summary": dbreport::summary_json(r),
                "order": r.iter().map(|x| x.tenants.iter().map(|t| t.name.clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "series": [],
                "occupancy": [],
            }),
            AnyRuns::Tam(r) => json!({
                "name": name,
                "summary": fairlane_sim::tam::summary_json(r),
                "order": r.iter().map(|x| x.clients.iter().map(|c| c.name.clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "series": [],
                "occupancy": [],
            }),
        }
        .to_string())
    });
    out.map_err(|(is_spec, file, field, message)| {
        if is_spec {
            spec_error(py, &file, &field, &message)
        } else {
            sim_error(py, &message)
        }
    })
}

/// One run's time series in long form: `[[series, tenant, t, value], …]`.
fn series_json(r: &RunResult) -> Value {
    let mut rows: Vec<Value> = Vec::new();
    for s in &r.series {
        for (t, v) in &s.service {
            rows.push(json!(["service", s.name, t, v]));
        }
        for (t, v) in &s.lag {
            rows.push(json!(["lag", s.name, t, v]));
        }
    }
    for (t, g) in &r.gini {
        rows.push(json!(["gini", "", t, g]));
    }
    if let Some(bb) = &r.blackbox {
        for t in &bb.tenants {
            for (x, y) in &t.response {
                rows.push(json!(["response", t.name, x, y]));
            }
            for (x, y) in &t.throughput {
                rows.push(json!(["throughput", t.name, x, y]));
            }
        }
        for (x, y) in &bb.depth {
            rows.push(json!(["depth", "", x, y]));
        }
    }
    Value::Array(rows)
}
