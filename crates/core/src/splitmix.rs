//! SplitMix64, the crate's one deterministic generator. Self-contained, so the integration
//! tests' support module (`tests/support`) compiles this very file rather than a copy.

/// SplitMix64: a deterministic generator, so that the same calls give the same decisions.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
