//! The mixed workload of the cycle benches (`cycle.rs`, `levels.rs`): 32 workers, even
//! tenants sending small requests (cost ≈ 1), odd ones large (≈ 1000), with a little
//! deterministic jitter.

/// Workers of the cycle benches.
pub const WORKERS: usize = 32;

/// The cost of tenant `tenant`'s `i`-th request.
pub fn cost(tenant: usize, i: u64) -> f64 {
    let jitter = ((tenant as u64).wrapping_mul(2654435761) ^ i.wrapping_mul(40503)) % 100;
    if tenant.is_multiple_of(2) {
        1.0 + jitter as f64 / 1000.0
    } else {
        1000.0 + jitter as f64
    }
}
