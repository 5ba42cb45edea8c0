//! The growth driver: how one tree grows, written once for every backend. A backend supplies
//! the steps that touch rows and histograms ([`GrowSteps`]); the driver decides what to grow:
//!
//! ```text
//! root:  histogram, best split
//! loop:  pop what to expand (a whole level, or the best leaves: see `tree::lossguide`),
//!        within max_leaves
//!        apply the splits to the tree (thresholds, covers, leaf values)
//!        partition the rows and build the children's histograms
//!        evaluate the children's best splits, push those that can split
//! ```
//!
//! Constraints (monotone, interaction) act here and in the split search, through each node's
//! [`NodeLimits`]: its weight bounds and the features its path has used.
//!
//! Everything that decides the tree's shape lives here or in [`super::split`], so every
//! backend grows the same tree from the same integer gradients. A collective (several devices
//! or workers) wraps a backend's steps, summing histograms, without another copy of this loop.

use serde::{Deserialize, Serialize};

use super::constraints::{Constraints, NodeLimits};
use super::gradient::{GradSum, Quantiser, Weighting};
use super::model::SplitSpec;
use super::split::{SplitCandidate, SplitParams};
use super::Tree;
use crate::data::FeatureCuts;
use crate::error::Result;
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
    /// Features the node of path key `key` ([`Open::key`]) at `depth`, within `limits`, may
    /// split on: the tree's, sampled per level, then per node, keyed by the tree's seed (every
    /// backend draws the same features), then those the interaction constraints allow after
    /// the node's path.
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
    fn output(&self, weight: f64) -> f32 {
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

/// A leaf that may still split: where it is in the tree, its gradient sum, what the splits
/// above it allow, its best split once evaluated, and the backend's handle on its rows and
/// histogram.
pub struct Open<N> {
    pub node: u32,
    /// Where the node is, as a key of its path from the root (0 for the root): what per-node
    /// column sampling draws from, so that the order nodes are expanded in cannot change it.
    pub key: u64,
    pub depth: usize,
    pub total: GradSum,
    /// A vector-leaf node's sums of each output (`total` is then unused); empty for a scalar tree.
    pub sums: Vec<GradSum>,
    /// What the splits above allow the node; a vector-leaf node's weight bounds are each
    /// output's, in `output_limits` (its `limits` then carry the path alone).
    pub limits: NodeLimits,
    /// A vector-leaf node's weight bounds of each output; empty for a scalar tree.
    pub output_limits: Vec<NodeLimits>,
    pub best: Option<SplitCandidate>,
    pub state: N,
}

impl<N> Open<N> {
    fn new(
        node: u32,
        key: u64,
        depth: usize,
        sums: ChildSums,
        limits: (NodeLimits, Vec<NodeLimits>),
        state: N,
    ) -> Self {
        let ((total, sums), (limits, output_limits)) = (sums, limits);
        Open { node, key, depth, total, sums, limits, output_limits, best: None, state }
    }

    pub(super) fn gain(&self) -> f64 {
        self.best.as_ref().map_or(f64::NEG_INFINITY, |b| b.gain)
    }
}

/// A node's gradient sum and, for a vector-leaf node, each output's.
type ChildSums = (GradSum, Vec<GradSum>);

/// A vector-leaf split's bounds of each output, in its left and right child.
type OutputLimits = [Vec<NodeLimits>; 2];

/// What a split's children start from: their ids, path keys, limits and output bounds.
type ChildNodes = ([u32; 2], [u64; 2], [NodeLimits; 2], OutputLimits);

/// A split applied to the tree, whose rows the backend now routes to `children`.
pub struct Expansion<N> {
    pub node: u32,
    /// The node's path key ([`Open::key`]).
    pub key: u64,
    pub depth: usize,
    pub split: SplitCandidate,
    /// Left and right child ids.
    pub children: [u32; 2],
    /// Whether the children may split in turn, and so need histograms.
    pub grow_children: bool,
    /// What the split leaves each child.
    pub child_limits: [NodeLimits; 2],
    /// The parent's handle, handed back to the backend.
    pub state: N,
}

/// The steps of growing a tree that touch rows and histograms. A backend implements them
/// over its own memory; [`grow_tree`] calls them.
pub trait GrowSteps {
    /// A node's rows and histogram as the backend holds them (host vectors, device slots).
    type Node;

    /// The root's histogram, over the tree's rows.
    fn build_root(&mut self, ctx: &TreeContext) -> Result<Self::Node>;

    /// Each node's best split (`best`, None when no split qualifies), over the features
    /// `ctx.node_features` allows it, scored within its limits; ties go to the lowest feature.
    fn evaluate(&mut self, nodes: &mut [Open<Self::Node>], ctx: &TreeContext) -> Result<()>;

    /// Routes each expansion's rows to its children (the splits are already in `tree`), and
    /// builds both children's histograms where `grow_children`: `Some([left, right])` there,
    /// `None` elsewhere, in the order of `expansions`. The parents' handles are consumed.
    fn partition_and_build(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<Self::Node>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[Self::Node; 2]>>>;

    /// A node that will not be split after all: its histogram may be reused.
    fn discard(&mut self, node: Self::Node);

    /// The grown tree was renumbered (loss-guided growth expands nodes out of the final
    /// order): node `n` of the tree the steps saw is node `ids[n]` of the final tree
    /// ([`NO_CHILD`](super::NO_CHILD): not in it). The final leaves `merged` were split among
    /// children the final tree does not keep; their rows are theirs again.
    fn renumber(&mut self, ids: &[u32], merged: &[u32]) -> Result<()>;

    /// A copy of a node's histogram on the host (for diagnostics and tests).
    fn histogram(&mut self, node: &Self::Node) -> Result<Vec<GradSum>>;

    /// A node's rows, ascending (for diagnostics and tests).
    fn rows(&mut self, node: &Self::Node) -> Result<Vec<u32>>;
}

/// A borrowed backend's steps, so that a wrapper (a collective, a comparison) can hold it.
impl<S: GrowSteps + ?Sized> GrowSteps for &mut S {
    type Node = S::Node;

    fn build_root(&mut self, ctx: &TreeContext) -> Result<S::Node> {
        (**self).build_root(ctx)
    }

    fn evaluate(&mut self, nodes: &mut [Open<S::Node>], ctx: &TreeContext) -> Result<()> {
        (**self).evaluate(nodes, ctx)
    }

    fn partition_and_build(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<S::Node>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[S::Node; 2]>>> {
        (**self).partition_and_build(tree, expansions, ctx)
    }

    fn discard(&mut self, node: S::Node) {
        (**self).discard(node)
    }

    fn renumber(&mut self, ids: &[u32], merged: &[u32]) -> Result<()> {
        (**self).renumber(ids, merged)
    }

    fn histogram(&mut self, node: &S::Node) -> Result<Vec<GradSum>> {
        (**self).histogram(node)
    }

    fn rows(&mut self, node: &S::Node) -> Result<Vec<u32>> {
        (**self).rows(node)
    }
}

/// Grows one tree whose rows sum to `total`, with `steps` doing the work on rows.
pub fn grow_tree<S: GrowSteps>(steps: &mut S, ctx: &TreeContext, cuts: &[FeatureCuts], total: GradSum) -> Result<Tree> {
    grow_tree_in_batches(steps, ctx, cuts, total, LOSSGUIDE_BATCH)
}

/// Loss-guided growth expands at most this many leaves at once (see `tree::lossguide`):
/// a GPU then pays a round of launches and one synchronisation per batch, not per leaf.
/// Larger batches speculate more (2M x 28, 255 leaves, on an H100: 8, 16, 24, 32 and 64 took
/// 0.38, 0.31, 0.27, 0.28 and 0.26 s for 50 trees; 64 held 40% more device memory).
pub const LOSSGUIDE_BATCH: usize = 32;

/// [`grow_tree`], with loss-guided growth expanding at most `lossguide_batch` leaves at once.
/// Every batch size grows the same tree; 1 is the strict order, one leaf at a time.
pub fn grow_tree_in_batches<S: GrowSteps>(
    steps: &mut S,
    ctx: &TreeContext,
    cuts: &[FeatureCuts],
    total: GradSum,
    lossguide_batch: usize,
) -> Result<Tree> {
    let root_limits = NodeLimits::root();
    let tree = Tree::leaf(ctx.leaf_value(total, &root_limits), ctx.cover(total));
    let open = open_root(steps, ctx, (total, Vec::new()))?;
    if ctx.params.policy == GrowPolicy::Lossguide {
        let [tree] =
            <[Tree; 1]>::try_from(super::lossguide::grow(steps, ctx, cuts, vec![tree], open, lossguide_batch.max(1))?)
                .expect("one tree in, one out");
        return Ok(tree);
    }
    let mut trees = [tree];
    grow_depthwise(steps, &mut trees, open, cuts, ctx)?;
    let [tree] = trees;
    Ok(tree)
}

/// Grows one vector-leaf tree (`ctx.outputs` holds each output's quantiser) whose rows sum to
/// `sums` (one per output), depth-wise or loss-guided: the tree of each output, which share
/// every split and differ in their leaf values. Their covers are the node's hessian summed
/// over the outputs.
pub fn grow_vector_tree<S: GrowSteps>(
    steps: &mut S,
    ctx: &TreeContext,
    cuts: &[FeatureCuts],
    sums: Vec<GradSum>,
) -> Result<Vec<Tree>> {
    if !ctx.is_vector() || sums.len() != ctx.outputs.len() {
        return Err(crate::error::Error::param(
            "multi_strategy",
            "\"multi_output_tree\" grows a tree from one quantiser and one sum per output",
        ));
    }
    let cover = ctx.vector_cover(&sums);
    let root_limits = vec![NodeLimits::root(); sums.len()];
    let weights = ctx.vector_weights(&sums, &root_limits);
    let mut trees: Vec<Tree> = weights.into_iter().map(|w| Tree::leaf(ctx.output(w), cover)).collect();
    let open = open_root(steps, ctx, (GradSum::default(), sums))?;
    if ctx.params.policy == GrowPolicy::Lossguide {
        return super::lossguide::grow(steps, ctx, cuts, trees, open, LOSSGUIDE_BATCH);
    }
    grow_depthwise(steps, &mut trees, open, cuts, ctx)?;
    Ok(trees)
}

/// The root as an open node, evaluated, when it may split (else nothing is open).
fn open_root<S: GrowSteps>(
    steps: &mut S,
    ctx: &TreeContext,
    sums: (GradSum, Vec<GradSum>),
) -> Result<Vec<Open<S::Node>>> {
    if !ctx.params.can_split_at(0) {
        return Ok(Vec::new());
    }
    let output_limits = vec![NodeLimits::root(); sums.1.len()];
    let root = Open::new(0, 0, 0, sums, (NodeLimits::root(), output_limits), steps.build_root(ctx)?);
    evaluate_splittable(steps, vec![root], ctx)
}

/// Depth-wise growth of `trees` (one scalar tree, or a vector-leaf tree's one per output,
/// which share their structure) from the open nodes `open`: a whole level at a time, best
/// first, so that `max_leaves` cuts the same nodes on every backend.
fn grow_depthwise<S: GrowSteps>(
    steps: &mut S,
    trees: &mut [Tree],
    mut open: Vec<Open<S::Node>>,
    cuts: &[FeatureCuts],
    ctx: &TreeContext,
) -> Result<()> {
    let params = ctx.params;
    let mut n_leaves = 1;
    while !open.is_empty() {
        let mut level = std::mem::take(&mut open);
        level.sort_by(|a, b| b.gain().total_cmp(&a.gain()).then(a.node.cmp(&b.node)));
        let room = if params.max_leaves == 0 { level.len() } else { params.max_leaves - n_leaves };
        for o in level.drain(room.min(level.len())..) {
            steps.discard(o.state);
        }
        if level.is_empty() {
            break;
        }
        n_leaves += level.len();
        open = expand(steps, trees, level, cuts, ctx)?;
    }
    for o in open {
        steps.discard(o.state);
    }
    Ok(())
}

/// Expands `nodes` (each with its best split) in `trees` (one scalar tree, or a vector-leaf
/// tree's one per output): writes their splits, has the backend route their rows (by the
/// first tree: all share their splits) and build their children's histograms, and evaluates
/// the children. Returns the children that can split in turn.
pub(super) fn expand<S: GrowSteps>(
    steps: &mut S,
    trees: &mut [Tree],
    nodes: Vec<Open<S::Node>>,
    cuts: &[FeatureCuts],
    ctx: &TreeContext,
) -> Result<Vec<Open<S::Node>>> {
    let (expansions, output_limits): (Vec<Expansion<S::Node>>, Vec<OutputLimits>) =
        nodes.into_iter().map(|o| apply_split(trees, o, cuts, ctx)).unzip();
    let sums: Vec<(usize, ChildSums, ChildSums)> = expansions
        .iter()
        .map(|e| {
            let s = &e.split;
            (e.depth + 1, (s.left, s.left_sums.clone()), (s.right, s.right_sums.clone()))
        })
        .collect();
    let children_nodes: Vec<ChildNodes> = expansions
        .iter()
        .zip(output_limits)
        .map(|(e, outputs)| (e.children, child_keys(e.key), e.child_limits.clone(), outputs))
        .collect();
    let built = steps.partition_and_build(&trees[0], expansions, ctx)?;
    let mut children = Vec::new();
    for ((states, (depth, left, right)), ([l, r], [lk, rk], [ll, rl], [lo, ro])) in
        built.into_iter().zip(sums).zip(children_nodes)
    {
        if let Some([ls, rs]) = states {
            children.push(Open::new(l, lk, depth, left, (ll, lo), ls));
            children.push(Open::new(r, rk, depth, right, (rl, ro), rs));
        }
    }
    evaluate_splittable(steps, children, ctx)
}

/// Evaluates `nodes` and keeps those with a split; the others are final leaves.
fn evaluate_splittable<S: GrowSteps>(
    steps: &mut S,
    mut nodes: Vec<Open<S::Node>>,
    ctx: &TreeContext,
) -> Result<Vec<Open<S::Node>>> {
    if nodes.is_empty() {
        return Ok(nodes);
    }
    steps.evaluate(&mut nodes, ctx)?;
    let mut keep = Vec::with_capacity(nodes.len());
    for o in nodes {
        if o.best.is_some() {
            keep.push(o);
        } else {
            steps.discard(o.state);
        }
    }
    Ok(keep)
}

/// Writes `o`'s best split into the trees: threshold from the cut points, children's values
/// (within `o`'s bounds; each output's in its own tree) and covers from the split's sums.
/// Returns the expansion and, for a vector-leaf node, each output's bounds in each child.
fn apply_split<N>(
    trees: &mut [Tree],
    o: Open<N>,
    cuts: &[FeatureCuts],
    ctx: &TreeContext,
) -> (Expansion<N>, OutputLimits) {
    let split = o.best.expect("only nodes with a split are expanded");
    let p = ctx.params;
    let (left_weights, right_weights, covers) = if ctx.is_vector() {
        let covers = (ctx.vector_cover(&split.left_sums), ctx.vector_cover(&split.right_sums));
        let limits = &o.output_limits;
        (ctx.vector_weights(&split.left_sums, limits), ctx.vector_weights(&split.right_sums, limits), covers)
    } else {
        let left = p.leaf_weight(&ctx.quantiser, split.left, &o.limits);
        let right = p.leaf_weight(&ctx.quantiser, split.right, &o.limits);
        (vec![left], vec![right], (ctx.cover(split.left), ctx.cover(split.right)))
    };
    // A vector-leaf node's shared limits carry the path (their bounds are output 0's, and
    // unread); each output's bounds split at the midpoint of that output's two weights.
    let child_limits = o.limits.children(&p.constraints, split.feature, left_weights[0], right_weights[0]);
    let (mut left_outputs, mut right_outputs) = (Vec::new(), Vec::new());
    for ((limits, &lw), &rw) in o.output_limits.iter().zip(&left_weights).zip(&right_weights) {
        let [l, r] = limits.children(&p.constraints, split.feature, lw, rw);
        left_outputs.push(l);
        right_outputs.push(r);
    }
    let spec = SplitSpec {
        feature: split.feature,
        threshold: if split.is_categorical() { 0.0 } else { cuts[split.feature as usize].upper_bound(split.split_bin) },
        split_bin: split.split_bin,
        default_left: split.default_left,
        left_categories: &split.left_categories,
        gain: split.gain as f32,
    };
    let mut children = (0, 0);
    for ((tree, &lw), &rw) in trees.iter_mut().zip(&left_weights).zip(&right_weights) {
        children = tree.split(o.node, &spec, (ctx.output(lw), covers.0), (ctx.output(rw), covers.1));
    }
    let (l, r) = children;
    let expansion = Expansion {
        node: o.node,
        key: o.key,
        depth: o.depth,
        grow_children: p.can_split_at(o.depth + 1),
        child_limits,
        split,
        children: [l, r],
        state: o.state,
    };
    (expansion, [left_outputs, right_outputs])
}

/// The path keys ([`Open::key`]) of a node's left and right children.
fn child_keys(key: u64) -> [u64; 2] {
    [hash64(key, 1), hash64(key, 2)]
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
