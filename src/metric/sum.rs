//! How a metric adds up its rows' terms, on the host and the device alike, bit for bit: the
//! values in groups of [`GROUP`] consecutive ones, each group summed by halving (value `i`
//! plus value `i + h`, for h = 512, 256, ..., 1; a short group padded with zeros), and the
//! groups' sums summed the same way, until one is left. The kernels' twin is
//! kernels/metric.cu (`group_sum`). Halving sums are also more accurate than a running sum,
//! and their groups run in parallel.

use rayon::prelude::*;

/// Values a group sums: the device sums one group a block, 512 threads two values each.
pub const GROUP: usize = 1024;

/// One group of at most [`GROUP`] values, padded with zeros, summed by halving.
fn group_sum(values: &[f64]) -> f64 {
    let mut v = [0f64; GROUP];
    v[..values.len()].copy_from_slice(values);
    let mut half = GROUP / 2;
    while half > 0 {
        let (low, high) = v.split_at_mut(half);
        low.iter_mut().zip(&high[..half]).for_each(|(a, b)| *a += b);
        half /= 2;
    }
    v[0]
}

/// The sum of the `n` values `value(0)`, ..., `value(n - 1)` in the order above; 0 for none.
/// The first level's groups are computed and summed on the pool.
pub fn halving_sum(n: usize, value: impl Fn(usize) -> f64 + Sync) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let mut level: Vec<f64> = (0..n.div_ceil(GROUP))
        .into_par_iter()
        .with_min_len(16)
        .map(|g| {
            let rows = g * GROUP..((g + 1) * GROUP).min(n);
            let mut values = [0f64; GROUP];
            for (v, i) in values.iter_mut().zip(rows.clone()) {
                *v = value(i);
            }
            group_sum(&values[..rows.len()])
        })
        .collect();
    while level.len() > 1 {
        level = level.chunks(GROUP).map(group_sum).collect();
    }
    level[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order spelled out: a value's place in the tree decides which additions it meets.
    fn reference(values: &[f64]) -> f64 {
        if values.is_empty() {
            return 0.0;
        }
        let mut level = values.to_vec();
        loop {
            let mut next = Vec::new();
            for group in level.chunks(GROUP) {
                let mut v = group.to_vec();
                v.resize(GROUP, 0.0);
                let mut half = GROUP / 2;
                while half > 0 {
                    for i in 0..half {
                        v[i] += v[i + half];
                    }
                    half /= 2;
                }
                next.push(v[0]);
            }
            if next.len() == 1 {
                return next[0];
            }
            level = next;
        }
    }

    #[test]
    fn halving_sums_follow_the_order_and_are_near_the_exact_sum() {
        for n in [1, 2, 3, 1000, 1024, 1025, 5000, 1 << 20, (1 << 20) + 17, 3_000_001] {
            let values: Vec<f64> = (0..n).map(|i| ((i * 7919 % 1001) as f64 / 7.0).ln_1p() * 1.000_000_1).collect();
            let got = halving_sum(n, |i| values[i]);
            assert_eq!(got.to_bits(), reference(&values).to_bits(), "{n} values");
            let exact: f64 = values.iter().sum();
            assert!((got - exact).abs() <= 1e-12 * exact.abs().max(1.0), "{n}: {got} against {exact}");
        }
        assert_eq!(halving_sum(0, |_| 1.0), 0.0);
        assert_eq!(halving_sum(1, |_| -2.5), -2.5);
        assert!(halving_sum(3000, |i| if i == 2999 { f64::NAN } else { 1.0 }).is_nan());
    }
}
