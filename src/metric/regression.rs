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

/// The pinball loss at quantile `alpha`: `alpha * (y - p)` above the prediction,
/// `(1 - alpha) * (p - y)` below it, averaged with the weights (XGBoost's `quantile`).
pub fn pinball(pred: &[f32], t: &Targets, alpha: f64) -> f64 {
    weighted_average(t, |i| {
        let d = t.label[i] as f64 - pred[i] as f64;
        if d >= 0.0 {
            alpha * d
        } else {
            (alpha - 1.0) * d
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinball_weighs_each_side_by_the_quantile() {
        // Residuals y - p: 2, -1, 0, -4; weights 1, 2, 1, 1.
        let (label, pred, weight) = ([3.0, 1.0, 5.0, 0.0], [1.0, 2.0, 5.0, 4.0], [1.0, 2.0, 1.0, 1.0]);
        let t = Targets { label: &label, weight: Some(&weight), groups: None };
        // alpha 0.9: (0.9*2*1 + 0.1*1*2 + 0 + 0.1*4*1) / 5 = (1.8 + 0.2 + 0.4) / 5.
        assert!((pinball(&pred, &t, 0.9) - 2.4 / 5.0).abs() < 1e-12);
        // alpha 0.5 is half the absolute error.
        assert!((pinball(&pred, &t, 0.5) - mae(&pred, &t) / 2.0).abs() < 1e-12);
    }
}
