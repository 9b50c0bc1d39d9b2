//! nginx's worker model for the proxy (issue 19, `listen.workers`): N single-threaded tokio
//! runtimes, each on its own thread, and one accept loop (in [`crate::Proxy::run`]) that
//! hands every accepted connection to the runtime with the fewest live connections.
//!
//! Why: on tokio's work-stealing pool a request's wake-ups cross threads (an I/O event read
//! by one worker wakes a task another one runs) and every task pays the stealing scheduler's
//! bookkeeping. On a current-thread runtime the thread parks in `epoll_wait` itself and
//! runs what it wakes, like an nginx worker. The accept loop picks the runtime rather than
//! `SO_REUSEPORT` hashing, so a few long-lived connections still spread evenly.
//!
//! A connection's whole life stays on its runtime (the client socket, its timers, the
//! upstream sockets it opens: [`index`] shards the own path's idle stack). What is shared
//! (the gate, metrics, the connection table, settings, shutdown) holds no runtime handle:
//! wakers work across runtimes.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use tokio::sync::oneshot;

thread_local! {
    /// This thread's worker index (0 off the workers).
    static INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The index of the worker runtime this thread runs (0 on any other thread), for state
/// kept per runtime such as the own path's idle upstream sockets.
pub(crate) fn index() -> usize {
    INDEX.with(|i| i.get())
}

/// How many copies a [`PerWorker`] value keeps: one per core, at most 8 (workers past
/// that share copies), decided once per process.
fn copies() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

/// A value kept once per worker runtime, each copy on cache lines of its own, written by
/// its own worker ([`PerWorker::local`]) and summed by readers ([`PerWorker::all`]).
///
/// Why: counters every request updates, shared by all the workers, bounce their cache
/// line between cores on every write (nginx's workers share no such state). Threads off
/// the workers, and workers past [`copies`], use the first copies.
pub struct PerWorker<T> {
    copies: Box<[Padded<T>]>,
}

/// One copy, alone on its cache lines.
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T: Default> Default for PerWorker<T> {
    fn default() -> Self {
        PerWorker {
            copies: (0..copies()).map(|_| Padded::default()).collect(),
        }
    }
}

impl<T> PerWorker<T> {
    /// This worker's copy.
    pub fn local(&self) -> &T {
        &self.copies[index() % self.copies.len()].0
    }

    /// Every copy, for a reader to combine.
    pub fn all(&self) -> impl Iterator<Item = &T> {
        self.copies.iter().map(|c| &c.0)
    }
}

/// A count kept per worker: added to and taken from on the caller's worker, read as the
/// sum over all of them. A request may be counted on one worker and uncounted on another
/// (its body dropped elsewhere): the copies wrap, and their sum is exact.
pub type Counter = PerWorker<AtomicU64>;

impl Counter {
    /// Add `n` on this worker's copy.
    pub fn fetch_add(&self, n: u64, order: std::sync::atomic::Ordering) {
        self.local().fetch_add(n, order);
    }

    /// Take `n` from this worker's copy (wrapping: see [`Counter`]).
    pub fn fetch_sub(&self, n: u64, order: std::sync::atomic::Ordering) {
        self.local().fetch_sub(n, order);
    }

    /// The count: the sum of every worker's copy.
    pub fn load(&self, order: std::sync::atomic::Ordering) -> u64 {
        self.all().fold(0u64, |s, c| s.wrapping_add(c.load(order)))
    }
}

/// What one worker runtime carries, as the accept loop and `/status` see it.
#[derive(Debug, Default)]
pub(crate) struct Load {
    /// Client connections open on it now.
    pub live: AtomicUsize,
    /// Client connections handed to it since the start.
    pub accepted: AtomicU64,
}

/// Pick the worker with the fewest live connections (the lowest index on a tie).
pub(crate) fn least_loaded(loads: &[Load]) -> usize {
    let mut best = 0;
    let mut fewest = usize::MAX;
    for (i, l) in loads.iter().enumerate() {
        let n = l.live.load(Relaxed);
        if n < fewest {
            best = i;
            fewest = n;
        }
    }
    best
}

struct Worker {
    handle: tokio::runtime::Handle,
    /// Dropped (or sent) to make the thread leave its runtime.
    stop: Option<oneshot::Sender<()>>,
    /// Completed by the thread once its runtime and every task left on it are dropped.
    done: Option<oneshot::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Running worker runtimes. [`Workers::stop`] ends them and joins their threads; dropping
/// this without `stop` (the `run` future was dropped) tells them to end and detaches them.
pub(crate) struct Workers {
    workers: Vec<Worker>,
}

impl Workers {
    /// Start `n` (≥ 1) single-threaded runtimes, each on its own thread named
    /// `fairlane-worker-<i>`.
    pub fn start(n: usize) -> std::io::Result<Workers> {
        let mut workers = Workers {
            workers: Vec::with_capacity(n),
        };
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = rt.handle().clone();
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let (done_tx, done_rx) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("fairlane-worker-{i}"))
                .spawn(move || {
                    INDEX.with(|x| x.set(i));
                    // Runs the connections spawned onto `handle` until told to stop (a
                    // dropped sender counts too).
                    let _ = rt.block_on(stop_rx);
                    // Drops every task still on it (connections past the hard stop).
                    drop(rt);
                    let _ = done_tx.send(());
                })?;
            workers.workers.push(Worker {
                handle,
                stop: Some(stop_tx),
                done: Some(done_rx),
                thread: Some(thread),
            });
        }
        Ok(workers)
    }

    /// How many runtimes there are.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Run `task` on worker `i`.
    pub fn spawn<F>(&self, i: usize, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.workers[i % self.workers.len()].handle.spawn(task));
    }

    /// Stop every runtime (dropping what still runs on them) and join their threads.
    pub async fn stop(mut self) {
        for w in &mut self.workers {
            if let Some(s) = w.stop.take() {
                let _ = s.send(());
            }
        }
        for w in &mut self.workers {
            if let Some(d) = w.done.take() {
                // Err: the thread ended without saying so (it panicked); join reports it.
                let _ = d.await;
            }
            if let Some(t) = w.thread.take() {
                // The thread has finished (or is about to return): this does not block
                // the caller's runtime for longer than that.
                let _ = t.join();
            }
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.workers {
            // A dropped sender also wakes the thread's `block_on`; it then ends on its own.
            w.stop.take();
        }
    }
}

/// The per-worker counts a [`crate::ProxyHandle`] reports.
pub(crate) type Loads = Arc<[Load]>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_loaded_takes_the_emptiest_then_the_lowest_index() {
        let loads: Vec<Load> = (0..3).map(|_| Load::default()).collect();
        assert_eq!(least_loaded(&loads), 0);
        loads[0].live.store(2, Relaxed);
        loads[1].live.store(1, Relaxed);
        loads[2].live.store(1, Relaxed);
        assert_eq!(least_loaded(&loads), 1);
        loads[1].live.store(3, Relaxed);
        assert_eq!(least_loaded(&loads), 2);
        assert_eq!(least_loaded(&[]), 0);
    }

    /// A runtime for the test's own thread (off the workers).
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn per_worker_counts_sum_over_workers_even_when_taken_elsewhere() {
        let c = std::sync::Arc::new(Counter::default());
        let rt = runtime();
        rt.block_on(async {
            let w = Workers::start(3).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            for i in 0..3 {
                let (c, tx) = (c.clone(), tx.clone());
                w.spawn(i, async move {
                    c.fetch_add(10 * (i as u64 + 1), Relaxed);
                    tx.send(()).unwrap();
                });
            }
            (0..3).for_each(|_| rx.recv().unwrap());
            w.stop().await;
        });
        assert_eq!(c.load(Relaxed), 60);
        // Taken on a thread whose copy never had them: that copy wraps, the sum is exact.
        c.fetch_sub(55, Relaxed);
        assert_eq!(c.load(Relaxed), 5);
        let copies = c.all().count();
        assert_eq!(copies, super::copies());
        let nonzero = c.all().filter(|x| x.load(Relaxed) != 0).count();
        assert!(
            nonzero >= copies.min(2),
            "workers wrote copies of their own"
        );
    }

    #[test]
    fn workers_run_tasks_on_their_own_threads_and_stop() {
        let rt = runtime();
        rt.block_on(async {
            let w = Workers::start(2).unwrap();
            assert_eq!(w.len(), 2);
            let (tx, rx) = std::sync::mpsc::channel();
            for i in 0..4 {
                let tx = tx.clone();
                w.spawn(i, async move {
                    // A timer: the worker's own driver must run it.
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    let name = std::thread::current().name().map(str::to_string);
                    tx.send((i, index(), name)).unwrap();
                });
            }
            drop(tx);
            let mut seen: Vec<_> = (0..4).map(|_| rx.recv().unwrap()).collect();
            seen.sort();
            for (i, idx, name) in seen {
                assert_eq!(idx, i % 2, "task {i} ran on worker {idx}");
                assert_eq!(
                    name.as_deref(),
                    Some(&*format!("fairlane-worker-{}", i % 2))
                );
            }
            // A task that never ends is dropped with its runtime.
            let (held_tx, held_rx) = oneshot::channel::<()>();
            w.spawn(0, async move {
                let _keep = held_tx;
                std::future::pending::<()>().await;
            });
            w.stop().await;
            assert!(held_rx.await.is_err(), "the pending task was dropped");
        });
        assert_eq!(index(), 0, "off the workers");
    }
}
