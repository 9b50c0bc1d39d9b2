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
//! last writes) the claims of the other instances are gone. Each instance therefore remembers
//! the last claim it saw from every other one, and passes those it saw renewed within a lease
//! into the exchange; the exchange counts a remembered claim where Redis has none (or an older
//! copy). After a failed exchange the remembered claims are renewed for one more lease. So an
//! instance that finds Redis empty rejoins with the seats it already held, and grows only into
//! seats that every instance it knew has given up since, or once a lease has passed without
//! a word from it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::alloc::{allocate, Allocation, Report, TenantReport};

/// Weight of the last interval in the smoothed demand (the rest is the previous value).
pub const SMOOTH: f64 = 0.5;
/// The largest credit (seat-syncs owed or ahead) an instance carries.
pub const MAX_CREDIT: f64 = 16.0;

/// A tenant's requests waiting or in flight, averaged over samples within an interval and
/// smoothed across intervals: its measured demand. It follows what the tenant uses, without
/// a peak hold (a held peak reserved seats a light tenant left idle).
#[derive(Clone, Debug, Default)]
pub struct Meter {
    sum: BTreeMap<String, f64>,
    samples: u32,
    smoothed: BTreeMap<String, f64>,
}

impl Meter {
    /// One sample: every tenant's waiting + in-flight count now.
    pub fn sample<'a>(&mut self, counts: impl IntoIterator<Item = (&'a str, usize)>) {
        for (name, n) in counts {
            *self.sum.entry(name.to_string()).or_default() += n as f64;
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
            let now = sum.get(name).copied().unwrap_or(0.0) / n;
            *d = if first {
                now
            } else {
                SMOOTH * now + (1.0 - SMOOTH) * *d
            };
        }
        // A tenant gone from this instance (a reload) fades out.
        self.smoothed
            .retain(|name, d| sum.contains_key(name) || *d >= 0.01);
        self.samples = 0;
        &self.smoothed
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

/// A claim remembered from another instance, passed into the exchange.
#[derive(Clone, Debug, PartialEq)]
pub struct Known {
    /// The instance.
    pub id: String,
    /// The seq of its report that carried the claim.
    pub seq: u64,
    /// The claim.
    pub claim: usize,
}

/// What one exchange sends.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// The report to publish.
    pub report: Report,
    /// Seats it may occupy now without asking: max(seats, in flight).
    pub held: usize,
    /// Seats it asks for (≥ `held`): its allocation's target.
    pub want: usize,
    /// Claims remembered from the other instances.
    pub known: Vec<Known>,
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

/// The seats granted by an exchange: `want` as far as `depth` minus the other instances'
/// claims allows, never less than `held`. The other instances' claims are those Redis has
/// (`present`: id, seq, claim), raised to a remembered claim when Redis's copy is older, plus
/// the remembered claims of instances Redis does not have. This is the specification of the
/// exchange's Lua script (`redis.rs`), which a test runs against a real `redis-server`.
pub fn settle(
    me: &str,
    depth: usize,
    held: usize,
    want: usize,
    present: &[(String, u64, usize)],
    known: &[Known],
) -> usize {
    let mut others = 0usize;
    for (id, seq, claim) in present.iter().filter(|p| p.0 != me) {
        let remembered = known.iter().find(|k| &k.id == id && k.seq > *seq);
        others = others.saturating_add(remembered.map_or(*claim, |k| k.claim.max(*claim)));
    }
    for k in known {
        if k.id != me && !present.iter().any(|p| p.0 == k.id) {
            others = others.saturating_add(k.claim);
        }
    }
    if want > held {
        held.max(want.min(depth.saturating_sub(others)))
    } else {
        held
    }
}

#[derive(Clone, Debug)]
struct Seen {
    seq: u64,
    claim: usize,
    /// Counted while absent until then: a lease after its report last changed.
    until: Instant,
}

/// This sync's outcome for the instance.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The seats to run with now (the gate's depth).
    pub seats: usize,
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
    fair: Option<f64>,
    credit: f64,
    meter: Meter,
    seen: BTreeMap<String, Seen>,
    /// An exchange failed since the last success.
    lost: bool,
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
            lost: false,
        }
    }

    /// Record a sample of every tenant's waiting + in-flight count.
    pub fn sample<'a>(&mut self, counts: impl IntoIterator<Item = (&'a str, usize)>) {
        self.meter.sample(counts);
    }

    /// Seat-syncs owed to this instance (negative: it had more than its fair seats).
    pub fn credit(&self) -> f64 {
        self.credit
    }

    /// The next exchange's message, at `now`.
    pub fn outgoing(&mut self, local: &Local, now: Instant) -> Outgoing {
        if let Some(fair) = self.fair {
            let owed = fair - local.seats as f64;
            // At the floor of one seat an instance cannot give more back: no debt.
            if !(local.seats <= 1 && owed < 0.0) {
                self.credit = (self.credit + owed).clamp(-MAX_CREDIT, MAX_CREDIT);
            }
        }
        let demand = self.meter.close().clone();
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
        if self.lost {
            // Rejoining: count every instance seen before for one more lease.
            for s in self.seen.values_mut() {
                s.until = s.until.max(now + self.lease);
            }
        }
        let known = self
            .seen
            .iter()
            .filter(|(_, s)| s.until > now)
            .map(|(id, s)| Known {
                id: id.clone(),
                seq: s.seq,
                claim: s.claim,
            })
            .collect();
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
            want: held.max(self.target.unwrap_or(held)),
            known,
        }
    }

    /// The exchange failed: keep the seats; remembered claims are renewed at the next one.
    pub fn failed(&mut self) {
        self.lost = true;
    }

    /// Take an exchange's answer at `now`, running with `seats`: the seats to run with and
    /// the allocation.
    pub fn absorb(&mut self, reply: Reply, seats: usize, now: Instant) -> Plan {
        let forgotten = self.written.is_some() && reply.previous != self.written;
        self.written = Some(self.seq);
        self.lost = false;
        for p in reply.peers.iter().filter(|p| p.report.id != self.id) {
            let r = &p.report;
            match self.seen.get_mut(&r.id) {
                Some(s) if r.seq < s.seq => {} // an older copy (failover): keep what we saw
                Some(s) => {
                    if r.seq > s.seq {
                        s.until = now + self.lease;
                    }
                    s.seq = r.seq;
                    s.claim = p.claim;
                }
                None => {
                    let s = Seen {
                        seq: r.seq,
                        claim: p.claim,
                        until: now + self.lease,
                    };
                    self.seen.insert(r.id.clone(), s);
                }
            }
        }
        let present: Vec<&str> = reply.peers.iter().map(|p| p.report.id.as_str()).collect();
        self.seen
            .retain(|id, s| s.until > now || present.contains(&id.as_str()));
        let reports: Vec<Report> = reply.peers.into_iter().map(|p| p.report).collect();
        let allocation = allocate(self.depth, &reports);
        let me = allocation.instances.get(&self.id);
        let target = me.map_or(seats, |m| m.seats).max(1);
        self.target = Some(target);
        self.fair = me.map(|m| m.fair);
        Plan {
            seats: seats.max(reply.grant).min(target).max(1),
            allocation,
            forgotten,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: &str, seq: u64, claim: usize) -> Known {
        Known {
            id: id.into(),
            seq,
            claim,
        }
    }

    #[test]
    fn settle_grants_only_what_the_others_do_not_claim() {
        let present = vec![("a".to_string(), 5, 3), ("b".to_string(), 9, 4)];
        // D 10, a claims 3: b may grow from 2 to 7.
        assert_eq!(settle("b", 10, 2, 8, &present, &[]), 7);
        assert_eq!(settle("b", 10, 2, 5, &present, &[]), 5);
        // No growth asked: the held seats, even above D (they are occupied).
        assert_eq!(settle("b", 10, 9, 9, &present, &[]), 9);
        // c is remembered but gone from Redis (a restart): still counted.
        assert_eq!(settle("b", 10, 2, 8, &present, &[known("c", 3, 4)]), 3);
        // a's copy in Redis is older than what b saw: the larger claim counts.
        assert_eq!(settle("b", 10, 2, 8, &present, &[known("a", 6, 5)]), 2 + 3);
        // A newer copy than the remembered one: Redis's claim counts.
        assert_eq!(settle("b", 10, 2, 8, &present, &[known("a", 4, 9)]), 7);
    }

    #[test]
    fn the_meter_averages_and_smooths_without_a_peak_hold() {
        let mut m = Meter::default();
        for n in [0, 1, 0, 1] {
            m.sample([("L", n), ("B", 8)]);
        }
        assert_eq!(m.close().get("L"), Some(&0.5));
        m.sample([("L", 0), ("B", 8)]);
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

    #[test]
    fn after_redis_forgets_an_instance_rejoins_with_what_it_held() {
        let lease = Duration::from_millis(500);
        let t0 = Instant::now();
        let mut a = Member::new("a", 8, lease);
        let mut b = Member::new("b", 8, lease);
        // Both backlogged with A; a holds 6, b holds 2.
        for m in [&mut a, &mut b] {
            m.sample([("A", 20)]);
        }
        let oa = a.outgoing(&local(6), t0);
        let ob = b.outgoing(&local(2), t0);
        let peers = vec![peer(oa.report.clone(), 6), peer(ob.report.clone(), 2)];
        let reply = |grant| Reply {
            grant,
            previous: None,
            peers: peers.clone(),
        };
        let pa = a.absorb(reply(6), 6, t0);
        let pb = b.absorb(reply(2), 2, t0);
        assert_eq!((pa.seats, pb.seats), (4, 2), "a shrinks at once, b waits");
        // Redis restarts, empty. b's next exchange must not grant it a's seats.
        let t1 = t0 + Duration::from_millis(100);
        b.failed();
        b.sample([("A", 20)]);
        let ob = b.outgoing(&local(2), t1);
        assert_eq!(ob.want, 4);
        assert_eq!(ob.known, vec![known("a", 1, 6)]);
        let g = settle("b", 8, ob.held, ob.want, &[], &ob.known);
        assert_eq!(g, 2, "a's remembered claim of 6 is counted");
        let pb = b.absorb(
            Reply {
                grant: g,
                previous: None,
                peers: vec![peer(ob.report, g)],
            },
            2,
            t1,
        );
        assert!(pb.forgotten);
        assert_eq!(pb.seats, 2);
        // A lease later with no word from a, its claim is no longer counted.
        let t2 = t1 + lease + Duration::from_millis(1);
        let ob = b.outgoing(&local(2), t2);
        assert!(ob.known.is_empty(), "{:?}", ob.known);
    }
}
