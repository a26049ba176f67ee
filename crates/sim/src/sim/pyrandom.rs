//! The random stream of CPython's `random` module, which the reference simulator draws its workload from:
//! MT19937 seeded by `init_by_array` over the seed's 32-bit words, and the same conversions to floats and
//! bounded integers. With it a seed of ours replays the reference's trace draw for draw.

use rand_mt::Mt;

/// One `random.Random` stream.
#[derive(Clone)]
pub struct PyRandom {
    mt: Mt,
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyRandom")
    }
}

impl PyRandom {
    /// The stream after `random.seed(seed)`: CPython keys MT19937 with the seed's 32-bit words, least
    /// significant first, and at least one word (so 0 is the key `[0]`).
    pub fn new(seed: u64) -> PyRandom {
        let (lo, hi) = (seed as u32, (seed >> 32) as u32);
        let mt = if hi == 0 {
            Mt::new_with_key([lo])
        } else {
            Mt::new_with_key([lo, hi])
        };
        PyRandom { mt }
    }

    /// `random.random()`: a float in [0, 1) from 53 bits of two outputs.
    pub fn random(&mut self) -> f64 {
        let a = (self.mt.next_u32() >> 5) as f64;
        let b = (self.mt.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `random.uniform(a, b)`.
    pub fn uniform(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.random()
    }

    /// `random.getrandbits(k)` for 1 <= k <= 32: the top `k` bits of one output.
    fn getrandbits(&mut self, k: u32) -> u32 {
        debug_assert!((1..=32).contains(&k));
        self.mt.next_u32() >> (32 - k)
    }

    /// `random.randint(a, b)` for ranges narrower than 2^32: rejection sampling on the range's bit length,
    /// as CPython's `_randbelow` does, so the number of outputs consumed matches too.
    pub fn randint(&mut self, a: u64, b: u64) -> u64 {
        let n = b - a + 1;
        assert!(n <= 1 << 32, "randint range wider than 32 bits");
        let k = 64 - n.leading_zeros();
        loop {
            let r = u64::from(self.getrandbits(k.min(32)));
            if r < n {
                return a + r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by CPython 3.11 after `random.seed(s)`.
    #[test]
    fn matches_cpython() {
        let mut r = PyRandom::new(42);
        assert_eq!(r.random(), 0.6394267984578837);
        assert_eq!(r.randint(0, 9), 0);
        assert_eq!(r.uniform(1.5, 3.0), 2.6123257496397496);
        let mut r = PyRandom::new(42);
        assert_eq!(
            [r.getrandbits(32), r.getrandbits(32), r.getrandbits(32)],
            [2746317213, 478163327, 107420369]
        );
        let mut r = PyRandom::new(7);
        let ints: Vec<u64> = (0..20).map(|_| r.randint(0, 9)).collect();
        assert_eq!(
            ints,
            [5, 2, 6, 0, 1, 8, 1, 5, 9, 0, 8, 3, 0, 1, 6, 6, 1, 3, 1, 8]
        );
        assert_eq!(r.random(), 0.42451918914251396);
        assert_eq!(PyRandom::new(0).getrandbits(32), 3626764237);
        assert_eq!(PyRandom::new((1 << 40) + 7).getrandbits(32), 2635837658);
    }
}
