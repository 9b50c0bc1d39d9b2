//! One instance's side of the sync, as pure code (the sync task in `mod.rs` feeds it the
//! gate's counts and Redis's answers; the simulation test feeds it a model of both).
//!
//! **Seats are claimed, not assumed.** Each exchange writes, next to the report, the seats
//! the instance may occupy until its next exchange: its *claim*. Growing is decided inside the
//! exchange, atomically on the Redis server ([`settle`] is its specification): an instance
//! may raise its claim to what its allocation wants only as far as D minus every other
//! instance's claim. A shrinking instance lowers its seats at once but keeps its claim until
//! its next exchange, by which time its surplus requests have finished. So the claims always
//! sum to at most D, and the upstream never sees more than D from the instances, whatever
//! order the exchanges come in and however stale one instance's view is.
//!
//! **Redis forgetting.** After a Redis restart (or a failover to a replica that missed the
//! last writes) the other instances' claims are gone, and an instance that grew into them
//! would overshoot D. So an instance *rejoins*: after a failed exchange, or when Redis no
//! longer has its own last report (the exchange itself refuses to grow it then), it asks for
//! no more than it holds until every instance it knew has reported again (a newer report than
//! the last it saw) or a lease has passed without one. Once all have, every claim is back in
//! Redis and growing is safe again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fairlane_core::{MAX_WEIGHT, MIN_WEIGHT};

use super::alloc::{allocate, Allocation, Report, TenantReport, PAYBACK};

/// Weight of the last interval in the smoothed demand (the rest is the previous value).
pub const SMOOTH: f64 = 0.5;
/// The largest credit (seat-syncs owed or ahead) an instance carries.
pub const MAX_CREDIT: f64 = 16.0;

/// A tenant's requests waiting or in flight, averaged over samples within an interval and
/// smoothed across intervals: its measured demand. It follows what the tenant uses, without
/// a peak hold (a held peak reserved seats a light tenant left idle). Its requests in flight
/// alone, averaged over the interval, are its usage: the seats it had.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    /// Per tenant: sums of (waiting + in flight, in flight) over the interval's samples.
    sum: BTreeMap<String, (f64, f64)>,
    samples: u32,
    smoothed: BTreeMap<String, f64>,
    usage: BTreeMap<String, f64>,
}

impl Meter {
    /// One sample: every tenant's waiting + in-flight count and in-flight count now.
    pub fn sample<'a>(&mut self, counts: impl IntoIterator<Item = (&'a str, f64, f64)>) {
        for (name, outstanding, running) in counts {
            let s = self.sum.entry(name.to_string()).or_default();
            s.0 += outstanding;
            s.1 += running;
        }
        self.samples += 1;
    }

    /// End the interval: fold its average into the smoothed demand and return that.
    pub fn close(&mut self) -> &BTreeMap<String, f64> {
        let n = f64::from(self.samples.max(1));
        let sum = std::mem::take(&mut self.sum);
        let first = self.smoothed.is_empty();
        for name in sum.keys() {
            self.smoothed.entry(name.clone()).or_default();
        }
        for (name, d) in self.smoothed.iter_mut() {
            let now = sum.get(name).map_or(0.0, |s| s.0) / n;
            *d = if first {
                now
            } else {
                SMOOTH * now + (1.0 - SMOOTH) * *d
            };
        }
        self.usage = sum.iter().map(|(k, s)| (k.clone(), s.1 / n)).collect();
        // A tenant gone from this instance (a reload) fades out.
        self.smoothed
            .retain(|name, d| sum.contains_key(name) || *d >= 0.01);
        self.samples = 0;
        &self.smoothed
    }

    /// The seats each tenant had over the interval last closed (its mean requests in flight).
    pub fn usage(&self) -> &BTreeMap<String, f64> {
        &self.usage
    }
}

/// What the instance knows of itself when it reports.
#[derive(Clone, Debug, Default)]
pub struct Local {
    /// Its seats (the gate's depth) now.
    pub seats: usize,
    /// Requests in flight now.
    pub holding: usize,
    /// Per tenant: name, configured φ, requests completed so far.
    pub tenants: Vec<(String, f64, u64)>,
}

/// What one exchange sends.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// The report to publish.
    pub report: Report,
    /// Seats it may occupy now without asking: max(seats, in flight).
    pub held: usize,
    /// Seats it asks for (≥ `held`): its allocation's target, or `held` while rejoining.
    pub want: usize,
    /// The seq of its last report Redis took (`None`: none yet): growing is refused when
    /// Redis has another.
    pub expect: Option<u64>,
}

/// Another instance (or this one) in an exchange's answer.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its report.
    pub report: Report,
    /// The claim the exchange counted for it.
    pub claim: usize,
}

/// What one exchange answers.
#[derive(Clone, Debug)]
pub struct Reply {
    /// This instance's claim now (≥ `held`; above it only by a grant within D).
    pub grant: usize,
    /// The seq Redis had for this instance before this exchange (`None`: nothing).
    pub previous: Option<u64>,
    /// Every live instance, this one included.
    pub peers: Vec<Peer>,
}

/// The seats granted by an exchange: `out.want` as far as `depth` minus the other instances'
/// claims (`present`: id, claim) allows, never less than `out.held`; no growth when Redis's
/// seq for this instance (`previous`) is not the one it expects (Redis forgot it). This is
/// the specification of the exchange's Lua script (`store.rs`), which a test holds to it
/// against a real `redis-server`.
pub fn settle(
    me: &str,
    depth: usize,
    out: &Outgoing,
    previous: Option<u64>,
    present: &[(String, usize)],
) -> usize {
    let others = present
        .iter()
        .filter(|p| p.0 != me)
        .fold(0usize, |sum, p| sum.saturating_add(p.1));
    if out.want > out.held && previous == out.expect {
        out.held.max(out.want.min(depth.saturating_sub(others)))
    } else {
        out.held
    }
}

/// This sync's outcome for the instance.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The seats to run with now (the gate's depth).
    pub seats: usize,
    /// The weight each local tenant with a part here runs with: its part's weight, corrected
    /// by what it has been missing of its part (the others keep φ).
    pub weights: BTreeMap<String, f64>,
    /// The allocation computed from the answer.
    pub allocation: Allocation,
    /// Redis no longer had this instance's last report (restart, failover, or a lease lapsed).
    pub forgotten: bool,
}

/// One instance's sync state.
#[derive(Clone, Debug)]
pub struct Member {
    id: String,
    depth: usize,
    lease: Duration,
    seq: u64,
    /// The seq of the last report Redis took.
    written: Option<u64>,
    target: Option<usize>,
    /// Its fair seats at the last sync, and the members then.
    fair: Option<(f64, Vec<String>)>,
    credit: f64,
    meter: Meter,
    /// The seq of the last report seen from each other instance.
    seen: BTreeMap<String, u64>,
    /// While rejoining: the instances yet to report again (the seq seen before, and until
    /// when to wait).
    rejoin: Option<BTreeMap<String, (u64, Instant)>>,
    /// An exchange failed since the last success.
    lost: bool,
    /// The last interval's demand, per tenant.
    demand: BTreeMap<String, f64>,
    /// Seats summed over the interval's samples, and the samples.
    ran: (f64, u32),
    /// What the last exchange asked for.
    want: usize,
    /// The last exchange granted less than it asked for.
    refused: bool,
    /// Its claim is above the seats it runs with (it shrank).
    release: bool,
    /// Its tenants' parts here at the last sync.
    parts: BTreeMap<String, f64>,
    /// Per backlogged tenant here: seat-syncs it missed of its parts (negative: had more).
    missed: BTreeMap<String, f64>,
}

impl Member {
    /// Instance `id` of a cluster of global depth `depth`, reports living `lease`.
    pub fn new(id: &str, depth: usize, lease: Duration) -> Member {
        Member {
            id: id.to_string(),
            depth,
            lease,
            seq: 0,
            written: None,
            target: None,
            fair: None,
            credit: 0.0,
            meter: Meter::default(),
            seen: BTreeMap::new(),
            rejoin: None,
            lost: false,
            demand: BTreeMap::new(),
            ran: (0.0, 0),
            want: 0,
            refused: false,
            release: false,
            parts: BTreeMap::new(),
            missed: BTreeMap::new(),
        }
    }

    /// Start counting reports after `seq` (the sync task starts from the clock, so that a
    /// restarted instance's reports are newer than those it left in Redis).
    pub fn with_seq(mut self, seq: u64) -> Member {
        self.seq = seq;
        self
    }

    /// Record a sample of every tenant's waiting + in-flight and in-flight counts, running
    /// with `seats`.
    pub fn sample<'a>(
        &mut self,
        counts: impl IntoIterator<Item = (&'a str, f64, f64)>,
        seats: usize,
    ) {
        self.meter.sample(counts);
        self.ran.0 += seats as f64;
        self.ran.1 += 1;
    }

    /// Whether to sync before the next regular sync, running with `seats` and `holding`
    /// requests in flight: a growth was refused (the seats may be free by now), or it shrank
    /// and its surplus requests have finished (its claim can come down, so that the instance
    /// growing into those seats need not wait a whole interval). The sync task asks at most
    /// every other sample.
    pub fn early(&self, seats: usize, holding: usize) -> bool {
        self.refused || (self.release && holding <= seats)
    }

    /// Seat-syncs owed to this instance (negative: it had more than its fair seats).
    pub fn credit(&self) -> f64 {
        self.credit
    }

    /// The next exchange's message. A `regular` sync (one per interval) ends the interval's
    /// demand samples; an early one reports the last interval's demand again.
    pub fn outgoing(&mut self, local: &Local, regular: bool) -> Outgoing {
        if regular || self.demand.is_empty() {
            self.demand = self.meter.close().clone();
        }
        let demand = &self.demand;
        self.seq += 1;
        let tenants = local
            .tenants
            .iter()
            .map(|(name, weight, completed)| {
                let t = TenantReport {
                    weight: *weight,
                    demand: demand.get(name).copied().unwrap_or(0.0),
                    completed: *completed,
                };
                (name.clone(), t)
            })
            .collect();
        let held = local.seats.max(local.holding);
        self.want = if self.rejoining() {
            held
        } else {
            held.max(self.target.unwrap_or(held))
        };
        Outgoing {
            report: Report {
                id: self.id.clone(),
                seq: self.seq,
                seats: local.seats,
                holding: local.holding,
                target: self.target.unwrap_or(local.seats),
                credit: self.credit,
                tenants,
            },
            held,
            want: self.want,
            expect: self.written,
        }
    }

    /// Whether it is rejoining (asking for no more than it holds).
    pub fn rejoining(&self) -> bool {
        self.lost || self.rejoin.is_some()
    }

    /// The exchange failed: keep the seats, rejoin at the next success.
    pub fn failed(&mut self) {
        self.lost = true;
        self.refused = false;
        self.release = false;
    }

    /// Take an exchange's answer at `now`, running with `seats`: the seats to run with and
    /// the allocation. A `regular` sync also settles the interval's credit.
    pub fn absorb(&mut self, reply: Reply, seats: usize, now: Instant, regular: bool) -> Plan {
        let forgotten = self.written.is_some() && reply.previous != self.written;
        self.written = Some(self.seq);
        if std::mem::take(&mut self.lost) || forgotten {
            let wait = self.rejoin.get_or_insert_with(BTreeMap::new);
            for (id, seq) in &self.seen {
                wait.entry(id.clone()).or_insert((*seq, now + self.lease));
            }
        }
        for p in reply.peers.iter().filter(|p| p.report.id != self.id) {
            let seq = self.seen.entry(p.report.id.clone()).or_default();
            *seq = (*seq).max(p.report.seq);
        }
        if let Some(wait) = &mut self.rejoin {
            wait.retain(|id, (seq, until)| {
                let again = reply
                    .peers
                    .iter()
                    .any(|p| &p.report.id == id && p.report.seq > *seq);
                !again && *until > now
            });
            if wait.is_empty() {
                self.rejoin = None;
            }
        }
        let present: Vec<String> = reply.peers.iter().map(|p| p.report.id.clone()).collect();
        self.seen.retain(|id, _| present.contains(id));
        let reports: Vec<Report> = reply.peers.into_iter().map(|p| p.report).collect();
        let allocation = allocate(self.depth, &reports);
        let me = allocation.instances.get(&self.id);
        let target = me.map_or(seats, |m| m.seats).max(1);
        // Credit: what the seats it ran with over the last interval missed of its fair seats
        // then (a seat moving between instances is idle for a sync or two: that is owed too),
        // less the mean credit reported, so that credits stay centred (only their differences
        // are paid back). Not across a change of members (the fair seats were of another
        // cluster). Held at the floor of one seat with no more than one fair seat, it cannot
        // give a seat back: no credit (`alloc::pinned`).
        if target <= 1 && me.is_none_or(|m| m.fair <= 1.0 + 1e-9) {
            self.credit = 0.0;
        } else if let (true, Some((fair, members))) = (regular, &self.fair) {
            if *members == present {
                let ran = if self.ran.1 > 0 {
                    self.ran.0 / f64::from(self.ran.1)
                } else {
                    seats as f64
                };
                let owed = fair - ran - super::alloc::mean_credit(&reports);
                self.credit = (self.credit + owed).clamp(-MAX_CREDIT, MAX_CREDIT);
            }
        }
        if regular {
            self.ran = (0.0, 0);
        }
        if regular {
            self.settle_missed(&allocation);
        }
        let weights = self.weights(&allocation);
        self.target = Some(target);
        self.fair = me.map(|m| (m.fair, present));
        let seats = seats.max(reply.grant).min(target).max(1);
        self.refused = self.want > reply.grant;
        self.release = reply.grant > seats;
        Plan {
            seats,
            weights,
            allocation,
            forgotten,
        }
    }

    /// Per backlogged tenant here: add what it missed of its part over the last interval (its
    /// part then minus its measured usage). Within an instance the scheduler splits the seats
    /// by weight, but a light tenant's bursts and a neighbour held to its few clients make
    /// the split drift from the parts; this integral brings each tenant's mean back to its
    /// part.
    fn settle_missed(&mut self, allocation: &Allocation) {
        let usage = self.meter.usage();
        let mut missed = BTreeMap::new();
        for (name, part) in &self.parts {
            let backlogged = allocation.tenants.get(name).is_some_and(|t| !t.light);
            if backlogged {
                let m = self.missed.get(name).copied().unwrap_or(0.0) + part
                    - usage.get(name).copied().unwrap_or(0.0);
                missed.insert(name.clone(), m.clamp(-MAX_CREDIT, MAX_CREDIT));
            }
        }
        self.missed = missed;
    }

    /// The local weights from `allocation`'s parts here and what each tenant has missed;
    /// records the parts for the next interval.
    fn weights(&mut self, allocation: &Allocation) -> BTreeMap<String, f64> {
        let Some(me) = allocation.instances.get(&self.id) else {
            self.parts.clear();
            return BTreeMap::new();
        };
        self.parts = me
            .tenants
            .iter()
            .map(|(n, p)| (n.clone(), p.seats))
            .collect();
        me.tenants
            .iter()
            .map(|(name, p)| {
                let t = &allocation.tenants[name];
                let w = match self.missed.get(name) {
                    Some(m) if !t.light && t.share > 0.0 => {
                        let aim = (p.seats + m / PAYBACK).max(p.seats * 0.1);
                        (t.weight * aim / t.share).clamp(MIN_WEIGHT, MAX_WEIGHT)
                    }
                    _ => p.weight,
                };
                (name.clone(), w)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(held: usize, want: usize, expect: Option<u64>) -> Outgoing {
        Outgoing {
            report: Report::default(),
            held,
            want,
            expect,
        }
    }

    #[test]
    fn settle_grants_only_what_the_others_do_not_claim() {
        let present = vec![("a".to_string(), 3), ("b".to_string(), 4)];
        let settle = |o: &Outgoing, previous| settle("b", 10, o, previous, &present);
        // D 10, a claims 3: b may grow from 2 to 7.
        assert_eq!(settle(&out(2, 8, Some(4)), Some(4)), 7);
        assert_eq!(settle(&out(2, 5, Some(4)), Some(4)), 5);
        // No growth asked: the held seats, even above D (they are occupied).
        assert_eq!(settle(&out(9, 9, Some(4)), Some(4)), 9);
        // Redis does not have b's last report (a restart): no growth.
        assert_eq!(settle(&out(2, 8, Some(4)), None), 2);
        assert_eq!(settle(&out(2, 8, Some(4)), Some(3)), 2);
        // A new instance (nothing expected, nothing there) may grow.
        assert_eq!(settle(&out(1, 8, None), None), 7);
    }

    #[test]
    fn the_meter_averages_and_smooths_without_a_peak_hold() {
        let mut m = Meter::default();
        for n in [0.0, 1.0, 0.0, 1.0] {
            m.sample([("L", n, n), ("B", 8.0, 2.0)]);
        }
        assert_eq!(m.close().get("L"), Some(&0.5));
        assert_eq!(m.usage().get("B"), Some(&2.0));
        m.sample([("L", 0.0, 0.0), ("B", 8.0, 2.0)]);
        assert_eq!(m.close().get("L"), Some(&0.25));
        assert_eq!(
            m.close().get("B"),
            Some(&4.0),
            "an interval without samples is 0"
        );
    }

    fn local(seats: usize) -> Local {
        Local {
            seats,
            holding: seats,
            tenants: vec![("A".into(), 1.0, 0)],
        }
    }

    fn peer(report: Report, claim: usize) -> Peer {
        Peer { report, claim }
    }

    /// Two members through a model of Redis (`settle` on a map): `sync` runs one exchange.
    struct Pair {
        redis: BTreeMap<String, (Report, usize)>,
        now: Instant,
    }

    impl Pair {
        fn sync(&mut self, m: &mut Member, seats: usize) -> Plan {
            m.sample([("A", 20.0, seats as f64)], seats);
            let o = m.outgoing(&local(seats), true);
            let id = o.report.id.clone();
            let present: Vec<(String, usize)> =
                self.redis.iter().map(|(k, v)| (k.clone(), v.1)).collect();
            let previous = self.redis.get(&id).map(|v| v.0.seq);
            let grant = settle(&id, 8, &o, previous, &present);
            self.redis.insert(id, (o.report, grant));
            let peers = self
                .redis
                .values()
                .map(|(r, c)| peer(r.clone(), *c))
                .collect();
            let reply = Reply {
                grant,
                previous,
                peers,
            };
            m.absorb(reply, seats, self.now, true)
        }
    }

    #[test]
    fn after_redis_forgets_an_instance_rejoins_with_what_it_held() {
        let lease = Duration::from_millis(500);
        let mut r = Pair {
            redis: BTreeMap::new(),
            now: Instant::now(),
        };
        let (mut a, mut b) = (Member::new("a", 8, lease), Member::new("b", 8, lease));
        // Both backlogged with A; a starts with 6 seats, b with 2: a shrinks at once, b grows
        // once a's claim has come down.
        assert_eq!(r.sync(&mut a, 6).seats, 6);
        assert_eq!(r.sync(&mut b, 2).seats, 2);
        assert_eq!(r.sync(&mut a, 6).seats, 4);
        assert_eq!(r.sync(&mut b, 2).seats, 2, "a still claims 6");
        assert_eq!(r.sync(&mut a, 4).seats, 4);
        assert_eq!(r.sync(&mut b, 2).seats, 4);
        assert_eq!(r.redis["a"].1 + r.redis["b"].1, 8);
        // Redis restarts, empty, while b had 4 and a is about to give b... nothing: neither
        // grows until both have reported again.
        a.failed();
        b.failed();
        r.redis.clear();
        let pa = r.sync(&mut a, 4);
        assert!(pa.forgotten && a.rejoining());
        assert_eq!(r.redis["a"].1, 4, "a claims what it holds");
        r.sync(&mut b, 4);
        assert_eq!(r.redis["b"].1, 4);
        r.sync(&mut a, 4);
        assert!(!a.rejoining(), "b has reported again");
        // A member that never reports again is waited for one lease.
        let mut c = Member::new("c", 8, lease);
        r.sync(&mut c, 1);
        r.sync(&mut a, 4);
        c.failed();
        r.redis.clear();
        r.sync(&mut c, 1);
        assert!(c.rejoining());
        r.now += lease + Duration::from_millis(1);
        r.sync(&mut c, 1);
        assert!(!c.rejoining(), "a lease passed without a word from a or b");
    }
}
