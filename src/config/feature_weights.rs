//! `feature_weights`: each feature's chance in column sampling (XGBoost's `feature_weights`),
//! by column name (`{"price": 2.0}`, columns not named weigh 1) or one per feature. Kept as
//! given; resolved against the features at fit time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FeatureWeights {
    ByName(BTreeMap<String, f64>),
    ByPosition(Vec<f64>),
}

impl FeatureWeights {
    /// One weight per feature of `names`.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<f64>> {
        let err = |reason: String| Error::param("feature_weights", reason);
        let weights = match self {
            FeatureWeights::ByName(map) => {
                let mut out = vec![1.0; names.len()];
                for (name, &w) in map {
                    let Some(f) = names.iter().position(|n| n == name) else {
                        return Err(err(format!("names `{name}`, which is not a feature column")));
                    };
                    out[f] = w;
                }
                out
            }
            FeatureWeights::ByPosition(v) if v.len() != names.len() => {
                return Err(err(format!(
                    "has {} weights for {} features; give one per feature, or a dict by column name",
                    v.len(),
                    names.len()
                )))
            }
            FeatureWeights::ByPosition(v) => v.clone(),
        };
        if let Some((f, w)) = weights.iter().enumerate().find(|(_, w)| !(w.is_finite() && **w >= 0.0)) {
            return Err(err(format!("weighs `{}` {w}: weights must be finite and >= 0", names[f])));
        }
        if weights.iter().all(|&w| w == 0.0) {
            return Err(err("are all 0: no feature could be sampled".into()));
        }
        Ok(weights)
    }
}
