//! The TOML model file (documented in `docs/tam.md`).
//!
//! The file is walked by hand rather than through serde derive so that every error can
//! name the stage and the field. Unknown keys are rejected (a typo must not silently
//! drop a fact); new optional keys — e.g. simulation parameters such as threads per stage
//! or per-request demands — can be added later with defaults, so existing files keep
//! parsing unchanged.

use crate::error::{FieldError, ModelError};
use crate::model::{Model, Resource, ResourceVector, Scheduling, Stage, Usage};
use std::path::Path;
use toml::{Table, Value};

/// The format version this crate reads and writes (`format = 1`, optional).
pub const FORMAT_VERSION: i64 = 1;

/// `simulation` holds the simulator's workload and capacities and `sweep` its points (read
/// by `fairlane-sim`'s TAM model, docs/tam.md "Simulate it"); the analysis ignores them.
const TOP_KEYS: &[&str] = &["format", "model", "hosts", "stage", "simulation", "sweep"];
const MODEL_KEYS: &[&str] = &["name", "source", "description"];
const STAGE_KEYS: &[&str] = &[
    "name",
    "host",
    "scheduling",
    "resources",
    "ordering",
    "downstream",
    "blocks_on",
    "note",
];

impl Model {
    /// Parses and validates a model from TOML text.
    pub fn from_toml(text: &str) -> Result<Model, ModelError> {
        parse(text)
    }

    /// Validates a model from a model file's parsed TOML document.
    pub fn from_table(table: &Table) -> Result<Model, ModelError> {
        from_table(table)
    }

    /// Reads, parses and validates a model file; errors name the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ModelError::new(vec![FieldError::general(format!(
                "cannot read the file: {e}"
            ))])
            .in_file(&shown)
        })?;
        parse(&text).map_err(|e| e.in_file(shown))
    }

    /// Writes the model as TOML that [`Model::from_toml`] reads back to an equal model.
    /// The output depends only on the model (deterministic).
    pub fn to_toml(&self) -> String {
        write(self)
    }
}

/// Parses and validates a model from TOML text.
pub fn parse(text: &str) -> Result<Model, ModelError> {
    let table: Table = text.parse().map_err(|e: toml::de::Error| {
        ModelError::new(vec![FieldError::general(format!(
            "invalid TOML: {}",
            e.to_string().trim_end()
        ))])
    })?;
    from_table(&table)
}

/// Validates a model from a parsed TOML document.
fn from_table(table: &Table) -> Result<Model, ModelError> {
    let mut errors = Vec::new();
    let model = read_model(table, &mut errors);
    if !errors.is_empty() {
        return Err(ModelError::new(errors));
    }
    model.validate()?;
    Ok(model)
}

fn read_model(top: &Table, errors: &mut Vec<FieldError>) -> Model {
    let mut model = Model::default();
    for key in top.keys() {
        if !TOP_KEYS.contains(&key.as_str()) {
            errors.push(FieldError::model(
                key,
                format!("unknown top-level key; allowed: {}", TOP_KEYS.join(", ")),
            ));
        }
    }
    match top.get("format") {
        None => {}
        Some(Value::Integer(FORMAT_VERSION)) => {}
        Some(Value::Integer(v)) => errors.push(FieldError::model(
            "format",
            format!("version {v} is not supported; this build reads format = {FORMAT_VERSION}"),
        )),
        Some(v) => errors.push(wrong_type("format", "an integer", v)),
    }
    match top.get("model") {
        Some(Value::Table(t)) => read_model_table(t, &mut model, errors),
        Some(v) => errors.push(wrong_type("model", "a table [model]", v)),
        None => errors.push(FieldError::model(
            "model",
            "missing the [model] table (with at least `name`)",
        )),
    }
    match top.get("hosts") {
        None => {}
        Some(Value::Table(t)) => read_hosts(t, &mut model, errors),
        Some(v) => errors.push(wrong_type("hosts", "a table [hosts]", v)),
    }
    match top.get("stage") {
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::Table(t) => {
                        if let Some(stage) = read_stage(t, i, errors) {
                            model.stages.push(stage);
                        }
                    }
                    v => errors.push(FieldError::stage(
                        &format!("#{}", i + 1),
                        "stage",
                        format!("expected a [[stage]] table, found {}", v.type_str()),
                    )),
                }
            }
        }
        Some(v) => errors.push(wrong_type("stage", "[[stage]] tables", v)),
        None => {} // validate() reports the empty model
    }
    model
}

/// A model-level field holding a value of the wrong type: what was `expected`, what was found.
fn wrong_type(field: &str, expected: &str, v: &Value) -> FieldError {
    FieldError::model(
        field,
        format!("expected {expected}, found {}", v.type_str()),
    )
}

/// `[model]`: name, source, description.
fn read_model_table(t: &Table, model: &mut Model, errors: &mut Vec<FieldError>) {
    for key in t.keys() {
        if !MODEL_KEYS.contains(&key.as_str()) {
            errors.push(FieldError::model(
                &format!("model.{key}"),
                format!("unknown key; allowed: {}", MODEL_KEYS.join(", ")),
            ));
        }
    }
    match t.get("name") {
        Some(Value::String(s)) => model.name = s.clone(),
        Some(v) => errors.push(wrong_type("model.name", "a string", v)),
        None => errors.push(FieldError::model(
            "model.name",
            "missing; every model needs a name",
        )),
    }
    let in_model = |f: &str, m| FieldError::model(&format!("model.{f}"), m);
    model.source = opt_string(t, "source", errors, in_model);
    model.description = opt_string(t, "description", errors, in_model);
}

/// `[hosts]`: positive host IDs to labels.
fn read_hosts(t: &Table, model: &mut Model, errors: &mut Vec<FieldError>) {
    for (key, value) in t {
        let id = match key.parse::<u32>() {
            Ok(id) if id > 0 => id,
            _ => {
                errors.push(FieldError::model(
                    &format!("hosts.{key}"),
                    "host IDs are positive integers, e.g. `1 = \"RegionServer\"`",
                ));
                continue;
            }
        };
        match value {
            Value::String(s) => {
                model.hosts.insert(id, s.clone());
            }
            v => errors.push(FieldError::model(
                &format!("hosts.{key}"),
                format!(
                    "expected a string (the host's label), found {}",
                    v.type_str()
                ),
            )),
        }
    }
}

fn read_stage(t: &Table, index: usize, errors: &mut Vec<FieldError>) -> Option<Stage> {
    let numbered = || format!("#{}", index + 1);
    let name = match t.get("name") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            errors.push(FieldError::stage(
                &numbered(),
                "name",
                format!("expected a string, found {}", v.type_str()),
            ));
            None
        }
        None => {
            errors.push(FieldError::stage(
                &numbered(),
                "name",
                "missing; every stage needs a name",
            ));
            None
        }
    };
    let who = match &name {
        Some(n) if !n.trim().is_empty() => n.clone(),
        _ => numbered(),
    };
    let before = errors.len();
    let mut fields = StageFields {
        t,
        who: &who,
        errors,
    };
    for key in t.keys() {
        if !STAGE_KEYS.contains(&key.as_str()) {
            fields.push(
                key,
                format!("unknown key; allowed: {}", STAGE_KEYS.join(", ")),
            );
        }
    }
    let host = fields.host();
    let scheduling = fields.scheduling();
    let resources = fields.resources();
    let ordering = fields.ordering();
    let downstream = string_list(t, "downstream", &who, errors);
    let blocks_on = string_list(t, "blocks_on", &who, errors);
    let note = opt_string(t, "note", errors, |f, m| FieldError::stage(&who, f, m));
    if errors.len() > before {
        return None;
    }
    Some(Stage {
        name: name?,
        host,
        resources,
        ordering,
        scheduling: scheduling?,
        downstream,
        blocks_on,
        note,
    })
}

/// The fields of one `[[stage]]` table, each read with errors naming the stage and field.
struct StageFields<'a> {
    t: &'a Table,
    who: &'a str,
    errors: &'a mut Vec<FieldError>,
}

impl StageFields<'_> {
    fn push(&mut self, field: &str, message: String) {
        self.errors
            .push(FieldError::stage(self.who, field, message));
    }

    /// `host`: a positive integer, 1 when absent (or wrong, with the error recorded).
    fn host(&mut self) -> u32 {
        match self.t.get("host") {
            None => 1,
            Some(Value::Integer(h)) if *h > 0 && *h <= u32::MAX as i64 => *h as u32,
            Some(Value::Integer(h)) => {
                self.push(
                    "host",
                    format!("must be a positive integer (Definition 2), found {h}"),
                );
                1
            }
            Some(v) => {
                self.push(
                    "host",
                    format!("expected a positive integer, found {}", v.type_str()),
                );
                1
            }
        }
    }

    /// `scheduling`: one of the scheduling types' keys; required.
    fn scheduling(&mut self) -> Option<Scheduling> {
        let allowed = || {
            Scheduling::ALL
                .map(|s| format!("\"{}\"", s.key()))
                .join(", ")
        };
        let message = match self.t.get("scheduling") {
            Some(Value::String(s)) => match Scheduling::from_key(s) {
                Some(q) => return Some(q),
                None => format!(
                    "`{s}` is not a scheduling type; expected one of {}",
                    allowed()
                ),
            },
            Some(v) => format!("expected one of {}, found {}", allowed(), v.type_str()),
            None => format!("missing; expected one of {}", allowed()),
        };
        self.push("scheduling", message);
        None
    }

    /// `resources`: a table of resource keys to `true`, `false` or `"unknown"`.
    fn resources(&mut self) -> ResourceVector {
        let mut resources = ResourceVector::NONE;
        let r = match self.t.get("resources") {
            None => return resources,
            Some(Value::Table(r)) => r,
            Some(v) => {
                self.push(
                    "resources",
                    format!(
                        "expected a table such as {{ cpu = true, io = \"unknown\" }}, found {}",
                        v.type_str()
                    ),
                );
                return resources;
            }
        };
        for (key, value) in r {
            let field = format!("resources.{key}");
            let Some(resource) = Resource::from_key(key) else {
                self.push(
                    &field,
                    format!(
                        "unknown resource; expected {}",
                        Resource::ALL.map(|r| r.key()).join(", ")
                    ),
                );
                continue;
            };
            match value {
                Value::Boolean(true) => resources.set(resource, Usage::True),
                Value::Boolean(false) => resources.set(resource, Usage::False),
                Value::String(s) if s == "unknown" => resources.set(resource, Usage::Unknown),
                Value::String(s) => self.push(
                    &field,
                    format!("expected true, false or \"unknown\", found \"{s}\""),
                ),
                v => self.push(
                    &field,
                    format!(
                        "expected true, false or \"unknown\", found {}",
                        v.type_str()
                    ),
                ),
            }
        }
        resources
    }

    /// `ordering`: a boolean, false when absent.
    fn ordering(&mut self) -> bool {
        match self.t.get("ordering") {
            None => false,
            Some(Value::Boolean(b)) => *b,
            Some(v) => {
                self.push(
                    "ordering",
                    format!("expected true or false, found {}", v.type_str()),
                );
                false
            }
        }
    }
}

fn string_list(t: &Table, field: &str, who: &str, errors: &mut Vec<FieldError>) -> Vec<String> {
    match t.get(field) {
        None => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    v => errors.push(FieldError::stage(
                        who,
                        field,
                        format!(
                            "expected a list of stage names, found a {} in it",
                            v.type_str()
                        ),
                    )),
                }
            }
            out
        }
        Some(v) => {
            errors.push(FieldError::stage(
                who,
                field,
                format!(
                    "expected a list of stage names such as [\"RPC Handle\"], found {}",
                    v.type_str()
                ),
            ));
            Vec::new()
        }
    }
}

fn opt_string(
    t: &Table,
    field: &str,
    errors: &mut Vec<FieldError>,
    err: impl Fn(&str, String) -> FieldError,
) -> Option<String> {
    match t.get(field) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            errors.push(err(
                field,
                format!("expected a string, found {}", v.type_str()),
            ));
            None
        }
    }
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn quote_list(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", parts.join(", "))
}

fn write(model: &Model) -> String {
    let mut out = format!(
        "format = {FORMAT_VERSION}\n\n[model]\nname = {}\n",
        quote(&model.name)
    );
    if let Some(source) = &model.source {
        out += &format!("source = {}\n", quote(source));
    }
    if let Some(description) = &model.description {
        out += &format!("description = {}\n", quote(description));
    }
    if !model.hosts.is_empty() {
        out += "\n[hosts]\n";
        for (id, label) in &model.hosts {
            out += &format!("{id} = {}\n", quote(label));
        }
    }
    for stage in &model.stages {
        out += &format!(
            "\n[[stage]]\nname = {}\nhost = {}\nscheduling = \"{}\"\n",
            quote(&stage.name),
            stage.host,
            stage.scheduling.key()
        );
        let used: Vec<String> = Resource::ALL
            .into_iter()
            .filter_map(|r| match stage.resources.get(r) {
                Usage::False => None,
                Usage::True => Some(format!("{} = true", r.key())),
                Usage::Unknown => Some(format!("{} = \"unknown\"", r.key())),
            })
            .collect();
        if !used.is_empty() {
            out += &format!("resources = {{ {} }}\n", used.join(", "));
        }
        if stage.ordering {
            out += "ordering = true\n";
        }
        if !stage.downstream.is_empty() {
            out += &format!("downstream = {}\n", quote_list(&stage.downstream));
        }
        if !stage.blocks_on.is_empty() {
            out += &format!("blocks_on = {}\n", quote_list(&stage.blocks_on));
        }
        if let Some(note) = &stage.note {
            out += &format!("note = {}\n", quote(note));
        }
    }
    out
}
