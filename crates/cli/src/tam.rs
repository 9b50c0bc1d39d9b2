//! `fairlane tam …`: check, draw and explore Thread Architecture Models (see docs/tam.md).
//!
//! Exit status: 0 = no problems, 1 = problems found, 2 = invalid input (file, change, …).
use clap::Subcommand;
use fairlane_tam::{analyze, catalog, render_dot, render_svg, what_if, Change, DrawOptions, Model};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::simulate::SetArgs;

/// `fairlane tam`'s one-line help, naming its subcommands as the parser has them.
pub fn about() -> String {
    let cmd = <TamCommand as Subcommand>::augment_subcommands(clap::Command::new("tam"));
    let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
    format!("Thread Architecture Models: {}", names.join(", "))
}

#[derive(Subcommand)]
pub enum TamCommand {
    /// Run the five-problem analysis of Yang et al. (OSDI '18, §3) on a model file.
    ///
    /// Exits 0 when the model is free of problems, 1 when problems are found, 2 when the
    /// file is invalid.
    Check {
        /// The model (TOML; see docs/tam.md). `fairlane tam catalog NAME > FILE` gives examples.
        model: PathBuf,
        /// Print `{"problems": [...]}` instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Draw a model as a Thread Architecture Diagram (SVG or Graphviz DOT, by extension).
    Draw {
        /// The model file.
        model: PathBuf,
        /// Output file: FILE.svg (no Graphviz needed) or FILE.dot.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Mark the problems found by the analysis on the diagram.
        #[arg(long)]
        highlight: bool,
    },
    /// List the catalog of models (with their Table 2 row), or print one model's file.
    Catalog {
        /// A catalog name (hbase, mongodb, cassandra, riak, tamed-hbase, muzzled-hbase).
        name: Option<String>,
    },
    /// Apply architectural changes to a model and show which problems disappear.
    ///
    /// Changes: `set STAGE.FIELD = VALUE` (scheduling, ordering, host, cpu, io, network,
    /// lock), `async STAGE`, `split STAGE`, `combine A + B as NAME`; applied in order.
    WhatIf {
        /// The model file.
        model: PathBuf,
        /// A change, e.g. -c "set Data Xceive.scheduling = pluggable"; repeatable.
        #[arg(short = 'c', long = "change", required = true)]
        changes: Vec<String>,
        /// Print JSON (before, after, resolved, introduced) instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the changed model to this TOML file.
        #[arg(long)]
        write: Option<PathBuf>,
        /// Also simulate the original and the changed architecture on the file's workload
        /// (its `[simulation]`, or the default one) with the same seed, side by side.
        /// MODEL may then be a spec naming a model in `[server] architecture`.
        #[arg(long)]
        simulate: bool,
        /// With --simulate: fields of the workload set first, as for `fairlane simulate`.
        #[command(flatten)]
        set: SetArgs,
    },
    /// Build a TAM from a running process tree, from outside (Linux; docs/tam.md "Discover it").
    ///
    /// Exits 0 when done, 1 when the target exited mid-run (what was gathered is written), 2 on errors.
    Discover(Box<DiscoverArgs>),
}

/// The options of `tam discover` (boxed: the largest subcommand).
#[derive(clap::Args)]
pub struct DiscoverArgs {
    /// Attach to this process and its descendants (or give `-- CMD ARGS` to start one).
    #[arg(long, required_unless_present = "command")]
    pid: Option<u32>,
    /// Write the model (TOML) here.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Seconds to sample while you drive the workload.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 0.5)]
    interval: f64,
    /// Extensive-use threshold, percent of the tree's total.
    #[arg(long, default_value_t = 5.0)]
    threshold: f64,
    /// Annotation file mapping name patterns to stages.
    #[arg(long)]
    annotate: Option<PathBuf>,
    /// Skip the blocking probes (delay injection).
    #[arg(long)]
    no_blocking: bool,
    /// Seconds per probe window (baseline, then slowed).
    #[arg(long, default_value_t = 2.0)]
    probe_window: f64,
    /// The CPU kept busy while probing.
    #[arg(long, default_value_t = 0)]
    probe_cpu: u32,
    /// Print the evidence as JSON instead of a summary.
    #[arg(long)]
    json: bool,
    /// The command to start and discover.
    #[arg(last = true)]
    command: Vec<String>,
}

pub fn run(cmd: TamCommand) -> ExitCode {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    ExitCode::from(execute(cmd, &mut stdout.lock(), &mut stderr.lock()))
}

/// Runs a command, writing to `out` and `err`; returns the exit status.
fn execute(cmd: TamCommand, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match cmd {
        TamCommand::Check { model, json } => check(&model, json, out, err),
        TamCommand::Draw {
            model,
            output,
            highlight,
        } => draw(&model, &output, highlight, err),
        TamCommand::Catalog { name } => list_catalog(name.as_deref(), out, err),
        TamCommand::WhatIf {
            model,
            changes,
            json,
            write,
            simulate,
            set,
        } => {
            let opts = WhatIfOpts {
                json,
                write: write.as_deref(),
                simulate,
                set: &set,
            };
            whatif(&model, &changes, opts, out, err)
        }
        TamCommand::Discover(a) => {
            use fairlane_tam::discover::{run_cli, Options, Target};
            let a = *a;
            let target = a.pid.map_or(Target::Command(a.command), Target::Pid);
            let line = std::env::args().collect::<Vec<_>>().join(" ");
            let window = (!a.no_blocking).then_some(a.probe_window);
            let (d, i, t, ann) = (a.duration, a.interval, a.threshold, a.annotate.as_deref());
            match Options::from_cli(target, d, i, t, ann, window, a.probe_cpu, line) {
                Ok(options) => run_cli(&options, &a.output, a.json, out, err),
                Err(e) => u8::from(writeln!(err, "{e}").is_ok()) + 1,
            }
        }
    }
}

fn load(path: &Path, err: &mut dyn Write) -> Option<Model> {
    match Model::load(path) {
        Ok(model) => Some(model),
        Err(e) => {
            let _ = writeln!(err, "{e}");
            None
        }
    }
}

fn check(path: &Path, json: bool, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let Some(model) = load(path, err) else {
        return 2;
    };
    let report = analyze(&model);
    let text = if json {
        report.to_json() + "\n"
    } else {
        report.to_text(&model)
    };
    let _ = out.write_all(text.as_bytes());
    u8::from(!report.is_clean())
}

fn draw(path: &Path, output: &Path, highlight: bool, err: &mut dyn Write) -> u8 {
    let Some(model) = load(path, err) else {
        return 2;
    };
    let options = DrawOptions {
        highlight: highlight.then(|| analyze(&model)),
    };
    let text = match output.extension().and_then(|e| e.to_str()) {
        Some("svg") => render_svg(&model, &options),
        Some("dot" | "gv") => render_dot(&model, &options),
        _ => {
            let _ = writeln!(
                err,
                "{}: unknown output format; use a .svg or .dot file name",
                output.display()
            );
            return 2;
        }
    };
    if let Err(e) = std::fs::write(output, text) {
        let _ = writeln!(err, "{}: cannot write: {e}", output.display());
        return 2;
    }
    0
}

fn list_catalog(name: Option<&str>, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    if let Some(name) = name {
        return match catalog::get(name) {
            Some(entry) => {
                let _ = out.write_all(entry.text.as_bytes());
                0
            }
            None => {
                let names: Vec<&str> = catalog::CATALOG.iter().map(|e| e.name).collect();
                let _ = writeln!(
                    err,
                    "no catalog model `{name}`; available: {}",
                    names.join(", ")
                );
                2
            }
        };
    }
    let _ = writeln!(out, "{:<15} {:<8} N U C B O  SYSTEM", "NAME", "FIGURE");
    for entry in catalog::CATALOG {
        match entry.model() {
            Ok(model) => {
                let _ = writeln!(
                    out,
                    "{:<15} {:<8} {:<9}  {}",
                    entry.name,
                    entry.figure,
                    analyze(&model).table2_row(),
                    model.name
                );
            }
            Err(e) => {
                let _ = writeln!(err, "{e}");
                return 2;
            }
        }
    }
    let _ = writeln!(
        out,
        "\nN no scheduling, U unknown resource usage, C hidden contention, B blocking, O ordering constraint (Table 2).\n\
         `fairlane tam catalog NAME > NAME.toml` prints a model to start from."
    );
    0
}

/// The output options of `tam what-if`.
struct WhatIfOpts<'a> {
    json: bool,
    write: Option<&'a Path>,
    simulate: bool,
    set: &'a SetArgs,
}

/// The TAM simulation in `path` with the `--set` fields applied.
fn simulation(path: &Path, set: &SetArgs) -> Result<fairlane_sim::tam::TamSpecFile, String> {
    let mut f = fairlane_sim::tam::TamSpecFile::load(path).map_err(|e| e.to_string())?;
    set.apply(&mut f, Vec::new())?;
    Ok(f)
}

fn whatif(
    path: &Path,
    changes: &[String],
    opts: WhatIfOpts,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let WhatIfOpts {
        json,
        write,
        simulate,
        set,
    } = opts;
    // With --simulate the file may be a spec naming its model; read it as a simulation.
    let sim = if simulate {
        match simulation(path, set) {
            Ok(f) => Some(f),
            Err(e) => {
                let _ = writeln!(err, "{e}");
                return 2;
            }
        }
    } else if let Ok(changes) = set.changes(Vec::new()) {
        if !changes.is_empty() {
            let _ = writeln!(err, "--set changes the workload: give --simulate too");
            return 2;
        }
        None
    } else {
        None
    };
    let model = match &sim {
        Some(f) => f.model.clone(),
        None => match load(path, err) {
            Some(m) => m,
            None => return 2,
        },
    };
    let mut parsed = Vec::new();
    for text in changes {
        match text.parse::<Change>() {
            Ok(change) => parsed.push(change),
            Err(e) => {
                let _ = writeln!(err, "{e}");
                return 2;
            }
        }
    }
    let result = match what_if(&model, &parsed) {
        Ok(result) => result,
        Err(e) => {
            let _ = writeln!(err, "{}: {e}", path.display());
            return 2;
        }
    };
    if let Some(file) = write {
        if let Err(e) = std::fs::write(file, result.model.to_toml()) {
            let _ = writeln!(err, "{}: cannot write: {e}", file.display());
            return 2;
        }
    }
    let compared = match &sim {
        Some(f) => match fairlane_sim::tam::whatif::compare(f, &parsed) {
            Ok(c) => Some(c),
            Err(e) => {
                let _ = writeln!(err, "{}: {e}", path.display());
                return 2;
            }
        },
        None => None,
    };
    let text = match (&compared, json) {
        (Some(c), true) => {
            let analysis: serde_json::Value =
                serde_json::from_str(&result.to_json()).unwrap_or_default();
            let both = serde_json::json!({"analysis": analysis, "simulation": c.to_json()});
            serde_json::to_string_pretty(&both).unwrap_or_default() + "\n"
        }
        (Some(c), false) => result.to_text(&parsed) + "\n" + &c.to_text(),
        (None, true) => result.to_json() + "\n",
        (None, false) => result.to_text(&parsed),
    };
    let _ = out.write_all(text.as_bytes());
    u8::from(!result.after.is_clean())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test, removed when dropped (also when the test panics).
    fn tmp_dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("fairlane-tam-cli-")
            .tempdir()
            .unwrap()
    }

    fn temp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn run_cmd(cmd: TamCommand) -> (u8, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = execute(cmd, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    const CLEAN: &str = "[model]\nname = \"clean\"\n[[stage]]\nname = \"A\"\nscheduling = \"pluggable\"\nresources = { cpu = true }\n";

    #[test]
    fn check_exit_status_is_0_clean_1_problems_2_invalid() {
        let tmp = tmp_dir();
        let clean = temp(&tmp, "clean.toml", CLEAN);
        assert_eq!(
            run_cmd(TamCommand::Check {
                model: clean,
                json: false
            })
            .0,
            0
        );
        let hbase = temp(&tmp, "hbase.toml", catalog::get("hbase").unwrap().text);
        assert_eq!(
            run_cmd(TamCommand::Check {
                model: hbase,
                json: false
            })
            .0,
            1
        );
        let bad = temp(
            &tmp,
            "bad.toml",
            "[model]\nname = \"x\"\n[[stage]]\nname = \"A\"\nscheduling = \"fifo\"\n",
        );
        let (code, _, err) = run_cmd(TamCommand::Check {
            model: bad,
            json: false,
        });
        assert_eq!(code, 2);
        assert!(
            err.contains("bad.toml: stage `A`: field `scheduling`"),
            "{err}"
        );
        let missing = PathBuf::from("/nonexistent/model.toml");
        assert_eq!(
            run_cmd(TamCommand::Check {
                model: missing,
                json: false
            })
            .0,
            2
        );
    }

    #[test]
    fn check_json_has_the_documented_shape() {
        let tmp = tmp_dir();
        let riak = temp(&tmp, "riak.toml", catalog::get("riak").unwrap().text);
        let (code, out, _) = run_cmd(TamCommand::Check {
            model: riak,
            json: true,
        });
        assert_eq!(code, 1);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let problems = v["problems"].as_array().unwrap();
        assert!(!problems.is_empty());
        for p in problems {
            let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
            assert_eq!(keys.len(), 5, "{p}");
            for key in ["kind", "stages", "resources", "explanation", "remedy"] {
                assert!(p.get(key).is_some(), "missing {key} in {p}");
            }
        }
        assert_eq!(problems[0]["kind"], "no_scheduling");
    }

    #[test]
    fn draw_writes_svg_and_dot_and_rejects_other_extensions() {
        let tmp = tmp_dir();
        let model = temp(&tmp, "draw.toml", catalog::get("tamed-hbase").unwrap().text);
        let svg = model.with_extension("svg");
        let dot = model.with_extension("dot");
        assert_eq!(
            run_cmd(TamCommand::Draw {
                model: model.clone(),
                output: svg.clone(),
                highlight: true
            })
            .0,
            0
        );
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
        assert_eq!(
            run_cmd(TamCommand::Draw {
                model: model.clone(),
                output: dot.clone(),
                highlight: false
            })
            .0,
            0
        );
        assert!(std::fs::read_to_string(&dot)
            .unwrap()
            .starts_with("digraph"));
        assert_eq!(
            run_cmd(TamCommand::Draw {
                model,
                output: PathBuf::from("x.png"),
                highlight: false
            })
            .0,
            2
        );
    }

    #[test]
    fn catalog_lists_table_2_and_prints_models() {
        let (code, out, _) = run_cmd(TamCommand::Catalog { name: None });
        assert_eq!(code, 0);
        assert!(
            out.lines()
                .any(|l| l.starts_with("hbase ") && l.contains("N U C B O")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("riak ") && l.contains("N U C . .")),
            "{out}"
        );
        let (code, out, _) = run_cmd(TamCommand::Catalog {
            name: Some("mongodb".into()),
        });
        assert_eq!(code, 0);
        assert!(Model::from_toml(&out).is_ok());
        assert_eq!(
            run_cmd(TamCommand::Catalog {
                name: Some("nope".into())
            })
            .0,
            2
        );
    }

    #[test]
    fn what_if_reports_and_writes_the_changed_model() {
        let tmp = tmp_dir();
        let model = temp(&tmp, "fig8a.toml", "[model]\nname = \"8a\"\n[[stage]]\nname = \"Req Handle\"\nscheduling = \"pluggable\"\nresources = { cpu = true }\ndownstream = [\"I/O\"]\n[[stage]]\nname = \"I/O\"\nscheduling = \"on_demand\"\nresources = { io = true }\n");
        let written = model.with_file_name("fig8b.toml");
        let cmd = TamCommand::WhatIf {
            model,
            changes: vec!["set I/O.scheduling = pluggable".into()],
            json: false,
            write: Some(written.clone()),
            simulate: false,
            set: SetArgs::default(),
        };
        let (code, out, _) = run_cmd(cmd);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("resolved (1)"), "{out}");
        assert_eq!(analyze(&Model::load(&written).unwrap()).problems.len(), 0);
    }

    #[test]
    fn what_if_simulate_compares_both_architectures_on_one_workload() {
        let tmp = tmp_dir();
        // Fig. 8(a) → (b): C2 (40 threads) crowds C1 (4 threads) out of the on-demand disk
        // until the I/O stage gets a scheduler that shares it fairly.
        let model = temp(&tmp, "sim8a.toml", "[model]\nname = \"8a\"\n[[stage]]\nname = \"Req Handle\"\nscheduling = \"pluggable\"\nresources = { cpu = true }\ndownstream = [\"I/O\"]\n[[stage]]\nname = \"I/O\"\nscheduling = \"on_demand\"\nresources = { io = true }\n[simulation]\nduration = 5.0\nwarmup = 1.0\n[simulation.stage.\"Req Handle\"]\nthreads = 100\n[[simulation.request]]\nname = \"r\"\npath = [{ stage = \"Req Handle\", cpu_us = 100 }, { stage = \"I/O\", io_bytes = 100_000 }]\n[[simulation.client]]\nname = \"C1\"\nthreads = 4\n[[simulation.client]]\nname = \"C2\"\nthreads = 40\n");
        let cmd = |json| TamCommand::WhatIf {
            model: model.clone(),
            changes: vec!["set I/O.scheduling = pluggable".into()],
            json,
            write: None,
            simulate: true,
            set: SetArgs::default(),
        };
        let (code, out, err) = run_cmd(cmd(true));
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let c1 = &v["simulation"]["runs"][0]["clients"][0];
        let (before, after) = (
            c1["original"]["throughput"].as_f64().unwrap(),
            c1["changed"]["throughput"].as_f64().unwrap(),
        );
        // 1000 disk accesses a second: C1 holds 4 of 44 in flight before, half after.
        assert!((before - 1000.0 * 4.0 / 44.0).abs() < 15.0, "{before}");
        assert!((after - 500.0).abs() < 15.0, "{after}");
        let diff = c1["difference"]["throughput"].as_f64().unwrap();
        assert!((diff - (after - before)).abs() < 1e-9);
        assert_eq!(v["analysis"]["resolved"].as_array().unwrap().len(), 1);
        let (code, text, _) = run_cmd(cmd(false));
        assert_eq!(code, 0);
        assert!(
            text.contains("resolved (1)") && text.contains("same workload and seed"),
            "{text}"
        );
    }
}
