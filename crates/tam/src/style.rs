//! Shared drawing vocabulary: colours per problem kind, text escaping, text width.

use crate::analysis::ProblemKind;

/// Stroke colour marking a finding of `kind`.
pub fn kind_color(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::NoScheduling => "#d9480f",
        ProblemKind::UnknownResourceUsage => "#7048e8",
        ProblemKind::HiddenContention => "#c92a2a",
        ProblemKind::Blocking => "#1971c2",
        ProblemKind::OrderingConstraint => "#2b8a3e",
    }
}

/// Light fill for resource boxes involved in a finding of `kind`.
pub fn kind_fill(kind: ProblemKind) -> &'static str {
    match kind {
        ProblemKind::NoScheduling => "#ffe8cc",
        ProblemKind::UnknownResourceUsage => "#e5dbff",
        ProblemKind::HiddenContention => "#ffe3e3",
        ProblemKind::Blocking => "#d0ebff",
        ProblemKind::OrderingConstraint => "#d3f9d8",
    }
}

/// Escapes text for XML (SVG) and Graphviz HTML-like labels.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Approximate width of `text` in a sans-serif font of `size` px. Without font metrics we
/// over-estimate slightly so that text stays inside its box.
pub fn text_width(text: &str, size: f64) -> f64 {
    let units: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '|' | '!' | '\'' | ' ' => 0.32,
            'f' | 't' | 'r' | 'I' | '(' | ')' | '[' | ']' | '/' | '-' => 0.42,
            'm' | 'w' | 'M' | 'W' => 0.9,
            c if c.is_ascii_uppercase() || c.is_ascii_digit() => 0.68,
            _ => 0.58,
        })
        .sum();
    units * size
}
