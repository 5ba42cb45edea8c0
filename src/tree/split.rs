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

use super::constraints::NodeLimits;
use super::gradient::{GradSum, Quantiser};

/// Split candidates whose gains are computed together (see `best_numeric_free`).
const BLOCK: usize = 64;

/// Gains at or below this are rounding noise, not a split (XGBoost's `kRtEps`).
pub(super) const MIN_GAIN: f64 = 1e-6;

/// The position of the first of the largest of `gains`, or None when every gain is minus
/// infinity (a rejected candidate). Gains are never NaN (a candidate's gain is finite or
/// rejected), so the first position holding the maximum is the candidate a scan keeping
/// only strictly greater gains would pick. The maximum is taken in eight lanes, which the
/// compiler turns into vector maxima.
#[inline]
fn first_largest(gains: &[f64]) -> Option<usize> {
    let mut lanes = [f64::NEG_INFINITY; 8];
    let chunks = gains.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &g) in lanes.iter_mut().zip(c) {
            *l = if g > *l { g } else { *l };
        }
    }
    let max = lanes.iter().chain(tail).fold(f64::NEG_INFINITY, |m, &g| if g > m { g } else { m });
    if max == f64::NEG_INFINITY {
        return None;
    }
    gains.iter().position(|&g| g == max)
}

/// A histogram slot as the searches read it: its gradient and hessian sums (a narrow `i32`
/// histogram's slots are read in place, widened one at a time), and as plain 64-bit words for
/// the vector scan of empty slots ([`present_slots`]).
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

    /// When the node saw no missing values, unseen missing values follow the heavier child.
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

    fn default_left_without_missing(&self, left: GradSum) -> bool {
        left.h >= (self.total - left).h
    }

    /// The best split of feature `feature` from its histogram: `hist[b]` sums bin `b`, and the
    /// last slot sums the missing values.
    /// Any slot type that reads as sums (a narrow `i32` histogram's slots, read in place).
    pub fn best_numeric<S: HistSlot>(&self, feature: u32, hist: &[S]) -> Option<SplitCandidate> {
        let (missing, bins) = hist.split_last()?;
        let missing = missing.sum();
        let direction = self.monotone.get(feature as usize).copied().unwrap_or(0);
        let has_missing = missing != GradSum::default();
        if direction == 0 && self.limits.unbounded() && self.params.max_delta_step == 0.0 {
            return self.best_numeric_free(feature, bins, missing, has_missing);
        }
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
        for (b, slot) in bins.iter().enumerate() {
            let slot = slot.sum();
            // An empty bin moves no rows: the split after the previous bin already covered it.
            if slot == GradSum::default() {
                continue;
            }
            left += slot;
            if has_missing {
                consider(self.gain(left, direction), b as u32, false, left);
                let with_missing = left + missing;
                consider(self.gain(with_missing, direction), b as u32, true, with_missing);
            } else {
                consider(self.gain(left, direction), b as u32, self.default_left_without_missing(left), left);
            }
        }
        best.map(|(gain, split_bin, default_left, left)| {
            self.candidate(feature, gain, split_bin, Vec::new(), default_left, left)
        })
    }

    /// [`Self::best_numeric`] for free weights (no monotone constraint, no bounds, no
    /// `max_delta_step`), the common case. The candidates of a block of bins are listed first
    /// (their left sums as separate gradient and hessian arrays), then their gains computed in
    /// one branch-free loop that the compiler vectorises (eight lanes with AVX-512, chosen at
    /// run time), then the block's first largest gain found by a vector maximum. The same
    /// candidates, the same float operations on each (IEEE operations are exact per lane, and
    /// Rust never fuses or reorders them) and the same pick as the general scan (the first
    /// of the largest gains): the same split, bit for bit, on any CPU.
    fn best_numeric_free<S: HistSlot>(
        &self,
        feature: u32,
        bins: &[S],
        missing: GradSum,
        has_missing: bool,
    ) -> Option<SplitCandidate> {
        let mut lg = [0i64; BLOCK];
        let mut lh = [0i64; BLOCK];
        let mut at = [0u32; BLOCK];
        let mut dl = [false; BLOCK];
        let mut gains = [0f64; BLOCK];
        let mut best: Option<(f64, u32, bool, GradSum)> = None;
        let mut left = GradSum::default();
        let mut b = 0;
        while b < bins.len() {
            let mut m = 0;
            // Every bin's candidates are written, and kept (the count advanced) only where the
            // bin holds rows: an empty bin moves no rows, the split after the previous bin
            // already covered it. Without a branch on it: deep nodes' histograms are patchy,
            // and the branch mispredicted there.
            while b < bins.len() && m + 2 <= BLOCK {
                let slot = bins[b].sum();
                let kept = !slot.is_zero() as usize;
                left += slot;
                (lg[m], lh[m], at[m]) = (left.g, left.h, b as u32);
                if has_missing {
                    dl[m] = false;
                    (lg[m + 1], lh[m + 1], at[m + 1], dl[m + 1]) =
                        (left.g + missing.g, left.h + missing.h, b as u32, true);
                    m += 2 * kept;
                } else {
                    dl[m] = self.default_left_without_missing(left);
                    m += kept;
                }
                b += 1;
            }
            self.free_gains(&lg[..m], &lh[..m], &mut gains[..m]);
            // Strictly greater than the best of earlier blocks: ties go to the first candidate,
            // as in the general scan.
            if let Some(j) = first_largest(&gains[..m]) {
                if best.is_none_or(|cur| gains[j] > cur.0) {
                    best = Some((gains[j], at[j], dl[j], GradSum { g: lg[j], h: lh[j] }));
                }
            }
        }
        best.map(|(gain, split_bin, default_left, left)| {
            self.candidate(feature, gain, split_bin, Vec::new(), default_left, left)
        })
    }

    /// The gains of sending left the candidates whose left gradient and hessian sums are
    /// `lg` and `lh` (at most [`BLOCK`]), minus infinity where [`Self::gain`] is None.
    fn free_gains(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq") {
            // SAFETY: the features are present (checked above).
            unsafe { self.free_gains_avx512(lg, lh, gains) };
            return;
        }
        self.free_gains_soa(lg, lh, gains);
    }

    /// [`Self::free_gains_soa`] compiled for AVX-512 (its packed i64 -> f64 conversion lets the
    /// whole loop vectorise; AVX2 has none).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn free_gains_avx512(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        self.free_gains_soa(lg, lh, gains);
    }

    /// [`Self::gain_under`] with free weights, written without branches: `score` and
    /// `threshold_l1` as selects (the division where the denominator is not positive is
    /// computed and dropped, as the scalar code never computes it), the same operations in
    /// the same order.
    #[inline(always)]
    fn free_gains_soa(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        let p = self.params;
        let (gu, hu) = self.quantiser.units();
        let (tg, th) = (self.total.g, self.total.h);
        let (a, lambda, mcw, gamma, parent) =
            (p.reg_alpha, p.reg_lambda, p.min_child_weight, p.gamma, self.parent_score);
        let score = |g: f64, h: f64| {
            let denom = h + lambda;
            let t = if g > a {
                g - a
            } else if g < -a {
                g + a
            } else {
                0.0
            };
            let s = t * t / denom;
            if denom <= 0.0 {
                0.0
            } else {
                s
            }
        };
        for ((out, &g), &h) in gains.iter_mut().zip(lg).zip(lh) {
            let (gl, hl) = (g as f64 * gu, h as f64 * hu);
            let (gr, hr) = ((tg - g) as f64 * gu, (th - h) as f64 * hu);
            let heavy = !(hl < mcw || hr < mcw);
            let gain = score(gl, hl) + score(gr, hr) - parent;
            *out = if heavy && gain > MIN_GAIN && gain >= gamma { gain } else { f64::NEG_INFINITY };
        }
    }

    /// The best split of a categorical feature: one category against the rest when there are
    /// few categories, else the best prefix of the categories ordered by leaf weight (a
    /// partition split). Sending every present category left is the "present or missing" split.
    ///
    /// Partition splits are regularised as LightGBM's are, so that high-cardinality features
    /// do not fit noise: categories with fewer than `cat_smooth` rows stay out of the ordering
    /// (they go right), the ordering adds `cat_smooth` to each category's hessian, the children
    /// are scored with `cat_l2` added to `reg_lambda`, and each side needs `min_data_per_group`
    /// rows. Rows are estimated from hessians (`rows_per_hessian`).
    pub fn best_categorical<S: HistSlot>(&self, feature: u32, hist: &[S]) -> Option<SplitCandidate> {
        let (missing, bins) = hist.split_last()?;
        let missing = missing.sum();
        let has_missing = missing != GradSum::default();
        let present = present_slots(bins);
        if present.is_empty() || (present.len() == 1 && !has_missing) {
            return None;
        }
        let p = self.params;
        let partition_params = SplitParams { reg_lambda: p.reg_lambda + p.cat_l2, ..*p };
        // The best so far names its left set by where it lies (a category, or a prefix of the
        // order); the set is built once, at the end: copying it at every improvement was
        // quadratic in the categories (100,000 took 48 s).
        let mut best: Option<CategoricalBest> = None;
        let missing = has_missing.then_some(missing);
        let mut consider = |set: LeftSet, left: GradSum, partition: bool| {
            self.consider_categorical(&mut best, &partition_params, missing, set, left, partition)
        };
        let mut order: Vec<u32>;
        if present.len() <= p.max_cat_to_onehot {
            for &c in &present {
                consider(LeftSet::One(c), bins[c as usize].sum(), false);
            }
            order = present;
        } else {
            let n_present = present.len();
            order = present;
            retain_branch_free(&mut order, |c| self.rows_of(bins[c as usize].sum()) >= p.cat_smooth);
            // With rare categories left out, every ordered category left would split off just
            // the rare ones: not a candidate.
            let last = if order.len() < n_present { order.len().saturating_sub(1) } else { order.len() };
            let weight = |c: u32| {
                let (g, h) = self.quantiser.to_float(bins[c as usize].sum());
                p.weight(g, h + p.cat_smooth)
            };
            // Prefixes of the weight order, the side sent left holding at most
            // `max_cat_threshold` categories (either side may be the small one).
            let cap = p.max_cat_threshold;
            order = sorted_by_weight(&order, weight, cap);
            let mut left = GradSum::default();
            for k in 1..=last {
                left += bins[order[k - 1] as usize].sum();
                if k <= cap || order.len() - k <= cap {
                    consider(LeftSet::Prefix(k), left, true);
                }
            }
        }
        best.map(|(gain, set, default_left, left)| {
            self.candidate(feature, gain, 0, set.categories(&order), default_left, left)
        })
    }

    /// Scores one categorical candidate, `left` the sums of its left set, and keeps it in
    /// `best` when its gain beats the best's. With `missing` sums, both directions for the
    /// missing values are candidates. Partition candidates are scored under
    /// `partition_params` and need `min_data_per_group` rows on each side.
    #[inline]
    fn consider_categorical(
        &self,
        best: &mut Option<CategoricalBest>,
        partition_params: &SplitParams,
        missing: Option<GradSum>,
        set: LeftSet,
        left: GradSum,
        partition: bool,
    ) {
        let p = self.params;
        // Where missing values go: both ways when there are some (no allocation: this runs for
        // every prefix of every categorical order).
        let (options, n_options) = match missing {
            Some(missing) => ([(false, left), (true, left + missing)], 2),
            None => ([(self.default_left_without_missing(left), left), (false, left)], 1),
        };
        for &(default_left, l) in &options[..n_options] {
            let gain = if partition {
                let groups_ok = p.min_data_per_group <= 0.0
                    || (self.rows_of(l) >= p.min_data_per_group
                        && self.rows_of(self.total - l) >= p.min_data_per_group);
                if !groups_ok {
                    continue;
                }
                self.gain_under(partition_params, l, 0)
            } else {
                self.gain(l, 0)
            };
            if let Some(g) = gain {
                if best.as_ref().is_none_or(|b| g > b.0) {
                    *best = Some((g, set, default_left, l));
                }
            }
        }
    }
}

/// The best categorical candidate so far: its gain, where its left set lies, where missing
/// values go, and its left sums. The set itself is built once, at the end.
type CategoricalBest = (f64, LeftSet, bool, GradSum);

/// A categorical candidate's left categories: one, or the first `k` of the weight order.
#[derive(Clone, Copy)]
enum LeftSet {
    One(u32),
    Prefix(usize),
}

impl LeftSet {
    /// The categories themselves, sorted, given the weight order a prefix refers to.
    fn categories(self, order: &[u32]) -> Vec<u32> {
        match self {
            LeftSet::One(c) => vec![c],
            LeftSet::Prefix(k) => {
                let mut s = order[..k].to_vec();
                s.sort_unstable();
                s
            }
        }
    }
}

/// The positions of `bins`' non-empty slots, in order: a categorical feature's categories
/// that hold rows in the node. A column of thousands of categories is scanned in every node,
/// most of it empty at depth; with AVX-512 (checked at run time) sixteen slots are tested and
/// their positions written by one compressing store, where the portable filter spends a few
/// instructions a slot.
pub(crate) fn present_slots<S: HistSlot>(bins: &[S]) -> Vec<u32> {
    let mut out: Vec<u32> = (0..bins.len() as u32).collect();
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the features are present (checked above); `out` is as long as `bins`.
        let n = unsafe { present_slots_avx512::<S>(S::words(bins), &mut out) };
        out.truncate(n);
        return out;
    }
    retain_branch_free(&mut out, |c| !bins[c as usize].sum().is_zero());
    out
}

/// Writes the positions of the non-empty slots among `words` (`S::WORDS` a slot, one or two)
/// to the front of `out` and returns their count: sixteen slots from one or two loads a
/// word of a slot, a bit a nonzero word (a two-word slot's pair of bits folded by `pext`), the
/// positions written by one compressing store.
///
/// # Safety
/// Needs AVX-512F and BMI2, and `out` as long as the slots.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,bmi2")]
unsafe fn present_slots_avx512<S: HistSlot>(words: &[u64], out: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    let per_slot = S::WORDS;
    debug_assert!(matches!(per_slot, 1 | 2) && out.len() * per_slot >= words.len());
    let n_slots = words.len() / per_slot;
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let (mut n, mut c) = (0usize, 0usize);
    while c + 16 <= n_slots {
        let mut nonzero = 0u32;
        for q in 0..2 * per_slot {
            // SAFETY: the 16 * per_slot words from c * per_slot are inside `words`.
            let v = unsafe { _mm512_loadu_si512(words.as_ptr().add(c * per_slot + 8 * q) as *const __m512i) };
            nonzero |= (_mm512_test_epi64_mask(v, v) as u32) << (8 * q);
        }
        let present = match per_slot {
            1 => nonzero as u16,
            _ => _pext_u32(nonzero | (nonzero >> 1), 0x5555_5555) as u16,
        };
        let k = present.count_ones() as usize;
        // SAFETY: n <= c, so the k positions land at out[n..n + k] with n + k <= c + 16.
        unsafe {
            _mm512_mask_storeu_epi32(
                out.as_mut_ptr().add(n) as *mut i32,
                ((1u32 << k) - 1) as u16,
                _mm512_maskz_compress_epi32(present, _mm512_add_epi32(lanes, _mm512_set1_epi32(c as i32))),
            )
        };
        n += k;
        c += 16;
    }
    for slot in c..n_slots {
        out[n] = slot as u32;
        n += words[slot * per_slot..(slot + 1) * per_slot].iter().any(|&w| w != 0) as usize;
    }
    n
}

/// `items.retain(keep)` without a branch on `keep`: every item is written to the next kept
/// place and only the count advances where it is kept. A deep node's few rows leave a long
/// category list patchy, and the branch of a plain filter mispredicted about every other slot
/// (the 3,960 categories of a column, in every node).
pub(crate) fn retain_branch_free(items: &mut Vec<u32>, keep: impl Fn(u32) -> bool) {
    let mut n = 0;
    for i in 0..items.len() {
        let c = items[i];
        items[n] = c;
        n += keep(c) as usize;
    }
    items.truncate(n);
}

/// `categories` ordered by `weight`, ties by category, each weight computed once rather than
/// twice a comparison (a weight is a division; a column of thousands of categories sorts in
/// every node). The keys are distinct, so the order is the one order. Only the first and
/// last `ends` positions are put in that order, the rest lie between them in no order: the
/// searches consider only prefixes of at most `ends` categories, or all but at most `ends`,
/// and read a prefix as a set; selecting the ends is linear where a sort of thousands of
/// categories was the longest step of a node's search.
pub(crate) fn sorted_by_weight(categories: &[u32], weight: impl Fn(u32) -> f64, ends: usize) -> Vec<u32> {
    let mut keyed: Vec<(f64, u32)> = categories.iter().map(|&c| (weight(c), c)).collect();
    let order = |a: &(f64, u32), b: &(f64, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    let n = keyed.len();
    if n <= 2 * ends.saturating_add(1) {
        keyed.sort_unstable_by(order);
    } else if ends > 0 {
        // The `ends` lightest first, then the `ends` heaviest last, each then sorted.
        keyed.select_nth_unstable_by(ends, order);
        keyed[..ends].sort_unstable_by(order);
        let rest = &mut keyed[ends..];
        let at = rest.len() - ends;
        rest.select_nth_unstable_by(at, order);
        rest[at..].sort_unstable_by(order);
    }
    keyed.into_iter().map(|(_, c)| c).collect()
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
            cat_smooth: 0.0,
            cat_l2: 0.0,
            min_data_per_group: 0.0,
        }
    }

    /// The first and last `ends` positions are the full sort's, the rest the same set.
    #[test]
    fn sorting_only_the_ends_keeps_the_full_orders_ends() {
        use crate::random::Rng;
        let mut rng = Rng::new(5, 0);
        for (n, ends) in [(3960usize, 64usize), (200, 64), (130, 64), (129, 64), (10, 0), (1000, 1), (50, 3)] {
            let categories: Vec<u32> = (0..n as u32).map(|c| c * 3 + 1).collect();
            // Few distinct weights: many ties, broken by category.
            let weights: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 17) as f64 - 8.0).collect();
            let weight = |c: u32| weights[((c - 1) / 3) as usize];
            let full = sorted_by_weight(&categories, weight, n);
            let got = sorted_by_weight(&categories, weight, ends);
            let e = ends.min(n);
            assert_eq!(got[..e], full[..e], "n {n}, ends {ends}");
            assert_eq!(got[n - e..], full[n - e..], "n {n}, ends {ends}");
            let (mut a, mut b) = (got.clone(), full.clone());
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
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

    /// The free-weight scan (blocks of gains, vectorised where the CPU allows) picks what the
    /// general per-candidate scan picks, bit for bit, and its vector and scalar gains agree.
    #[test]
    fn free_weight_scan_equals_the_general_scan() {
        let mut rng = crate::random::Rng::new(11, 3);
        let q = Quantiser::from_scales(8.0, 4.0);
        for case in 0..400 {
            let p = SplitParams {
                reg_lambda: [1.0, 0.0, 0.5][case % 3],
                reg_alpha: [0.0, 0.7, 30.0][case % 5 % 3],
                gamma: [0.0, 0.5][case % 2],
                min_child_weight: [0.0, 1.0, 20.0][case % 7 % 3],
                ..params()
            };
            let n_bins = 1 + rng.below(300);
            let mut hist: Vec<GradSum> = (0..=n_bins)
                .map(|_| match rng.below(4) {
                    0 => GradSum::default(),
                    _ => GradSum { g: rng.below(2001) as i64 - 1000, h: rng.below(400) as i64 },
                })
                .collect();
            if case % 2 == 0 {
                *hist.last_mut().unwrap() = GradSum::default();
            }
            let total = hist.iter().fold(GradSum::default(), |a, &b| a + b);
            let limits = NodeLimits::root();
            let scorer = SplitScorer::new(&p, &q, total, 1000, &limits, &[]);
            // The general scan, candidate by candidate.
            let (missing, bins) = hist.split_last().unwrap();
            let has_missing = *missing != GradSum::default();
            let mut want: Option<(f64, u32, bool)> = None;
            let mut left = GradSum::default();
            let mut lefts = Vec::new();
            for (b, &slot) in bins.iter().enumerate() {
                if slot == GradSum::default() {
                    continue;
                }
                left += slot;
                let mut cands =
                    vec![(left, if has_missing { false } else { scorer.default_left_without_missing(left) })];
                if has_missing {
                    cands.push((left + *missing, true));
                }
                for (l, dl) in cands {
                    lefts.push(l);
                    if let Some(g) = scorer.gain(l, 0) {
                        if want.is_none_or(|w| g > w.0) {
                            want = Some((g, b as u32, dl));
                        }
                    }
                }
            }
            let got = scorer.best_numeric(0, &hist).map(|c| (c.gain, c.split_bin, c.default_left));
            assert_eq!(got.map(|g| (g.0.to_bits(), g.1, g.2)), want.map(|w| (w.0.to_bits(), w.1, w.2)), "case {case}");
            for block in lefts.chunks(BLOCK) {
                let (mut fast, mut plain) = (vec![0.0; block.len()], vec![0.0; block.len()]);
                let lg: Vec<i64> = block.iter().map(|l| l.g).collect();
                let lh: Vec<i64> = block.iter().map(|l| l.h).collect();
                scorer.free_gains(&lg, &lh, &mut fast);
                scorer.free_gains_soa(&lg, &lh, &mut plain);
                for ((f, s), &l) in fast.iter().zip(&plain).zip(block) {
                    let want = scorer.gain(l, 0).unwrap_or(f64::NEG_INFINITY);
                    assert_eq!((f.to_bits(), s.to_bits()), (want.to_bits(), want.to_bits()), "case {case}");
                }
            }
        }
    }

    /// The branch-free filter keeps what `retain` keeps, in order.
    #[test]
    fn branch_free_retain_equals_retain() {
        let mut rng = crate::random::Rng::new(5, 1);
        for len in [0usize, 1, 7, 300] {
            let items: Vec<u32> = (0..len).map(|_| rng.below(50) as u32).collect();
            for cut in [0u32, 10, 25, 50] {
                let (mut got, mut want) = (items.clone(), items.clone());
                retain_branch_free(&mut got, |c| c >= cut);
                want.retain(|&c| c >= cut);
                assert_eq!(got, want, "{len} items, cut {cut}");
            }
        }
    }

    /// The vector scan of present slots (where the CPU has it) lists what the plain filter
    /// lists: slots empty, with only a gradient, only a hessian, or both; lengths around the
    /// sixteen-slot blocks.
    #[test]
    fn present_slots_equal_the_plain_filter() {
        let mut rng = crate::random::Rng::new(9, 2);
        for len in [0usize, 1, 15, 16, 17, 100, 3961] {
            let bins: Vec<GradSum> = (0..len)
                .map(|_| match rng.below(5) {
                    0 => GradSum { g: rng.below(9) as i64 - 4, h: 0 },
                    1 => GradSum { g: 0, h: rng.below(3) as i64 },
                    2 => GradSum { g: -(1 << 40), h: 1 << 33 },
                    _ => GradSum::default(),
                })
                .collect();
            let want: Vec<u32> = (0..len as u32).filter(|&c| bins[c as usize] != GradSum::default()).collect();
            assert_eq!(present_slots(&bins), want, "{len} slots");
        }
    }

    /// The block scan's pick: the first of the largest gains, past ties and rejected ones.
    #[test]
    fn first_largest_takes_the_first_of_ties() {
        let ninf = f64::NEG_INFINITY;
        assert_eq!(first_largest(&[]), None);
        assert_eq!(first_largest(&[ninf; 11]), None);
        assert_eq!(first_largest(&[ninf, 2.0, 1.0, 2.0]), Some(1));
        let mut g = vec![ninf; 37];
        (g[9], g[17], g[33], g[36]) = (5.0, 7.0, 7.0, 6.0);
        assert_eq!(first_largest(&g), Some(17));
        g[35] = 8.0;
        assert_eq!(first_largest(&g), Some(35));
    }

    /// Unit scales: a slot's (g, h) are its integers; h = 1 per row, as for squared error.
    fn slot(g: i64, rows: i64) -> GradSum {
        GradSum { g, h: rows }
    }

    fn categorical(p: &SplitParams, bins: &[GradSum]) -> Option<SplitCandidate> {
        let q = Quantiser::from_scales(1.0, 1.0);
        let mut hist = bins.to_vec();
        hist.push(GradSum::default()); // no missing values
        let total = bins.iter().fold(GradSum::default(), |a, &b| a + b);
        let rows = total.h as u32;
        SplitScorer::new(p, &q, total, rows, &NodeLimits::root(), &[]).best_categorical(0, &hist)
    }

    #[test]
    fn a_rare_category_with_an_extreme_gradient_is_not_split_off_under_cat_smooth() {
        // Five common categories with mild gradients, and one seen in 3 rows with a large one.
        let bins = [slot(-40, 100), slot(-20, 100), slot(0, 100), slot(20, 100), slot(40, 100), slot(90, 3)];
        // Without regularisation the best split sends the rare category alone one way.
        let plain = categorical(&params(), &bins).unwrap();
        assert_eq!(plain.left_categories, vec![5]);
        // Under cat_smooth = 10 it is out of the ordering and stays right, with the rest.
        let smoothed = categorical(&SplitParams { cat_smooth: 10.0, ..params() }, &bins).unwrap();
        assert!(!smoothed.left_categories.contains(&5), "{:?}", smoothed.left_categories);
        assert!(smoothed.gain < plain.gain);
    }

    #[test]
    fn cat_l2_scores_the_children_with_more_l2_and_the_parent_without() {
        let bins = [slot(-30, 50), slot(-10, 50), slot(10, 50), slot(30, 50), slot(50, 50)];
        let p = SplitParams { cat_l2: 10.0, ..params() };
        let c = categorical(&p, &bins).unwrap();
        let (gl, hl) = (c.left.g as f64, c.left.h as f64);
        let (gr, hr) = (c.right.g as f64, c.right.h as f64);
        let more = SplitParams { reg_lambda: 11.0, ..params() };
        let want = more.score(gl, hl) + more.score(gr, hr) - params().score(gl + gr, hl + hr);
        assert!((c.gain - want).abs() < 1e-9, "gain {} want {want}", c.gain);
        // The best partition sends the negative gradients one way: {0, 1} against {2, 3, 4}.
        assert!(c.left_categories == [0, 1] || c.left_categories == [2, 3, 4], "{:?}", c.left_categories);
    }

    #[test]
    fn min_data_per_group_keeps_both_sides_large_enough() {
        // Six categories of 30 rows; the strongest split isolates category 0 (gradient -90),
        // which 50 rows per side rules out: the left side must hold at least two categories.
        let bins = [slot(-90, 30), slot(-5, 30), slot(0, 30), slot(5, 30), slot(10, 30), slot(15, 30)];
        let plain = categorical(&params(), &bins).unwrap();
        assert!(plain.left_categories == [0] || plain.left_categories == [1, 2, 3, 4, 5]);
        let grouped = categorical(&SplitParams { min_data_per_group: 50.0, ..params() }, &bins).unwrap();
        let n_left = grouped.left_categories.len();
        assert!((2..=4).contains(&n_left), "{:?}", grouped.left_categories);
        assert!(grouped.left.h >= 50 && grouped.right.h >= 50);
    }
}
