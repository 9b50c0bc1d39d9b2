//! A synthetic, production-like tenant mix standing in for the Azure Storage traces of the
//! 2DFQ paper, which are not public. It is a model, not data: each profile follows what the
//! paper says of a tenant or of the population (§3, Fig. 2–4, §6.1.2), with numbers we chose
//! for a server of 32 workers × 1 million units/s, where costs span 250 to ~5 million units.
//! `docs/workloads.md` explains the choices.
//!
//! * API catalogue (Fig. 2a): some APIs consistently cheap (A), some varying widely (K),
//!   some usually cheap but occasionally very expensive (G).
//! * `T1`…`T12` (Fig. 2b, 4; §6): T1 small and stable (250–1000 units), T2 stable rate with
//!   small low-variance requests, T3 a burst over four APIs spanning ~1.5 orders of magnitude,
//!   T9 a wide mixture, T10 bursty with costs over three orders of magnitude, T11 large and
//!   stable, T12 large and unpredictable; the others fill in between.
//! * `t1`…`t7`: fixed costs 2^8, 2^10, …, 2^20 (§6.1.2).
//! * `production`: a random tenant of the population (Fig. 3): one to four APIs, mostly
//!   predictable per API (low coefficient of variation), some not, rates log-uniform.
//! * `expensive`: a random tenant whose requests are all large (0.5–5 million units).

use super::dist::{Arrival, CostDist, SimpleCost};
use crate::rng::Rng;

/// A profile: arrivals and classes `(API name, share, costs)`.
#[derive(Clone, Debug)]
pub struct Template {
    /// Arrivals.
    pub arrival: Arrival,
    /// Classes.
    pub classes: Vec<(String, f64, CostDist)>,
}

/// The names `template` accepts.
pub const TEMPLATES: [&str; 21] = [
    "T1",
    "T2",
    "T3",
    "T4",
    "T5",
    "T6",
    "T7",
    "T8",
    "T9",
    "T10",
    "T11",
    "T12",
    "t1",
    "t2",
    "t3",
    "t4",
    "t5",
    "t6",
    "t7",
    "production",
    "expensive",
];

/// The server the profiles are sized for (§6.1.2): 32 workers × 1M units/s.
pub const REFERENCE_CAPACITY: f64 = 32.0e6;

fn ln(median: f64, sigma: f64) -> CostDist {
    CostDist::Simple(SimpleCost::LogNormal {
        mu: median.ln(),
        sigma,
    })
}

fn poisson(rate: f64) -> Arrival {
    Arrival::Poisson { rate }
}

fn onoff(rate: f64, on: f64, off: f64) -> Arrival {
    Arrival::OnOff {
        rate,
        on,
        off,
        periodic: false,
    }
}

fn class(api: &str, share: f64, dist: CostDist) -> (String, f64, CostDist) {
    (format!("api-{api}"), share, dist)
}

/// The API catalogue: name and typical median cost (Fig. 2a's spread, A cheap … L huge).
const APIS: [(&str, f64); 12] = [
    ("A", 300.0),
    ("B", 1_000.0),
    ("C", 2_500.0),
    ("D", 8_000.0),
    ("E", 25_000.0),
    ("F", 80_000.0),
    ("G", 2_000.0),
    ("H", 250_000.0),
    ("I", 600_000.0),
    ("J", 1_200_000.0),
    ("K", 20_000.0),
    ("L", 3_000_000.0),
];

/// The profile `name`; `rng` draws the random ones.
pub(crate) fn template(name: &str, rng: &mut Rng) -> Result<Template, String> {
    let t = |arrival, classes| Ok(Template { arrival, classes });
    match name {
        "T1" => t(
            poisson(120.0),
            vec![
                class("A", 0.8, ln(450.0, 0.25)),
                class("B", 0.2, ln(800.0, 0.15)),
            ],
        ),
        "T2" => t(poisson(60.0), vec![class("B", 1.0, ln(1_500.0, 0.15))]),
        "T3" => t(
            onoff(40.0, 4.0, 12.0),
            vec![
                class("C", 0.4, ln(3_000.0, 0.3)),
                class("D", 0.3, ln(10_000.0, 0.3)),
                class("E", 0.2, ln(30_000.0, 0.3)),
                class("F", 0.1, ln(90_000.0, 0.3)),
            ],
        ),
        "T4" => t(poisson(30.0), vec![class("C", 1.0, ln(4_000.0, 0.4))]),
        "T5" => t(poisson(10.0), vec![class("D", 1.0, ln(12_000.0, 0.3))]),
        "T6" => t(
            poisson(2.0),
            vec![
                class("E", 0.7, ln(30_000.0, 0.3)),
                class("H", 0.3, ln(250_000.0, 0.4)),
            ],
        ),
        "T7" => t(
            onoff(300.0, 1.0, 6.0),
            vec![class("B", 1.0, ln(1_200.0, 0.3))],
        ),
        "T8" => t(
            poisson(20.0),
            vec![
                class("G", 0.97, ln(2_000.0, 0.3)),
                class("G", 0.03, ln(1_500_000.0, 0.5)),
            ],
        ),
        "T9" => t(poisson(5.0), vec![class("K", 1.0, ln(20_000.0, 2.0))]),
        "T10" => t(
            onoff(20.0, 2.0, 4.0),
            vec![
                class("B", 0.5, ln(1_000.0, 1.0)),
                class("F", 0.35, ln(80_000.0, 1.0)),
                class("J", 0.15, ln(1_200_000.0, 1.0)),
            ],
        ),
        "T11" => t(poisson(1.0), vec![class("J", 1.0, ln(1_000_000.0, 0.1))]),
        "T12" => t(
            poisson(0.5),
            vec![
                class("L", 0.5, ln(3_000_000.0, 0.8)),
                class("H", 0.5, ln(200_000.0, 1.0)),
            ],
        ),
        "t1" | "t2" | "t3" | "t4" | "t5" | "t6" | "t7" => {
            let k: i32 = name[1..].parse().unwrap_or(1);
            let cost = 2f64.powi(6 + 2 * k);
            // 0.2 % of the reference server each, at least one request per second.
            let rate = (0.002 * REFERENCE_CAPACITY / cost).max(1.0);
            t(
                poisson(rate),
                vec![(
                    format!("fixed-{name}"),
                    1.0,
                    CostDist::Simple(SimpleCost::Constant(cost)),
                )],
            )
        }
        "production" => Ok(random_tenant(rng, false)),
        "expensive" => Ok(random_tenant(rng, true)),
        other => Err(format!(
            "unknown template {other:?}; known: {}",
            TEMPLATES.join(", ")
        )),
    }
}

fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + rng.uniform() * (hi.ln() - lo.ln())).exp()
}

fn random_tenant(rng: &mut Rng, expensive: bool) -> Template {
    let apis = match rng.uniform() {
        u if u < 0.5 => 1,
        u if u < 0.8 => 2,
        u if u < 0.93 => 3,
        _ => 4,
    };
    let mut classes = Vec::with_capacity(apis);
    for _ in 0..apis {
        let (api, base) = APIS[rng.below(APIS.len() as u64) as usize];
        let median = if expensive {
            log_uniform(rng, 500_000.0, 5_000_000.0)
        } else {
            // Tenants of one API differ (Fig. 3 left): ×/÷ e^0.7 around the API's median.
            (base * (0.7 * rng.normal()).exp()).clamp(250.0, 5_000_000.0)
        };
        // Fig. 3 right: most (tenant, API) pairs are predictable, some are not.
        let sigma = if rng.uniform() < 0.8 {
            0.05 + 0.45 * rng.uniform()
        } else {
            1.0 + rng.uniform()
        };
        let share = 0.2 + rng.uniform();
        classes.push(class(api, share, ln(median, sigma)));
    }
    let mean: f64 = {
        let total: f64 = classes.iter().map(|c| c.1).sum();
        classes.iter().map(|c| c.1 / total * c.2.mean()).sum()
    };
    // Offered load log-uniform in 0.03 %–1 % of the reference server: 250 such tenants
    // offer ~70 % of it on average.
    let load = log_uniform(rng, 3e-4, 1e-2) * REFERENCE_CAPACITY;
    let rate = load / mean;
    let arrival = if rng.uniform() < 0.7 {
        poisson(rate)
    } else {
        let (on, off) = (1.0 + 3.0 * rng.uniform(), 2.0 + 8.0 * rng.uniform());
        onoff(rate * (on + off) / on, on, off)
    };
    Template { arrival, classes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_builds_with_positive_costs() {
        let mut rng = Rng::new(3, 0);
        for name in TEMPLATES {
            let t = template(name, &mut rng).unwrap();
            assert!(!t.classes.is_empty(), "{name}");
            for c in &t.classes {
                assert!(c.2.mean() > 0.0 && c.1 > 0.0, "{name}");
            }
            assert!(t.arrival.mean_rate() > 0.0, "{name}");
        }
        assert!(template("T13", &mut rng).unwrap_err().contains("T12"));
    }

    #[test]
    fn fixed_cost_tenants_span_2_8_to_2_20() {
        let mut rng = Rng::new(3, 0);
        let c1 = template("t1", &mut rng).unwrap().classes[0].2.clone();
        let c7 = template("t7", &mut rng).unwrap().classes[0].2.clone();
        assert_eq!(c1, CostDist::Simple(SimpleCost::Constant(256.0)));
        assert_eq!(c7, CostDist::Simple(SimpleCost::Constant(1_048_576.0)));
    }

    #[test]
    fn population_offers_about_seventy_percent() {
        // 250 random tenants: the offered load should be well below the reference capacity
        // on average (so queues stay bounded) yet a large part of it.
        let mut total = 0.0;
        let runs = 20;
        for s in 0..runs {
            let mut rng = Rng::new(s, 1);
            for _ in 0..250 {
                let t = random_tenant(&mut rng, false);
                let tot: f64 = t.classes.iter().map(|c| c.1).sum();
                let mean: f64 = t.classes.iter().map(|c| c.1 / tot * c.2.mean()).sum();
                total += t.arrival.mean_rate() * mean;
            }
        }
        let load = total / runs as f64 / REFERENCE_CAPACITY;
        assert!((0.55..0.85).contains(&load), "offered load {load}");
    }
}
