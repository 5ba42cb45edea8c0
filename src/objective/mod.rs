//! Losses: each writes gradient pairs into a preallocated buffer, checks its labels, and
//! estimates the starting margin. Margins and gradients are class-major: output `k` of row
//! `i` sits at `k * n_rows + i`.

mod count;
mod logistic;
mod quantile;
mod ranking;
mod softmax;
mod squared;

use crate::config::{Objective, TrainConfig};
use crate::error::{Error, Result};
use crate::tree::GradPair;

/// Labels and what goes with them.
#[derive(Clone, Copy)]
pub struct Targets<'a> {
    pub label: &'a [f32],
    pub weight: Option<&'a [f32]>,
    /// Query group offsets (ranking).
    pub groups: Option<&'a [usize]>,
}

impl Targets<'_> {
    #[inline]
    pub fn w(&self, i: usize) -> f32 {
        self.weight.map_or(1.0, |w| w[i])
    }

    pub fn n_rows(&self) -> usize {
        self.label.len()
    }
}

/// A loss function as the boosting loop uses it.
pub trait Loss: Send + Sync {
    /// Gradient pairs (weights applied) for every row and output.
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]);
    /// Rejects labels outside the loss's domain, naming the first bad row.
    fn check_labels(&self, t: &Targets) -> Result<()>;
    /// The starting margin of each output when no base score is given.
    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32>;
    /// The margin of a user-given base score (which is in output space).
    fn base_score_to_margin(&self, score: f64) -> f32 {
        score as f32
    }
    /// For L1-type losses, leaves are refit to this quantile of the residuals.
    fn leaf_quantile(&self) -> Option<f64> {
        None
    }
}

/// The loss for a configuration.
pub fn loss_for(cfg: &TrainConfig) -> Box<dyn Loss> {
    match cfg.objective {
        Objective::SquaredError => Box::new(squared::Squared),
        Objective::PseudoHuber => Box::new(squared::PseudoHuber { slope: cfg.huber_slope as f32 }),
        Objective::AbsoluteError => Box::new(quantile::Quantile { alpha: 0.5 }),
        Objective::Quantile => Box::new(quantile::Quantile { alpha: cfg.quantile_alpha }),
        Objective::BinaryLogistic => Box::new(logistic::Logistic),
        Objective::MultiSoftprob | Objective::MultiSoftmax => Box::new(softmax::Softmax { n_classes: cfg.num_class }),
        Objective::Poisson => Box::new(count::Poisson),
        Objective::Tweedie => Box::new(count::Tweedie { rho: cfg.tweedie_variance_power as f32 }),
        Objective::RankNdcg => Box::new(ranking::LambdaRank { ndcg: true }),
        Objective::RankPairwise => Box::new(ranking::LambdaRank { ndcg: false }),
    }
}

/// Turns one row's margins into the objective's output (probabilities, means, ...).
pub fn transform_row(objective: Objective, row: &mut [f32]) {
    match objective {
        Objective::BinaryLogistic => row.iter_mut().for_each(|m| *m = sigmoid(*m)),
        Objective::MultiSoftprob | Objective::MultiSoftmax => softmax::softmax_in_place(row),
        Objective::Poisson | Objective::Tweedie => row.iter_mut().for_each(|m| *m = m.exp()),
        _ => {}
    }
}

#[inline]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Fails with the first row where `ok` does not hold.
pub(crate) fn check_each(label: &[f32], what: &str, ok: impl Fn(f32) -> bool) -> Result<()> {
    match label.iter().position(|&y| !ok(y)) {
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

/// The weighted `alpha`-quantile of `values` (lower value at ties).
pub(crate) fn weighted_quantile(values: &[f32], weights: impl Fn(usize) -> f32, alpha: f64) -> f32 {
    if values.is_empty() {
        return 0.0;
    }
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
    let total: f64 = idx.iter().map(|&i| weights(i) as f64).sum();
    let target = alpha * total;
    let mut acc = 0.0;
    for &i in &idx {
        acc += weights(i) as f64;
        if acc >= target && acc > 0.0 {
            return values[i];
        }
    }
    values[*idx.last().unwrap()]
}
