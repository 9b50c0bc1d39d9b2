//! SVG charts and standalone HTML report pages for fairlane's reports, with no dependencies
//! beyond `std`.
//!
//! - [`LineChart`] (with [`Series`] in [`Style::Line`], [`Style::Step`], [`Style::Points`]
//!   or [`Style::LinePoints`]) and [`cdf`] for empirical CDFs;
//! - [`BarChart`]: grouped bars, linear or log;
//! - [`Occupancy`]: one heat strip per worker over time;
//! - [`Table`] and [`Page`]: a complete HTML5 document with inline CSS and no script.
//!
//! Axes ([`Axis`]) are linear with "nice" ticks (1, 2, 5 × 10ᵏ) or base-10 logarithmic with
//! decade ticks. Every function is pure and deterministic: the same input gives
//! byte-identical output (coordinates have at most 2 decimals). Bad data does not panic:
//! NaN and infinite points are skipped, so are non-positive values on a log axis, and a
//! chart without drawable data says "no data".
//!
//! ```
//! use fairlane_plot::{Axis, LineChart, Series};
//!
//! let svg = LineChart::new("queue length", Axis::linear("time (s)"), Axis::linear("requests"))
//!     .series(Series::new("tenant A", vec![(0.0, 1.0), (1.0, 4.0), (2.0, 2.0)]))
//!     .to_svg();
//! assert!(svg.starts_with("<svg") && svg.contains("tenant A"));
//! ```

mod axis;
mod bar;
mod fmt;
mod html;
mod line;
mod occupancy;
mod svg;

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;

pub use axis::{linear_ticks, log_ticks, nice_step, Axis, Scale, Tick};
pub use bar::BarChart;
pub use fmt::{escape, fmt_num, fmt_sig, is_numeric};
pub use html::{Block, Page, Section, Table};
pub use line::{cdf, cdf_points, downsample, LineChart, Series, Style};
pub use occupancy::Occupancy;
pub use svg::{palette, PALETTE};
