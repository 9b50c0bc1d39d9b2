//! With the `metrics` feature, per-tenant events reach the installed `metrics` recorder.
//! Run: `cargo test -p fairlane-runtime --features metrics --test metrics_export`
#![cfg(feature = "metrics")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fairlane_runtime::FairPool;
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

type Values = Arc<Mutex<HashMap<String, f64>>>;

struct Cell {
    name: String,
    values: Values,
}

impl Cell {
    fn add(&self, v: f64) {
        *self
            .values
            .lock()
            .unwrap()
            .entry(self.name.clone())
            .or_default() += v;
    }
}
impl CounterFn for Cell {
    fn increment(&self, v: u64) {
        self.add(v as f64);
    }
    fn absolute(&self, v: u64) {
        self.values
            .lock()
            .unwrap()
            .insert(self.name.clone(), v as f64);
    }
}
impl GaugeFn for Cell {
    fn increment(&self, v: f64) {
        self.add(v);
    }
    fn decrement(&self, v: f64) {
        self.add(-v);
    }
    fn set(&self, v: f64) {
        self.values.lock().unwrap().insert(self.name.clone(), v);
    }
}
impl HistogramFn for Cell {
    fn record(&self, _: f64) {
        self.add(1.0); // count of samples
    }
}

/// Stores every metric as `name{executor,tenant}` → value.
struct Store(Values);

impl Store {
    fn cell(&self, key: &Key) -> Arc<Cell> {
        let labels: Vec<String> = key.labels().map(|l| l.value().to_string()).collect();
        Arc::new(Cell {
            name: format!("{}{{{}}}", key.name(), labels.join(",")),
            values: self.0.clone(),
        })
    }
}

impl Recorder for Store {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key))
    }
}

#[test]
fn pool_events_are_exported_per_tenant() {
    let values: Values = Arc::default();
    let store = Store(values.clone());
    let pool = FairPool::builder().workers(1).build().unwrap();
    metrics::with_local_recorder(&store, || {
        // Handles are registered when a tenant is first seen (here, on this thread).
        for _ in 0..3 {
            pool.submit(1u64, 0u32, || ()).unwrap().join().unwrap();
        }
        pool.submit(2u64, 0u32, || -> () { panic!("x") })
            .unwrap()
            .join()
            .unwrap_err();
    });
    let v = values.lock().unwrap();
    assert_eq!(v["fairlane_completed_total{pool,1}"], 3.0);
    assert_eq!(v["fairlane_panicked_total{pool,2}"], 1.0);
    assert_eq!(v["fairlane_queued{pool,1}"], 0.0);
    assert_eq!(v["fairlane_running{pool,1}"], 0.0);
    assert_eq!(v["fairlane_wait_seconds{pool,1}"], 3.0);
    assert_eq!(v["fairlane_cost{pool,1}"], 3.0);
}
