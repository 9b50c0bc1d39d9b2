//! `fairlane._fairlane`: the native half of the `fairlane` Python package. Thin adapters over
//! the Rust crates; every number comes from them. Simulation results cross as the JSON the
//! CLI prints (`fairlane simulate --json`, the same serializer) plus the time series, so the
//! Python side shows exactly the CLI's numbers.

#![warn(missing_docs)]

mod sched;
mod sim;
mod tam;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _fairlane(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<sched::Scheduler>()?;
    m.add_class::<sched::Dispatch>()?;
    m.add_function(wrap_pyfunction!(sim::run_spec, m)?)?;
    m.add_function(wrap_pyfunction!(sim::count_points, m)?)?;
    m.add_function(wrap_pyfunction!(sim::dict_to_toml, m)?)?;
    m.add_function(wrap_pyfunction!(tam::tam_check, m)?)?;
    m.add_function(wrap_pyfunction!(tam::tam_draw, m)?)?;
    m.add_function(wrap_pyfunction!(tam::tam_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(sched::presets, m)?)?;
    m.add(
        "DEFAULT_MAX_EVENTS",
        fairlane_sim::events::DEFAULT_MAX_EVENTS,
    )?;
    Ok(())
}

/// Raise `fairlane.SpecError(file, field, message)` (defined in Python so it can carry
/// attributes and be pickled across Dask workers).
pub(crate) fn spec_error(py: Python<'_>, file: &str, field: &str, message: &str) -> PyErr {
    match py
        .import("fairlane._errors")
        .and_then(|m| m.getattr("SpecError"))
        .and_then(|c| c.call1((file, field, message)))
    {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

/// Raise `fairlane.SimulationError(message)`.
pub(crate) fn sim_error(py: Python<'_>, message: &str) -> PyErr {
    match py
        .import("fairlane._errors")
        .and_then(|m| m.getattr("SimulationError"))
        .and_then(|c| c.call1((message,)))
    {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}
