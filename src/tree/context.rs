//! What one tree grows from: the parameters that shape it ([`GrowParams`], with its
//! [`GrowPolicy`] and depth bound) and the context every step of its growth reads
//! ([`TreeContext`]: the parameters, gradient scales, features and seed of this tree), with
//! the per-node decisions made from them (which features a node may split on, a leaf's value
//! and cover).

use serde::{Deserialize, Serialize};

use super::constraints::{Constraints, NodeLimits};
use super::gradient::{GradSum, Quantiser, Weighting};
use super::split::SplitParams;
use crate::random::{hash64, Rng};

/// How trees are grown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrowPolicy {
    /// Level by level up to `max_depth` (XGBoost's default).
    Depthwise,
    /// Always split the leaf with the largest loss reduction, up to `max_leaves` (LightGBM's way).
    Lossguide,
}

/// The depth no grown tree exceeds, even with `max_depth = 0` ("no limit", loss-guided growth
/// only): far past any depth that helps a model, and shallow enough that every walk over the
/// tree (prediction, SHAP values on the CPU and the GPU, export) stays cheap.
pub const MAX_GROWN_DEPTH: usize = 1024;

/// What shapes a tree, besides the split regularisation.
#[derive(Clone, Debug)]
pub struct GrowParams {
    pub split: SplitParams,
    pub policy: GrowPolicy,
    /// 0: unlimited.
    pub max_depth: usize,
    /// 0: unlimited.
    pub max_leaves: usize,
    pub learning_rate: f64,
    pub colsample_bylevel: f64,
    pub colsample_bynode: f64,
    pub constraints: Constraints,
    /// Each feature's chance in column sampling; empty: all alike.
    pub feature_weights: Vec<f64>,
    /// How sample weights enter the fixed-point gradients (set by the trainer from the weights).
    pub weighting: Weighting,
}

impl GrowParams {
    /// A leaf's weight for the gradient sum `total`, within `limits` (before the learning rate).
    pub fn leaf_weight(&self, quantiser: &Quantiser, total: GradSum, limits: &NodeLimits) -> f64 {
        let (g, h) = quantiser.to_float(total);
        limits.clamp(self.split.weight(g, h))
    }

    pub fn can_split_at(&self, depth: usize) -> bool {
        let limit = if self.max_depth == 0 { MAX_GROWN_DEPTH } else { self.max_depth };
        depth < limit
    }

    /// `k` of the features `feats` for column sampling, drawn by `rng` (in proportion to
    /// `feature_weights` when given).
    pub fn sample_features(&self, rng: &mut Rng, feats: &[u32], k: usize) -> Vec<u32> {
        if self.feature_weights.is_empty() {
            rng.choose_sorted(feats, k)
        } else {
            rng.choose_weighted_sorted(feats, |f| self.feature_weights[f as usize], k)
        }
    }

    /// Whether nodes choose features of their own (sampled per level or per node, or limited
    /// by interaction constraints).
    pub fn samples_nodes(&self) -> bool {
        self.colsample_bylevel < 1.0 || self.colsample_bynode < 1.0 || self.constraints.has_interaction()
    }
}

/// One tree's inputs that every step reads: its parameters, gradient scales, features and seed.
pub struct TreeContext<'a> {
    pub params: &'a GrowParams,
    pub quantiser: Quantiser,
    /// The features this tree may split on (sorted).
    pub tree_features: &'a [u32],
    pub seed: u64,
    /// A vector-leaf tree's quantiser of each output (`quantiser` is then unused); empty for
    /// a scalar tree.
    pub outputs: &'a [Quantiser],
}

impl TreeContext<'_> {
    /// Features the node of path key `key` ([`Open::key`](super::steps::Open::key)) at
    /// `depth`, within `limits`, may split on: the tree's, sampled per level, then per node,
    /// keyed by the tree's seed (every backend draws the same features), then those the
    /// interaction constraints allow after the node's path.
    pub fn node_features(&self, depth: usize, key: u64, limits: &NodeLimits) -> Vec<u32> {
        let p = self.params;
        let mut feats = self.tree_features.to_vec();
        if p.colsample_bylevel < 1.0 {
            let k = ((feats.len() as f64 * p.colsample_bylevel).round() as usize).max(1);
            feats = p.sample_features(&mut Rng::new(self.seed, hash64(1, depth as u64)), &feats, k);
        }
        if p.colsample_bynode < 1.0 {
            let k = ((feats.len() as f64 * p.colsample_bynode).round() as usize).max(1);
            feats = p.sample_features(&mut Rng::new(self.seed, hash64(2, key)), &feats, k);
        }
        let c = &p.constraints;
        if c.has_interaction() {
            feats.retain(|&f| c.allows(&limits.path, f));
        }
        feats
    }

    /// Whether every node may split on every one of `n_features` features.
    pub fn all_features_everywhere(&self, n_features: usize) -> bool {
        !self.params.samples_nodes() && self.tree_features.len() == n_features
    }

    /// A leaf's output (learning rate applied) for the gradient sum `total`, within `limits`.
    pub fn leaf_value(&self, total: GradSum, limits: &NodeLimits) -> f32 {
        self.output(self.params.leaf_weight(&self.quantiser, total, limits))
    }

    /// A leaf's output for its weight: the learning rate applied.
    pub(super) fn output(&self, weight: f64) -> f32 {
        (weight * self.params.learning_rate) as f32
    }

    /// A node's cover: its hessian sum.
    pub fn cover(&self, total: GradSum) -> f32 {
        self.quantiser.to_float(total).1 as f32
    }

    /// Whether the tree holds a vector in each leaf (one value per output).
    pub fn is_vector(&self) -> bool {
        !self.outputs.is_empty()
    }

    /// A vector-leaf node's weight of each output for its sums (before the learning rate),
    /// each within its output's bounds `limits` (monotone constraints bound every output).
    pub fn vector_weights(&self, sums: &[GradSum], limits: &[NodeLimits]) -> Vec<f64> {
        self.outputs
            .iter()
            .zip(sums)
            .zip(limits)
            .map(|((q, &s), limits)| {
                let (g, h) = q.to_float(s);
                limits.clamp(self.params.split.weight(g, h))
            })
            .collect()
    }

    /// A vector-leaf node's cover: its hessian summed over the outputs (XGBoost's `sum_hessian`).
    pub fn vector_cover(&self, sums: &[GradSum]) -> f32 {
        self.outputs.iter().zip(sums).map(|(q, &s)| q.to_float(s).1).sum::<f64>() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::MAX_GROWN_DEPTH;
    use crate::config::TrainConfig;

    #[test]
    fn no_depth_limit_still_stops_at_the_documented_bound() {
        let names = ["a".to_string()];
        let grow = |json: &str| TrainConfig::from_json(json).unwrap().grow_params(&names, &[false]).unwrap();
        let unlimited = grow(r#"{"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 100000}"#);
        assert!(unlimited.can_split_at(MAX_GROWN_DEPTH - 1));
        assert!(!unlimited.can_split_at(MAX_GROWN_DEPTH));
        let limited = grow(r#"{"grow_policy": "lossguide", "max_depth": 5, "max_leaves": 100000}"#);
        assert!(limited.can_split_at(4) && !limited.can_split_at(5));
    }
}
