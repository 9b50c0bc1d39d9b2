use super::*;
use crate::tenant::Registry;

fn with(rest: &str) -> Result<ProxyConfig, ConfigError> {
    ProxyConfig::from_toml_str(&format!("[upstream]\naddr = \"127.0.0.1:1\"\n{rest}"))
}

/// D = 4 over the shared fixture's three levels (exempt, high, catch-all), three flow
/// schemas (health, api, rest) and two tenants (api, flood).
const LEVELS: &str = concat!(
    "[scheduler]\ndepth = 4\n",
    include_str!("../../tests/testdata/levels.toml")
);

fn err(rest: &str) -> ConfigError {
    with(&format!("{LEVELS}{rest}")).expect_err("refused")
}

/// [`LEVELS`] with `from` replaced by `to`, loaded.
fn edited(from: &str, to: &str) -> Result<ProxyConfig, ConfigError> {
    with(&LEVELS.replace(from, to))
}

#[test]
fn a_valid_set_of_levels_loads() {
    let c = with(LEVELS).unwrap();
    assert_eq!(c.priority_levels.len(), 3);
    assert_eq!(
        crate::config::levels::catch_all(&c).as_deref(),
        Some("catch-all")
    );
    let l = build(&c).unwrap().unwrap();
    assert_eq!(l.catch_all, "catch-all");
    assert_eq!(l.non_exempt(), 2);
}

#[test]
fn bad_levels_name_their_field() {
    let cases = [
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"nope\"\n", "flow_schema[3].priority_level", "no priority level"),
        ("[[priority_level]]\nname = \"z\"\nshares = 0.0\n", "priority_level[3].shares", "> 0"),
        ("[[priority_level]]\nname = \"z\"\nshares = nan\n", "priority_level[3].shares", "finite"),
        ("[[priority_level]]\nname = \"z\"\nshares = -1.0\n", "priority_level[3].shares", "> 0"),
        ("[[priority_level]]\nname = \"z\"\n", "priority_level[3].shares", "required"),
        ("[[priority_level]]\nname = \"z\"\nshares = 1.0\nlendable_percent = 101.0\n", "priority_level[3].lendable_percent", "[0, 100]"),
        ("[[priority_level]]\nname = \"z\"\nshares = 1.0\nborrowing_limit_percent = -1.0\n", "priority_level[3].borrowing_limit_percent", "[0, 100]"),
        ("[[priority_level]]\nname = \"high\"\nshares = 1.0\n", "priority_level[3].name", "same name"),
        ("[[priority_level]]\nname = \"z\"\nshares = 1.0\nalgorithm = \"nope\"\n", "priority_level[3].algorithm", ""),
        ("[[priority_level]]\nname = \"z\"\nshares = 1.0\nqueue_timeout_ms = 0\n", "priority_level[3].queue_timeout_ms", "≥ 1"),
        ("[[flow_schema]]\nname = \"rest\"\npriority_level = \"high\"\n", "flow_schema[3].name", "twice"),
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"high\"\nprecedence = 0\n", "flow_schema[3].precedence", "1..="),
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"high\"\nmatch = { path = \"a*b\" }\n", "flow_schema[3].match.path", "'/'"),
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"high\"\nmatch = { method = \"G T\" }\n", "flow_schema[3].match.method", "method"),
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"high\"\nmatch = { header = { name = \"a b\", value = \"v\" } }\n", "flow_schema[3].match.header.name", "header name"),
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"high\"\ndistinguisher = \"user\"\n", "flow_schema[3].distinguisher", "header:"),
        ("[[flow_schema]]\nname = \"x\"\npriority_level = \"high\"\nmatch = { tenant = \"zed\" }\n", "flow_schema[3].match.tenant", "no [[tenant]]"),
        ("[[priority_level]]\nname = \"a\"\nshares = 1.0\n[[priority_level]]\nname = \"b\"\nshares = 1.0\n[[priority_level]]\nname = \"c\"\nshares = 1.0\n", "scheduler.depth", "at least 5"),
        ("[cluster]\nredis = \"redis://127.0.0.1:1\"\ninstance = \"a\"\ndepth = 16\n", "cluster", "cannot be combined"),
    ];
    for (rest, field, reason) in cases {
        let e = err(rest);
        assert_eq!(e.field, field, "{rest}: {e}");
        assert!(e.reason.contains(reason), "{rest}: {e}");
    }
}

#[test]
fn a_catch_all_schema_is_required_and_not_exempt() {
    let no_catch_all = (
        "precedence = 10000\n",
        "precedence = 10000\nmatch = { method = \"PUT\" }\n",
    );
    let e = edited(no_catch_all.0, no_catch_all.1).unwrap_err();
    assert_eq!(e.field, "flow_schema", "{e}");
    assert!(e.reason.contains("catch-all"), "{e}");
    let e = edited(
        "priority_level = \"catch-all\"\nprecedence = 10000",
        "priority_level = \"exempt\"\nprecedence = 10000",
    )
    .unwrap_err();
    assert_eq!(e.field, "flow_schema[2].priority_level", "{e}");
    let schemas_alone = "[[flow_schema]]\nname = \"x\"\npriority_level = \"y\"\n";
    assert_eq!(with(schemas_alone).unwrap_err().field, "flow_schema");
}

#[test]
fn the_adaptive_minimum_must_cover_the_levels() {
    let adaptive = "depth = 4\n[scheduler.adaptive]\nmin = 1\nmax = 8\n";
    let e = edited("depth = 4\n", adaptive).unwrap_err();
    assert_eq!(e.field, "scheduler.adaptive.min", "{e}");
}

#[test]
fn a_reload_keeps_algorithm_and_exemption_for_the_restart() {
    let old = with(LEVELS).unwrap();
    let mut new = edited(
        "name = \"high\"\nshares = 1.0\n",
        "name = \"high\"\nshares = 3.0\nalgorithm = \"fifo\"\n",
    )
    .unwrap();
    let w = keep_for_restart(&old, &mut new);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("priority_level[1].algorithm"), "{w:?}");
    assert_eq!(new.priority_levels[1].algorithm.as_deref(), Some("sfq"));
    assert_eq!(
        new.priority_levels[1].shares,
        Some(3.0),
        "shares change in place"
    );
    let mut flat = with("").unwrap();
    let w = keep_for_restart(&old, &mut flat);
    assert!(w[0].contains("restart"), "{w:?}");
    assert_eq!(flat.priority_levels, old.priority_levels);
}

fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> RequestHead {
    let mut b = http::Request::builder().method(method).uri(path);
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    RequestHead::from_parts(&b.body(()).unwrap().into_parts().0)
}

use crate::head::RequestHead;

#[test]
fn schemas_go_by_precedence_then_name_and_match_every_field() {
    let text = format!(
        "{LEVELS}{}",
        r#"
[[flow_schema]]
name = "b-admin"
priority_level = "high"
precedence = 5
match = { method = "POST", path = "/admin/*" }
[[flow_schema]]
name = "a-admin"
priority_level = "catch-all"
precedence = 5
match = { path = "/admin/*", header = { name = "X-Batch", value = "yes" } }
[[flow_schema]]
name = "alice"
priority_level = "high"
precedence = 50
match = { tenant = "alice" }
distinguisher = "header:x-user"
[[tenant]]
name = "alice"
keys = ["k-alice"]
"#
    );
    let c = with(&text).unwrap();
    let gate = crate::gate::Gate::for_config(&c).unwrap();
    let mut reg = Registry::default();
    let alice = reg.intern("alice");
    let bob = reg.intern("bob");
    let live = Live::default();
    let s = Schemas::new(&c, &mut reg, &gate.0.levels(), &live).unwrap();
    let name = |l: Leveled| s.schema(l).unwrap().0.to_string();
    let level = |l: Leveled| s.level(l).unwrap().name.to_string();
    // Same precedence: "a-admin" before "b-admin" (by name); it needs its header.
    let l = s.classify(&head("POST", "/admin/x", &[("x-batch", "yes")]), bob);
    assert_eq!((name(l), level(l)), ("a-admin".into(), "catch-all".into()));
    let l = s.classify(&head("POST", "/admin/x", &[("x-batch", "no")]), bob);
    assert_eq!((name(l), level(l)), ("b-admin".into(), "high".into()));
    let l = s.classify(&head("GET", "/admin/x", &[]), bob);
    assert_eq!(name(l), "rest");
    let l = s.classify(&head("GET", "/healthz", &[]), alice);
    assert_eq!((name(l), level(l)), ("health".into(), "exempt".into()));
    // The tenant's flow, split by the header's value; absent: the tenant alone.
    let u1 = s.classify(&head("GET", "/x", &[("x-user", "u1")]), alice);
    let u2 = s.classify(&head("GET", "/x", &[("x-user", "u2")]), alice);
    let none = s.classify(&head("GET", "/x", &[]), alice);
    assert_eq!(name(u1), "alice");
    assert_ne!(u1.route.distinguisher, u2.route.distinguisher);
    assert_ne!(u1.route.distinguisher, 0);
    assert_eq!(none.route.distinguisher, 0);
    let again = s.classify(&head("GET", "/y", &[("x-user", "u1")]), alice);
    assert_eq!(again.route, u1.route);
}

#[test]
fn the_queued_table_lists_and_forgets_requests() {
    let live = Live::default();
    let (lv, sc): (std::sync::Arc<str>, std::sync::Arc<str>) = ("high".into(), "s".into());
    let l = Leveled {
        route: fairlane_runtime::Route::level(fairlane_core::LevelId(1)).distinguished(7),
        schema: 0,
    };
    let names = vec!["alice".to_string()];
    let since = std::time::Instant::now() - std::time::Duration::from_millis(50);
    let a = live.queue(fairlane_core::TenantId(0), l, (&lv, &sc), since);
    let b = live.queue(
        fairlane_core::TenantId(0),
        l,
        (&lv, &sc),
        std::time::Instant::now(),
    );
    let r = live.requests(&names);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].level.as_str(), r[0].tenant.as_str()),
        ("high", "alice")
    );
    assert!(
        r[0].waited_s >= 0.05 && r[0].waited_s >= r[1].waited_s,
        "{r:?}"
    );
    drop(a);
    assert_eq!(live.requests(&names).len(), 1);
    drop(b);
    assert!(live.requests(&names).is_empty());
    let c = live.queue(fairlane_core::TenantId(0), l, (&lv, &sc), since);
    assert_eq!(live.requests(&names).len(), 1, "a freed slot is reused");
    drop(c);
}

#[test]
fn the_level_metrics_are_one_family_each_with_a_cumulative_histogram() {
    let c = with(LEVELS).unwrap();
    let gate = crate::gate::Gate::for_config(&c).unwrap();
    let live = Live::default();
    let high = live.stats("high");
    for secs in [0.0002, 0.003, 0.003, 100.0] {
        high.wait.record(secs);
    }
    high.full.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
    let levels = live.status(gate.0.levels());
    assert_eq!(levels.len(), 3);
    let mut o = String::new();
    prometheus(&mut o, &levels);
    let mut types = std::collections::HashSet::new();
    for l in o.lines().filter(|l| l.starts_with("# TYPE ")) {
        assert!(types.insert(l.split(' ').nth(2).unwrap()), "{l} twice");
    }
    let bucket = |le: &str| {
        let key =
            format!("fairlane_proxy_level_wait_seconds_bucket{{level=\"high\",le=\"{le}\"}} ");
        o.lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .unwrap_or_else(|| panic!("{key} in\n{o}"))
            .to_string()
    };
    assert_eq!(
        (bucket("0.00025"), bucket("0.005"), bucket("+Inf")),
        ("1".into(), "3".into(), "4".into())
    );
    assert!(
        o.contains("fairlane_proxy_level_wait_seconds_count{level=\"high\"} 4"),
        "{o}"
    );
    assert!(
        o.contains("fairlane_proxy_level_rejected_total{level=\"high\",reason=\"queue_full\"} 2")
    );
    assert!(
        o.contains("fairlane_proxy_level_nominal_cl{level=\"catch-all\"} 2"),
        "{o}"
    );
    let mut none = String::new();
    prometheus(&mut none, &[]);
    assert!(none.is_empty(), "nothing without levels");
}
