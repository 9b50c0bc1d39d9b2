//! Prometheus's text format (0.0.4), the pieces every part of `/metrics` writes with: the
//! header of a family, a sample, a label value escaped, a histogram's cumulative buckets.

use std::borrow::Cow;
use std::fmt::{Display, Write as _};

use crate::histogram::BUCKETS;

/// Escape a Prometheus label value (text format 0.0.4): backslash, double quote and line
/// feed. Tenant names are validated at load and never need it; this keeps the exposition
/// well-formed whatever a name holds.
pub fn label(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    Cow::Owned(o)
}

/// The `# HELP` and `# TYPE` lines of the family `name` (`kind`: gauge, counter, histogram).
pub fn family(o: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One sample, `name{labels} value`; `labels` written as `key="value",…` (empty: none).
pub fn sample(o: &mut String, name: &str, labels: &str, value: impl Display) {
    let _ = match labels.is_empty() {
        true => writeln!(o, "{name} {value}"),
        false => writeln!(o, "{name}{{{labels}}} {value}"),
    };
}

/// The kind of a gauge or counter family, by Prometheus's naming rule: a name ending in
/// `_total` is a counter, any other a gauge.
pub fn kind(name: &str) -> &'static str {
    match name.ends_with("_total") {
        true => "counter",
        false => "gauge",
    }
}

/// Gauges and counters of one unlabelled sample each: (name, help, value), the kind by
/// [`kind`].
pub fn plain<V: Display>(
    o: &mut String,
    rows: impl IntoIterator<Item = (&'static str, &'static str, V)>,
) {
    for (name, help, value) in rows {
        family(o, name, help, kind(name));
        sample(o, name, "", value);
    }
}

/// A gauge or counter family (the kind by [`kind`]) of one sample per row, labelled
/// `key="…"` by `label_of` (escaped here).
pub fn labelled<T>(
    o: &mut String,
    (name, help): (&str, &str),
    key: &str,
    rows: &[T],
    label_of: impl Fn(&T) -> &str,
    value: impl Fn(&T) -> f64,
) {
    family(o, name, help, kind(name));
    for r in rows {
        sample(
            o,
            name,
            &format!("{key}=\"{}\"", label(label_of(r))),
            value(r),
        );
    }
}

/// A reader of one number of a `T`, for the tables of [`labelled`] families.
pub type Reader<T> = fn(&T) -> f64;

/// A table of families over one row type: `(name, help, reader)` per family, each reader a
/// numeric expression of the row (bound to `$r`) read as `f64`:
/// `readers![t: Tenant; "name" => t.field, "help"; …]`.
macro_rules! readers {
    ($r:ident: $t:ty; $($name:literal => $get:expr, $help:literal;)*) => {
        [$(($name, $help, (|$r: &$t| ($get) as f64) as $crate::prom::Reader<$t>)),*]
    };
}
pub(crate) use readers;

/// One label set's samples of the histogram `name` over [`BUCKETS`]: the cumulative
/// `_bucket`s from per-bucket `counts` (the last one +Inf), `_count` and `_sum`.
pub fn histogram(o: &mut String, name: &str, labels: &str, counts: &[u64], sum: f64) {
    let mut cumulative = 0;
    for (i, c) in counts.iter().enumerate() {
        cumulative += c;
        let le = BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(o, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(o, "{name}_count{{{labels}}} {cumulative}");
    let _ = writeln!(o, "{name}_sum{{{labels}}} {sum}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("plain"), "plain");
        assert_eq!(label("t0\\"), "t0\\\\");
        assert_eq!(label("a\"b"), "a\\\"b");
        assert_eq!(label("x\ny"), "x\\ny");
    }

    #[test]
    fn the_kind_follows_the_name() {
        assert_eq!(kind("fairlane_proxy_received_total"), "counter");
        assert_eq!(kind("fairlane_proxy_queued"), "gauge");
        let mut o = String::new();
        plain(&mut o, [("a_total", "A.", 2), ("b", "B.", 3)]);
        assert_eq!(
            o,
            "# HELP a_total A.\n# TYPE a_total counter\na_total 2\n# HELP b B.\n# TYPE b gauge\nb 3\n"
        );
    }

    #[test]
    fn histograms_are_cumulative() {
        let mut o = String::new();
        let mut counts = vec![0; BUCKETS.len() + 1];
        counts[0] = 2;
        counts[BUCKETS.len()] = 1;
        histogram(&mut o, "h", "t=\"a\"", &counts, 9.5);
        assert!(o.contains("h_bucket{t=\"a\",le=\"0.0001\"} 2\n"), "{o}");
        assert!(o.contains("h_bucket{t=\"a\",le=\"60\"} 2\n"), "{o}");
        assert!(o.contains("h_bucket{t=\"a\",le=\"+Inf\"} 3\n"), "{o}");
        assert!(
            o.ends_with("h_count{t=\"a\"} 3\nh_sum{t=\"a\"} 9.5\n"),
            "{o}"
        );
    }
}
