//! Sections computed without a simulation spec: the 2DFQ paper's §4 worked example scheduled
//! by the real core schedulers (Fig. 5c, 5d, 6b), and Table 2 of the Thread Architecture
//! Models paper computed from the catalog under `models/`.

use std::fmt::Write as _;

use fairlane_core::{Config, Decision, Request, VirtualClock};
use fairlane_tam::{analyze, catalog, render_svg, DrawOptions};

use crate::claim::{Claim, Relation};
use crate::out::Out;

/// Table 2 of Yang et al. (OSDI '18) as the paper gives it (N = no scheduling, U = unknown
/// resource usage, C = hidden contention, B = blocking, O = ordering constraint), and what
/// §4–§5 say of Tamed-HBase and Muzzled-HBase.
const TABLE2: [(&str, &str); 6] = [
    ("hbase", "N U C B O"),
    ("mongodb", ". U C B ."),
    ("cassandra", ". U C B ."),
    ("riak", "N U C . ."),
    ("tamed-hbase", ". . C . ."),
    ("muzzled-hbase", ". U C B O"),
];

/// The schedules as the paper draws them: one row per worker, one column per time unit.
const PAPER: [(&str, &str, [&str; 2]); 3] = [
    (
        "wfq",
        "Fig. 5c — WFQ: C and D occupy both workers together during [4, 8)",
        [
            "a1 a2 a3 a4 c1 c1 c1 c1 a5 a6 a7 a8",
            "b1 b2 b3 b4 d1 d1 d1 d1 b5 b6 b7 b8",
        ],
    ),
    (
        "wf2q",
        "Fig. 5d — WF²Q: a2 and b2 are not eligible at t = 1, so C and D take both workers",
        [
            "a1 c1 c1 c1 c1 a2 a3 a4 a5 c2 c2 c2",
            "b1 d1 d1 d1 d1 b2 b3 b4 b5 d2 d2 d2",
        ],
    ),
    (
        "2dfq",
        "Fig. 6b — 2DFQ: at t = 1 W0 takes c1 and W1 takes a2; A and B then alternate on W1",
        [
            "a1 c1 c1 c1 c1 d1 d1 d1 d1 c2 c2 c2",
            "b1 a2 b2 a3 b3 a4 b4 a5 b5 a6 b6 a7",
        ],
    ),
];

/// Four backlogged tenants on two workers of rate 1 (A, B: size 1; C, D: size 4), the exact
/// GPS clock of capacity 2, run for 12 time units. Returns one row of labels per worker.
fn schedule(preset: &str) -> Result<[Vec<String>; 2], fairlane_core::Error> {
    const UNTIL: usize = 12;
    let mut s = Config::preset(preset)?
        .workers(2)
        .clock(VirtualClock::Gps { capacity: 2.0 })
        .build::<String>()?;
    for i in 1..=20 {
        for (tenant, letter, cost) in [
            (0u64, 'a', 1.0),
            (1, 'b', 1.0),
            (2, 'c', 4.0),
            (3, 'd', 4.0),
        ] {
            if cost == 1.0 || i <= 5 {
                s.enqueue(
                    Request::new(tenant, 0u32, format!("{letter}{i}")).with_cost(cost),
                    0.0,
                )?;
            }
        }
    }
    let mut rows: [Vec<String>; 2] = [vec![".".into(); UNTIL], vec![".".into(); UNTIL]];
    let mut busy: [Option<(fairlane_core::Ticket, f64, f64)>; 2] = [None, None];
    let mut now = 0.0;
    while now < UNTIL as f64 {
        for w in 0..2 {
            if busy[w].is_none() {
                if let Decision::Run(d) = s.dequeue(w, now)? {
                    let cost = d.request.cost.unwrap_or(0.0);
                    let span = now as usize..((now + cost) as usize).min(UNTIL);
                    rows[w][span].fill(d.request.payload.clone());
                    busy[w] = Some((d.ticket, now + cost, cost));
                }
            }
        }
        now = busy
            .iter()
            .flatten()
            .map(|b| b.1)
            .fold(f64::INFINITY, f64::min);
        for slot in busy.iter_mut() {
            if let Some((ticket, end, cost)) = *slot {
                if end == now {
                    s.complete(ticket, cost, now)?;
                    *slot = None;
                }
            }
        }
    }
    Ok(rows)
}

fn row_html(label: &str, cells: &[String]) -> String {
    let mut h = format!("<tr><th>{label}</th>");
    for c in cells {
        let class = match c.chars().next() {
            Some('a') | Some('b') => "small",
            Some('c') | Some('d') => "large",
            _ => "idle",
        };
        let _ = write!(h, "<td class=\"{class}\">{c}</td>");
    }
    h + "</tr>"
}

/// Table 2: each catalog model analysed, beside the paper's row, with its diagram.
pub(crate) fn table2(body: &mut Out) -> Result<(), String> {
    body.push_str(
        "<p>Each model under <code>models/</code> analysed by <code>fairlane tam check</code>. \
         N = no scheduling, U = unknown resource usage, C = hidden contention, B = blocking, \
         O = ordering constraint. Tamed-HBase keeps only the hidden CPU contention the paper \
         accepts; Muzzled-HBase fixes no-scheduling and works around the rest outside the TAM \
         (§4.2).</p><table><tr><th>system</th><th>figure</th><th>paper</th><th>ours</th><th></th></tr>",
    );
    let mut diagrams = String::new();
    for (name, paper) in TABLE2 {
        let entry = catalog::get(name).ok_or_else(|| format!("catalog has no {name}"))?;
        let model = entry.model().map_err(|e| e.to_string())?;
        let report = analyze(&model);
        let ours = report.table2_row();
        let same = ours == paper;
        // The row as a number: how many of the five findings differ from the paper's.
        let differing = ours
            .split(' ')
            .zip(paper.split(' '))
            .filter(|(a, b)| a != b)
            .count() as f64
            + if ours.split(' ').count() == paper.split(' ').count() {
                0.0
            } else {
                f64::NAN
            };
        body.claim_silent(
            Claim::new(
                "table2-row",
                format!("{name}: Table 2 row {ours} (paper {paper})"),
            )
            .check(
                format!("{name}: findings differing from the paper's row"),
                differing,
                Relation::Within(0.0),
                0.0,
            ),
        );
        let _ = write!(
            body,
            "<tr><td>{name}</td><td>{}</td><td><code>{paper}</code></td><td><code>{ours}</code></td>\
             <td class=\"{}\">{}</td></tr>",
            entry.figure,
            if same { "ok" } else { "bad" },
            if same { "same" } else { "DIFFERS" },
        );
        let svg = render_svg(
            &model,
            &DrawOptions {
                highlight: Some(report),
            },
        );
        let _ = write!(
            diagrams,
            "<h3>{name} ({}), findings highlighted</h3><div class=\"tad\">{svg}</div>",
            entry.figure
        );
    }
    body.push_str("</table>");
    body.push_str(&diagrams);
    Ok(())
}

/// The worked example for WFQ, WF²Q and 2DFQ beside Fig. 5c, 5d and 6b.
pub(crate) fn worked_example(body: &mut Out) -> Result<(), String> {
    body.push_str(
        "<p>Tenants A and B send size-1 requests, C and D size-4 ones; all backlogged, weight 1; \
         two workers of rate 1; exact GPS virtual time v(t) = t/2. Ties go to the lower tenant; \
         workers free at the same instant ask in index order. Each column is one time unit.</p>",
    );
    for (preset, caption, paper) in PAPER {
        let ours = schedule(preset).map_err(|e| e.to_string())?;
        let paper: Vec<Vec<String>> = paper
            .iter()
            .map(|r| r.split(' ').map(String::from).collect())
            .collect();
        let same = ours[0] == paper[0] && ours[1] == paper[1];
        let differing = (0..2)
            .map(|w| {
                ours[w]
                    .iter()
                    .zip(&paper[w])
                    .filter(|(a, b)| a != b)
                    .count()
                    + ours[w].len().abs_diff(paper[w].len())
            })
            .sum::<usize>();
        body.claim_silent(
            Claim::new(
                "identical",
                format!("{caption}: our schedule under {preset}"),
            )
            .check(
                format!("{preset}: cells differing from the paper's schedule"),
                differing as f64,
                Relation::Within(0.0),
                0.0,
            ),
        );
        let _ =
            write!(
            body,
            "<h3>{caption}</h3><table><tr><th></th>{}</tr>{}{}{}{}</table><p class=\"{}\">{}</p>",
            (0..12).map(|t| format!("<th>{t}</th>")).collect::<String>(),
            row_html("paper W0", &paper[0]),
            row_html("paper W1", &paper[1]),
            row_html("ours W0", &ours[0]),
            row_html("ours W1", &ours[1]),
            if same { "ok" } else { "bad" },
            if same { "identical to the paper" } else { "DIFFERS from the paper" },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_matches_the_paper_figures() {
        for (preset, _, paper) in PAPER {
            let ours = schedule(preset).unwrap();
            assert_eq!(ours[0].join(" "), paper[0], "{preset} W0");
            assert_eq!(ours[1].join(" "), paper[1], "{preset} W1");
        }
    }
}
