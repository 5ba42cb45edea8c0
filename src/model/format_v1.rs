//! The parameters as version 1 of the binary format stored them: positionally (bincode), in
//! the field order `TrainConfig` had then. Frozen here so that version-1 files keep loading
//! after parameters are added; version 2 stores them as JSON text instead (see format.rs).
//! The enums inside (objective, grow policy, metrics, device) are still read by variant
//! index, so their existing variants must keep their order; new ones go last.

use serde::{Deserialize, Serialize};

use crate::config::{Device, GrowPolicy, Objective, TrainConfig};
use crate::error::{Error, Result};
use crate::metric::Metric;

#[derive(Serialize, Deserialize)]
pub(super) struct ConfigV1 {
    objective: Objective,
    n_estimators: usize,
    learning_rate: f64,
    max_depth: usize,
    max_leaves: usize,
    grow_policy: GrowPolicy,
    max_bin: usize,
    reg_lambda: f64,
    reg_alpha: f64,
    gamma: f64,
    min_child_weight: f64,
    max_delta_step: f64,
    subsample: f64,
    colsample_bytree: f64,
    colsample_bylevel: f64,
    colsample_bynode: f64,
    base_score: Option<f64>,
    seed: u64,
    num_class: usize,
    eval_metric: Vec<Metric>,
    early_stopping_rounds: Option<usize>,
    huber_slope: f64,
    quantile_alpha: f64,
    tweedie_variance_power: f64,
    max_cat_to_onehot: usize,
    max_cat_threshold: usize,
    n_jobs: usize,
    device: Device,
}

impl ConfigV1 {
    /// Today's parameters: these by name, and every parameter added since set to what
    /// version-1 builds did, so that the model's parameters say how it was trained.
    pub(super) fn upgrade(self) -> Result<TrainConfig> {
        let named = serde_json::to_value(self).map_err(|e| Error::model(format!("version-1 parameters: {e}")))?;
        let mut cfg: TrainConfig =
            serde_json::from_value(named).map_err(|e| Error::model(format!("version-1 parameters: {e}")))?;
        // Ranking used every pair of a query, without score normalisation.
        cfg.lambdarank_num_pair_per_sample = Some(usize::MAX);
        cfg.lambdarank_score_normalization = false;
        // Partition splits of categorical features were not regularised.
        cfg.cat_smooth = 0.0;
        cfg.cat_l2 = 0.0;
        cfg.min_data_per_group = 0;
        Ok(cfg)
    }
}
