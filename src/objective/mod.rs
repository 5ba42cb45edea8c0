//! Losses: each writes gradient pairs into a preallocated buffer, checks its labels, and
//! estimates the starting margin. Margins and gradients are class-major: output `k` of row
//! `i` sits at `k * n_rows + i`.
//!
//! A new objective touches what `descriptor.rs`'s module documentation lists: its loss's
//! file here (and its `mod` line), its descriptor, and for a GPU gradient kernels/gradients.cu.
//!
//! This module sits above `metric` and below `config`: it imports neither `config` nor
//! anything above it (`tests/layering.rs` enforces the order); `TrainConfig::objective_params`
//! hands the losses their parameters, whose types `config` shares with this module live in
//! `params`.

mod aft;
mod count;
mod descriptor;
mod logistic;
mod per_target;
mod quantile;
mod ranking;
mod softmax;
mod squared;
mod survival;

pub use descriptor::{Descriptor, DeviceGradient, GpuGradient, Link, Objective, ObjectiveParams, Outputs, XgbParams};
pub use ranking::{PairMetric, RankingParams, RankingTables};

pub use crate::data::Targets;
use rayon::slice::ParallelSliceMut;

use crate::error::{Error, Result};
pub use crate::params::TaskKind;
use crate::tree::GradPair;

/// A loss function as the boosting loop uses it.
pub trait Loss: Send + Sync {
    /// Gradient pairs (weights applied) for every row and output. Built-in losses cannot
    /// fail; a user's objective (a Python callable) can.
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()>;
    /// Rejects labels outside the loss's domain, naming the first bad row.
    fn check_labels(&self, t: &Targets) -> Result<()>;
    /// The starting margin of each output when no base score is given.
    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32>;
    /// The margin of a user-given base score (which is in output space).
    fn base_score_to_margin(&self, score: f64) -> f32 {
        score as f32
    }
    /// Whether [`Loss::estimate_base_margin`] is `base_score_to_margin` of the labels' mean
    /// weighted by [`Loss::mean_weight`] (f64 sums in row order, as [`weighted_mean`]): a
    /// distributed fit may then sum the workers' exact partial sums instead of gathering
    /// every label.
    fn base_margin_is_weighted_mean(&self) -> bool {
        false
    }
    /// Row `i`'s weight in that mean: its sample weight.
    fn mean_weight(&self, t: &Targets, i: usize) -> f32 {
        t.w(i)
    }
    /// The terms of that mean, `[label * w, w]` with `w` = [`Loss::mean_weight`], of rows
    /// `start..start + out.len()`: a block of rows a call through the trait object.
    fn mean_terms(&self, t: &Targets, start: usize, out: &mut [[f64; 2]]) {
        for (o, i) in out.iter_mut().zip(start..) {
            let w = self.mean_weight(t, i) as f64;
            *o = [t.label[i] as f64 * w, w];
        }
    }
    /// For L1-type losses, output `output`'s leaves are refit to this quantile of the residuals.
    fn leaf_quantile(&self, _output: usize) -> Option<f64> {
        None
    }
}

/// The loss of `objective` with its parameters (`TrainConfig::objective_params`); with
/// several targets, the objective's loss on each target alone.
pub fn loss_for(objective: Objective, params: &ObjectiveParams) -> Box<dyn Loss> {
    let inner = (objective.descriptor().loss)(params);
    match params.num_target {
        0 | 1 => inner,
        n_targets => Box::new(per_target::PerTarget { inner, n_targets }),
    }
}

/// Turns one row's margins into the objective's output (probabilities, means, ...).
pub fn transform_row(objective: Objective, row: &mut [f32]) {
    objective.link().apply(row)
}

pub(crate) use crate::math::sigmoid;

/// Fails with the first row where `ok` does not hold.
pub(crate) fn check_each(label: &[f32], what: &str, ok: impl Fn(f32) -> bool + Sync) -> Result<()> {
    match crate::data::targets::first_failing(label, ok) {
        Some(i) => Err(Error::column("label", format!("value {} at row {i} is invalid: {what}", label[i]))),
        None => Ok(()),
    }
}

/// Weighted mean of the labels.
pub(crate) fn weighted_mean(t: &Targets) -> f64 {
    let (mut s, mut w) = (0f64, 0f64);
    for (i, &y) in t.label.iter().enumerate() {
        s += y as f64 * t.w(i) as f64;
        w += t.w(i) as f64;
    }
    if w > 0.0 {
        s / w
    } else {
        0.0
    }
}

/// The weighted `alpha`-quantile of `values`: in ascending order (ties in their given order),
/// the first value at which the running weight reaches `alpha` of the total.
pub fn weighted_quantile(values: &[f32], weights: impl Fn(usize) -> f32, alpha: f64) -> f32 {
    if values.is_empty() {
        return 0.0;
    }
    let mut pairs: Vec<(f32, f32)> = values.iter().enumerate().map(|(i, &v)| (v, weights(i))).collect();
    // A stable sort (rayon's is too): tied values keep their order, so the running sums are
    // reproducible.
    pairs.par_sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pairs.iter().map(|p| p.1 as f64).sum();
    let target = alpha * total;
    let mut acc = 0.0;
    for &(v, w) in &pairs {
        acc += w as f64;
        if acc >= target && acc > 0.0 {
            return v;
        }
    }
    pairs[pairs.len() - 1].0
}

/// [`weighted_quantile`] with every weight 1, by selection in linear time instead of a sort:
/// the running count first reaches `alpha * n` at the `max(1, ceil(alpha * n))`-th smallest
/// value, which is the same value (reordering `values`).
pub fn quantile(values: &mut [f32], alpha: f64) -> f32 {
    if values.is_empty() {
        return 0.0;
    }
    let k = quantile_rank(values.len(), alpha);
    *values.select_nth_unstable_by(k - 1, |a, b| a.total_cmp(b)).1
}

/// The 1-based rank of [`quantile`]'s value among `n >= 1` values (the GPU's refit selects it).
pub fn quantile_rank(n: usize, alpha: f64) -> usize {
    ((alpha * n as f64).ceil() as usize).clamp(1, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;

    #[test]
    fn selection_gives_the_unit_weight_quantile() {
        let mut rng = Rng::new(5, 0);
        for case in 0..400 {
            let n = 1 + rng.below(60);
            // Few distinct values: many ties, and signed zeros among them.
            let values: Vec<f32> = (0..n).map(|_| [-1.5, -0.0, 0.0, 0.25, 2.0, 7.0][rng.below(6)]).collect();
            let alpha = [0.01, 0.1, 0.25, 0.5, 0.5 + rng.unit() * 0.49, 0.9, 0.99][case % 7];
            let mut selected = values.clone();
            let want = weighted_quantile(&values, |_| 1.0, alpha);
            assert_eq!(quantile(&mut selected, alpha).to_bits(), want.to_bits(), "{values:?} at {alpha}");
        }
    }
}
