//! The split math: leaf weights, node scores and the scan of one feature's histogram for the
//! best split. This is the only copy of the gain formula in Rust; the CUDA kernels mirror it.
//!
//! With gradient sum G and hessian sum H, a leaf's weight is `w = -T(G) / (H + lambda)`
//! (T soft-thresholds by `alpha`), clipped to `max_delta_step` when that is set. A node's
//! score is `-(2 G w + (H + lambda) w^2 + 2 alpha |w|)`, which is `T(G)^2 / (H + lambda)`
//! without clipping, and a split's gain is `score(L) + score(R) - score(parent)`, as in
//! XGBoost. A split is taken when its gain exceeds both `gamma` and a small epsilon.
//!
//! Under monotone constraints (see [`super::constraints`]) a node's weights are clamped to its
//! bounds; a clamped weight `w` scores `-(2 G w + (H + lambda) w^2 + 2 alpha |w|)`, and a split
//! on a constrained feature whose weights run against the constraint is not a candidate.
//!
//! The scans of one feature's histogram live in the submodules: `numeric` (bins in order,
//! the free-weight case in vectorised blocks), `categorical` (one category against the
//! rest, or a prefix of the categories ordered by weight) and the category lists both
//! categorical searches walk, scalar and vector-leaf (`category_lists`).

mod categorical;
pub(crate) mod category_lists;
mod numeric;

use super::constraints::NodeLimits;
use super::gradient::{GradSum, Quantiser};

/// Gains at or below this are rounding noise, not a split (XGBoost's `kRtEps`).
pub(super) const MIN_GAIN: f64 = 1e-6;

/// A histogram slot as the searches read it: its gradient and hessian sums (a narrow `i32`
/// histogram's slots are read in place, widened one at a time), and as plain 64-bit words for
/// the vector scan of empty slots ([`present_slots`](category_lists::present_slots)).
pub trait HistSlot: Copy {
    /// 64-bit words a slot: a slot is empty when all of them are zero.
    const WORDS: usize;

    fn sum(self) -> GradSum;

    /// The slots' words, `WORDS` a slot.
    fn words(bins: &[Self]) -> &[u64];
}

impl HistSlot for GradSum {
    const WORDS: usize = 2;

    #[inline(always)]
    fn sum(self) -> GradSum {
        self
    }

    fn words(bins: &[Self]) -> &[u64] {
        // SAFETY: GradSum is `#[repr(C)]` two i64 (no padding, every bit pattern a u64), and
        // the view borrows `bins` for as long as it lives.
        unsafe { std::slice::from_raw_parts(bins.as_ptr() as *const u64, 2 * bins.len()) }
    }
}

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
    /// Partition splits of categorical features (LightGBM's regularisation, see
    /// `best_categorical`): categories seen in fewer rows than this are left out of the
    /// ordering, which adds this to each category's hessian.
    pub cat_smooth: f64,
    /// Added to `reg_lambda` for the children of a partition split.
    pub cat_l2: f64,
    /// Rows each side of a partition split needs at least.
    pub min_data_per_group: f64,
}

impl SplitParams {
    #[inline(always)]
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
    #[inline(always)]
    pub fn score(&self, g: f64, h: f64) -> f64 {
        if self.max_delta_step == 0.0 {
            let denom = h + self.reg_lambda;
            if denom <= 0.0 {
                return 0.0;
            }
            let t = self.threshold_l1(g);
            t * t / denom
        } else {
            self.score_given_weight(g, h, self.weight(g, h))
        }
    }

    /// Twice the loss reduction a leaf of weight `w` achieves over weight zero.
    pub fn score_given_weight(&self, g: f64, h: f64, w: f64) -> f64 {
        let denom = h + self.reg_lambda;
        if denom <= 0.0 {
            return 0.0;
        }
        -(2.0 * g * w + denom * w * w + 2.0 * self.reg_alpha * w.abs())
    }

    /// A leaf's weight within `limits`, and its score: [`Self::score`] when the weight is
    /// free, so that unconstrained nodes score exactly as without constraints.
    pub fn bounded(&self, g: f64, h: f64, limits: &NodeLimits) -> (f64, f64) {
        let w = self.weight(g, h);
        let clamped = limits.clamp(w);
        if clamped == w {
            (w, self.score(g, h))
        } else {
            (clamped, self.score_given_weight(g, h, clamped))
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
    /// A vector-leaf tree's sums of each output on each side ([`super::split_vector`]);
    /// empty for a scalar tree, whose sums are `left` and `right`.
    pub left_sums: Vec<GradSum>,
    pub right_sums: Vec<GradSum>,
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
    /// The node's weight bounds (monotone constraints).
    limits: &'a NodeLimits,
    /// Monotone direction per feature (empty: none).
    monotone: &'a [i8],
    parent_score: f64,
    /// The node's rows per unit of hessian: turns a slot's hessian into an estimate of its
    /// rows, as LightGBM does (histograms hold no counts).
    rows_per_hessian: f64,
}

impl<'a> SplitScorer<'a> {
    /// Scores splits of a node of `rows` rows whose gradients sum to `total`, within
    /// `limits`, with `monotone` the direction of each feature (empty: none constrained).
    pub fn new(
        params: &'a SplitParams,
        quantiser: &'a Quantiser,
        total: GradSum,
        rows: u32,
        limits: &'a NodeLimits,
        monotone: &'a [i8],
    ) -> Self {
        let (g, h) = quantiser.to_float(total);
        let rows_per_hessian = if h > 0.0 { rows as f64 / h } else { 0.0 };
        let parent_score = params.bounded(g, h, limits).1;
        SplitScorer { params, quantiser, total, limits, monotone, parent_score, rows_per_hessian }
    }

    /// Gain of sending `left` left and the rest right on a feature of monotone direction
    /// `direction`, or None if a child is too light or the weights run against the direction.
    #[inline]
    pub fn gain(&self, left: GradSum, direction: i8) -> Option<f64> {
        self.gain_under(self.params, left, direction)
    }

    /// The gain with the children scored under `params` (the parent always under the node's).
    #[inline]
    fn gain_under(&self, params: &SplitParams, left: GradSum, direction: i8) -> Option<f64> {
        let right = self.total - left;
        let (gl, hl) = self.quantiser.to_float(left);
        let (gr, hr) = self.quantiser.to_float(right);
        if hl < params.min_child_weight || hr < params.min_child_weight {
            return None;
        }
        let (sl, sr) = if direction == 0 && self.limits.unbounded() {
            // Free weights: the plain scores (what `bounded` gives too, without the weights).
            (params.score(gl, hl), params.score(gr, hr))
        } else {
            let (wl, sl) = params.bounded(gl, hl, self.limits);
            let (wr, sr) = params.bounded(gr, hr, self.limits);
            if (direction > 0 && wl > wr) || (direction < 0 && wl < wr) {
                return None;
            }
            (sl, sr)
        };
        let gain = sl + sr - self.parent_score;
        (gain > MIN_GAIN && gain >= params.gamma).then_some(gain)
    }

    /// The estimated rows behind `sum` (see `rows_per_hessian`).
    fn rows_of(&self, sum: GradSum) -> f64 {
        (self.quantiser.to_float(sum).1 * self.rows_per_hessian).round()
    }

    /// A scalar tree's split of this node sending `left` left (the right side is the rest).
    fn candidate(
        &self,
        feature: u32,
        gain: f64,
        split_bin: u32,
        left_categories: Vec<u32>,
        default_left: bool,
        left: GradSum,
    ) -> SplitCandidate {
        SplitCandidate {
            feature,
            gain,
            split_bin,
            left_categories,
            default_left,
            left,
            right: self.total - left,
            left_sums: Vec::new(),
            right_sums: Vec::new(),
        }
    }

    /// When the node saw no missing values, unseen missing values follow the heavier child.
    fn default_left_without_missing(&self, left: GradSum) -> bool {
        left.h >= (self.total - left).h
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn params() -> SplitParams {
        SplitParams {
            reg_lambda: 1.0,
            reg_alpha: 0.0,
            gamma: 0.0,
            min_child_weight: 0.0,
            max_delta_step: 0.0,
            max_cat_to_onehot: 4,
            max_cat_threshold: 64,
            cat_smooth: 0.0,
            cat_l2: 0.0,
            min_data_per_group: 0.0,
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
