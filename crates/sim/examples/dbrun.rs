//! Run a database-server spec and print T-level results: `cargo run --release -p fairlane-sim --example dbrun -- SPEC`.
fn main() {
    let path = std::env::args().nth(1).expect("spec path");
    let text = std::fs::read_to_string(&path).unwrap();
    let spec = fairlane_sim::dbserver::DbSpec::parse(&text, &path).unwrap();
    let t = std::time::Instant::now();
    let runs = fairlane_sim::dbserver::run_all(&spec, 2).unwrap();
    for r in &runs {
        println!(
            "[{}] {} util {:.1} jain {:.3} dispatches {} examined {}",
            r.label, r.scheduler, r.utilization, r.jain, r.dispatches, r.examined
        );
        for t in &r.tenants {
            if t.group.starts_with("bully") && !t.name.ends_with("-0") {
                continue;
            }
            println!("   {:10} res {:5.1} cpu {:6.2} ±{:5.2} violpts {:5.2} ±{:5.2} violcpu {:.3} violated {:.2} burstv {:?} q {} lat mean {:.3} p99 {:.3} refund {:.1}/{:.1}",
                t.name, t.res, t.cpu_mean, t.cpu_std, t.viol_points, t.viol_points_std, t.viol_cpu, t.violated, t.burst_violated, t.queries, t.latency_mean, t.latency_p99, t.refund, t.revenue_max);
        }
    }
    eprintln!("wall {:?}", t.elapsed());
}
