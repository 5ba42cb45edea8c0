//! The accelerated failure time model's noise distributions and parameters
//! (`survival:aft`): `ln T = margin + sigma Z`, with `Z` of a normal, logistic or
//! extreme-value (Gumbel, minimum) distribution. A row's time is known to lie in
//! `[lower, upper]`: equal bounds are an observed event, `upper = inf` is right-censored,
//! `lower = 0` left-censored. The loss (`objective::aft`), the metric (`metric::aft`, which
//! also reads a row's bounds from its targets) and `TrainConfig` all read them.

use serde::{Deserialize, Serialize};

/// The distribution of the AFT noise `Z` (XGBoost's `aft_loss_distribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AftDistribution {
    Normal,
    Logistic,
    Extreme,
}

impl AftDistribution {
    pub fn name(self) -> &'static str {
        match self {
            AftDistribution::Normal => "normal",
            AftDistribution::Logistic => "logistic",
            AftDistribution::Extreme => "extreme",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [AftDistribution::Normal, AftDistribution::Logistic, AftDistribution::Extreme]
            .into_iter()
            .find(|d| d.name() == name)
    }

    /// Density at `z` (0 at either infinity).
    pub fn pdf(self, z: f64) -> f64 {
        if z.is_infinite() {
            return 0.0;
        }
        match self {
            AftDistribution::Normal => (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt(),
            AftDistribution::Logistic => {
                // Symmetric: written with e^-|z| so that it never overflows.
                let e = (-z.abs()).exp();
                e / ((1.0 + e) * (1.0 + e))
            }
            AftDistribution::Extreme => {
                let w = z.exp();
                if w.is_infinite() {
                    0.0
                } else {
                    w * (-w).exp()
                }
            }
        }
    }

    /// Derivative of the density at `z`.
    pub fn pdf_slope(self, z: f64) -> f64 {
        if z.is_infinite() {
            return 0.0;
        }
        match self {
            AftDistribution::Normal => -z * self.pdf(z),
            AftDistribution::Logistic => self.pdf(z) * (-0.5 * z).tanh(),
            AftDistribution::Extreme => {
                let w = z.exp();
                if w.is_infinite() {
                    0.0
                } else {
                    (1.0 - w) * self.pdf(z)
                }
            }
        }
    }

    /// `P(Z <= z)`.
    pub fn cdf(self, z: f64) -> f64 {
        match self {
            AftDistribution::Normal => 0.5 * libm::erfc(-z / std::f64::consts::SQRT_2),
            AftDistribution::Logistic => logistic_cdf(z),
            AftDistribution::Extreme => -(-z.exp()).exp_m1(),
        }
    }

    /// `P(Z > z)`, computed directly so that it keeps its digits far in the upper tail.
    pub fn sf(self, z: f64) -> f64 {
        match self {
            AftDistribution::Normal => 0.5 * libm::erfc(z / std::f64::consts::SQRT_2),
            AftDistribution::Logistic => logistic_cdf(-z),
            AftDistribution::Extreme => (-z.exp()).exp(),
        }
    }

    /// `P(a < Z <= b)` for `a <= b`, from whichever tail loses no digits.
    pub fn mass(self, a: f64, b: f64) -> f64 {
        if a > 0.0 {
            self.sf(a) - self.sf(b)
        } else {
            self.cdf(b) - self.cdf(a)
        }
    }
}

fn logistic_cdf(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// The distribution and its scale, shared by the loss and the metric.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AftParams {
    pub distribution: AftDistribution,
    /// `sigma` (XGBoost's `aft_loss_distribution_scale`).
    pub scale: f64,
}

impl Default for AftParams {
    fn default() -> Self {
        AftParams { distribution: AftDistribution::Normal, scale: 1.0 }
    }
}

/// Likelihoods below this count as this (XGBoost floors them alike), so that one row far
/// outside its interval costs about 27.6 nats rather than infinity.
const MIN_LIKELIHOOD: f64 = 1e-12;

impl AftParams {
    /// Negative log-likelihood of one row's interval under the margin `margin`.
    pub fn nloglik(&self, margin: f64, lower: f64, upper: f64) -> f64 {
        let s = self.scale;
        if lower == upper {
            // An observed event: the density of T at the time, whose Jacobian is 1 / (s t).
            let z = (lower.ln() - margin) / s;
            let density = self.distribution.pdf(z) / (s * lower);
            -density.max(MIN_LIKELIHOOD).ln()
        } else {
            let (zl, zu) = ((lower.ln() - margin) / s, (upper.ln() - margin) / s);
            -self.distribution.mass(zl, zu).max(MIN_LIKELIHOOD).ln()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [AftDistribution; 3] = [AftDistribution::Normal, AftDistribution::Logistic, AftDistribution::Extreme];

    #[test]
    fn densities_are_the_slopes_of_their_distributions() {
        for d in ALL {
            for z in [-6.0, -2.5, -0.3, 0.0, 0.7, 2.0, 4.5] {
                let h = 1e-5;
                let slope = (d.cdf(z + h) - d.cdf(z - h)) / (2.0 * h);
                assert!((slope - d.pdf(z)).abs() < 1e-8, "{d:?} pdf at {z}");
                let curve = (d.pdf(z + h) - d.pdf(z - h)) / (2.0 * h);
                assert!((curve - d.pdf_slope(z)).abs() < 1e-8, "{d:?} pdf slope at {z}");
                assert!((d.cdf(z) + d.sf(z) - 1.0).abs() < 1e-15, "{d:?} tails at {z}");
            }
            assert_eq!((d.cdf(f64::NEG_INFINITY), d.cdf(f64::INFINITY)), (0.0, 1.0));
            assert_eq!((d.pdf(f64::INFINITY), d.pdf_slope(f64::NEG_INFINITY)), (0.0, 0.0));
        }
        // Known values: the normal's 97.5% point, and the Gumbel-minimum's median ln(ln 2).
        assert!((AftDistribution::Normal.cdf(1.959963984540054) - 0.975).abs() < 1e-14);
        assert!((AftDistribution::Extreme.cdf(2f64.ln().ln()) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn mass_keeps_its_digits_in_the_far_tail() {
        // P(8 < Z <= 9) for the normal: sf(8) - sf(9) = 6.2209606e-16 - 1.1285884e-19, which
        // 1 - cdf would round to 0.
        let m = AftDistribution::Normal.mass(8.0, 9.0);
        assert!((m / 6.219831985865831e-16 - 1.0).abs() < 1e-6, "{m}");
    }

    #[test]
    fn nloglik_of_each_kind_of_interval() {
        let p = AftParams { distribution: AftDistribution::Normal, scale: 2.0 };
        // Observed at t = e: z = (1 - 0) / 2; -ln(phi(0.5) / (2 e)).
        let phi = (-0.125f64).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let e = std::f64::consts::E;
        assert!((p.nloglik(0.0, e, e) + (phi / (2.0 * e)).ln()).abs() < 1e-12);
        // Right-censored at e: -ln P(Z > 0.5).
        let right = p.nloglik(0.0, e, f64::INFINITY);
        assert!((right + AftDistribution::Normal.sf(0.5).ln()).abs() < 1e-12);
        // Left-censored at e: -ln P(Z <= 0.5).
        let left = p.nloglik(0.0, 0.0, e);
        assert!((left + AftDistribution::Normal.cdf(0.5).ln()).abs() < 1e-12);
        // An impossible fit costs the floor, not infinity.
        assert!((p.nloglik(-200.0, e, f64::INFINITY) + MIN_LIKELIHOOD.ln()).abs() < 1e-9);
    }
}
