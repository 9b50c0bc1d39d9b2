//! The schedulability analysis of §3: the five predicates over a TAM (S, D, B), each
//! finding with the paper's explanation and the remedy it proposes.

use crate::model::{Model, Resource, Scheduling, Stage};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::fmt;

/// The five scheduling problems of §3, in the column order of Table 2 (N, U, C, B, O).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// §3.1: `∃s: s.r ≠ [false,false,false,false] ∧ s.q = on_demand`.
    NoScheduling,
    /// §3.2: `∃s, i: s.r[i] = unknown`.
    UnknownResourceUsage,
    /// §3.3: `∃s1 ≠ s2, i: s1.h = s2.h ∧ s1.q ≠ on_demand ∧ s2.q ≠ on_demand ∧
    /// s1.r[i] ≠ false ∧ s2.r[i] ≠ false`.
    HiddenContention,
    /// §3.4: `∃s: s.q ≠ on_demand ∧ B(s) ≠ ∅`.
    Blocking,
    /// §3.5: `∃s, i: s.o = true ∧ s.r[i] ≠ false`.
    OrderingConstraint,
}

impl ProblemKind {
    /// All kinds, in Table 2 order.
    pub const ALL: [ProblemKind; 5] = [
        ProblemKind::NoScheduling,
        ProblemKind::UnknownResourceUsage,
        ProblemKind::HiddenContention,
        ProblemKind::Blocking,
        ProblemKind::OrderingConstraint,
    ];

    /// The JSON key: `no_scheduling`, `unknown_resource_usage`, ….
    pub fn key(self) -> &'static str {
        match self {
            ProblemKind::NoScheduling => "no_scheduling",
            ProblemKind::UnknownResourceUsage => "unknown_resource_usage",
            ProblemKind::HiddenContention => "hidden_contention",
            ProblemKind::Blocking => "blocking",
            ProblemKind::OrderingConstraint => "ordering_constraint",
        }
    }

    /// The paper's name, e.g. "no scheduling".
    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::NoScheduling => "no scheduling",
            ProblemKind::UnknownResourceUsage => "unknown resource usage",
            ProblemKind::HiddenContention => "hidden contention",
            ProblemKind::Blocking => "blocking",
            ProblemKind::OrderingConstraint => "ordering constraint",
        }
    }

    /// The column letter of Table 2: N, U, C, B or O.
    pub fn letter(self) -> char {
        match self {
            ProblemKind::NoScheduling => 'N',
            ProblemKind::UnknownResourceUsage => 'U',
            ProblemKind::HiddenContention => 'C',
            ProblemKind::Blocking => 'B',
            ProblemKind::OrderingConstraint => 'O',
        }
    }

    /// The section of the paper that defines the problem.
    pub fn section(self) -> &'static str {
        match self {
            ProblemKind::NoScheduling => "§3.1",
            ProblemKind::UnknownResourceUsage => "§3.2",
            ProblemKind::HiddenContention => "§3.3",
            ProblemKind::Blocking => "§3.4",
            ProblemKind::OrderingConstraint => "§3.5",
        }
    }

    /// Parses a JSON key.
    pub fn from_key(key: &str) -> Option<ProblemKind> {
        ProblemKind::ALL.into_iter().find(|k| k.key() == key)
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// One witness of one predicate: the stages and resources involved, why it hinders
/// scheduling, and what the paper proposes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Which of the five problems.
    pub kind: ProblemKind,
    /// The stages involved. For blocking: the blocked stage first, then `B(s)`.
    pub stages: Vec<String>,
    /// The resources involved.
    pub resources: Vec<Resource>,
    /// Why this hinders scheduling (after the paper).
    pub explanation: String,
    /// The remedy the paper proposes.
    pub remedy: String,
    /// For hidden contention, the host whose stages contend (the predicate is per node);
    /// not part of the JSON, whose stage names already locate the finding.
    #[serde(skip)]
    pub host: Option<u32>,
}

impl Serialize for Resource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.key())
    }
}

/// `" [a, b]"` for a finding's resources named by `name` (empty when it names none).
pub(crate) fn resource_suffix(p: &Problem, name: fn(Resource) -> &'static str) -> String {
    if p.resources.is_empty() {
        String::new()
    } else {
        format!(
            " [{}]",
            p.resources
                .iter()
                .map(|&r| name(r))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The result of [`analyze`]: every finding, ordered by kind (Table 2 order), then by the
/// model's stage order (hidden contention: by host, then resource).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Report {
    /// The findings.
    pub problems: Vec<Problem>,
}

impl Report {
    /// The set of problem kinds found (a row of Table 2).
    pub fn kinds(&self) -> BTreeSet<ProblemKind> {
        self.problems.iter().map(|p| p.kind).collect()
    }

    /// The findings of one kind.
    pub fn of_kind(&self, kind: ProblemKind) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(move |p| p.kind == kind)
    }

    /// Whether the model is free of all five problems.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// A Table 2 row, e.g. `N U C B O` or `. U C B .`.
    pub fn table2_row(&self) -> String {
        let kinds = self.kinds();
        ProblemKind::ALL
            .map(|k| {
                if kinds.contains(&k) {
                    k.letter().to_string()
                } else {
                    ".".to_string()
                }
            })
            .join(" ")
    }

    /// `{"problems": [...]}`, pretty-printed; deterministic.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{\"problems\": []}"))
    }

    /// A human-readable report.
    pub fn to_text(&self, model: &Model) -> String {
        if self.problems.is_empty() {
            return format!(
                "{}: no scheduling problems found ({} stages)\n",
                model.name,
                model.stages.len()
            );
        }
        let mut out = format!(
            "{}: {} scheduling problem(s) — Table 2 row: {}\n",
            model.name,
            self.problems.len(),
            self.table2_row()
        );
        for (i, p) in self.problems.iter().enumerate() {
            out += &format!("\n{}. {} ({})\n", i + 1, p.kind.title(), p.kind.section());
            out += &format!("   stages:    {}\n", p.stages.join(", "));
            if !p.resources.is_empty() {
                let names: Vec<_> = p.resources.iter().map(|r| r.key()).collect();
                out += &format!("   resources: {}\n", names.join(", "));
            }
            out += &format!("   why:       {}\n", p.explanation);
            out += &format!("   remedy:    {}\n", p.remedy);
        }
        out
    }
}

/// Runs the five predicates of §3 on a model.
pub fn analyze(model: &Model) -> Report {
    let mut problems = Vec::new();
    problems.extend(model.stages.iter().filter_map(no_scheduling));
    problems.extend(model.stages.iter().filter_map(unknown_resource_usage));
    problems.extend(hidden_contention(model));
    let index = model.names();
    problems.extend(
        model
            .stages
            .iter()
            .filter_map(|s| blocking(model, &index, s)),
    );
    problems.extend(model.stages.iter().filter_map(ordering_constraint));
    Report { problems }
}

fn names(resources: &[Resource]) -> String {
    resources
        .iter()
        .map(|r| r.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// §3.1: an on-demand stage (no queue) that uses some resource extensively.
fn no_scheduling(s: &Stage) -> Option<Problem> {
    if !s.resources.any() || s.scheduling != Scheduling::OnDemand {
        return None;
    }
    let used = s.resources.used();
    Some(Problem {
        kind: ProblemKind::NoScheduling,
        stages: vec![s.name.clone()],
        resources: used.clone(),
        explanation: format!(
            "`{}` is an on-demand stage — threads are created per request, with no queue — yet it uses {} extensively: \
             there is no local scheduling point where its resource-intensive work could be ordered, so schedulers \
             upstream are irrelevant whenever this stage is the bottleneck (§3.1, Fig. 8a).",
            s.name,
            names(&used)
        ),
        remedy: format!(
            "Add a scheduling point: make `{}` a bounded stage whose queue takes a pluggable scheduler \
             (scheduling = \"pluggable\"), as Fig. 8b does for its I/O stage and Tamed-HBase does for Data Stream and \
             Data Xceive (§4.1.1).",
            s.name
        ),
        host: None,
    })
}

/// §3.2: a stage whose use of some resource depends on the request.
fn unknown_resource_usage(s: &Stage) -> Option<Problem> {
    let unknown = s.resources.unknown();
    if unknown.is_empty() {
        return None;
    }
    Some(Problem {
        kind: ProblemKind::UnknownResourceUsage,
        stages: vec![s.name.clone()],
        resources: unknown.clone(),
        explanation: format!(
            "`{}` may or may not use {} depending on the execution path a request takes, which is known only after \
             the stage has started the request: its scheduler must decide before the information exists, and so \
             either wastes idle resources or admits work onto a contended one (§3.2, Fig. 9a).",
            s.name,
            names(&unknown)
        ),
        remedy: format!(
            "Split `{}` by resource: move the work that may use {} into its own stage with its own scheduling point, \
             which then knows that (and how much) a request needs it (Fig. 9b; Tamed-HBase hands short-circuit reads \
             to Data Xceive, §4.1.2). Without restructuring, speculative execution can work around it \
             (Muzzled-HBase, §4.2.1).",
            s.name,
            names(&unknown)
        ),
        host: None,
    })
}

/// §3.3: two or more bounded stages on one host that may use the same resource; one
/// finding per (host, resource), naming every such stage.
fn hidden_contention(model: &Model) -> Vec<Problem> {
    let mut out = Vec::new();
    for (host, members) in model.stages_by_host() {
        for resource in Resource::ALL {
            let stages: Vec<String> = members
                .iter()
                .map(|&i| &model.stages[i])
                .filter(|s| s.scheduling.has_queue() && s.resources.get(resource).may_use())
                .map(|s| s.name.clone())
                .collect();
            if stages.len() < 2 {
                continue;
            }
            let hard = match resource {
                Resource::Cpu => " Some CPU contention is hard to avoid (e.g. network processing needs CPU); move CPU-heavy work \
                                  (serialization, checksums) into the CPU stage to make the rest small, as Tamed-HBase does.",
                Resource::Lock => " Lock usage usually cannot move to a dedicated stage unless the lock holders do little else \
                                   (the HDFS namespace lock can, §4.1.3).",
                _ => "",
            };
            out.push(Problem {
                kind: ProblemKind::HiddenContention,
                stages: stages.clone(),
                resources: vec![resource],
                explanation: format!(
                    "On {}, the stages {} each have their own scheduler yet compete for {}: fairness enforced at each \
                     queue does not add up to fairness on the node, because a stage that serves one tenant's heavy \
                     requests takes the resource from the others unseen by their schedulers (§3.3, Fig. 10a).",
                    model.host_label(host),
                    stages.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
                    resource.label()
                ),
                remedy: format!(
                    "Combine these stages so that one scheduler controls {} (Fig. 10b), or restructure so that one \
                     dedicated stage manages each resource (Tamed-HBase, §4.1.3); where that is too costly, coordinate \
                     the stages' schedulers, e.g. a controller that lowers a tenant's weight everywhere when one stage \
                     overuses the resource for it (Muzzled-HBase, §4.2.1).{hard}",
                    resource.label()
                ),
                host: Some(host),
            });
        }
    }
    out
}

/// §3.4: a bounded stage that blocks on other stages.
fn blocking(model: &Model, index: &HashMap<&str, usize>, s: &Stage) -> Option<Problem> {
    if !s.scheduling.has_queue() || s.blocks_on.is_empty() {
        return None;
    }
    let mut stages = vec![s.name.clone()];
    stages.extend(s.blocks_on.iter().cloned());
    // The resources the blocked threads end up waiting for.
    let waited: BTreeSet<Resource> = s
        .blocks_on
        .iter()
        .filter_map(|b| index.get(b.as_str()).map(|&i| &model.stages[i]))
        .flat_map(|b| b.resources.used())
        .collect();
    let waited: Vec<Resource> = waited.into_iter().collect();
    let waits_for = if waited.is_empty() {
        String::new()
    } else {
        format!(" (using {})", names(&waited))
    };
    Some(Problem {
        kind: ProblemKind::Blocking,
        stages,
        resources: waited,
        explanation: format!(
            "`{}` has a bounded number of threads and they block on {}{}: when one tenant's requests take that path, \
             all threads can end up blocked and requests that could complete are not served — upstream schedulers \
             would have to account for downstream progress (§3.4, Fig. 11a).",
            s.name,
            s.blocks_on.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            waits_for
        ),
        remedy: format!(
            "Make `{}` asynchronous — hand the request downstream and take the next one, resuming on notification \
             (Fig. 11b; Tamed-HBase, §4.1.4) — or, if the synchronous programming model must stay, treat its threads \
             as a resource and allocate them between tenants like CPU or I/O (Muzzled-HBase, §4.2.1).",
            s.name
        ),
        host: None,
    })
}

/// §3.5: a stage with an ordering constraint that uses some resource extensively.
fn ordering_constraint(s: &Stage) -> Option<Problem> {
    let used = s.resources.used();
    if !s.ordering || used.is_empty() {
        return None;
    }
    Some(Problem {
        kind: ProblemKind::OrderingConstraint,
        stages: vec![s.name.clone()],
        resources: used.clone(),
        explanation: format!(
            "`{}` must serve requests in arrival order (e.g. a write-ahead log) while using {} extensively: its \
             scheduler cannot reorder the resource-intensive work, so a high-priority request waits behind every \
             request that entered earlier (§3.5, Fig. 12a).",
            s.name,
            names(&used)
        ),
        remedy: format!(
            "Separate the ordered streams: give each tenant (or stream) its own sequence with no shared state — e.g. one \
             WAL per client — so order holds within a stream while the scheduler chooses between streams \
             (Fig. 12b; Tamed-HBase, §4.1.5). Without redesigning consistency, schedule above `{}` and limit the \
             requests outstanding in it (Muzzled-HBase, §4.2.1).",
            s.name
        ),
        host: None,
    })
}
