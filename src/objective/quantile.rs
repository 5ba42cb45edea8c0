//! `reg:quantileerror` (pinball loss) and `reg:absoluteerror` (its median case). The
//! gradient only says which side of the target a prediction lies on, so after each tree
//! the leaves are refit to the quantile of their rows' residuals, as XGBoost and LightGBM do.

use rayon::prelude::*;

use super::{check_each, weighted_quantile, Loss, Targets};
use crate::error::Result;
use crate::tree::GradPair;

pub struct Quantile {
    pub alpha: f64,
}

impl Loss for Quantile {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let a = self.alpha as f32;
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let w = t.w(i);
            let g = if margin[i] >= t.label[i] { 1.0 - a } else { -a };
            *o = GradPair { g: g * w, h: w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "labels must be finite", f32::is_finite)
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        vec![weighted_quantile(t.label, |i| t.w(i), self.alpha)]
    }

    fn leaf_quantile(&self) -> Option<f64> {
        Some(self.alpha)
    }
}
