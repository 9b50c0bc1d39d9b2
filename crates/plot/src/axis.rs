//! Axes, scales and tick generation.

use crate::fmt::{fmt_num, fmt_sig};

/// How values map to positions along an axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// Proportional; ticks at "nice" numbers 1, 2 or 5 × 10ᵏ.
    #[default]
    Linear,
    /// Base-10 logarithmic; ticks at decades (1, 10, 100 …), with 2× and 5× labelled too when
    /// the range spans less than two decades. Non-positive values are not drawn.
    Log,
}

/// One axis of a chart: its label, scale and optional fixed bounds.
///
/// Bounds left as `None` come from the data, widened to the next nice tick (linear) or
/// decade (log). A bound that cannot be used (NaN, infinite, or non-positive on a log axis)
/// is ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Text under (x) or beside (y) the axis; may be empty.
    pub label: String,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// Fixed lower bound.
    pub min: Option<f64>,
    /// Fixed upper bound.
    pub max: Option<f64>,
}

impl Axis {
    /// A linear axis with bounds from the data.
    pub fn linear(label: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            min: None,
            max: None,
        }
    }

    /// A base-10 logarithmic axis with bounds from the data.
    pub fn log(label: impl Into<String>) -> Self {
        Axis {
            scale: Scale::Log,
            ..Axis::linear(label)
        }
    }

    /// Fixes both bounds.
    pub fn range(mut self, min: f64, max: f64) -> Self {
        self.min = Some(min);
        self.max = Some(max);
        self
    }

    /// Whether `v` can be drawn on this axis: finite, and positive on a log axis.
    pub fn accepts(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }
}

/// A tick mark: labelled ticks also get a grid line, unlabelled ones only a short mark.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    /// Position in data units.
    pub value: f64,
    /// The text drawn beside the tick, if any.
    pub label: Option<String>,
}

/// The "nice" step (1, 2 or 5 × 10ᵏ) that divides `span` into about `target` intervals,
/// as (mantissa, exponent).
fn nice_parts(span: f64, target: usize) -> (f64, i32) {
    let raw = span / target.max(1) as f64;
    if !(raw.is_finite() && raw > 0.0) {
        return (1.0, 0);
    }
    let mut p = raw.log10().floor() as i32;
    let r = raw / pow10(p);
    let nice = if r < 1.5 {
        1.0
    } else if r < 3.0 {
        2.0
    } else if r < 7.0 {
        5.0
    } else {
        p += 1;
        1.0
    };
    (nice, p)
}

/// 10ᵖ, exact for |p| ≤ 22.
fn pow10(p: i32) -> f64 {
    if p >= 0 {
        10f64.powi(p)
    } else {
        1.0 / 10f64.powi(-p)
    }
}

/// k × nice × 10ᵖ, computed so that e.g. 3 × 0.1 is 0.3 and not 0.30000000000000004.
fn multiple(k: f64, nice: f64, p: i32) -> f64 {
    if p >= 0 {
        k * nice * 10f64.powi(p)
    } else {
        k * nice / 10f64.powi(-p)
    }
}

/// The "nice" step (1, 2 or 5 × 10ᵏ) that divides `span` into about `target` intervals.
///
/// ```
/// assert_eq!(fairlane_plot::nice_step(10.0, 5), 2.0);
/// assert_eq!(fairlane_plot::nice_step(0.9, 4), 0.2);
/// ```
pub fn nice_step(span: f64, target: usize) -> f64 {
    let (nice, p) = nice_parts(span, target);
    multiple(1.0, nice, p)
}

/// Labelled ticks at the multiples of [`nice_step`]`(hi - lo, target)` within `[lo, hi]`.
///
/// Labels use [`fmt_num`]'s style with as many significant digits as the step needs to tell
/// neighbours apart (`10.25k`, `10.3k` …). An empty or invalid range gives one tick at `lo`
/// (or none if `lo` is not finite).
///
/// ```
/// let t: Vec<f64> = fairlane_plot::linear_ticks(0.0, 1.0, 5).iter().map(|t| t.value).collect();
/// assert_eq!(t, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
/// ```
pub fn linear_ticks(lo: f64, hi: f64, target: usize) -> Vec<Tick> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return if lo.is_finite() {
            vec![Tick {
                value: lo,
                label: Some(fmt_num(lo)),
            }]
        } else {
            vec![]
        };
    }
    let (nice, p) = nice_parts(hi - lo, target);
    ticks_with(lo, hi, nice, p)
}

fn ticks_with(lo: f64, hi: f64, nice: f64, p: i32) -> Vec<Tick> {
    let step = multiple(1.0, nice, p);
    let k0 = (lo / step - 1e-9).ceil();
    let k1 = (hi / step + 1e-9).floor();
    if !(k0.is_finite() && k1.is_finite()) || k1 - k0 > 1000.0 {
        return vec![];
    }
    let biggest = lo.abs().max(hi.abs());
    let sig = if biggest > 0.0 {
        (biggest.log10().floor() - step.log10().floor() + 1.0).clamp(3.0, 15.0) as usize
    } else {
        3
    };
    let mut ticks = Vec::new();
    let mut k = k0;
    while k <= k1 {
        let mut v = multiple(k, nice, p);
        if v.abs() < step * 1e-9 {
            v = 0.0;
        }
        ticks.push(Tick {
            value: v,
            label: Some(fmt_sig(v, sig)),
        });
        k += 1.0;
    }
    ticks
}

/// Ticks for a log axis over `[lo, hi]` (both positive): labelled decades (every k-th
/// decade when there are more than 10), unlabelled marks at 2…9 × 10ᵏ when the range spans
/// at most 8 decades, and labels at 2× and 5× when it spans less than 2 decades. A range
/// narrower than that labels every 1…9 × 10ᵏ inside, and falls back to linear ticks if that
/// still gives fewer than two labels. An invalid range gives no ticks.
///
/// ```
/// let t = fairlane_plot::log_ticks(1.0, 1000.0);
/// let labels: Vec<_> = t.iter().filter_map(|t| t.label.clone()).collect();
/// assert_eq!(labels, ["1", "10", "100", "1k"]);
/// ```
pub fn log_ticks(lo: f64, hi: f64) -> Vec<Tick> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return vec![];
    }
    let (llo, lhi) = (lo.log10(), hi.log10());
    let span = lhi - llo;
    let d0 = (llo - 1e-9).ceil() as i32;
    let d1 = (lhi + 1e-9).floor() as i32;
    let ndec = (d1 - d0 + 1).max(0);
    let every = if ndec > 10 { (ndec + 7) / 8 } else { 1 };
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let build = |all_minor_labels: bool| {
        let mut ticks = Vec::new();
        for d in (d0 - 1)..=d1 {
            for m in 1..=9 {
                let v = m as f64 * pow10(d);
                if !inside(v) {
                    continue;
                }
                let labelled = if m == 1 {
                    all_minor_labels || (d - d0).rem_euclid(every) == 0
                } else {
                    all_minor_labels || (span < 2.0 && (m == 2 || m == 5))
                };
                if m != 1 && !labelled && span > 8.0 {
                    continue;
                }
                ticks.push(Tick {
                    value: v,
                    label: labelled.then(|| fmt_num(v)),
                });
            }
        }
        ticks
    };
    let labelled = |t: &[Tick]| t.iter().filter(|t| t.label.is_some()).count();
    let ticks = build(false);
    if labelled(&ticks) >= 3 || span >= 2.0 {
        return ticks;
    }
    let ticks = build(true);
    if labelled(&ticks) >= 2 {
        return ticks;
    }
    linear_ticks(lo, hi, 4)
}

/// A resolved axis: its bounds and how to map values into `[0, 1]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scaler {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
}

impl Scaler {
    /// The position of `v` in `[0, 1]` (outside for values out of range); `None` if `v`
    /// cannot be drawn.
    pub fn frac(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.log && v <= 0.0) {
            return None;
        }
        let f = if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        f.is_finite().then_some(f)
    }
}

/// Bounds and ticks for `axis` given the data's range (`None` if no drawable data).
/// With `nice`, bounds not fixed by the axis are widened to the next tick or decade.
pub(crate) fn resolve(
    axis: &Axis,
    data: Option<(f64, f64)>,
    target: usize,
    nice: bool,
) -> (Scaler, Vec<Tick>) {
    let umin = axis.min.filter(|v| axis.accepts(*v));
    let umax = axis.max.filter(|v| axis.accepts(*v));
    match axis.scale {
        Scale::Log => {
            let (dlo, dhi) = data.unwrap_or((1.0, 10.0));
            let mut lo = umin.unwrap_or_else(|| {
                if nice {
                    pow10(dlo.log10().floor() as i32)
                } else {
                    dlo
                }
            });
            let mut hi = umax.unwrap_or_else(|| {
                if nice {
                    pow10(dhi.log10().ceil() as i32)
                } else {
                    dhi
                }
            });
            // Decades beyond f64's range: keep the data's bounds.
            if !(lo > 0.0 && lo.is_finite()) {
                lo = dlo;
            }
            if !hi.is_finite() {
                hi = dhi;
            }
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if hi <= lo * (1.0 + 1e-12) {
                if umax.is_some() && umin.is_none() {
                    lo = hi / 10.0;
                } else {
                    hi = lo * 10.0;
                }
            }
            let s = Scaler { lo, hi, log: true };
            (s, log_ticks(lo, hi))
        }
        Scale::Linear => {
            let (dlo, dhi) = data.unwrap_or((0.0, 1.0));
            let mut lo = umin.unwrap_or(dlo);
            let mut hi = umax.unwrap_or(dhi);
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if hi - lo <= lo.abs().max(hi.abs()) * 1e-12 {
                let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
                let both = umin.is_some() && umax.is_some();
                if umin.is_none() || both {
                    lo -= pad;
                }
                if umax.is_none() || both {
                    hi += pad;
                }
            }
            let (nice_m, p) = nice_parts(hi - lo, target);
            if nice {
                let step = multiple(1.0, nice_m, p);
                if umin.is_none() {
                    lo = multiple((lo / step + 1e-9).floor(), nice_m, p);
                }
                if umax.is_none() {
                    hi = multiple((hi / step - 1e-9).ceil(), nice_m, p);
                }
            }
            let s = Scaler { lo, hi, log: false };
            (s, ticks_with(lo, hi, nice_m, p))
        }
    }
}

/// The (min, max) of the values `axis` accepts, if any.
pub(crate) fn extent(axis: &Axis, values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let mut out: Option<(f64, f64)> = None;
    for v in values.filter(|v| axis.accepts(*v)) {
        out = Some(match out {
            None => (v, v),
            Some((a, b)) => (a.min(v), b.max(v)),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: &[Tick]) -> Vec<f64> {
        t.iter().map(|t| t.value).collect()
    }
    fn labels(t: &[Tick]) -> Vec<String> {
        t.iter().filter_map(|t| t.label.clone()).collect()
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(1.0, 10), 0.1);
        assert_eq!(nice_step(7.0, 1), 10.0);
        assert_eq!(nice_step(3.3, 1), 5.0);
        assert_eq!(nice_step(0.003, 3), 0.001);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(nice_step(f64::NAN, 5), 1.0);
    }

    #[test]
    fn linear_ticks_are_nice_and_exact() {
        assert_eq!(
            values(&linear_ticks(0.0, 1.0, 5)),
            [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        assert_eq!(
            labels(&linear_ticks(0.0, 1.0, 10)),
            ["0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1"]
        );
        assert_eq!(
            values(&linear_ticks(-0.3, 0.3, 6)),
            [-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3]
        );
        assert_eq!(
            values(&linear_ticks(3.0, 97.0, 5)),
            [20.0, 40.0, 60.0, 80.0]
        );
        assert_eq!(
            labels(&linear_ticks(0.0, 5000.0, 5)),
            ["0", "1k", "2k", "3k", "4k", "5k"]
        );
        // Neighbours stay distinguishable when the step is small against the values.
        assert_eq!(
            labels(&linear_ticks(10200.0, 10300.0, 2)),
            ["10.2k", "10.25k", "10.3k"]
        );
        assert_eq!(values(&linear_ticks(5.0, 5.0, 5)), [5.0]);
        assert!(linear_ticks(f64::NAN, 1.0, 5).is_empty());
    }

    #[test]
    fn log_ticks_at_decades() {
        let t = log_ticks(1.0, 1e6);
        assert_eq!(labels(&t), ["1", "10", "100", "1k", "10k", "100k", "1M"]);
        // Unlabelled minor marks at 2…9 × 10ᵏ: 6 decades × 8.
        assert_eq!(t.len(), 7 + 6 * 8);
        let t = log_ticks(1e-4, 1e-1);
        assert_eq!(labels(&t), ["1e-4", "0.001", "0.01", "0.1"]);
        // Many decades: every k-th decade labelled, no minor marks.
        let t = log_ticks(1e-10, 1e10);
        assert_eq!(t.len(), 21);
        assert!(labels(&t).len() <= 11);
        assert!(t
            .iter()
            .all(|t| (t.value.log10().round() - t.value.log10()).abs() < 1e-9));
    }

    #[test]
    fn log_ticks_label_minors_in_short_ranges() {
        let t = log_ticks(1.0, 100.0);
        assert_eq!(labels(&t), ["1", "10", "100"]);
        let t = log_ticks(1.0, 50.0);
        assert_eq!(labels(&t), ["1", "2", "5", "10", "20", "50"]);
        let t = log_ticks(20.0, 80.0);
        assert_eq!(labels(&t), ["20", "30", "40", "50", "60", "70", "80"]);
        let t = log_ticks(21.0, 29.0);
        assert!(labels(&t).len() >= 2);
        assert!(log_ticks(0.0, 10.0).is_empty());
        assert!(log_ticks(10.0, 1.0).is_empty());
    }

    #[test]
    fn resolve_pads_and_widens() {
        let (s, t) = resolve(&Axis::linear(""), Some((0.3, 9.4)), 5, true);
        assert_eq!((s.lo, s.hi), (0.0, 10.0));
        assert_eq!(t.first().unwrap().value, 0.0);
        assert_eq!(t.last().unwrap().value, 10.0);
        let (s, _) = resolve(&Axis::linear(""), Some((5.0, 5.0)), 5, true);
        assert!(s.lo < 5.0 && s.hi > 5.0);
        let (s, _) = resolve(&Axis::linear(""), Some((0.0, 0.0)), 5, true);
        assert!(s.lo < 0.0 && s.hi > 0.0);
        let (s, _) = resolve(&Axis::linear("").range(2.0, 2.0), None, 5, true);
        assert!(s.lo < s.hi);
        let (s, _) = resolve(&Axis::log(""), Some((3.0, 420.0)), 5, true);
        assert_eq!((s.lo, s.hi), (1.0, 1000.0));
        let (s, _) = resolve(&Axis::log(""), Some((10.0, 10.0)), 5, true);
        assert!(s.lo < s.hi);
        let (s, _) = resolve(&Axis::log("").range(0.0, 100.0), Some((5.0, 50.0)), 5, true);
        assert_eq!((s.lo, s.hi), (1.0, 100.0));
        let (s, t) = resolve(&Axis::log(""), None, 5, true);
        assert_eq!((s.lo, s.hi), (1.0, 10.0));
        assert!(!t.is_empty());
    }
}
