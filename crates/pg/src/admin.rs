//! The admin listener: `/metrics` (Prometheus text), `/status` (JSON), `/dashboard` (one
//! HTML page polling `/status`) and `/healthz`. Per tenant: transactions, waits, refusals,
//! backend CPU, and seeds/003 §2.2's meter: CPU %, Delay %, CPU_eff %, ViolCPU and the
//! violated intervals.

use std::convert::Infallible;
use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use fairlane_runtime::admin::reply;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::Shared;

pub(crate) async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(&shared, &req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn route(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics(shared),
        ),
        "/status" => reply(
            StatusCode::OK,
            "application/json",
            status(shared).to_string(),
        ),
        "/dashboard" | "/" => reply(StatusCode::OK, "text/html; charset=utf-8", DASHBOARD),
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n"),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "try /dashboard, /metrics, /status, /healthz\n",
        ),
    }
}

/// `/status`: the pooler, the pools and every tenant.
pub(crate) fn status(shared: &Shared) -> Value {
    let sched = &shared.sched;
    let gate = sched.gate().metrics();
    let (open, idle) = shared.pools.counts();
    let tenants: Vec<Value> = sched
        .readings()
        .into_iter()
        .zip(sched.tenants())
        .enumerate()
        .map(|(i, ((c, now), t))| {
            let g = gate.tenant(i as u64);
            let ms = |q: f64| g.map_or(0.0, |g| g.wait.quantile(q) as f64 / 1e6);
            json!({
                "name": t.name, "weight": t.weight, "res": t.res, "max": t.max,
                "waiting": g.map_or(0, |g| g.queued), "holding": g.map_or(0, |g| g.running),
                "transactions": c.transactions, "refused_full": c.refused_full,
                "timed_out": c.timed_out, "cpu_seconds": c.cpu_seconds,
                "held_seconds": c.held_seconds,
                "wait_ms": { "p50": ms(0.5), "p99": ms(0.99) },
                "meter": {
                    "now": now.map(|r| json!({"cpu": r.cpu, "delay": r.delay, "cpu_eff": r.cpu_eff, "viol_cpu": r.viol_cpu})),
                    "last": c.last.map(|r| json!({"cpu": r.cpu, "delay": r.delay, "cpu_eff": r.cpu_eff, "viol_cpu": r.viol_cpu})),
                    "intervals": c.intervals, "violations": c.violations,
                },
            })
        })
        .collect();
    json!({
        "scheduler": shared.config.scheduler.algorithm,
        "mode": shared.config.pool.mode,
        "pool_size": shared.config.pool.size,
        "cores": sched.cores(),
        "server_connections": { "open": open, "idle": idle },
        "clients": shared.clients.load(std::sync::atomic::Ordering::Relaxed),
        "waiting": sched.gate().waiting(),
        "holding": sched.gate().holding(),
        "handovers": shared.handoffs.started(),
        "tenants": tenants,
    })
}

/// A Prometheus label value, escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One per-tenant series: name, type, help, and how to read it from a tenant's status.
type Series<'a> = (&'a str, &'a str, &'a str, &'a dyn Fn(&Value) -> f64);

/// `/metrics`.
pub(crate) fn metrics(shared: &Shared) -> String {
    let s = status(shared);
    let mut o = String::new();
    let series: [Series; 12] = [
        ("transactions_total", "counter", "Transactions (sessions in session mode) served.", &|t| t["transactions"].as_f64().unwrap_or(0.0)),
        ("refused_total", "counter", "Refused with SQLSTATE 53300: a queue was full.", &|t| t["refused_full"].as_f64().unwrap_or(0.0)),
        ("timeouts_total", "counter", "Refused with SQLSTATE 57014 after limits.queue_timeout_ms.", &|t| t["timed_out"].as_f64().unwrap_or(0.0)),
        ("cpu_seconds_total", "counter", "Backend CPU charged (schedstat), or connection time held.", &|t| t["cpu_seconds"].as_f64().unwrap_or(0.0)),
        ("held_seconds_total", "counter", "Server connection time held.", &|t| t["held_seconds"].as_f64().unwrap_or(0.0)),
        ("waiting", "gauge", "Transactions waiting for a server connection.", &|t| t["waiting"].as_f64().unwrap_or(0.0)),
        ("holding", "gauge", "Server connections held.", &|t| t["holding"].as_f64().unwrap_or(0.0)),
        ("cpu_percent", "gauge", "CPU_i of the current metering interval so far, % of the server's cores (seeds/003 §2.2).", &|t| t["meter"]["now"]["cpu"].as_f64().unwrap_or(0.0)),
        ("delay_percent", "gauge", "Delay_i of the current interval so far, % (§2.2, §3.5).", &|t| t["meter"]["now"]["delay"].as_f64().unwrap_or(0.0)),
        ("cpu_eff_percent", "gauge", "CPU_eff = CPU·100/(CPU + Delay) of the last closed interval (Eq. 1).", &|t| t["meter"]["last"]["cpu_eff"].as_f64().unwrap_or(100.0)),
        ("viol_cpu", "gauge", "ViolCPU of the last closed interval (Eq. 2).", &|t| t["meter"]["last"]["viol_cpu"].as_f64().unwrap_or(0.0)),
        ("violations_total", "counter", "Metering intervals with CPU_eff < ResCPU.", &|t| t["meter"]["violations"].as_f64().unwrap_or(0.0)),
    ];
    let tenants = s["tenants"].as_array().cloned().unwrap_or_default();
    for (name, kind, help, get) in series {
        let _ = writeln!(
            o,
            "# HELP fairlane_pg_{name} {help}\n# TYPE fairlane_pg_{name} {kind}"
        );
        for t in &tenants {
            let n = label(t["name"].as_str().unwrap_or(""));
            let _ = writeln!(o, "fairlane_pg_{name}{{tenant=\"{n}\"}} {}", get(t));
        }
    }
    for (name, v) in [
        ("server_connections_open", &s["server_connections"]["open"]),
        ("server_connections_idle", &s["server_connections"]["idle"]),
        ("clients", &s["clients"]),
    ] {
        let _ = writeln!(
            o,
            "# TYPE fairlane_pg_{name} gauge\nfairlane_pg_{name} {}",
            v.as_f64().unwrap_or(0.0)
        );
    }
    o
}

const DASHBOARD: &str = r#"<!doctype html><meta charset="utf-8"><title>fairlane pg</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}.v{color:#b00;font-weight:bold}
.bar{display:inline-block;height:10px;background:#4a8}.res{display:inline-block;height:10px;border-right:2px solid #b00}</style>
<h1>fairlane pg</h1><p id="head"></p>
<table><thead><tr><th>tenant</th><th>weight</th><th>res %</th><th>max %</th><th>CPU % (now)</th><th></th>
<th>Delay %</th><th>CPU_eff % (last)</th><th>violations</th><th>waiting</th><th>holding</th>
<th>transactions</th><th>wait p99 ms</th><th>refused</th></tr></thead><tbody id="t"></tbody></table>
<script>
async function tick(){try{const s=await (await fetch('/status')).json();
document.getElementById('head').textContent=`scheduler ${s.scheduler}, ${s.mode} mode, D = ${s.pool_size}, `+
`${s.cores} cores, server connections ${s.server_connections.open} open / ${s.server_connections.idle} idle, `+
`${s.clients} clients, ${s.waiting} waiting`;
const f=(x,d=1)=>x==null?'–':Number(x).toFixed(d);
document.getElementById('t').innerHTML=s.tenants.map(t=>{const n=t.meter.now||{},l=t.meter.last||{};
const bad=t.res>0&&l.cpu_eff!=null&&l.cpu_eff<t.res;
return `<tr><td>${t.name.replace(/</g,'&lt;')}</td><td>${t.weight}</td><td>${t.res}</td><td>${t.max}</td><td>${f(n.cpu)}</td>`+
`<td><span class="bar" style="width:${Math.min(200,2*(n.cpu||0))}px"></span><span class="res" style="width:0;margin-left:${2*t.res-2*Math.min(100,n.cpu||0)}px"></span></td>`+
`<td>${f(n.delay)}</td><td class="${bad?'v':''}">${f(l.cpu_eff)}</td><td>${t.meter.violations} / ${t.meter.intervals}</td>`+
`<td>${t.waiting}</td><td>${t.holding}</td><td>${t.transactions}</td><td>${f(t.wait_ms.p99,2)}</td><td>${t.refused_full+t.timed_out}</td></tr>`}).join('')}
catch(e){document.getElementById('head').textContent='status unavailable: '+e}}
tick();setInterval(tick,1000);
</script>"#;
