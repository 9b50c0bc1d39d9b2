//! The pooler in front of a real PostgreSQL (started by the test): psql, pgbench and
//! tokio-postgres through it — simple and extended queries, named prepared statements
//! across transactions, COPY both ways, transactions, cancel, a wrong password, an unknown
//! database, md5, the server stopped and restarted, a client killed mid-transaction (the
//! rollback verified on the server), session mode's DISCARD ALL, bad input.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use fairlane_pg::Pooler;
use support::{config, driver, eventually, need, psql, psql_command, raw_login, Postgres};
use tokio_postgres::error::SqlState;

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

/// psql through the pooler as one of [`USERS`], which must succeed: its output.
fn psql_ok(pooler: &Pooler, user: &str, db: &str, args: &[&str]) -> String {
    let password = USERS.iter().find(|u| u.0 == user).map_or("", |u| u.1);
    let (ok, out, err) = psql(pooler, user, password, db, args);
    assert!(ok, "psql {args:?} as {user}: {err}");
    out
}

/// Assert that a driver's error carries this SQLSTATE.
fn assert_state(e: &tokio_postgres::Error, want: SqlState) {
    assert_eq!(e.code(), Some(&want), "{e}");
}

/// `select count(*) from <what>` through a driver.
async fn count(c: &tokio_postgres::Client, what: &str) -> i64 {
    let sql = format!("select count(*) from {what}");
    c.query_one(&sql, &[]).await.unwrap().get(0)
}

/// One SQL command through [`psql_ok`].
fn sql(pooler: &Pooler, user: &str, db: &str, sql: &str) -> String {
    psql_ok(pooler, user, db, &["-c", sql])
}

/// A test's server (with alice, bob, appdb and items), runtime and pooler, dropped in that
/// order reversed: the pooler first, the server last, then the next test's turn.
struct Env {
    pooler: Pooler,
    rt: tokio::runtime::Runtime,
    pg: Postgres,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Env {
    /// `extra`: config sections; `edit`: changes to the parsed config.
    fn start(extra: &str, edit: impl FnOnce(&mut fairlane_pg::PgConfig)) -> Env {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let pg = Postgres::start();
        setup(&pg);
        let rt = rt();
        let mut c = config(&pg, &USERS, extra);
        edit(&mut c);
        let pooler = rt.block_on(Pooler::start(c)).unwrap();
        Env {
            pooler,
            rt,
            pg,
            _turn: turn,
        }
    }
}

#[test]
fn psql_pgbench_and_a_driver_through_the_pooler() {
    let env = Env::start("[pool]\nsize = 2\n[scheduler]\nalgorithm = \"sfq\"", |_| {});
    let (pooler, rt) = (&env.pooler, &env.rt);

    // Simple queries as the client's own role, on its database.
    let out = sql(
        pooler,
        "alice",
        "appdb",
        "select current_user, current_database()",
    );
    assert_eq!(out, "alice|appdb");
    // A transaction, then COPY in and out through psql.
    sql(
        pooler,
        "alice",
        "postgres",
        "BEGIN; INSERT INTO items VALUES (1, 'one'); COMMIT;",
    );
    let mut child = psql_command(pooler, "alice", "alice-pw", "postgres")
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
    let out = sql(
        pooler,
        "bob",
        "postgres",
        "\\copy (select id, name from items order by id) to stdout",
    );
    assert_eq!(out, "1\tone\n2\ttwo\n3\tthree");

    rt.block_on(async {
        // The extended protocol with named statements (tokio-postgres prepares "s0", "s1", …),
        // used again in later transactions on whichever server connection they get.
        let c = driver(pooler, "bob", "bob-pw", "postgres").await.unwrap();
        let st = c
            .prepare("select name from items where id = $1")
            .await
            .unwrap();
        for (id, name) in [(1, "one"), (2, "two"), (3, "three"), (1, "one")] {
            let row = c.query_one(&st, &[&id]).await.unwrap();
            assert_eq!(row.get::<_, String>(0), name);
        }
        let c2 = driver(pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        let n: i64 = c2
            .query_one("select count(*) from items where id > $1", &[&1i32])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
        // A transaction with an error inside rolls back and the session goes on.
        let mut c3 = driver(pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        let tx = c3.transaction().await.unwrap();
        tx.execute("insert into items values (10, 'ten')", &[])
            .await
            .unwrap();
        assert!(tx.execute("select 1/0", &[]).await.is_err());
        drop(tx);
        assert_eq!(count(&c3, "items where id = 10").await, 0);
        // COPY through the driver, both ways.
        use futures_util::SinkExt;
        let sink = c3.copy_in("copy items from stdin").await.unwrap();
        futures_util::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(b"20\ttwenty\n21\ttwenty-one\n"))
            .await
            .unwrap();
        assert_eq!(sink.finish().await.unwrap(), 2);
        assert_eq!(count(&c3, "items where id >= 20").await, 2);
        let out = c3
            .copy_out("copy (select id from items where id >= 20 order by id) to stdout")
            .await
            .unwrap();
        futures_util::pin_mut!(out);
        let mut got = Vec::new();
        while let Some(chunk) = futures_util::StreamExt::next(&mut out).await {
            got.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(got, b"20\n21\n");
        // Cancel: a 30 s query is cancelled through the pooler's key (its error says so; a
        // query left to finish would return rows instead).
        let token = c3.cancel_token();
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            token.cancel_query(tokio_postgres::NoTls).await
        });
        let e = c3.simple_query("select pg_sleep(30)").await.unwrap_err();
        assert_state(&e, SqlState::QUERY_CANCELED);
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
    // One pgbench thread per client. pgbench prepares a statement with a blocking
    // `PQprepare` the first time a client runs it, which stalls every client of that
    // thread: with two clients a thread, one holding a connection inside its transaction and
    // the other preparing behind the two held connections, both threads wait for each other
    // until the queue timeout (so would PgBouncer's clients, with its pool at 2).
    for mode in ["simple", "extended", "prepared"] {
        let out = pgbench(&["-n", "-c", "4", "-j", "4", "-t", "100", "-M", mode]);
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
        open <= 8,
        "{open} server connections open with pool.max_connections = 4 × 2"
    );
}

#[test]
fn wrong_password_unknown_database_md5_and_trust() {
    let env = Env::start("", |_| {});
    let (pooler, rt, pg) = (&env.pooler, &env.rt, &env.pg);
    let (ok, _, err) = psql(pooler, "alice", "wrong", "postgres", &["-c", "select 1"]);
    assert!(!ok);
    assert!(
        err.contains("password authentication failed for user \"alice\""),
        "{err}"
    );
    let (ok, _, err) = psql(pooler, "mallory", "x", "postgres", &["-c", "select 1"]);
    assert!(!ok);
    assert!(
        err.contains("password authentication failed for user \"mallory\""),
        "{err}"
    );
    let (ok, _, err) = psql(pooler, "alice", "alice-pw", "nosuchdb", &["-c", "select 1"]);
    assert!(!ok);
    assert!(
        err.contains("database \"nosuchdb\" does not exist"),
        "{err}"
    );
    // The driver sees the server's SQLSTATE.
    rt.block_on(async {
        let e = driver(pooler, "alice", "alice-pw", "nosuchdb")
            .await
            .unwrap_err();
        assert_state(&e, SqlState::INVALID_CATALOG_NAME);
        let e = driver(pooler, "alice", "nope", "postgres")
            .await
            .unwrap_err();
        assert_state(&e, SqlState::INVALID_PASSWORD);
    });
    assert_eq!(sql(pooler, "alice", "postgres", "select 1"), "1");

    let mut c = config(pg, &USERS, "");
    c.auth.method = fairlane_pg::config::AuthMethod::Md5;
    let pooler = rt.block_on(Pooler::start(c)).unwrap();
    assert_eq!(
        sql(&pooler, "bob", "postgres", "select current_user"),
        "bob"
    );
    let (ok, _, err) = psql(&pooler, "bob", "bad", "postgres", &["-c", "select 1"]);
    assert!(
        !ok && err.contains("password authentication failed"),
        "{err}"
    );
    drop(pooler);

    let mut c = config(pg, &USERS, "");
    c.auth.trust_loopback = true;
    let pooler = rt.block_on(Pooler::start(c)).unwrap();
    let (ok, out, err) = psql(
        &pooler,
        "bob",
        "anything",
        "postgres",
        &["-c", "select current_user"],
    );
    assert!(ok && out == "bob", "trusted on loopback: {err}");
    let (ok, _, err) = psql(
        &pooler,
        "mallory",
        "anything",
        "postgres",
        &["-c", "select 1"],
    );
    assert!(
        !ok && err.contains("not in the pooler's [auth] users"),
        "{err}"
    );
    // NOTICE and ParameterStatus pass through to the client.
    let mut s = raw_login(pooler.addr(), "alice");
    send_query(
        &mut s,
        "SET application_name TO 'zz'; DO $$ BEGIN RAISE NOTICE 'hello from the server'; END $$",
    );
    let got = support::read_until_ready(&mut s);
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("application_name\0zz\0"), "{text:?}");
    assert!(text.contains("hello from the server"), "{text:?}");
}

/// Send a simple query over a raw socket.
fn send_query(s: &mut std::net::TcpStream, sql: &str) {
    let mut out = bytes::BytesMut::new();
    postgres_protocol::message::frontend::query(sql, &mut out).unwrap();
    s.write_all(&out).unwrap();
}

/// Rows of `pg_stat_activity` for `user`'s backends: (pid, state).
fn backends(pg: &Postgres, user: &str) -> Vec<String> {
    let out = pg.admin_sql(&format!(
        "select state from pg_stat_activity where usename = '{user}'"
    ));
    out.lines().map(str::to_string).collect()
}

#[test]
fn a_client_killed_mid_transaction_is_rolled_back() {
    let env = Env::start("[pool]\nsize = 1", |_| {});
    let (pooler, pg) = (&env.pooler, &env.pg);
    let mut child = psql_command(pooler, "alice", "alice-pw", "postgres")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"BEGIN;\nINSERT INTO items VALUES (99, 'lost');\nSELECT 'inside';\n")
        .unwrap();
    stdin.flush().unwrap();
    // Wait until the transaction is open on the server, holding the one connection.
    eventually(
        Duration::from_secs(20),
        || "the transaction never opened".into(),
        || {
            backends(pg, "alice")
                .iter()
                .any(|s| s == "idle in transaction")
        },
    );
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    // The next client gets the same connection (D = 1), outside any transaction, and the
    // insert is gone.
    let out = sql(
        pooler,
        "alice",
        "postgres",
        "select count(*) from items where id = 99",
    );
    assert_eq!(out, "0");
    let out = sql(
        pooler,
        "alice",
        "postgres",
        "select now() = statement_timestamp()",
    );
    // now() is the transaction's start: equal to the statement's only outside a block left
    // open by the killed client.
    assert_eq!(out, "t");
    assert!(
        backends(pg, "alice").iter().all(|s| s == "idle"),
        "{:?}",
        backends(pg, "alice")
    );
    assert_eq!(
        pg.admin_sql("select count(*) from items where id = 99"),
        "0"
    );
}

#[test]
fn the_server_stopped_and_restarted() {
    let Env {
        pooler,
        rt,
        mut pg,
        _turn,
    } = Env::start("[pool]\nsize = 2", |_| {});
    let c = rt
        .block_on(driver(&pooler, "alice", "alice-pw", "postgres"))
        .unwrap();
    let one = |c: &tokio_postgres::Client| {
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), c.query_one("select 1", &[]))
                .await
                .expect("an answer, not a hang")
                .map(|r| r.get::<_, i32>(0))
        })
    };
    assert_eq!(one(&c).unwrap(), 1);
    // A query running when the server stops gets an error, not a hang.
    let c2 = rt
        .block_on(driver(&pooler, "bob", "bob-pw", "postgres"))
        .unwrap();
    let running = rt.spawn(async move {
        tokio::time::timeout(
            Duration::from_secs(30),
            c2.simple_query("select pg_sleep(20)"),
        )
        .await
    });
    std::thread::sleep(Duration::from_millis(500));
    pg.stop();
    let r = rt
        .block_on(running)
        .unwrap()
        .expect("an answer, not a hang");
    assert!(r.is_err(), "the running query failed");
    // While the server is down: an error (08006), and the client stays connected.
    let e = one(&c).unwrap_err();
    assert_state(&e, SqlState::CONNECTION_FAILURE);
    pg.launch();
    assert_eq!(one(&c).unwrap(), 1, "the same client, served again");
    assert_eq!(sql(&pooler, "bob", "postgres", "select 2"), "2");
    let (open, _) = pooler.server_connections();
    assert!(open <= 8);
}

#[test]
fn session_mode_resets_with_discard_all() {
    let env = Env::start("[pool]\nsize = 1\nmode = \"session\"", |_| {});
    let pooler = &env.pooler;
    psql_ok(
        pooler,
        "alice",
        "postgres",
        &["-c", "SET work_mem = '77MB'", "-c", "PREPARE p AS select 1"],
    );
    let out = psql_ok(
        pooler,
        "alice",
        "postgres",
        &[
            "-c",
            "SHOW work_mem",
            "-c",
            "select count(*) from pg_prepared_statements",
        ],
    );
    assert_eq!(out, "4MB\n0", "the next session starts clean");
    // Session mode keeps one server connection per client: a named statement lives on.
    assert_eq!(
        psql_ok(
            pooler,
            "alice",
            "postgres",
            &["-c", "PREPARE q AS select 5", "-c", "EXECUTE q"]
        ),
        "5"
    );
}

#[test]
fn queue_limits_answer_with_postgresql_errors() {
    let env = Env::start(
        "[pool]\nsize = 1\n[limits]\nqueue_timeout_ms = 1500\nmax_waiting_per_tenant = 1",
        |_| {},
    );
    let (pooler, rt) = (&env.pooler, &env.rt);
    rt.block_on(async {
        // (Logged in first: a pool's first login opens a server connection, through the
        // gate too.)
        let waiter = driver(pooler, "bob", "bob-pw", "postgres").await.unwrap();
        let third = driver(pooler, "bob", "bob-pw", "postgres").await.unwrap();
        let holder = driver(pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        holder.batch_execute("BEGIN").await.unwrap();
        let waiting = tokio::spawn(async move {
            let r = waiter.simple_query("select 1").await.map(|_| ());
            (r, waiter)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let e = third.simple_query("select 1").await.unwrap_err();
        assert_state(&e, SqlState::TOO_MANY_CONNECTIONS);
        let (r, waiter) = waiting.await.unwrap();
        let e = r.unwrap_err();
        assert_state(&e, SqlState::QUERY_CANCELED);
        holder.batch_execute("COMMIT").await.unwrap();
        // Both refused clients are still connected and served now.
        assert_eq!(
            waiter
                .query_one("select 7", &[])
                .await
                .unwrap()
                .get::<_, i32>(0),
            7
        );
        assert_eq!(
            third
                .query_one("select $1::int", &[&8i32])
                .await
                .unwrap()
                .get::<_, i32>(0),
            8
        );
        // A client's queue timer serves all its waits: after a wait that got its seat (the
        // timer still armed), the next wait times out on the moved deadline. (First, the
        // Close that tokio-postgres sends after `query_one` is served: it needs a seat too.)
        third.simple_query("select 1").await.unwrap();
        holder.batch_execute("BEGIN").await.unwrap();
        let waiting = tokio::spawn(async move {
            let r = waiter.simple_query("select 2").await.map(|_| ());
            (r, waiter)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        holder.batch_execute("COMMIT").await.unwrap();
        let (r, waiter) = waiting.await.unwrap();
        r.unwrap();
        holder.batch_execute("BEGIN").await.unwrap();
        let e = waiter.simple_query("select 3").await.unwrap_err();
        assert_state(&e, SqlState::QUERY_CANCELED);
        holder.batch_execute("COMMIT").await.unwrap();
        let nine: i32 = waiter.query_one("select 9", &[]).await.unwrap().get(0);
        assert_eq!(nine, 9);
    });
    let s = pooler.status();
    let t = &s["tenants"].as_array().unwrap()[0];
    assert_eq!(t["name"], "default");
    assert_eq!(
        (t["refused_full"].as_u64(), t["timed_out"].as_u64()),
        (Some(1), Some(2)),
        "{s}"
    );
    assert!(pooler
        .metrics()
        .contains("fairlane_pg_timeouts_total{tenant=\"default\"} 2"));
}

/// Read what the pooler sends until it closes (or 5 s pass).
fn read_to_close(s: &mut std::net::TcpStream) -> Vec<u8> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    all
}

#[test]
fn bad_input_closes_that_client_only() {
    let env = Env::start(
        "[pool]\nsize = 2\n[limits]\nmax_message_bytes = 4096",
        |c| c.auth.trust_loopback = true,
    );
    let (pooler, rt) = (&env.pooler, &env.rt);
    let bystander = rt.block_on(async {
        let c = driver(pooler, "bob", "bob-pw", "postgres").await.unwrap();
        c.batch_execute("BEGIN; INSERT INTO items VALUES (5, 'five')")
            .await
            .unwrap();
        c
    });
    let error = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).to_string();
        assert!(
            bytes.first() == Some(&b'E') && text.contains("08P01"),
            "{text:?}"
        );
    };
    // A garbage startup packet.
    let mut s = std::net::TcpStream::connect(pooler.addr()).unwrap();
    s.write_all(&[0, 0, 0, 12, 0x12, 0x34, 0x56, 0x78, 1, 2, 3, 4])
        .unwrap();
    error(&read_to_close(&mut s));
    // An unknown message type after login.
    let mut s = raw_login(pooler.addr(), "alice");
    s.write_all(&[b'z', 0, 0, 0, 4]).unwrap();
    error(&read_to_close(&mut s));
    // An oversized message, and a length below 4.
    let mut s = raw_login(pooler.addr(), "alice");
    s.write_all(&[b'Q', 0x7f, 0xff, 0xff, 0xff]).unwrap();
    error(&read_to_close(&mut s));
    let mut s = raw_login(pooler.addr(), "alice");
    s.write_all(&[b'Q', 0, 0, 0, 1]).unwrap();
    error(&read_to_close(&mut s));
    // A malformed Parse while holding a server connection (inside a transaction).
    let mut s = raw_login(pooler.addr(), "alice");
    let mut out = bytes::BytesMut::new();
    postgres_protocol::message::frontend::query("BEGIN", &mut out).unwrap();
    s.write_all(&out).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    s.write_all(&[b'P', 0, 0, 0, 6, b'x', b'y']).unwrap();
    let got = read_to_close(&mut s);
    assert!(String::from_utf8_lossy(&got).contains("08P01"), "{got:?}");
    // An extended-protocol error before the client's Sync: the server skips what follows
    // up to that Sync, so the connection must not go to the next client before one (the
    // pooler's own, when the client leaves) was answered.
    let mut s = raw_login(pooler.addr(), "alice");
    out.clear();
    postgres_protocol::message::frontend::execute("no_such_portal", 0, &mut out).unwrap();
    s.write_all(&out).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 1024];
    let n = std::io::Read::read(&mut s, &mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(buf[0] == b'E' && text.contains("34000"), "{text:?}");
    drop(s);
    let mut s = raw_login(pooler.addr(), "alice");
    out.clear();
    postgres_protocol::message::frontend::query("select 6 * 7", &mut out).unwrap();
    s.write_all(&out).unwrap();
    let got = support::read_until_ready(&mut s);
    assert!(String::from_utf8_lossy(&got).contains("42"), "{got:?}");
    // The bystander's transaction went on throughout.
    rt.block_on(async {
        bystander.batch_execute("COMMIT").await.unwrap();
        assert_eq!(count(&bystander, "items where id = 5").await, 1);
    });
}

/// One simple query through a driver, which must succeed.
async fn c_query(c: &tokio_postgres::Client, sql: &str) {
    c.simple_query(sql).await.unwrap();
}

/// `SHOW <what>` through a driver.
async fn show(c: &tokio_postgres::Client, what: &str) -> String {
    let rows = c.simple_query(&format!("SHOW {what}")).await.unwrap();
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(String::from),
            _ => None,
        })
        .unwrap()
}

#[test]
fn clients_sharing_one_server_connection_keep_their_own_parameters() {
    let env = Env::start("[pool]\nsize = 1\nmax_connections = 1", |_| {});
    let (pooler, rt) = (&env.pooler, &env.rt);
    rt.block_on(async {
        let a = driver(pooler, "alice", "alice-pw", "appdb").await.unwrap();
        let b = driver(pooler, "alice", "alice-pw", "appdb").await.unwrap();
        let server_zone = show(&b, "TimeZone").await;
        let zone = if server_zone == "Asia/Tokyo" {
            "Europe/Paris"
        } else {
            "Asia/Tokyo"
        };
        // Each SET comes back as ParameterStatus: the pooler tracks it for that client.
        // (A parameter the client never set follows whoever set it last on the server
        // connection, as with PgBouncer: transaction mode's documented risk.)
        let set = |c, z: &str| {
            let sql = format!("SET TimeZone TO '{z}'");
            async move { c_query(c, &sql).await }
        };
        set(&a, zone).await;
        set(&b, &server_zone).await;
        // The one server connection goes from a to b and back, twice over, and to the same
        // client twice in a row: each sees its own value.
        for _ in 0..2 {
            assert_eq!(show(&a, "TimeZone").await, zone);
            assert_eq!(show(&a, "TimeZone").await, zone);
            assert_eq!(show(&b, "TimeZone").await, server_zone);
            assert_eq!(show(&b, "TimeZone").await, server_zone);
        }
        // The values change hands; then both clients hold the same list.
        set(&b, zone).await;
        set(&a, &server_zone).await;
        assert_eq!(show(&b, "TimeZone").await, zone);
        assert_eq!(show(&a, "TimeZone").await, server_zone);
        assert_eq!(show(&b, "TimeZone").await, zone);
        set(&a, zone).await;
        assert_eq!(show(&b, "TimeZone").await, zone);
        assert_eq!(show(&a, "TimeZone").await, zone);
        set(&b, &server_zone).await;
        assert_eq!(show(&a, "TimeZone").await, zone);
        assert_eq!(show(&b, "TimeZone").await, server_zone);
    });
    assert_eq!(env.pooler.server_connections().0, 1);
}

/// More clients than seats: a transaction that gives its server connection back starts a
/// waiting client's transaction on it (the hand-over), with the waiter's own parameters,
/// statements and results; a client that leaves while it waits has its transaction rolled
/// back and takes nothing with it.
#[test]
fn waiting_transactions_are_handed_over_with_their_own_results() {
    const CLIENTS: i32 = 10;
    const ROUNDS: i32 = 30;
    let env = Env::start("[pool]\nsize = 2", |c| c.auth.trust_loopback = true);
    let (pooler, rt, pg) = (&env.pooler, &env.rt, &env.pg);
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for k in 0..CLIENTS {
            let conn = format!(
                "host=127.0.0.1 port={} user=alice password=alice-pw dbname=postgres \
                 application_name=c{k} connect_timeout=20",
                pooler.addr().port()
            );
            tasks.spawn(async move {
                let (c, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                let plus = c.prepare("select $1::int + 1000").await.unwrap();
                for i in 0..ROUNDS {
                    let row = c
                        .query_one(
                            "select $1::int * 2, current_setting('application_name')",
                            &[&(k * 100 + i)],
                        )
                        .await
                        .unwrap();
                    assert_eq!(row.get::<_, i32>(0), 2 * (k * 100 + i));
                    assert_eq!(row.get::<_, String>(1), format!("c{k}"));
                    let n: i32 = c.query_one(&plus, &[&i]).await.unwrap().get(0);
                    assert_eq!(n, i + 1000);
                    c.batch_execute(&format!(
                        "BEGIN; INSERT INTO items VALUES ({}, 'x'); COMMIT",
                        1000 + k
                    ))
                    .await
                    .unwrap();
                }
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
    });
    let out =
        pg.admin_sql("select id, count(*) from items where id >= 1000 group by id order by id");
    let want: Vec<String> = (0..CLIENTS)
        .map(|k| format!("{}|{ROUNDS}", 1000 + k))
        .collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
    let handed = pooler.status()["handovers"].as_u64().unwrap();
    assert!(handed > 0, "{}", pooler.status());

    // A client that leaves while it waits: its query still runs when its turn comes (it was
    // sent), and the transaction it opened is rolled back.
    let holder = rt.block_on(async {
        let c = driver(pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        let c2 = driver(pooler, "alice", "alice-pw", "postgres")
            .await
            .unwrap();
        c.batch_execute("BEGIN").await.unwrap();
        c2.batch_execute("BEGIN").await.unwrap();
        (c, c2)
    });
    let mut gone = raw_login(pooler.addr(), "alice");
    send_query(&mut gone, "BEGIN; INSERT INTO items VALUES (77, 'parked')");
    eventually(
        Duration::from_secs(20),
        || pooler.status().to_string(),
        || pooler.status()["waiting"].as_u64() == Some(1),
    );
    drop(gone);
    rt.block_on(async {
        holder.0.batch_execute("COMMIT").await.unwrap();
        holder.1.batch_execute("COMMIT").await.unwrap();
    });
    // Eventually no transaction is open, the insert is gone, and both seats serve again.
    eventually(
        Duration::from_secs(20),
        || format!("{} {:?}", pooler.status(), backends(pg, "alice")),
        || {
            pooler.status()["holding"].as_u64() == Some(0)
                && backends(pg, "alice").iter().all(|s| s == "idle")
        },
    );
    assert_eq!(
        pg.admin_sql("select count(*) from items where id = 77"),
        "0"
    );
    rt.block_on(async {
        let (a, b) = (&holder.0, &holder.1);
        let (x, y) = tokio::join!(a.query_one("select 1", &[]), b.query_one("select 2", &[]));
        assert_eq!(
            (x.unwrap().get::<_, i32>(0), y.unwrap().get::<_, i32>(0)),
            (1, 2)
        );
    });
    assert_eq!(
        pg.admin_sql("select count(*) from items where id = 77"),
        "0"
    );
}
