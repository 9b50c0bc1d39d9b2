//! The `[cluster]` allocation as pure code, no sockets: several [`Member`]s (the instances'
//! sync logic, unchanged) exchange through a model of the Redis script ([`settle`], which
//! `tests/cluster.rs` holds the real script to), and each instance's scheduler is modelled as
//! weighted water-filling of its seats over its tenants' demand (the fluid limit of SFQ).
//!
//! Random placements: 2–4 instances, 3–8 tenants, weights 0.5–8, backlogged tenants (closed
//! loops of 1–32 clients per instance, spread unevenly over a random set of instances) and
//! light ones (a random occupancy below their fair share, at one or two instances), a global D
//! of 16–48. Every instance serves at least one backlogged tenant (an instance with nothing to
//! do still holds one seat: that bound is in docs/proxy.md and the unit tests). Checked:
//!
//! * after 15 s of syncs (100 ms each), each backlogged tenant's global share averaged over
//!   the next 10 s is within ±5 % of weighted water-filling of D over the mean demands;
//! * at every sync, the requests the instances can have at the upstream sum to at most D;
//! * through a Redis outage and restart (empty), the same bound holds, and 10 s after the
//!   restart the shares averaged over the next 5 s are within ±10 %.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fairlane_proxy::cluster::{settle, water_fill, Local, Member, Outgoing, Peer, Reply, Report};
use proptest::prelude::*;

const SYNC: Duration = Duration::from_millis(100);
const LEASE: Duration = Duration::from_millis(500);
/// A tenant is backlogged when its demand is at least this many times its fair share (a
/// closed loop with clients to spare, so a queue); the shares of these are checked.
const BACKLOGGED: f64 = 1.5;
/// Demand samples per sync, as the sync task takes them.
const SAMPLES: usize = 8;

/// One tenant of a scenario.
#[derive(Clone, Debug)]
struct Tenant {
    weight: f64,
    /// Per instance: closed-loop clients (backlogged) or mean occupancy (light, < 1).
    at: BTreeMap<usize, f64>,
    light: bool,
}

#[derive(Clone, Debug)]
struct Scenario {
    instances: usize,
    depth: usize,
    tenants: Vec<Tenant>,
    seed: u64,
}

impl Scenario {
    fn name(t: usize) -> String {
        format!("t{t}")
    }

    /// Weighted water-filling of D over the tenants' mean demands.
    fn reference(&self) -> Vec<f64> {
        let pairs: Vec<(f64, f64)> = self
            .tenants
            .iter()
            .map(|t| (t.weight, t.at.values().sum()))
            .collect();
        water_fill(self.depth as f64, &pairs).0
    }
}

impl Scenario {
    /// Whether the instances can each be given at least one seat of fair work: for every set
    /// S of instances, the tenants can bring at least |S| seats to S (each backlogged tenant
    /// its fair share at most, and no more than its demand there; a light tenant its demand
    /// there). Otherwise some instance holds a seat no fair share fills (a gate has at least
    /// one), a bound of its own (docs/proxy.md; `alloc`'s unit tests).
    fn every_instance_has_a_seat_of_work(&self) -> bool {
        let g = self.reference();
        (1u32..1 << self.instances).all(|set| {
            let within = |i: &usize| set & (1 << i) != 0;
            let most: f64 = self
                .tenants
                .iter()
                .zip(&g)
                .map(|(t, g)| {
                    let here: f64 = t.at.iter().filter(|(i, _)| within(i)).map(|(_, d)| d).sum();
                    if t.light {
                        here
                    } else {
                        here.min(*g)
                    }
                })
                .sum();
            most >= f64::from(set.count_ones())
        })
    }
}

/// Random placements as the module doc says. Light tenants' occupancies are set from their
/// fair share so that they are light (10–70 % of it, at most 0.9 per instance).
fn scenario() -> impl Strategy<Value = Scenario> {
    (2usize..=4, 3usize..=8, 16usize..=48, any::<u64>()).prop_flat_map(|(n, m, depth, seed)| {
        let tenant = (
            0.5f64..=8.0,
            prop::bool::weighted(0.35),
            prop::collection::vec((0..n, 1u32..=32), 1..=n),
            0.1f64..0.7,
        );
        prop::collection::vec(tenant, m).prop_map(move |ts| build(n, depth, seed, ts))
    })
}

/// One tenant as drawn: weight, light, (instance, clients) pairs, light fraction of its share.
type Drawn = (f64, bool, Vec<(usize, u32)>, f64);

fn build(n: usize, depth: usize, seed: u64, ts: Vec<Drawn>) -> Scenario {
    let mut tenants: Vec<Tenant> = ts
        .iter()
        .map(|(w, light, at, _)| Tenant {
            weight: *w,
            light: *light,
            at: at
                .iter()
                .take(if *light { 2 } else { n })
                .map(|&(i, c)| (i, f64::from(c)))
                .collect(),
        })
        .collect();
    // Every instance serves a backlogged tenant.
    for i in 0..n {
        if !tenants.iter().any(|t| !t.light && t.at.contains_key(&i)) {
            let t = i % tenants.len();
            tenants[t].light = false;
            tenants[t].at.insert(i, 4.0 + i as f64);
        }
    }
    let mut s = Scenario {
        instances: n,
        depth,
        tenants,
        seed,
    };
    // Light tenants: a fraction of the share they would have if backlogged.
    for t in s.tenants.iter_mut().filter(|t| t.light) {
        for v in t.at.values_mut() {
            *v = 1e6;
        }
    }
    let backlogged = s.reference();
    for ((t, (_, _, _, frac)), share) in s.tenants.iter_mut().zip(&ts).zip(backlogged) {
        if t.light {
            let per = (frac * share / t.at.len() as f64).min(0.9);
            for v in t.at.values_mut() {
                *v = per;
            }
        }
    }
    s
}

/// The light tenants' occupancy draws, from the scenario's seed.
struct Rng(proptest::test_runner::TestRng);

impl Rng {
    fn new(seed: u64) -> Rng {
        let algorithm = proptest::test_runner::RngAlgorithm::ChaCha;
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Rng(proptest::test_runner::TestRng::from_seed(algorithm, &bytes))
    }

    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        use proptest::prelude::RngExt;
        self.0.random::<f64>()
    }
}

/// The model of Redis: the live members' reports and claims, as the script keeps them.
#[derive(Default)]
struct Store {
    /// id → (report, claim, expires).
    members: BTreeMap<String, (Report, usize, Instant)>,
    up: bool,
}

impl Store {
    fn exchange(&mut self, out: &Outgoing, depth: usize, now: Instant) -> Option<Reply> {
        if !self.up {
            return None;
        }
        self.members.retain(|_, m| m.2 > now);
        let me = out.report.id.clone();
        let present: Vec<(String, usize)> = self
            .members
            .iter()
            .map(|(id, (_, c, _))| (id.clone(), *c))
            .collect();
        let previous = self.members.get(&me).map(|m| m.0.seq);
        let grant = settle(&me, depth, out, previous, &present);
        self.members
            .insert(me, (out.report.clone(), grant, now + LEASE));
        let peers = self
            .members
            .values()
            .map(|(report, claim, _)| Peer {
                report: report.clone(),
                claim: *claim,
            })
            .collect();
        Some(Reply {
            grant,
            previous,
            peers,
        })
    }
}

/// One instance: its sync logic and the model of its gate.
struct Instance {
    member: Member,
    /// The sample tick (0..SAMPLES) of its regular sync: its timer's phase.
    phase: usize,
    /// Sample ticks since its last sync.
    since: usize,
    seats: usize,
    weights: BTreeMap<String, f64>,
    /// Requests in flight (the last tick's, still draining after a shrink).
    holding: f64,
    completed: BTreeMap<String, u64>,
}

impl Instance {
    fn local(&self, i: usize, tenants: &[Tenant]) -> Local {
        Local {
            seats: self.seats,
            holding: (self.holding - 1e-6).ceil().max(0.0) as usize,
            tenants: tenants
                .iter()
                .enumerate()
                .filter(|(_, t)| t.at.contains_key(&i))
                .map(|(t, ten)| {
                    let name = Scenario::name(t);
                    let done = self.completed.get(&name).copied().unwrap_or(0);
                    (name, ten.weight, done)
                })
                .collect(),
        }
    }

    /// One exchange through `store` at `now`, applied as the sync task applies it.
    fn sync(
        &mut self,
        local: &Local,
        store: &mut Store,
        depth: usize,
        now: Instant,
        regular: bool,
    ) {
        let out = self.member.outgoing(local, regular);
        match store.exchange(&out, depth, now) {
            Some(reply) => {
                let plan = self.member.absorb(reply, self.seats, now, regular);
                self.seats = plan.seats;
                self.weights = local
                    .tenants
                    .iter()
                    .map(|(name, phi, _)| {
                        let w = plan.weights.get(name).copied().unwrap_or(*phi);
                        (name.clone(), w)
                    })
                    .collect();
            }
            None => {
                self.member.failed();
                // Fallback: configured weights, seats kept.
                self.weights = local
                    .tenants
                    .iter()
                    .map(|(n, w, _)| (n.clone(), *w))
                    .collect();
            }
        }
    }
}

/// The run: per sync interval, what each tenant got (seats over the interval), and checks of
/// the bound at every sample tick.
struct Run {
    s: Scenario,
    store: Store,
    instances: Vec<Instance>,
    rng: Rng,
    now: Instant,
    /// Changes of an instance's seats so far.
    moves: usize,
}

impl Run {
    fn new(s: Scenario) -> Run {
        let mut rng = Rng::new(s.seed);
        let instances = (0..s.instances)
            .map(|i| Instance {
                member: Member::new(&format!("p{i}"), s.depth, LEASE),
                phase: (rng.next() * SAMPLES as f64) as usize,
                since: 0,
                seats: s.depth / s.instances,
                weights: BTreeMap::new(),
                holding: 0.0,
                completed: BTreeMap::new(),
            })
            .collect();
        Run {
            rng,
            store: Store {
                up: true,
                ..Store::default()
            },
            instances,
            now: Instant::now(),
            moves: 0,
            s,
        }
    }

    /// One sync interval of `SAMPLES` ticks. At each tick every instance samples its demand,
    /// syncs if its phase says so (or early, as the sync task would), then serves the tick.
    /// Returns each tenant's seats used, averaged over the interval.
    fn step(&mut self) -> Vec<f64> {
        let tenants = self.s.tenants.clone();
        let mut used = vec![0.0; tenants.len()];
        for tick in 0..SAMPLES {
            let now = self.now + SYNC * tick as u32 / SAMPLES as u32;
            // The tenants' demand this tick: a light tenant has a request in flight or not.
            let mut demand: BTreeMap<(usize, usize), usize> = BTreeMap::new();
            for (t, ten) in tenants.iter().enumerate() {
                for (&i, &v) in &ten.at {
                    let d = if ten.light {
                        usize::from(self.rng.next() < v)
                    } else {
                        v as usize
                    };
                    demand.insert((t, i), d);
                }
            }
            for (i, inst) in self.instances.iter_mut().enumerate() {
                inst.since += 1;
                let regular = tick == inst.phase;
                let holding = (inst.holding - 1e-6).ceil().max(0.0) as usize;
                if regular || (inst.since >= 2 && inst.member.early(inst.seats, holding)) {
                    inst.since = 0;
                    let local = inst.local(i, &tenants);
                    let before = inst.seats;
                    inst.sync(&local, &mut self.store, self.s.depth, now, regular);
                    self.moves += usize::from(inst.seats != before);
                }
            }
            let served = self.serve(&demand);
            // What the gate shows at the end of the tick: waiting + in flight, in flight.
            for (i, inst) in self.instances.iter_mut().enumerate() {
                let counts: Vec<(String, f64, f64)> = demand
                    .iter()
                    .filter(|((_, j), _)| *j == i)
                    .map(|(&(t, _), &d)| (Scenario::name(t), d as f64, served[&(t, i)]))
                    .collect();
                let seats = inst.seats;
                inst.member
                    .sample(counts.iter().map(|(n, o, r)| (n.as_str(), *o, *r)), seats);
            }
            for ((t, _), u) in served {
                used[t] += u / SAMPLES as f64;
            }
        }
        self.now += SYNC;
        used
    }

    /// One tick: each instance's scheduler as weighted water-filling of its seats over its
    /// tenants' demand; the bound checked. Returns each (tenant, instance)'s seats used.
    fn serve(&mut self, demand: &BTreeMap<(usize, usize), usize>) -> BTreeMap<(usize, usize), f64> {
        let mut used = BTreeMap::new();
        let mut outstanding = 0.0;
        for (i, inst) in self.instances.iter_mut().enumerate() {
            let here: Vec<(usize, f64, f64)> = demand
                .iter()
                .filter(|((_, j), _)| *j == i)
                .map(|((t, _), &d)| {
                    let w = inst.weights.get(&Scenario::name(*t)).copied();
                    (*t, w.unwrap_or(1.0), d as f64)
                })
                .collect();
            let pairs: Vec<(f64, f64)> = here.iter().map(|&(_, w, d)| (w, d)).collect();
            let (got, _) = water_fill(inst.seats as f64, &pairs);
            let total: f64 = got.iter().sum();
            // In flight during the tick: after a shrink, the last tick's requests drain
            // during this one (never above the claim, see `member`).
            outstanding += total.max(inst.holding);
            inst.holding = total;
            for (&(t, _, _), g) in here.iter().zip(got) {
                used.insert((t, i), g);
                *inst.completed.entry(Scenario::name(t)).or_default() += g.round() as u64;
            }
        }
        assert!(
            outstanding <= self.s.depth as f64 + 1e-6,
            "{outstanding} outstanding against D = {}",
            self.s.depth
        );
        used
    }

    /// Mean seats used per tenant over `n` syncs.
    fn average(&mut self, n: usize) -> Vec<f64> {
        let mut sum = vec![0.0; self.s.tenants.len()];
        for _ in 0..n {
            for (s, u) in sum.iter_mut().zip(self.step()) {
                *s += u;
            }
        }
        sum.iter().map(|s| s / n as f64).collect()
    }
}

/// The worst relative error of a backlogged tenant's share against the reference.
fn worst(s: &Scenario, got: &[f64]) -> (f64, usize) {
    let want = s.reference();
    let mut worst = (0.0, 0);
    for (t, ten) in s.tenants.iter().enumerate() {
        let demand: f64 = ten.at.values().sum();
        if demand >= BACKLOGGED * want[t] {
            let e = (got[t] - want[t]).abs() / want[t];
            if e > worst.0 {
                worst = (e, t);
            }
        }
    }
    worst
}

proptest! {
    // A fixed seed: the same 64 placements every run (the survey below draws 1,500).
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(35),
        ..ProptestConfig::default()
    })]

    #[test]
    fn shares_follow_weighted_water_filling(s in scenario()) {
        prop_assume!(s.every_instance_has_a_seat_of_work());
        let mut run = Run::new(s.clone());
        run.average(150);
        let got = run.average(100);
        let (e, t) = worst(&s, &got);
        prop_assert!(
            e <= 0.05,
            "tenant {t}: {:.3} seats against {:.3} ({:.1} %); got {got:.3?}, want {:.3?}; {s:?}",
            got[t], s.reference()[t], e * 100.0, s.reference()
        );
    }

    #[test]
    fn a_redis_restart_keeps_the_bound_and_the_shares_recover(s in scenario(), down in 1usize..=30) {
        prop_assume!(s.every_instance_has_a_seat_of_work());
        let mut run = Run::new(s.clone());
        run.average(100);
        run.store.up = false;
        run.average(down);
        run.store = Store { up: true, ..Store::default() };
        run.average(100);
        let got = run.average(50);
        let (e, t) = worst(&s, &got);
        prop_assert!(e <= 0.10, "tenant {t}: {:.1} % after the restart; {s:?}", e * 100.0);
    }
}

#[test]
#[ignore]
fn survey() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = scenario();
    let mut errs = Vec::new();
    let (mut bad, mut skipped) = (0, 0);
    // Seat changes per instance over the 10 s window.
    let mut moves = Vec::new();
    let cases: usize = std::env::var("SURVEY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    for _ in 0..cases {
        let s = strat.new_tree(&mut runner).unwrap().current();
        if !s.every_instance_has_a_seat_of_work() {
            skipped += 1;
            continue;
        }
        let mut run = Run::new(s.clone());
        run.average(150);
        let before = run.moves;
        let got = run.average(100);
        moves.push((run.moves - before) as f64 / s.instances as f64);
        let (e, _) = worst(&s, &got);
        if e > 0.05 {
            bad += 1;
            let (_, t) = worst(&s, &got);
            eprintln!(
                "{e:.3} t{t} share {:.3} got {:.3} {got:.3?}\n{s:?}",
                s.reference()[t],
                got[t]
            );
        }
        errs.push(e);
    }
    errs.sort_by(f64::total_cmp);
    moves.sort_by(f64::total_cmp);
    let q = |v: &[f64], p: f64| v[((v.len() - 1) as f64 * p) as usize];
    eprintln!(
        "n {} (and {skipped} with an instance short of a seat of work) bad {bad} median {:.4} \
         p90 {:.4} p99 {:.4} max {:.4}; seat changes per instance in 10 s: median {:.1} p90 \
         {:.1} max {:.1}",
        errs.len(),
        q(&errs, 0.5),
        q(&errs, 0.9),
        q(&errs, 0.99),
        q(&errs, 1.0),
        q(&moves, 0.5),
        q(&moves, 0.9),
        q(&moves, 1.0),
    );
}
