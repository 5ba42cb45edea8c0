//! `reg:squarederror`, `reg:pseudohubererror` and `reg:expectileerror`.

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

/// Expectile loss (XGBoost 3.3's `reg:expectileerror`): the squared error weighted by
/// `alpha` where the label is above the prediction and by `1 - alpha` where it is at or below,
/// `|alpha - 1(y < p)| (y - p)^2`. Its minimiser is the label's `alpha`-expectile (the mean at
/// 0.5); unlike the pinball loss it has a second derivative, so leaves need no refit.
pub struct Expectile {
    pub alpha: f32,
}

impl Expectile {
    /// The loss's weight at a prediction `d = p - y` away from the label (XGBoost's
    /// `weight_scale`: `1 - alpha` at or above the label, `alpha` below it).
    #[inline]
    fn side(&self, d: f32) -> f32 {
        if d >= 0.0 {
            1.0 - self.alpha
        } else {
            self.alpha
        }
    }
}

impl Loss for Expectile {
    /// Half the loss's derivatives, as XGBoost computes them: `side * (p - y)` and `side`.
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let d = margin[i] - t.label[i];
            let w = t.w(i);
            let s = self.side(d);
            *o = GradPair { g: s * d * w, h: s * w };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "labels must be finite", f32::is_finite)
    }

    /// XGBoost's estimate: one Newton step of the loss from the weighted mean of the labels,
    /// `mean - G / H` with the gradients at the mean (f32 gradients, summed in f64).
    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        let mean = weighted_mean(t) as f32;
        let (mut g, mut h) = (0f64, 0f64);
        for (i, &y) in t.label.iter().enumerate() {
            let d = mean - y;
            let s = self.side(d);
            g += (s * d * t.w(i)) as f64;
            h += (s * t.w(i)) as f64;
        }
        let step = if h > 0.0 { g / h } else { 0.0 };
        vec![(mean as f64 - step) as f32]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectile_weighs_each_side_and_starts_one_newton_step_from_the_mean() {
        let label = [0.0f32, 1.0, 5.0];
        let weight = [1.0f32, 2.0, 1.0];
        let t = Targets { label: &label, label_upper: None, weight: Some(&weight), groups: None };
        let loss = Expectile { alpha: 0.8 };
        let mut out = vec![GradPair::default(); 3];
        loss.gradients(&[1.0, 0.0, 2.0], &t, &mut out).unwrap();
        // Above the label (and at it) the weight is 1 - alpha; below, alpha.
        assert_eq!(out[0], GradPair { g: (1.0 - 0.8f32) * 1.0, h: 1.0 - 0.8f32 });
        assert_eq!(out[1], GradPair { g: -0.8f32 * 2.0, h: 0.8 * 2.0 });
        assert_eq!(out[2], GradPair { g: 0.8 * -3.0, h: 0.8 });
        // Weighted mean 7 / 4 = 1.75; gradients there: rows 0 and 1 below it (weight 0.2),
        // row 2 above (0.8): G = 0.2 * 1.75 + 0.2 * 0.75 * 2 - 0.8 * 3.25, H = 0.2 + 0.4 + 0.8.
        let (g, h) = (0.2 * 1.75 + 0.2 * 0.75 * 2.0 - 0.8 * 3.25, 0.2 + 0.4 + 0.8);
        let base = loss.estimate_base_margin(&t)[0] as f64;
        assert!((base - (1.75 - g / h)).abs() < 1e-6, "{base}");
        // At 0.5 the loss is half the squared error: the base is the mean.
        assert_eq!(Expectile { alpha: 0.5 }.estimate_base_margin(&t), vec![1.75]);
    }
}
