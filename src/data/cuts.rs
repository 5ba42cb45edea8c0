//! Weighted quantile cut points per feature. They define the bins the trainers work on and
//! are stored in the model, so prediction never needs the training data.
//!
//! A numeric feature's cuts are ascending bounds: bin `i` holds values `x` with
//! `cuts[i-1] <= x < cuts[i]` (the first bin is unbounded below and the last, bin
//! `cuts.len()`, unbounded above). A split after bin `b` sends
//! `x < cuts[b]` left, which is exactly the threshold test prediction applies to raw values.
//! `max_bin` counts the missing bin too, so with the default 256 every bin id fits a byte.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::column::FeatureColumn;
use super::frame::FeatureFrame;
use crate::error::{Error, Result};
use crate::random::hash64;

/// Rows read per block when scanning a column.
pub(crate) const BLOCK: usize = 8192;

/// Above this many rows, cut points come from a deterministic sample of about this many
/// rows (as LightGBM does), which keeps ingest near-linear and sorting cheap.
const SKETCH_ROWS: usize = 1 << 18;

/// The most categories a column may have: codes are read as `f32` values, exact up to 2^24,
/// and the category codes, the unseen-category bin and the missing bin all need an id.
pub const MAX_CATEGORIES: usize = (1 << 24) - 2;

/// Feature values are read clamped to `[-FINITE_LIMIT, FINITE_LIMIT]` (infinities and
/// `f32::MAX` included), so that `x < f32::MAX` holds for every present value and a split
/// sending all present values one way has a finite, serialisable threshold.
pub const FINITE_LIMIT: f32 = f32::from_bits(f32::MAX.to_bits() - 1);

/// How one feature's values map to bins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureCuts {
    Numeric {
        cuts: Vec<f32>,
    },
    /// Category codes are the bins; one more bin holds categories unseen in training.
    Categorical {
        n_categories: u32,
    },
}

impl FeatureCuts {
    /// Number of bins, not counting the missing bin (whose id is this number).
    pub fn n_bins(&self) -> u32 {
        match self {
            FeatureCuts::Numeric { cuts } => cuts.len() as u32 + 1,
            FeatureCuts::Categorical { n_categories } => n_categories + 1,
        }
    }

    pub fn is_categorical(&self) -> bool {
        matches!(self, FeatureCuts::Categorical { .. })
    }

    /// The bin of a value, `n_bins()` for missing.
    #[inline]
    pub fn bin(&self, x: f32) -> u32 {
        if x.is_nan() {
            return self.n_bins();
        }
        match self {
            FeatureCuts::Numeric { cuts } => cuts.partition_point(|&c| c <= x) as u32,
            FeatureCuts::Categorical { n_categories } => (x as u32).min(*n_categories),
        }
    }

    /// Upper bound of bin `b`: the threshold of a split after bin `b` (0 for categorical
    /// features, whose splits use category sets instead). Above the last bin it is
    /// `f32::MAX`, which every present value is below (see [`FINITE_LIMIT`]).
    pub fn upper_bound(&self, b: u32) -> f32 {
        match self {
            FeatureCuts::Numeric { cuts } => cuts.get(b as usize).copied().unwrap_or(f32::MAX),
            FeatureCuts::Categorical { .. } => 0.0,
        }
    }
}

/// Cut points for every feature of `frame`, computed in parallel over features. A
/// distributed fit's workers compute them together with `collective::cuts::compute_cuts_sharded`,
/// from the same steps.
pub fn compute_cuts(
    frame: &FeatureFrame,
    weights: Option<&[f32]>,
    max_bin: usize,
    seed: u64,
) -> Result<Vec<FeatureCuts>> {
    let samples = sample_features(frame, weights, seed, frame.n_rows(), None)?;
    let cuts = cuts_from_samples(frame, samples, max_bin);
    if !any_present_value(frame) {
        return Err(all_missing());
    }
    Ok(cuts)
}

/// A numeric feature's sampled `(value, weight)` pairs (None for a categorical feature).
pub(crate) type Samples = Option<Vec<(f32, f32)>>;

/// Each feature's sample (see [`Samples`]) of `frame`'s rows, out of `n_global` rows of every
/// worker; a categorical feature with too many categories is an error. `global_rows` maps
/// local rows to global ones (None: they are the same).
pub(crate) fn sample_features(
    frame: &FeatureFrame,
    weights: Option<&[f32]>,
    seed: u64,
    n_global: usize,
    global_rows: Option<&[u64]>,
) -> Result<Vec<Samples>> {
    // Sample rows with a hash of (seed, global row): the same rows whatever the chunking,
    // the threads or the workers.
    let keep_below = if n_global > SKETCH_ROWS {
        ((SKETCH_ROWS as f64 / n_global as f64) * u64::MAX as f64) as u64
    } else {
        u64::MAX
    };
    frame
        .columns()
        .par_iter()
        .map(|col| match col.categories() {
            Some(categories) => {
                if categories.len() > MAX_CATEGORIES {
                    return Err(Error::column(
                        col.name(),
                        format!("has {} categories; at most {MAX_CATEGORIES} are supported", categories.len()),
                    ));
                }
                Ok(None)
            }
            None => Ok(Some(sample_values(col, weights, seed, keep_below, global_rows))),
        })
        .collect::<Result<_>>()
}

/// Each feature's cuts from its (gathered) sample.
pub(crate) fn cuts_from_samples(frame: &FeatureFrame, samples: Vec<Samples>, max_bin: usize) -> Vec<FeatureCuts> {
    frame
        .columns()
        .par_iter()
        .zip(samples)
        .map(|(col, s)| match (col.categories(), s) {
            (Some(categories), _) => FeatureCuts::Categorical { n_categories: categories.len() as u32 },
            (None, s) => FeatureCuts::Numeric { cuts: weighted_quantile_cuts(s.unwrap_or_default(), max_bin - 1) },
        })
        .collect()
}

/// Whether any feature of `frame` has a present (not null, not NaN) value.
pub(crate) fn any_present_value(frame: &FeatureFrame) -> bool {
    frame.columns().par_iter().any(has_present_value)
}

/// The error of a fit whose every feature is entirely missing (on every worker).
pub(crate) fn all_missing() -> Error {
    Error::data("every feature is entirely missing (null or NaN); there is nothing to split on")
}

fn has_present_value(col: &FeatureColumn) -> bool {
    let mut buf = vec![0f32; BLOCK];
    let mut start = 0;
    while start < col.len() {
        let n = BLOCK.min(col.len() - start);
        col.read(start, &mut buf[..n]);
        if buf[..n].iter().any(|x| !x.is_nan()) {
            return true;
        }
        start += n;
    }
    false
}

/// A column's present values (with their weights) of the sampled rows: rows whose hash of
/// (seed, global row) is at most `keep_below`. `global_rows` maps local rows to global
/// ones (None: they are the same).
fn sample_values(
    col: &FeatureColumn,
    weights: Option<&[f32]>,
    seed: u64,
    keep_below: u64,
    global_rows: Option<&[u64]>,
) -> Vec<(f32, f32)> {
    let n = col.len();
    let mut samples: Vec<(f32, f32)> = Vec::with_capacity(n.min(SKETCH_ROWS * 2));
    // Only present values are visited: a mostly-null column costs its values, not its rows.
    col.for_each_present(0, n, |row, x| {
        let w = weights.map_or(1.0, |w| w[row]);
        let global = global_rows.map_or(row as u64, |g| g[row]);
        // A row of weight zero is as good as absent: it must not place cut points either.
        if w > 0.0 && (keep_below == u64::MAX || hash64(seed ^ 0x5eed_c075, global) <= keep_below) {
            samples.push((x, w));
        }
    });
    samples
}

/// Cut points putting about equal weight in each of at most `budget` bins (so at most
/// `budget - 1` cuts). Cuts fall midway between neighbouring distinct values.
pub(crate) fn weighted_quantile_cuts(samples: Vec<(f32, f32)>, budget: usize) -> Vec<f32> {
    // Sort as integers: the order-preserving key of the value in the high half, the weight's
    // bits in the low half. A primitive sort is several times faster than comparing floats.
    let mut keyed: Vec<u64> =
        samples.iter().map(|&(x, w)| ((order_key(x) as u64) << 32) | w.to_bits() as u64).collect();
    keyed.sort_unstable();
    // Distinct values with their summed weights (-0.0 and 0.0 are one value).
    let mut values: Vec<f32> = Vec::new();
    let mut mass: Vec<f64> = Vec::new();
    for k in keyed {
        let (x, w) = (from_order_key((k >> 32) as u32), f32::from_bits(k as u32));
        match values.last() {
            Some(&last) if last == x => *mass.last_mut().unwrap() += w as f64,
            _ => {
                values.push(x);
                mass.push(w as f64);
            }
        }
    }
    let mut cuts = Vec::new();
    if values.len() <= budget {
        cuts.extend(values.windows(2).map(|p| midpoint(p[0], p[1])));
    } else {
        let total: f64 = mass.iter().sum();
        let step = total / budget as f64;
        let mut acc = 0.0;
        let mut next = step;
        for i in 0..values.len() - 1 {
            acc += mass[i];
            if acc >= next && cuts.len() + 1 < budget {
                cuts.push(midpoint(values[i], values[i + 1]));
                while next <= acc {
                    next += step;
                }
            }
        }
    }
    cuts
}

/// Maps floats to integers with the same order (negative floats have their bits flipped).
fn order_key(x: f32) -> u32 {
    let b = x.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | (1 << 31)
    }
}

fn from_order_key(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & !(1 << 31) } else { !k })
}

/// A cut strictly above `a` and at most `b`.
fn midpoint(a: f32, b: f32) -> f32 {
    let m = ((a as f64 + b as f64) / 2.0) as f32;
    if m > a && m <= b && m.is_finite() {
        m
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_distinct_values_get_a_bin_each() {
        let cuts = weighted_quantile_cuts(vec![(3.0, 1.0), (1.0, 1.0), (2.0, 1.0), (1.0, 1.0)], 10);
        assert_eq!(cuts, vec![1.5, 2.5]);
        let f = FeatureCuts::Numeric { cuts };
        assert_eq!([f.bin(1.0), f.bin(1.5), f.bin(2.0), f.bin(3.0), f.bin(99.0), f.bin(f32::NAN)], [0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn weighted_quantiles_follow_the_weights() {
        // Half the weight sits on the value 0: it must get a bin of its own.
        let mut s: Vec<(f32, f32)> = (1..=100).map(|i| (i as f32, 1.0)).collect();
        s.push((0.0, 100.0));
        let cuts = weighted_quantile_cuts(s, 4);
        assert!(cuts.len() <= 3);
        assert_eq!(cuts[0], 0.5);
    }

    #[test]
    fn order_keys_sort_like_floats() {
        let xs = [-3.5f32, -0.0, 0.0, 1e-40, 2.0, f32::INFINITY, f32::NEG_INFINITY, -1e-40];
        for &a in &xs {
            assert_eq!(from_order_key(order_key(a)).to_bits(), a.to_bits());
            for &b in &xs {
                if a < b {
                    assert!(order_key(a) < order_key(b), "{a} {b}");
                }
            }
        }
    }

    #[test]
    fn adjacent_floats_split_exactly() {
        let a = 1.0f32;
        let b = f32::from_bits(a.to_bits() + 1);
        let cuts = weighted_quantile_cuts(vec![(a, 1.0), (b, 1.0)], 8);
        let f = FeatureCuts::Numeric { cuts };
        assert_eq!((f.bin(a), f.bin(b)), (0, 1));
    }
}
