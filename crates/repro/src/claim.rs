//! Typed claims: what the paper says, what we measured, the margin, and a verdict with three
//! outcomes. A claim is judged from numbers only; its sentence is for the reader.

use std::fmt;

/// How our value must relate to the target for a check to hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Relation {
    /// `ours >= target`.
    AtLeast,
    /// `ours <= target`.
    AtMost,
    /// `ours > target`.
    Above,
    /// `ours < target`.
    Below,
    /// `|ours − target| <= margin`.
    Within(f64),
}

/// One number of a claim against its target.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What is measured, e.g. "T8's CPU % under LDF, 4 bullies".
    pub quantity: String,
    /// Our value.
    pub ours: f64,
    /// The paper's value, or the bound the paper's claim sets (read from the spec where the
    /// spec defines it, e.g. a tenant's reservation).
    pub target: f64,
    /// How `ours` must relate to `target`; [`Relation::Within`] carries the margin.
    pub relation: Relation,
}

impl Check {
    /// A check of `ours` against `target`.
    pub fn new(quantity: impl Into<String>, ours: f64, relation: Relation, target: f64) -> Self {
        Check {
            quantity: quantity.into(),
            ours,
            target,
            relation,
        }
    }

    /// Whether both numbers (and the margin) are finite: without them there is no verdict.
    pub fn has_data(&self) -> bool {
        let margin = match self.relation {
            Relation::Within(m) => m,
            _ => 0.0,
        };
        self.ours.is_finite() && self.target.is_finite() && margin.is_finite()
    }

    /// Whether the check holds. False when data is missing (see [`Check::has_data`]).
    pub fn holds(&self) -> bool {
        if !self.has_data() {
            return false;
        }
        let (x, t) = (self.ours, self.target);
        match self.relation {
            Relation::AtLeast => x >= t,
            Relation::AtMost => x <= t,
            Relation::Above => x > t,
            Relation::Below => x < t,
            Relation::Within(m) => (x - t).abs() <= m,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rel = match self.relation {
            Relation::AtLeast => "≥".to_string(),
            Relation::AtMost => "≤".to_string(),
            Relation::Above => ">".to_string(),
            Relation::Below => "<".to_string(),
            Relation::Within(m) => format!("within {m} of"),
        };
        write!(
            f,
            "{}: ours {} (must be {rel} {}): {}",
            self.quantity,
            self.ours,
            self.target,
            if !self.has_data() {
                "no data"
            } else if self.holds() {
                "holds"
            } else {
                "fails"
            }
        )
    }
}

/// The outcome of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Every check holds.
    Reproduced,
    /// All numbers are there and at least one check fails.
    NotReproduced,
    /// A number is missing or not finite, or the claim has no checks at all: nothing was
    /// measured, so nothing can be said.
    NoData,
}

impl Verdict {
    /// The word the report uses.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NoData => "no data",
        }
    }

    /// The CSS class of the report's verdict line.
    pub fn class(self) -> &'static str {
        match self {
            Verdict::Reproduced => "ok",
            _ => "bad",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One claim of a paper, judged on our numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// A short stable name within its experiment (tests find claims by it).
    pub id: String,
    /// The sentence the report shows, with our numbers in it.
    pub text: String,
    /// The numbers the verdict is computed from.
    pub checks: Vec<Check>,
}

impl Claim {
    /// A claim with no checks yet (a claim without checks has no data).
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Claim {
            id: id.into(),
            text: text.into(),
            checks: Vec::new(),
        }
    }

    /// Adds a check.
    pub fn check(
        mut self,
        quantity: impl Into<String>,
        ours: f64,
        relation: Relation,
        target: f64,
    ) -> Self {
        self.checks
            .push(Check::new(quantity, ours, relation, target));
        self
    }

    /// Adds a check in place.
    pub fn push(
        &mut self,
        quantity: impl Into<String>,
        ours: f64,
        relation: Relation,
        target: f64,
    ) {
        self.checks
            .push(Check::new(quantity, ours, relation, target));
    }

    /// The verdict: no data if any number is missing or there are no checks, reproduced if
    /// every check holds, not reproduced otherwise.
    pub fn verdict(&self) -> Verdict {
        if self.checks.is_empty() || self.checks.iter().any(|c| !c.has_data()) {
            Verdict::NoData
        } else if self.checks.iter().all(Check::holds) {
            Verdict::Reproduced
        } else {
            Verdict::NotReproduced
        }
    }
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.id, self.verdict(), self.text)?;
        for c in &self.checks {
            write!(f, "\n  {c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_outcomes() {
        let ok = Claim::new("a", "x").check("q", 25.2, Relation::Within(0.5), 25.0);
        assert_eq!(ok.verdict(), Verdict::Reproduced);
        let bad = Claim::new("a", "x").check("q", 26.0, Relation::Within(0.5), 25.0);
        assert_eq!(bad.verdict(), Verdict::NotReproduced);
        let nan = Claim::new("a", "x")
            .check("q", 25.0, Relation::Within(0.5), 25.0)
            .check("r", f64::NAN, Relation::AtMost, 1.0);
        assert_eq!(nan.verdict(), Verdict::NoData);
        assert_eq!(Claim::new("a", "x").verdict(), Verdict::NoData);
        // A NaN never passes a negated comparison by accident.
        let inf = Claim::new("a", "x").check("q", f64::INFINITY, Relation::AtLeast, 10.0);
        assert_eq!(inf.verdict(), Verdict::NoData);
        assert!(!"not reproduced: x".starts_with(Verdict::Reproduced.label()));
    }
}
