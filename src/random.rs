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

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// `k` distinct items of `items`, in their original order, drawn without replacement with
    /// chances in proportion to `weight(item)`: the `k` largest keys `ln(u) / w` (Efraimidis
    /// and Spirakis). Items of weight 0 are never drawn, so fewer than `k` may come back.
    pub fn choose_weighted_sorted(&mut self, items: &[u32], weight: impl Fn(u32) -> f64, k: usize) -> Vec<u32> {
        let mut keyed: Vec<(f64, u32)> = Vec::with_capacity(items.len());
        for &item in items {
            let w = weight(item);
            if w > 0.0 {
                keyed.push((self.unit().ln() / w, item));
            }
        }
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut chosen: Vec<u32> = keyed.into_iter().take(k).map(|(_, item)| item).collect();
        chosen.sort_unstable();
        chosen
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_draws_follow_the_weights() {
        let items: Vec<u32> = (0..4).collect();
        let weight = |i: u32| [0.0, 1.0, 2.0, 7.0][i as usize];
        let mut counts = [0usize; 4];
        for seed in 0..20_000 {
            for i in Rng::new(seed, 1).choose_weighted_sorted(&items, weight, 1) {
                counts[i as usize] += 1;
            }
        }
        assert_eq!(counts[0], 0, "weight 0 is never drawn");
        // Chances 1/10, 2/10, 7/10 for a single draw.
        for (i, want) in [(1, 0.1), (2, 0.2), (3, 0.7)] {
            let got = counts[i] as f64 / 20_000.0;
            assert!((got - want).abs() < 0.015, "item {i}: {got} against {want}");
        }
        // Asking for more than the weighted items gives them all, sorted.
        assert_eq!(Rng::new(3, 1).choose_weighted_sorted(&items, weight, 4), vec![1, 2, 3]);
    }
}
