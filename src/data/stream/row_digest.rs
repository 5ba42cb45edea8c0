//! An order-free digest of a stream's per-row inputs, so that a streamed fit can tell that its
//! two passes read the same rows (issue 52).
//!
//! A streamed fit reads its source twice. Its per-row inputs (labels, label bounds, weights,
//! base margins, query ids) are kept from the pass that bins the features, so a row's label
//! always travels with its bins, whatever order each pass gives. What pass 1 gathers (the
//! cut points' sample, the categories) must still come from the same rows: a source whose
//! rows changed between the passes (files rewritten, a query over a table being written) is
//! an error, never a fit on a mixture. Each pass sums a hash of every row's per-row inputs,
//! wrapping: the sum is the same for any order and batching of the same rows, and differs,
//! but for a chance of about 2^-64, when any row's inputs differ.

use rayon::prelude::*;

use super::source::Batch;
use crate::random::hash64;

/// The rows a pass has read, and their inputs' digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RowDigest {
    pub rows: usize,
    /// Which per-row inputs the batches had (bit per input, or'ed over batches), so that a
    /// pass that lost its weights, say, differs even where the sums would agree.
    inputs: u8,
    sum: u64,
}

/// Rows hashed per task: enough to pay for the task, few enough that a batch of 100k rows
/// spreads over the cores.
const ROWS_PER_TASK: usize = 1 << 14;

impl RowDigest {
    /// Adds `b`'s rows.
    pub fn add(&mut self, b: &Batch) {
        let d = &b.data;
        let n = d.n_rows();
        if n == 0 {
            return;
        }
        let (labels, k) = (d.label(), d.n_targets());
        let margins = d.base_margin();
        let per_row_margins = margins.map_or(0, |m| m.len() / n);
        let ids = b.group_ids.as_deref();
        let inputs = [true, d.label_upper().is_some(), d.weight().is_some(), margins.is_some(), ids.is_some()];
        self.inputs |= inputs.iter().enumerate().fold(0, |bits, (i, &on)| bits | ((on as u8) << i));
        let row_hash = |i: usize| {
            // Each value mixed into the running hash in a fixed order: a value moved from one
            // input to another (a label to a weight) changes the hash.
            let mut h = 0x243F_6A88_85A3_08D3u64;
            let mut fold = |bits: u64| h = hash64(h, bits);
            for t in 0..k {
                fold(labels[t * n + i].to_bits() as u64);
            }
            if let Some(u) = d.label_upper() {
                fold(u[i].to_bits() as u64);
            }
            if let Some(w) = d.weight() {
                fold(w[i].to_bits() as u64);
            }
            if let Some(m) = margins {
                m[i * per_row_margins..(i + 1) * per_row_margins].iter().for_each(|v| fold(v.to_bits() as u64));
            }
            if let Some(ids) = ids {
                fold(ids[i] as u64);
            }
            h
        };
        let sum = (0..n.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|task| {
                let rows = task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(n);
                rows.fold(0u64, |s, i| s.wrapping_add(row_hash(i)))
            })
            .reduce(|| 0, u64::wrapping_add);
        self.sum = self.sum.wrapping_add(sum);
        self.rows += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Dataset, FeatureColumn, FeatureFrame};
    use arrow_array::{ArrayRef, Float32Array};
    use std::sync::Arc;

    fn batch(rows: &[usize], weighted: bool, ids: bool) -> Batch {
        let x: ArrayRef = Arc::new(Float32Array::from(rows.iter().map(|&r| r as f32).collect::<Vec<_>>()));
        let frame = FeatureFrame::new(vec![FeatureColumn::new("x", vec![x]).unwrap()]).unwrap();
        let label: Vec<f32> = rows.iter().map(|&r| (r % 7) as f32 * 0.5).collect();
        let mut d = Dataset::new(frame, label).unwrap();
        if weighted {
            d = d.with_weight(rows.iter().map(|&r| 1.0 + (r % 3) as f32).collect()).unwrap();
        }
        let group_ids = ids.then(|| rows.iter().map(|&r| (r / 4) as i64).collect());
        Batch { data: d, group_ids }
    }

    fn digest(batches: &[Vec<usize>], weighted: bool, ids: bool) -> RowDigest {
        let mut digest = RowDigest::default();
        batches.iter().for_each(|rows| digest.add(&batch(rows, weighted, ids)));
        digest
    }

    #[test]
    fn the_same_rows_in_any_order_and_batching_digest_alike() {
        let all: Vec<usize> = (0..40_000).collect();
        let mut shuffled = all.clone();
        let mut rng = crate::random::Rng::new(7, 0);
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.below(i + 1));
        }
        for (weighted, ids) in [(false, false), (true, true)] {
            let whole = digest(std::slice::from_ref(&all), weighted, ids);
            let pieces: Vec<Vec<usize>> = shuffled.chunks(9_999).map(<[usize]>::to_vec).collect();
            assert_eq!(digest(&pieces, weighted, ids), whole);
            assert_eq!(whole.rows, 40_000);
        }
    }

    #[test]
    fn other_rows_or_inputs_digest_otherwise() {
        let all: Vec<usize> = (0..1_000).collect();
        let whole = digest(std::slice::from_ref(&all), true, false);
        // One row replaced by a copy of another: the same count, another digest.
        let mut one_off = all.clone();
        one_off[10] = 11;
        assert_ne!(digest(&[one_off], true, false), whole);
        // The same labels without their weights, or with query ids added.
        assert_ne!(digest(std::slice::from_ref(&all), false, false), whole);
        assert_ne!(digest(std::slice::from_ref(&all), true, true), whole);
    }
}
