//! [`FairPool`]: n OS threads fed by any fairlane-core scheduler through the seam.
//!
//! The life of a task is the seam's (DESIGN.md): `submit` enqueues it; a free worker `i` asks
//! the scheduler `dequeue(i)`; while it runs, a refresh thread reports its cumulative CPU time
//! every 10 ms (`progress`, 2DFQ §5 refresh charging); when it returns, the worker reports
//! the total (`complete`, retroactive charging). Costs are the worker thread's CPU time in
//! nanoseconds ([`CostClock::ThreadCpu`]), so the scheduler sees what each task really cost.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fairlane_core::levels::LevelsConfig;
use fairlane_core::{BoxedScheduler, ClassId, Decision, Dispatch, Request, TenantId, Ticket};

use crate::cpu::CostClock;
use crate::error::{config_error, BuildError, LevelRefusal, SubmitError, TaskError};
use crate::levels::{self, LevelSnapshot, Route};
use crate::meter::{Meter, WorkerMeter};
use crate::oneshot;
use crate::setup::{self, common_setters, Common};
use crate::slab::Slab;
use crate::stats::Stats;
use crate::time::{self, nanos, nanos_at, SharedClock};
use crate::wake::Wakeups;

/// What travels through the scheduler: the wrapped task and when it was submitted.
pub(crate) struct Job {
    /// Runs the task, calls `done(panicked)` (the worker settles the cost and metrics there),
    /// then fills the handle, so a joined task is already accounted for.
    task: oneshot::Job,
    /// Submission time, nanoseconds since the pool's epoch.
    submitted: f64,
    /// The tenant's index in the pool's `Stats`, so the worker reaches its counters without
    /// a hash lookup.
    stat: u32,
}

/// A queued task that [`FairPool::shutdown_now`] handed back instead of running.
///
/// [`run`](PendingTask::run) runs it on the calling thread and completes its handle;
/// dropping it completes its handle with [`TaskError::NotRun`].
pub struct PendingTask {
    tenant: TenantId,
    class: ClassId,
    job: Job,
}

impl PendingTask {
    /// The task's tenant.
    pub fn tenant(&self) -> TenantId {
        self.tenant
    }
    /// The task's class.
    pub fn class(&self) -> ClassId {
        self.class
    }
    /// Run the task here; a panic is caught and delivered to its handle. Returns whether it
    /// panicked.
    pub fn run(self) -> bool {
        self.job.task.run(&mut |_| {})
    }
}

impl fmt::Debug for PendingTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        setup::debug_request(f, "PendingTask", self.tenant, self.class)
    }
}

/// The result of a submitted task: [`join`](TaskHandle::join) blocks for it, `.await` waits
/// for it asynchronously.
///
/// Dropping the handle does not cancel the task; [`cancel`](TaskHandle::cancel) does, while
/// the task is still queued.
pub struct TaskHandle<R> {
    rx: oneshot::Receiver<R>,
    ticket: Ticket,
    pool: Weak<Shared>,
}

impl<R> TaskHandle<R> {
    /// Wait for the task: its value, or why there is none.
    pub fn join(self) -> Result<R, TaskError> {
        self.rx.wait()
    }

    /// Whether the result is ready (`join` would not block).
    pub fn is_finished(&self) -> bool {
        self.rx.is_done()
    }

    /// Remove the task if it is still queued. Returns `true` if it was removed (the handle
    /// then resolves to [`TaskError::Cancelled`]), `false` if it already started, finished
    /// or was handed back.
    pub fn cancel(&self) -> bool {
        let Some(shared) = self.pool.upgrade() else {
            return false;
        };
        let mut st = shared.lock();
        let now = shared.now();
        match st.sched.cancel(self.ticket, now) {
            Ok(req) => {
                st.stats.get(req.tenant).cancelled();
                let job = st.jobs.take(req.payload);
                shared.check_idle(&st);
                drop(st);
                self.rx.resolve(Err(TaskError::Cancelled));
                drop(job); // user code (the closure's captures) runs outside the pool's lock
                true
            }
            // Started, finished or handed back already: not an error of the scheduler.
            Err(
                fairlane_core::Error::AlreadyRunning(_) | fairlane_core::Error::UnknownTicket(_),
            ) => false,
            // Anything else is the scheduler refusing a valid cancellation: counted and logged.
            Err(e) => {
                st.sched_error("a cancellation", e);
                false
            }
        }
    }
}

impl<R> Future for TaskHandle<R> {
    type Output = Result<R, TaskError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.rx.poll(cx)
    }
}

impl<R> fmt::Debug for TaskHandle<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("ticket", &self.ticket)
            .field("finished", &self.is_finished())
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Open,
    /// `shutdown`: no new tasks; workers run the queue dry, then exit.
    Draining,
    /// `shutdown_now`: the queue was handed back; workers exit after their current task.
    Stopping,
}

struct Running {
    ticket: Ticket,
    meter: Meter,
    /// The largest usage reported by the refresh thread, so the final report never goes back.
    reported: f64,
}

struct State {
    /// The scheduler; its payloads are keys into `jobs`, so any built scheduler fits.
    sched: BoxedScheduler,
    /// Queued jobs by key (the slot index).
    jobs: Slab<Job>,
    /// Scheduler calls that failed (each is also logged): a bug, never silently dropped.
    errors: u64,
    /// Workers idling on a `RetryAt`: a completion must wake them (it may open a window).
    retrying: usize,
    /// Each worker's running task, on cache lines of its own: each worker writes its entry
    /// on every task, and two entries on one line would bounce it between the workers.
    running: Vec<CachePadded<Option<Running>>>,
    /// Idle workers, and those of them already woken by `submit`.
    wake: Wakeups,
    /// Threads blocked in `wait_idle`.
    idle_waiters: usize,
    phase: Phase,
    stats: Stats,
}

/// A value on cache lines of its own: the pool's lock word is written by every thread on every
/// task, and would otherwise share its line with the `Arc`'s reference counts (which every
/// submitted task's handle changes) and the read-mostly fields beside it.
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

pub(crate) struct Shared {
    state: CachePadded<Mutex<State>>,
    work: Condvar,
    /// Signalled when the pool becomes idle and someone waits in `wait_idle`.
    idle_cv: Condvar,
    /// The refresh thread's stop flag and the clock time its next report is due.
    stop: Mutex<(bool, Duration)>,
    /// Refresh charging's period, if on.
    refresh: Option<Duration>,
    stop_cv: Condvar,
    clock: SharedClock,
    cost_clock: CostClock,
    max_queued: usize,
    max_queued_per_tenant: usize,
    requires_cost: bool,
    workers: usize,
    name: &'static str,
}

impl State {
    /// Count and log a scheduler call that failed: the pool carries on, but never silently.
    fn sched_error(&mut self, what: &str, e: fairlane_core::Error) {
        self.errors += 1;
        eprintln!("fairlane-runtime pool: scheduler refused {what}: {e}");
    }
}

impl Shared {
    /// The pool's lock. No spin of our own before it: the standard mutex already spins
    /// 100 `pause`s (≈ 3.5 µs on the project's VM, 35 ns each) before parking, several times
    /// the pool's longest critical section.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Nanoseconds on the pool's clock: the scheduler's time unit.
    fn now(&self) -> f64 {
        nanos(&*self.clock)
    }

    /// [`now`](Shared::now) at the real instant `at`, which the caller has just read
    /// (a worker's task boundary), if the clock can tell it without a second reading.
    fn now_at(&self, at: Instant) -> f64 {
        nanos_at(&*self.clock, at)
    }

    /// Wake `wait_idle` callers if the pool just became idle.
    fn check_idle(&self, st: &State) {
        if st.idle_waiters > 0 && st.sched.queued() + st.sched.running() == 0 {
            self.idle_cv.notify_all();
        }
    }
}

thread_local! {
    /// The pool whose worker this thread is (0 for none), so `shutdown` from a task does not
    /// try to join its own thread.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}

/// Builds a [`FairPool`].
///
/// Defaults: as many workers as the machine has cores, the `2dfqe` preset with unseen
/// (tenant, class) pairs estimated at 1 ms of CPU, refresh charging every 10 ms, per-thread
/// CPU time as the cost ([`CostClock::best`]), at most 100,000 queued tasks of which 10,000
/// per tenant.
#[derive(Clone, Debug)]
pub struct PoolBuilder {
    common: Common,
    initial_estimate: Duration,
    refresh: Option<Duration>,
    cost_clock: Option<CostClock>,
    thread_name: String,
    stack_size: Option<usize>,
}

impl Default for PoolBuilder {
    fn default() -> Self {
        PoolBuilder {
            common: Common::default(),
            initial_estimate: Duration::from_millis(1),
            refresh: Some(Duration::from_millis(10)),
            cost_clock: None,
            thread_name: "fairlane-worker".into(),
            stack_size: None,
        }
    }
}

impl PoolBuilder {
    common_setters!(
        PoolBuilder,
        workers: "Number of worker threads (≥ 1; default: one per core).",
        max_queued: "At most this many queued tasks over all tenants (default 100,000); more \
                     are refused with [`SubmitError::QueueFull`].",
        max_queued_per_tenant: "At most this many queued tasks per tenant (default 10,000); \
                                more are refused with [`SubmitError::TenantQueueFull`].",
        units: "The pool's time and cost unit is the nanosecond (CPU nanoseconds with \
                [`CostClock::ThreadCpu`]): set estimates in nanoseconds too.",
        with_cost: "[`FairPool::submit_with_cost`]",
        route: "[`FairPool::submit_at`]; an exempt level's tasks take the next free thread \
                ahead of every level",
        clock: "A [`ManualClock`](crate::ManualClock) makes `RetryAt` waits and queue-wait \
                metrics follow test-driven time; task costs stay measured by the [`CostClock`].",
    );

    /// The estimate for a (tenant, class) pair never seen before, for presets (default 1 ms:
    /// pessimistic about newcomers, in 2DFQᴱ's spirit; retroactive charging refunds it).
    pub fn initial_estimate(mut self, estimate: Duration) -> Self {
        self.initial_estimate = estimate;
        self
    }

    /// Report running tasks' usage this often (2DFQ §5 refresh charging; default 10 ms).
    /// `None` turns the refresh thread off: costs are then charged only at completion.
    pub fn refresh_interval(mut self, every: Option<Duration>) -> Self {
        self.refresh = every;
        self
    }

    /// How task costs are measured (default [`CostClock::best`]).
    pub fn cost_clock(mut self, clock: CostClock) -> Self {
        self.cost_clock = Some(clock);
        self
    }

    /// Name of the worker threads (suffixed with their index).
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Stack size of the worker threads, in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Start the pool's threads.
    pub fn build(self) -> Result<FairPool, BuildError> {
        if let Some(every) = self.refresh {
            if every.is_zero() {
                return Err(config_error(
                    "refresh_interval",
                    "must be > 0 (use None to turn refresh charging off)".into(),
                ));
            }
        }
        let cost_clock = self.cost_clock.unwrap_or_else(CostClock::best);
        if cost_clock == CostClock::ThreadCpu && !crate::cpu::thread_cpu_supported() {
            return Err(config_error(
                "cost_clock",
                "per-thread CPU clocks are not supported on this platform; use CostClock::Wall"
                    .into(),
            ));
        }
        let initial = self.initial_estimate.as_nanos() as f64;
        let (max_queued, max_queued_per_tenant) =
            (self.common.max_queued, self.common.max_queued_per_tenant);
        let (sched, clock) = self.common.build("workers", "max_queued", initial)?;
        let workers = sched.workers();
        let (requires_cost, name) = (sched.requires_cost(), sched.name());
        let shared = Arc::new(Shared {
            state: CachePadded(Mutex::new(State {
                sched,
                jobs: Slab::default(),
                errors: 0,
                retrying: 0,
                running: (0..workers).map(|_| CachePadded(None)).collect(),
                wake: Wakeups::default(),
                idle_waiters: 0,
                phase: Phase::Open,
                stats: Stats::new("pool"),
            })),
            work: Condvar::new(),
            idle_cv: Condvar::new(),
            stop: Mutex::new((false, clock.now() + self.refresh.unwrap_or_default())),
            refresh: self.refresh,
            stop_cv: Condvar::new(),
            clock: clock.clone(),
            cost_clock,
            max_queued,
            max_queued_per_tenant,
            requires_cost,
            workers,
            name,
        });
        // A manual clock's jump may end a `RetryAt` wait: wake the workers to ask again.
        time::on_advance(&clock, &shared, |s| {
            drop(s.lock());
            s.work.notify_all();
            if let Some(every) = s.refresh {
                refresh_due(&s, every);
            }
        });
        let pool = FairPool {
            shared: shared.clone(),
            threads: Mutex::new(Threads::default()),
        };
        for w in 0..workers {
            let s = shared.clone();
            let mut b = std::thread::Builder::new().name(format!("{}-{w}", self.thread_name));
            if let Some(size) = self.stack_size {
                b = b.stack_size(size);
            }
            match b.spawn(move || worker_main(&s, w)) {
                Ok(h) => pool.threads_lock().workers.push(h),
                Err(e) => return Err(BuildError::Spawn(e)), // Drop shuts the started ones down
            }
        }
        if let Some(every) = self.refresh {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("{}-refresh", self.thread_name))
                .spawn(move || refresh_main(&s, every))
                .map_err(BuildError::Spawn)?;
            pool.threads_lock().refresh = Some(h);
        }
        Ok(pool)
    }
}

#[derive(Default)]
struct Threads {
    workers: Vec<JoinHandle<()>>,
    refresh: Option<JoinHandle<()>>,
}

/// A fair thread pool: n OS threads, one fairlane-core scheduler deciding which tenant's task
/// runs next on which thread, each task charged the CPU time it really used.
///
/// ```
/// use fairlane_runtime::FairPool;
///
/// let pool = FairPool::builder().workers(2).preset("2dfqe").build().unwrap();
/// pool.set_weight(1u64, 3.0).unwrap(); // tenant 1 gets three times tenant 2's share
/// let a = pool.submit(1u64, 0u32, || 6 * 7).unwrap();
/// let b = pool.submit(2u64, 0u32, || panic!("bad request")).unwrap();
/// assert_eq!(a.join().unwrap(), 42);
/// assert!(b.join().is_err()); // the panic is returned; the worker lives on
/// pool.shutdown(); // runs every accepted task, then stops the threads
/// ```
///
/// `FairPool` is `Send + Sync`: share it by reference or in an `Arc` to submit from many
/// threads. Dropping it shuts it down gracefully (runs every queued task first).
pub struct FairPool {
    shared: Arc<Shared>,
    threads: Mutex<Threads>,
}

impl fmt::Debug for FairPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairPool")
            .field("scheduler", &self.shared.name)
            .field("workers", &self.shared.workers)
            .finish_non_exhaustive()
    }
}

impl FairPool {
    /// Start building a pool.
    pub fn builder() -> PoolBuilder {
        PoolBuilder::default()
    }

    fn threads_lock(&self) -> MutexGuard<'_, Threads> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Submit a task of unknown cost; the scheduler estimates it and charges the CPU time it
    /// really used when it finishes.
    pub fn submit<F, R>(
        &self,
        tenant: impl Into<TenantId>,
        class: impl Into<ClassId>,
        task: F,
    ) -> Result<TaskHandle<R>, SubmitError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.submit_at(tenant, class, Route::default(), None, task)
    }

    /// Submit a task to priority level `route.level`, as flow (tenant,
    /// `route.distinguisher`) (a [`LevelId`](crate::LevelId) alone: the tenant is the flow),
    /// with its cost if known up front. Without [levels](PoolBuilder::levels) the route
    /// changes nothing. A level whose queue is full refuses with [`SubmitError::Level`].
    pub fn submit_at<F, R>(
        &self,
        tenant: impl Into<TenantId>,
        class: impl Into<ClassId>,
        route: impl Into<Route>,
        cost: Option<Duration>,
        task: F,
    ) -> Result<TaskHandle<R>, SubmitError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tenant, class, route) = (tenant.into(), class.into(), route.into());
        let cost = cost.map(|c| c.as_nanos() as f64);
        // Checked before taking the lock: the core drops a refused request's payload itself,
        // and the payload's drop is user code.
        if cost.is_none() && self.shared.requires_cost {
            return Err(SubmitError::Scheduler(fairlane_core::Error::CostRequired {
                tenant,
                class,
            }));
        }
        let (job, rx) = oneshot::task(task);
        let shared = &self.shared;
        // Read before the lock, which workers wait for: the scheduler keeps its own time
        // monotone, so a reading a moment older than another thread's is fine.
        let now = shared.now();
        let mut st = shared.lock();
        if st.phase != Phase::Open {
            drop(st);
            return Err(SubmitError::ShutDown);
        }
        if st.sched.queued() >= shared.max_queued {
            st.stats.get(tenant).rejected();
            drop(st);
            return Err(SubmitError::QueueFull {
                limit: shared.max_queued,
            });
        }
        let stat = st.stats.lookup(tenant);
        if stat.map_or(0, |i| st.stats.at(i).m.queued) >= shared.max_queued_per_tenant {
            st.stats.get(tenant).rejected();
            drop(st);
            return Err(SubmitError::TenantQueueFull {
                tenant,
                limit: shared.max_queued_per_tenant,
            });
        }
        let key = st.jobs.insert(Job {
            task: job,
            submitted: now,
            stat: 0, // set once the scheduler accepted it (a refused tenant gets no entry)
        });
        let mut req = Request::new(tenant, class, key);
        (req.level, req.distinguisher) = (route.level, route.distinguisher);
        if let Some(c) = cost {
            req = req.with_cost(c);
        }
        let ticket = match st.sched.enqueue(req, now) {
            Ok(t) => t,
            Err(e) => {
                let job = st.jobs.take(key);
                let e = match LevelRefusal::from_scheduler(e, &st.sched) {
                    Ok(refusal) => {
                        st.stats.get(tenant).rejected();
                        SubmitError::Level(refusal)
                    }
                    Err(e) => SubmitError::Scheduler(e),
                };
                drop(st);
                drop(job); // user code runs outside the pool's lock
                return Err(e);
            }
        };
        let stat = stat.unwrap_or_else(|| st.stats.slot(tenant));
        st.stats.at(stat).enqueued();
        if let Some(job) = st.jobs.get_mut(key) {
            job.stat = stat;
        }
        let wake = st.wake.submit();
        drop(st);
        if wake {
            shared.work.notify_one();
        }
        Ok(TaskHandle {
            rx,
            ticket,
            pool: Arc::downgrade(shared),
        })
    }

    /// The priority levels ([`PoolBuilder::levels`]) as a debug dump shows them: nominal and
    /// current threads, threads in use, lent, borrowed and queued per level. Empty without
    /// levels.
    pub fn levels(&self) -> Vec<LevelSnapshot> {
        levels::snapshot(&self.shared.lock().sched, None)
    }

    /// Reconfigure the priority levels (a reload): every queued task keeps its place and
    /// every running one runs on (levels are matched by name; see the core's
    /// `LevelScheduler::reconfigure`). ServerCL stays the pool's threads. A pool without
    /// levels refuses.
    pub fn set_levels(&self, config: &LevelsConfig) -> Result<(), fairlane_core::Error> {
        self.shared.lock().sched.set_levels(config)?;
        self.shared.work.notify_all(); // a level's limit may have grown
        Ok(())
    }

    /// Submit a task whose cost is known up front (2DFQ §4), in CPU time. It is still
    /// reconciled with the measured cost at completion.
    pub fn submit_with_cost<F, R>(
        &self,
        tenant: impl Into<TenantId>,
        class: impl Into<ClassId>,
        cost: Duration,
        task: F,
    ) -> Result<TaskHandle<R>, SubmitError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.submit_at(tenant, class, Route::default(), Some(cost), task)
    }

    setup::scheduler_views!(
        set_weight: "Set a tenant's weight φ (its share is proportional to it; default 1).",
        tenant: "The scheduler's view of a tenant: weight, queued and running counts, and its \
                 virtual start tag (nanoseconds of cost per unit weight), which refresh and \
                 retroactive charging move.",
        metrics: "Per-tenant counters and histograms (wait time in ns, cost in CPU or wall ns).",
        errors: "Scheduler calls that failed so far (each was logged to stderr). Zero unless the \
                 scheduler has a bug or refused a report.",
    );

    /// Tasks queued now.
    pub fn queued(&self) -> usize {
        self.shared.lock().sched.queued()
    }

    /// Tasks running now.
    pub fn running(&self) -> usize {
        self.shared.lock().sched.running()
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.workers
    }

    /// How task costs are measured.
    pub fn cost_clock(&self) -> CostClock {
        self.shared.cost_clock
    }

    /// Block until no task is queued or running (every task submitted so far has finished
    /// and is in [`metrics`](FairPool::metrics); the last handles are filled a moment later,
    /// so `join` may still wait briefly). Returns at once when called from one of the pool's
    /// own tasks, which could never see the pool idle.
    pub fn wait_idle(&self) {
        let me = Arc::as_ptr(&self.shared) as usize;
        if WORKER_OF.with(|w| w.get()) == me {
            return;
        }
        let mut st = self.shared.lock();
        while st.sched.queued() + st.sched.running() > 0 {
            st.idle_waiters += 1;
            st = time::wait(&self.shared.idle_cv, st, None);
            st.idle_waiters -= 1;
        }
    }

    /// Graceful shutdown: refuse new tasks, run every queued task, then stop the threads.
    /// Returns once they have stopped (called from one of the pool's own tasks, it only
    /// starts the shutdown). Calling it again is harmless.
    pub fn shutdown(&self) {
        {
            let mut st = self.shared.lock();
            if st.phase == Phase::Open {
                st.phase = Phase::Draining;
            }
        }
        self.shared.work.notify_all();
        self.join_threads();
    }

    /// Immediate shutdown: refuse new tasks, let running tasks finish, and hand back every
    /// queued task instead of running it. Nothing is lost: each accepted task has run, or is
    /// in the returned list (run it with [`PendingTask::run`], or drop it and its handle
    /// resolves to [`TaskError::NotRun`]).
    pub fn shutdown_now(&self) -> Vec<PendingTask> {
        let mut pending = Vec::new();
        {
            let mut st = self.shared.lock();
            st.phase = Phase::Stopping;
            let mut now = self.shared.now();
            // The seam has no "list the queue", so empty it through dequeue and settle each
            // request at zero cost. Bounded by the queue length (plus RetryAt hops).
            let mut budget = 2 * st.sched.queued() + 16;
            while budget > 0 {
                budget -= 1;
                match st.sched.dequeue(0, now) {
                    Ok(Decision::Run(Dispatch {
                        ticket, request, ..
                    })) => {
                        if let Err(e) = st.sched.complete(ticket, 0.0, now) {
                            st.sched_error("a handed-back task's completion", e);
                        }
                        st.stats.get(request.tenant).cancelled();
                        if let Some(job) = st.jobs.take(request.payload) {
                            pending.push(PendingTask {
                                tenant: request.tenant,
                                class: request.class,
                                job,
                            });
                        }
                    }
                    // ∞ = after the next completion: no request will complete here, so a
                    // far time stands for it (the queue is being emptied, not served).
                    Ok(Decision::RetryAt(t)) => now = now.max(t.min(f64::MAX / 2.0)),
                    Ok(Decision::Empty) => break,
                    Err(e) => {
                        st.sched_error("a dequeue at shutdown", e);
                        break;
                    }
                }
            }
            self.shared.check_idle(&st);
        }
        self.shared.work.notify_all();
        self.join_threads();
        pending
    }

    fn join_threads(&self) {
        let me = Arc::as_ptr(&self.shared) as usize;
        if WORKER_OF.with(|w| w.get()) == me {
            return; // a task of this pool cannot wait for its own thread
        }
        let mut threads = self.threads_lock();
        for h in threads.workers.drain(..) {
            let _ = h.join();
        }
        if let Some(h) = threads.refresh.take() {
            self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()).0 = true;
            self.shared.stop_cv.notify_all();
            let _ = h.join();
        }
    }
}

impl Drop for FairPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A task taken off the queue for one worker.
struct Started {
    ticket: Ticket,
    /// The tenant's index in `Stats`.
    stat: u32,
    job: Job,
}

/// Record that worker `w` starts the dispatched request, metering from `meter`.
fn start(st: &mut State, w: usize, d: Dispatch<u64>, now: f64, meter: Meter) -> Option<Started> {
    let Dispatch {
        ticket, request, ..
    } = d;
    let Request { payload, .. } = request;
    let Some(payload) = st.jobs.take(payload) else {
        // A key the pool never issued: a scheduler bug. Settle it so the seat is not lost.
        st.sched_error(
            "nothing (it dispatched an unknown key)",
            fairlane_core::Error::UnknownTicket(ticket),
        );
        if let Err(e) = st.sched.complete(ticket, 0.0, now) {
            st.sched_error("an unknown key's completion", e);
        }
        return None;
    };
    st.stats
        .at(payload.stat)
        .started((now - payload.submitted).max(0.0) as u64);
    *st.running[w] = Some(Running {
        ticket,
        meter,
        reported: 0.0,
    });
    Some(Started {
        ticket,
        stat: payload.stat,
        job: payload,
    })
}

/// Worker `w`'s next task from the scheduler, waiting while none may run: until a submit
/// or a completion notifies, or until the time a `RetryAt` named. `None` once the pool
/// stops (or, draining, has nothing left for this worker).
#[inline]
fn wait_for_task(shared: &Shared, w: usize, meter: &mut WorkerMeter) -> Option<Started> {
    let mut st = shared.lock();
    loop {
        let now = shared.now();
        match st.sched.dequeue(w, now) {
            Ok(Decision::Run(d)) => {
                if let Some(t) = start(&mut st, w, d, now, meter.resume()) {
                    return Some(t);
                }
            }
            Ok(Decision::RetryAt(t)) => {
                // `Decision`'s contract: ask again at `t` (a timed wait), at the
                // next completion (`retrying` makes it notify) or enqueue.
                if st.phase == Phase::Stopping {
                    return None;
                }
                st.wake.sleep();
                st.retrying += 1;
                // ∞ or a time not after now: at the next event (no spin);
                // a clock that is not real wakes the workers when it moves.
                let timed = t.is_finite() && t > now && shared.clock.is_real();
                let timeout =
                    timed.then(|| Duration::from_nanos((t - now).clamp(1e3, 1e12) as u64));
                st = time::wait(&shared.work, st, timeout);
                st.retrying -= 1;
                st.wake.woke();
            }
            r @ (Ok(Decision::Empty) | Err(_)) => {
                if let Err(e) = r {
                    st.sched_error("a dequeue", e);
                }
                if st.phase != Phase::Open {
                    return None;
                }
                st.wake.sleep();
                st = time::wait(&shared.work, st, None);
                st.wake.woke();
            }
        }
    }
}

fn worker_main(shared: &Arc<Shared>, w: usize) {
    WORKER_OF.with(|c| c.set(Arc::as_ptr(shared) as usize));
    let mut meter = WorkerMeter::for_this_thread(shared.cost_clock == CostClock::ThreadCpu);
    let mut next: Option<Started> = None;
    loop {
        let task = match next.take() {
            Some(t) => t,
            None => match wait_for_task(shared, w, &mut meter) {
                Some(t) => t,
                None => return,
            },
        };
        let Started { ticket, stat, job } = task;
        let mut settled = false;
        // Called by the task wrapper once the task has returned (before its handle is filled):
        // settle the cost and take the next task in one critical section. The meter reading
        // that ends this task starts the next one, so the dispatch overhead between them is
        // charged to the next task; the meter reads the thread CPU clock only when its rules
        // need it (`meter.rs`: exact without preemption, bounded error with).
        let mut done = |panicked: bool| {
            if std::mem::replace(&mut settled, true) {
                return;
            }
            // One reading of the monotonic clock ends the task for the meter and is the
            // scheduler's `now` (a vDSO call less per task; the scheduler keeps its own time
            // monotone, so a reading taken just before the lock is fine).
            let ended = Instant::now();
            let used = meter.boundary(ended);
            let following = meter.current();
            let mut st = shared.lock();
            let reported = st.running[w].take().map_or(0.0, |r| r.reported);
            let used = used.max(reported);
            let now = shared.now_at(ended);
            if let Err(e) = st.sched.complete(ticket, used, now) {
                st.sched_error("a completion", e);
            }
            st.stats.at(stat).finished(used, panicked);
            if st.retrying > 0 {
                shared.work.notify_all(); // the completion may have opened a window
            }
            match st.sched.dequeue(w, now) {
                Ok(Decision::Run(d)) => next = start(&mut st, w, d, now, following),
                Ok(_) => shared.check_idle(&st),
                Err(e) => {
                    st.sched_error("a dequeue", e);
                    shared.check_idle(&st);
                }
            }
        };
        // The task catches its own panic; this catches anything else (a panicking drop of a
        // capture), so nothing ever unwinds a worker.
        let outer = catch_unwind(AssertUnwindSafe(|| job.task.run(&mut done)));
        done(outer.is_err()); // no-op if the task already reported
    }
}

/// Every `every` on the pool's clock, report each running task's usage so far (refresh
/// charging, 2DFQ §5). A manual clock's `advance` also runs a due report at once, on the
/// advancing thread ([`refresh_due`]), so tests see it without waiting.
fn refresh_main(shared: &Shared, every: Duration) {
    loop {
        {
            let mut stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if stop.0 {
                    return;
                }
                let now = shared.clock.now();
                if now >= stop.1 {
                    break;
                }
                // Real time and clock time agree for the system clock; another clock's
                // advance reports on its own (`refresh_due`), so only a stop wakes us.
                let timeout = shared.clock.is_real().then(|| (stop.1 - now).min(every));
                stop = time::wait(&shared.stop_cv, stop, timeout);
            }
        }
        refresh_due(shared, every);
    }
}

/// If a refresh is due on the pool's clock, report every running task's usage so far.
fn refresh_due(shared: &Shared, every: Duration) {
    {
        let mut stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
        let now = shared.clock.now();
        if stop.0 || now < stop.1 {
            return;
        }
        stop.1 = now + every;
        // Reported under the flag's lock: a manual clock's `advance` that finds the report
        // taken by the thread returns only once it is done.
        report_usage(shared);
    }
}

/// Read each running task's meter (outside the pool's lock) and report it (`progress`).
fn report_usage(shared: &Shared) {
    let mut running: Vec<(usize, Ticket, Meter)> = Vec::new();
    let mut readings: Vec<(usize, Ticket, f64)> = Vec::new();
    {
        let st = shared.lock();
        for (w, r) in st.running.iter().enumerate() {
            if let Some(r) = &**r {
                running.push((w, r.ticket, r.meter));
            }
        }
    }
    for &(w, ticket, meter) in &running {
        if let Some(used) = meter.used() {
            readings.push((w, ticket, used));
        }
    }
    if readings.is_empty() {
        return;
    }
    let mut guard = shared.lock();
    let st = &mut *guard;
    let now = shared.now();
    for &(w, ticket, used) in &readings {
        if let Some(r) = st.running[w].as_mut() {
            // Tickets are never reused: a match means the same task is still running.
            if r.ticket == ticket && used > r.reported {
                r.reported = used;
                if let Err(e) = st.sched.progress(ticket, used, now) {
                    st.sched_error("a refresh report", e);
                }
            }
        }
    }
}
