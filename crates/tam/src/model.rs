//! The thread architecture model of §2.4: Definition 1 (the triple (S, D, B)) and
//! Definition 2 (a stage is the 5-tuple (n, h, r, o, q)).

use crate::error::{FieldError, ModelError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// The four resources of Definition 2, in the order of the resource vector `r`
/// (CPU, I/O, network, lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// Processor time.
    Cpu,
    /// Storage I/O (disk or SSD bandwidth).
    Io,
    /// Network bandwidth.
    Network,
    /// A highly contended lock (footnote 1: e.g. the HDFS namespace lock).
    Lock,
}

impl Resource {
    /// All resources, in resource-vector order.
    pub const ALL: [Resource; 4] = [
        Resource::Cpu,
        Resource::Io,
        Resource::Network,
        Resource::Lock,
    ];

    /// The key used in model files and JSON: `cpu`, `io`, `network`, `lock`.
    pub fn key(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Io => "io",
            Resource::Network => "network",
            Resource::Lock => "lock",
        }
    }

    /// The label of the resource box in a Thread Architecture Diagram.
    pub fn label(self) -> &'static str {
        match self {
            Resource::Cpu => "CPU",
            Resource::Io => "I/O",
            Resource::Network => "NET",
            Resource::Lock => "LOCK",
        }
    }

    /// Parses a model-file key (`cpu`, `io`, `network`, `lock`).
    pub fn from_key(key: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.key() == key)
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// One component of the resource vector `r` (Definition 2): whether the stage uses the
/// resource *extensively* — true, false, or unknown (it depends on the request, §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Usage {
    /// Not used extensively.
    #[default]
    False,
    /// Used extensively.
    True,
    /// May or may not be used extensively, depending on the request (drawn in brackets).
    Unknown,
}

impl Usage {
    /// `r[i] ≠ false` in the predicates of §3: used, or possibly used.
    pub fn may_use(self) -> bool {
        self != Usage::False
    }
}

/// The resource vector `r` of a stage (Definition 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ResourceVector([Usage; 4]);

impl ResourceVector {
    /// The vector `[false, false, false, false]`.
    pub const NONE: ResourceVector = ResourceVector([Usage::False; 4]);

    /// The usage of one resource.
    pub fn get(&self, resource: Resource) -> Usage {
        self.0[resource.index()]
    }

    /// Sets the usage of one resource.
    pub fn set(&mut self, resource: Resource, usage: Usage) {
        self.0[resource.index()] = usage;
    }

    /// Builder form of [`ResourceVector::set`].
    pub fn with(mut self, resource: Resource, usage: Usage) -> Self {
        self.set(resource, usage);
        self
    }

    /// Resources with `r[i] ≠ false`, in vector order.
    pub fn used(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|&r| self.get(r).may_use())
            .collect()
    }

    /// Resources with `r[i] = unknown`, in vector order.
    pub fn unknown(&self) -> Vec<Resource> {
        Resource::ALL
            .into_iter()
            .filter(|&r| self.get(r) == Usage::Unknown)
            .collect()
    }

    /// `r ≠ [false, false, false, false]`.
    pub fn any(&self) -> bool {
        *self != ResourceVector::NONE
    }
}

/// The local scheduling type `q` of a stage (Definition 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scheduling {
    /// Threads are created per request: no queue, so no scheduling point (§2.1).
    OnDemand,
    /// A bounded stage whose queue accepts a pluggable scheduler (the plug symbol).
    Pluggable,
    /// A bounded stage whose queue has hard-coded or implicit (e.g. FIFO) scheduling.
    General,
}

impl Scheduling {
    /// All scheduling types.
    pub const ALL: [Scheduling; 3] = [
        Scheduling::OnDemand,
        Scheduling::Pluggable,
        Scheduling::General,
    ];

    /// The key used in model files and in the paper: `on_demand`, `pluggable`, `general`.
    pub fn key(self) -> &'static str {
        match self {
            Scheduling::OnDemand => "on_demand",
            Scheduling::Pluggable => "pluggable",
            Scheduling::General => "general",
        }
    }

    /// Parses a model-file key.
    pub fn from_key(key: &str) -> Option<Scheduling> {
        Scheduling::ALL.into_iter().find(|s| s.key() == key)
    }

    /// Bounded stages (pluggable or general) have a queue, i.e. a scheduling point.
    pub fn has_queue(self) -> bool {
        self != Scheduling::OnDemand
    }
}

impl fmt::Display for Scheduling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A stage: the 5-tuple (n, h, r, o, q) of Definition 2, plus this stage's row of the
/// downstream relation D and the blocking relation B of Definition 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// `n`: the stage's name, unique within the model.
    pub name: String,
    /// `h`: the host ID (a positive integer); stages with the same host share a node.
    pub host: u32,
    /// `r`: which resources the stage uses extensively.
    pub resources: ResourceVector,
    /// `o`: whether requests must be served in a fixed order (the stop symbol).
    pub ordering: bool,
    /// `q`: the local scheduling type.
    pub scheduling: Scheduling,
    /// `D(s)`: the stages this stage issues requests to.
    pub downstream: Vec<String>,
    /// `B(s)`: the stages this stage blocks on (waits for before taking another request).
    pub blocks_on: Vec<String>,
    /// Free text for readers (why a value was chosen); not used by the analysis.
    pub note: Option<String>,
}

impl Stage {
    /// A stage on host 1 with no resources, no ordering and no relations.
    pub fn new(name: impl Into<String>, scheduling: Scheduling) -> Stage {
        Stage {
            name: name.into(),
            host: 1,
            resources: ResourceVector::NONE,
            ordering: false,
            scheduling,
            downstream: Vec::new(),
            blocks_on: Vec::new(),
            note: None,
        }
    }
}

/// A thread architecture (S, D, B) (Definition 1), with a name and host labels for
/// readers. The relations D and B are stored on each stage.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Model {
    /// The system's name, e.g. "HBase/HDFS".
    pub name: String,
    /// Where the model comes from (paper figure, version of the system).
    pub source: Option<String>,
    /// Free text about the model.
    pub description: Option<String>,
    /// Optional labels for host IDs (e.g. 1 → "RegionServer + DataNode").
    pub hosts: BTreeMap<u32, String>,
    /// S, in file order (the order is kept for deterministic output).
    pub stages: Vec<Stage>,
}

impl Model {
    /// The stage named `name`, if any.
    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }

    /// Index of the stage named `name` in [`Model::stages`] (a scan: to resolve many names,
    /// build [`Model::names`] once).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// Every stage name with its index in [`Model::stages`] (the first, for a name given
    /// twice), so that resolving the relations of a large model stays linear.
    pub fn names(&self) -> HashMap<&str, usize> {
        let mut names = HashMap::with_capacity(self.stages.len());
        for (i, s) in self.stages.iter().enumerate() {
            names.entry(s.name.as_str()).or_insert(i);
        }
        names
    }

    /// The downstream relation D as stage indices (names that resolve to no stage left
    /// out), in each stage's order.
    pub fn downstream_indices(&self) -> Vec<Vec<usize>> {
        let names = self.names();
        self.stages
            .iter()
            .map(|s| {
                s.downstream
                    .iter()
                    .filter_map(|d| names.get(d.as_str()).copied())
                    .collect()
            })
            .collect()
    }

    /// A label for a host: its name if given, else `host N`.
    pub fn host_label(&self, host: u32) -> String {
        match self.hosts.get(&host) {
            Some(name) => format!("host {host}: {name}"),
            None => format!("host {host}"),
        }
    }

    /// Host IDs in use, ascending.
    pub fn host_ids(&self) -> Vec<u32> {
        let ids: BTreeSet<u32> = self.stages.iter().map(|s| s.host).collect();
        ids.into_iter().collect()
    }

    /// The stages of each host in use, ascending by host ID, each list in file order.
    pub fn stages_by_host(&self) -> Vec<(u32, Vec<usize>)> {
        let mut by_host: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, s) in self.stages.iter().enumerate() {
            by_host.entry(s.host).or_default().push(i);
        }
        by_host.into_iter().collect()
    }

    /// Checks the invariants the analysis relies on; reports every violation, each naming
    /// the stage and field.
    pub fn validate(&self) -> Result<(), ModelError> {
        let mut errors = Vec::new();
        if self.stages.is_empty() {
            errors.push(FieldError::model(
                "stage",
                "a model needs at least one [[stage]]",
            ));
        }
        let mut check = Relations {
            names: self.names(),
            squashed: None,
            model: self,
        };
        let mut seen = BTreeSet::new();
        for (i, stage) in self.stages.iter().enumerate() {
            let who = stage_label(stage, i);
            if stage.name.trim().is_empty() {
                errors.push(FieldError::stage(&who, "name", "must not be empty"));
            } else if !seen.insert(stage.name.as_str()) {
                errors.push(FieldError::stage(
                    &who,
                    "name",
                    "duplicate stage name; names must be unique",
                ));
            }
            if stage.host == 0 {
                errors.push(FieldError::stage(
                    &who,
                    "host",
                    "must be a positive integer (Definition 2)",
                ));
            }
            check.relation(&who, stage, "downstream", &stage.downstream, &mut errors);
            check.relation(&who, stage, "blocks_on", &stage.blocks_on, &mut errors);
        }
        for host in self.hosts.keys() {
            if *host == 0 {
                errors.push(FieldError::model(
                    "hosts",
                    "host IDs must be positive integers",
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ModelError::new(errors))
        }
    }
}

/// Resolves the stage names of relations while validating: one name index for the model,
/// and the "did you mean" index built at the first unknown name only.
struct Relations<'a> {
    names: HashMap<&'a str, usize>,
    /// Squashed name (case, spaces, `-` and `_` ignored) → the first stage with it.
    squashed: Option<HashMap<String, &'a str>>,
    model: &'a Model,
}

impl<'a> Relations<'a> {
    fn relation(
        &mut self,
        who: &str,
        stage: &Stage,
        field: &str,
        targets: &[String],
        errors: &mut Vec<FieldError>,
    ) {
        let mut seen = BTreeSet::new();
        for target in targets {
            if target == &stage.name {
                let what = if field == "blocks_on" {
                    "a stage cannot block on itself"
                } else {
                    "a stage cannot be downstream of itself"
                };
                errors.push(FieldError::stage(who, field, what));
            } else if !self.names.contains_key(target.as_str()) {
                errors.push(FieldError::stage(
                    who,
                    field,
                    format!("unknown stage `{target}`{}", self.suggest(target)),
                ));
            } else if !seen.insert(target.as_str()) {
                errors.push(FieldError::stage(
                    who,
                    field,
                    format!("`{target}` is listed twice"),
                ));
            }
        }
    }

    /// A "did you mean" hint: the stage name equal ignoring case and spaces, if any.
    fn suggest(&mut self, target: &str) -> String {
        let model = self.model;
        let squashed = self.squashed.get_or_insert_with(|| {
            let mut m = HashMap::new();
            for s in &model.stages {
                m.entry(squash(&s.name)).or_insert(s.name.as_str());
            }
            m
        });
        match squashed.get(&squash(target)) {
            Some(name) => format!(" (did you mean `{name}`?)"),
            None => String::new(),
        }
    }
}

fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '-' && *c != '_')
        .collect::<String>()
        .to_lowercase()
}

fn stage_label(stage: &Stage, index: usize) -> String {
    if stage.name.trim().is_empty() {
        format!("#{}", index + 1)
    } else {
        stage.name.clone()
    }
}
