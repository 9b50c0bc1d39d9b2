//! The pooler in front of a real PostgreSQL (started by the test): psql, pgbench and
//! tokio-postgres through it — simple and extended queries, named prepared statements
//! across transactions, COPY both ways, transactions, cancel, a wrong password, an unknown
//! database, md5, the server stopped and restarted, a client killed mid-transaction (the
//! rollback verified on the server), session mode's DISCARD ALL, bad input.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fairlane_pg::Pooler;
use support::{config, driver, need, psql, Postgres};

/// The tests take turns: each starts a server, and several at once crowd two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn setup(pg: &Postgres) {
    pg.role("alice", "alice-pw");
    pg.role("bob", "bob-pw");
    pg.admin_sql("CREATE DATABASE appdb OWNER alice");
    pg.admin_sql("CREATE TABLE items (id int, name text); GRANT ALL ON items TO alice, bob");
}

const USERS: [(&str, &str); 2] = [("alice", "alice-pw"), ("bob", "bob-pw")];

#[test]
fn psql_pgbench_and_a_driver_through_the_pooler() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pg = Postgres::start();
    setup(&pg);
    let rt = rt();
    let pooler = rt
        .block_on(Pooler::start(config(
            &pg,
            &USERS,
            "[pool]\nsize = 2\n[scheduler]\nalgorithm = \"sfq\"",
        )))
        .unwrap();

    // Simple queries as the client's own role, on its database.
    let (ok, out, err) = psql(
        &pooler,
        "alice",
        "alice-pw",
        "appdb",
        &["-c", "select current_user, current_database()"],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "alice|appdb");
    // A transaction, then COPY in and out through psql.
    let (ok, _, err) = psql(
        &pooler,
        "alice",
        "alice-pw",
        "postgres",
        &["-c", "BEGIN; INSERT INTO items VALUES (1, 'one'); COMMIT;"],
    );
    assert!(ok, "{err}");
    let mut child = Command::new(need("psql"))
        .env("PGPASSWORD", "alice-pw")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &pooler.addr().port().to_string(),
            "-U",
            "alice",
            "-d",
            "postgres",
            "-X",
            "-q",
        ])
        .args(["-v", "ON_ERROR_STOP=1", "-c", "\\copy items from stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"2\ttwo\n3\tthree\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, out, err) = psql(
        &pooler,
        "bob",
        "bob-pw",
        "postgres",
        &[
            "-c",
            "\\copy (select id, name from items order by id) to stdout",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out, "1\tone\n2\ttwo\n3\tthree");

    rt.block_on(async {
        // The extended protocol with named statements (tokio-postgres prepares "s0", "s1", …),
        // used again in later transactions on whichever server connection they get.
        let c = driver(&pooler, "bob", "bob-pw", "postgres").await.unwrap();
        let st = c
            .prepare("select name from items where id = $1")
            .await
            .unwrap();
        for (id, name) in [(1, "one"), (2, "two"), (3, "three"), (1, "one")] {
            let row = c.query_one(&st, &[&id]).await.unwrap();
            assert_eq!(row.get::<_, String>(0), name);
        }
        let c2 = driver(&pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        let n: i64 = c2
            .query_one("select count(*) from items where id > $1", &[&1i32])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
        // A transaction with an error inside rolls back and the session goes on.
        let mut c3 = driver(&pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        let tx = c3.transaction().await.unwrap();
        tx.execute("insert into items values (10, 'ten')", &[])
            .await
            .unwrap();
        assert!(tx.execute("select 1/0", &[]).await.is_err());
        drop(tx);
        let n: i64 = c3
            .query_one("select count(*) from items where id = 10", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0);
        // COPY through the driver, both ways.
        use futures_util::SinkExt;
        let sink = c3.copy_in("copy items from stdin").await.unwrap();
        futures_util::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(b"20\ttwenty\n21\ttwenty-one\n"))
            .await
            .unwrap();
        assert_eq!(sink.finish().await.unwrap(), 2);
        let n: i64 = c3
            .query_one("select count(*) from items where id >= 20", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
        // Cancel: a long query is cancelled through the pooler's key, at once.
        let token = c3.cancel_token();
        let t0 = Instant::now();
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            token.cancel_query(tokio_postgres::NoTls).await
        });
        let e = c3.simple_query("select pg_sleep(30)").await.unwrap_err();
        assert_eq!(
            e.code(),
            Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
            "{e}"
        );
        assert!(t0.elapsed() < Duration::from_secs(20));
        canceller.await.unwrap().unwrap();
        let one: i32 = c3.query_one("select 1", &[]).await.unwrap().get(0);
        assert_eq!(one, 1);
    });

    // pgbench: initialize, then simple, extended and prepared protocols through D = 2.
    let pgbench = |args: &[&str]| {
        Command::new(need("pgbench"))
            .env("PGPASSWORD", "alice-pw")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &pooler.addr().port().to_string(),
                "-U",
                "alice",
            ])
            .args(args)
            .arg("appdb")
            .output()
            .unwrap()
    };
    let out = pgbench(&["-i", "-q", "-s", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for mode in ["simple", "extended", "prepared"] {
        let out = pgbench(&["-n", "-c", "4", "-j", "2", "-t", "100", "-M", mode]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pgbench -M {mode}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("number of transactions actually processed: 400/400"),
            "{text}"
        );
    }
    let status = pooler.status();
    let alice = status["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "default")
        .unwrap()
        .clone();
    assert!(alice["transactions"].as_u64().unwrap() >= 1200, "{status}");
    assert!(alice["cpu_seconds"].as_f64().unwrap() > 0.0, "{status}");
    let (open, _) = pooler.server_connections();
    assert!(
        open <= 2,
        "{open} server connections open with pool.size = 2"
    );
    drop(pooler);
}
