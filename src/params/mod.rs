//! Small parameter types that several layers share: the quantiles of `reg:quantileerror`
//! ([`QuantileAlphas`]), the AFT distributions and parameters ([`aft`]), and the kind of task
//! an objective is ([`TaskKind`]). `config` gathers them into `TrainConfig`, `objective` and
//! `metric` read them; living here, below all three, none of those needs another for them.
//! This module imports nothing from the crate (`tests/layering.rs` holds it to that).

pub mod aft;
mod quantile_alphas;

pub use self::quantile_alphas::{QuantileAlphas, MAX_QUANTILES};

/// What an objective's predictions are, which decides the metrics that apply to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// One real value per row.
    Regression,
    /// The probability of the positive class.
    Binary,
    /// A probability per class.
    Multiclass,
    /// Scores ordered within query groups.
    Ranking,
    /// A time per row, learnt from an interval that holds it (`survival:aft`).
    Interval,
}
