//! A user's metric: evaluated each round on each evaluation set beside the built-in ones, and
//! logged after them (so early stopping, which watches the last metric, watches it). The
//! plugin's implementation calls a Python callable.

use crate::data::Targets;
use crate::error::Result;

pub trait CustomMetric: Send + Sync {
    /// The name it is logged under.
    fn name(&self) -> String;
    /// Whether early stopping looks for larger values.
    fn higher_is_better(&self) -> bool;
    /// The metric of the predictions `pred` (row-major, `n_rows x n_outputs`, through the
    /// model's link, as `predict` gives them) against the set's targets.
    fn evaluate(&self, pred: &[f32], n_outputs: usize, t: &Targets) -> Result<f64>;
}
