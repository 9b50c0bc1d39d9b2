//! Configuration errors name the file and the field.

use fairlane_pg::PgConfig;

fn error(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pg.toml");
    std::fs::write(&path, text).unwrap();
    let e = PgConfig::from_file(&path).unwrap_err().to_string();
    assert!(e.starts_with(&path.display().to_string()), "{e}");
    e
}

#[test]
fn errors_name_the_file_and_the_field() {
    for (text, field) in [
        ("[pool]\nsize = 0\n", "pool.size"),
        ("[pool]\nmode = \"statement\"\n", "pool.mode"),
        ("[pool]\nsise = 2\n", "pool.sise"),
        ("[pool]\nsize = 4\nmax_connections = 2\n", "pool.max_connections"),
        ("[scheduler]\nalgorithm = \"lottery\"\n", "scheduler.algorithm"),
        ("[listen]\naddr = \"nowhere\"\n", "listen.addr"),
        ("[listen]\nthreads = 0\n", "listen.threads"),
        ("[server]\nport = 0\n", "server.port"),
        ("[server]\ncores = 0\n", "server.cores"),
        ("[limits]\nmax_message_bytes = 10\n", "limits.max_message_bytes"),
        ("[auth]\nmethod = \"trust\"\n", "auth.method"),
        ("[auth]\nusers = [{ user = \"a\", password = \"x\" }, { user = \"a\", password = \"y\" }]\n", "auth.users[1].user"),
        ("[[tenant]]\nname = \"a\"\nres = 120\n", "tenant[0].res"),
        ("[[tenant]]\nname = \"a\"\nres = 30\nmax = 20\n", "tenant[0].max"),
        ("[[tenant]]\nname = \"a\"\nweight = -1\n", "tenant[0].weight"),
        ("[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"a\"\n", "tenant[1].name"),
        ("[scheduler]\nalgorithm = \"sfq\"\n[[tenant]]\nname = \"a\"\nres = 10\n", "tenant[0].res"),
    ] {
        let e = error(text);
        assert!(e.contains(&format!(": {field}: ")), "{field}: {e}");
    }
}

#[test]
fn a_missing_file_is_named() {
    let e = PgConfig::from_file("/nonexistent/pg.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/nonexistent/pg.toml") && e.contains("file"),
        "{e}"
    );
}

#[test]
fn the_documented_example_parses() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/pg.md")).unwrap();
    let start = text
        .find("```toml\n")
        .expect("docs/pg.md has a TOML example")
        + 8;
    let end = start + text[start..].find("```").unwrap();
    let c = PgConfig::from_toml_str(&text[start..end]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.scheduler.algorithm, "ldf");
    assert!(c.tenants.iter().any(|t| t.res > 0.0));
}
