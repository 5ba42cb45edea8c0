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
//! Everything that decides the tree's shape lives in the driver or in [`super::split`], so
//! every backend grows the same tree from the same integer gradients. A collective (several
//! devices or workers) wraps a backend's steps, summing histograms, without another copy of
//! this loop.
//!
//! The driver's parts: what a tree grows from ([`TreeContext`], in `context`), what a backend
//! implements ([`GrowSteps`], in `steps`), the expansion both policies repeat (`expand`) and
//! loss-guided growth (`lossguide`); depth-wise growth is here. This module re-exports the
//! first two, so that a backend finds the whole contract in one place.

use super::constraints::NodeLimits;
use super::expand::{expand, open_root};
use super::gradient::GradSum;
use super::Tree;
use crate::data::FeatureCuts;
use crate::error::Result;

pub use super::context::{GrowParams, GrowPolicy, TreeContext, MAX_GROWN_DEPTH};
pub use super::steps::{Expansion, GrowSteps, Open};

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
