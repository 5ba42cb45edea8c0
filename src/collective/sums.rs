//! Float sums over the workers that equal one worker's, bit for bit, without gathering the
//! rows: when no addition can round, the order of the additions does not matter, so each
//! worker's partial sum is exact and the partial sums add up, as integers, to the sum one
//! worker holding every row would compute in any order. Proven per sum from what the workers
//! report: every term is a multiple of `2^e` and every partial sum is below `2^(e + 52)` in
//! magnitude (their absolute values summed, doubled for the bound's own rounding), so every
//! partial sum has at most 53 significant bits.

use rayon::prelude::*;

use super::Collective;
use crate::error::Result;

/// The `K` sums of the terms of each worker's rows `0..n` and over every worker, equal to a
/// single worker's f64 sums over all rows; None when some addition might round (the caller
/// then gathers the rows and sums them in one worker's order). `terms(start, out)` writes the
/// terms of rows `start..start + out.len()`: a block of rows a call, so that a loss behind a
/// trait object is called once a block, not once a row (its per-row calls spilled the sums'
/// registers: three times the time of the sums themselves).
///
/// The rows are read in parallel: where the sums are exact, any order of their additions gives
/// the same bits, and where they might not be, no sum is claimed.
pub fn exact_sums<const K: usize>(
    comm: &dyn Collective,
    n: usize,
    terms: impl Fn(usize, &mut [[f64; K]]) + Sync,
) -> Result<Option<[f64; K]>> {
    let fold = |mut p: Partial<K>, block: usize| {
        let start = block * TERMS_A_BLOCK;
        let mut out = [[0.0; K]; TERMS_A_BLOCK];
        let out = &mut out[..TERMS_A_BLOCK.min(n - start)];
        terms(start, out);
        for terms in out.iter() {
            for (j, &t) in terms.iter().enumerate() {
                p.sums[j] += t;
                p.magnitudes[j] += t.abs();
                if t != 0.0 {
                    p.lowest[j] = p.lowest[j].min(lowest_bit(t));
                }
            }
        }
        p
    };
    let Partial { sums, magnitudes, lowest } = (0..n.div_ceil(TERMS_A_BLOCK))
        .into_par_iter()
        .with_min_len(64)
        .fold(Partial::default, fold)
        .reduce(Partial::default, Partial::merge);
    // Maxima over the workers: the lowest bit's exponent (negated), and the largest
    // magnitude (non-negative f64s order as their bit patterns do).
    let mut exchanged: Vec<i64> = lowest.iter().map(|&e| if e == i64::MAX { i64::MIN } else { -e }).collect();
    exchanged.extend(magnitudes.iter().map(|m| m.to_bits() as i64));
    comm.all_reduce_max(&mut exchanged)?;
    let mut scaled = [0i64; K];
    let mut exponents = [0i32; K];
    for j in 0..K {
        if exchanged[j] == i64::MIN {
            continue; // every term is zero: the sum is 0
        }
        let e = -exchanged[j];
        let bound = f64::from_bits(exchanged[K + j] as u64) * comm.world() as f64 * 2.0;
        // Scaling by 2^-e stays exact within the normal range; a NaN bound fails too.
        let fits = bound < 2f64.powi(e as i32 + 52);
        if !(-1000..=1000).contains(&e) || !fits {
            return Ok(None);
        }
        exponents[j] = e as i32;
        // An exact multiple of 2^e below 2^(e + 53): an integer of at most 53 bits.
        scaled[j] = (sums[j] * 2f64.powi(-exponents[j])) as i64;
    }
    comm.all_reduce_sum(&mut scaled)?;
    Ok(Some(std::array::from_fn(|j| scaled[j] as f64 * 2f64.powi(exponents[j]))))
}

/// Rows whose terms [`exact_sums`] asks for at once.
const TERMS_A_BLOCK: usize = 1024;

/// One thread's share of [`exact_sums`]: its sums, the sums of the terms' magnitudes (a bound
/// on every partial sum; their own rounding is within the bound's factor of two), and the
/// lowest bit of any term.
#[derive(Clone, Copy)]
struct Partial<const K: usize> {
    sums: [f64; K],
    magnitudes: [f64; K],
    lowest: [i64; K],
}

impl<const K: usize> Default for Partial<K> {
    fn default() -> Self {
        Partial { sums: [0.0; K], magnitudes: [0.0; K], lowest: [i64::MAX; K] }
    }
}

impl<const K: usize> Partial<K> {
    fn merge(a: Self, b: Self) -> Self {
        Partial {
            sums: std::array::from_fn(|j| a.sums[j] + b.sums[j]),
            magnitudes: std::array::from_fn(|j| a.magnitudes[j] + b.magnitudes[j]),
            lowest: std::array::from_fn(|j| a.lowest[j].min(b.lowest[j])),
        }
    }
}

/// The exponent of a finite, non-zero f64's lowest set bit: `x = m * 2^e` with `m` odd.
fn lowest_bit(x: f64) -> i64 {
    let bits = x.to_bits();
    let (exponent, mantissa) = ((bits >> 52) & 0x7ff, bits & ((1 << 52) - 1));
    if exponent == 0 {
        -1074 + mantissa.trailing_zeros() as i64
    } else {
        exponent as i64 - 1075 + (mantissa | (1 << 52)).trailing_zeros() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Solo;

    #[test]
    fn lowest_bits_are_exponents_of_odd_multiples() {
        for (x, e) in [(1.0, 0), (3.0, 0), (0.5, -1), (0.75, -2), (6.0, 1), (-2.0, 1), (f64::from_bits(1), -1074)] {
            assert_eq!(lowest_bit(x), e, "{x}");
        }
    }

    #[test]
    fn sums_that_cannot_round_are_exact_and_others_are_refused() {
        fn each(f: impl Fn(usize) -> [f64; 2] + Sync) -> impl Fn(usize, &mut [[f64; 2]]) + Sync {
            move |start, out| out.iter_mut().zip(start..).for_each(|(o, i)| *o = f(i))
        }
        // Rows in several blocks of terms, the last one short.
        let halves: Vec<f64> = (0..3000).map(|i| i as f64 * 0.5 - 100.0).collect();
        let got = exact_sums(&Solo, halves.len(), each(|i| [halves[i], 1.0])).unwrap().unwrap();
        assert_eq!(got, [halves.iter().sum::<f64>(), 3000.0]);
        // 1e30 and 1e-30 together: their sum rounds, so nothing is claimed.
        let wide = [1e30, 1e-30, 3.0];
        assert!(exact_sums(&Solo, 3, each(|i| [wide[i], 0.0])).unwrap().is_none());
        assert_eq!(exact_sums(&Solo, 2, each(|_| [0.0, 0.0])).unwrap(), Some([0.0, 0.0]));
    }

    /// Read in parallel, the sums a base score is the mean of give the bits of the losses' own
    /// row-order estimate wherever they are claimed (labels 0/1, [0, 1) floats, counts; unit,
    /// whole and fractional weights), and are refused where rounding could differ.
    #[test]
    fn parallel_sums_give_the_row_order_base_margins() {
        use crate::config::TrainConfig;
        use crate::objective::{loss_for, Objective, Targets};
        use crate::random::Rng;

        let n = 300_000;
        let mut rng = Rng::new(7, 1);
        let labels: [Vec<f32>; 3] = [
            (0..n).map(|_| rng.below(2) as f32).collect(),
            (0..n).map(|_| rng.unit() as f32).collect(),
            (0..n).map(|_| rng.below(40) as f32).collect(),
        ];
        let weights: [Option<Vec<f32>>; 4] = [
            None,
            Some((0..n).map(|_| (1 + rng.below(4)) as f32).collect()),
            Some((0..n).map(|_| (1 + rng.below(8)) as f32 * 0.25).collect()),
            Some((0..n).map(|_| rng.unit() as f32 + 1e-3).collect()),
        ];
        let mut refused = 0;
        for objective in [Objective::SquaredError, Objective::BinaryLogistic] {
            let loss = loss_for(objective, &TrainConfig::default().objective_params());
            let label_sets = if objective == Objective::BinaryLogistic { 2 } else { 3 };
            for (l, label) in labels[..label_sets].iter().enumerate() {
                for (w, weight) in weights.iter().enumerate() {
                    let t = Targets { label, label_upper: None, weight: weight.as_deref(), groups: None };
                    match exact_sums(&Solo, n, |start, out| loss.mean_terms(&t, start, out)).unwrap() {
                        Some([sum, total]) => {
                            let mean = loss.base_score_to_margin(sum / total);
                            assert_eq!(mean.to_bits(), loss.estimate_base_margin(&t)[0].to_bits(), "{objective:?}");
                        }
                        // Whole labels under unit, whole or quarter weights never round.
                        None => {
                            assert!(l == 1 || w == 3, "{objective:?}: labels {l}, weights {w} refused");
                            refused += 1;
                        }
                    }
                }
            }
        }
        assert!(refused > 0, "random fractions should be refused somewhere");
    }
}
