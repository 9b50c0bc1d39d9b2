//! `fairlane.Scheduler`: the core seam (`enqueue → dequeue → progress* → complete`) for
//! Python executors. Tenants and classes are ints or strings; strings get ids in order of
//! first use from a range ints are unlikely to reach, so ties between strings break in that
//! order. Tickets are ints.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Mutex;

use fairlane_core::{Config, Decision, Request, Scheduler as Seam, TenantId, Ticket, VirtualClock};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

/// First id given to a string tenant.
const STR_TENANT_BASE: u64 = 1 << 62;
/// First id given to a string class.
const STR_CLASS_BASE: u32 = 1 << 30;

/// A multiply-rotate hasher (FxHash's): the maps here are keyed by our own ids and tenant
/// names on the per-request path, where SipHash's DoS resistance buys nothing.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Names that are ints or strings, and the way back.
struct Names<I> {
    ids: FastMap<String, I>,
    names: FastMap<I, Py<PyString>>,
}

struct Inner {
    seam: Box<dyn Seam<Py<PyAny>> + Send>,
    tenants: Names<u64>,
    classes: Names<u32>,
    /// Live tickets by their number (`Ticket` is opaque outside the core crate).
    tickets: FastMap<u64, Ticket>,
}

/// A fair scheduler behind the seam `enqueue → dequeue(worker) → progress* → complete`;
/// every call takes `now` in the caller's time unit (the scheduler reads no clock).
#[pyclass(module = "fairlane._fairlane")]
pub struct Scheduler {
    inner: Mutex<Inner>,
    name: &'static str,
}

/// A request handed to a worker by `dequeue`.
#[pyclass(module = "fairlane._fairlane", frozen, get_all)]
pub struct Dispatch {
    /// Report `progress` and `complete` with this.
    pub ticket: u64,
    /// The tenant, as it was given (int or str).
    pub tenant: PyObject,
    /// The class, as it was given (int or str).
    pub cls: PyObject,
    /// The payload given to `enqueue`.
    pub payload: PyObject,
    /// The known cost, or `None`.
    pub cost: Option<f64>,
    /// What the tenant was charged up front (known cost or estimate).
    pub charged: f64,
}

#[pymethods]
impl Dispatch {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Dispatch(ticket={}, tenant={}, cls={}, charged={})",
            self.ticket,
            self.tenant
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.cls
                .bind(py)
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.charged
        )
    }
}

fn core_err(e: fairlane_core::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn tenant_id(inner: &mut Inner, t: &Bound<'_, PyAny>) -> PyResult<u64> {
    inner.tenants.id(
        t,
        |n| STR_TENANT_BASE + n as u64,
        "tenant",
        "tenant: an int tenant must be in 0..2**64",
    )
}

fn class_id(inner: &mut Inner, c: &Bound<'_, PyAny>) -> PyResult<u32> {
    inner.classes.id(
        c,
        |n| STR_CLASS_BASE + n as u32,
        "cls",
        "cls: an int class must be in 0..2**32",
    )
}

/// A tenant id looked up without creating it.
fn known_tenant(inner: &Inner, t: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(s) = t.downcast::<PyString>() {
        return Ok(inner
            .tenants
            .ids
            .get(s.to_str()?)
            .copied()
            // An unseen name: an id no tenant has, so the scheduler reports it unknown.
            .unwrap_or(u64::MAX));
    }
    t.extract::<u64>()
        .map_err(|_| PyTypeError::new_err("tenant must be an int (0..2**64) or a str"))
}

fn ticket(inner: &Inner, t: u64) -> PyResult<Ticket> {
    inner
        .tickets
        .get(&t)
        .copied()
        .ok_or_else(|| PyValueError::new_err(format!("unknown ticket {t}")))
}

impl<I: Copy + Eq + Hash + for<'py> FromPyObject<'py>> Names<I> {
    /// The id of a name given as an int (its own id) or a str (on first use, the id `nth`
    /// gives the count of strs seen before it). `field` names the argument in the type error;
    /// `out_of_range` is the error for an int the id type cannot hold.
    fn id(
        &mut self,
        v: &Bound<'_, PyAny>,
        nth: impl FnOnce(usize) -> I,
        field: &str,
        out_of_range: &str,
    ) -> PyResult<I> {
        if let Ok(s) = v.downcast::<PyString>() {
            let key = s.to_str()?;
            if let Some(&id) = self.ids.get(key) {
                return Ok(id);
            }
            let id = nth(self.ids.len());
            self.ids.insert(key.to_string(), id);
            self.names.insert(id, s.clone().unbind());
            return Ok(id);
        }
        if v.is_instance_of::<PyInt>() {
            return v
                .extract::<I>()
                .map_err(|_| PyValueError::new_err(out_of_range.to_string()));
        }
        Err(PyTypeError::new_err(format!("{field} must be an int or a str")))
    }
}

impl<I> Default for Names<I> {
    fn default() -> Self {
        Names {
            ids: FastMap::default(),
            names: FastMap::default(),
        }
    }
}

impl Scheduler {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Scheduler {
    /// `Scheduler(preset, workers=1, *, gps_capacity=None, default_weight=None)`.
    #[new]
    #[pyo3(signature = (preset, workers=1, *, gps_capacity=None, default_weight=None))]
    fn new(
        preset: &str,
        workers: usize,
        gps_capacity: Option<f64>,
        default_weight: Option<f64>,
    ) -> PyResult<Self> {
        let mut c = Config::preset(preset).map_err(core_err)?.workers(workers);
        if let Some(capacity) = gps_capacity {
            c = c.clock(VirtualClock::Gps { capacity });
        }
        if let Some(w) = default_weight {
            c = c.default_weight(w);
        }
        let seam = c.build::<Py<PyAny>>().map_err(core_err)?;
        Ok(Scheduler {
            name: seam.name(),
            inner: Mutex::new(Inner {
                seam,
                tenants: Names::default(),
                classes: Names::default(),
                tickets: FastMap::default(),
            }),
        })
    }

    /// The algorithm's short name.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    /// Number of workers.
    #[getter]
    fn workers(&self) -> usize {
        self.lock().seam.workers()
    }

    /// Change the number of workers (2DFQ re-staggers; running requests are unaffected).
    fn set_workers(&self, workers: usize) -> PyResult<()> {
        self.lock().seam.set_workers(workers).map_err(core_err)
    }

    /// Queue a request of `tenant` (int or str) and class `cls` (int or str, default 0)
    /// carrying `payload`; `cost` when known up front. Returns its ticket (an int).
    #[pyo3(signature = (tenant, cls=None, payload=None, *, cost=None, now=0.0))]
    fn enqueue(
        &self,
        py: Python<'_>,
        tenant: &Bound<'_, PyAny>,
        cls: Option<&Bound<'_, PyAny>>,
        payload: Option<PyObject>,
        cost: Option<f64>,
        now: f64,
    ) -> PyResult<u64> {
        let mut g = self.lock();
        let t = tenant_id(&mut g, tenant)?;
        let c = match cls {
            Some(c) => class_id(&mut g, c)?,
            None => 0,
        };
        let mut r = Request::new(t, c, payload.unwrap_or_else(|| py.None()));
        if let Some(cost) = cost {
            r = r.with_cost(cost);
        }
        let k = g.seam.enqueue(r, now).map_err(core_err)?;
        g.tickets.insert(k.as_u64(), k);
        Ok(k.as_u64())
    }

    /// What `worker` runs next: a `Dispatch`, `None` when nothing is queued, or a float:
    /// ask again at that time.
    #[pyo3(signature = (worker, now=0.0))]
    fn dequeue(&self, py: Python<'_>, worker: usize, now: f64) -> PyResult<PyObject> {
        let mut g = self.lock();
        match g.seam.dequeue(worker, now).map_err(core_err)? {
            Decision::Run(d) => {
                let tid = d.request.tenant.0;
                let tenant = match g.tenants.names.get(&tid) {
                    Some(s) => s.clone_ref(py).into_any(),
                    None => tid.into_pyobject(py)?.into_any().unbind(),
                };
                let cid = d.request.class.0;
                let cls = match g.classes.names.get(&cid) {
                    Some(s) => s.clone_ref(py).into_any(),
                    None => cid.into_pyobject(py)?.into_any().unbind(),
                };
                let out = Dispatch {
                    ticket: d.ticket.as_u64(),
                    tenant,
                    cls,
                    payload: d.request.payload,
                    cost: d.request.cost,
                    charged: d.charged,
                };
                Ok(Py::new(py, out)?.into_any())
            }
            Decision::Empty => Ok(py.None()),
            Decision::RetryAt(t) => Ok(t.into_pyobject(py)?.into_any().unbind()),
        }
    }

    /// Report a running request's cumulative usage so far (refresh charging).
    #[pyo3(signature = (ticket, used, now=0.0))]
    fn progress(&self, ticket: u64, used: f64, now: f64) -> PyResult<()> {
        let mut g = self.lock();
        let k = self::ticket(&g, ticket)?;
        g.seam.progress(k, used, now).map_err(core_err)
    }

    /// Report that a request finished having used `used` (retroactive charging).
    #[pyo3(signature = (ticket, used, now=0.0))]
    fn complete(&self, ticket: u64, used: f64, now: f64) -> PyResult<()> {
        let mut g = self.lock();
        let k = self::ticket(&g, ticket)?;
        g.seam.complete(k, used, now).map_err(core_err)?;
        g.tickets.remove(&ticket);
        Ok(())
    }

    /// Remove a queued request and return its payload.
    #[pyo3(signature = (ticket, now=0.0))]
    fn cancel(&self, ticket: u64, now: f64) -> PyResult<PyObject> {
        let mut g = self.lock();
        let k = self::ticket(&g, ticket)?;
        let r = g.seam.cancel(k, now).map_err(core_err)?;
        g.tickets.remove(&ticket);
        Ok(r.payload)
    }

    /// Set a tenant's weight φ (creating the tenant if new).
    #[pyo3(signature = (tenant, weight, now=0.0))]
    fn set_weight(&self, tenant: &Bound<'_, PyAny>, weight: f64, now: f64) -> PyResult<()> {
        let mut g = self.lock();
        let t = tenant_id(&mut g, tenant)?;
        g.seam
            .set_weight(TenantId(t), weight, now)
            .map_err(core_err)
    }

    /// Set a tenant's response-time target (EDF), or `None`.
    #[pyo3(signature = (tenant, target, now=0.0))]
    fn set_target(&self, tenant: &Bound<'_, PyAny>, target: Option<f64>, now: f64) -> PyResult<()> {
        let mut g = self.lock();
        let t = tenant_id(&mut g, tenant)?;
        g.seam
            .set_target(TenantId(t), target, now)
            .map_err(core_err)
    }

    /// Forget a tenant that has nothing queued or running.
    fn remove_tenant(&self, tenant: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut g = self.lock();
        let t = known_tenant(&g, tenant)?;
        g.seam.remove_tenant(TenantId(t)).map_err(core_err)
    }

    /// `dict(weight, queued, running, active, tag)` or `None` for an unknown tenant.
    fn tenant(&self, py: Python<'_>, tenant: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let g = self.lock();
        let t = known_tenant(&g, tenant)?;
        match g.seam.tenant(TenantId(t)) {
            None => Ok(py.None()),
            Some(v) => {
                let d = pyo3::types::PyDict::new(py);
                d.set_item("weight", v.weight)?;
                d.set_item("queued", v.queued)?;
                d.set_item("running", v.running)?;
                d.set_item("active", v.active)?;
                d.set_item("tag", v.tag)?;
                Ok(d.into_any().unbind())
            }
        }
    }

    /// Requests queued over all tenants.
    #[getter]
    fn queued(&self) -> usize {
        self.lock().seam.queued()
    }

    /// Requests running over all tenants.
    #[getter]
    fn running(&self) -> usize {
        self.lock().seam.running()
    }

    /// The system virtual time, for schedulers that keep one.
    #[getter]
    fn virtual_time(&self) -> Option<f64> {
        self.lock().seam.virtual_time()
    }

    fn __repr__(&self) -> String {
        let g = self.lock();
        format!(
            "Scheduler({:?}, workers={}, queued={}, running={})",
            self.name,
            g.seam.workers(),
            g.seam.queued(),
            g.seam.running()
        )
    }
}

/// The preset names `Scheduler` accepts.
#[pyfunction]
pub fn presets() -> Vec<&'static str> {
    fairlane_core::PRESETS.to_vec()
}
