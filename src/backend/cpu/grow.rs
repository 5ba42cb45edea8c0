//! The CPU's steps of growing a tree ([`GrowSteps`]; the driver is `tree::grow`): root and
//! children histograms, split search and row partitioning, over the row-major bins. The
//! smaller child's histogram is built from each piece the partition has just split, while
//! its rows are in cache, and its sibling's is the parent's minus it (exact: integer sums).

use std::sync::Mutex;

use rayon::prelude::*;

use super::histogram::{build_histograms, HistLayout, HistTask, NodeHist};
use super::partition::{RowPartition, RowRouter, SplitJob};
use super::partition_simd::{self, as_bytes, BinId, BinSplit, BinTest};
use super::prefetch_read;
use crate::collective::{sum_grads, Collective, Solo};
use crate::data::binned::BinData;
use crate::data::BinnedMatrix;
use crate::data::FeatureCuts;
use crate::error::{Error, Result};
use crate::profile::StageTimes;
use crate::tree::gradient::QuantGrad;
use crate::tree::grow::{Expansion, GrowSteps, Open, TreeContext};
use crate::tree::node_search::best_split_per_node;
use crate::tree::split::SplitScorer;
use crate::tree::split_vector::best_vector_splits;
use crate::tree::{GradSum, Tree};

/// A node's handle on the CPU: its id (its rows are the partition's), its histogram and its
/// row count (both over every worker's rows in a distributed fit). A vector-leaf tree's
/// histogram holds each output's histogram in turn (output-major, `layout.total_slots()` each).
pub struct CpuNode {
    node: u32,
    hist: NodeHist,
    rows: u64,
}

/// The rows of one tree and the means to split them.
pub struct CpuSteps<'a> {
    binned: &'a BinnedMatrix,
    cuts: &'a [FeatureCuts],
    /// Each output's quantised gradients: one for a scalar tree, one per output for a
    /// vector-leaf tree.
    grads: Vec<&'a [QuantGrad]>,
    layout: HistLayout,
    /// Sums the histograms and row counts over the workers of a distributed fit.
    comm: &'a dyn Collective,
    /// The tree's rows by node; the learner reads the leaves' rows from it once the tree is grown.
    pub partition: RowPartition,
    /// Under `POLARS_GBT_PROFILE=1`: the root's histograms, the split search, and the partition
    /// with the children's histograms (built from each piece as it is split).
    pub times: StageTimes<3>,
}

impl<'a> CpuSteps<'a> {
    /// Steps over `rows` (sorted) with quantised gradients `grads` (indexed by row), whose
    /// histograms sum `chunk_rows` rows a chunk in `i32` ([`Weighting::chunk_rows`](crate::tree::gradient::Weighting::chunk_rows)).
    pub fn new(
        binned: &'a BinnedMatrix,
        cuts: &'a [FeatureCuts],
        grads: &'a [QuantGrad],
        rows: Vec<u32>,
        chunk_rows: usize,
    ) -> Self {
        Self::for_outputs(binned, cuts, vec![grads], rows, chunk_rows)
    }

    /// Steps of a vector-leaf tree: `grads` holds each output's quantised gradients.
    pub fn for_outputs(
        binned: &'a BinnedMatrix,
        cuts: &'a [FeatureCuts],
        grads: Vec<&'a [QuantGrad]>,
        rows: Vec<u32>,
        chunk_rows: usize,
    ) -> Self {
        CpuSteps {
            binned,
            cuts,
            grads,
            layout: HistLayout::new(binned).with_chunk_rows(chunk_rows),
            comm: &Solo,
            partition: RowPartition::new(rows),
            times: StageTimes::default(),
        }
    }

    /// The same steps as one worker of a distributed fit: histograms and counts are summed
    /// over the workers through `comm` before any decision reads them.
    pub fn with_collective(self, comm: &'a dyn Collective) -> Self {
        CpuSteps { comm, ..self }
    }

    /// The tree's rows by node, the steps done (their borrows of the gradients end here).
    pub fn into_partition(self) -> RowPartition {
        self.partition
    }

    /// Sums `hists` and `counts` over the workers, in one operation. Histograms are wide in a
    /// distributed fit ([`Self::narrow_children`]).
    fn reduce(&self, hists: &mut [&mut NodeHist], counts: &mut [u64]) -> Result<()> {
        if self.comm.world() == 1 {
            return Ok(());
        }
        let mut hists: Vec<&mut Vec<GradSum>> = hists
            .iter_mut()
            .map(|h| h.wide_mut().ok_or_else(|| Error::data("internal error: a narrow histogram in a distributed fit")))
            .collect::<Result<_>>()?;
        let hists = &mut hists[..];
        let mut flat: Vec<GradSum> = hists.iter().flat_map(|h| h.iter().copied()).collect();
        flat.extend(counts.iter().map(|&c| GradSum { g: c as i64, h: 0 }));
        sum_grads(self.comm, &mut flat)?;
        let mut at = 0;
        for h in hists.iter_mut() {
            let len = h.len();
            h.copy_from_slice(&flat[at..at + len]);
            at += len;
        }
        counts.iter_mut().zip(&flat[at..]).for_each(|(c, s)| *c = s.g as u64);
        Ok(())
    }

    /// The rows' gradient sum: the root's total (a vector-leaf tree's first output's).
    pub fn total(&self) -> GradSum {
        self.totals()[0]
    }

    /// The rows' gradient sum of each output.
    pub fn totals(&self) -> Vec<GradSum> {
        self.grads
            .iter()
            .map(|grads| {
                self.partition
                    .rows
                    .par_iter()
                    .fold(GradSum::default, |mut s, &r| {
                        s += grads[r as usize];
                        s
                    })
                    .reduce(GradSum::default, |a, b| a + b)
            })
            .collect()
    }

    fn empty_histogram(&self, narrow: bool) -> NodeHist {
        NodeHist::zeroed(self.layout.total_slots() * self.grads.len(), narrow)
    }

    /// Whether the children of a node of `parent_rows` rows keep narrow (`i32`) histograms:
    /// when every sum over the parent's rows fits (at most a chunk's rows), on one worker (the
    /// collective sums `i64`) and for a scalar tree (the vector-leaf search reads `i64`, even
    /// for one output).
    fn narrow_children(&self, parent_rows: u64, ctx: &TreeContext) -> bool {
        parent_rows <= self.layout.chunk_rows() as u64 && self.comm.world() == 1 && !ctx.is_vector()
    }

    /// Output `k`'s histogram within a node's.
    fn output_slots(&self, k: usize) -> std::ops::Range<usize> {
        let s = self.layout.total_slots();
        k * s..(k + 1) * s
    }
}

impl GrowSteps for CpuSteps<'_> {
    type Node = CpuNode;

    fn build_root(&mut self, ctx: &TreeContext) -> Result<CpuNode> {
        let started = self.times.start();
        // The root's sums are over every row: wide.
        let mut wide = vec![GradSum::default(); self.layout.total_slots() * self.grads.len()];
        for (k, grads) in self.grads.iter().enumerate() {
            let task = HistTask { rows: self.partition.rows_of(0), hist: &mut wide[self.output_slots(k)] };
            build_histograms(self.binned, &self.layout, grads, ctx.tree_features, vec![task]);
        }
        let mut hist = NodeHist::Wide(wide);
        let mut rows = [self.partition.rows_of(0).len() as u64];
        self.reduce(&mut [&mut hist], &mut rows)?;
        self.times.stop(0, started);
        Ok(CpuNode { node: 0, hist, rows: rows[0] })
    }

    /// In parallel over (node, feature) (`evaluate_nodes`).
    fn evaluate(&mut self, nodes: &mut [Open<CpuNode>], ctx: &TreeContext) -> Result<()> {
        let started = self.times.start();
        let result = self.evaluate_nodes(nodes, ctx);
        self.times.stop(1, started);
        result
    }

    /// The smaller child (by hessian, a proxy for its row count known before partitioning) is
    /// built from its rows as the partition produces them; the sibling by subtraction.
    fn partition_and_build(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<CpuNode>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[CpuNode; 2]>>> {
        let started = self.times.start();
        let result = self.split_nodes(tree, expansions, ctx);
        self.times.stop(2, started);
        result
    }

    fn discard(&mut self, _: CpuNode) {}

    fn renumber(&mut self, ids: &[u32], merged: &[u32]) -> Result<()> {
        self.partition.renumber(ids, merged);
        Ok(())
    }

    fn histogram(&mut self, node: &CpuNode) -> Result<Vec<GradSum>> {
        Ok(node.hist.widened())
    }

    fn rows(&mut self, node: &CpuNode) -> Result<Vec<u32>> {
        Ok(self.partition.rows_of(node.node).to_vec())
    }
}

impl CpuSteps<'_> {
    /// Each node's best split, in parallel over (node, feature).
    fn evaluate_nodes(&mut self, nodes: &mut [Open<CpuNode>], ctx: &TreeContext) -> Result<()> {
        if ctx.is_vector() {
            let rows: Vec<u32> = nodes.iter().map(|o| o.state.rows as u32).collect();
            let nodes_now: &[Open<CpuNode>] = nodes;
            // A vector-leaf tree's histograms are wide (`narrow_children`).
            let wide: Vec<&[GradSum]> = nodes_now
                .iter()
                .map(|o| {
                    o.state
                        .hist
                        .wide()
                        .ok_or_else(|| Error::data("internal error: a narrow histogram in a vector-leaf tree"))
                })
                .collect::<Result<_>>()?;
            let hist = |i: usize, k: usize, f: usize| self.layout.feature(&wide[i][self.output_slots(k)], f);
            let found = best_vector_splits(nodes_now, ctx, self.cuts, &rows, hist);
            nodes.iter_mut().zip(found).for_each(|(o, best)| o.best = best);
            return Ok(());
        }
        let monotone = &ctx.params.constraints.monotone;
        let found = best_split_per_node(nodes, ctx, |i, f| {
            let o = &nodes[i];
            let scorer =
                SplitScorer::new(&ctx.params.split, &ctx.quantiser, o.total, o.state.rows as u32, &o.limits, monotone);
            let slots = self.layout.offsets[f as usize]..self.layout.offsets[f as usize + 1];
            // Narrow slots are read in place.
            match (&o.state.hist, self.cuts[f as usize].is_categorical()) {
                (NodeHist::Wide(h), true) => scorer.best_categorical(f, &h[slots]),
                (NodeHist::Wide(h), false) => scorer.best_numeric(f, &h[slots]),
                (NodeHist::Narrow(h), true) => scorer.best_categorical(f, &h[slots]),
                (NodeHist::Narrow(h), false) => scorer.best_numeric(f, &h[slots]),
            }
        });
        nodes.iter_mut().zip(found).for_each(|(o, best)| o.best = best);
        Ok(())
    }

    /// Partitions the expanded nodes' rows and builds their children's histograms.
    fn split_nodes(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<CpuNode>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[CpuNode; 2]>>> {
        let jobs: Vec<(u32, u32, u32, usize)> =
            expansions.iter().map(|e| (e.node, e.children[0], e.children[1], e.split.feature as usize)).collect();
        let small_left: Vec<Option<(bool, bool)>> = expansions
            .iter()
            .map(|e| {
                let s = &e.split;
                let left_is_small = if ctx.is_vector() {
                    ctx.vector_cover(&s.left_sums) <= ctx.vector_cover(&s.right_sums)
                } else {
                    s.left.h <= s.right.h
                };
                e.grow_children.then_some((left_is_small, self.narrow_children(e.state.rows, ctx)))
            })
            .collect();
        // Zeroed in parallel: a deep level's hundreds of histograms are megabytes to clear.
        let small_hists: Vec<Option<Mutex<NodeHist>>> =
            small_left.par_iter().map(|s| s.map(|(_, narrow)| Mutex::new(self.empty_histogram(narrow)))).collect();
        let (binned, layout, grads, features) = (self.binned, &self.layout, &self.grads, ctx.tree_features);
        let observe = |k: usize, left: &[u32], right: &[u32]| {
            let (Some((is_left, narrow)), Some(total)) = (small_left[k], &small_hists[k]) else { return };
            let rows = if is_left { left } else { right };
            // A node of one piece (or the first of several to get here) adds into the total
            // directly; a piece that would wait builds its own and adds it after. Integer sums:
            // the result is the same either way. One histogram per output (vector leaves).
            if let Ok(mut total) = total.try_lock() {
                total.add_rows(binned, layout, grads, features, rows);
                return;
            }
            let mut hist = NodeHist::zeroed(layout.total_slots() * grads.len(), narrow);
            hist.add_rows(binned, layout, grads, features, rows);
            total.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).add(&hist);
        };
        match &self.binned.data {
            BinData::U8 { rows } => split_all(&mut self.partition, tree, self.binned, rows, &jobs, observe),
            BinData::U16 { rows } => split_all(&mut self.partition, tree, self.binned, rows, &jobs, observe),
            BinData::U32 { rows } => split_all(&mut self.partition, tree, self.binned, rows, &jobs, observe),
        }
        // The smaller children's histograms and rows, summed over the workers (in a
        // distributed fit) before the siblings are taken from the parents.
        let mut small_hists: Vec<Option<NodeHist>> = small_hists
            .into_iter()
            .map(|h| h.map(|h| h.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner())))
            .collect();
        let mut small_rows: Vec<u64> = expansions
            .iter()
            .zip(&small_left)
            .filter_map(|(e, s)| {
                s.map(|(is_left, _)| self.partition.rows_of(e.children[usize::from(!is_left)]).len() as u64)
            })
            .collect();
        self.reduce(&mut small_hists.iter_mut().flatten().collect::<Vec<_>>(), &mut small_rows)?;
        let mut small_rows = small_rows.into_iter();
        let small_rows: Vec<Option<u64>> =
            small_left.iter().map(|s| s.map(|_| small_rows.next().expect("one count per small child"))).collect();
        // The siblings by subtraction, nodes in parallel (each a pass over its histogram).
        let out = expansions
            .into_par_iter()
            .zip(small_hists)
            .zip(small_left)
            .zip(small_rows)
            .map(|(((e, small_hist), is_left), small)| {
                let (Some((is_left, _)), Some(small_hist), Some(small)) = (is_left, small_hist, small) else {
                    return None;
                };
                // The parent's histogram becomes the sibling's (in place where both are of one
                // width; a wide parent's narrow children take a narrow copy).
                let sibling = e.state.hist.minus(&small_hist);
                let (left, right) = if is_left { (small_hist, sibling) } else { (sibling, small_hist) };
                let (left_rows, right_rows) =
                    if is_left { (small, e.state.rows - small) } else { (e.state.rows - small, small) };
                let [l, r] = e.children;
                Some([
                    CpuNode { node: l, hist: left, rows: left_rows },
                    CpuNode { node: r, hist: right, rows: right_rows },
                ])
            })
            .collect();
        Ok(out)
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
    B: BinId,
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
    test: BinTest<'a>,
}

impl<'a, B> BinRouter<'a, B> {
    fn new(tree: &'a Tree, node: u32, binned: &BinnedMatrix, bins: &'a [B], feature: usize) -> Self {
        let n = node as usize;
        let categories = tree.is_categorical(node).then(|| {
            let start = tree.category_start[n] as usize;
            &tree.category_words[start..start + tree.category_len[n] as usize]
        });
        let test = BinTest {
            missing: binned.n_bins[feature],
            split_bin: tree.split_bin[n],
            default_left: tree.default_left[n],
            categories,
        };
        BinRouter { bins: &bins[feature..], stride: binned.n_features(), test }
    }
}

impl<B: BinId> RowRouter for BinRouter<'_, B> {
    #[inline]
    fn goes_left(&self, row: u32) -> bool {
        self.test.goes_left(self.bins[row as usize * self.stride].into())
    }

    #[inline]
    fn prefetch(&self, row: u32) {
        if let Some(b) = self.bins.get(row as usize * self.stride) {
            prefetch_read(b);
        }
    }

    /// Sixteen rows at a time with AVX-512 where the CPU has it (`partition_simd`).
    fn partition(&self, rows: &mut [u32], right: &mut [u32]) -> Option<usize> {
        let split = BinSplit {
            bytes: as_bytes(self.bins),
            width: std::mem::size_of::<B>(),
            stride: self.stride,
            test: self.test,
        };
        partition_simd::partition(&split, rows, right, |r| self.goes_left(r))
    }
}
