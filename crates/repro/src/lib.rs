//! # fairlane-repro
//!
//! The papers' reproductions as a library. One [registry](EXPERIMENTS) of experiments: each
//! names its spec under `experiments/` (read from disk when run inside the repository, the
//! copy compiled into the binary otherwise; [`Outcome::source`] says which) and an analysis
//! that turns the simulator's results into report blocks and typed [`Claim`]s: the paper's
//! value, ours, the margin, and a [`Verdict`] with three outcomes (reproduced, not
//! reproduced, no data). [`page`] renders outcomes through `fairlane_plot`'s page.
//!
//! Adding an experiment is one [`Experiment`] entry in [`EXPERIMENTS`] and one analysis
//! function.
//!
//! ```no_run
//! let e = fairlane_repro::find("ldf-table1").unwrap();
//! let o = fairlane_repro::run(e, &fairlane_repro::Options::quick(), &mut |_| {}).unwrap();
//! for c in &o.claims {
//!     println!("{}: {}", c.verdict(), c.text);
//! }
//! ```

#![warn(missing_docs)]

pub mod claim;
mod error;
mod interposed;
mod ldf;
mod levels;
mod out;
pub mod progress;
mod runs;
mod static_sections;
mod tam;
mod tam13;
mod tdfq;
mod vtc;

use std::path::{Path, PathBuf};

use fairlane_plot::{escape, Block, Page, Table};

pub use claim::{Check, Claim, Relation, Verdict};
pub use error::{ReproError, ReproErrorKind};

use out::Out;
use runs::Runs;

/// How an experiment computes its section.
#[derive(Clone, Copy)]
pub(crate) enum Analysis {
    /// A spec, analysed from its runs; `Err(())` when they are not of the kind the
    /// analysis reads.
    Spec(fn(&dyn Runs, &mut Out) -> Result<(), ()>),
    /// No spec: the section computes everything itself (the worked example, TAM Table 2).
    Direct(fn(&mut Out) -> Result<(), String>),
}

/// An analysis of one kind's runs: `$call` reads `$r` (the typed runs) and `$out`;
/// `Err(())` when the runs are of another kind.
macro_rules! on_runs {
    ($kind:ty, |$r:ident, $out:ident| $call:expr) => {{
        fn analyse(runs: &dyn Runs, $out: &mut Out) -> Result<(), ()> {
            let $r = runs::typed::<$kind>(runs).ok_or(())?;
            $call;
            Ok(())
        }
        Analysis::Spec(analyse)
    }};
}

/// An analysis of a worker-pool or black-box spec's runs (`fn(&[RunResult], &mut Out)`).
macro_rules! on_pool {
    ($f:path) => {
        on_runs!(runs::PoolRuns, |r, out| $f(&r.runs, out))
    };
}

/// An analysis of a database-server spec's runs and its utilization cap
/// (`fn(&[DbRun], f64, &mut Out)`).
macro_rules! on_cores {
    ($f:path) => {
        on_runs!(runs::CoresRuns, |r, out| $f(
            &r.runs,
            r.utilization_cap,
            out
        ))
    };
}

/// An analysis of an LLM-server spec's runs (`fn(&[LlmRun], &mut Out)`).
macro_rules! on_llm {
    ($f:path) => {
        on_runs!(runs::LlmRuns, |r, out| $f(&r.runs, out))
    };
}

/// One reproduction.
pub struct Experiment {
    /// Its name on the command line (`fairlane reproduce NAME`).
    pub name: &'static str,
    /// The section heading when it has no spec.
    pub title: &'static str,
    /// Its spec, relative to the repository root, with the copy compiled in; `None` for
    /// sections that need no spec.
    pub spec: Option<(&'static str, &'static str)>,
    /// What it computes.
    pub(crate) analysis: Analysis,
}

macro_rules! spec {
    ($path:literal) => {
        ($path, include_str!(concat!("../../../", $path)))
    };
}

impl Experiment {
    /// A reproduction of a spec's runs; its heading is the spec's name.
    const fn on_spec(
        name: &'static str,
        spec: (&'static str, &'static str),
        analysis: Analysis,
    ) -> Experiment {
        Experiment {
            name,
            title: "",
            spec: Some(spec),
            analysis,
        }
    }

    /// A section that needs no spec, under its own heading.
    const fn direct(
        name: &'static str,
        title: &'static str,
        f: fn(&mut Out) -> Result<(), String>,
    ) -> Experiment {
        Experiment {
            name,
            title,
            spec: None,
            analysis: Analysis::Direct(f),
        }
    }
}

/// Every reproduction, in report order.
pub const EXPERIMENTS: [Experiment; 32] = [
    Experiment::direct(
        "2dfq-fig5",
        "2DFQ §4 worked example (Fig. 5 and 6)",
        static_sections::worked_example,
    ),
    Experiment::on_spec(
        "2dfq-fig8",
        spec!("experiments/2dfq-fig8.toml"),
        on_pool!(tdfq::fig8),
    ),
    Experiment::on_spec(
        "2dfq-fig9",
        spec!("experiments/2dfq-fig9-production.toml"),
        on_pool!(tdfq::fig9),
    ),
    Experiment::on_spec(
        "2dfq-fig11",
        spec!("experiments/2dfq-fig11-unpredictable.toml"),
        on_pool!(tdfq::fig11),
    ),
    Experiment::on_spec(
        "2dfq-fig13",
        spec!("experiments/2dfq-fig13-suite.toml"),
        on_pool!(tdfq::fig13),
    ),
    Experiment::on_spec(
        "2dfqe-mechanism",
        spec!("experiments/2dfqe-mechanism.toml"),
        on_pool!(tdfq::mechanism),
    ),
    Experiment::on_spec(
        "interposed-fig3-4",
        spec!("experiments/interposed-fig3-4.toml"),
        on_pool!(interposed::fig3_4),
    ),
    Experiment::on_spec(
        "interposed-fig5",
        spec!("experiments/interposed-fig5.toml"),
        on_pool!(interposed::fig5),
    ),
    Experiment::on_spec(
        "interposed-fig6",
        spec!("experiments/interposed-fig6.toml"),
        on_pool!(interposed::fig6),
    ),
    Experiment::on_spec(
        "interposed-fig7",
        spec!("experiments/interposed-fig7.toml"),
        on_pool!(interposed::fig7),
    ),
    Experiment::on_spec(
        "interposed-fig8",
        spec!("experiments/interposed-fig8.toml"),
        on_pool!(interposed::fig8),
    ),
    Experiment::on_spec(
        "ldf-table1",
        spec!("experiments/ldf-table1.toml"),
        on_cores!(ldf::table1),
    ),
    Experiment::on_spec(
        "ldf-table3",
        spec!("experiments/ldf-table3.toml"),
        on_cores!(ldf::table3),
    ),
    Experiment::on_spec(
        "ldf-fig4",
        spec!("experiments/ldf-fig4.toml"),
        on_cores!(ldf::fig4),
    ),
    Experiment::on_spec(
        "ldf-fig5",
        spec!("experiments/ldf-fig5.toml"),
        on_cores!(ldf::fig5),
    ),
    Experiment::on_spec(
        "ldf-fig6",
        spec!("experiments/ldf-fig6.toml"),
        on_cores!(ldf::fig6),
    ),
    Experiment::on_spec(
        "priority-levels",
        spec!("experiments/priority-levels.toml"),
        on_pool!(levels::priority_levels),
    ),
    Experiment::direct(
        "tam-table2",
        "Thread Architecture Models: Table 2 (Yang et al., OSDI '18)",
        static_sections::table2,
    ),
    Experiment::direct(
        "tam-fig8",
        "TAM §3 Fig. 8: no scheduling, (a) vs (b)",
        tam::fig8,
    ),
    Experiment::direct(
        "tam-fig9",
        "TAM §3 Fig. 9: unknown resource usage, (a) vs (b)",
        tam::fig9,
    ),
    Experiment::direct(
        "tam-fig10",
        "TAM §3 Fig. 10: hidden contention, (a) vs (b)",
        tam::fig10,
    ),
    Experiment::direct(
        "tam-fig11",
        "TAM §3 Fig. 11: blocking, (a) vs (b)",
        tam::fig11,
    ),
    Experiment::direct(
        "tam-fig12",
        "TAM §3 Fig. 12: ordering constraint, (a) vs (b)",
        tam::fig12,
    ),
    Experiment::direct(
        "tam-fig13a",
        "TAM §4.1 Fig. 13(a): no scheduling, Orig- vs Tamed-HBase",
        tam13::fig13a,
    ),
    Experiment::direct(
        "tam-fig13b",
        "TAM §4.1 Fig. 13(b): unknown resource usage, Orig- vs Tamed-HBase",
        tam13::fig13b,
    ),
    Experiment::direct(
        "tam-fig13c",
        "TAM §4.1 Fig. 13(c): hidden contention, Orig- vs Tamed-HBase",
        tam13::fig13c,
    ),
    Experiment::direct(
        "tam-fig13d",
        "TAM §4.1 Fig. 13(d): blocking, Orig- vs Tamed-HBase",
        tam13::fig13d,
    ),
    Experiment::direct(
        "tam-fig13e",
        "TAM §4.1 Fig. 13(e): ordering constraint, Orig- vs Tamed-HBase",
        tam13::fig13e,
    ),
    // The VTC paper's §5.2 on the LLM server, one suite per group.
    Experiment::on_spec(
        "vtc-overload",
        spec!("experiments/vtc-overload.toml"),
        on_llm!(vtc::uniform),
    ),
    Experiment::on_spec(
        "vtc-on-off-overload",
        spec!("experiments/vtc-on-off-overload.toml"),
        on_llm!(vtc::uniform),
    ),
    Experiment::on_spec(
        "vtc-poisson-short-long",
        spec!("experiments/vtc-poisson-short-long.toml"),
        on_llm!(vtc::mixed),
    ),
    Experiment::on_spec(
        "vtc-overload-weighted",
        spec!("experiments/vtc-overload-weighted.toml"),
        on_llm!(vtc::uniform),
    ),
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// Every experiment's name, in report order.
pub fn names() -> Vec<&'static str> {
    EXPERIMENTS.iter().map(|e| e.name).collect()
}

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Half the simulated time, 40 suite runs instead of 150.
    pub quick: bool,
    /// Simulation runs in parallel.
    pub jobs: usize,
    /// The repository root to read `experiments/` from; `None` looks upwards from the
    /// current directory, and falls back to the compiled-in copy when none is found.
    pub root: Option<PathBuf>,
    /// Never read specs from disk (the compiled-in copies only).
    pub embedded_only: bool,
}

impl Options {
    /// Full-length runs on every core.
    pub fn full() -> Self {
        Options {
            quick: false,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            root: None,
            embedded_only: false,
        }
    }

    /// `--quick` runs on every core.
    pub fn quick() -> Self {
        Options {
            quick: true,
            ..Options::full()
        }
    }
}

/// How many simulation runs `e` will make (for a progress bar over several experiments);
/// 1 for a section without a spec.
pub fn planned_runs(e: &Experiment, opts: &Options) -> Result<usize, ReproError> {
    let Some((rel, embedded)) = e.spec else {
        return Ok(1);
    };
    let fail = |kind| ReproError::new(e.name, kind);
    let (text, file, dir, _) = spec_text(rel, embedded, opts).map_err(fail)?;
    let spec_error = |message| {
        fail(ReproErrorKind::Spec {
            file: file.clone(),
            message,
        })
    };
    let parsed = runs::parse(&text, &file, dir, opts.quick).map_err(spec_error)?;
    parsed.planned_runs().map_err(|e| spec_error(e.to_string()))
}

/// Where a spec was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// From this file on disk.
    Disk(PathBuf),
    /// The copy compiled into the binary (no repository found).
    Embedded,
    /// The section has no spec.
    None,
}

/// The result of one experiment.
pub struct Outcome {
    /// The experiment's name.
    pub name: &'static str,
    /// The section heading.
    pub title: String,
    /// Where its spec came from.
    pub source: Source,
    /// The section's content.
    pub blocks: Vec<Block>,
    /// The claims judged, in report order.
    pub claims: Vec<Claim>,
}

impl Outcome {
    /// The claim with this id.
    pub fn claim(&self, id: &str) -> Option<&Claim> {
        self.claims.iter().find(|c| c.id == id)
    }
}

/// The spec file `rel` (e.g. `experiments/ldf-table1.toml`) under `root`, or under the
/// nearest ancestor of the current directory that has it.
fn locate(rel: &str, root: Option<&Path>) -> Option<PathBuf> {
    if let Some(r) = root {
        return Some(r.join(rel)).filter(|p| p.is_file());
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().map(|d| d.join(rel)).find(|p| p.is_file())
}

/// The spec's text, its name for messages, the directory anchoring its relative paths, and
/// where it came from: the file under the repository when there is one (and the options
/// allow it), the compiled-in copy otherwise.
fn spec_text(
    rel: &str,
    embedded: &str,
    opts: &Options,
) -> Result<(String, String, PathBuf, Source), ReproErrorKind> {
    let disk = if opts.embedded_only {
        None
    } else {
        locate(rel, opts.root.as_deref())
    };
    Ok(match disk {
        Some(p) => (
            std::fs::read_to_string(&p).map_err(|source| ReproErrorKind::Read {
                path: p.clone(),
                source,
            })?,
            p.display().to_string(),
            p.parent().map(Path::to_path_buf).unwrap_or_default(),
            Source::Disk(p),
        ),
        None => (
            embedded.to_string(),
            rel.to_string(),
            PathBuf::from("."),
            Source::Embedded,
        ),
    })
}

/// Run one experiment; `progress` gets the fraction of it done.
pub fn run(
    e: &Experiment,
    opts: &Options,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<Outcome, ReproError> {
    let fail = |kind| ReproError::new(e.name, kind);
    let mut out = Out::default();
    let (title, source) = match (e.spec, e.analysis) {
        (_, Analysis::Direct(f)) => {
            f(&mut out).map_err(|m| fail(ReproErrorKind::Section(m)))?;
            progress(1.0);
            (e.title.to_string(), Source::None)
        }
        (None, _) => return Err(fail(ReproErrorKind::NoSpec)),
        (Some((rel, embedded)), Analysis::Spec(f)) => {
            let (text, file, dir, source) = spec_text(rel, embedded, opts).map_err(fail)?;
            let parsed = runs::parse(&text, &file, dir, opts.quick).map_err(|message| {
                fail(ReproErrorKind::Spec {
                    file: file.clone(),
                    message,
                })
            })?;
            let results = runs::run(parsed.as_ref(), opts.jobs, progress)
                .map_err(|message| fail(ReproErrorKind::Run { file, message }))?;
            out.push_str(&spec_line(
                rel,
                &source,
                parsed.as_ref(),
                results.as_ref(),
                opts.quick,
            ));
            f(results.as_ref(), &mut out).map_err(|()| fail(ReproErrorKind::AnalysisMismatch))?;
            (parsed.name().to_string(), source)
        }
    };
    // An analysis that could judge nothing (no runs, no points) must not pass silently.
    if out.claims.is_empty() {
        out.claim(Claim::new(
            "results",
            "the experiment produced results its claims can be judged on",
        ));
    }
    Ok(Outcome {
        name: e.name,
        title,
        source,
        blocks: out.blocks,
        claims: out.claims,
    })
}

/// The paragraph opening a spec's section: its description, where the spec came from, and
/// how much was simulated.
fn spec_line(
    rel: &str,
    source: &Source,
    spec: &dyn fairlane_sim::Experiment,
    results: &dyn Runs,
    quick: bool,
) -> String {
    let from = match source {
        Source::Disk(p) => format!(
            "read from <code>{}</code>",
            escape(&p.display().to_string())
        ),
        _ => "the copy compiled into this binary (no repository found)".into(),
    };
    let (events, unit) = results.work();
    format!(
        "<p>{} Spec: <code>{rel}</code>, {from}{}; {} runs of {} simulated seconds, {events} {unit}.</p>",
        escape(spec.description()),
        if quick { " (--quick: half duration)" } else { "" },
        results.len(),
        spec.duration(),
    )
}

/// The report page: a table of every claim's verdict, then each experiment's section.
pub fn page(outcomes: &[Outcome]) -> Page {
    let mut t = Table::new(["experiment", "verdict", "claim"]);
    for o in outcomes {
        for c in &o.claims {
            t.push_row([
                o.name.to_string(),
                c.verdict().label().to_string(),
                c.text.clone(),
            ]);
        }
    }
    let mut p = Page::new("fairlane reproduction report").intro(
        "<style>td.small{background:#cde}td.large{background:#eca}\
         .tad svg{max-width:100%;height:auto;border:1px solid #eee}</style><p>Our numbers beside the papers'. Each claim is judged from typed values: \
         <em>reproduced</em>, <em>not reproduced</em>, or <em>no data</em> when a value is \
         missing or not finite.</p>",
    );
    p = p.section("Verdicts", vec![Block::Table(t)]);
    for o in outcomes {
        p = p.section(o.title.clone(), o.blocks.clone());
    }
    p
}

/// Whether the outcomes leave nothing to flag: every exact comparison (worked example, TAM
/// Table 2) identical and no claim without data. Measured claims that are not reproduced
/// do not count: they are findings, documented in docs/results.md.
pub fn clean(outcomes: &[Outcome]) -> bool {
    outcomes.iter().all(|o| {
        o.claims.iter().all(|c| match c.verdict() {
            Verdict::NoData => false,
            Verdict::NotReproduced => !matches!(c.id.as_str(), "identical" | "table2-row"),
            Verdict::Reproduced => true,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every analysis, given no runs at all, judges every claim "no data": a missing run
    /// never passes.
    #[test]
    fn empty_runs_give_no_data_never_a_pass() {
        let pool = runs::PoolRuns::default();
        let cores = runs::CoresRuns {
            runs: Vec::new(),
            utilization_cap: 95.0,
        };
        let llm = runs::LlmRuns::default();
        for e in &EXPERIMENTS {
            let mut out = Out::default();
            let Analysis::Spec(f) = e.analysis else {
                continue;
            };
            // Each analysis reads one kind of runs and refuses the other.
            let read: Vec<bool> = [&pool as &dyn Runs, &cores, &llm]
                .into_iter()
                .map(|r| f(r, &mut out).is_ok())
                .collect();
            assert_eq!(read.iter().filter(|&&ok| ok).count(), 1, "{}", e.name);
            if out.claims.is_empty() {
                continue; // run() adds its "no data" claim then; see below
            }
            for c in &out.claims {
                assert_eq!(c.verdict(), Verdict::NoData, "{}: {c}", e.name);
            }
        }
    }

    #[test]
    fn clean_flags_no_data_and_exact_differences_only() {
        let o = |c: Claim| Outcome {
            name: "x",
            title: String::new(),
            source: Source::None,
            blocks: Vec::new(),
            claims: vec![c],
        };
        let measured = Claim::new("m", "").check("q", 1.0, Relation::AtLeast, 2.0);
        assert!(clean(&[o(measured)]));
        let exact = Claim::new("identical", "").check("q", 1.0, Relation::Within(0.0), 0.0);
        assert!(!clean(&[o(exact)]));
        assert!(!clean(&[o(Claim::new("m", ""))]));
    }
}
