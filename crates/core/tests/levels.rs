//! Priority levels (`fairlane_core::levels`) on random configurations and operation
//! sequences, checked after every operation against the invariants of issue 36 and against
//! two obviously correct models:
//!
//! * which level a free worker serves: the first level, exempt ones first, that has requests
//!   queued and that its sharing rule admits, computed from the scheduler's own level views
//!   (borrowing: below its current limit; strict bands: below its cap, and below its
//!   guaranteed part or leaving every other level's unmet guaranteed demand a worker);
//! * inside a level, what runs: a flat scheduler of the level's preset, fed the level's own
//!   requests (flows numbered as the level numbers them: a small tenant's default flow by
//!   the tenant's id, the others from 4096 in order of first appearance) and
//!   asked on the same seat (the lowest free one below the level's limit) must choose the
//!   same request with the same charge: the fair scheduler's guarantees hold unchanged.
//!
//! Invariants: non-exempt seats in use ≤ ServerCL; a level starts a request only below its
//! current limit and `nominal + borrowing limit`; it never lends more than its lendable part
//! (`current ≥ nominal − lendable`); the current limits sum to ServerCL; with early reclaim a
//! level with demand is never left short of `min(demand, nominal)`; nominal seats sum to
//! ServerCL with one at least each; totals and tenant views add up.

use std::collections::BTreeMap;

use fairlane_core::levels::{LevelConfig, LevelView, LevelsConfig, Sharing};
use fairlane_core::{Config, Decision, Error, LevelId, Request, Scheduler, TenantId, Ticket};
use proptest::prelude::*;

const PRESETS: [&str; 8] = ["fifo", "drr", "sfq", "wfq", "wf2q", "2dfq", "2dfqe", "wfqe"];

#[derive(Clone, Debug)]
struct Spec {
    levels: Vec<(u8, u8, Option<u8>, usize)>, // shares, lendable %, borrowing %, preset
    exempt: bool,
    extra: usize,
    sharing: Sharing,
}

fn spec() -> impl Strategy<Value = Spec> {
    let percent = prop_oneof![Just(0u8), Just(50), Just(100), 0u8..=100];
    let level = (
        1u8..20,
        percent,
        prop::option::of(0u8..=100),
        0..PRESETS.len(),
    );
    let sharing = prop_oneof![
        (1u16..30, any::<bool>()).prop_map(|(p, early_reclaim)| Sharing::Borrowing {
            period: f64::from(p),
            early_reclaim
        }),
        Just(Sharing::Strict),
    ];
    (
        prop::collection::vec(level, 1..5),
        any::<bool>(),
        0usize..7,
        sharing,
    )
        .prop_map(|(levels, exempt, extra, sharing)| Spec {
            levels,
            exempt,
            extra,
            sharing,
        })
}

impl Spec {
    fn config(&self) -> LevelsConfig {
        let server = self.levels.len() + self.extra;
        let mut c =
            LevelsConfig::new(Config::preset("wfq").unwrap().workers(server)).sharing(self.sharing);
        if self.exempt {
            c = c.level(LevelConfig::exempt("exempt").scheduler(Config::preset("fifo").unwrap()));
        }
        let n = self.levels.len();
        for (k, &(shares, lendable, borrowing, preset)) in self.levels.iter().enumerate() {
            let name = if k + 1 == n {
                "catch-all".to_string()
            } else {
                format!("l{k}")
            };
            let mut l = LevelConfig::new(name, f64::from(shares))
                .lendable_percent(f64::from(lendable))
                .scheduler(Config::preset(PRESETS[preset]).unwrap());
            if let Some(b) = borrowing {
                l = l.borrowing_limit_percent(f64::from(b));
            }
            c = c.level(l);
        }
        c
    }
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        tenant: u8,
        level: u8,
        flow: u8,
        cost: u8,
    },
    Dequeue,
    Complete {
        pick: u16,
    },
    Cancel {
        pick: u16,
    },
    Advance {
        dt: u8,
    },
    Workers {
        delta: i8,
    },
    Weight {
        tenant: u8,
        w: u8,
    },
    /// A reload: new shares and percentages for the same levels.
    Reload {
        seed: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..6, any::<u8>(), 0u8..3, 1u8..9)
            .prop_map(|(tenant, level, flow, cost)| Op::Enqueue { tenant, level, flow, cost }),
        5 => Just(Op::Dequeue),
        3 => any::<u16>().prop_map(|pick| Op::Complete { pick }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        3 => (0u8..12).prop_map(|dt| Op::Advance { dt }),
        1 => (-3i8..4).prop_map(|delta| Op::Workers { delta }),
        1 => (0u8..6, 1u8..5).prop_map(|(tenant, w)| Op::Weight { tenant, w }),
        1 => any::<u64>().prop_map(|seed| Op::Reload { seed }),
    ]
}

/// The flat scheduler a level's must match, with the level's flow and seat numbering.
struct Shadow {
    s: Box<dyn Scheduler<u32> + Send>,
    workers: usize,
    flows: BTreeMap<(u64, u64), u64>,
    seats: Vec<bool>,
    tickets: BTreeMap<u32, Ticket>,
}

impl Shadow {
    /// The flow id the level gives `(tenant, d)`: a small tenant's own id for its default
    /// flow, else the next id from 4096 in order of first appearance.
    fn flow(&mut self, tenant: u64, d: u64, weights: &BTreeMap<u64, f64>, now: f64) -> u64 {
        if let Some(&id) = self.flows.get(&(tenant, d)) {
            return id;
        }
        let id = if d == 0 && tenant < 4096 {
            tenant
        } else {
            4096 + self.flows.values().filter(|&&v| v >= 4096).count() as u64
        };
        self.flows.insert((tenant, d), id);
        if let Some(&w) = weights.get(&tenant) {
            self.s.set_weight(TenantId(id), w, now).unwrap();
        }
        id
    }
}

struct Running {
    ticket: Ticket,
    worker: usize,
    level: usize,
    label: u32,
    seat: usize,
    cost: f64,
}

struct Harness {
    s: Box<dyn Scheduler<u32> + Send>,
    spec: Spec,
    shadows: Vec<Shadow>,
    sharing: Sharing,
    server: usize,
    free: Vec<bool>,
    now: f64,
    next_label: u32,
    queued: Vec<(Ticket, usize, u32, u64)>, // ticket, level, label, tenant
    running: Vec<Running>,
    weights: BTreeMap<u64, f64>,
    /// The last operation asked for a dispatch: the level served (`None`: nothing ran).
    decided: Option<Option<usize>>,
}

fn non_exempt<'a, 'b>(v: &'a [LevelView<'b>]) -> impl Iterator<Item = &'a LevelView<'b>> {
    v.iter().filter(|l| !l.exempt)
}

/// The level a free worker should serve, from the views before the dispatch.
fn expected(v: &[LevelView<'_>], sharing: Sharing, server: usize) -> Option<usize> {
    let running: usize = v.iter().map(|l| l.seats_in_use).sum();
    let free = server.saturating_sub(running);
    let unmet = |l: &LevelView<'_>| {
        if l.exempt {
            0
        } else {
            l.min.saturating_sub(l.seats_in_use).min(l.queued)
        }
    };
    let total: usize = v.iter().map(unmet).sum();
    let order = v.iter().filter(|l| l.exempt).chain(non_exempt(v));
    for l in order {
        if l.queued == 0 {
            continue;
        }
        let admits = l.exempt
            || free >= 1
                && match sharing {
                    Sharing::Borrowing { .. } => l.seats_in_use < l.current,
                    Sharing::Strict => {
                        l.seats_in_use < l.current
                            && (l.seats_in_use < l.min || free > total - unmet(l))
                    }
                };
        if admits {
            return Some(l.id.0 as usize);
        }
    }
    None
}

impl Harness {
    fn new(spec: &Spec) -> Self {
        let config = spec.config();
        let s = config.build::<u32>().unwrap();
        let shadows = s
            .levels()
            .iter()
            .zip(&config.levels)
            .map(|(v, l)| Shadow {
                s: l.scheduler
                    .unwrap()
                    .workers(v.current.max(1))
                    .build()
                    .unwrap(),
                workers: v.current.max(1),
                flows: BTreeMap::new(),
                seats: Vec::new(),
                tickets: BTreeMap::new(),
            })
            .collect();
        let server = s.workers();
        Harness {
            s,
            spec: spec.clone(),
            shadows,
            sharing: spec.sharing,
            server,
            free: vec![true; server],
            now: 0.0,
            next_label: 0,
            queued: Vec::new(),
            running: Vec::new(),
            weights: BTreeMap::new(),
            decided: None,
        }
    }

    /// Give each shadow the workers its level's fair scheduler now has.
    fn sync(&mut self) {
        for (sh, v) in self.shadows.iter_mut().zip(self.s.levels()) {
            let want = v.current.max(1);
            if want != sh.workers {
                sh.s.set_workers(want).unwrap();
                sh.workers = want;
            }
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Enqueue {
                tenant,
                level,
                flow,
                cost,
            } => self.enqueue(tenant, level, flow, cost),
            Op::Dequeue => self.dequeue(),
            Op::Complete { pick } => self.complete(pick),
            Op::Cancel { pick } => self.cancel(pick),
            Op::Advance { dt } => {
                self.now += f64::from(dt);
                Ok(())
            }
            Op::Workers { delta } => self.workers(delta),
            Op::Reload { seed } => self.reload(seed),
            Op::Weight { tenant, w } => {
                let (t, w) = (u64::from(tenant), f64::from(w));
                self.s.set_weight(TenantId(t), w, self.now).unwrap();
                self.weights.insert(t, w);
                for sh in &mut self.shadows {
                    let ids: Vec<u64> = sh
                        .flows
                        .iter()
                        .filter(|(k, _)| k.0 == t)
                        .map(|(_, &v)| v)
                        .collect();
                    for id in ids {
                        sh.s.set_weight(TenantId(id), w, self.now).unwrap();
                    }
                }
                Ok(())
            }
        }
    }

    fn enqueue(&mut self, tenant: u8, level: u8, flow: u8, cost: u8) -> Result<(), TestCaseError> {
        let n = self.shadows.len();
        let i = usize::from(level) % (n + 1);
        let (id, i) = if i == n {
            (LevelId::CATCH_ALL, n - 1)
        } else {
            (LevelId(i as u32), i)
        };
        let (t, d, c) = (u64::from(tenant), u64::from(flow), f64::from(cost));
        let label = self.next_label;
        self.next_label += 1;
        let r = Request::new(t, 0u32, label)
            .with_cost(c)
            .at_level(id)
            .distinguished(d);
        let ticket = self.s.enqueue(r, self.now).unwrap();
        let sh = &mut self.shadows[i];
        let f = sh.flow(t, d, &self.weights, self.now);
        let st =
            sh.s.enqueue(Request::new(f, 0u32, label).with_cost(c), self.now)
                .unwrap();
        sh.tickets.insert(label, st);
        self.queued.push((ticket, i, label, t));
        Ok(())
    }

    fn dequeue(&mut self) -> Result<(), TestCaseError> {
        let Some(w) = self.free.iter().position(|&f| f) else {
            return Ok(());
        };
        let d = self.s.dequeue(w, self.now).unwrap();
        self.sync();
        let views = self.s.levels();
        let mut before: Vec<LevelView<'_>> = views.clone();
        if let Decision::Run(d) = &d {
            let l = &mut before[d.request.level.0 as usize];
            l.seats_in_use -= 1;
            l.queued += 1;
        }
        let want = expected(&before, self.sharing, self.server);
        self.decided = Some(match &d {
            Decision::Run(d) => Some(d.request.level.0 as usize),
            _ => None,
        });
        let Decision::Run(d) = d else {
            prop_assert_eq!(want, None, "nothing ran; views {:?}", views);
            // Queued work held back: ask again at the next adjustment (borrowing) or after
            // a completion (strict bands), never "empty", never now.
            match (d, self.sharing) {
                (Decision::Empty, _) => prop_assert_eq!(self.s.queued(), 0),
                (Decision::RetryAt(t), Sharing::Borrowing { .. }) => {
                    prop_assert!(t > self.now && self.s.queued() > 0, "retry at {t}")
                }
                (Decision::RetryAt(t), Sharing::Strict) => prop_assert_eq!(t, f64::INFINITY),
                (Decision::Run(_), _) => unreachable!(),
            }
            return Ok(());
        };
        let i = d.request.level.0 as usize;
        prop_assert_eq!(want, Some(i), "level {} ran; views {:?}", i, views);
        let v = &views[i];
        if !v.exempt {
            prop_assert!(
                v.seats_in_use <= v.current && v.seats_in_use <= v.max,
                "{v:?}"
            );
            let used: usize = non_exempt(&views).map(|l| l.seats_in_use).sum();
            prop_assert!(
                used <= self.server,
                "non-exempt seats {used} > {}",
                self.server
            );
        }
        // Inside the level, the flat scheduler's choice on the same seat.
        let label = d.request.payload;
        let sh = &mut self.shadows[i];
        let below = sh.workers;
        // An exempt level's seats are the executor's workers.
        let seat = if v.exempt {
            w
        } else {
            (0..below)
                .find(|&s| !sh.seats.get(s).copied().unwrap_or(false))
                .unwrap()
        };
        if sh.seats.len() <= seat {
            sh.seats.resize(seat + 1, false);
        }
        sh.seats[seat] = true;
        let sd = sh.s.dequeue(seat, self.now).unwrap().run();
        let sd = sd.ok_or_else(|| TestCaseError::fail("the flat scheduler ran nothing"))?;
        prop_assert_eq!(sd.request.payload, label, "level {} seat {}", i, seat);
        prop_assert_eq!(sd.charged, d.charged);
        let pos = self.queued.iter().position(|q| q.2 == label).unwrap();
        let (_, _, _, tenant) = self.queued.remove(pos);
        prop_assert_eq!(d.request.tenant, TenantId(tenant));
        self.free[w] = false;
        let cost = d.request.cost.unwrap();
        self.running.push(Running {
            ticket: d.ticket,
            worker: w,
            level: i,
            label,
            seat,
            cost,
        });
        Ok(())
    }

    fn complete(&mut self, pick: u16) -> Result<(), TestCaseError> {
        if self.running.is_empty() {
            return Ok(());
        }
        let r = self.running.remove(usize::from(pick) % self.running.len());
        self.s.complete(r.ticket, r.cost, self.now).unwrap();
        let sh = &mut self.shadows[r.level];
        let st = sh.tickets.remove(&r.label).unwrap();
        sh.s.complete(st, r.cost, self.now).unwrap();
        if let Some(s) = sh.seats.get_mut(r.seat) {
            *s = false;
        }
        if r.worker < self.server {
            self.free[r.worker] = true;
        }
        Ok(())
    }

    fn cancel(&mut self, pick: u16) -> Result<(), TestCaseError> {
        if self.queued.is_empty() {
            return Ok(());
        }
        let (ticket, i, label, tenant) = self.queued.remove(usize::from(pick) % self.queued.len());
        let r = self.s.cancel(ticket, self.now).unwrap();
        prop_assert_eq!(
            (r.payload, r.tenant, r.level),
            (label, TenantId(tenant), LevelId(i as u32))
        );
        let sh = &mut self.shadows[i];
        let st = sh.tickets.remove(&label).unwrap();
        prop_assert_eq!(sh.s.cancel(st, self.now).unwrap().payload, label);
        Ok(())
    }

    /// New shares, percentages and borrowing limits for the same levels (the same fair
    /// schedulers): accepted, nothing queued or running lost.
    fn reload(&mut self, seed: u64) -> Result<(), TestCaseError> {
        let mut x = seed;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for l in &mut self.spec.levels {
            l.0 = 1 + next(19) as u8;
            l.1 = next(101) as u8;
            l.2 = (next(3) > 0).then(|| next(101) as u8);
        }
        let mut config = self.spec.config();
        config.scheduler = config.scheduler.workers(self.server);
        let (queued, running) = (self.s.queued(), self.s.running());
        self.s.set_levels(&config).unwrap();
        prop_assert_eq!((self.s.queued(), self.s.running()), (queued, running));
        self.sync();
        Ok(())
    }

    fn workers(&mut self, delta: i8) -> Result<(), TestCaseError> {
        let n = (self.server as i64 + i64::from(delta)).max(1) as usize;
        let levels = non_exempt(&self.s.levels()).count();
        let r = self.s.set_workers(n);
        if n < levels {
            prop_assert!(r.is_err(), "{n} workers for {levels} levels accepted");
            prop_assert_eq!(self.s.workers(), self.server);
            return Ok(());
        }
        r.unwrap();
        self.server = n;
        // An executor retires busy workers beyond the new count as they finish.
        self.free.resize(n, true);
        for r in &self.running {
            if r.worker < n {
                self.free[r.worker] = false;
            }
        }
        self.sync();
        Ok(())
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let v = self.s.levels();
        let nominal: usize = non_exempt(&v).map(|l| l.nominal).sum();
        prop_assert_eq!(nominal, self.server);
        let current: usize = non_exempt(&v).map(|l| l.current).sum();
        for l in non_exempt(&v) {
            prop_assert!(l.nominal >= 1, "{l:?}");
            prop_assert!(
                l.current >= l.min && l.min + l.lendable == l.nominal,
                "{l:?}"
            );
            prop_assert!(
                l.current <= l.max && l.max <= (l.nominal + l.borrowing_limit).max(l.nominal)
            );
            prop_assert!(l.lent() <= l.lendable, "{l:?}");
            if let Sharing::Borrowing { .. } = self.sharing {
                let hwm = l.demand.high_watermark as usize;
                prop_assert!(l.current >= l.min.max(l.nominal.min(hwm)), "{l:?}");
            }
        }
        if matches!(self.sharing, Sharing::Borrowing { .. }) {
            prop_assert_eq!(current, self.server, "{:?}", v);
        }
        let queued: usize = v.iter().map(|l| l.queued).sum();
        let running: usize = v.iter().map(|l| l.seats_in_use).sum();
        prop_assert_eq!((queued, running), (self.s.queued(), self.s.running()));
        prop_assert_eq!((queued, running), (self.queued.len(), self.running.len()));
        for t in 0..6u64 {
            let want = self.queued.iter().filter(|q| q.3 == t).count();
            let got = self.s.tenant(TenantId(t)).map_or(0, |v| v.queued);
            prop_assert_eq!(got, want, "tenant {}", t);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    ))]

    #[test]
    fn levels_keep_their_invariants_and_match_the_models(
        spec in spec(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut h = Harness::new(&spec);
        h.check()?;
        for op in &ops {
            h.decided = None;
            h.apply(op)?;
            h.check()?;
            h.check_after_dispatch_decision()?;
        }
    }
}

impl Harness {
    /// With early reclaim, a dispatch decision leaves no lender short: no level (other than
    /// the one just served) has requests queued, holds its current limit and has a limit
    /// below its nominal part. The scheduler adjusted first, raising it to at least
    /// `min(demand, nominal)`, and it runs as the borrowers' requests finish.
    fn check_after_dispatch_decision(&self) -> Result<(), TestCaseError> {
        let (
            Some(served),
            Sharing::Borrowing {
                early_reclaim: true,
                ..
            },
        ) = (self.decided, self.sharing)
        else {
            return Ok(());
        };
        for l in non_exempt(&self.s.levels()) {
            let short = l.queued > 0 && l.seats_in_use >= l.current && l.current < l.nominal;
            prop_assert!(
                !short || served == Some(l.id.0 as usize),
                "level {} left short after a decision: {l:?}",
                l.name
            );
        }
        Ok(())
    }
}

/// Without levels, a `LevelsConfig` builds the flat scheduler itself.
#[test]
fn no_levels_is_the_flat_scheduler() {
    for preset in PRESETS {
        let flat = Config::preset(preset).unwrap().workers(3);
        let mut a = LevelsConfig::new(flat).build::<u32>().unwrap();
        let mut b = flat.build::<u32>().unwrap();
        assert_eq!(a.name(), b.name());
        assert!(a.levels().is_empty());
        for i in 0..12u32 {
            let r = || Request::new(u64::from(i % 3), 0u32, i).with_cost(f64::from(1 + i % 4));
            a.enqueue(r().at_level(LevelId(7)), 0.0).unwrap(); // ignored without levels
            b.enqueue(r(), 0.0).unwrap();
        }
        for w in 0..3 {
            let (x, y) = (
                a.dequeue(w, 1.0).unwrap().run(),
                b.dequeue(w, 1.0).unwrap().run(),
            );
            assert_eq!(x.map(|d| d.request.payload), y.map(|d| d.request.payload));
        }
    }
}

fn reload_base() -> LevelsConfig {
    LevelsConfig::new(Config::preset("wfq").unwrap().workers(4))
        .level(LevelConfig::new("high", 1.0))
        .level(LevelConfig::new("batch", 1.0))
        .level(LevelConfig::new("catch-all", 2.0))
}

/// A reload keeps every request and every level's id; a new level gets the next id; an idle
/// level left out is retired (gone from the views, refused by id), and comes back under its
/// old id when named again.
#[test]
fn a_reload_keeps_requests_and_ids() {
    let mut s = reload_base().build::<u32>().unwrap();
    for i in 0..6u32 {
        let level = LevelId(i % 3);
        s.enqueue(
            Request::new(u64::from(i), 0u32, i)
                .with_cost(1.0)
                .at_level(level),
            0.0,
        )
        .unwrap();
    }
    let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
    // New shares and a new level: all six requests stay.
    let mut c = reload_base().level(LevelConfig::new("new", 4.0));
    c.levels[0].shares = 3.0;
    s.set_levels(&c).unwrap();
    assert_eq!((s.queued(), s.running()), (5, 1));
    let v = s.levels();
    let names: Vec<(u32, &str, usize)> = v.iter().map(|l| (l.id.0, l.name, l.nominal)).collect();
    assert_eq!(
        names,
        [
            (0, "high", 1),
            (1, "batch", 1),
            (2, "catch-all", 1),
            (3, "new", 1)
        ]
    );
    s.complete(d.ticket, 1.0, 1.0).unwrap(); // a ticket from before the reload
                                             // Leave "batch" out while it has requests: refused, nothing changed.
    let without_batch = |c: &LevelsConfig| {
        let mut c = c.clone();
        c.levels.retain(|l| l.name != "batch");
        c
    };
    let e = s.set_levels(&without_batch(&c)).unwrap_err();
    assert!(e.to_string().contains("\"batch\" still has"), "{e}");
    assert_eq!(s.levels().len(), 4);
    // Drain it, then retire it.
    let mut left = Vec::new();
    for w in 0..4 {
        if let Some(d) = s.dequeue(w, 1.0).unwrap().run() {
            left.push(d);
        }
    }
    while let Some(d) = left.pop() {
        s.complete(d.ticket, 1.0, 2.0).unwrap();
        if let Some(d) = s.dequeue(0, 2.0).unwrap().run() {
            left.push(d);
        }
    }
    assert_eq!(s.queued() + s.running(), 0);
    s.set_levels(&without_batch(&c)).unwrap();
    assert!(s.levels().iter().all(|l| l.name != "batch"));
    let r = Request::new(1u64, 0u32, 9)
        .with_cost(1.0)
        .at_level(LevelId(1));
    assert_eq!(
        s.enqueue(r, 3.0).unwrap_err(),
        Error::UnknownLevel(LevelId(1))
    );
    // Named again (even with another fair scheduler, as it is idle): back as level 1.
    let mut again = c.clone();
    again.levels[1].scheduler = Some(Config::preset("fifo").unwrap());
    s.set_levels(&again).unwrap();
    let v = s.levels();
    let batch = v.iter().find(|l| l.name == "batch").unwrap();
    assert_eq!((batch.id, batch.scheduler), (LevelId(1), "fifo"));
}

/// A reload may not change a level's fair scheduler or exemption while it exists (they
/// change at restart), nor add levels that do not fit ServerCL; a scheduler without levels
/// refuses levels. Each refusal changes nothing.
#[test]
fn a_reload_refuses_what_changes_at_restart() {
    let mut s = reload_base().build::<u32>().unwrap();
    let mut c = reload_base();
    c.levels[1].scheduler = Some(Config::preset("drr").unwrap());
    let e = s.set_levels(&c).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidLevel(l) if l.index == 1 && l.field == "scheduler"),
        "{e}"
    );
    assert!(e.to_string().contains("changes at restart"), "{e}");
    let c = reload_base().level(LevelConfig::exempt("high"));
    assert!(s.set_levels(&c).is_err()); // a duplicate name
    let mut c = reload_base();
    c.levels[0] = LevelConfig::exempt("high");
    let e = s.set_levels(&c).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidLevel(l) if l.field == "exempt"),
        "{e}"
    );
    let c = (0..3).fold(reload_base(), |c, i| {
        c.level(LevelConfig::new(format!("x{i}"), 1.0))
    });
    let e = s.set_levels(&c).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidConfig {
                field: "workers",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(s.levels().len(), 3);
    let mut flat = Config::preset("wfq").unwrap().build::<u32>().unwrap();
    let e = flat.set_levels(&reload_base()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidConfig {
                field: "levels",
                ..
            }
        ),
        "{e}"
    );
}
