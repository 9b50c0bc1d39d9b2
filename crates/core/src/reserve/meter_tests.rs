//! The lazy meter (levels and a heap of interval ends) against the earlier one that accrued
//! every waiting tenant's delay at every event (`meter_scan.rs`): random task transitions,
//! same records (CPU bit for bit; delay and what derives from it up to rounding, since the
//! sums are grouped differently), same readings.

use proptest::prelude::*;

use super::account::Terms;
use super::meter::Meter;
use super::meter_scan::Meter as ScanMeter;
use super::{MeterReading, MeterRecord};
use crate::TenantId;

#[derive(Clone, Debug)]
enum Ev {
    Ready(u8),
    Cancel(u8),
    Start(u8),
    Admit(u8),
    Stop(u16, u8),
    Wait(u16),
    Read(u8),
    Terms(u8, u8),
    Close,
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        5 => any::<u8>().prop_map(Ev::Ready),
        1 => any::<u8>().prop_map(Ev::Cancel),
        4 => any::<u8>().prop_map(Ev::Start),
        2 => any::<u8>().prop_map(Ev::Admit),
        4 => (any::<u16>(), any::<u8>()).prop_map(|(p, u)| Ev::Stop(p, u)),
        5 => any::<u16>().prop_map(Ev::Wait),
        1 => any::<u8>().prop_map(Ev::Read),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(t, k)| Ev::Terms(t, k)),
        1 => Just(Ev::Close),
    ]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

fn same_reading(a: &MeterReading, b: &MeterReading) -> bool {
    a.cpu == b.cpu
        && close(a.delay, b.delay)
        && close(a.cpu_eff, b.cpu_eff)
        && close(a.viol_cpu, b.viol_cpu)
}

fn same_record(a: &MeterRecord, b: &MeterRecord) -> bool {
    // A flag may differ only where CPU_eff sits on its threshold up to rounding.
    let near = |x: f64, y: f64| close(x, y);
    a.tenant == b.tenant
        && a.start == b.start
        && a.end == b.end
        && a.res_cpu == b.res_cpu
        && a.cpu == b.cpu
        && close(a.delay, b.delay)
        && close(a.cpu_eff, b.cpu_eff)
        && close(a.viol_cpu, b.viol_cpu)
        && (a.violated == b.violated || near(b.cpu_eff, b.res_cpu))
        && (a.burst_violated == b.burst_violated || a.burst_violated.is_some())
}

fn sorted(mut r: Vec<MeterRecord>) -> Vec<MeterRecord> {
    r.sort_by_key(|x| (x.tenant, x.start.to_bits()));
    r
}

proptest! {
    #![proptest_config(crate::util::proptest_cases(512))]

    #[test]
    fn lazy_meter_matches_the_per_event_one(
        cores in 1..5usize,
        tenants in 1..8usize,
        evs in prop::collection::vec(ev(), 1..300),
    ) {
        let mut lens: Vec<f64> = (0..tenants).map(|t| 0.5 + (t % 3) as f64 * 0.25).collect();
        let mut lazy = Meter::new(cores);
        let mut scan = ScanMeter::new(cores);
        for t in 0..tenants {
            let (res, interval) = (10.0 * t as f64, 0.5 + (t % 3) as f64 * 0.25);
            prop_assert_eq!(lazy.add_tenant(TenantId(t as u64), res, None, interval, 0.0).unwrap(), t);
            let terms = Terms { res_cpu: res, burst: None, interval };
            scan.add_tenant(TenantId(t as u64), terms, 0.0).unwrap();
        }
        // The caller's view: ready and running tasks per tenant (start times).
        let mut ready = vec![0usize; tenants];
        let mut running: Vec<(usize, f64)> = Vec::new();
        let mut now = 0.0;
        let (mut ra, mut rb) = (Vec::new(), Vec::new());
        for e in &evs {
            match *e {
                Ev::Ready(t) => {
                    let t = t as usize % tenants;
                    ready[t] += 1;
                    lazy.enqueued(t, now);
                    scan.enqueued(t, now);
                }
                Ev::Cancel(t) => {
                    let t = t as usize % tenants;
                    if ready[t] > 0 {
                        ready[t] -= 1;
                        lazy.cancelled(t, now);
                        scan.cancelled(t, now);
                    }
                }
                Ev::Start(t) => {
                    let t = t as usize % tenants;
                    if ready[t] > 0 && running.len() < cores {
                        ready[t] -= 1;
                        running.push((t, now));
                        lazy.started(t, now);
                        scan.started(t, now);
                    }
                }
                Ev::Admit(t) => {
                    // Ready and started at once: one call, two on the earlier meter.
                    let t = t as usize % tenants;
                    if running.len() < cores {
                        running.push((t, now));
                        lazy.admitted(t, now);
                        scan.enqueued(t, now);
                        scan.started(t, now);
                    }
                }
                Ev::Stop(p, u) => {
                    if !running.is_empty() {
                        let (t, at) = running.remove(p as usize % running.len());
                        let used = (now - at) * (u % 4 + 1) as f64 / 4.0;
                        lazy.finished(t, at, used, now);
                        scan.finished(t, at, used, now);
                    }
                }
                Ev::Wait(dt) => now += dt as f64 * 1e-4,
                Ev::Read(t) => {
                    let t = t as usize % tenants;
                    let (a, b) = (lazy.reading(t, now).unwrap(), scan.reading(t, now).unwrap());
                    prop_assert!(same_reading(&a, &b), "{:?} vs {:?} at {}", a, b, now);
                }
                Ev::Terms(t, k) => {
                    let t = t as usize % tenants;
                    // Only longer: a shortened interval can end before the last event, where
                    // the earlier meter accrued a negative delay (the lazy one counts none).
                    let interval = lens[t].max(0.25 + (k % 4) as f64 * 0.25);
                    lens[t] = interval;
                    lazy.set_terms(t, 20.0, Some(40.0), interval).unwrap();
                    let terms = Terms { res_cpu: 20.0, burst: Some(40.0), interval };
                    scan.set_terms(t, terms).unwrap();
                }
                Ev::Close => {
                    lazy.close_through(now);
                    scan.close_through(now);
                }
            }
            ra.extend(lazy.take_records());
            rb.extend(scan.take_records());
        }
        lazy.close_through(now + 5.0);
        scan.close_through(now + 5.0);
        ra.extend(lazy.take_records());
        rb.extend(scan.take_records());
        let (ra, rb) = (sorted(ra), sorted(rb));
        prop_assert_eq!(ra.len(), rb.len());
        for (a, b) in ra.iter().zip(&rb) {
            prop_assert!(same_record(a, b), "{:?}\nvs\n{:?}", a, b);
        }
    }
}

/// A tenant that waits only while nothing else runs accrues exactly no delay.
#[test]
fn waiting_alone_accrues_exactly_nothing() {
    let mut m = Meter::new(2);
    let a = m.add_tenant(TenantId(1), 50.0, None, 1.0, 0.0).unwrap();
    m.enqueued(a, 0.0);
    m.enqueued(a, 0.0);
    m.started(a, 0.1);
    m.finished(a, 0.1, 0.2, 0.3);
    m.started(a, 0.3);
    m.finished(a, 0.3, 0.3, 0.6);
    m.close_through(1.0);
    let r = &m.take_records()[0];
    assert_eq!((r.delay, r.cpu_eff, r.violated), (0.0, 100.0, false));
}

/// `admitted` is `enqueued` then `started` at one time: the same records and readings, bit
/// for bit.
#[test]
fn admitted_is_enqueued_then_started() {
    let (mut one, mut two) = (Meter::new(2), Meter::new(2));
    for m in [&mut one, &mut two] {
        m.add_tenant(TenantId(1), 40.0, None, 1.0, 0.0).unwrap();
        m.add_tenant(TenantId(2), 20.0, Some(30.0), 0.5, 0.0)
            .unwrap();
    }
    // Tenant 1 queues behind tenant 0's running tasks, so delays accrue across admissions.
    let script: [(usize, f64, bool); 8] = [
        (0, 0.0, true),
        (0, 0.1, true),
        (1, 0.2, false),
        (0, 0.35, true),
        (1, 0.6, false),
        (0, 0.9, true),
        (0, 1.3, true),
        (1, 1.7, false),
    ];
    let mut running: Vec<(usize, f64)> = Vec::new();
    for &(t, now, admit) in &script {
        while running.len() >= 2 {
            let (rt, at) = running.remove(0);
            for m in [&mut one, &mut two] {
                m.finished(rt, at, (now - at) * 0.5, now);
            }
        }
        if admit {
            one.admitted(t, now);
            two.enqueued(t, now);
            two.started(t, now);
            running.push((t, now));
        } else {
            one.enqueued(t, now);
            two.enqueued(t, now);
        }
        for r in 0..2 {
            assert_eq!(
                one.reading(r, now),
                two.reading(r, now),
                "tenant {r} at {now}"
            );
        }
    }
    one.close_through(3.0);
    two.close_through(3.0);
    assert_eq!(one.take_records(), two.take_records());
}
