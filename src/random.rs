//! Deterministic randomness for row and feature sampling: SplitMix64 streams keyed by
//! (seed, purpose, round), so results never depend on thread scheduling.

/// A 64-bit mix of a key and an index (SplitMix64's finaliser).
#[inline]
pub fn hash64(key: u64, index: u64) -> u64 {
    let mut z = key.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small sequential generator for the few draws that are inherently ordered
/// (choosing feature subsets).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Self {
        Rng { state: hash64(seed, stream) }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        hash64(self.state, 0)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// `k` distinct items of `items`, in their original order.
    pub fn choose_sorted(&mut self, items: &[u32], k: usize) -> Vec<u32> {
        let mut pool = items.to_vec();
        let k = k.min(pool.len());
        for i in 0..k {
            let j = i + self.below(pool.len() - i);
            pool.swap(i, j);
        }
        let mut chosen = pool[..k].to_vec();
        chosen.sort_unstable();
        chosen
    }
}
