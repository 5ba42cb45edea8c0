//! Regression metrics.

use super::weighted_average;
use crate::data::Targets;

pub fn rmse(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let d = pred[i] as f64 - t.label[i] as f64;
        d * d
    })
    .sqrt()
}

pub fn mae(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| (pred[i] as f64 - t.label[i] as f64).abs())
}
