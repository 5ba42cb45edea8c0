//! `binary:logistic`: log loss on the sigmoid of the margin; and `binary:hinge`.

use rayon::prelude::*;

use super::{check_each, sigmoid, Loss, Targets};
use crate::error::Result;
use crate::tree::GradPair;

pub struct Logistic {
    /// The weight multiplier of rows labelled exactly 1 (XGBoost's `scale_pos_weight`).
    pub scale_pos_weight: f32,
}

impl Logistic {
    /// Row i's weight, scaled when it is a positive.
    fn weight(&self, t: &Targets, i: usize) -> f32 {
        let w = t.w(i);
        if t.label[i] == 1.0 {
            w * self.scale_pos_weight
        } else {
            w
        }
    }
}

/// Hessians never fall below this, so saturated rows keep a usable weight.
const MIN_HESSIAN: f32 = 1e-16;

impl Loss for Logistic {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let p = sigmoid(margin[i]);
            let w = self.weight(t, i);
            *o = GradPair { g: (p - t.label[i]) * w, h: (p * (1.0 - p)).max(MIN_HESSIAN) * w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "binary:logistic needs labels in [0, 1]", |y| (0.0..=1.0).contains(&y))
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        // The mean label under the (scaled) weights: the constant minimising the loss.
        let (mut sum, mut total) = (0f64, 0f64);
        for (i, &y) in t.label.iter().enumerate() {
            let w = self.weight(t, i) as f64;
            sum += y as f64 * w;
            total += w;
        }
        vec![self.base_score_to_margin(if total > 0.0 { sum / total } else { 0.0 })]
    }

    fn base_margin_is_weighted_mean(&self) -> bool {
        true
    }

    fn mean_weight(&self, t: &Targets, i: usize) -> f32 {
        self.weight(t, i)
    }

    fn base_score_to_margin(&self, p: f64) -> f32 {
        let p = p.clamp(1e-6, 1.0 - 1e-6);
        (p / (1.0 - p)).ln() as f32
    }
}

/// The hinge loss of XGBoost's `binary:hinge`: labels 0 and 1 as -1 and +1; a row inside the
/// margin (`y m < 1`) pulls with gradient `-y` and unit hessian, the others not at all (their
/// hessian the smallest positive float, as XGBoost's). The model predicts the class.
pub struct Hinge;

impl Loss for Hinge {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let y = 2.0 * t.label[i] - 1.0;
            let w = t.w(i);
            *o = if margin[i] * y < 1.0 {
                GradPair { g: -y * w, h: w }
            } else {
                GradPair { g: 0.0, h: f32::MIN_POSITIVE }
            };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "binary:hinge needs labels 0 or 1", |y| y == 0.0 || y == 1.0)
    }

    /// Margin 0: the class boundary.
    fn estimate_base_margin(&self, _: &Targets) -> Vec<f32> {
        vec![0.0]
    }
}
