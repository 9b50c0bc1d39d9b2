//! What-if: apply the architectural changes the paper proposes to a model and see which
//! problems disappear (the reasoning of §4.1, where each fix turns HBase step by step
//! into Tamed-HBase).
//!
//! Changes are written as short commands (also accepted by the CLI's `--change`):
//!
//! | command | effect |
//! | --- | --- |
//! | `set STAGE.scheduling = pluggable` | change `q` (add a scheduling point, §3.1) |
//! | `set STAGE.io = false` | change one component of `r` (`cpu`, `io`, `network`, `lock`) |
//! | `set STAGE.ordering = false` | change `o` (separate the ordered streams, §3.5) |
//! | `set STAGE.host = 2` | change `h` |
//! | `async STAGE` | empty `B(s)`: the stage no longer blocks (§3.4) |
//! | `split STAGE` | one stage per resource it may use (§3.2) |
//! | `combine A + B as NAME` | merge stages on one host into one (§3.3) |

use crate::analysis::{analyze, Problem, ProblemKind, Report};
use crate::error::ModelError;
use crate::model::{Model, Resource, ResourceVector, Scheduling, Stage, Usage};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One architectural change to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Set the scheduling type `q` of a stage.
    SetScheduling {
        /// The stage.
        stage: String,
        /// The new type.
        scheduling: Scheduling,
    },
    /// Set one component of the resource vector `r`.
    SetResource {
        /// The stage.
        stage: String,
        /// The resource.
        resource: Resource,
        /// The new usage.
        usage: Usage,
    },
    /// Set the ordering constraint `o`.
    SetOrdering {
        /// The stage.
        stage: String,
        /// The new value.
        ordering: bool,
    },
    /// Move a stage to another host.
    SetHost {
        /// The stage.
        stage: String,
        /// The new host ID.
        host: u32,
    },
    /// Make a stage asynchronous: `B(s) = ∅` (Fig. 11b).
    MakeAsync {
        /// The stage.
        stage: String,
    },
    /// Split a stage by resource (Fig. 9b). The first part, named `STAGE (RES)` after the
    /// first resource, keeps the stage's upstream, downstream and blocking relations and
    /// sends work to the other parts; each part uses exactly one resource, and its usage
    /// is `true` because a dedicated stage is reached only by requests that need it. All
    /// parts inherit `h`, `o` and `q` (as Tamed-HBase's new stages do, §4.1.3).
    Split {
        /// The stage.
        stage: String,
    },
    /// Combine stages of one host into one stage (Fig. 10b): resources are the union
    /// (true over unknown over false), `o` is true if any part had it, `q` is the most
    /// schedulable of the parts (pluggable, then general, then on-demand), and relations
    /// are the union with references to the parts redirected to the new stage.
    Combine {
        /// The stages to combine (two or more).
        stages: Vec<String>,
        /// The new stage's name.
        name: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::SetScheduling { stage, scheduling } => {
                write!(f, "set {stage}.scheduling = {scheduling}")
            }
            Change::SetResource {
                stage,
                resource,
                usage,
            } => {
                let v = match usage {
                    Usage::True => "true",
                    Usage::False => "false",
                    Usage::Unknown => "unknown",
                };
                write!(f, "set {stage}.{} = {v}", resource.key())
            }
            Change::SetOrdering { stage, ordering } => {
                write!(f, "set {stage}.ordering = {ordering}")
            }
            Change::SetHost { stage, host } => write!(f, "set {stage}.host = {host}"),
            Change::MakeAsync { stage } => write!(f, "async {stage}"),
            Change::Split { stage } => write!(f, "split {stage}"),
            Change::Combine { stages, name } => {
                write!(f, "combine {} as {name}", stages.join(" + "))
            }
        }
    }
}

/// What kind of change failed ([`ChangeError::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeErrorKind {
    /// The change's text does not parse (`set STAGE.FIELD = VALUE`, …).
    Syntax,
    /// The change names a stage the model does not have.
    UnknownStage,
    /// The change cannot be applied to this model: a name already taken, stages on
    /// different hosts, too few resources or stages.
    Conflict,
    /// The change applied, but the changed model is invalid.
    InvalidModel,
}

/// A change that could not be parsed or applied: its [`kind`](ChangeErrorKind) and a message
/// naming the change and what was wrong. `Display` shows the message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeError {
    /// What kind of failure.
    pub kind: ChangeErrorKind,
    /// What was wrong, for a person.
    pub message: String,
}

impl ChangeError {
    /// A failure of `kind` described by `message`.
    pub fn new(kind: ChangeErrorKind, message: impl Into<String>) -> Self {
        ChangeError {
            kind,
            message: message.into(),
        }
    }
    fn syntax(message: impl Into<String>) -> Self {
        ChangeError::new(ChangeErrorKind::Syntax, message)
    }
    fn conflict(message: impl Into<String>) -> Self {
        ChangeError::new(ChangeErrorKind::Conflict, message)
    }
    fn unknown_stage(message: impl Into<String>) -> Self {
        ChangeError::new(ChangeErrorKind::UnknownStage, message)
    }
}

impl fmt::Display for ChangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ChangeError {}

impl From<ModelError> for ChangeError {
    fn from(e: ModelError) -> ChangeError {
        ChangeError::new(
            ChangeErrorKind::InvalidModel,
            format!("the changed model is invalid:\n{e}"),
        )
    }
}

const SYNTAX: &str =
    "expected `set STAGE.FIELD = VALUE`, `async STAGE`, `split STAGE` or `combine A + B as NAME`";

impl FromStr for Change {
    type Err = ChangeError;

    fn from_str(text: &str) -> Result<Change, ChangeError> {
        let text = text.trim();
        let (verb, rest) = text
            .split_once(char::is_whitespace)
            .ok_or_else(|| ChangeError::syntax(format!("`{text}`: {SYNTAX}")))?;
        let rest = rest.trim();
        match verb {
            "async" => Ok(Change::MakeAsync {
                stage: rest.to_string(),
            }),
            "split" => Ok(Change::Split {
                stage: rest.to_string(),
            }),
            "combine" => {
                let (list, name) = rest.rsplit_once(" as ").ok_or_else(|| {
                    ChangeError::syntax(format!("`{text}`: expected `combine A + B as NAME`"))
                })?;
                let stages: Vec<String> = list.split('+').map(|s| s.trim().to_string()).collect();
                Ok(Change::Combine {
                    stages,
                    name: name.trim().to_string(),
                })
            }
            "set" => parse_set(rest).map_err(|m| ChangeError::syntax(format!("`{text}`: {m}"))),
            _ => Err(ChangeError::syntax(format!(
                "`{text}`: unknown change `{verb}`; {SYNTAX}"
            ))),
        }
    }
}

fn parse_set(rest: &str) -> Result<Change, String> {
    let (target, value) = rest
        .split_once('=')
        .ok_or("expected `set STAGE.FIELD = VALUE`")?;
    let (stage, field) = target
        .trim()
        .rsplit_once('.')
        .ok_or("expected `STAGE.FIELD` before `=`")?;
    let (stage, field, value) = (stage.trim().to_string(), field.trim(), value.trim());
    let boolean = |v: &str| match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("`{field}` takes true or false, not `{v}`")),
    };
    if let Some(resource) = Resource::from_key(field) {
        let usage = match value {
            "true" => Usage::True,
            "false" => Usage::False,
            "unknown" => Usage::Unknown,
            _ => {
                return Err(format!(
                    "`{field}` takes true, false or unknown, not `{value}`"
                ))
            }
        };
        return Ok(Change::SetResource {
            stage,
            resource,
            usage,
        });
    }
    match field {
        "scheduling" => {
            let scheduling = Scheduling::from_key(value).ok_or_else(|| format!("scheduling takes on_demand, pluggable or general, not `{value}`"))?;
            Ok(Change::SetScheduling { stage, scheduling })
        }
        "ordering" => Ok(Change::SetOrdering { stage, ordering: boolean(value)? }),
        "host" => match value.parse::<u32>() {
            Ok(host) if host > 0 => Ok(Change::SetHost { stage, host }),
            _ => Err(format!("host takes a positive integer, not `{value}`")),
        },
        _ => Err(format!("unknown field `{field}`; expected scheduling, ordering, host, cpu, io, network or lock")),
    }
}

fn stage_mut<'a>(model: &'a mut Model, name: &str) -> Result<&'a mut Stage, ChangeError> {
    let known = model
        .stages
        .iter()
        .map(|s| format!("`{}`", s.name))
        .collect::<Vec<_>>()
        .join(", ");
    model
        .stages
        .iter_mut()
        .find(|s| s.name == name)
        .ok_or_else(|| ChangeError::unknown_stage(format!("no stage `{name}`; stages are {known}")))
}

impl Change {
    /// Applies this change to `model` in place. The result is validated by [`apply`].
    pub fn apply_to(&self, model: &mut Model) -> Result<(), ChangeError> {
        match self {
            Change::SetScheduling { stage, scheduling } => {
                stage_mut(model, stage)?.scheduling = *scheduling
            }
            Change::SetResource {
                stage,
                resource,
                usage,
            } => stage_mut(model, stage)?.resources.set(*resource, *usage),
            Change::SetOrdering { stage, ordering } => {
                stage_mut(model, stage)?.ordering = *ordering
            }
            Change::SetHost { stage, host } => stage_mut(model, stage)?.host = *host,
            Change::MakeAsync { stage } => stage_mut(model, stage)?.blocks_on.clear(),
            Change::Split { stage } => split(model, stage)?,
            Change::Combine { stages, name } => combine(model, stages, name)?,
        }
        Ok(())
    }
}

/// Renames every reference to any of `from` into `to`, keeping the first occurrence.
fn redirect(list: &mut Vec<String>, from: &[String], to: &str) {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for name in list.drain(..) {
        let name = if from.contains(&name) {
            to.to_string()
        } else {
            name
        };
        if seen.insert(name.clone()) {
            out.push(name);
        }
    }
    *list = out;
}

fn split(model: &mut Model, name: &str) -> Result<(), ChangeError> {
    let index = model
        .index_of(name)
        .ok_or_else(|| ChangeError::unknown_stage(format!("no stage `{name}` to split")))?;
    let original = model.stages[index].clone();
    let used = original.resources.used();
    if used.len() < 2 {
        return Err(ChangeError::conflict(format!(
            "`{name}` uses {} resource(s); splitting by resource needs at least two",
            used.len()
        )));
    }
    let part_name = |r: Resource| format!("{} ({})", original.name, r.label());
    let mut parts: Vec<Stage> = used
        .iter()
        .map(|&r| Stage {
            name: part_name(r),
            resources: ResourceVector::NONE.with(r, Usage::True),
            downstream: Vec::new(),
            blocks_on: Vec::new(),
            note: None,
            ..original.clone()
        })
        .collect();
    let head = parts[0].name.clone();
    parts[0].downstream = used[1..]
        .iter()
        .map(|&r| part_name(r))
        .chain(original.downstream.iter().cloned())
        .collect();
    parts[0].blocks_on = original.blocks_on.clone();
    for part in &parts {
        if model.index_of(&part.name).is_some() {
            return Err(ChangeError::conflict(format!(
                "cannot split `{name}`: a stage named `{}` already exists",
                part.name
            )));
        }
    }
    let from = [original.name.clone()];
    for stage in &mut model.stages {
        redirect(&mut stage.downstream, &from, &head);
        redirect(&mut stage.blocks_on, &from, &head);
    }
    model.stages.splice(index..=index, parts);
    Ok(())
}

fn combine(model: &mut Model, names: &[String], new_name: &str) -> Result<(), ChangeError> {
    if names.len() < 2 {
        return Err(ChangeError::conflict("combine needs at least two stages"));
    }
    let mut parts = Vec::new();
    for name in names {
        parts.push(
            model.stage(name).cloned().ok_or_else(|| {
                ChangeError::unknown_stage(format!("no stage `{name}` to combine"))
            })?,
        );
    }
    if parts.iter().any(|p| p.host != parts[0].host) {
        return Err(ChangeError::conflict(format!(
            "cannot combine {}: they are on different hosts",
            names.join(" + ")
        )));
    }
    if !names.iter().any(|n| n == new_name) && model.index_of(new_name).is_some() {
        return Err(ChangeError::conflict(format!(
            "cannot combine into `{new_name}`: a stage of that name already exists"
        )));
    }
    let mut resources = ResourceVector::NONE;
    for r in Resource::ALL {
        let usages: Vec<Usage> = parts.iter().map(|p| p.resources.get(r)).collect();
        let usage = if usages.contains(&Usage::True) {
            Usage::True
        } else if usages.contains(&Usage::Unknown) {
            Usage::Unknown
        } else {
            Usage::False
        };
        resources.set(r, usage);
    }
    let scheduling = [
        Scheduling::Pluggable,
        Scheduling::General,
        Scheduling::OnDemand,
    ]
    .into_iter()
    .find(|q| parts.iter().any(|p| p.scheduling == *q))
    .unwrap_or(Scheduling::General);
    let mut combined = Stage {
        name: new_name.to_string(),
        host: parts[0].host,
        resources,
        ordering: parts.iter().any(|p| p.ordering),
        scheduling,
        downstream: parts
            .iter()
            .flat_map(|p| p.downstream.iter().cloned())
            .collect(),
        blocks_on: parts
            .iter()
            .flat_map(|p| p.blocks_on.iter().cloned())
            .collect(),
        note: None,
    };
    redirect(&mut combined.downstream, names, new_name);
    redirect(&mut combined.blocks_on, names, new_name);
    combined.downstream.retain(|n| n != new_name);
    combined.blocks_on.retain(|n| n != new_name);
    let first = model
        .stages
        .iter()
        .position(|s| names.contains(&s.name))
        .unwrap_or(0);
    model.stages.retain(|s| !names.contains(&s.name));
    for stage in &mut model.stages {
        redirect(&mut stage.downstream, names, new_name);
        redirect(&mut stage.blocks_on, names, new_name);
    }
    model.stages.insert(first.min(model.stages.len()), combined);
    Ok(())
}

/// Applies `changes` in order to a copy of `model` and validates the result.
pub fn apply(model: &Model, changes: &[Change]) -> Result<Model, ChangeError> {
    let mut changed = model.clone();
    for change in changes {
        change
            .apply_to(&mut changed)
            .map_err(|e| ChangeError::new(e.kind, format!("{change}: {e}")))?;
    }
    changed.validate()?;
    Ok(changed)
}

/// The outcome of a what-if: the changed model and how its problems differ.
#[derive(Debug, Clone)]
pub struct WhatIf {
    /// The model after the changes.
    pub model: Model,
    /// Findings before the changes.
    pub before: Report,
    /// Findings after the changes.
    pub after: Report,
}

impl WhatIf {
    /// Findings present before but not after. A finding is the same if it has the same
    /// kind and stages (for hidden contention: the same host and resource).
    pub fn resolved(&self) -> Vec<&Problem> {
        self.before
            .problems
            .iter()
            .filter(|p| !self.after.problems.iter().any(|q| same(p, q)))
            .collect()
    }

    /// Findings present after but not before (e.g. a split stage's new contention).
    pub fn introduced(&self) -> Vec<&Problem> {
        self.after
            .problems
            .iter()
            .filter(|p| !self.before.problems.iter().any(|q| same(p, q)))
            .collect()
    }

    /// Findings present both before and after (as they are after).
    pub fn remaining(&self) -> Vec<&Problem> {
        self.after
            .problems
            .iter()
            .filter(|p| self.before.problems.iter().any(|q| same(p, q)))
            .collect()
    }

    /// Kinds (Table 2 columns) present before and absent after.
    pub fn kinds_disappeared(&self) -> BTreeSet<ProblemKind> {
        self.before
            .kinds()
            .difference(&self.after.kinds())
            .copied()
            .collect()
    }

    /// `{"before": [...], "after": [...], "resolved": [...], "introduced": [...]}`, each a
    /// list of problems as in [`Report::to_json`]; deterministic.
    pub fn to_json(&self) -> String {
        let value = serde_json::json!({
            "before": self.before.problems,
            "after": self.after.problems,
            "resolved": self.resolved(),
            "introduced": self.introduced(),
        });
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }

    /// A human-readable summary.
    pub fn to_text(&self, changes: &[Change]) -> String {
        let mut out = format!("what-if on {}:\n", self.model.name);
        for c in changes {
            out += &format!("  {c}\n");
        }
        out += &format!(
            "\nTable 2 row before: {}\nTable 2 row after:  {}\n",
            self.before.table2_row(),
            self.after.table2_row()
        );
        let list = |title: &str, items: Vec<&Problem>| {
            let mut s = format!("\n{title} ({}):\n", items.len());
            for p in items {
                let res = crate::analysis::resource_suffix(p, Resource::key);
                s += &format!("  - {}: {}{}\n", p.kind.title(), p.stages.join(", "), res);
            }
            s
        };
        out += &list("resolved", self.resolved());
        out += &list("introduced", self.introduced());
        out += &list("remaining", self.remaining());
        for p in self.remaining() {
            if let Some(old) = self
                .before
                .problems
                .iter()
                .find(|q| same(p, q) && q.stages != p.stages)
            {
                out += &format!(
                    "    ({} on {} was: {})\n",
                    p.kind.title(),
                    p.resources
                        .iter()
                        .map(|r| r.key())
                        .collect::<Vec<_>>()
                        .join(", "),
                    old.stages.join(", ")
                );
            }
        }
        out
    }
}

/// Whether two findings are the same problem: hidden contention is identified by its
/// host and resource (stages may join or leave it), the others by their stages.
fn same(a: &Problem, b: &Problem) -> bool {
    if a.kind != b.kind {
        return false;
    }
    match a.kind {
        ProblemKind::HiddenContention => a.host == b.host && a.resources == b.resources,
        _ => a.stages == b.stages && a.resources == b.resources,
    }
}

/// Applies `changes` to a copy of `model` and analyzes both versions.
pub fn what_if(model: &Model, changes: &[Change]) -> Result<WhatIf, ChangeError> {
    let changed = apply(model, changes)?;
    Ok(WhatIf {
        before: analyze(model),
        after: analyze(&changed),
        model: changed,
    })
}
