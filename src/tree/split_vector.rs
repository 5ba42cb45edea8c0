//! The split search of a vector-leaf tree (XGBoost's `multi_strategy="multi_output_tree"`):
//! one tree a round whose leaves hold a weight per output. Each output keeps its own
//! gradient sums (and quantiser); a split's gain is the sum over the outputs of the scalar
//! gain, `sum_k score_k(L) + score_k(R) - score_k(parent)` with [`SplitParams::score`], as
//! XGBoost's multi-target evaluator sums `-w_k T(G_k)`. Each output's weight is the scalar
//! [`SplitParams::weight`] of its sums (so `reg_lambda`, `reg_alpha` and `max_delta_step`
//! act per output).
//!
//! What has no per-output meaning is taken over the node's hessian summed over the outputs
//! (its cover, which XGBoost stores as the node's `sum_hessian`): `min_child_weight` bounds
//! it divided by the outputs (each child's mean hessian per output, XGBoost 3.4's rule as its
//! trees show), and it decides where missing values go when the node saw none (the heavier
//! side) and the row estimates of categorical partition splits. Partition splits order the categories by each output's
//! weight in turn and take the best prefix of any of these orders.
//!
//! With one output every candidate and gain equals [`SplitScorer`](super::split::SplitScorer)'s,
//! so a one-output vector-leaf tree is the scalar tree (a test holds it to that).

use super::constraints::NodeLimits;
use super::context::TreeContext;
use super::gradient::{GradSum, Quantiser};
use super::node_search::best_split_per_node;
use super::split::category_lists::{retain_branch_free, sorted_by_weight};
use super::split::{SplitCandidate, SplitParams, MIN_GAIN};
use super::steps::Open;
use crate::data::FeatureCuts;

/// Each vector-leaf node's best split (None where none qualifies), over the features
/// `ctx.node_features` allows it, in parallel over (node, feature); ties go to the lowest
/// feature. `rows[i]` is node i's row count, and `hist(i, k, f)` node i's slots of feature f
/// in output k's histogram (the last holding the missing values). Every backend searches
/// vector-leaf nodes here, on the host, so that their trees agree by construction.
pub fn best_vector_splits<'h, N: Sync>(
    nodes: &[Open<N>],
    ctx: &TreeContext,
    cuts: &[FeatureCuts],
    rows: &[u32],
    hist: impl Fn(usize, usize, usize) -> &'h [GradSum] + Sync,
) -> Vec<Option<SplitCandidate>> {
    let monotone = &ctx.params.constraints.monotone;
    best_split_per_node(nodes, ctx, |i, f| {
        let o = &nodes[i];
        let hists: Vec<&[GradSum]> = (0..ctx.outputs.len()).map(|k| hist(i, k, f as usize)).collect();
        let scorer = VectorScorer::new(&ctx.params.split, ctx.outputs, &o.sums, rows[i], &o.output_limits, monotone);
        match cuts[f as usize].is_categorical() {
            true => scorer.best_categorical(f, &hists),
            false => scorer.best_numeric(f, &hists),
        }
    })
}

/// A vector-leaf node's score: the sum over its outputs of each one's score within its bounds,
/// what every candidate's gain is measured from (the GPU's search takes it from here).
pub fn vector_parent_score(
    params: &SplitParams,
    quantisers: &[Quantiser],
    total: &[GradSum],
    limits: &[NodeLimits],
) -> f64 {
    (0..total.len())
        .map(|k| {
            let (g, h) = quantisers[k].to_float(total[k]);
            params.bounded(g, h, &limits[k]).1
        })
        .sum()
}

/// Scores candidate partitions of one vector-leaf node against its parent score.
pub struct VectorScorer<'a> {
    params: &'a SplitParams,
    /// One per output.
    quantisers: &'a [Quantiser],
    /// The node's sums, one per output.
    total: &'a [GradSum],
    /// Each output's weight bounds (monotone constraints).
    limits: &'a [NodeLimits],
    /// Monotone direction per feature (empty: none).
    monotone: &'a [i8],
    parent_score: f64,
    /// The node's rows per unit of summed hessian (see `SplitScorer`'s `rows_per_hessian`).
    rows_per_hessian: f64,
}

/// A categorical candidate's left set: one category, or the first `len` categories of
/// output `output`'s weight order.
#[derive(Clone, Copy)]
enum LeftSet {
    One(u32),
    Prefix { output: usize, len: usize },
}

type Best = (f64, LeftSet, bool, Vec<GradSum>);

impl<'a> VectorScorer<'a> {
    /// Scores splits of a node of `rows` rows whose outputs' sums are `total`, each output
    /// within its bounds `limits`, with `monotone` the direction of each feature (empty:
    /// none constrained).
    pub fn new(
        params: &'a SplitParams,
        quantisers: &'a [Quantiser],
        total: &'a [GradSum],
        rows: u32,
        limits: &'a [NodeLimits],
        monotone: &'a [i8],
    ) -> Self {
        debug_assert!(quantisers.len() == total.len() && limits.len() == total.len());
        let parent_score = vector_parent_score(params, quantisers, total, limits);
        let mut s = VectorScorer { params, quantisers, total, limits, monotone, parent_score, rows_per_hessian: 0.0 };
        let h = s.hessian(|k| total[k]);
        s.rows_per_hessian = if h > 0.0 { rows as f64 / h } else { 0.0 };
        s
    }

    fn n_outputs(&self) -> usize {
        self.total.len()
    }

    /// The hessian of `sums` summed over the outputs (floats).
    fn hessian(&self, sums: impl Fn(usize) -> GradSum) -> f64 {
        (0..self.n_outputs()).map(|k| self.quantisers[k].to_float(sums(k)).1).sum()
    }

    /// The sum over the outputs of each output's score under `params`.
    fn score_under(&self, params: &SplitParams, sums: impl Fn(usize) -> GradSum) -> f64 {
        (0..self.n_outputs())
            .map(|k| {
                let (g, h) = self.quantisers[k].to_float(sums(k));
                params.score(g, h)
            })
            .sum()
    }

    /// The gain of sending `left` left on a feature of monotone direction `direction`, the
    /// children scored under `params`; None when a child's mean hessian per output is below
    /// `min_child_weight`, some output's weights run against the direction, or the gain is no
    /// split.
    fn gain_under(&self, params: &SplitParams, left: &[GradSum], direction: i8) -> Option<f64> {
        let right = |k: usize| self.total[k] - left[k];
        let (hl, hr) = (self.hessian(|k| left[k]), self.hessian(right));
        let least = params.min_child_weight * self.n_outputs() as f64;
        if hl < least || hr < least {
            return None;
        }
        let children = if direction == 0 && self.limits.iter().all(NodeLimits::unbounded) {
            // Free weights: the plain scores, as the one-output search takes them.
            self.score_under(params, |k| left[k]) + self.score_under(params, right)
        } else {
            // Every output within its bounds, and monotone along the feature.
            let mut sum = 0.0;
            for (k, (q, limits)) in self.quantisers.iter().zip(self.limits).enumerate() {
                let ((gl, hl), (gr, hr)) = (q.to_float(left[k]), q.to_float(right(k)));
                let (wl, sl) = params.bounded(gl, hl, limits);
                let (wr, sr) = params.bounded(gr, hr, limits);
                if (direction > 0 && wl > wr) || (direction < 0 && wl < wr) {
                    return None;
                }
                sum += sl + sr;
            }
            sum
        };
        let gain = children - self.parent_score;
        (gain > MIN_GAIN && gain >= params.gamma).then_some(gain)
    }

    /// When the node saw no missing values, unseen ones follow the heavier child.
    fn default_left_without_missing(&self, left: &[GradSum]) -> bool {
        self.hessian(|k| left[k]) >= self.hessian(|k| self.total[k] - left[k])
    }

    fn rows_of(&self, sums: &[GradSum]) -> f64 {
        (self.hessian(|k| sums[k]) * self.rows_per_hessian).round()
    }

    fn candidate(
        &self,
        feature: u32,
        gain: f64,
        split_bin: u32,
        cats: Vec<u32>,
        dl: bool,
        left: Vec<GradSum>,
    ) -> SplitCandidate {
        let right = left.iter().zip(self.total).map(|(&l, &t)| t - l).collect();
        SplitCandidate {
            feature,
            gain,
            split_bin,
            left_categories: cats,
            default_left: dl,
            left: GradSum::default(),
            right: GradSum::default(),
            left_sums: left,
            right_sums: right,
        }
    }

    /// The best numeric split of `feature`; `hists[k]` is output k's histogram of it (the
    /// last slot holding the missing values).
    pub fn best_numeric(&self, feature: u32, hists: &[&[GradSum]]) -> Option<SplitCandidate> {
        let n_bins = hists.first()?.len().checked_sub(1)?;
        let direction = self.monotone.get(feature as usize).copied().unwrap_or(0);
        let missing: Vec<GradSum> = hists.iter().map(|h| h[n_bins]).collect();
        let has_missing = missing.iter().any(|&m| m != GradSum::default());
        let mut best: Option<(f64, u32, bool, Vec<GradSum>)> = None;
        let mut consider = |gain: Option<f64>, bin: u32, default_left: bool, left: &[GradSum]| {
            if let Some(g) = gain {
                if best.as_ref().is_none_or(|b| g > b.0) {
                    best = Some((g, bin, default_left, left.to_vec()));
                }
            }
        };
        let mut left = vec![GradSum::default(); self.n_outputs()];
        let mut with_missing = left.clone();
        for b in 0..n_bins {
            if hists.iter().all(|h| h[b] == GradSum::default()) {
                continue;
            }
            left.iter_mut().zip(hists).for_each(|(l, h)| *l += h[b]);
            if has_missing {
                consider(self.gain_under(self.params, &left, direction), b as u32, false, &left);
                with_missing.iter_mut().zip(left.iter().zip(&missing)).for_each(|(w, (&l, &m))| *w = l + m);
                consider(self.gain_under(self.params, &with_missing, direction), b as u32, true, &with_missing);
            } else {
                let default_left = self.default_left_without_missing(&left);
                consider(self.gain_under(self.params, &left, direction), b as u32, default_left, &left);
            }
        }
        best.map(|(gain, bin, dl, left)| self.candidate(feature, gain, bin, Vec::new(), dl, left))
    }

    /// The best categorical split of `feature` (`hists` as in [`Self::best_numeric`]): one
    /// category against the rest for few categories, else the best prefix of a weight order,
    /// regularised as the scalar search is (`SplitScorer::best_categorical`).
    pub fn best_categorical(&self, feature: u32, hists: &[&[GradSum]]) -> Option<SplitCandidate> {
        let n_cats = hists.first()?.len().checked_sub(1)?;
        let k_out = self.n_outputs();
        let sums_of = |c: usize| -> Vec<GradSum> { hists.iter().map(|h| h[c]).collect() };
        let missing = sums_of(n_cats);
        let has_missing = missing.iter().any(|&m| m != GradSum::default());
        let mut present: Vec<u32> = (0..n_cats as u32).collect();
        retain_branch_free(&mut present, |c| hists.iter().any(|h| !h[c as usize].is_zero()));
        if present.is_empty() || (present.len() == 1 && !has_missing) {
            return None;
        }
        let p = self.params;
        let partition_params = SplitParams { reg_lambda: p.reg_lambda + p.cat_l2, ..*p };
        let missing = has_missing.then_some(missing);
        let mut best: Option<Best> = None;
        let mut orders: Vec<Vec<u32>> = Vec::new();
        if present.len() <= p.max_cat_to_onehot {
            for &c in &present {
                self.consider(
                    &mut best,
                    &partition_params,
                    missing.as_deref(),
                    LeftSet::One(c),
                    &sums_of(c as usize),
                    false,
                );
            }
        } else {
            let n_present = present.len();
            let mut kept = present;
            retain_branch_free(&mut kept, |c| self.rows_of(&sums_of(c as usize)) >= p.cat_smooth);
            let last = if kept.len() < n_present { kept.len().saturating_sub(1) } else { kept.len() };
            let cap = p.max_cat_threshold;
            for output in 0..k_out {
                let q = &self.quantisers[output];
                let weight = |c: u32| {
                    let (g, h) = q.to_float(hists[output][c as usize]);
                    p.weight(g, h + p.cat_smooth)
                };
                let order = sorted_by_weight(&kept, weight, cap);
                let mut left = vec![GradSum::default(); k_out];
                for len in 1..=last {
                    let c = order[len - 1] as usize;
                    left.iter_mut().zip(hists).for_each(|(l, h)| *l += h[c]);
                    if len <= cap || order.len() - len <= cap {
                        let set = LeftSet::Prefix { output, len };
                        self.consider(&mut best, &partition_params, missing.as_deref(), set, &left, true);
                    }
                }
                orders.push(order);
            }
        }
        best.map(|(gain, set, dl, left)| {
            let cats = match set {
                LeftSet::One(c) => vec![c],
                LeftSet::Prefix { output, len } => {
                    let mut s = orders[output][..len].to_vec();
                    s.sort_unstable();
                    s
                }
            };
            self.candidate(feature, gain, 0, cats, dl, left)
        })
    }

    /// Scores one categorical candidate (both directions for missing values when the node saw
    /// some) and keeps it in `best` when it beats it.
    fn consider(
        &self,
        best: &mut Option<Best>,
        partition_params: &SplitParams,
        missing: Option<&[GradSum]>,
        set: LeftSet,
        left: &[GradSum],
        partition: bool,
    ) {
        let p = self.params;
        let options: Vec<(bool, Vec<GradSum>)> = match missing {
            Some(m) => vec![(false, left.to_vec()), (true, left.iter().zip(m).map(|(&l, &m)| l + m).collect())],
            None => vec![(self.default_left_without_missing(left), left.to_vec())],
        };
        for (default_left, l) in options {
            let gain = if partition {
                let right: Vec<GradSum> = l.iter().zip(self.total).map(|(&l, &t)| t - l).collect();
                let groups_ok = p.min_data_per_group <= 0.0
                    || (self.rows_of(&l) >= p.min_data_per_group && self.rows_of(&right) >= p.min_data_per_group);
                if !groups_ok {
                    continue;
                }
                self.gain_under(partition_params, &l, 0)
            } else {
                self.gain_under(p, &l, 0)
            };
            if let Some(g) = gain {
                if best.as_ref().is_none_or(|b| g > b.0) {
                    *best = Some((g, set, default_left, l));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::split::SplitScorer;
    use crate::tree::NodeLimits;

    fn params() -> SplitParams {
        SplitParams {
            reg_lambda: 1.0,
            reg_alpha: 0.5,
            gamma: 0.0,
            min_child_weight: 2.0,
            max_delta_step: 0.0,
            max_cat_to_onehot: 4,
            max_cat_threshold: 64,
            cat_smooth: 1.0,
            cat_l2: 3.0,
            min_data_per_group: 2.0,
        }
    }

    fn hist(seed: i64, bins: usize, missing: bool) -> Vec<GradSum> {
        let mut h: Vec<GradSum> = (0..bins as i64)
            .map(|b| GradSum { g: ((b * 37 + seed * 11) % 23) - 11, h: 1 + (b * 7 + seed) % 5 })
            .collect();
        h.push(if missing { GradSum { g: 9, h: 3 } } else { GradSum::default() });
        h
    }

    fn total(h: &[GradSum]) -> GradSum {
        h.iter().fold(GradSum::default(), |a, &b| a + b)
    }

    #[test]
    fn one_output_finds_the_scalar_split() {
        let q = [Quantiser::from_scales(4.0, 2.0)];
        for (seed, bins, missing) in [(1, 12, true), (2, 12, false), (3, 3, true), (4, 30, true)] {
            let h = hist(seed, bins, missing);
            let t = [total(&h)];
            let rows = t[0].h as u32;
            let (limits, p) = (NodeLimits::root(), params());
            let scalar = SplitScorer::new(&p, &q[0], t[0], rows, &limits, &[]);
            let vector = VectorScorer::new(&p, &q, &t, rows, std::slice::from_ref(&limits), &[]);
            for (s, v) in [
                (scalar.best_numeric(0, &h), vector.best_numeric(0, &[&h])),
                (scalar.best_categorical(0, &h), vector.best_categorical(0, &[&h])),
            ] {
                let (s, v) = (s.expect("a split"), v.expect("a split"));
                assert_eq!(
                    (s.gain, s.split_bin, &s.left_categories, s.default_left, vec![s.left], vec![s.right]),
                    (v.gain, v.split_bin, &v.left_categories, v.default_left, v.left_sums, v.right_sums)
                );
            }
        }
    }

    #[test]
    fn min_child_weight_bounds_the_mean_hessian_per_output() {
        // Two outputs; the split after bin 0 leaves hessians (3, 1) left: a mean of 2.
        let q = [Quantiser::from_scales(1.0, 1.0); 2];
        let a = [GradSum { g: -6, h: 3 }, GradSum { g: 6, h: 3 }, GradSum::default()];
        let b = [GradSum { g: 2, h: 1 }, GradSum { g: -2, h: 5 }, GradSum::default()];
        let t = [total(&a), total(&b)];
        let at = |mcw: f64| {
            let p = SplitParams { min_child_weight: mcw, ..params() };
            let free = [NodeLimits::root(), NodeLimits::root()];
            VectorScorer::new(&p, &q, &t, 6, &free, &[]).best_numeric(0, &[&a, &b]).map(|c| c.split_bin)
        };
        assert_eq!(at(2.0), Some(0));
        assert_eq!(at(2.01), None);
    }

    #[test]
    fn gain_is_the_sum_of_the_outputs_gains_by_hand() {
        // Two outputs, two bins, no missing values, unit scales, lambda 1, no L1.
        let p = SplitParams { reg_alpha: 0.0, min_child_weight: 0.0, ..params() };
        let q = [Quantiser::from_scales(1.0, 1.0); 2];
        let a = [GradSum { g: -4, h: 2 }, GradSum { g: 6, h: 3 }, GradSum::default()];
        let b = [GradSum { g: 3, h: 1 }, GradSum { g: -1, h: 1 }, GradSum::default()];
        let t = [total(&a), total(&b)];
        let free = [NodeLimits::root(), NodeLimits::root()];
        let best = VectorScorer::new(&p, &q, &t, 5, &free, &[]).best_numeric(0, &[&a, &b]).unwrap();
        // Output 0: 16/3 + 36/4 - 4/6; output 1: 9/2 + 1/2 - 4/3.
        let want = (16.0 / 3.0 + 9.0 - 4.0 / 6.0) + (4.5 + 0.5 - 4.0 / 3.0);
        assert!((best.gain - want).abs() < 1e-12, "{} {want}", best.gain);
        assert_eq!(best.left_sums, vec![a[0], b[0]]);
        assert_eq!(best.right_sums, vec![a[1], b[1]]);
        // Output 0 is the heavier on the right: three against two rows' hessian over both.
        assert!(!best.default_left);
    }
}
