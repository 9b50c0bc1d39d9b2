//! What the real-server tests share: a PostgreSQL cluster of their own (initdb into a
//! temporary directory as the `postgres` user, a free loopback port, scram-sha-256), roles
//! with passwords, the pooler in front of it, and psql / pgbench runs. A missing program is
//! a failure, not a skip: `scripts/test-deps.sh` installs them. Each test stops exactly what
//! it started.
#![allow(dead_code)]

pub mod load;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fairlane_pg::{PgConfig, Pooler};
pub use fairlane_testkit::{free_port, need, pg_bin, run};

/// Poll `done` every 20 ms until it holds; panic with `what()` if it still does not after
/// `limit`. A deadline for something the test waits on, not a measure of speed.
pub fn eventually(limit: Duration, what: impl Fn() -> String, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{}", what());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Raise the calling thread's priority (and so that of the threads it starts afterwards) to
/// `nice`: the isolation measurements are about the pooler's scheduling, not about other
/// work sharing the machine.
pub fn renice_this_thread(nice: i32) {
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().to_string()))
        .expect("/proc/thread-self");
    run(
        Command::new(need("renice")).args(["-n", &nice.to_string(), "-p", &tid]),
        "renice",
    );
}

/// The superuser's password in every test cluster.
pub const SUPERUSER_PASSWORD: &str = "postgres-pw";

/// A PostgreSQL cluster in a temporary directory, run by the `postgres` user, password
/// authentication by scram-sha-256 on loopback TCP.
pub struct Postgres {
    pub port: u16,
    /// The server's nice value (0; the isolation test raises its priority).
    pub nice: i32,
    dir: tempfile::TempDir,
    server: Option<Child>,
}

impl Postgres {
    pub fn start() -> Postgres {
        Postgres::start_with_nice(0)
    }

    /// [`Postgres::start`] with the server at this nice value.
    pub fn start_with_nice(nice: i32) -> Postgres {
        let tmp = tempfile::Builder::new()
            .prefix("fairlane-pg-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        run(
            Command::new("chown").args(["postgres:postgres", dir.to_str().unwrap()]),
            "chown",
        );
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, SUPERUSER_PASSWORD).unwrap();
        run(
            Command::new("chown").args(["postgres:postgres", pwfile.to_str().unwrap()]),
            "chown",
        );
        run(
            Command::new(need("runuser"))
                .args(["-u", "postgres", "--"])
                .arg(pg_bin("initdb"))
                .args(["-N", "-A", "scram-sha-256", "-U", "postgres", "--pwfile"])
                .arg(&pwfile)
                .arg("-D")
                .arg(dir.join("data")),
            "initdb",
        );
        let mut pg = Postgres {
            nice,
            port: free_port(),
            dir: tmp,
            server: None,
        };
        pg.launch();
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Start the server (again).
    pub fn launch(&mut self) {
        let server = Command::new(need("nice"))
            .args(["-n", &self.nice.to_string()])
            .arg(need("runuser"))
            .args(["-u", "postgres", "--"])
            .arg(pg_bin("postgres"))
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off", "-c", "max_connections=60"])
            .args(["-c", "shared_buffers=32MB", "-c", "autovacuum=off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start postgres");
        self.server = Some(server);
        let port = self.port.to_string();
        eventually(
            Duration::from_secs(60),
            || "PostgreSQL did not start".into(),
            || {
                Command::new(pg_bin("pg_isready"))
                    .args(["-q", "-h", "127.0.0.1", "-p", &port])
                    .status()
                    .is_ok_and(|s| s.success())
            },
        );
    }

    /// Stop the server (fast shutdown: sessions are terminated) and wait for it.
    pub fn stop(&mut self) {
        let pid = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()));
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status();
        }
        if let Some(s) = self.server.take() {
            fairlane_testkit::stop(s, Duration::from_secs(30));
        }
    }

    /// Run SQL as the superuser, directly (not through the pooler).
    pub fn admin_sql(&self, sql: &str) -> String {
        let out = run(
            Command::new(need("psql"))
                .env("PGPASSWORD", SUPERUSER_PASSWORD)
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                ])
                .args([
                    "-d",
                    "postgres",
                    "-X",
                    "-q",
                    "-At",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-c",
                    sql,
                ]),
            sql,
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Create a login role with a password (superuser-owned objects stay usable).
    pub fn role(&self, name: &str, password: &str) {
        self.admin_sql(&format!(
            "CREATE ROLE {name} LOGIN PASSWORD '{password}'; GRANT ALL ON SCHEMA public TO {name}"
        ));
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A pooler config in front of `pg` on free ports, with these users.
pub fn config(pg: &Postgres, users: &[(&str, &str)], extra: &str) -> PgConfig {
    let users: Vec<String> = users
        .iter()
        .map(|(u, p)| format!("{{ user = \"{u}\", password = \"{p}\" }}"))
        .collect();
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\
         [server]\nport = {}\ncores = 2\n{extra}\n\
         [auth]\nusers = [{}]\n",
        pg.port,
        users.join(", ")
    );
    // `extra` may add sections; TOML needs [auth] last only for its keys.
    PgConfig::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// psql through the pooler: (success, stdout, stderr).
pub fn psql(
    pooler: &Pooler,
    user: &str,
    password: &str,
    db: &str,
    args: &[&str],
) -> (bool, String, String) {
    let out = psql_command(pooler, user, password, db)
        .args(["-At", "-v", "ON_ERROR_STOP=1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run psql");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

/// A tokio-postgres client through the pooler (its connection task spawned).
pub async fn driver(
    pooler: &Pooler,
    user: &str,
    password: &str,
    db: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let conn = format!(
        "host=127.0.0.1 port={} user={user} password={password} dbname={db} connect_timeout=20",
        pooler.addr().port()
    );
    let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Read until a ReadyForQuery (idle) ends what was read; what was read.
pub fn read_until_ready(s: &mut std::net::TcpStream) -> Vec<u8> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(&[b'Z', 0, 0, 0, 5, b'I']) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// Log in over a raw socket (the pooler must trust loopback); the stream after
/// ReadyForQuery.
pub fn raw_login(addr: std::net::SocketAddr, user: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut out = bytes::BytesMut::new();
    postgres_protocol::message::frontend::startup_message(
        [("user", user), ("database", "postgres")],
        &mut out,
    )
    .unwrap();
    s.write_all(&out).unwrap();
    read_until_ready(&mut s);
    s
}

/// psql through the pooler as `user` on `db`, its arguments still to add.
pub fn psql_command(pooler: &Pooler, user: &str, password: &str, db: &str) -> Command {
    let mut c = Command::new(need("psql"));
    c.env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "20")
        .args(["-h", "127.0.0.1", "-p", &pooler.addr().port().to_string()])
        .args(["-U", user, "-d", db, "-X", "-q"]);
    c
}
