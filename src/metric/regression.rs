//! Regression metrics.

use super::weighted_average;
use crate::data::targets::survival_order;
use crate::data::Targets;
use crate::math::ln;

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

/// The pinball loss at quantile `alpha` (output j of `k`: `alphas[j]`): `alpha * (y - p)` above the prediction,
/// `(1 - alpha) * (p - y)` below it, averaged with the weights (XGBoost's `quantile`).
pub fn pinball(pred: &[f32], k: usize, t: &Targets, alphas: &[f64]) -> f64 {
    // Each row's k predictions (one per quantile), averaged as XGBoost's `quantile` does.
    weighted_average(t, |i| {
        (0..k)
            .map(|j| {
                let alpha = alphas[j.min(alphas.len() - 1)];
                let d = t.label[i] as f64 - pred[i * k + j] as f64;
                if d >= 0.0 {
                    alpha * d
                } else {
                    (alpha - 1.0) * d
                }
            })
            .sum::<f64>()
            / k as f64
    })
}

/// The expectile loss `|alpha - 1(y < p)| (y - p)^2`, averaged with the weights (XGBoost's
/// `expectile`: the squared residual weighted by `alpha` where the label is at or above the
/// prediction, by `1 - alpha` below it).
pub fn expectile(pred: &[f32], t: &Targets, alpha: f64) -> f64 {
    weighted_average(t, |i| {
        let d = t.label[i] as f64 - pred[i] as f64;
        (if d >= 0.0 { alpha } else { 1.0 - alpha }) * d * d
    })
}

/// Poisson negative log-likelihood, `p - y ln p + ln Γ(y + 1)`, averaged with the weights
/// (XGBoost's `poisson-nloglik`; the mean floored at 1e-16).
pub fn poisson_nloglik(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let (p, y) = ((pred[i] as f64).max(1e-16), t.label[i] as f64);
        p - y * p.ln() + ln_gamma(y + 1.0)
    })
}

/// Gamma negative log-likelihood with dispersion 1, `y / p + ln p` (XGBoost's
/// `gamma-nloglik`).
pub fn gamma_nloglik(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let (p, y) = ((pred[i] as f64).max(1e-16), t.label[i] as f64);
        y / p + ln(p)
    })
}

/// Twice the mean gamma deviance, `2 (y / p - ln(y / p) - 1)`, label and mean each shifted by
/// 1e-6 (XGBoost's `gamma-deviance`).
pub fn gamma_deviance(pred: &[f32], t: &Targets) -> f64 {
    2.0 * weighted_average(t, |i| {
        let ratio = (t.label[i] as f64 + 1e-6) / (pred[i] as f64 + 1e-6);
        ratio - ln(ratio) - 1.0
    })
}

/// ln Γ(x) for x > 0: Lanczos' approximation (g = 7, 9 terms), about 15 significant digits.
pub(crate) fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (k, c) in C.iter().enumerate().skip(1) {
        a += c / (x + k as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Root mean squared log error (predictions and labels above -1).
pub fn rmsle(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let d = (pred[i] as f64).ln_1p() - (t.label[i] as f64).ln_1p();
        d * d
    })
    .sqrt()
}

/// Negative log-likelihood of a Tweedie distribution with variance power `rho` (up to terms
/// of the labels alone), as XGBoost's `tweedie-nloglik`: `-y p^(1-rho)/(1-rho) + p^(2-rho)/(2-rho)`.
pub fn tweedie_nloglik(pred: &[f32], t: &Targets, rho: f64) -> f64 {
    weighted_average(t, |i| {
        let (p, y) = (pred[i] as f64, t.label[i] as f64);
        let a = y * ((1.0 - rho) * p.ln()).exp() / (1.0 - rho);
        let b = ((2.0 - rho) * p.ln()).exp() / (2.0 - rho);
        -a + b
    })
}

/// Cox negative partial log-likelihood per event (Breslow ties), of hazard ratios `pred`;
/// labels are times, negative when censored.
pub fn cox_nloglik(pred: &[f32], t: &Targets) -> f64 {
    let order = survival_order(t.label);
    let mut risk_sum: f64 = pred.iter().map(|&p| p as f64).sum();
    let (mut total, mut events) = (0f64, 0usize);
    let (mut leaving, mut last_time, mut last_hazard) = (0f64, 0f64, 0f64);
    for &i in &order {
        let time = t.label[i].abs() as f64;
        leaving += last_hazard;
        if last_time < time {
            risk_sum -= leaving;
            leaving = 0.0;
        }
        if t.label[i] > 0.0 {
            total -= (pred[i] as f64).ln() - risk_sum.ln();
            events += 1;
        }
        last_time = time;
        last_hazard = pred[i] as f64;
    }
    total / events.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_factorials_and_half_integers() {
        let mut fact = 1f64;
        for n in 1..30 {
            // Γ(n + 1) = n!
            fact *= n as f64;
            let got = ln_gamma(n as f64 + 1.0);
            assert!((got - fact.ln()).abs() < 1e-10 * fact.ln().max(1.0), "n = {n}: {got}");
        }
        // Γ(1/2) = √π, Γ(0.1) = 9.513507698668732.
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        assert!((ln_gamma(0.1) - 9.513_507_698_668_732f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn nloglik_metrics_follow_their_closed_forms() {
        let (label, pred, weight) = ([0.0, 2.0, 5.0], [0.5, 2.0, 4.0], [1.0, 1.0, 2.0]);
        let t = Targets { label: &label, label_upper: None, weight: Some(&weight), groups: None };
        // Poisson: p - y ln p + ln y!, weights 1, 1, 2.
        let rows = [0.5, 2.0 - 2.0 * 2f64.ln() + 2f64.ln(), 4.0 - 5.0 * 4f64.ln() + 120f64.ln()];
        let want = (rows[0] + rows[1] + 2.0 * rows[2]) / 4.0;
        assert!((poisson_nloglik(&pred, &t) - want).abs() < 1e-12);
        let (label, pred) = ([1.0, 3.0, 0.5], [2.0, 3.0, 0.25]);
        let t = Targets { label: &label, label_upper: None, weight: None, groups: None };
        let want = ((0.5 + 2f64.ln()) + (1.0 + 3f64.ln()) + (2.0 + 0.25f64.ln())) / 3.0;
        assert!((gamma_nloglik(&pred, &t) - want).abs() < 1e-12);
        // Deviance: 2 mean(r - ln r - 1) with r = y / p (here without the 1e-6 shift's effect).
        let r = [0.5f64, 1.0, 2.0];
        let want = 2.0 * r.iter().map(|r| r - r.ln() - 1.0).sum::<f64>() / 3.0;
        assert!((gamma_deviance(&pred, &t) - want).abs() < 1e-5);
    }

    #[test]
    fn pinball_weighs_each_side_by_the_quantile() {
        // Residuals y - p: 2, -1, 0, -4; weights 1, 2, 1, 1.
        let (label, pred, weight) = ([3.0, 1.0, 5.0, 0.0], [1.0, 2.0, 5.0, 4.0], [1.0, 2.0, 1.0, 1.0]);
        let t = Targets { label: &label, label_upper: None, weight: Some(&weight), groups: None };
        // alpha 0.9: (0.9*2*1 + 0.1*1*2 + 0 + 0.1*4*1) / 5 = (1.8 + 0.2 + 0.4) / 5.
        assert!((pinball(&pred, 1, &t, &[0.9]) - 2.4 / 5.0).abs() < 1e-12);
        // alpha 0.5 is half the absolute error.
        assert!((pinball(&pred, 1, &t, &[0.5]) - mae(&pred, &t) / 2.0).abs() < 1e-12);
        // Two quantiles per row: the mean of each one's loss.
        let both: Vec<f32> = pred.iter().flat_map(|&p| [p, p]).collect();
        let mean = (pinball(&pred, 1, &t, &[0.9]) + pinball(&pred, 1, &t, &[0.2])) / 2.0;
        assert!((pinball(&both, 2, &t, &[0.9, 0.2]) - mean).abs() < 1e-12);
    }
}
