//! A multiplicative hash for tenant ids. Self-contained, so the pool bench's ladder
//! (`benches/pool.rs`) compiles this very file rather than a copy.

use std::hash::Hasher;

/// A multiplicative hash for tenant ids (FxHash's step): the stats table is looked up under
/// the executor's lock, where SipHash's DoS resistance buys nothing.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}
