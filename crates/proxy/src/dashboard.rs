//! The live dashboard: one HTML page, no build step, polling `/status` every second.

pub(crate) const HTML: &str = include_str!("dashboard.html");
