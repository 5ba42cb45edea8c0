//! Loss-guided growth in batches, giving the strict order's tree.
//!
//! The strict order splits one leaf at a time: the open leaf of largest gain (ties to the
//! lower node id), until `max_leaves`. A GPU then pays a round of launches and a
//! synchronisation per leaf, 254 of them for a tree of 255 leaves. Here the driver expands
//! several leaves at once, speculatively, and replays the strict order over the gains it
//! then knows:
//!
//! ```text
//! loop:  the strict order's next leaf: the best split among leaves whose parents are committed
//!        expanded already?  commit it; its children become candidates, with the next ids
//!        not yet?           plan a batch (below) and expand it
//! end:   the tree is rebuilt from the committed splits, in commit order
//! ```
//!
//! A batch is the strict order played forward over the gains known, within what is left of
//! `max_leaves`: every leaf not yet expanded that it reaches (an unexpanded leaf adds no
//! children, as its children's gains are unknown), up to [`LOSSGUIDE_BATCH`] of them. It
//! misses where children not yet evaluated outrank what it took.
//!
//! A leaf's rows, histogram, best split and children do not depend on when it is expanded
//! (column sampling is keyed by its path, not its id), so the replay makes the strict order's
//! choices and gives the strict order's ids: the tree is the strict tree, node for node. A
//! speculated split the strict order never reaches (`max_leaves` ran out first) is left out:
//! the node stays a leaf, and the backend is told its rows are its own again.
//!
//! [`LOSSGUIDE_BATCH`]: super::grow::LOSSGUIDE_BATCH

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::context::TreeContext;
use super::expand::expand;
use super::steps::{GrowSteps, Open};
use super::{Tree, NO_CHILD};
use crate::data::FeatureCuts;
use crate::error::Result;

/// What the driver knows of a node of the working tree (the one the backend sees).
#[derive(Clone, Default)]
struct Known {
    /// Its best split's gain, once evaluated; None while unevaluated or when it cannot split.
    gain: Option<f64>,
    /// Whether its split is in the working tree (and its rows routed to children).
    expanded: bool,
    /// Its id in the strict order: known once its parent's split is committed.
    strict: Option<u32>,
}

/// Grows the rest of a loss-guided tree: `trees` holds the root leaf (one scalar tree, or a
/// vector-leaf tree's one per output, which share their splits) and `open` the root, if it
/// can split. At most `max_batch` leaves are expanded at once.
pub(super) fn grow<S: GrowSteps>(
    steps: &mut S,
    ctx: &TreeContext,
    cuts: &[FeatureCuts],
    mut trees: Vec<Tree>,
    mut open: Vec<Open<S::Node>>,
    max_batch: usize,
) -> Result<Vec<Tree>> {
    let max_leaves = ctx.params.max_leaves;
    let mut known = vec![Known { strict: Some(0), ..Known::default() }];
    for o in &open {
        known[o.node as usize].gain = Some(o.gain());
    }
    // Leaves whose parents are committed and that can split: where the strict order looks.
    let mut frontier: Vec<u32> = open.iter().map(|o| o.node).collect();
    let mut committed: Vec<u32> = Vec::new();
    let (mut n_leaves, mut next_id) = (1usize, 1u32);
    while let Some(i) = strict_next(&frontier, &known) {
        if max_leaves != 0 && n_leaves >= max_leaves {
            break;
        }
        let w = frontier[i] as usize;
        if !known[w].expanded {
            let budget = if max_leaves == 0 { usize::MAX } else { max_leaves - n_leaves };
            for n in plan_batch(w as u32, &frontier, &known, &trees[0], budget, max_batch) {
                known[n as usize].expanded = true;
            }
            let (batch, rest): (Vec<_>, Vec<_>) = open.into_iter().partition(|o| known[o.node as usize].expanded);
            open = rest;
            let children = expand(steps, &mut trees, batch, cuts, ctx)?;
            known.resize(trees[0].n_nodes(), Known::default());
            for c in &children {
                known[c.node as usize].gain = Some(c.gain());
            }
            open.extend(children);
            continue;
        }
        frontier.swap_remove(i);
        committed.push(w as u32);
        n_leaves += 1;
        for c in [trees[0].left[w], trees[0].right[w]] {
            let c = c as usize;
            known[c].strict = Some(next_id);
            next_id += 1;
            if known[c].gain.is_some() {
                frontier.push(c as u32);
            }
        }
    }
    for o in open {
        steps.discard(o.state);
    }
    rebuild(steps, &trees, &committed)
}

/// The frontier's leaf the strict order splits next: the largest gain, ties to the lower id.
fn strict_next(frontier: &[u32], known: &[Known]) -> Option<usize> {
    let key = |i: usize| {
        let k = &known[frontier[i] as usize];
        (k.gain.expect("frontier leaves can split"), k.strict.expect("frontier leaves have strict ids"))
    };
    (0..frontier.len()).min_by(|&a, &b| {
        let ((ga, ia), (gb, ib)) = (key(a), key(b));
        gb.total_cmp(&ga).then(ia.cmp(&ib))
    })
}

/// The leaves to expand next, starting with `first`: the strict order played forward from
/// `frontier` over the gains known (a leaf not yet expanded adds no children), for at most
/// `budget` splits, taking each unexpanded leaf it reaches, up to `max_batch` of them.
fn plan_batch(first: u32, frontier: &[u32], known: &[Known], work: &Tree, budget: usize, max_batch: usize) -> Vec<u32> {
    let ranked = |node: u32| Ranked { gain: known[node as usize].gain.expect("candidates can split"), node };
    let mut queue: BinaryHeap<Ranked> = frontier.iter().map(|&n| ranked(n)).collect();
    let mut batch = vec![first];
    for _ in 0..budget {
        let Some(Ranked { node, .. }) = queue.pop() else { break };
        let n = node as usize;
        if known[n].expanded {
            let children = [work.left[n], work.right[n]];
            queue.extend(children.into_iter().filter(|&c| known[c as usize].gain.is_some()).map(ranked));
        } else if node != first {
            if batch.len() == max_batch {
                break;
            }
            batch.push(node);
        }
    }
    batch
}

/// A candidate leaf in [`plan_batch`]'s queue: the largest gain first, ties to the lower id.
struct Ranked {
    gain: f64,
    node: u32,
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.gain.total_cmp(&other.gain).then(other.node.cmp(&self.node))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

/// The final trees: the committed splits of the working trees `works`, replayed in commit
/// order (which gives every node its strict id; the trees share their splits, so their ids);
/// the backend learns the new ids.
fn rebuild<S: GrowSteps>(steps: &mut S, works: &[Tree], committed: &[u32]) -> Result<Vec<Tree>> {
    let work = &works[0];
    let mut trees: Vec<Tree> = works.iter().map(|w| Tree::leaf(w.value[0], w.cover[0])).collect();
    let mut ids = vec![NO_CHILD; work.n_nodes()];
    ids[0] = 0;
    for &w in committed {
        let mut children = (0, 0);
        for (tree, from) in trees.iter_mut().zip(works) {
            children = tree.split_as(ids[w as usize], from, w);
        }
        ids[work.left[w as usize] as usize] = children.0;
        ids[work.right[w as usize] as usize] = children.1;
    }
    let merged: Vec<u32> = (0..work.n_nodes() as u32)
        .filter(|&w| ids[w as usize] != NO_CHILD && !work.is_leaf(w) && trees[0].is_leaf(ids[w as usize]))
        .map(|w| ids[w as usize])
        .collect();
    steps.renumber(&ids, &merged)?;
    Ok(trees)
}
