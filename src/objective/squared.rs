//! `reg:squarederror` and `reg:pseudohubererror`.

use rayon::prelude::*;

use super::{check_each, weighted_mean, weighted_quantile, Loss, Targets};
use crate::error::Result;
use crate::tree::GradPair;

pub struct Squared;

impl Loss for Squared {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let w = t.w(i);
            *o = GradPair { g: (margin[i] - t.label[i]) * w, h: w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "labels must be finite", f32::is_finite)
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        vec![weighted_mean(t) as f32]
    }
}

/// Pseudo-Huber loss `slope^2 (sqrt(1 + (r / slope)^2) - 1)` of the residual `r`.
pub struct PseudoHuber {
    pub slope: f32,
}

impl Loss for PseudoHuber {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let d = self.slope;
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let z = margin[i] - t.label[i];
            let s = (1.0 + (z / d) * (z / d)).sqrt();
            let w = t.w(i);
            *o = GradPair { g: z / s * w, h: w / (s * s * s) };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "labels must be finite", f32::is_finite)
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        vec![weighted_quantile(t.label, |i| t.w(i), 0.5)]
    }
}
