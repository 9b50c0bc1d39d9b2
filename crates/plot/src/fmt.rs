//! Escaping and number formatting.

/// Escapes `s` for XML and HTML text and attribute values (`&`, `<`, `>`, `"`, `'`).
///
/// Control characters that XML 1.0 forbids (everything below U+0020 except tab, newline and
/// carriage return, and U+FFFE/U+FFFF) become U+FFFD, so any string yields a well-formed
/// document.
///
/// ```
/// assert_eq!(fairlane_plot::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
/// ```
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Compact human formatting with 3 significant digits: `0.123`, `1.5`, `12.3`, `1.23k`,
/// `45.6M`, `1.5e-4`, `2e15`.
///
/// Magnitudes from 0.001 up to 10¹⁵ are written out, with the suffixes k, M, G and T from
/// 1000 on; smaller and larger ones in scientific notation. Trailing zeros are dropped.
/// NaN is `NaN`, infinities are `inf` and `-inf`.
///
/// ```
/// use fairlane_plot::fmt_num;
/// assert_eq!(fmt_num(1234.0), "1.23k");
/// assert_eq!(fmt_num(0.00015), "1.5e-4");
/// assert_eq!(fmt_num(2.50), "2.5");
/// ```
pub fn fmt_num(x: f64) -> String {
    fmt_sig(x, 3)
}

/// [`fmt_num`] with `sig` significant digits (clamped to 1..=17).
///
/// ```
/// assert_eq!(fairlane_plot::fmt_sig(10250.0, 4), "10.25k");
/// ```
pub fn fmt_sig(x: f64, sig: usize) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let sig = sig.clamp(1, 17);
    // Rust's `{:e}` rounds correctly and carries into the exponent (999.7 → 1.00e3).
    let s = format!("{:.*e}", sig - 1, x.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let body = if !(-3..15).contains(&exp) {
        format!("{}e{exp}", trim_zeros(mant))
    } else if exp >= 0 {
        let group = (exp / 3) as usize;
        let shift = (exp % 3) as usize;
        let suffix = ["", "k", "M", "G", "T"][group];
        format!("{}{suffix}", place_point(&digits, shift))
    } else {
        let zeros = "0".repeat((-exp - 1) as usize);
        trim_zeros(&format!("0.{zeros}{digits}")).to_string()
    };
    if x < 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

/// `digits` with the decimal point after digit `shift` (0-based), trailing zeros trimmed.
fn place_point(digits: &str, shift: usize) -> String {
    let mut d = digits.to_string();
    while d.len() < shift + 1 {
        d.push('0');
    }
    let (int, frac) = d.split_at(shift + 1);
    if frac.is_empty() {
        int.to_string()
    } else {
        trim_zeros(&format!("{int}.{frac}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A coordinate with at most 2 decimals, trailing zeros trimmed; never `-0`, never NaN.
pub(crate) fn c(x: f64) -> String {
    if !x.is_finite() {
        return "0".into();
    }
    let s = format!("{:.2}", x.clamp(-1e7, 1e7));
    let t = trim_zeros(&s);
    if t == "-0" {
        "0".into()
    } else {
        t.to_string()
    }
}

/// Whether a table cell looks like a number: an optional sign, a number Rust can parse
/// (including `inf` and `NaN`), and optionally one of the suffixes `%`, `k`, `M`, `G`, `T`,
/// `x`, `×`, or a time unit (`s`, `ms`, `µs`, `us`, `ns`), possibly after a space.
///
/// ```
/// use fairlane_plot::is_numeric;
/// assert!(is_numeric("1.23k") && is_numeric("-4%") && is_numeric("1.5e-4") && is_numeric("3 ms"));
/// assert!(!is_numeric("2DFQ") && !is_numeric("") && !is_numeric("k"));
/// ```
pub fn is_numeric(s: &str) -> bool {
    let mut t = s.trim();
    for prefix in ["+", "-", "\u{2212}"] {
        if let Some(rest) = t.strip_prefix(prefix) {
            t = rest;
            break;
        }
    }
    for suffix in [
        "%", "k", "M", "G", "T", "x", "\u{d7}", "ms", "\u{b5}s", "us", "ns", "s",
    ] {
        if let Some(rest) = t.strip_suffix(suffix) {
            t = rest.trim_end();
            break;
        }
    }
    if t.is_empty() || t.starts_with(['+', '-']) {
        return false;
    }
    t.parse::<f64>().is_ok()
}

/// FNV-1a, for deterministic element ids.
pub(crate) fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
