//! Growing one tree on the CPU. The driver reads like the algorithm:
//!
//! ```text
//! root: histogram, best split
//! loop: pick nodes to expand (a whole level, or the single best leaf)
//!       split them: partition their rows
//!       children: build the smaller child's histogram, subtract for the sibling
//!       evaluate the children's best splits
//! ```
//!
//! Children at the depth limit get no histogram at all: their values come from the split's
//! left and right sums.

use std::sync::Mutex;

use rayon::prelude::*;

use super::histogram::{add_histogram, build_histograms, subtract, HistLayout, HistTask};
use super::partition::{RowPartition, RowRouter, SplitJob};
use super::prefetch_read;
use crate::config::GrowPolicy;
use crate::data::binned::BinData;
use crate::data::{BinnedMatrix, FeatureCuts};
use crate::random::{hash64, Rng};
use crate::tree::gradient::QuantGrad;
use crate::tree::model::SplitSpec;
use crate::tree::split::{SplitCandidate, SplitScorer};
use crate::tree::{GradSum, Quantiser, SplitParams, Tree};

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
}

impl GrowParams {
    /// A leaf's output for the gradient sum `total` (learning rate applied).
    pub fn leaf_value(&self, quantiser: &Quantiser, total: GradSum) -> f32 {
        let (g, h) = quantiser.to_float(total);
        (self.split.weight(g, h) * self.learning_rate) as f32
    }

    pub fn can_split_at(&self, depth: usize) -> bool {
        self.max_depth == 0 || depth < self.max_depth
    }

    /// Features node `node` at `depth` may split on: the tree's, sampled per level, then per
    /// node, keyed by the tree's seed (every backend draws the same features).
    pub fn node_features(&self, tree_features: &[u32], seed: u64, depth: usize, node: u32) -> Vec<u32> {
        let mut feats = tree_features.to_vec();
        if self.colsample_bylevel < 1.0 {
            let k = ((feats.len() as f64 * self.colsample_bylevel).round() as usize).max(1);
            feats = Rng::new(seed, hash64(1, depth as u64)).choose_sorted(&feats, k);
        }
        if self.colsample_bynode < 1.0 {
            let k = ((feats.len() as f64 * self.colsample_bynode).round() as usize).max(1);
            feats = Rng::new(seed, hash64(2, node as u64)).choose_sorted(&feats, k);
        }
        feats
    }

    /// Whether every node may split on every feature of the tree.
    pub fn samples_nodes(&self) -> bool {
        self.colsample_bylevel < 1.0 || self.colsample_bynode < 1.0
    }
}

/// A grown tree and where its training rows ended up.
pub struct GrownTree {
    pub tree: Tree,
    pub partition: RowPartition,
}

/// A leaf that may still be split.
struct Candidate {
    node: u32,
    depth: usize,
    total: GradSum,
    hist: Option<Vec<GradSum>>,
    best: Option<SplitCandidate>,
}

struct Grower<'a> {
    binned: &'a BinnedMatrix,
    cuts: &'a [FeatureCuts],
    grads: &'a [QuantGrad],
    quantiser: &'a Quantiser,
    params: &'a GrowParams,
    layout: HistLayout,
    tree_features: Vec<u32>,
    seed: u64,
}

/// Grows one tree over `rows` (sorted) using the features `tree_features` (sorted).
#[allow(clippy::too_many_arguments)]
pub fn grow_tree(
    binned: &BinnedMatrix,
    cuts: &[FeatureCuts],
    grads: &[QuantGrad],
    quantiser: &Quantiser,
    params: &GrowParams,
    rows: Vec<u32>,
    tree_features: Vec<u32>,
    seed: u64,
) -> GrownTree {
    let g = Grower { binned, cuts, grads, quantiser, params, layout: HistLayout::new(binned), tree_features, seed };
    g.grow(rows)
}

impl Grower<'_> {
    fn leaf_value(&self, total: GradSum) -> f32 {
        self.params.leaf_value(self.quantiser, total)
    }

    fn can_split_at(&self, depth: usize) -> bool {
        self.params.can_split_at(depth)
    }

    fn node_features(&self, depth: usize, node: u32) -> Vec<u32> {
        self.params.node_features(&self.tree_features, self.seed, depth, node)
    }

    fn grow(&self, rows: Vec<u32>) -> GrownTree {
        let mut partition = RowPartition::new(rows);
        let total = partition
            .rows
            .par_iter()
            .fold(GradSum::default, |mut s, &r| {
                s += self.grads[r as usize];
                s
            })
            .reduce(GradSum::default, |a, b| a + b);
        let (_, h) = self.quantiser.to_float(total);
        let mut tree = Tree::leaf(self.leaf_value(total), h as f32);
        let mut root = Candidate { node: 0, depth: 0, total, hist: None, best: None };
        if self.can_split_at(0) {
            let mut hist = vec![GradSum::default(); self.layout.total_slots()];
            build_histograms(
                self.binned,
                &self.layout,
                self.grads,
                &self.tree_features,
                vec![HistTask { rows: partition.rows_of(0), hist: &mut hist }],
            );
            root.hist = Some(hist);
            self.evaluate(std::slice::from_mut(&mut root));
        }
        let mut open: Vec<Candidate> = if root.best.is_some() { vec![root] } else { Vec::new() };
        let mut n_leaves = 1;
        while !open.is_empty() {
            // Pick what to expand: a whole level, or the single most promising leaf.
            let batch = next_batch(&mut open, self.params.policy, |c| (gain_of(c), c.node));
            let mut expanding = Vec::new();
            for c in batch {
                if self.params.max_leaves == 0 || n_leaves < self.params.max_leaves {
                    n_leaves += 1;
                    expanding.push(c);
                }
            }
            if expanding.is_empty() {
                break;
            }
            open.extend(self.expand(&mut tree, &mut partition, expanding));
        }
        GrownTree { tree, partition }
    }

    /// Applies the chosen splits, then builds and evaluates the children.
    fn expand(&self, tree: &mut Tree, partition: &mut RowPartition, parents: Vec<Candidate>) -> Vec<Candidate> {
        let mut children = Vec::with_capacity(parents.len() * 2);
        let mut jobs = Vec::with_capacity(parents.len());
        for p in &parents {
            let best = p.best.as_ref().unwrap();
            let cut = &self.cuts[best.feature as usize];
            let spec = SplitSpec {
                feature: best.feature,
                threshold: if best.is_categorical() { 0.0 } else { cut.upper_bound(best.split_bin) },
                split_bin: best.split_bin,
                default_left: best.default_left,
                left_categories: &best.left_categories,
                gain: best.gain as f32,
            };
            let cover = |s: GradSum| self.quantiser.to_float(s).1 as f32;
            let (l, r) = tree.split(
                p.node,
                &spec,
                (self.leaf_value(best.left), cover(best.left)),
                (self.leaf_value(best.right), cover(best.right)),
            );
            jobs.push((p.node, l, r, best.feature as usize));
            children.push(Candidate { node: l, depth: p.depth + 1, total: best.left, hist: None, best: None });
            children.push(Candidate { node: r, depth: p.depth + 1, total: best.right, hist: None, best: None });
        }
        // Children that may split get histograms: the smaller one (by hessian, a proxy for its
        // row count known before partitioning) is built from its rows while the partition has
        // them in cache; its sibling is the parent's minus it (exact: integer sums).
        let small_left: Vec<Option<bool>> = parents
            .iter()
            .map(|p| {
                let best = p.best.as_ref().unwrap();
                self.can_split_at(p.depth + 1).then_some(best.left.h <= best.right.h)
            })
            .collect();
        let small_hists: Vec<Option<Mutex<Vec<GradSum>>>> = small_left
            .iter()
            .map(|s| s.map(|_| Mutex::new(vec![GradSum::default(); self.layout.total_slots()])))
            .collect();
        let observe = |k: usize, left: &[u32], right: &[u32]| {
            let (Some(is_left), Some(total)) = (small_left[k], &small_hists[k]) else { return };
            let rows = if is_left { left } else { right };
            let mut hist = vec![GradSum::default(); self.layout.total_slots()];
            add_histogram(self.binned, &self.layout, self.grads, &self.tree_features, rows, &mut hist);
            let mut total = total.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            total.iter_mut().zip(hist).for_each(|(t, h)| *t += h);
        };
        match &self.binned.data {
            BinData::U8 { rows } => split_all(partition, tree, self.binned, rows, &jobs, observe),
            BinData::U16 { rows } => split_all(partition, tree, self.binned, rows, &jobs, observe),
        }
        for (k, small_hist) in small_hists.into_iter().enumerate() {
            let (Some(is_left), Some(small_hist)) = (small_left[k], small_hist) else { continue };
            let small_hist = small_hist.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
            let parent_hist = parents[k].hist.as_ref().expect("expanded nodes have histograms");
            let mut sibling = vec![GradSum::default(); self.layout.total_slots()];
            subtract(parent_hist, &small_hist, &mut sibling);
            let (small, large) = if is_left { (2 * k, 2 * k + 1) } else { (2 * k + 1, 2 * k) };
            children[small].hist = Some(small_hist);
            children[large].hist = Some(sibling);
        }
        let mut with_hist: Vec<Candidate> = children.into_iter().filter(|c| c.hist.is_some()).collect();
        self.evaluate(&mut with_hist);
        // Children with no valid split are final leaves.
        with_hist.into_iter().filter(|c| c.best.is_some()).collect()
    }

    /// Finds each candidate's best split, in parallel over (candidate, feature).
    fn evaluate(&self, candidates: &mut [Candidate]) {
        let jobs: Vec<(usize, u32)> = candidates
            .iter()
            .enumerate()
            .flat_map(|(i, c)| self.node_features(c.depth, c.node).into_iter().map(move |f| (i, f)))
            .collect();
        let found: Vec<(usize, Option<SplitCandidate>)> = jobs
            .par_iter()
            .map(|&(i, f)| {
                let c = &candidates[i];
                let hist = self.layout.feature(c.hist.as_ref().unwrap(), f as usize);
                let scorer = SplitScorer::new(&self.params.split, self.quantiser, c.total);
                let best = if self.cuts[f as usize].is_categorical() {
                    scorer.best_categorical(f, hist)
                } else {
                    scorer.best_numeric(f, hist)
                };
                (i, best)
            })
            .collect();
        // Jobs are in (candidate, feature) order, so ties go to the lowest feature index.
        for (i, best) in found {
            if let Some(b) = best {
                let c = &mut candidates[i];
                if c.best.as_ref().is_none_or(|cur| b.gain > cur.gain) {
                    c.best = Some(b);
                }
            }
        }
    }
}

/// Splits `jobs` (node, left, right, feature) with one router type per bin width, so the row
/// loop reads bins without a match.
fn split_all<B, F>(
    partition: &mut RowPartition,
    tree: &Tree,
    binned: &BinnedMatrix,
    bins: &[B],
    jobs: &[(u32, u32, u32, usize)],
    observe: F,
) where
    B: Copy + Into<u32> + Sync,
    F: Fn(usize, &[u32], &[u32]) + Sync,
{
    let jobs = jobs
        .iter()
        .map(|&(node, left, right, f)| SplitJob {
            node,
            left,
            right,
            router: BinRouter::new(tree, node, binned, bins, f),
        })
        .collect();
    partition.split_observed(jobs, observe)
}

/// Routes rows by one split, reading the split feature's bins (a strided walk of the
/// row-major matrix).
struct BinRouter<'a, B> {
    /// The bins from the split feature's first value on: row `r`'s is `bins[r * stride]`.
    bins: &'a [B],
    stride: usize,
    missing: u32,
    split_bin: u32,
    default_left: bool,
    /// The left-going category bitset of a categorical split.
    categories: Option<&'a [u32]>,
}

impl<'a, B> BinRouter<'a, B> {
    fn new(tree: &'a Tree, node: u32, binned: &BinnedMatrix, bins: &'a [B], feature: usize) -> Self {
        let n = node as usize;
        let categories = tree.is_categorical(node).then(|| {
            let start = tree.category_start[n] as usize;
            &tree.category_words[start..start + tree.category_len[n] as usize]
        });
        BinRouter {
            bins: &bins[feature..],
            stride: binned.n_features(),
            missing: binned.n_bins[feature],
            split_bin: tree.split_bin[n],
            default_left: tree.default_left[n],
            categories,
        }
    }
}

impl<B: Copy + Into<u32> + Sync> RowRouter for BinRouter<'_, B> {
    #[inline]
    fn goes_left(&self, row: u32) -> bool {
        let bin: u32 = self.bins[row as usize * self.stride].into();
        if bin == self.missing {
            self.default_left
        } else if let Some(words) = self.categories {
            words.get(bin as usize / 32).is_some_and(|w| w & (1 << (bin % 32)) != 0)
        } else {
            bin <= self.split_bin
        }
    }

    #[inline]
    fn prefetch(&self, row: u32) {
        if let Some(b) = self.bins.get(row as usize * self.stride) {
            prefetch_read(b);
        }
    }
}

fn gain_of(c: &Candidate) -> f64 {
    c.best.as_ref().map_or(f64::NEG_INFINITY, |b| b.gain)
}

/// What to expand next, taken out of `open`: the whole level, best first (depth-wise), or
/// the single most promising leaf (loss-guided). `key` gives a leaf's (gain, node id); ties
/// go to the lower id. Both backends expand in this order, so `max_leaves` cuts the same nodes.
pub fn next_batch<T>(open: &mut Vec<T>, policy: GrowPolicy, key: impl Fn(&T) -> (f64, u32)) -> Vec<T> {
    let order = |a: &T, b: &T| {
        let ((ga, na), (gb, nb)) = (key(a), key(b));
        gb.total_cmp(&ga).then(na.cmp(&nb))
    };
    match policy {
        GrowPolicy::Depthwise => {
            let mut level = std::mem::take(open);
            level.sort_by(order);
            level
        }
        GrowPolicy::Lossguide => {
            let best = (0..open.len()).min_by(|&i, &j| order(&open[i], &open[j])).unwrap();
            vec![open.swap_remove(best)]
        }
    }
}
