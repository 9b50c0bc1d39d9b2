//! The model file: defaults, round trips, and errors that name the file, stage and field.

use fairlane_tam::catalog::CATALOG;
use fairlane_tam::{FieldError, Model, ModelError, Resource, Scheduling, Usage};

fn errors(toml: &str) -> Vec<FieldError> {
    match Model::from_toml(toml) {
        Ok(m) => panic!("expected an error, parsed {m:?}"),
        Err(e) => e.errors,
    }
}

/// The single error of an invalid model, as displayed.
fn error(toml: &str) -> String {
    let errs = errors(toml);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    errs[0].to_string()
}

const HEAD: &str = "[model]\nname = \"t\"\n";

fn with_stages(stages: &str) -> String {
    format!("{HEAD}{stages}")
}

#[test]
fn minimal_stage_gets_the_documented_defaults() {
    let m = Model::from_toml(&with_stages(
        "[[stage]]\nname = \"A\"\nscheduling = \"general\"\n",
    ))
    .unwrap();
    let a = &m.stages[0];
    assert_eq!(a.host, 1);
    assert!(!a.ordering);
    assert!(!a.resources.any());
    assert!(a.downstream.is_empty() && a.blocks_on.is_empty());
    assert_eq!(a.scheduling, Scheduling::General);
}

#[test]
fn resources_take_true_false_and_unknown() {
    let m = Model::from_toml(&with_stages(
        "[[stage]]\nname = \"A\"\nscheduling = \"on_demand\"\nresources = { cpu = true, io = \"unknown\", network = false, lock = true }\n",
    ))
    .unwrap();
    let r = m.stages[0].resources;
    assert_eq!(
        Resource::ALL.map(|x| r.get(x)),
        [Usage::True, Usage::Unknown, Usage::False, Usage::True]
    );
}

#[test]
fn unknown_stage_in_a_relation_names_stage_field_and_suggests() {
    let e = error(&with_stages(
        "[[stage]]\nname = \"RPC Handle\"\nscheduling = \"pluggable\"\ndownstream = [\"rpc respond\"]\n\
         [[stage]]\nname = \"RPC Respond\"\nscheduling = \"general\"\n",
    ));
    assert_eq!(e, "stage `RPC Handle`: field `downstream`: unknown stage `rpc respond` (did you mean `RPC Respond`?)");
}

#[test]
fn duplicate_names_are_rejected() {
    let e = error(&with_stages("[[stage]]\nname = \"A\"\nscheduling = \"general\"\n[[stage]]\nname = \"A\"\nscheduling = \"general\"\n"));
    assert!(e.starts_with("stage `A`: field `name`: duplicate"), "{e}");
}

#[test]
fn a_target_listed_twice_is_rejected() {
    let e = error(&with_stages(
        "[[stage]]\nname = \"A\"\nscheduling = \"general\"\ndownstream = [\"B\", \"B\"]\n[[stage]]\nname = \"B\"\nscheduling = \"general\"\n",
    ));
    assert_eq!(e, "stage `A`: field `downstream`: `B` is listed twice");
}

/// One stage `A` with these lines after its name: the one error it gets, whole, or how it
/// starts where the text ends in `…`.
const ONE_STAGE_ERRORS: &[(&str, &str)] = &[
    (
        "scheduling = \"general\"\nblocks_on = [\"Nowhere\"]",
        "stage `A`: field `blocks_on`: unknown stage `Nowhere`",
    ),
    (
        "scheduling = \"general\"\nblocks_on = [\"A\"]",
        "stage `A`: field `blocks_on`: a stage cannot block on itself",
    ),
    (
        "scheduling = \"general\"\ndownstream = [\"A\"]",
        "stage `A`: field `downstream`: a stage cannot be downstream of itself",
    ),
    (
        "scheduling = \"bounded\"",
        "stage `A`: field `scheduling`: `bounded` is not a scheduling type; expected one of \
         \"on_demand\", \"pluggable\", \"general\"",
    ),
    (
        "scheduling = \"general\"\nresources = { io = \"maybe\" }",
        "stage `A`: field `resources.io`: expected true, false or \"unknown\", found \"maybe\"",
    ),
    (
        "scheduling = \"general\"\nresources = { gpu = true }",
        "stage `A`: field `resources.gpu`: unknown resource; expected cpu, io, network, lock",
    ),
    (
        "scheduling = \"general\"\nhost = 0",
        "stage `A`: field `host`: must be a positive integer…",
    ),
    (
        "scheduling = \"general\"\nordering = \"yes\"",
        "stage `A`: field `ordering`: expected true or false, found string",
    ),
    (
        "scheduling = \"general\"\ndownstream = \"B\"",
        "stage `A`: field `downstream`: expected a list of stage names…",
    ),
];

#[test]
fn bad_values_say_what_is_allowed() {
    for (lines, want) in ONE_STAGE_ERRORS {
        let e = error(&with_stages(&format!("[[stage]]\nname = \"A\"\n{lines}\n")));
        match want.strip_suffix('…') {
            Some(start) => assert!(e.starts_with(start), "{lines}: {e}"),
            None => assert_eq!(&e, want, "{lines}"),
        }
    }
}

#[test]
fn missing_required_fields() {
    let e = error(&with_stages("[[stage]]\nname = \"A\"\n"));
    assert!(
        e.starts_with("stage `A`: field `scheduling`: missing"),
        "{e}"
    );
    let e = error(&with_stages("[[stage]]\nscheduling = \"general\"\n"));
    assert_eq!(
        e,
        "stage `#1`: field `name`: missing; every stage needs a name"
    );
    let e = error("[[stage]]\nname = \"A\"\nscheduling = \"general\"\n");
    assert!(e.starts_with("field `model`: missing"), "{e}");
    let e = error(HEAD);
    assert_eq!(e, "field `stage`: a model needs at least one [[stage]]");
}

#[test]
fn unknown_keys_are_rejected_with_the_allowed_ones() {
    let e = error(&with_stages(
        "[[stage]]\nname = \"A\"\nscheduling = \"general\"\nthreads = 10\n",
    ));
    assert!(
        e.starts_with("stage `A`: field `threads`: unknown key; allowed: name, host, scheduling"),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}[workload]\nrate = 1\n[[stage]]\nname = \"A\"\nscheduling = \"general\"\n"
    ));
    assert!(
        e.starts_with("field `workload`: unknown top-level key"),
        "{e}"
    );
    let e = error(
        &with_stages("[[stage]]\nname = \"A\"\nscheduling = \"general\"\n")
            .replace("name = \"t\"", "name = \"t\"\nversion = 2"),
    );
    assert!(e.starts_with("field `model.version`: unknown key"), "{e}");
}

#[test]
fn format_version_is_checked() {
    let ok = format!(
        "format = 1\n{}",
        with_stages("[[stage]]\nname = \"A\"\nscheduling = \"general\"\n")
    );
    assert!(Model::from_toml(&ok).is_ok());
    let e = error(&ok.replace("format = 1", "format = 2"));
    assert!(
        e.starts_with("field `format`: version 2 is not supported"),
        "{e}"
    );
}

#[test]
fn hosts_table_labels_hosts() {
    let m = Model::from_toml(&format!("{HEAD}[hosts]\n2 = \"DataNode\"\n[[stage]]\nname = \"A\"\nhost = 2\nscheduling = \"general\"\n")).unwrap();
    assert_eq!(m.host_label(2), "host 2: DataNode");
    assert_eq!(m.host_label(3), "host 3");
    let e = error(&format!(
        "{HEAD}[hosts]\nprimary = \"x\"\n[[stage]]\nname = \"A\"\nscheduling = \"general\"\n"
    ));
    assert!(
        e.starts_with("field `hosts.primary`: host IDs are positive integers"),
        "{e}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let errs = errors(&with_stages(
        "[[stage]]\nname = \"A\"\nscheduling = \"general\"\nblocks_on = [\"A\"]\n\
         [[stage]]\nname = \"B\"\nscheduling = \"sometimes\"\n\
         [[stage]]\nname = \"C\"\nscheduling = \"general\"\ndownstream = [\"D\"]\n",
    ));
    // Field errors of B are found while reading; A and C are checked after.
    let stages: Vec<Option<String>> = errs.iter().map(|e| e.stage.clone()).collect();
    assert!(stages.contains(&Some("B".into())), "{errs:#?}");
}

#[test]
fn toml_syntax_errors_are_reported_with_position() {
    let e = error("[model\nname = 1");
    assert!(e.starts_with("invalid TOML"), "{e}");
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn load_prefixes_every_message_with_the_file() {
    // Removed when dropped, also when the test panics.
    let tmp = tempfile::Builder::new()
        .prefix("fairlane-tam-format-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        with_stages(
            "[[stage]]\nname = \"A\"\nscheduling = \"general\"\ndownstream = [\"X\", \"Y\"]\n",
        ),
    )
    .unwrap();
    let e: ModelError = Model::load(&path).unwrap_err();
    let text = e.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    for line in lines {
        assert!(
            line.starts_with(&format!(
                "{}: stage `A`: field `downstream`: unknown stage",
                path.display()
            )),
            "{line}"
        );
    }
    let missing = Model::load(dir.join("nope.toml")).unwrap_err().to_string();
    assert!(
        missing.contains("nope.toml: cannot read the file"),
        "{missing}"
    );
}

#[test]
fn catalog_models_round_trip_through_to_toml() {
    for entry in CATALOG {
        let model = entry.model().unwrap();
        let text = model.to_toml();
        let again =
            Model::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", entry.name));
        assert_eq!(again, model, "{}", entry.name);
        assert_eq!(again.to_toml(), text);
    }
}

#[test]
fn names_with_quotes_and_unicode_round_trip() {
    let mut m = Model::from_toml(&with_stages(
        "[[stage]]\nname = \"A\"\nscheduling = \"general\"\n",
    ))
    .unwrap();
    m.stages[0].name = "Réq \"quoted\" \\ stage".into();
    m.stages[0].note = Some("line one\nline two".into());
    assert_eq!(Model::from_toml(&m.to_toml()).unwrap(), m);
}
