//! The split math: leaf weights, node scores and the scan of one feature's histogram for the
//! best split. This is the only copy of the gain formula in Rust; the CUDA kernels mirror it.
//!
//! With gradient sum G and hessian sum H, a leaf's weight is `w = -T(G) / (H + lambda)`
//! (T soft-thresholds by `alpha`), clipped to `max_delta_step` when that is set. A node's
//! score is `-(2 G w + (H + lambda) w^2 + 2 alpha |w|)`, which is `T(G)^2 / (H + lambda)`
//! without clipping, and a split's gain is `score(L) + score(R) - score(parent)`, as in
//! XGBoost. A split is taken when its gain exceeds both `gamma` and a small epsilon.

use super::gradient::{GradSum, Quantiser};

/// Gains at or below this are rounding noise, not a split (XGBoost's `kRtEps`).
const MIN_GAIN: f64 = 1e-6;

/// The regularisation that shapes splits and leaf values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitParams {
    pub reg_lambda: f64,
    pub reg_alpha: f64,
    pub gamma: f64,
    pub min_child_weight: f64,
    pub max_delta_step: f64,
    pub max_cat_to_onehot: usize,
    pub max_cat_threshold: usize,
}

impl SplitParams {
    fn threshold_l1(&self, g: f64) -> f64 {
        if g > self.reg_alpha {
            g - self.reg_alpha
        } else if g < -self.reg_alpha {
            g + self.reg_alpha
        } else {
            0.0
        }
    }

    /// Optimal leaf weight (before the learning rate).
    pub fn weight(&self, g: f64, h: f64) -> f64 {
        let denom = h + self.reg_lambda;
        if denom <= 0.0 {
            return 0.0;
        }
        let w = -self.threshold_l1(g) / denom;
        if self.max_delta_step > 0.0 {
            w.clamp(-self.max_delta_step, self.max_delta_step)
        } else {
            w
        }
    }

    /// Twice the loss reduction a leaf achieves over weight zero.
    pub fn score(&self, g: f64, h: f64) -> f64 {
        let denom = h + self.reg_lambda;
        if denom <= 0.0 {
            return 0.0;
        }
        if self.max_delta_step == 0.0 {
            let t = self.threshold_l1(g);
            t * t / denom
        } else {
            let w = self.weight(g, h);
            -(2.0 * g * w + denom * w * w + 2.0 * self.reg_alpha * w.abs())
        }
    }
}

/// The best split found for a node.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitCandidate {
    pub feature: u32,
    pub gain: f64,
    /// Numeric splits send bins `<= split_bin` left.
    pub split_bin: u32,
    /// Categorical splits send these category codes left (sorted); empty for numeric splits.
    pub left_categories: Vec<u32>,
    pub default_left: bool,
    pub left: GradSum,
    pub right: GradSum,
}

impl SplitCandidate {
    pub fn is_categorical(&self) -> bool {
        !self.left_categories.is_empty()
    }
}

/// Scores candidate partitions of one node against its parent score.
pub struct SplitScorer<'a> {
    pub params: &'a SplitParams,
    pub quantiser: &'a Quantiser,
    pub total: GradSum,
    parent_score: f64,
}

impl<'a> SplitScorer<'a> {
    pub fn new(params: &'a SplitParams, quantiser: &'a Quantiser, total: GradSum) -> Self {
        let (g, h) = quantiser.to_float(total);
        SplitScorer { params, quantiser, total, parent_score: params.score(g, h) }
    }

    /// Gain of sending `left` left and the rest right, or None if a child is too light.
    #[inline]
    pub fn gain(&self, left: GradSum) -> Option<f64> {
        let right = self.total - left;
        let (gl, hl) = self.quantiser.to_float(left);
        let (gr, hr) = self.quantiser.to_float(right);
        if hl < self.params.min_child_weight || hr < self.params.min_child_weight {
            return None;
        }
        let gain = self.params.score(gl, hl) + self.params.score(gr, hr) - self.parent_score;
        (gain > MIN_GAIN && gain >= self.params.gamma).then_some(gain)
    }

    /// When the node saw no missing values, unseen missing values follow the heavier child.
    fn default_left_without_missing(&self, left: GradSum) -> bool {
        left.h >= (self.total - left).h
    }

    /// The best split of feature `feature` from its histogram: `hist[b]` sums bin `b`, and the
    /// last slot sums the missing values.
    pub fn best_numeric(&self, feature: u32, hist: &[GradSum]) -> Option<SplitCandidate> {
        let (missing, bins) = hist.split_last()?;
        let has_missing = *missing != GradSum::default();
        let mut best: Option<(f64, u32, bool, GradSum)> = None;
        let mut consider = |gain: Option<f64>, bin: u32, default_left: bool, left: GradSum| {
            if let Some(g) = gain {
                if best.is_none_or(|b| g > b.0) {
                    best = Some((g, bin, default_left, left));
                }
            }
        };
        let mut left = GradSum::default();
        // The split after the last bin keeps every present value left: with missing values
        // going right, that is the "present or missing" split.
        for (b, &slot) in bins.iter().enumerate() {
            // An empty bin moves no rows: the split after the previous bin already covered it.
            if slot == GradSum::default() {
                continue;
            }
            left += slot;
            if has_missing {
                consider(self.gain(left), b as u32, false, left);
                let with_missing = left + *missing;
                consider(self.gain(with_missing), b as u32, true, with_missing);
            } else {
                consider(self.gain(left), b as u32, self.default_left_without_missing(left), left);
            }
        }
        best.map(|(gain, split_bin, default_left, left)| SplitCandidate {
            feature,
            gain,
            split_bin,
            left_categories: Vec::new(),
            default_left,
            left,
            right: self.total - left,
        })
    }

    /// The best split of a categorical feature: one category against the rest when there are
    /// few categories, else the best prefix of the categories ordered by leaf weight. Sending
    /// every present category left is the "present or missing" split.
    pub fn best_categorical(&self, feature: u32, hist: &[GradSum]) -> Option<SplitCandidate> {
        let (missing, bins) = hist.split_last()?;
        let has_missing = *missing != GradSum::default();
        let present: Vec<u32> = (0..bins.len() as u32).filter(|&c| bins[c as usize] != GradSum::default()).collect();
        if present.is_empty() || (present.len() == 1 && !has_missing) {
            return None;
        }
        let mut best: Option<(f64, Vec<u32>, bool, GradSum)> = None;
        let mut consider = |set: &[u32], left: GradSum| {
            let options = if has_missing {
                vec![(false, left), (true, left + *missing)]
            } else {
                vec![(self.default_left_without_missing(left), left)]
            };
            for (default_left, l) in options {
                if let Some(g) = self.gain(l) {
                    if best.as_ref().is_none_or(|b| g > b.0) {
                        let mut s = set.to_vec();
                        s.sort_unstable();
                        best = Some((g, s, default_left, l));
                    }
                }
            }
        };
        if present.len() <= self.params.max_cat_to_onehot {
            for &c in &present {
                consider(&[c], bins[c as usize]);
            }
        } else {
            let mut order = present.clone();
            let weight = |c: u32| {
                let (g, h) = self.quantiser.to_float(bins[c as usize]);
                self.params.weight(g, h)
            };
            order.sort_by(|&a, &b| weight(a).total_cmp(&weight(b)).then(a.cmp(&b)));
            // Prefixes of the weight order, the side sent left holding at most
            // `max_cat_threshold` categories (either side may be the small one).
            let cap = self.params.max_cat_threshold;
            let mut left = GradSum::default();
            for k in 1..=order.len() {
                left += bins[order[k - 1] as usize];
                if k <= cap || order.len() - k <= cap {
                    consider(&order[..k], left);
                }
            }
        }
        best.map(|(gain, left_categories, default_left, left)| SplitCandidate {
            feature,
            gain,
            split_bin: 0,
            left_categories,
            default_left,
            left,
            right: self.total - left,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SplitParams {
        SplitParams {
            reg_lambda: 1.0,
            reg_alpha: 0.0,
            gamma: 0.0,
            min_child_weight: 0.0,
            max_delta_step: 0.0,
            max_cat_to_onehot: 4,
            max_cat_threshold: 64,
        }
    }

    #[test]
    fn weight_and_score_match_the_closed_form() {
        let p = params();
        assert!((p.weight(4.0, 3.0) - -1.0).abs() < 1e-12);
        assert!((p.score(4.0, 3.0) - 4.0).abs() < 1e-12);
        let l1 = SplitParams { reg_alpha: 1.0, ..p };
        assert!((l1.weight(4.0, 3.0) - -0.75).abs() < 1e-12);
        assert_eq!(l1.weight(0.5, 3.0), 0.0);
        let clipped = SplitParams { max_delta_step: 0.5, ..p };
        assert_eq!(clipped.weight(4.0, 3.0), -0.5);
        // -(2 * 4 * -0.5 + 4 * 0.25) = 3
        assert!((clipped.score(4.0, 3.0) - 3.0).abs() < 1e-12);
    }
}
