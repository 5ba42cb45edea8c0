//! The search of a categorical feature's histogram for its best split: one category against
//! the rest when few are present, else the best prefix of the categories ordered by leaf
//! weight (a partition split, regularised as LightGBM's are).

use super::category_lists::{present_slots, retain_branch_free, sorted_by_weight};
use super::{HistSlot, SplitCandidate, SplitParams, SplitScorer};
use crate::tree::gradient::GradSum;

impl SplitScorer<'_> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::constraints::NodeLimits;
    use crate::tree::gradient::Quantiser;
    use crate::tree::split::tests::params;

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
