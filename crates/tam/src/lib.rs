//! Thread Architecture Models (TAMs): say whether a service *can* be scheduled.
//!
//! After Yang et al., "Principled Schedulability Analysis for Distributed Storage Systems
//! using Thread Architecture Models", OSDI '18. A TAM describes a service as stages of
//! threads — each on a host, with a resource usage pattern, an ordering constraint and a
//! scheduling type — linked by *downstream* and *blocking* relations (§2.4, Definitions 1
//! and 2). Five predicates over the model (§3) find the problems that keep any scheduler
//! from isolating tenants: no scheduling, unknown resource usage, hidden contention,
//! blocking and ordering constraint.
//!
//! This crate reads models from TOML ([`Model::from_toml`]), runs the analysis
//! ([`analyze`]), tries architectural changes ([`whatif::what_if`]), draws Thread
//! Architecture Diagrams as DOT or SVG ([`render_dot()`], [`render_svg()`]) and ships the
//! paper's models ([`catalog`]).
//!
//! ```
//! use fairlane_tam::{analyze, Model, ProblemKind};
//!
//! // Fig. 8a of the paper: an on-demand I/O stage behind a scheduled request handler.
//! let model = Model::from_toml(r#"
//!     [model]
//!     name = "Fig. 8a"
//!
//!     [[stage]]
//!     name = "Req Handle"
//!     scheduling = "pluggable"
//!     resources = { cpu = true }
//!     downstream = ["I/O"]
//!
//!     [[stage]]
//!     name = "I/O"
//!     scheduling = "on_demand"
//!     resources = { io = true }
//! "#).unwrap();
//!
//! let report = analyze(&model);
//! assert_eq!(report.problems.len(), 1);
//! assert_eq!(report.problems[0].kind, ProblemKind::NoScheduling);
//! assert_eq!(report.problems[0].stages, ["I/O"]);
//! ```
#![forbid(unsafe_code)]

pub mod analysis;
pub mod catalog;
pub mod discover;
pub mod error;
pub mod format;
mod layout;
pub mod model;
pub mod render_dot;
pub mod render_svg;
mod style;
pub mod whatif;

pub use analysis::{analyze, Problem, ProblemKind, Report};
pub use error::{FieldError, ModelError};
pub use model::{Model, Resource, ResourceVector, Scheduling, Stage, Usage};
pub use render_dot::render_dot;
pub use render_svg::render_svg;
pub use whatif::{what_if, Change, WhatIf};

/// Options for drawing a diagram.
#[derive(Debug, Clone, Default)]
pub struct DrawOptions {
    /// Mark the stages and resources of these findings (usually `analyze(&model)`).
    pub highlight: Option<Report>,
}
