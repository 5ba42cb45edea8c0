//! Accelerated failure time metrics (`survival:aft`): `aft-nloglik` and
//! `interval-regression-accuracy`. The distributions and their parameters are in
//! `params::aft`, below `objective` and `metric`, because the loss and the metrics both read
//! them; they are re-exported here, where they were.

use super::weighted_average;
use crate::data::Targets;
pub use crate::params::aft::{AftDistribution, AftParams};

impl AftParams {
    /// Row `i`'s interval `[lower, upper]`: its label, and its upper bound where one was given
    /// (without one, every row is an observed event).
    pub fn bounds(t: &Targets, i: usize) -> (f64, f64) {
        let lower = t.label[i] as f64;
        (lower, t.label_upper.map_or(lower, |u| u[i] as f64))
    }
}

/// `aft-nloglik`: the negative log-likelihood averaged with the weights, of predicted times
/// `pred` (the margins' exponentials).
pub fn aft_nloglik(pred: &[f32], t: &Targets, params: &AftParams) -> f64 {
    weighted_average(t, |i| {
        let (lower, upper) = AftParams::bounds(t, i);
        params.nloglik((pred[i] as f64).ln(), lower, upper)
    })
}

/// `interval-regression-accuracy`: the weighted share of rows whose predicted time lies in
/// their interval.
pub fn interval_accuracy(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let (lower, upper) = AftParams::bounds(t, i);
        let p = pred[i] as f64;
        f64::from(lower <= p && p <= upper)
    })
}
