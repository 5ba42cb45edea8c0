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

    fn base_margin_is_weighted_mean(&self) -> bool {
        true
    }
}

/// Squared log error `(ln(1 + p) - ln(1 + y))^2 / 2` (XGBoost's `reg:squaredlogerror`), for
/// targets whose relative error matters; labels and predictions above -1.
pub struct SquaredLog;

/// XGBoost's floor on the hessian, which the loss makes negative far above the label.
const SQUARED_LOG_MIN_HESSIAN: f32 = 1e-6;

impl Loss for SquaredLog {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        if let Some(i) = margin.iter().position(|&p| p <= -1.0) {
            return Err(crate::error::Error::Data(format!(
                "reg:squaredlogerror: the prediction of row {} fell to {} (it must stay above -1); \
                 a smaller learning_rate or a base_score keeps it there",
                i % t.label.len(),
                margin[i]
            )));
        }
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let p = margin[i];
            let d = p.ln_1p() - t.label[i].ln_1p();
            let w = t.w(i);
            let h = ((1.0 - d) / ((p + 1.0) * (p + 1.0))).max(SQUARED_LOG_MIN_HESSIAN);
            *o = GradPair { g: d / (p + 1.0) * w, h: h * w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "reg:squaredlogerror needs labels > -1", |y| y > -1.0)
    }

    /// The constant that minimises the loss: `exp(mean(ln(1 + y))) - 1`.
    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        let mean_log = crate::metric::weighted_average(t, |i| (t.label[i] as f64).ln_1p());
        vec![mean_log.exp_m1() as f32]
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
