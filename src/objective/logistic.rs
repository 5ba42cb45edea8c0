//! `binary:logistic`: log loss on the sigmoid of the margin.

use rayon::prelude::*;

use super::{check_each, sigmoid, weighted_mean, Loss, Targets};
use crate::error::Result;
use crate::tree::GradPair;

pub struct Logistic;

/// Hessians never fall below this, so saturated rows keep a usable weight.
const MIN_HESSIAN: f32 = 1e-16;

impl Loss for Logistic {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let p = sigmoid(margin[i]);
            let w = t.w(i);
            *o = GradPair { g: (p - t.label[i]) * w, h: (p * (1.0 - p)).max(MIN_HESSIAN) * w };
        });
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "binary:logistic needs labels in [0, 1]", |y| (0.0..=1.0).contains(&y))
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        vec![self.base_score_to_margin(weighted_mean(t))]
    }

    fn base_score_to_margin(&self, p: f64) -> f32 {
        let p = p.clamp(1e-6, 1.0 - 1e-6);
        (p / (1.0 - p)).ln() as f32
    }
}
