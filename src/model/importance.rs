//! Feature importance, with XGBoost's definitions.

use serde::{Deserialize, Serialize};

use super::Model;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportanceType {
    /// Number of splits on the feature.
    Weight,
    /// Average loss reduction of those splits.
    Gain,
    /// Average hessian sum (cover) of those splits.
    Cover,
    TotalGain,
    TotalCover,
}

impl Model {
    /// Importance of every feature (in model order); features never split on score 0.
    pub fn feature_importance(&self, kind: ImportanceType) -> Vec<(String, f64)> {
        let nf = self.features.len();
        let (mut count, mut gain, mut cover) = (vec![0f64; nf], vec![0f64; nf], vec![0f64; nf]);
        // A vector-leaf round counts once, as XGBoost counts its one tree.
        for t in self.distinct_trees() {
            for n in 0..t.n_nodes() {
                if t.is_leaf(n as u32) {
                    continue;
                }
                let f = t.feature[n] as usize;
                count[f] += 1.0;
                gain[f] += t.gain[n] as f64;
                cover[f] += t.cover[n] as f64;
            }
        }
        let avg = |total: f64, c: f64| if c > 0.0 { total / c } else { 0.0 };
        (0..nf)
            .map(|f| {
                let v = match kind {
                    ImportanceType::Weight => count[f],
                    ImportanceType::Gain => avg(gain[f], count[f]),
                    ImportanceType::Cover => avg(cover[f], count[f]),
                    ImportanceType::TotalGain => gain[f],
                    ImportanceType::TotalCover => cover[f],
                };
                (self.features[f].name.clone(), v)
            })
            .collect()
    }
}
