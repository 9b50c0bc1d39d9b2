//! The hand-over (transaction mode): the transaction that gives a server connection back
//! sends the next granted waiter's first messages on it at once, as PgBouncer's release
//! does, instead of leaving the connection idle until the waiter's task is polled (at the
//! back of the runtime's queue, behind every task the same readiness event woke).
//!
//! A client that must wait parks what its first send needs (its [`Client`], its [`Relay`]
//! and its request in the gate) in its [`Parking`], whose waker is the one the gate keeps:
//! on a grant it notes the parking in [`Handoffs`], then wakes the client's task as any
//! waker would. The releasing task, right after its seat went back, takes each noted
//! parking whose request is granted and whose pool has an idle connection (the one just
//! given back, when the pool is the same: the pools are LIFO), starts the waiter's holding
//! on it and leaves it, with the seat's permit, in the parking. Anything else (no idle
//! connection of that pool, a wait that ended otherwise, session mode) leaves the waiter to
//! do it all itself, as without the hand-over. The waiter's seat is its own either way: the
//! meter starts it when the gate granted it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Wake, Waker};

use fairlane_runtime::{Acquire, AcquireError, Permit};

use crate::login::Client;
use crate::pool::Pools;
use crate::relay::Relay;
use crate::sched::QueueTimer;
use crate::server::ServerConn;
use crate::session::End;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The parkings the gate granted since a releaser last looked (noted by their wakers).
#[derive(Debug, Default)]
pub struct Handoffs {
    granted: Mutex<Vec<Arc<Parking>>>,
    /// Whether `granted` may hold any (read without the lock at every release).
    any: AtomicBool,
    /// Holdings started by a releaser.
    started: AtomicU64,
}

impl Handoffs {
    /// A parking noted since, if any. (A note may be stale: [`Parking::take`] checks.)
    pub fn next(&self) -> Option<Arc<Parking>> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let mut g = lock(&self.granted);
        let p = g.pop();
        if g.is_empty() {
            self.any.store(false, Ordering::Relaxed);
        }
        p
    }

    /// Holdings started by a releaser so far.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }
}

/// A client's place to wait for its seat, reused from wait to wait.
#[derive(Debug)]
pub struct Parking {
    state: Mutex<Parked>,
    /// The waiting task's waker.
    task: Mutex<Option<Waker>>,
    /// The gate woke this parking since the wait last polled its request.
    woken: AtomicBool,
    /// Where a grant is noted (nowhere in session mode).
    handoffs: Weak<Handoffs>,
}

#[derive(Debug, Default)]
enum Parked {
    /// No wait (or the waiter took its things back).
    #[default]
    Empty,
    /// Waiting for a seat.
    Waiting {
        acquire: Acquire,
        waiter: Box<Waiter>,
    },
    /// A releaser is starting the holding.
    Starting,
    /// A releaser started the holding.
    Started(Started),
}

/// A client and its relay: what a wait parks (boxed: parking it and taking it back move a
/// pointer).
#[derive(Debug)]
pub struct Waiter {
    /// The client.
    pub client: Client,
    /// Its relay.
    pub relay: Relay,
}

/// A holding a releaser started for a waiter.
#[derive(Debug)]
pub struct Started {
    /// The waiter's seat.
    pub permit: Permit,
    /// The waiter, its first messages relayed.
    pub waiter: Box<Waiter>,
    /// The connection they went to (leased: give it back with the pools).
    pub conn: Box<ServerConn>,
    /// How the start went (an `Err`: how the holding ended).
    pub first: Result<(), End>,
}

/// How a wait ended.
#[derive(Debug)]
pub enum Waited {
    /// In the waiter's own task: the gate's answer (`None`: the queue timeout came first,
    /// and the request left the queue).
    Own {
        /// The waiter.
        waiter: Box<Waiter>,
        /// See above.
        result: Option<Result<Permit, AcquireError>>,
    },
    /// A releaser started the holding.
    Started(Started),
}

impl Wake for Parking {
    fn wake(self: Arc<Self>) {
        let task = self.note();
        if let Some(h) = self.handoffs.upgrade() {
            lock(&h.granted).push(self);
            h.any.store(true, Ordering::Relaxed);
        }
        if let Some(t) = task {
            t.wake();
        }
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.clone().wake();
    }
}

impl Parking {
    /// A parking whose grants are noted in `handoffs` (`None`: nowhere), and the waker to
    /// give the gate for it.
    pub fn new(handoffs: Option<&Arc<Handoffs>>) -> (Arc<Parking>, Waker) {
        let p = Arc::new(Parking {
            state: Mutex::new(Parked::Empty),
            task: Mutex::new(None),
            woken: AtomicBool::new(false),
            handoffs: handoffs.map(Arc::downgrade).unwrap_or_default(),
        });
        let waker = Waker::from(p.clone());
        (p, waker)
    }

    /// Mark woken; the task's waker to wake.
    fn note(&self) -> Option<Waker> {
        self.woken.store(true, Ordering::SeqCst);
        lock(&self.task).clone()
    }

    /// For a releaser: the waiter's seat, its client and relay and an idle connection of
    /// its pool, if it is still parked, granted, and its pool has one idle.
    pub fn take(&self, pools: &Pools) -> Option<(Permit, Box<Waiter>, Box<ServerConn>)> {
        let mut st = lock(&self.state);
        let Parked::Waiting { acquire, waiter } = &mut *st else {
            return None;
        };
        let conn = pools.checkout_idle(waiter.client.pool)?;
        let Some(permit) = acquire.granted() else {
            pools.put_back(conn);
            return None;
        };
        let Parked::Waiting { waiter, .. } = std::mem::replace(&mut *st, Parked::Starting) else {
            unreachable!("matched above, under the same lock")
        };
        Some((permit, waiter, conn.1))
    }

    /// For a releaser: the holding it started, counted in `handoffs`; the waiter is woken
    /// to go on with it.
    pub fn hand(&self, handoffs: &Handoffs, started: Started) {
        handoffs.started.fetch_add(1, Ordering::Relaxed);
        *lock(&self.state) = Parked::Started(started);
        if let Some(t) = lock(&self.task).clone() {
            t.wake();
        }
    }

    /// Wait for the seat that `acquire` asked for (joined with `waker`, this parking's), at
    /// most until `timer` expires. `pools` takes back a started holding's connection if the
    /// wait is dropped.
    pub async fn wait(
        &self,
        waker: &Waker,
        timer: &mut QueueTimer,
        pools: &Pools,
        (acquire, waiter): (Acquire, Box<Waiter>),
    ) -> Waited {
        *lock(&self.state) = Parked::Waiting { acquire, waiter };
        let mut guard = Unpark(Some((self, pools)));
        let waited = std::future::poll_fn(|cx| self.poll_wait(cx, waker, timer)).await;
        guard.0 = None;
        waited
    }

    fn poll_wait(
        &self,
        cx: &mut Context<'_>,
        waker: &Waker,
        timer: &mut QueueTimer,
    ) -> Poll<Waited> {
        let same_waker = {
            let mut t = lock(&self.task);
            let same = t.as_ref().is_some_and(|t| t.will_wake(cx.waker()));
            if !same {
                *t = Some(cx.waker().clone());
                timer.new_waker();
            }
            same
        };
        // After the task's waker is in place: a grant from now on wakes it.
        let woken = self.woken.swap(false, Ordering::SeqCst);
        let mut st = lock(&self.state);
        let acquire = match &mut *st {
            Parked::Waiting { acquire, .. } => acquire,
            Parked::Started(_) => match std::mem::take(&mut *st) {
                Parked::Started(s) => return Poll::Ready(Waited::Started(s)),
                _ => unreachable!("matched above, under the same lock"),
            },
            // The releaser wakes the task when it is done.
            Parked::Starting | Parked::Empty => return Poll::Pending,
        };
        let mut result = None;
        if woken {
            if let Poll::Ready(r) = Pin::new(&mut *acquire).poll(&mut Context::from_waker(waker)) {
                result = Some(r);
            }
        }
        let expired = result.is_none() && timer.poll_expired(cx, same_waker).is_ready();
        if expired {
            // A grant that came with the deadline still wins.
            result = acquire.granted().map(Ok);
        }
        if result.is_none() && !expired {
            return Poll::Pending;
        }
        let Parked::Waiting { waiter, acquire } = std::mem::take(&mut *st) else {
            unreachable!("matched above, under the same lock")
        };
        drop(st);
        // Dropped (after a timeout, still queued): it leaves the queue.
        drop(acquire);
        Poll::Ready(Waited::Own { waiter, result })
    }
}

/// A wait dropped before it ended (its task is gone): what is parked is dropped (the
/// request leaves the queue, a seat goes back, the client's socket closes) and a started
/// holding's connection is closed and its place freed.
struct Unpark<'a>(Option<(&'a Parking, &'a Pools)>);

impl Drop for Unpark<'_> {
    fn drop(&mut self) {
        let Some((parking, pools)) = self.0.take() else {
            return;
        };
        let parked = std::mem::take(&mut *lock(&parking.state));
        if let Parked::Started(s) = parked {
            drop(pools.lease(s.conn));
        }
    }
}
