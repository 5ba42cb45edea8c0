//! SHAP values on the CPU: exact TreeSHAP (Lundberg, Erion and Lee, 2018, "Consistent
//! individualized feature attribution for tree ensembles", algorithm 2), in XGBoost's layout:
//! per row and output, one value per feature and then the bias (the output's expected margin).
//!
//! Each tree is walked once per row. Along the way the path keeps, for every feature it split
//! on, the share of the training cover that follows the row's branch when the feature is
//! unknown (`zero`) and whether the row itself follows it (`one`), and the weights of the
//! feature subsets of each size; at a leaf, each feature's contribution is the leaf's value
//! times its weighted marginal effect. Missing values follow their default directions and
//! categorical splits their category sets, exactly as prediction does (`Tree::next`); the
//! contributions and the bias of a row sum to its margin.

use crate::tree::shap::{cover_share, expected_value};
use crate::tree::Tree;

/// One feature on the path from the root to the current node.
#[derive(Clone, Copy, Debug)]
struct PathStep {
    /// The feature; the path's first entry (no feature) has `usize::MAX`.
    feature: usize,
    /// Share of the cover that goes this way when the feature is unknown.
    zero: f64,
    /// 1 when the row goes this way, else 0.
    one: f64,
    /// Weight of the subsets of this size among the path's features.
    weight: f64,
}

const NO_FEATURE: usize = usize::MAX;

const EMPTY_STEP: PathStep = PathStep { feature: NO_FEATURE, zero: 0.0, one: 0.0, weight: 0.0 };

/// SHAP values with one feature held: `sign` +1 as if it were always known (its splits follow
/// the row only), -1 as if it were never known (its splits follow the cover), 0 for none. The
/// difference of the two, halved, is that feature's interaction with each other one
/// (Lundberg, Erion and Lee, 2018, section 4.2; XGBoost computes its `pred_interactions` so).
#[derive(Clone, Copy)]
struct Condition {
    feature: usize,
    sign: i8,
}

const UNCONDITIONED: Condition = Condition { feature: NO_FEATURE, sign: 0 };

/// Adds a step to the path of `l` steps held at the start of `path`, updating the subset
/// weights; the path then has `l + 1` steps.
fn extend(path: &mut [PathStep], l: usize, zero: f64, one: f64, feature: usize) -> usize {
    path[l] = PathStep { feature, zero, one, weight: if l == 0 { 1.0 } else { 0.0 } };
    for i in (0..l).rev() {
        path[i + 1].weight += one * path[i].weight * (i + 1) as f64 / (l + 1) as f64;
        path[i].weight = zero * path[i].weight * (l - i) as f64 / (l + 1) as f64;
    }
    l + 1
}

/// Removes step `i` from the path of `len` steps, undoing its effect on the subset weights;
/// the path then has `len - 1` steps.
fn unwind(path: &mut [PathStep], len: usize, i: usize) -> usize {
    let l = len - 1;
    let (one, zero) = (path[i].one, path[i].zero);
    let mut next = path[l].weight;
    for j in (0..l).rev() {
        if one != 0.0 {
            let w = path[j].weight;
            path[j].weight = next * (l + 1) as f64 / ((j + 1) as f64 * one);
            next = w - path[j].weight * zero * (l - j) as f64 / (l + 1) as f64;
        } else if zero != 0.0 {
            path[j].weight = path[j].weight * (l + 1) as f64 / (zero * (l - j) as f64);
        } else {
            // A branch no training row took: the step zeroed every weight, and keeps them so.
            path[j].weight = 0.0;
        }
    }
    for j in i..l {
        path[j].feature = path[j + 1].feature;
        path[j].zero = path[j + 1].zero;
        path[j].one = path[j + 1].one;
    }
    l
}

/// The total subset weight the path would have without step `i` (without changing it).
fn unwound_sum(path: &[PathStep], i: usize) -> f64 {
    let l = path.len() - 1;
    let (one, zero) = (path[i].one, path[i].zero);
    let mut next = path[l].weight;
    let mut total = 0.0;
    for j in (0..l).rev() {
        if one != 0.0 {
            let w = next * (l + 1) as f64 / ((j + 1) as f64 * one);
            total += w;
            next = path[j].weight - w * zero * (l - j) as f64 / (l + 1) as f64;
        } else if zero != 0.0 {
            total += path[j].weight / zero * (l + 1) as f64 / (l - j) as f64;
        }
    }
    total
}

/// A node waiting to be walked: entered by `step` from the path of `len` steps that starts at
/// `start` in the walk's arena, with `share` the part of the walk the condition lets through.
#[derive(Clone, Copy)]
struct Visit {
    node: u32,
    start: usize,
    len: usize,
    step: PathStep,
    share: f64,
    /// The node's sibling still needs the parent's path: copy it above, else extend in place.
    copy: bool,
}

/// One walk's memory, kept between trees and rows: the pending visits and the arena of paths.
#[derive(Default)]
struct Walk {
    pending: Vec<Visit>,
    arena: Vec<PathStep>,
}

/// Walks `tree` for the row `x`, adding each feature's contribution into `phi`, with an
/// explicit stack: no recursion, whatever the depth. Of a split's two children the one with
/// the smaller subtree (`subtree`: node counts) is walked first, on a copy of the parent's
/// path; the other then takes the parent's path over in place. So paths are kept only where
/// a walk is inside a smaller half: at most log2(nodes) + 1 of them, each at most one step per
/// distinct feature, and a chain of any depth walks in constant memory.
fn walk(tree: &Tree, subtree: &[u32], row: &[f32], phi: &mut [f64], cond: Condition, scratch: &mut Walk) {
    let Walk { pending, arena } = scratch;
    pending.clear();
    let root = PathStep { feature: NO_FEATURE, zero: 1.0, one: 1.0, weight: 0.0 };
    pending.push(Visit { node: 0, start: 0, len: 0, step: root, share: 1.0, copy: false });
    while let Some(v) = pending.pop() {
        if v.share == 0.0 {
            continue;
        }
        let start = if v.copy { v.start + v.len } else { v.start };
        // Room for the parent's steps and one more.
        if arena.len() < start + v.len + 1 {
            arena.resize(start + v.len + 1, EMPTY_STEP);
        }
        if v.copy {
            arena.copy_within(v.start..v.start + v.len, start);
        }
        let path = &mut arena[start..];
        let mut len = v.len;
        let step = v.step;
        // The held feature never enters the path: it is known or unknown throughout.
        if cond.sign == 0 || step.feature != cond.feature {
            len = extend(path, len, step.zero, step.one, step.feature);
        }
        let node = v.node;
        if tree.is_leaf(node) {
            let value = tree.value[node as usize] as f64;
            for i in 1..len {
                let w = unwound_sum(&path[..len], i);
                phi[path[i].feature] += w * (path[i].one - path[i].zero) * value * v.share;
            }
            continue;
        }
        let f = tree.feature[node as usize] as usize;
        let hot = tree.next(node, row[f]);
        let (left, right) = (tree.left[node as usize], tree.right[node as usize]);
        let cold = if hot == left { right } else { left };
        // A feature split on again: its earlier step leaves the path, its fractions carry on.
        let (mut zero_in, mut one_in) = (1.0, 1.0);
        if let Some(k) = path[..len].iter().skip(1).position(|p| p.feature == f).map(|k| k + 1) {
            zero_in = path[k].zero;
            one_in = path[k].one;
            len = unwind(path, len, k);
        }
        let (hot_zero, cold_zero) = (cover_share(tree, node, hot), cover_share(tree, node, cold));
        let (mut hot_share, mut cold_share) = (v.share, v.share);
        if f == cond.feature {
            match cond.sign {
                1 => cold_share = 0.0,
                -1 => {
                    hot_share *= hot_zero;
                    cold_share *= cold_zero;
                }
                _ => {}
            }
        }
        let hot_step = PathStep { feature: f, zero: zero_in * hot_zero, one: one_in, weight: 0.0 };
        let cold_step = PathStep { feature: f, zero: zero_in * cold_zero, one: 0.0, weight: 0.0 };
        let hot = Visit { node: hot, start, len, step: hot_step, share: hot_share, copy: false };
        let cold = Visit { node: cold, start, len, step: cold_step, share: cold_share, copy: false };
        // The larger subtree goes below (walked last, in place), the smaller on top (first).
        let (last, first) =
            if subtree[hot.node as usize] >= subtree[cold.node as usize] { (hot, cold) } else { (cold, hot) };
        pending.push(last);
        pending.push(Visit { copy: true, ..first });
    }
}

/// Each node's subtree size (itself and every node below it), by one backward pass: children
/// come after their parents.
fn subtree_sizes(tree: &Tree) -> Vec<u32> {
    let mut size = vec![1u32; tree.n_nodes()];
    for n in (0..tree.n_nodes()).rev() {
        if tree.left[n] != crate::tree::NO_CHILD {
            size[n] += size[tree.left[n] as usize] + size[tree.right[n] as usize];
        }
    }
    size
}

/// The features a tree splits on, each once.
fn features_used(tree: &Tree) -> Vec<usize> {
    let mut used: Vec<usize> =
        (0..tree.value.len() as u32).filter(|&n| !tree.is_leaf(n)).map(|n| tree.feature[n as usize] as usize).collect();
    used.sort_unstable();
    used.dedup();
    used
}

/// A forest's SHAP values, row by row.
pub struct TreeShap<'a> {
    trees: &'a [Tree],
    n_outputs: usize,
    n_features: usize,
    /// Each tree's expected value (its part of the bias).
    expected: Vec<f64>,
    /// Each tree's subtree sizes, which order a walk (`walk`).
    subtree: Vec<Vec<u32>>,
}

impl<'a> TreeShap<'a> {
    pub fn new(trees: &'a [Tree], n_outputs: usize, n_features: usize) -> Self {
        let expected = trees.iter().map(expected_value).collect();
        let subtree = trees.iter().map(subtree_sizes).collect();
        TreeShap { trees, n_outputs, n_features, expected, subtree }
    }

    /// Values per row: `n_outputs` blocks of `n_features + 1` (each feature, then the bias).
    pub fn width(&self) -> usize {
        self.n_outputs * (self.n_features + 1)
    }

    /// The SHAP values of the row `x` (its `n_features` values) into `out` (`width()` of them),
    /// the bias starting from the row's margins `base` (`n_outputs`).
    pub fn row(&self, x: &[f32], base: &[f32], out: &mut [f32]) {
        let width = self.n_features + 1;
        let mut phi = vec![0f64; self.n_outputs * width];
        let mut scratch = Walk::default();
        for (t, tree) in self.trees.iter().enumerate() {
            let k = t % self.n_outputs;
            let block = &mut phi[k * width..(k + 1) * width];
            walk(tree, &self.subtree[t], x, block, UNCONDITIONED, &mut scratch);
            block[self.n_features] += self.expected[t];
        }
        for (k, b) in base.iter().enumerate() {
            phi[k * width + self.n_features] += *b as f64;
        }
        for (o, p) in out.iter_mut().zip(&phi) {
            *o = *p as f32;
        }
    }

    /// Values per row of [`TreeShap::interactions`]: `n_outputs` matrices of
    /// `(n_features + 1)` squared.
    pub fn interaction_width(&self) -> usize {
        let m = self.n_features + 1;
        self.n_outputs * m * m
    }

    /// SHAP interaction values of the row `x` into `out` (`interaction_width()` of them), in
    /// XGBoost's `pred_interactions` layout: per output, row i of the matrix holds feature
    /// i's interactions with each feature j (symmetric), its own main effect on the diagonal,
    /// and the last row and column the bias (only at their corner). Each row of the matrix
    /// sums to feature i's SHAP value, the whole matrix to the margin.
    pub fn interactions(&self, x: &[f32], base: &[f32], out: &mut [f32]) {
        let m = self.n_features + 1;
        let mut shap = vec![0f32; self.width()];
        self.row(x, base, &mut shap);
        let mut matrix = vec![0f64; self.n_outputs * m * m];
        let (mut on, mut off) = (vec![0f64; m], vec![0f64; m]);
        let mut scratch = Walk::default();
        for (t, tree) in self.trees.iter().enumerate() {
            let block = &mut matrix[(t % self.n_outputs) * m * m..][..m * m];
            // Features a tree does not split on have no interaction in it.
            for i in features_used(tree) {
                on.fill(0.0);
                off.fill(0.0);
                let held = |sign| Condition { feature: i, sign };
                walk(tree, &self.subtree[t], x, &mut on, held(1), &mut scratch);
                walk(tree, &self.subtree[t], x, &mut off, held(-1), &mut scratch);
                for j in (0..m).filter(|&j| j != i) {
                    let v = (on[j] - off[j]) / 2.0;
                    block[i * m + j] += v;
                    block[i * m + i] -= v;
                }
            }
        }
        // The main effects: what is left of each SHAP value after its interactions.
        for k in 0..self.n_outputs {
            for i in 0..m {
                matrix[k * m * m + i * m + i] += shap[k * m + i] as f64;
            }
        }
        for (o, v) in out.iter_mut().zip(&matrix) {
            *o = *v as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::model::SplitSpec;

    /// E[tree | the features in `known` take the row's values], the rest averaged over the
    /// training cover: the value function TreeSHAP's Shapley values are exact for.
    fn conditional(tree: &Tree, node: u32, x: &[f32], known: u32) -> f64 {
        if tree.is_leaf(node) {
            return tree.value[node as usize] as f64;
        }
        let f = tree.feature[node as usize] as usize;
        if known & (1 << f) != 0 {
            return conditional(tree, tree.next(node, x[f]), x, known);
        }
        let (l, r) = (tree.left[node as usize], tree.right[node as usize]);
        cover_share(tree, node, l) * conditional(tree, l, x, known)
            + cover_share(tree, node, r) * conditional(tree, r, x, known)
    }

    /// Shapley values by enumerating every subset of the features.
    fn brute_force(tree: &Tree, x: &[f32]) -> Vec<f64> {
        let m = x.len();
        let fact = |n: usize| (1..=n).product::<usize>() as f64;
        let mut phi = vec![0.0; m];
        for (i, p) in phi.iter_mut().enumerate() {
            for s in 0u32..(1 << m) {
                if s & (1 << i) != 0 {
                    continue;
                }
                let size = s.count_ones() as usize;
                let w = fact(size) * fact(m - size - 1) / fact(m);
                *p += w * (conditional(tree, 0, x, s | (1 << i)) - conditional(tree, 0, x, s));
            }
        }
        phi
    }

    /// A tree of depth 4 over 4 features that splits feature 0 twice on one path, with a
    /// categorical split, missing values going left or right, and uneven covers.
    fn tree() -> Tree {
        let mut t = Tree::leaf(0.0, 100.0);
        let split =
            |t: &mut Tree, node, feature, threshold, default_left, cats: &[u32], l: (f32, f32), r: (f32, f32)| {
                t.split(
                    node,
                    &SplitSpec { feature, threshold, split_bin: 0, default_left, left_categories: cats, gain: 1.0 },
                    l,
                    r,
                )
            };
        let (a, b) = split(&mut t, 0, 0, 0.5, true, &[], (0.0, 60.0), (0.0, 40.0));
        let (c, d) = split(&mut t, a, 1, 1.5, false, &[], (0.0, 35.0), (0.0, 25.0));
        let (e, f) = split(&mut t, b, 2, 0.0, true, &[1, 3], (0.0, 10.0), (0.0, 30.0));
        let (g, h) = split(&mut t, c, 0, -0.5, false, &[], (1.5, 20.0), (-0.7, 15.0));
        let (i, j) = split(&mut t, d, 3, 2.0, true, &[], (0.3, 5.0), (2.2, 20.0));
        let (k, l) = split(&mut t, e, 3, -1.0, false, &[], (-1.1, 4.0), (0.9, 6.0));
        let (m, n) = split(&mut t, f, 1, 0.0, true, &[], (0.4, 12.0), (-0.2, 18.0));
        let _ = (g, h, i, j, k, l, m, n);
        t
    }

    #[test]
    fn tree_shap_equals_the_shapley_values_by_enumeration() {
        let t = tree();
        let trees = [t.clone()];
        let shap = TreeShap::new(&trees, 1, 4);
        let rows = [
            [0.2f32, 1.0, 1.0, 3.0],
            [-1.0, 2.0, 3.0, 1.0],
            [0.9, f32::NAN, 2.0, -2.0],
            [f32::NAN, 0.5, f32::NAN, f32::NAN],
            [0.6, -0.3, 1.0, 0.5],
        ];
        for x in rows {
            let mut out = vec![0f32; shap.width()];
            shap.row(&x, &[0.25], &mut out);
            let want = brute_force(&t, &x);
            for (f, (&got, want)) in out.iter().zip(&want).enumerate() {
                assert!((got as f64 - want).abs() < 1e-5, "row {x:?} feature {f}: {got} against {want}");
            }
            // The values and the bias sum to the row's margin.
            let margin = 0.25 + t.value[t.leaf_of(|f| x[f]) as usize] as f64;
            let sum: f64 = out.iter().map(|&v| v as f64).sum();
            assert!((sum - margin).abs() < 1e-5, "row {x:?}: sum {sum}, margin {margin}");
        }
    }

    /// SHAP interaction values by enumeration: the Shapley interaction index off the
    /// diagonal, and each feature's SHAP value less its interactions on it.
    fn brute_force_interactions(tree: &Tree, x: &[f32]) -> Vec<Vec<f64>> {
        let m = x.len();
        let fact = |n: usize| (1..=n).product::<usize>() as f64;
        let f = |s: u32| conditional(tree, 0, x, s);
        let mut out = vec![vec![0.0; m]; m];
        for (i, row) in out.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate().filter(|&(j, _)| j != i) {
                for s in 0u32..(1 << m) {
                    if s & (1 << i) != 0 || s & (1 << j) != 0 {
                        continue;
                    }
                    let size = s.count_ones() as usize;
                    let w = fact(size) * fact(m - size - 2) / (2.0 * fact(m - 1));
                    *cell += w * (f(s | 1 << i | 1 << j) - f(s | 1 << i) - f(s | 1 << j) + f(s));
                }
            }
        }
        let phi = brute_force(tree, x);
        for i in 0..m {
            out[i][i] = phi[i] - (0..m).filter(|&j| j != i).map(|j| out[i][j]).sum::<f64>();
        }
        out
    }

    #[test]
    fn interaction_values_equal_the_shapley_interaction_index_by_enumeration() {
        let t = tree();
        let trees = [t.clone()];
        let shap = TreeShap::new(&trees, 1, 4);
        for x in [[0.2f32, 1.0, 1.0, 3.0], [-1.0, 2.0, 3.0, 1.0], [0.9, f32::NAN, 2.0, -2.0], [0.6, -0.3, 1.0, 0.5]] {
            let mut out = vec![0f32; shap.interaction_width()];
            shap.interactions(&x, &[0.25], &mut out);
            let want = brute_force_interactions(&t, &x);
            for i in 0..4 {
                for j in 0..4 {
                    let got = out[i * 5 + j] as f64;
                    assert!((got - want[i][j]).abs() < 1e-5, "row {x:?} ({i}, {j}): {got} against {}", want[i][j]);
                }
                assert_eq!(out[i * 5 + 4], 0.0);
            }
            // The bias sits at the corner; everything sums to the margin.
            let margin = 0.25 + t.value[t.leaf_of(|f| x[f]) as usize] as f64;
            assert!((out[24] as f64 - (0.25 + expected_value(&t))).abs() < 1e-5);
            let sum: f64 = out.iter().map(|&v| v as f64).sum();
            assert!((sum - margin).abs() < 1e-5, "row {x:?}: sum {sum}, margin {margin}");
        }
    }

    #[test]
    fn a_branch_without_cover_adds_nothing_undefined() {
        // An imported tree may hold a child no training row reached (cover 0): for rows that
        // do not go there, the step is 0 known and 0 unknown, which once divided 0 by 0.
        let mut t = tree();
        t.cover[t.left[t.left[0] as usize] as usize] = 0.0;
        let trees = [t.clone()];
        let shap = TreeShap::new(&trees, 1, 4);
        for x in [[0.2f32, 1.0, 1.0, 3.0], [-1.0, 2.0, 3.0, 1.0], [0.9, f32::NAN, 2.0, -2.0]] {
            let mut out = vec![0f32; shap.width()];
            shap.row(&x, &[0.0], &mut out);
            let want = brute_force(&t, &x);
            for (f, (&got, want)) in out.iter().zip(&want).enumerate() {
                assert!((got as f64 - want).abs() < 1e-5, "row {x:?} feature {f}: {got} against {want}");
            }
            let mut inter = vec![0f32; shap.interaction_width()];
            shap.interactions(&x, &[0.0], &mut inter);
            assert!(inter.iter().all(|v| v.is_finite()), "row {x:?}: {inter:?}");
        }
    }

    #[test]
    fn outputs_take_their_own_trees_and_the_bias_is_the_expected_margin() {
        let t = tree();
        let trees = [t.clone(), Tree::leaf(0.5, 100.0), t.clone(), Tree::leaf(-0.5, 100.0)];
        let shap = TreeShap::new(&trees, 2, 4);
        let mut out = vec![0f32; shap.width()];
        shap.row(&[0.2, 1.0, 1.0, 3.0], &[1.0, 2.0], &mut out);
        let (first, second) = out.split_at(5);
        // Output 0 has the tree twice, output 1 two constant leaves.
        let mut once = vec![0f32; 5];
        TreeShap::new(&trees[..1], 1, 4).row(&[0.2, 1.0, 1.0, 3.0], &[0.0], &mut once);
        for f in 0..4 {
            assert!((first[f] - 2.0 * once[f]).abs() < 1e-5);
            assert_eq!(second[f], 0.0);
        }
        assert!((first[4] - (1.0 + 2.0 * once[4])).abs() < 1e-5);
        assert!((second[4] - 2.0).abs() < 1e-6);
        let expected = expected_value(&t);
        assert!((once[4] as f64 - expected).abs() < 1e-6);
    }
}
