//! The host's split search over a tree's open nodes: each node's best split across the
//! features it may use, searched in parallel over (node, feature). The CPU's steps and the
//! vector-leaf search (on either backend) evaluate their nodes through it.

use rayon::prelude::*;

use super::context::TreeContext;
use super::split::SplitCandidate;
use super::steps::Open;

/// Each node's best split (None where none qualifies) over the features `ctx.node_features`
/// allows it, `search(i, f)` being node i's best on feature f: in parallel over (node, feature),
/// ties to the lowest feature (a later feature wins only with a larger gain). The host's
/// searches (the CPU's, and the GPU's vector-leaf fallback) fan out here.
pub fn best_split_per_node<N: Sync>(
    nodes: &[Open<N>],
    ctx: &TreeContext,
    search: impl Fn(usize, u32) -> Option<SplitCandidate> + Sync,
) -> Vec<Option<SplitCandidate>> {
    let jobs: Vec<(usize, u32)> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, o)| ctx.node_features(o.depth, o.key, &o.limits).into_iter().map(move |f| (i, f)))
        .collect();
    let found: Vec<(usize, Option<SplitCandidate>)> = jobs.par_iter().map(|&(i, f)| (i, search(i, f))).collect();
    // Jobs are in (node, feature) order.
    let mut best: Vec<Option<SplitCandidate>> = (0..nodes.len()).map(|_| None).collect();
    for (i, candidate) in found {
        if let Some(c) = candidate {
            if best[i].as_ref().is_none_or(|cur| c.gain > cur.gain) {
                best[i] = Some(c);
            }
        }
    }
    best
}
