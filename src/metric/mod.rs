//! Evaluation metrics, named as in XGBoost (`"auc"`, `"ndcg@10"`, ...). Each takes the
//! transformed predictions row-major (`n_rows x n_outputs`) and the targets.
//!
//! Metrics know tasks ([`TaskKind`], in `params`), not objectives: `objective` sits above this
//! module and says which task each objective is, and holds `Metric::default_for` /
//! `check_applies`. This module imports neither `objective` nor `config` (`tests/layering.rs`
//! enforces the order).

pub mod aft;
mod classification;
mod custom;
mod ranking;
mod regression;
pub mod sum;

pub use classification::{auc_counts, auc_of_counts};
pub use custom::CustomMetric;
pub use sum::halving_sum;

use serde::{Deserialize, Serialize};

use crate::data::Targets;
use crate::error::{Error, Result};
use crate::params::QuantileAlphas;
pub use crate::params::TaskKind;

/// An evaluation metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Metric {
    Rmse,
    Mae,
    Logloss,
    Auc,
    /// Binary error rate at threshold 0.5.
    Error,
    Mlogloss,
    Merror,
    /// NDCG over the top `k` of each query (all when None).
    Ndcg(Option<u32>),
    /// Mean average precision over the top `k` (relevance > 0 counts as relevant).
    Map(Option<u32>),
    /// The pinball (quantile) loss at the objective's `quantile_alpha` (XGBoost's `quantile`).
    Quantile,
    /// The expectile loss at the objective's `expectile_alpha`, `|alpha - 1(y < p)| (y - p)^2`
    /// (XGBoost's `expectile`).
    Expectile,
    /// Negative log-likelihood of a Poisson distribution with the predicted mean.
    PoissonNloglik,
    /// Negative log-likelihood of a gamma distribution with the predicted mean (dispersion 1).
    GammaNloglik,
    /// Twice the mean gamma deviance, `y / p - ln(y / p) - 1` (the default of `reg:gamma`).
    GammaDeviance,
    /// Root mean squared log error, `sqrt(mean((ln(1 + p) - ln(1 + y))^2))` (the default of
    /// `reg:squaredlogerror`).
    Rmsle,
    /// Area under the precision-recall curve (binary).
    Aucpr,
    /// Precision in the top `k` of each query (all when None).
    Precision(Option<u32>),
    /// Negative log-likelihood of a Tweedie distribution of variance power `rho` (in
    /// thousandths: `tweedie-nloglik@1.5` is 1500), the objective's `tweedie_variance_power`
    /// when None (the fit names it, see [`Metric::with_params`]).
    TweedieNloglik(Option<u32>),
    /// Cox negative partial log-likelihood per event (the default of `survival:cox`).
    CoxNloglik,
    /// Negative log-likelihood of the rows' intervals under the AFT model (the default of
    /// `survival:aft`, with its distribution and scale).
    AftNloglik,
    /// Share of rows whose predicted time lies in their interval.
    IntervalRegressionAccuracy,
}

/// What some metrics read besides predictions and targets: the training parameters they
/// share with the objective (`TrainConfig::metric_params` gathers them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricParams {
    /// The quantiles of `Metric::Quantile`'s pinball loss, one per output.
    pub quantile_alpha: QuantileAlphas,
    /// The expectile of `Metric::Expectile`.
    pub expectile_alpha: f64,
    /// The variance power of `Metric::TweedieNloglik(None)`.
    pub tweedie_variance_power: f64,
    /// The distribution and scale of `Metric::AftNloglik`.
    pub aft: aft::AftParams,
}

impl Default for MetricParams {
    fn default() -> Self {
        MetricParams {
            quantile_alpha: QuantileAlphas::default(),
            expectile_alpha: 0.5,
            tweedie_variance_power: 1.5,
            aft: aft::AftParams::default(),
        }
    }
}

impl TryFrom<String> for Metric {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        // The one cut-off that is not an integer: XGBoost's `tweedie-nloglik@1.5`.
        if let Some(rest) = s.strip_prefix("tweedie-nloglik") {
            return match rest.strip_prefix('@') {
                None if rest.is_empty() => Ok(Metric::TweedieNloglik(None)),
                Some(rho) => match rho.parse::<f64>() {
                    Ok(r) if (1.0..2.0).contains(&r) => Ok(Metric::TweedieNloglik(Some((r * 1000.0).round() as u32))),
                    _ => Err(format!("metric `{s}`: the variance power must be a number in [1, 2)")),
                },
                _ => Err(format!("unknown metric `{s}`")),
            };
        }
        let (name, k) =
            match s.split_once('@') {
                Some((n, k)) => (
                    n,
                    Some(k.parse::<u32>().map_err(|_| format!("metric `{s}`: `{k}` is not a cut-off")).and_then(
                        |k| if k == 0 { Err(format!("metric `{s}`: the cut-off must be at least 1")) } else { Ok(k) },
                    )?),
                ),
                None => (s.as_str(), None),
            };
        Ok(match (name, k) {
            ("rmse", None) => Metric::Rmse,
            ("mae", None) => Metric::Mae,
            ("logloss", None) => Metric::Logloss,
            ("auc", None) => Metric::Auc,
            ("error", None) => Metric::Error,
            ("mlogloss", None) => Metric::Mlogloss,
            ("merror", None) => Metric::Merror,
            ("quantile" | "pinball", None) => Metric::Quantile,
            ("expectile", None) => Metric::Expectile,
            ("poisson-nloglik", None) => Metric::PoissonNloglik,
            ("gamma-nloglik", None) => Metric::GammaNloglik,
            ("gamma-deviance", None) => Metric::GammaDeviance,
            ("rmsle", None) => Metric::Rmsle,
            ("aucpr", None) => Metric::Aucpr,
            ("cox-nloglik", None) => Metric::CoxNloglik,
            ("aft-nloglik", None) => Metric::AftNloglik,
            ("interval-regression-accuracy", None) => Metric::IntervalRegressionAccuracy,
            ("pre", k) => Metric::Precision(k),
            ("ndcg", k) => Metric::Ndcg(k),
            ("map", k) => Metric::Map(k),
            _ => return Err(format!("unknown metric `{s}`")),
        })
    }
}

impl From<Metric> for String {
    fn from(m: Metric) -> String {
        m.name()
    }
}

impl std::str::FromStr for Metric {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Metric::try_from(s.to_string()).map_err(|e| Error::param("eval_metric", e))
    }
}

impl Metric {
    pub fn name(&self) -> String {
        match self {
            Metric::Rmse => "rmse".into(),
            Metric::Mae => "mae".into(),
            Metric::Logloss => "logloss".into(),
            Metric::Auc => "auc".into(),
            Metric::Error => "error".into(),
            Metric::Mlogloss => "mlogloss".into(),
            Metric::Merror => "merror".into(),
            Metric::Ndcg(None) => "ndcg".into(),
            Metric::Ndcg(Some(k)) => format!("ndcg@{k}"),
            Metric::Map(None) => "map".into(),
            Metric::Map(Some(k)) => format!("map@{k}"),
            Metric::Quantile => "quantile".into(),
            Metric::Expectile => "expectile".into(),
            Metric::PoissonNloglik => "poisson-nloglik".into(),
            Metric::GammaNloglik => "gamma-nloglik".into(),
            Metric::GammaDeviance => "gamma-deviance".into(),
            Metric::Rmsle => "rmsle".into(),
            Metric::Aucpr => "aucpr".into(),
            Metric::CoxNloglik => "cox-nloglik".into(),
            Metric::AftNloglik => "aft-nloglik".into(),
            Metric::IntervalRegressionAccuracy => "interval-regression-accuracy".into(),
            Metric::Precision(None) => "pre".into(),
            Metric::Precision(Some(k)) => format!("pre@{k}"),
            Metric::TweedieNloglik(None) => "tweedie-nloglik".into(),
            // 1500 thousandths print as XGBoost prints 1.5.
            Metric::TweedieNloglik(Some(r)) => format!("tweedie-nloglik@{}", *r as f64 / 1000.0),
        }
    }

    /// The metric with what it takes from the fit's parameters named (the Tweedie variance
    /// power of a `tweedie-nloglik` given without one), so that the log names it in full.
    pub fn with_params(self, params: &MetricParams) -> Metric {
        match self {
            Metric::TweedieNloglik(None) => {
                Metric::TweedieNloglik(Some((params.tweedie_variance_power * 1000.0).round() as u32))
            }
            m => m,
        }
    }

    pub fn higher_is_better(&self) -> bool {
        matches!(
            self,
            Metric::Auc
                | Metric::Aucpr
                | Metric::Ndcg(_)
                | Metric::Map(_)
                | Metric::Precision(_)
                | Metric::IntervalRegressionAccuracy
        )
    }

    /// Whether the metric is a weighted mean over rows of a term of the row alone, so that
    /// several targets are scored as one element each (XGBoost's multi-target metrics).
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Metric::Rmse
                | Metric::Mae
                | Metric::Logloss
                | Metric::Error
                | Metric::Quantile
                | Metric::Expectile
                | Metric::PoissonNloglik
                | Metric::GammaNloglik
                | Metric::GammaDeviance
                | Metric::Rmsle
                | Metric::TweedieNloglik(_)
        )
    }

    /// Whether the metric makes sense for predictions of `task` with `n_outputs` outputs.
    pub fn applies_to(&self, task: TaskKind, n_outputs: usize) -> bool {
        match self {
            Metric::Logloss | Metric::Auc | Metric::Aucpr | Metric::Error => task == TaskKind::Binary,
            Metric::Mlogloss | Metric::Merror => task == TaskKind::Multiclass,
            Metric::Ndcg(_) | Metric::Map(_) | Metric::Precision(_) => task == TaskKind::Ranking,
            // An interval's label is only its lower bound: errors against it would mislead.
            Metric::Rmse | Metric::Mae => n_outputs == 1 && task != TaskKind::Interval,
            Metric::Expectile => task == TaskKind::Regression && n_outputs == 1,
            Metric::Quantile => task != TaskKind::Interval && (n_outputs == 1 || task == TaskKind::Regression),
            Metric::PoissonNloglik
            | Metric::GammaNloglik
            | Metric::GammaDeviance
            | Metric::Rmsle
            | Metric::TweedieNloglik(_)
            | Metric::CoxNloglik => task == TaskKind::Regression && n_outputs == 1,
            Metric::AftNloglik | Metric::IntervalRegressionAccuracy => task == TaskKind::Interval,
        }
    }

    /// A weighted mean from its sums: the terms' `s` over the weights' `w` (0 without weight).
    pub fn mean(s: f64, w: f64) -> f64 {
        if w > 0.0 {
            s / w
        } else {
            0.0
        }
    }

    /// An elementwise metric's value from its weighted mean term (a square root or a factor
    /// for some), as [`Metric::evaluate`] finishes it: the device's evaluation sums the terms
    /// and the host finishes them here.
    pub fn finish(&self, mean: f64) -> f64 {
        match self {
            Metric::Rmse | Metric::Rmsle => mean.sqrt(),
            Metric::GammaDeviance => 2.0 * mean,
            _ => mean,
        }
    }

    /// The metric over predictions `pred` (row-major `n_rows x n_outputs`, transformed).
    pub fn evaluate(&self, pred: &[f32], n_outputs: usize, t: &Targets, params: &MetricParams) -> f64 {
        match self {
            Metric::Rmse => regression::rmse(pred, t),
            Metric::Mae => regression::mae(pred, t),
            Metric::Quantile => regression::pinball(pred, n_outputs, t, params.quantile_alpha.as_slice()),
            Metric::Expectile => regression::expectile(pred, t, params.expectile_alpha),
            Metric::PoissonNloglik => regression::poisson_nloglik(pred, t),
            Metric::GammaNloglik => regression::gamma_nloglik(pred, t),
            Metric::GammaDeviance => regression::gamma_deviance(pred, t),
            Metric::Rmsle => regression::rmsle(pred, t),
            Metric::Logloss => classification::logloss(pred, t),
            Metric::Auc => classification::auc(pred, t),
            Metric::Aucpr => classification::aucpr(pred, t),
            Metric::CoxNloglik => regression::cox_nloglik(pred, t),
            Metric::AftNloglik => aft::aft_nloglik(pred, t, &params.aft),
            Metric::IntervalRegressionAccuracy => aft::interval_accuracy(pred, t),
            Metric::Error => classification::error(pred, t),
            Metric::Mlogloss => classification::mlogloss(pred, n_outputs, t),
            Metric::Merror => classification::merror(pred, n_outputs, t),
            Metric::Ndcg(k) => ranking::ndcg(pred, t, *k),
            Metric::Map(k) => ranking::map(pred, t, *k),
            Metric::Precision(k) => ranking::precision(pred, t, *k),
            Metric::TweedieNloglik(rho) => {
                let rho = rho.map_or(params.tweedie_variance_power, |r| r as f64 / 1000.0);
                regression::tweedie_nloglik(pred, t, rho)
            }
        }
    }
}

/// Weighted average of `f(i)` over rows: the terms `f(i) w(i)` and the weights each added up by
/// [`sum::halving_sum`], so that the device's evaluation (kernels/metric.cu) gives the same
/// bits, and the threads do not change them.
pub(crate) fn weighted_average(t: &Targets, f: impl Fn(usize) -> f64 + Sync) -> f64 {
    let n = t.n_rows();
    let s = sum::halving_sum(n, |i| f(i) * t.w(i) as f64);
    // Unit weights add up to n exactly (any integer below 2^53 does).
    let w = match t.weight {
        Some(w) => sum::halving_sum(n, |i| w[i] as f64),
        None => n as f64,
    };
    Metric::mean(s, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weighted_average_is_the_halving_sums_quotient() {
        for n in [100, 50_000, 200_003] {
            let label: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 999.0).collect();
            let weight: Vec<f32> = (0..n).map(|i| 0.25 + ((i * 104_729) % 97) as f32 / 13.0).collect();
            for weight in [None, Some(&weight[..])] {
                let t = Targets { label: &label, label_upper: None, weight, groups: None };
                let f = |i: usize| (label[i] as f64 + 1e-3).ln() * 1.000_000_1;
                let s = sum::halving_sum(n, |i| f(i) * t.w(i) as f64);
                let w = sum::halving_sum(n, |i| t.w(i) as f64);
                assert_eq!(weighted_average(&t, f).to_bits(), (s / w).to_bits(), "{n} rows");
            }
        }
    }
}
