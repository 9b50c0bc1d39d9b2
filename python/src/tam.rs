//! Thread Architecture Models: the five-problem analysis and diagrams, from a file or a
//! catalog entry.

use fairlane_tam::{analyze, catalog, render_svg, DrawOptions, Model};
use pyo3::prelude::*;

use crate::spec_error;

/// A model from a file path, or else a catalog entry of that name.
fn model(py: Python<'_>, path: &str) -> PyResult<Model> {
    let loaded = if std::path::Path::new(path).exists() {
        Model::load(path)
    } else if let Some(entry) = catalog::get(path) {
        entry.model()
    } else {
        return Err(spec_error(
            py,
            path,
            "",
            "cannot read: no such file (nor a catalog model of that name)",
        ));
    };
    loaded.map_err(|e| {
        // The field of the first error (`stage[NAME].FIELD`); the message has them all.
        let field = e
            .errors
            .first()
            .map(|f| match (&f.stage, &f.field) {
                (Some(s), Some(x)) => format!("stage[{s:?}].{x}"),
                (Some(s), None) => format!("stage[{s:?}]"),
                (None, Some(x)) => x.clone(),
                (None, None) => String::new(),
            })
            .unwrap_or_default();
        spec_error(
            py,
            e.file.as_deref().unwrap_or(path),
            &field,
            &e.to_string(),
        )
    })
}

/// `(model name, Table 2 row, report JSON)` of a model.
#[pyfunction]
pub fn tam_check(py: Python<'_>, path: &str) -> PyResult<(String, String, String)> {
    let m = model(py, path)?;
    let r = analyze(&m);
    Ok((m.name.clone(), r.table2_row(), r.to_json()))
}

/// The model's Thread Architecture Diagram as SVG text.
#[pyfunction]
#[pyo3(signature = (path, highlight=true))]
pub fn tam_draw(py: Python<'_>, path: &str, highlight: bool) -> PyResult<String> {
    let m = model(py, path)?;
    let options = DrawOptions {
        highlight: highlight.then(|| analyze(&m)),
    };
    Ok(render_svg(&m, &options))
}

/// The names of the catalog's models, in Table 2 order.
#[pyfunction]
pub fn tam_catalog() -> Vec<&'static str> {
    catalog::CATALOG.iter().map(|e| e.name).collect()
}
