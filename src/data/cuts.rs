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

use super::column::{FeatureColumn, BLOCK};
use super::frame::FeatureFrame;
// Still public here, where it was first: the last bin's bound (`f32::MAX`) relies on a
// column's values being read clamped to it.
pub use super::column::FINITE_LIMIT;
use crate::error::{Error, Result};
use crate::random::hash64;

/// Above this many rows, cut points come from a deterministic sample of about this many
/// rows (as LightGBM does), which keeps ingest near-linear and sorting cheap.
const SKETCH_ROWS: usize = 1 << 18;

/// The most categories a column may have: codes are read as `f32` values, exact up to 2^24,
/// and the category codes, the unseen-category bin and the missing bin all need an id.
pub const MAX_CATEGORIES: usize = (1 << 24) - 2;

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

/// Cut points for every feature of `frame`, computed in parallel over features: the
/// [`CutSketch`] of all its rows.
pub fn compute_cuts(
    frame: &FeatureFrame,
    weights: Option<&[f32]>,
    max_bin: usize,
    seed: u64,
) -> Result<Vec<FeatureCuts>> {
    let mut sketch = CutSketch::new(frame, seed, frame.n_rows())?;
    sketch.add(frame, weights, GlobalRows::From(0));
    sketch.cuts(max_bin)
}

/// Where a part's rows sit among all the rows of a fit: from a first global row on (a batch of
/// a stream, one process's rows), or listed one by one (a worker's spans).
#[derive(Clone, Copy)]
pub enum GlobalRows<'a> {
    From(u64),
    Listed(&'a [u64]),
}

impl GlobalRows<'_> {
    #[inline]
    fn of(&self, row: usize) -> u64 {
        match self {
            GlobalRows::From(first) => first + row as u64,
            GlobalRows::Listed(rows) => rows[row],
        }
    }
}

/// One feature's part of a [`CutSketch`].
#[derive(Clone, Debug, PartialEq)]
enum FeatureSketch {
    /// The sampled rows' present values with their weights.
    Numeric(Samples),
    /// Category codes are the bins: nothing to sample.
    Categorical { n_categories: u32 },
}

/// A numeric feature's sampled present values and their weights.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Samples {
    values: Vec<f32>,
    /// One weight per value; None while every weight is 1 (an unweighted fit's sample, half
    /// the memory: 2^18 rows of 28 features take 28 MiB, not 56).
    weights: Option<Vec<f32>>,
}

impl Samples {
    /// Pairs of (value, weight).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(f32, f32)]) -> Self {
        Samples { values: pairs.iter().map(|p| p.0).collect(), weights: Some(pairs.iter().map(|p| p.1).collect()) }
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn weight(&self, i: usize) -> f32 {
        self.weights.as_ref().map_or(1.0, |w| w[i])
    }

    /// Adds `other`'s samples after these (weights of 1 made explicit where only one side
    /// has weights).
    fn extend(&mut self, other: Samples) {
        match (&mut self.weights, other.weights) {
            (None, None) => {}
            (Some(mine), Some(theirs)) => mine.extend(theirs),
            (Some(mine), None) => mine.extend(std::iter::repeat_n(1.0, other.values.len())),
            (None, Some(theirs)) => {
                let mut w = vec![1.0; self.values.len()];
                w.extend(theirs);
                self.weights = Some(w);
            }
        }
        self.values.extend(other.values);
    }
}

/// What cut points are computed from, the one place they come from: each numeric feature's
/// present values (with their weights) of a sample of the rows, and whether any feature had a
/// present value. A row is sampled by a hash of (seed, its global row index), at a rate set by
/// the fit's row count alone, so the sketch of all rows is the merge of the sketches of any
/// partition of them (a distributed fit's shards, a stream's batches), in any order: the cuts
/// sort the samples completely (`weighted_quantile_cuts`), so they are the same bit for bit.
#[derive(Clone, Debug, PartialEq)]
pub struct CutSketch {
    seed: u64,
    /// Rows whose hash is at most this are sampled (`u64::MAX`: every row).
    keep_below: u64,
    features: Vec<FeatureSketch>,
    any_present: bool,
}

impl CutSketch {
    /// An empty sketch for `frame`'s features (their kinds and category counts; no rows read)
    /// in a fit of `n_global` rows in all; a categorical feature with too many categories is
    /// an error.
    pub fn new(frame: &FeatureFrame, seed: u64, n_global: usize) -> Result<Self> {
        let keep_below = sample_threshold(n_global);
        let features = frame
            .columns()
            .iter()
            .map(|col| match col.categories() {
                Some(categories) if categories.len() > MAX_CATEGORIES => Err(Error::column(
                    col.name(),
                    format!("has {} categories; at most {MAX_CATEGORIES} are supported", categories.len()),
                )),
                Some(categories) => Ok(FeatureSketch::Categorical { n_categories: categories.len() as u32 }),
                None => Ok(FeatureSketch::Numeric(Samples::default())),
            })
            .collect::<Result<_>>()?;
        Ok(CutSketch { seed, keep_below, features, any_present: false })
    }

    /// Adds the rows of `frame` (the sketch's features, in order), weighted by `weights`,
    /// placed among the fit's rows by `global`.
    pub fn add(&mut self, frame: &FeatureFrame, weights: Option<&[f32]>, global: GlobalRows) {
        let (seed, keep_below) = (self.seed, self.keep_below);
        // Which rows the hash keeps: one hash a row, read by every feature (hashing each
        // feature's rows anew took a third of a streamed CPU fit of 3M x 28 rows).
        let kept: Option<Vec<bool>> = (keep_below != u64::MAX && self.features.len() > 1).then(|| {
            let key = sample_key(seed);
            (0..frame.n_rows()).into_par_iter().map(|row| hash64(key, global.of(row)) <= keep_below).collect()
        });
        let kept = match &kept {
            Some(k) => Kept::Listed(k),
            None => Kept::Hashed { seed, keep_below, global },
        };
        self.features.par_iter_mut().zip(frame.columns().par_iter()).for_each(|(feature, col)| {
            if let FeatureSketch::Numeric(samples) = feature {
                let part = sample_values(col, weights, keep_below, &kept);
                // The first part is kept as it is, unless room was made (`reserve`): a stream's
                // batches then fill that room instead of regrowing a vector batch by batch.
                if samples.len() == 0 && samples.values.capacity() < part.len() {
                    *samples = part;
                } else {
                    samples.extend(part);
                }
            }
        });
        // Stops at the first present value: nearly free where there is one.
        self.any_present = self.any_present || frame.columns().par_iter().any(has_present_value);
    }

    /// Makes room for about `samples` present values of each numeric feature, and their
    /// weights when `weighted`, so that a sketch added to batch by batch (a stream) holds its
    /// samples without doubling buffers.
    pub fn reserve(&mut self, samples: usize, weighted: bool) {
        for f in &mut self.features {
            if let FeatureSketch::Numeric(v) = f {
                let more = samples.saturating_sub(v.len());
                v.values.reserve_exact(more);
                if weighted {
                    let n = v.len();
                    v.weights.get_or_insert_with(|| vec![1.0; n]).reserve_exact(more);
                }
            }
        }
    }

    /// The number of rows of a fit of `n_global` rows the sketch samples, about.
    pub fn expected_rows(n_global: usize) -> usize {
        n_global.min(SKETCH_ROWS)
    }

    /// Adds another sketch of the same features (another part of the rows).
    pub fn merge(&mut self, other: CutSketch) -> Result<()> {
        if other.features.len() != self.features.len() || other.keep_below != self.keep_below {
            return Err(Error::data("cut point sketches of different features or row counts cannot be merged"));
        }
        for (mine, theirs) in self.features.iter_mut().zip(other.features) {
            match (mine, theirs) {
                (FeatureSketch::Numeric(a), FeatureSketch::Numeric(b)) => a.extend(b),
                (FeatureSketch::Categorical { n_categories: a }, FeatureSketch::Categorical { n_categories: b })
                    if *a == b => {}
                _ => return Err(Error::data("cut point sketches disagree on a feature's kind or categories")),
            }
        }
        self.any_present |= other.any_present;
        Ok(())
    }

    /// The sketch as bytes, for another process to [`CutSketch::merge_bytes`]: the presence
    /// flag, then each numeric feature's count and (value, weight) pairs, little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![self.any_present as u8];
        for f in &self.features {
            if let FeatureSketch::Numeric(samples) = f {
                out.extend((samples.len() as u64).to_le_bytes());
                for (i, x) in samples.values.iter().enumerate() {
                    out.extend(x.to_le_bytes());
                    out.extend(samples.weight(i).to_le_bytes());
                }
            }
        }
        out
    }

    /// Merges a sketch of the same features given as [`CutSketch::to_bytes`] wrote it.
    pub fn merge_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let bad = || Error::Collective("a cut point sketch from another worker is malformed".into());
        let (&present, mut rest) = bytes.split_first().ok_or_else(bad)?;
        for f in &mut self.features {
            if let FeatureSketch::Numeric(samples) = f {
                let (count, tail) = rest.split_at_checked(8).ok_or_else(bad)?;
                let count = u64::from_le_bytes(count.try_into().unwrap()) as usize;
                let (pairs, tail) = tail.split_at_checked(count.checked_mul(8).ok_or_else(bad)?).ok_or_else(bad)?;
                let read = |c: &[u8]| f32::from_le_bytes(c.try_into().unwrap());
                let values = pairs.chunks_exact(8).map(|c| read(&c[..4])).collect();
                let weights: Vec<f32> = pairs.chunks_exact(8).map(|c| read(&c[4..])).collect();
                // Weights of 1 are kept as none (the same cut points, half the memory).
                let weights = weights.iter().any(|&w| w != 1.0).then_some(weights);
                samples.extend(Samples { values, weights });
                rest = tail;
            }
        }
        if !rest.is_empty() {
            return Err(bad());
        }
        self.any_present |= present != 0;
        Ok(())
    }

    /// Each feature's cuts, at most `max_bin` bins with the missing one; a fit whose every
    /// feature is entirely missing is an error.
    pub fn cuts(self, max_bin: usize) -> Result<Vec<FeatureCuts>> {
        if !self.any_present {
            return Err(all_missing());
        }
        Ok(self
            .features
            .into_par_iter()
            .map(|f| match f {
                FeatureSketch::Categorical { n_categories } => FeatureCuts::Categorical { n_categories },
                FeatureSketch::Numeric(samples) => {
                    FeatureCuts::Numeric { cuts: weighted_quantile_cuts(samples, max_bin - 1) }
                }
            })
            .collect())
    }
}

/// The hash at or below which a row is in the cut points' sample, in a fit of `n_global`
/// rows (`u64::MAX`: every row).
pub fn sample_threshold(n_global: usize) -> u64 {
    if n_global > SKETCH_ROWS {
        ((SKETCH_ROWS as f64 / n_global as f64) * u64::MAX as f64) as u64
    } else {
        u64::MAX
    }
}

/// The key of the sample's row hash: `hash64(sample_key(seed), global row)`.
pub fn sample_key(seed: u64) -> u64 {
    seed ^ 0x5eed_c075
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
/// (seed, global row) is at most `keep_below`.
/// Which rows of a part the cut points' sample keeps: by a hash of the seed and each row's
/// global index, computed here or once for every feature.
enum Kept<'a> {
    Listed(&'a [bool]),
    Hashed { seed: u64, keep_below: u64, global: GlobalRows<'a> },
}

impl Kept<'_> {
    #[inline]
    fn keeps(&self, row: usize) -> bool {
        match self {
            Kept::Listed(kept) => kept[row],
            Kept::Hashed { keep_below: u64::MAX, .. } => true,
            Kept::Hashed { seed, keep_below, global } => hash64(sample_key(*seed), global.of(row)) <= *keep_below,
        }
    }
}

fn sample_values(col: &FeatureColumn, weights: Option<&[f32]>, keep_below: u64, sampled: &Kept) -> Samples {
    let n = col.len();
    // About the rows the hash keeps (a tenth more), not every row: a stream's batches each
    // make one of these.
    let expected = match keep_below {
        u64::MAX => n,
        k => ((n as f64 * (k as f64 / u64::MAX as f64) * 1.1) as usize + 64).min(n),
    };
    let mut values: Vec<f32> = Vec::with_capacity(expected);
    let mut kept: Option<Vec<f32>> = weights.map(|_| Vec::with_capacity(expected));
    // Only present values are visited: a mostly-null column costs its values, not its rows.
    col.for_each_present(0, n, |row, x| {
        let w = weights.map_or(1.0, |w| w[row]);
        // A row of weight zero is as good as absent: it must not place cut points either.
        if w > 0.0 && sampled.keeps(row) {
            values.push(x);
            if let Some(kept) = &mut kept {
                kept.push(w);
            }
        }
    });
    Samples { values, weights: kept }
}

/// The error of a fit whose every feature is entirely missing.
pub fn all_missing() -> Error {
    Error::data("every feature is entirely missing (null or NaN); there is nothing to split on")
}

/// Cut points putting about equal weight in each of at most `budget` bins (so at most
/// `budget - 1` cuts). Cuts fall midway between neighbouring distinct values.
pub(crate) fn weighted_quantile_cuts(samples: Samples, budget: usize) -> Vec<f32> {
    // Sort as integers: the order-preserving key of the value in the high half, the weight's
    // bits in the low half. A primitive sort is several times faster than comparing floats.
    let mut keyed: Vec<u64> = (0..samples.len())
        .map(|i| ((order_key(samples.values[i]) as u64) << 32) | samples.weight(i).to_bits() as u64)
        .collect();
    drop(samples);
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

/// Maps floats to integers with the same order, `f32::total_cmp`'s (negative floats have their
/// bits flipped); kernels/common.cuh's `order_key` is its twin.
pub(crate) fn order_key(x: f32) -> u32 {
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

    /// A frame of `n` rows: a numeric column with nulls and repeated values, weights, and a
    /// categorical column.
    fn frame(n: usize) -> (FeatureFrame, Vec<f32>) {
        use arrow_array::types::Int32Type;
        use arrow_array::{ArrayRef, DictionaryArray, Float32Array, StringArray};
        use std::sync::Arc;
        let x: ArrayRef = Arc::new(Float32Array::from(
            (0..n).map(|i| (i % 11 != 0).then(|| ((i * 7919) % 1000) as f32 / 7.0)).collect::<Vec<_>>(),
        ));
        let keys: Vec<i32> = (0..n).map(|i| (i % 3) as i32).collect();
        let c: ArrayRef = Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(StringArray::from(vec!["a", "b", "c"])))
                .unwrap(),
        );
        let frame = FeatureFrame::new(vec![
            FeatureColumn::new("x", vec![x]).unwrap(),
            FeatureColumn::new("c", vec![c]).unwrap(),
        ])
        .unwrap();
        (frame, (0..n).map(|i| 0.5 + (i % 4) as f32).collect())
    }

    #[test]
    fn a_sketch_of_all_rows_is_the_merge_of_its_parts_in_any_order() {
        // Past SKETCH_ROWS, so rows are sampled: by global row, whatever the part.
        let n = SKETCH_ROWS + 40_000;
        let (all, w) = frame(n);
        let whole = compute_cuts(&all, Some(&w), 64, 9).unwrap();
        let parts = [(0, 100_000), (100_000, 7), (100_007, n - 100_007)];
        let sketch_of = |(start, len): (usize, usize)| {
            let mut s = CutSketch::new(&all, 9, n).unwrap();
            s.add(&all.row_range(start, len), Some(&w[start..start + len]), GlobalRows::From(start as u64));
            s
        };
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0]] {
            let mut merged = CutSketch::new(&all, 9, n).unwrap();
            for i in order {
                merged.merge(sketch_of(parts[i])).unwrap();
            }
            assert_eq!(merged.cuts(64).unwrap(), whole, "parts merged in order {order:?}");
        }
        // Through bytes, with the rows of a part listed one by one (a worker's spans).
        let mut merged = CutSketch::new(&all, 9, n).unwrap();
        for &(start, len) in parts.iter().rev() {
            let rows: Vec<u64> = (start as u64..(start + len) as u64).collect();
            let mut s = CutSketch::new(&all, 9, n).unwrap();
            s.add(&all.row_range(start, len), Some(&w[start..start + len]), GlobalRows::Listed(&rows));
            merged.merge_bytes(&s.to_bytes()).unwrap();
        }
        assert_eq!(merged.cuts(64).unwrap(), whole);
        assert!(CutSketch::new(&all, 9, n).unwrap().merge_bytes(&[1, 2, 3]).is_err());
        assert!(CutSketch::new(&all, 9, n).unwrap().cuts(64).is_err(), "no rows: every feature missing");
    }

    #[test]
    fn a_feature_sampled_beside_others_gets_the_cuts_it_gets_alone() {
        // Several features share one hash a row (`Kept::Listed`); a lone feature hashes its
        // rows itself (`Kept::Hashed`): the same rows either way, so the same cuts.
        let n = SKETCH_ROWS + 40_000;
        let (all, w) = frame(n);
        let together = compute_cuts(&all, Some(&w), 64, 9).unwrap();
        let x = FeatureFrame::new(vec![all.columns()[0].clone()]).unwrap();
        assert_eq!(compute_cuts(&x, Some(&w), 64, 9).unwrap()[0], together[0]);
        assert_eq!(compute_cuts(&x, None, 64, 9).unwrap()[0], compute_cuts(&all, None, 64, 9).unwrap()[0]);
    }

    #[test]
    fn few_distinct_values_get_a_bin_each() {
        let cuts = weighted_quantile_cuts(Samples::from_pairs(&[(3.0, 1.0), (1.0, 1.0), (2.0, 1.0), (1.0, 1.0)]), 10);
        assert_eq!(cuts, vec![1.5, 2.5]);
        let f = FeatureCuts::Numeric { cuts };
        assert_eq!([f.bin(1.0), f.bin(1.5), f.bin(2.0), f.bin(3.0), f.bin(99.0), f.bin(f32::NAN)], [0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn weighted_quantiles_follow_the_weights() {
        // Half the weight sits on the value 0: it must get a bin of its own.
        let mut s: Vec<(f32, f32)> = (1..=100).map(|i| (i as f32, 1.0)).collect();
        s.push((0.0, 100.0));
        let cuts = weighted_quantile_cuts(Samples::from_pairs(&s), 4);
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
        let cuts = weighted_quantile_cuts(Samples::from_pairs(&[(a, 1.0), (b, 1.0)]), 8);
        let f = FeatureCuts::Numeric { cuts };
        assert_eq!((f.bin(a), f.bin(b)), (0, 1));
    }
}
