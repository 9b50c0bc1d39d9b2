//! A small, fast, seedable generator (xoshiro256++) with the samplers the workloads need.
//! Own code rather than a crate so a spec and seed give the same numbers forever.

/// SplitMix64: seeds the streams.
fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++ (Blackman & Vigna).
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The stream `stream` of seed `seed`: independent streams for each tenant and purpose,
    /// so one tenant's draws do not depend on what the scheduler did with another's.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut x = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let s = [
            splitmix(&mut x),
            splitmix(&mut x),
            splitmix(&mut x),
            splitmix(&mut x),
        ];
        Rng { s }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = (s[0].wrapping_add(s[3])).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe under `ln`.
    #[inline]
    pub fn open01(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Uniform integer in `0..n` (n > 0), by Lemire's multiply-shift.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponential with this mean.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.open01().ln()
    }

    /// Standard normal, by the ziggurat method ([`crate::ziggurat`]): one 64-bit draw, a
    /// multiply and a table comparison in 98.5 % of calls (Box–Muller, used before, cost a
    /// `log` and a `cos` each: a tenth of a whole simulation's time). Inline: the rare rest
    /// is [`Rng::normal_slow`].
    #[inline]
    pub fn normal(&mut self) -> f64 {
        use crate::ziggurat::X;
        let bits = self.next_u64();
        // The layer from the low 8 bits, a uniform in [-1, 1) from the high 53.
        let i = (bits & 0xFF) as usize;
        let u = (bits >> 11) as f64 * (2.0 / (1u64 << 53) as f64) - 1.0;
        let x = u * X[i];
        if x.abs() < X[i + 1] {
            return x; // inside the layer's rectangle under the curve
        }
        self.normal_slow(i, u, x)
    }

    /// The draw `x` (uniform `u`, layer `i`) of [`Rng::normal`] fell outside its layer's
    /// rectangle: the tail (the base layer), the wedge test, or a new draw.
    #[cold]
    #[inline(never)]
    fn normal_slow(&mut self, i: usize, u: f64, x: f64) -> f64 {
        use crate::ziggurat::F;
        if i == 0 {
            return self.normal_tail(u < 0.0);
        }
        // The wedge between X[i + 1] and X[i]: under the curve or draw again.
        let y = F[i] + self.uniform() * (F[i + 1] - F[i]);
        if y < (-0.5 * x * x).exp() {
            x
        } else {
            self.normal()
        }
    }

    /// A normal beyond the ziggurat's base `R`, on the side `negative` says (Marsaglia's
    /// tail method).
    #[cold]
    #[inline(never)]
    fn normal_tail(&mut self, negative: bool) -> f64 {
        use crate::ziggurat::R;
        loop {
            let x = -self.open01().ln() / R;
            let y = -self.open01().ln();
            if 2.0 * y > x * x {
                return if negative { -(R + x) } else { R + x };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erfc by its continued-fraction-free Chebyshev fit (Numerical Recipes' `erfcc`,
    /// relative error < 1.2e-7): enough for CDF checks.
    fn erfc(x: f64) -> f64 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.5 * z);
        let r = t
            * (-z * z - 1.26551223
                + t * (1.00002368
                    + t * (0.37409196
                        + t * (0.09678418
                            + t * (-0.18628806
                                + t * (0.27886807
                                    + t * (-1.13520398
                                        + t * (1.48851587
                                            + t * (-0.82215223 + t * 0.17087277)))))))))
                .exp();
        if x >= 0.0 {
            r
        } else {
            2.0 - r
        }
    }

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = Rng::new(7, 1);
        let mut y = Rng::new(7, 2);
        assert_ne!(x.next_u64(), y.next_u64());
    }

    #[test]
    fn moments() {
        let mut r = Rng::new(1, 0);
        let n = 200_000;
        let (mut s, mut s2, mut e) = (0.0, 0.0, 0.0);
        for _ in 0..n {
            let z = r.normal();
            s += z;
            s2 += z * z;
            e += r.exp(2.0);
        }
        let n = n as f64;
        assert!((s / n).abs() < 0.01, "normal mean {}", s / n);
        assert!((s2 / n - 1.0).abs() < 0.02, "normal var {}", s2 / n);
        assert!((e / n - 2.0).abs() < 0.02, "exp mean {}", e / n);
        // The distribution, not only its moments: the empirical CDF against Φ at points from
        // the tail to the centre (the ziggurat's layers, wedges and tail all contribute).
        let mut z: Vec<f64> = (0..400_000).map(|_| r.normal()).collect();
        z.sort_by(f64::total_cmp);
        let phi = |x: f64| 0.5 * erfc(-x / std::f64::consts::SQRT_2);
        for x in [
            -4.0, -3.7, -3.0, -2.0, -1.0, -0.5, -0.1, 0.0, 0.3, 1.5, 2.5, 3.66, 4.5,
        ] {
            let below = z.partition_point(|&v| v < x) as f64 / z.len() as f64;
            let want = phi(x);
            // Binomial standard error, four of them.
            let tol = 4.0 * (want * (1.0 - want) / z.len() as f64).sqrt() + 1e-6;
            assert!(
                (below - want).abs() < tol,
                "P(Z < {x}) = {below}, Φ = {want}"
            );
        }
        let tail = z.iter().filter(|v| v.abs() > crate::ziggurat::R).count();
        assert!(tail > 50 && tail < 160, "{tail} beyond R (expect ≈ 103)");
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[r.below(5) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (c as f64 - 10_000.0).abs() < 400.0));
    }
}

/// The stream id of a named tenant: FNV-1a of its name (names are unique, so streams are).
/// Every model seeds a tenant's streams as `Rng::new(seed, stream_id(name) ^ PURPOSE)`.
pub fn stream_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Stream purposes, xor-ed into a tenant's stream id: arrivals (and everything of a
/// database-server tenant), costs, and the black box's service times and routing.
pub mod purpose {
    /// Arrivals, think times; the database server's whole tenant.
    pub const ARRIVALS: u64 = 0;
    /// Request costs and classes.
    pub const COSTS: u64 = 0xC057;
    /// The black box's service times and component routing.
    pub const SERVICE: u64 = 0xB1AC_B0C5;
}
