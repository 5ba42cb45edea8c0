//! The contract between the growth driver and a backend: the steps a backend implements over
//! its own memory ([`GrowSteps`]), the open nodes it evaluates ([`Open`]) and the expansions
//! whose rows it routes ([`Expansion`]).

use super::constraints::NodeLimits;
use super::context::TreeContext;
use super::gradient::GradSum;
use super::split::SplitCandidate;
use super::Tree;
use crate::error::Result;

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
    pub(super) fn new(
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
pub(super) type ChildSums = (GradSum, Vec<GradSum>);

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
/// over its own memory; [`grow_tree`](super::grow_tree) calls them.
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
