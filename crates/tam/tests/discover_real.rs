//! `tam discover` on real servers no one here wrote: PostgreSQL (process per connection,
//! started as the `postgres` user in a temporary data directory, driven by `pgbench`) and
//! Redis (a thread pool: `io-threads`, driven by `redis-benchmark`). Both on loopback, on
//! free ports; each test stops exactly what it started.
//!
//! A missing program is a failure, not a skip: `scripts/test-deps.sh` installs them.
//! The same flows, through the command line, produced the committed models
//! (`scripts/discover-real.sh`).

use fairlane_tam::discover::{discover, Annotations, Discovery, Options, Target};
use fairlane_tam::{analyze, Model, ProblemKind, Resource, Scheduling, Stage, Usage};
use fairlane_testkit::{free_port, need, pg_bin, run};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tests take turns: each probe keeps a CPU busy, and two at once would disturb the
/// other's measurements.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Polls `ready` every 100 ms for at most `limit`; panics with `what` if it never is.
fn wait_for(limit: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < limit,
            "gave up after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `phase(i)` repeatedly (i = 0, 1, …) until stopped; the child of each phase is
/// waited for, and killed when stopping.
struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(phase: impl Fn(usize) -> Command + Send + 'static) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut i = 0;
            while !flag.load(Ordering::Relaxed) {
                let mut child = phase(i)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start the load");
                while matches!(child.try_wait(), Ok(None)) {
                    if flag.load(Ordering::Relaxed) {
                        let _ = child.kill();
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.wait();
                i += 1;
            }
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn check(found: &Discovery) -> (Model, String) {
    let toml = found.to_toml();
    let context = format!("{}\n{toml}", found.summary());
    eprintln!("{context}");
    let model = Model::from_toml(&toml).unwrap_or_else(|e| panic!("{e}\n{context}"));
    (model, context)
}

/// The discovered model's stage `name`; a panic showing the discovery (`context`) when it has
/// none.
fn stage<'a>(model: &'a Model, name: &str, context: &str) -> &'a Stage {
    model
        .stage(name)
        .unwrap_or_else(|| panic!("no stage `{name}`\n{context}"))
}

/// A PostgreSQL cluster in a temporary directory, run by the `postgres` user.
struct Postgres {
    /// Dropped after `Drop::drop` stopped the server.
    _dir: tempfile::TempDir,
    server: Option<Child>,
    postmaster: u32,
}

impl Postgres {
    fn start(port: u16) -> Postgres {
        let runuser = need("runuser");
        // Removed when the cluster is dropped (after the server stopped), also on a panic.
        let tmp = tempfile::Builder::new()
            .prefix("fairlane-pg-")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        run(
            Command::new("chown").args(["postgres:postgres", dir.to_str().unwrap()]),
            "chown the data directory",
        );
        let data = dir.join("data");
        run(
            Command::new(&runuser)
                .args(["-u", "postgres", "--"])
                .arg(pg_bin("initdb"))
                .args(["-N", "-A", "trust", "-U", "postgres", "-D"])
                .arg(&data),
            "initdb",
        );
        let server = Command::new(&runuser)
            .args(["-u", "postgres", "--"])
            .arg(pg_bin("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(&dir)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "synchronous_commit=off",
            ])
            .args([
                "-c",
                "autovacuum_naptime=1",
                "-c",
                "wal_writer_delay=10ms",
                "-c",
                "bgwriter_delay=10ms",
            ])
            .args([
                "-c",
                "shared_buffers=32MB",
                "-c",
                "autovacuum_vacuum_scale_factor=0.01",
            ])
            .args(["-c", "autovacuum_vacuum_cost_delay=10ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start postgres");
        let mut pg = Postgres {
            _dir: tmp,
            server: Some(server),
            postmaster: 0,
        };
        let pidfile = data.join("postmaster.pid");
        let isready = pg_bin("pg_isready");
        wait_for(
            Duration::from_secs(60),
            "PostgreSQL to accept connections",
            || {
                Command::new(&isready)
                    .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                    .status()
                    .is_ok_and(|s| s.success())
            },
        );
        pg.postmaster = std::fs::read_to_string(&pidfile)
            .expect("postmaster.pid")
            .lines()
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        pg
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Fast shutdown of the postmaster we started, then its runuser parent.
        if self.postmaster != 0 {
            let _ = Command::new("kill")
                .args(["-INT", &self.postmaster.to_string()])
                .status();
        }
        if let Some(server) = self.server.take() {
            fairlane_testkit::stop(server, Duration::from_secs(30));
        }
    }
}

fn annotations(file: &str) -> Annotations {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(file);
    Annotations::parse(
        &std::fs::read_to_string(&path).unwrap(),
        &path.display().to_string(),
    )
    .unwrap()
}

#[test]
fn postgresql_backends_are_on_demand_and_background_processes_are_measured() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pgbench = need("pgbench");
    let port = free_port();
    let pg = Postgres::start(port);
    let p = port.to_string();
    let base = move |pgbench: &Path| {
        let mut c = Command::new(pgbench);
        c.args(["-h", "127.0.0.1", "-p", &p, "-U", "postgres"]);
        c
    };
    run(
        base(&pgbench).args(["-i", "-q", "-s", "2", "postgres"]),
        "pgbench -i",
    );
    // 2 clients, then 6, then 3 (repeated), 3 s each; a checkpoint in between.
    let (pgb, b2) = (pgbench.clone(), base.clone());
    let load = Load::start(move |i| {
        let clients = [2, 6, 3][i.min(2)];
        let mut c = b2(&pgb);
        c.args(["-n", "-c", &clients.to_string(), "-T", "3", "postgres"]);
        c
    });
    let psql = need("psql");
    let p2 = port.to_string();
    let checkpoint = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(4));
        let _ = Command::new(psql)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &p2,
                "-U",
                "postgres",
                "-c",
                "CHECKPOINT",
                "postgres",
            ])
            .output();
    });
    let mut options = Options::new(Target::Pid(pg.postmaster));
    options.duration = Duration::from_secs(8);
    options.probe_window = Duration::from_millis(1500);
    options.annotations = annotations("annotations/postgresql.toml");
    options.command_line = "discover_real test".into();
    let found = discover(&options, &mut |p| eprint!("\r{p}\x1b[K")).expect("discovery runs");
    drop(load);
    let _ = checkpoint.join();
    drop(pg);
    let (model, context) = check(&found);

    let stage = |n: &str| stage(&model, n, &context);
    let evidence = |n: &str| found.stages.iter().find(|s| s.name == n).unwrap();
    // Per-connection backends: on demand, following the connections, CPU and network.
    assert_eq!(
        stage("Backend").scheduling,
        Scheduling::OnDemand,
        "{context}"
    );
    let counts = &evidence("Backend").stats.counts;
    assert!(
        counts.iter().max() > counts.iter().min(),
        "{counts:?}\n{context}"
    );
    assert_eq!(
        stage("Backend").resources.get(Resource::Cpu),
        Usage::True,
        "{context}"
    );
    assert_ne!(
        stage("Backend").resources.get(Resource::Network),
        Usage::False,
        "{context}"
    );
    // Background processes: one each, bounded, with their measured use recorded.
    for name in [
        "Checkpointer",
        "Background Writer",
        "WAL Writer",
        "Autovacuum Launcher",
    ] {
        assert_eq!(
            stage(name).scheduling,
            Scheduling::General,
            "{name}\n{context}"
        );
        assert!(
            stage(name)
                .note
                .as_deref()
                .unwrap_or("")
                .contains("MEASURED"),
            "{name}"
        );
    }
    // With synchronous_commit off the WAL writer writes the WAL; the forced checkpoint
    // writes through the checkpointer.
    assert!(evidence("WAL Writer").stats.write_bytes > 0, "{context}");
    assert!(evidence("Checkpointer").stats.write_bytes > 0, "{context}");
    // `tam check`: on-demand backends using resources have no scheduling point.
    let kinds: Vec<ProblemKind> = analyze(&model).problems.iter().map(|p| p.kind).collect();
    assert!(
        kinds.contains(&ProblemKind::NoScheduling),
        "{kinds:?}\n{context}"
    );
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn redis_io_threads_are_a_bounded_pool() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server_bin = need("redis-server");
    let bench = need("redis-benchmark");
    let port = free_port();
    // Declared before the server, so dropped (removed) after it was killed, also on a panic.
    let tmp = tempfile::Builder::new()
        .prefix("fairlane-redis-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let server = Killed(
        Command::new(server_bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--io-threads",
                "3",
            ])
            .args([
                "--io-threads-do-reads",
                "yes",
                "--save",
                "",
                "--appendonly",
                "yes",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server"),
    );
    let cli = need("redis-cli");
    wait_for(
        Duration::from_secs(30),
        "redis-server to answer PING",
        || {
            Command::new(&cli)
                .args(["-p", &port.to_string(), "ping"])
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
        },
    );
    let p = port.to_string();
    let load = Load::start(move |i| {
        let clients = [20, 60, 40][i.min(2)];
        let mut c = Command::new(&bench);
        c.args([
            "-p",
            &p,
            "-c",
            &clients.to_string(),
            "-n",
            "100000000",
            "-d",
            "256",
            "-t",
            "set,get",
            "-q",
        ]);
        if i < 2 {
            // Phases of 3 s: the benchmark runs until stopped, so time-box it.
            c = Command::new("timeout").tap(|t| {
                t.arg("3").arg(c.get_program()).args(c.get_args());
            });
        }
        c
    });
    let mut options = Options::new(Target::Pid(server.0.id()));
    options.duration = Duration::from_secs(8);
    options.probe_window = Duration::from_millis(1500);
    options.command_line = "discover_real test".into();
    let found = discover(&options, &mut |p| eprint!("\r{p}\x1b[K")).expect("discovery runs");
    drop(load);
    drop(server);
    let (model, context) = check(&found);
    let stage = |n: &str| stage(&model, n, &context);
    // io_thd_1 and io_thd_2 fold into one stage: a fixed pool doing CPU work.
    assert_eq!(
        stage("io_thd_*").scheduling,
        Scheduling::General,
        "{context}"
    );
    let io = found.stages.iter().find(|s| s.name == "io_thd_*").unwrap();
    assert_eq!(io.stats.counts.iter().max(), Some(&2), "{context}");
    assert_eq!(
        stage("io_thd_*").resources.get(Resource::Cpu),
        Usage::True,
        "{context}"
    );
    assert_eq!(
        stage("redis-server").scheduling,
        Scheduling::General,
        "{context}"
    );
    assert_eq!(
        stage("redis-server").resources.get(Resource::Cpu),
        Usage::True,
        "{context}"
    );
    // Two bounded stages sharing the CPU: hidden contention.
    let kinds: Vec<ProblemKind> = analyze(&model).problems.iter().map(|p| p.kind).collect();
    assert!(
        kinds.contains(&ProblemKind::HiddenContention),
        "{kinds:?}\n{context}"
    );
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}

impl Tap for Command {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}
