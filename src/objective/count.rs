//! `count:poisson`, `reg:tweedie` and `reg:gamma`, all with a log link.

use rayon::prelude::*;

use super::{check_each, weighted_mean, Loss, Targets};
use crate::error::Result;
use crate::math::exp;
use crate::tree::GradPair;

/// The base margin of the three log links, written once: the log of the weighted mean label
/// (kept above 1e-6), which a fit over several workers sums exactly
/// (`base_margin_is_weighted_mean`).
macro_rules! log_of_weighted_mean {
    () => {
        fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
            vec![self.base_score_to_margin(weighted_mean(t))]
        }

        fn base_margin_is_weighted_mean(&self) -> bool {
            true
        }

        fn base_score_to_margin(&self, mean: f64) -> f32 {
            mean.max(1e-6).ln() as f32
        }
    };
}

/// Poisson regression. The hessian is taken at `margin + 0.7`, XGBoost's safeguard against
/// huge early steps (its `max_delta_step` for this objective).
pub struct Poisson;

const POISSON_HESSIAN_SHIFT: f32 = 0.7;

impl Loss for Poisson {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let w = t.w(i);
            *o = GradPair { g: (exp(margin[i]) - t.label[i]) * w, h: exp(margin[i] + POISSON_HESSIAN_SHIFT) * w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "count:poisson needs labels >= 0", |y| y >= 0.0)
    }

    log_of_weighted_mean!();
}

/// Gamma regression (XGBoost's `reg:gamma`): the gamma deviance with a log link, for positive
/// skewed targets (claim sizes, durations).
pub struct Gamma;

impl Loss for Gamma {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let w = t.w(i);
            let ratio = t.label[i] / exp(margin[i]);
            *o = GradPair { g: (1.0 - ratio) * w, h: ratio * w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "reg:gamma needs labels > 0", |y| y > 0.0)
    }

    log_of_weighted_mean!();
}

/// Tweedie deviance with variance power `rho` in [1, 2).
pub struct Tweedie {
    pub rho: f32,
}

impl Loss for Tweedie {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let rho = self.rho;
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let (m, y, w) = (margin[i], t.label[i], t.w(i));
            let a = exp((1.0 - rho) * m);
            let b = exp((2.0 - rho) * m);
            *o = GradPair { g: (-y * a + b) * w, h: (-y * (1.0 - rho) * a + (2.0 - rho) * b) * w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "reg:tweedie needs labels >= 0", |y| y >= 0.0)
    }

    log_of_weighted_mean!();
}
