//! What an analysis writes: report blocks for `fairlane_plot`'s page and typed claims, plus
//! the small helpers every analysis shares.

use std::fmt;

use fairlane_plot::{escape, fmt_num, Block, Table};

use crate::claim::Claim;

/// A section being written: blocks in order and the claims judged on the way.
#[derive(Default)]
pub(crate) struct Out {
    pub blocks: Vec<Block>,
    pub claims: Vec<Claim>,
}

impl Out {
    /// Appends raw HTML (merged into the previous HTML block).
    pub fn push_str(&mut self, html: &str) {
        if let Some(Block::Html(h)) = self.blocks.last_mut() {
            h.push_str(html);
        } else {
            self.blocks.push(Block::Html(html.to_string()));
        }
    }

    /// Appends a chart.
    pub fn fig(&mut self, svg: String) {
        self.blocks.push(Block::Svg(svg));
    }

    /// Appends a table.
    pub fn table(&mut self, t: Table) {
        self.blocks.push(Block::Table(t));
    }

    /// Records a claim and shows its verdict line here.
    pub fn claim(&mut self, c: Claim) {
        let v = c.verdict();
        let line = format!(
            "<p class=\"{}\">{}: {}</p>",
            v.class(),
            v.label(),
            escape(&c.text)
        );
        self.push_str(&line);
        self.claims.push(c);
    }

    /// Records a claim whose outcome the section shows in its own way (a table cell).
    pub fn claim_silent(&mut self, c: Claim) {
        self.claims.push(c);
    }
}

impl fmt::Write for Out {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

/// A ratio for a table: `1.5×`, or `-` when there is nothing to divide.
pub(crate) fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{}×", fmt_num(x))
    } else {
        "-".into()
    }
}

/// A number with two decimals, or `-` when missing.
pub(crate) fn fmt2(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".into()
    }
}

/// The mean of the finite values; NaN when there are none.
pub(crate) fn mean(xs: impl IntoIterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The `q` quantile (nearest rank); NaN for no values.
pub(crate) fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The distinct values of `key` over `items`, in first-seen order.
pub(crate) fn distinct<T>(items: &[T], key: impl Fn(&T) -> &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in items {
        let k = key(x);
        if !out.iter().any(|o| o == k) {
            out.push(k.to_string());
        }
    }
    out
}

/// The numbers joined by ", ".
pub(crate) fn join<T: ToString>(xs: impl IntoIterator<Item = T>) -> String {
    xs.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
