//! Shared drawing vocabulary: colours per problem kind, text escaping, text width.

use crate::analysis::{Problem, ProblemKind};
use crate::model::{Model, Resource};

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

/// Which findings a drawing marks on each stage, resolved once (a finding may name every
/// stage of a large model): a blocking finding marks the blocked stage only, the dashed
/// arrows already lead to the stages it waits on; the others mark every stage they name.
pub(crate) struct Marks<'a> {
    findings: &'a [Problem],
    /// Per stage (index in `Model::stages`), the indices of the findings marking it,
    /// ascending.
    per_stage: Vec<Vec<usize>>,
}

impl<'a> Marks<'a> {
    pub(crate) fn new(model: &Model, findings: &'a [Problem]) -> Marks<'a> {
        let index = model.names();
        let mut per_stage: Vec<Vec<usize>> = vec![Vec::new(); model.stages.len()];
        for (k, p) in findings.iter().enumerate() {
            let named = if p.kind == ProblemKind::Blocking {
                &p.stages[..p.stages.len().min(1)]
            } else {
                &p.stages[..]
            };
            for name in named {
                if let Some(&i) = index.get(name.as_str()) {
                    if per_stage[i].last() != Some(&k) {
                        per_stage[i].push(k);
                    }
                }
            }
        }
        Marks {
            findings,
            per_stage,
        }
    }

    /// The findings marking stage `i`, with their numbers (0-based), in report order.
    pub(crate) fn on(&self, i: usize) -> impl Iterator<Item = (usize, &'a Problem)> + '_ {
        self.per_stage[i].iter().map(|&k| (k, &self.findings[k]))
    }

    /// The first finding marking stage `i` (its colour draws the stage's border).
    pub(crate) fn first(&self, i: usize) -> Option<&'a Problem> {
        self.on(i).next().map(|(_, p)| p)
    }

    /// Whether a blocking finding is about stage `i` (its arrows are drawn bolder).
    pub(crate) fn blocked(&self, i: usize) -> bool {
        self.on(i).any(|(_, p)| p.kind == ProblemKind::Blocking)
    }

    /// The first finding marking resource `r` on stage `i`: blocking marks no resource boxes
    /// (the dashed arrows carry it); the others mark the resources they name.
    pub(crate) fn resource(&self, i: usize, r: Resource) -> Option<&'a Problem> {
        self.on(i)
            .map(|(_, p)| p)
            .find(|p| p.kind != ProblemKind::Blocking && p.resources.contains(&r))
    }
}
