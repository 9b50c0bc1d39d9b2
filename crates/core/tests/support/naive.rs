//! The 2DFQᴱ pseudocode of Fig. 7, written out plainly: every dequeue scans every tenant.
//! Kept as the reference the fast implementation must agree with (and benchmarked beside it).
//! Set `stagger = false` for WF²Q (eligibility `S ≤ v`) and `eligibility = false` for WFQ.
//!
//! Beyond Fig. 7, and exactly as the library documents them: eligibility uses `≤` (the §4
//! text; Fig. 7 prints `<`), ties go to the lower tenant id, a worker with no eligible tenant
//! takes the one that becomes eligible first, `v` is either the exact GPS clock or the
//! approximate one (measured service / Σφ over A, lifted to the smallest backlogged S),
//! and requests can be cancelled and weights changed.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};

use fairlane_core::GpsClock;

pub enum Estimate {
    Oracle,
    Pessimistic { alpha: f64, initial: f64 },
}

pub struct NaiveTenant {
    pub weight: f64,
    /// (ticket, class, known cost)
    pub queue: VecDeque<(u64, u32, Option<f64>)>,
    pub active: bool,
    pub s: f64,
}

struct Run {
    tenant: u64,
    class: u32,
    credit: f64,
    accounted: f64,
    clocked: f64,
}

pub struct Naive {
    pub n: usize,
    pub stagger: bool,
    pub eligibility: bool,
    pub estimate: Estimate,
    pub tenants: BTreeMap<u64, NaiveTenant>,
    l_max: HashMap<(u64, u32), f64>,
    running: HashMap<u64, Run>,
    pub gps: Option<(GpsClock, BTreeMap<u64, usize>)>,
    pub v: f64,
    next_ticket: u64,
}

impl Naive {
    pub fn new(
        n: usize,
        stagger: bool,
        eligibility: bool,
        estimate: Estimate,
        gps: Option<f64>,
    ) -> Self {
        Naive {
            n,
            stagger,
            eligibility,
            estimate,
            tenants: BTreeMap::new(),
            l_max: HashMap::new(),
            running: HashMap::new(),
            gps: gps.map(|c| (GpsClock::new(c).unwrap(), BTreeMap::new())),
            v: 0.0,
            next_ticket: 0,
        }
    }

    fn tenant(&mut self, f: u64) -> &mut NaiveTenant {
        self.tenants.entry(f).or_insert(NaiveTenant {
            weight: 1.0,
            queue: VecDeque::new(),
            active: false,
            s: 0.0,
        })
    }

    fn gps_flow(&mut self, f: u64) -> usize {
        let (_, flows) = self.gps.as_mut().unwrap();
        let next = flows.len();
        *flows.entry(f).or_insert(next)
    }

    /// v(now).
    pub fn v_now(&mut self, now: f64) -> f64 {
        if let Some((g, _)) = &mut self.gps {
            g.advance(now);
            return g.virtual_time();
        }
        let min_s = self
            .tenants
            .values()
            .filter(|t| !t.queue.is_empty())
            .map(|t| t.s)
            .fold(f64::INFINITY, f64::min);
        if min_s > self.v && min_s.is_finite() {
            self.v = min_s;
        }
        self.v
    }

    /// The charge for a tenant's head request: its known cost, else L_max^f of its class.
    fn l(&self, f: u64, class: u32, known: Option<f64>) -> f64 {
        known.unwrap_or_else(|| match self.estimate {
            Estimate::Oracle => panic!("oracle without a cost"),
            Estimate::Pessimistic { initial, .. } => {
                self.l_max.get(&(f, class)).copied().unwrap_or(initial)
            }
        })
    }

    fn active_weight(&self) -> f64 {
        self.tenants
            .values()
            .filter(|t| t.active)
            .map(|t| t.weight)
            .sum()
    }

    /// Fig. 7 ENQUEUE.
    pub fn enqueue(&mut self, f: u64, class: u32, cost: Option<f64>, now: f64) -> u64 {
        if self.gps.is_some() {
            let flow = self.gps_flow(f);
            let w = self.tenant(f).weight;
            let (g, _) = self.gps.as_mut().unwrap();
            if g.weight(flow) != w {
                g.set_weight(flow, w, now);
            }
            g.arrive(flow, cost.unwrap(), now);
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if !self.tenant(f).active {
            let v = self.v_now(now);
            let t = self.tenant(f);
            t.active = true; // A ← A ∪ f
            t.s = t.s.max(v); // S_f ← max(S_f, v(now))
        }
        self.tenant(f).queue.push_back((ticket, class, cost));
        ticket
    }

    /// Fig. 7 DEQUEUE(i): returns (ticket, tenant, charge).
    pub fn dequeue(&mut self, i: usize, now: f64) -> Option<(u64, u64, f64)> {
        if self.tenants.values().all(|t| t.queue.is_empty()) {
            return None;
        }
        let v = self.v_now(now);
        let x = if self.stagger {
            i as f64 / self.n as f64
        } else {
            0.0
        };
        // (eligible-at, F, tenant) for every backlogged tenant.
        let cands: Vec<(f64, f64, u64)> = self
            .tenants
            .iter()
            .filter(|(_, t)| !t.queue.is_empty())
            .map(|(&f, t)| {
                let (_, class, known) = t.queue[0];
                let l = self.l(f, class, known);
                (t.s - x * l, t.s + l / t.weight, f)
            })
            .collect();
        let threshold = if self.eligibility {
            let earliest = cands.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
            if earliest <= v {
                v
            } else {
                earliest
            }
        } else {
            f64::INFINITY
        };
        let &(_, _, f) = cands
            .iter()
            .filter(|c| c.0 <= threshold)
            .min_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then(a.2.cmp(&b.2)))
            .unwrap();
        let t = self.tenants.get_mut(&f).unwrap();
        let (ticket, class, known) = t.queue.pop_front().unwrap();
        let l = match known {
            Some(c) => c,
            None => match self.estimate {
                Estimate::Oracle => unreachable!(),
                Estimate::Pessimistic { initial, .. } => {
                    self.l_max.get(&(f, class)).copied().unwrap_or(initial)
                }
            },
        };
        let t = self.tenants.get_mut(&f).unwrap();
        t.s += l / t.weight; // S_f ← S_f + L/φ
        self.running.insert(
            ticket,
            Run {
                tenant: f,
                class,
                credit: l,
                accounted: 0.0,
                clocked: 0.0,
            },
        );
        Some((ticket, f, l))
    }

    fn clock(&mut self, ticket: u64, used: f64) {
        let r = self.running.get_mut(&ticket).unwrap();
        let d = used - r.clocked;
        r.clocked = used;
        if self.gps.is_none() {
            let w = self.active_weight();
            if w > 0.0 {
                self.v += d / w;
            }
        }
    }

    /// Fig. 7 REFRESH for one request (cumulative usage).
    pub fn progress(&mut self, ticket: u64, used: f64) {
        self.clock(ticket, used);
        let r = self.running.get_mut(&ticket).unwrap();
        let c = used - r.accounted;
        r.accounted = used;
        if c < r.credit {
            r.credit -= c;
        } else {
            let (f, excess) = (r.tenant, c - r.credit);
            r.credit = 0.0;
            let t = self.tenants.get_mut(&f).unwrap();
            if excess != 0.0 {
                t.s += excess / t.weight;
            }
        }
    }

    /// Fig. 7 COMPLETE (total usage).
    pub fn complete(&mut self, ticket: u64, used: f64) {
        self.clock(ticket, used);
        let r = self.running.remove(&ticket).unwrap();
        let c = used - r.accounted;
        if let Estimate::Pessimistic { alpha, .. } = self.estimate {
            self.l_max
                .entry((r.tenant, r.class))
                .and_modify(|l| *l = (alpha * *l).max(used))
                .or_insert(used);
        }
        let t = self.tenants.get_mut(&r.tenant).unwrap();
        let owed = c - r.credit;
        if owed != 0.0 {
            t.s += owed / t.weight;
        }
        if t.queue.is_empty() {
            t.active = false;
        }
    }

    pub fn cancel(&mut self, ticket: u64, now: f64) {
        let (&f, _) = self
            .tenants
            .iter()
            .find(|(_, t)| t.queue.iter().any(|q| q.0 == ticket))
            .unwrap();
        let t = self.tenants.get_mut(&f).unwrap();
        let pos = t.queue.iter().position(|q| q.0 == ticket).unwrap();
        let (_, _, cost) = t.queue.remove(pos).unwrap();
        let idle = t.queue.is_empty() && !self.running.values().any(|r| r.tenant == f);
        if idle {
            t.active = false;
        }
        if self.gps.is_some() {
            let flow = self.gps_flow(f);
            self.gps
                .as_mut()
                .unwrap()
                .0
                .withdraw(flow, cost.unwrap(), now);
        }
    }

    pub fn set_weight(&mut self, f: u64, w: f64, now: f64) {
        self.tenant(f).weight = w;
        if self.gps.is_some() {
            let flow = self.gps_flow(f);
            self.gps.as_mut().unwrap().0.set_weight(flow, w, now);
        }
    }
}
