//! The database-server simulator (Das et al., VLDB '14 §6): determinism, reservations met and
//! limits held end to end, the utilization cap, spec errors that name the field.

mod support;

use fairlane_sim::cores::{run_all, DbSpec};

const BASE: &str = include_str!("testdata/cores_base.toml");

#[test]
fn same_spec_and_seed_same_results() {
    let spec = DbSpec::parse(BASE, "t.toml").unwrap();
    let a = run_all(&spec, 2).unwrap();
    let b = run_all(&spec, 1).unwrap();
    assert_eq!(a.len(), 4);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.scheduler, y.scheduler);
        assert_eq!(x.dispatches, y.dispatches);
        assert_eq!(x.records, y.records);
        for (s, t) in x.tenants.iter().zip(&y.tenants) {
            assert_eq!(s.latency_p99.to_bits(), t.latency_p99.to_bits());
            assert_eq!(s.queries, t.queries);
        }
    }
}

/// Claim 1 end to end: 30 % reserved with 8 bullies, OLTP and DSS quanta mixed. Under LDF and
/// EDF both reservations hold in every measured interval (within 0.5 points) and no tenant
/// exceeds MaxCPU by more than a quantum per core (0.004 s / 1 s = 0.4 points); the server
/// stays at its 95 % cap. Without reservations the big tenant gets only its equal share.
#[test]
fn reservations_met_and_limits_held_with_bullies() {
    let spec = DbSpec::parse(BASE, "t.toml").unwrap();
    let runs = run_all(&spec, 2).unwrap();
    for r in &runs {
        assert!(
            (r.utilization - 95.0).abs() < 0.5,
            "{}: utilization {}",
            r.scheduler,
            r.utilization
        );
        if r.scheduler == "ldf" || r.scheduler == "edf" {
            for (i, res) in [(0u64, 5.0), (1, 25.0)] {
                for rec in r.records.iter().filter(|x| x.tenant.0 == i) {
                    assert!(
                        rec.cpu >= res - 0.5 && rec.cpu <= res + 0.4,
                        "{}: tenant {i} at {:.2} % in [{}, {})",
                        r.scheduler,
                        rec.cpu,
                        rec.start,
                        rec.end
                    );
                }
            }
        }
    }
    let nores = runs.iter().find(|r| r.scheduler == "no-res").unwrap();
    let big = nores.tenant("big").unwrap();
    assert!((big.cpu_mean - 95.0 / 10.0).abs() < 1.0, "{}", big.cpu_mean);
    assert!(big.violated > 0.99);
}

#[test]
fn spec_errors_name_the_field() {
    let cases = [
        (
            BASE.replace("res = 25.0", "res = 250.0"),
            "tenant[1].res_cpu",
        ),
        (BASE.replace("max = 5.0", "max = 2.0"), "tenant[0].max_cpu"),
        (
            BASE.replace("duration = 12.0", "duration = -1.0"),
            "duration",
        ),
        (
            BASE.replace("quantum = 0.001", "quantum = 0.0"),
            "tenant[0].workload.quantum",
        ),
        (BASE.replace("\"no-res\"", "\"lottery\""), "schedulers[3]"),
        (
            BASE.replace("utilization_cap = 95.0", "utilization_cap = 0.0"),
            "utilization_cap",
        ),
        (
            BASE.replace("count = 8", "count = 8\ncolor = 1"),
            "tenant[2]",
        ),
    ];
    for (text, field) in cases {
        let e = DbSpec::parse(&text, "t.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml: ") && e.contains(field),
            "{field}: {e}"
        );
    }
}

#[test]
fn shipped_ldf_experiments_parse() {
    let specs = support::shipped("experiments", "ldf-");
    for p in &specs {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(p).unwrap();
        DbSpec::parse(&text, &name).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(specs.len(), 5, "{} ldf specs", specs.len());
}
