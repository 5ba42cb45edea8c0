//! The step both growth policies repeat (depth-wise in `grow`, loss-guided in `lossguide`):
//! expanding open nodes. Their splits are written into the trees, the backend routes their
//! rows and builds their children's histograms, and the children are evaluated; those with a
//! split stay open.

use super::constraints::NodeLimits;
use super::context::TreeContext;
use super::gradient::GradSum;
use super::model::SplitSpec;
use super::steps::{ChildSums, Expansion, GrowSteps, Open};
use super::Tree;
use crate::data::FeatureCuts;
use crate::error::Result;
use crate::random::hash64;

/// A vector-leaf split's bounds of each output, in its left and right child.
type OutputLimits = [Vec<NodeLimits>; 2];

/// What a split's children start from: their ids, path keys, limits and output bounds.
type ChildNodes = ([u32; 2], [u64; 2], [NodeLimits; 2], OutputLimits);

/// The root as an open node, evaluated, when it may split (else nothing is open).
pub(super) fn open_root<S: GrowSteps>(
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
