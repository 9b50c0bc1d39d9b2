//! Tenants' load through the pooler and each tenant's CPU measured from its backends'
//! `/proc/<pid>/stat` (utime + stime), independently of the pooler: shared by the isolation
//! test and the `pg_isolation` example behind scripts/pg-*.sh.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times.
fn ticks_per_second() -> f64 {
    // SAFETY-free: sysconf through `getconf`, 100 on every Linux this runs on.
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds so far of every PostgreSQL backend, by pid: (role, seconds). A backend's
/// title is `postgres: <role> <database> <client> <state>`.
pub fn backends_cpu(hz: f64) -> HashMap<u32, (String, f64)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        let Some(rest) = cmd.strip_prefix("postgres: ") else {
            continue;
        };
        let role = rest.split(' ').next().unwrap_or("").to_string();
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = after.split_ascii_whitespace().collect();
        if f.len() > 13 {
            let t = f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0);
            out.insert(pid, (role, t / hz));
        }
    }
    out
}

/// Samples every backend's CPU every 100 ms in a thread; [`CpuWatch::window`] gives each
/// role's CPU seconds between two marks (a backend that ended counts up to its last sample).
/// Per backend pid: its role, the CPU seconds at the last mark, the latest sample.
type Seen = Arc<Mutex<HashMap<u32, (String, f64, f64)>>>;

pub struct CpuWatch {
    stop: Arc<AtomicBool>,
    seen: Seen,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CpuWatch {
    pub fn start() -> CpuWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Seen = Arc::default();
        let (s, m) = (stop.clone(), seen.clone());
        let hz = ticks_per_second();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let now = backends_cpu(hz);
                let mut m = m.lock().unwrap();
                for (pid, (role, cpu)) in now {
                    let e = m.entry(pid).or_insert((role, 0.0, cpu));
                    e.2 = cpu;
                }
                drop(m);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        CpuWatch {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Start a window now: every backend's CPU so far becomes its base.
    pub fn mark(&self) {
        std::thread::sleep(Duration::from_millis(150));
        for e in self.seen.lock().unwrap().values_mut() {
            e.1 = e.2;
        }
    }

    /// CPU seconds per role since the last mark or lap, and a new mark (no waiting: for
    /// per-second samples).
    pub fn lap(&self) -> HashMap<String, f64> {
        let mut by_role = HashMap::new();
        for (role, base, last) in self.seen.lock().unwrap().values_mut() {
            *by_role.entry(role.clone()).or_insert(0.0) += (*last - *base).max(0.0);
            *base = *last;
        }
        by_role
    }

    /// CPU seconds per role since the last mark.
    pub fn window(&self) -> HashMap<String, f64> {
        std::thread::sleep(Duration::from_millis(150));
        let mut by_role = HashMap::new();
        for (role, base, last) in self.seen.lock().unwrap().values() {
            *by_role.entry(role.clone()).or_insert(0.0) += (last - base).max(0.0);
        }
        by_role
    }
}

impl Drop for CpuWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One tenant's clients: a role, how many connections, the query each runs in a loop and
/// the pause between two.
#[derive(Clone, Debug)]
pub struct Clients {
    pub role: String,
    pub password: String,
    pub connections: usize,
    pub sql: String,
    pub pause: Duration,
}

/// Run every tenant's clients against `port` for `length`; each query's latency per role
/// (those finished within the run).
pub async fn run(
    port: u16,
    tenants: &[Clients],
    length: Duration,
) -> HashMap<String, Vec<Duration>> {
    run_with(port, tenants, length, || {}).await
}

/// [`run`], calling `tick` about once a second meanwhile (from the caller's task).
pub async fn run_with(
    port: u16,
    tenants: &[Clients],
    length: Duration,
    mut tick: impl FnMut(),
) -> HashMap<String, Vec<Duration>> {
    let end = Instant::now() + length;
    let mut tasks = Vec::new();
    for t in tenants {
        for _ in 0..t.connections {
            let t = t.clone();
            tasks.push(tokio::spawn(async move {
                let conn = format!(
                    "host=127.0.0.1 port={port} user={} password={} dbname=postgres connect_timeout=60",
                    t.role, t.password
                );
                let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e:?}", t.role));
                tokio::spawn(connection);
                let mut lat = Vec::new();
                while Instant::now() < end {
                    let t0 = Instant::now();
                    let r = tokio::time::timeout(end.saturating_duration_since(t0), client.simple_query(&t.sql)).await;
                    match r {
                        Ok(Ok(_)) => lat.push(t0.elapsed()),
                        Ok(Err(e)) => panic!("{}: {e:?}", t.role),
                        Err(_) => break,
                    }
                    if !t.pause.is_zero() {
                        tokio::time::sleep(t.pause).await;
                    }
                }
                (t.role, lat)
            }));
        }
    }
    let mut next = Instant::now() + Duration::from_secs(1);
    while next <= end {
        tokio::time::sleep_until(next.into()).await;
        tick();
        next += Duration::from_secs(1);
    }
    let mut out: HashMap<String, Vec<Duration>> = HashMap::new();
    for task in tasks {
        let (role, lat) = task.await.expect("a client task");
        out.entry(role).or_default().extend(lat);
    }
    out
}

/// The `q` quantile of latencies.
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

/// A pooler config for the isolation experiments: D = 2 server connections on
/// `server.cores = 2`, one tenant per role (password `<role>-pw`), ResCPU = MaxCPU = `res`
/// for the tenants with one (only with a reservation policy; seeds/003 §6.2's set-up).
pub fn tenants_config(
    pg_port: u16,
    algorithm: &str,
    tenants: &[(String, f64)],
) -> fairlane_pg::PgConfig {
    let reserves = fairlane_pg::config::RESERVATION_POLICIES.contains(&algorithm);
    let auth: Vec<String> = tenants
        .iter()
        .map(|(u, _)| format!("{{ user = \"{u}\", password = \"{u}-pw\" }}"))
        .collect();
    let mut text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"\"\n[server]\nport = {pg_port}\ncores = 2\n\
         [pool]\nsize = 2\nmax_connections = 40\n[scheduler]\nalgorithm = \"{algorithm}\"\n\
         [auth]\nusers = [{}]\n",
        auth.join(", ")
    );
    for (name, res) in tenants {
        text.push_str(&format!(
            "[[tenant]]\nname = \"{name}\"\nusers = [\"{name}\"]\n"
        ));
        if reserves && *res > 0.0 {
            text.push_str(&format!("res = {res}\nmax = {res}\n"));
        }
    }
    fairlane_pg::PgConfig::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// ~30 ms of one core and nothing else (a PL/pgSQL loop: no tuplestore, no temp files).
pub const HEAVY: &str = "do $$ begin for i in 1..5000000 loop end loop; end $$";

/// `connections` clients of `role` running `sql` with `pause_ms` between two.
pub fn clients(role: &str, connections: usize, sql: &str, pause_ms: u64) -> Clients {
    Clients {
        role: role.into(),
        password: format!("{role}-pw"),
        connections,
        sql: sql.into(),
        pause: Duration::from_millis(pause_ms),
    }
}

/// What one run measured: per role its share of the 2 cores over the run (%), its
/// per-second samples (%), and its queries' latencies; and per tenant the share the pooler
/// charged (its own schedstat metering, to compare with the independent reading) and the
/// mean CPU seconds it charged a transaction.
pub struct Outcome {
    pub shares: HashMap<String, f64>,
    pub charged: HashMap<String, f64>,
    pub per_transaction: HashMap<String, f64>,
    pub samples: HashMap<String, Vec<f64>>,
    pub latencies: HashMap<String, Vec<Duration>>,
}

/// Start a pooler with `config`, warm up for 1.5 s, then run `load` for `secs` seconds
/// while `watch` samples the backends' CPU every second.
pub fn measure(
    config: fairlane_pg::PgConfig,
    watch: &CpuWatch,
    load: &[Clients],
    secs: u64,
) -> Outcome {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pooler = fairlane_pg::Pooler::start(config).await.unwrap();
        let port = pooler.addr().port();
        run(port, load, Duration::from_millis(1500)).await;
        let charged0 = charged_cpu(&pooler);
        watch.mark();
        let t0 = Instant::now();
        let mut last = Instant::now();
        let mut samples: HashMap<String, Vec<f64>> = HashMap::new();
        let mut totals: HashMap<String, f64> = HashMap::new();
        let mut lap = |samples: &mut HashMap<String, Vec<f64>>| {
            let dt = last.elapsed().as_secs_f64();
            last = Instant::now();
            for (role, cpu) in watch.lap() {
                *totals.entry(role.clone()).or_insert(0.0) += cpu;
                samples
                    .entry(role)
                    .or_default()
                    .push(cpu * 100.0 / (2.0 * dt));
            }
        };
        let latencies = run_with(port, load, Duration::from_secs(secs), || lap(&mut samples)).await;
        std::thread::sleep(Duration::from_millis(150));
        lap(&mut samples);
        let wall = t0.elapsed().as_secs_f64();
        let mut charged = HashMap::new();
        let mut per_transaction = HashMap::new();
        for (t, (c, n)) in charged_cpu(&pooler) {
            let (c0, n0) = charged0.get(&t).copied().unwrap_or((0.0, 0.0));
            charged.insert(t.clone(), (c - c0) * 100.0 / (2.0 * wall));
            per_transaction.insert(t, (c - c0) / (n - n0).max(1.0));
        }
        let shares = totals
            .into_iter()
            .map(|(r, c)| (r, c * 100.0 / (2.0 * wall)))
            .collect();
        Outcome {
            shares,
            charged,
            per_transaction,
            samples,
            latencies,
        }
    })
}

/// CPU seconds the pooler charged so far and transactions, per tenant (`/status`).
fn charged_cpu(pooler: &fairlane_pg::Pooler) -> HashMap<String, (f64, f64)> {
    let status = pooler.status();
    let Some(tenants) = status["tenants"].as_array() else {
        return HashMap::new();
    };
    tenants
        .iter()
        .filter_map(|t| {
            let name = t["name"].as_str()?.to_string();
            Some((
                name,
                (t["cpu_seconds"].as_f64()?, t["transactions"].as_f64()?),
            ))
        })
        .collect()
}
