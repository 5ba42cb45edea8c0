//! `survival:aft`: accelerated failure time, the negative log-likelihood of each row's
//! interval of times (its label the lower bound, `Targets::label_upper` the upper one) under
//! `ln T = margin + sigma Z`. The distributions are in `params::aft`. The model's output is the
//! predicted time, `exp(margin)`.
//!
//! With `z = (ln t - margin) / sigma`, an observed event at `t` costs `-ln f(z) + ln(sigma t)`,
//! and an interval `[l, u]` costs `-ln(F(z_u) - F(z_l))`. Their derivatives in the margin:
//! - event: `g = f'(z) / (sigma f(z))`, `h = (f'^2 - f f'') / (sigma f)^2`, in closed form per
//!   distribution (below), so that no ratio of tiny densities is ever taken;
//! - interval, with `D = F(z_u) - F(z_l)`: `g = (f_u - f_l) / (sigma D)`,
//!   `h = ((f_u - f_l)^2 - (f'_u - f'_l) D) / (sigma D)^2`.
//!
//! As XGBoost does, gradients are clipped to [-15, 15] and hessians to [1e-16, 15]: far outside
//! its interval a row's pull would otherwise grow without bound (the normal's hazard grows
//! like z), and one such row would dominate a leaf.

use rayon::prelude::*;

use super::{Loss, Targets};
use crate::error::{Error, Result};
use crate::params::aft::{AftDistribution, AftParams};
use crate::tree::GradPair;

pub struct Aft {
    pub params: AftParams,
}

const MAX_GRADIENT: f64 = 15.0;
const MIN_HESSIAN: f64 = 1e-16;
const MAX_HESSIAN: f64 = 15.0;
/// An interval whose probability falls below this is far from the margin: its gradient is
/// then the tail's limit, which no longer needs the (underflowed) probability.
const TINY_MASS: f64 = 1e-12;

impl Aft {
    /// Gradient and hessian of one row with interval `[lower, upper]` at `margin`, unweighted.
    pub(crate) fn pair(&self, margin: f64, lower: f64, upper: f64) -> (f64, f64) {
        let (d, s) = (self.params.distribution, self.params.scale);
        let (g, h) = if lower == upper {
            let z = (lower.ln() - margin) / s;
            // f'/f and -(f'/f)' of each distribution.
            let (ratio, curvature) = match d {
                AftDistribution::Normal => (-z, 1.0),
                AftDistribution::Logistic => ((-0.5 * z).tanh(), 2.0 * d.pdf(z)),
                AftDistribution::Extreme => (1.0 - z.exp(), z.exp()),
            };
            (ratio / s, curvature / (s * s))
        } else {
            let (zl, zu) = ((lower.ln() - margin) / s, (upper.ln() - margin) / s);
            let mass = d.mass(zl, zu);
            if mass < TINY_MASS {
                (tail_limit(d, zl, zu) / s, MIN_HESSIAN)
            } else {
                let df = d.pdf(zu) - d.pdf(zl);
                let dslope = d.pdf_slope(zu) - d.pdf_slope(zl);
                (df / (s * mass), (df * df - dslope * mass) / (s * s * mass * mass))
            }
        };
        (g.clamp(-MAX_GRADIENT, MAX_GRADIENT), h.clamp(MIN_HESSIAN, MAX_HESSIAN))
    }
}

/// `sigma g` of an interval that the margin lies far from: above it (every `z` very negative),
/// the reversed hazard `f / F` at its upper end; below it, minus the hazard `f / (1 - F)` at
/// its lower end. Their asymptotes: the normal's `|z|`, the logistic's 1, and the Gumbel's 1
/// above and `e^z` below.
fn tail_limit(d: AftDistribution, zl: f64, zu: f64) -> f64 {
    if zu <= 0.0 {
        match d {
            AftDistribution::Normal => -zu,
            AftDistribution::Logistic | AftDistribution::Extreme => 1.0,
        }
    } else {
        match d {
            AftDistribution::Normal => -zl,
            AftDistribution::Logistic => -1.0,
            AftDistribution::Extreme => -zl.exp(),
        }
    }
}

impl Loss for Aft {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let (lower, upper) = AftParams::bounds(t, i);
            let (g, h) = self.pair(margin[i] as f64, lower, upper);
            let w = t.w(i) as f64;
            *o = GradPair { g: (g * w) as f32, h: (h * w) as f32 };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        for i in 0..t.n_rows() {
            let (lower, upper) = AftParams::bounds(t, i);
            if lower < 0.0 {
                return Err(Error::column(
                    "label",
                    format!("value {lower} at row {i} is invalid: survival:aft needs times >= 0 (the lower bound)"),
                ));
            }
            if upper == 0.0 {
                return Err(Error::column(
                    "label_upper_bound",
                    format!("row {i} has the interval [0, 0]: an observed time must be > 0"),
                ));
            }
        }
        Ok(())
    }

    /// The margin of the best constant: Newton's method on the summed loss, from the mean log
    /// of the rows' finite bounds.
    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        let (mut sum, mut count) = (0f64, 0f64);
        for i in 0..t.n_rows() {
            let (lower, upper) = AftParams::bounds(t, i);
            let end = if lower > 0.0 { lower } else { upper };
            if end.is_finite() {
                sum += end.ln() * t.w(i) as f64;
                count += t.w(i) as f64;
            }
        }
        let mut m = if count > 0.0 { sum / count } else { 0.0 };
        for _ in 0..20 {
            let (mut g, mut h) = (0f64, 0f64);
            for i in 0..t.n_rows() {
                let (lower, upper) = AftParams::bounds(t, i);
                let (gi, hi) = self.pair(m, lower, upper);
                g += gi * t.w(i) as f64;
                h += hi * t.w(i) as f64;
            }
            let step = g / h.max(MIN_HESSIAN);
            m -= step;
            if step.abs() < 1e-9 {
                break;
            }
        }
        vec![m as f32]
    }

    fn base_score_to_margin(&self, time: f64) -> f32 {
        time.max(1e-16).ln() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [AftDistribution; 3] = [AftDistribution::Normal, AftDistribution::Logistic, AftDistribution::Extreme];

    /// Every kind of interval, at margins inside, near and outside it.
    #[test]
    fn gradients_are_the_slopes_of_the_nloglik() {
        let intervals = [(2.0, 2.0), (1.0, 4.0), (3.0, f64::INFINITY), (0.0, 0.5), (1.5, 1.6)];
        for d in ALL {
            for scale in [0.7, 1.0, 1.8] {
                let aft = Aft { params: AftParams { distribution: d, scale } };
                for (lower, upper) in intervals {
                    for margin in [-1.5, -0.2, 0.4, 1.1, 2.3] {
                        let nll = |m: f64| aft.params.nloglik(m, lower, upper);
                        if nll(margin) > 27.0 {
                            // Below the likelihood floor the metric is flat; the tails are
                            // checked by the next test.
                            continue;
                        }
                        let e = 1e-4;
                        let slope = (nll(margin + e) - nll(margin - e)) / (2.0 * e);
                        let curve = (nll(margin + e) - 2.0 * nll(margin) + nll(margin - e)) / (e * e);
                        let (g, h) = aft.pair(margin, lower, upper);
                        let what = format!("{d:?} sigma {scale} [{lower}, {upper}] at {margin}");
                        assert!((g - slope.clamp(-15.0, 15.0)).abs() < 1e-5, "g {g} vs {slope}: {what}");
                        assert!(
                            (h - curve.clamp(1e-16, 15.0)).abs() < 1e-3 * (1.0 + curve.abs()),
                            "h {h} vs {curve}: {what}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn far_from_the_interval_the_pull_is_the_tails_and_points_back() {
        for d in ALL {
            let aft = Aft { params: AftParams { distribution: d, scale: 1.0 } };
            // Margin far below a right-censored time: pull up (negative gradient).
            let (g, h) = aft.pair(-60.0, 5.0, f64::INFINITY);
            assert!(g < 0.0 && h >= 1e-16, "{d:?}: {g} {h}");
            // Far above a left-censored time: pull down.
            let (g, _) = aft.pair(60.0, 0.0, 5.0);
            assert!(g > 0.0, "{d:?}: {g}");
            assert!(g.is_finite() && g.abs() <= 15.0);
        }
    }

    #[test]
    fn the_base_margin_minimises_the_constant_fit() {
        let label = [1.0f32, 2.0, 4.0, 3.0, 0.0];
        let upper = [1.0f32, 2.0, f32::INFINITY, 6.0, 1.5];
        let t = Targets { label: &label, label_upper: Some(&upper), weight: None, groups: None };
        for d in ALL {
            let aft = Aft { params: AftParams { distribution: d, scale: 0.9 } };
            let m = aft.estimate_base_margin(&t)[0] as f64;
            let total =
                |m: f64| -> f64 { (0..5).map(|i| aft.params.nloglik(m, label[i] as f64, upper[i] as f64)).sum() };
            assert!(total(m) <= total(m + 1e-3) && total(m) <= total(m - 1e-3), "{d:?}: {m}");
        }
    }
}
