//! The CPU side of the boosting loop: margins and gradients in host memory, trees grown by
//! the shared driver over [`CpuSteps`], leaves refit for L1-type losses.

use std::borrow::Cow;

use rayon::prelude::*;

use super::grow::CpuSteps;
use super::partition::RowPartition;
use super::predict::add_tree_binned;
use crate::backend::refit::LeafRefit;
use crate::backend::Learner;
use crate::collective::{max_magnitudes, sum_grads, Collective, Solo};
use crate::data::{BinnedMatrix, FeatureCuts};
use crate::error::Result;
use crate::objective::{Loss, Targets};
use crate::profile::StageTimes;
use crate::tree::grow::grow_vector_tree;
use crate::tree::grow::TreeContext;
use crate::tree::{grow_tree, GradPair, GradSum, GrowParams, Quantiser, Tree};

pub struct CpuLearner<'a> {
    /// Binned here from the columns, or a streamed fit's (borrowed from its dataset).
    binned: Cow<'a, BinnedMatrix>,
    cuts: &'a [FeatureCuts],
    params: GrowParams,
    n: usize,
    margin: Vec<f32>,
    /// This round's gradient pairs, output-major; an output's are quantised in place when its
    /// tree grows.
    grads: Vec<GradPair>,
    refit: Option<LeafRefit<'a>>,
    /// Whole sample weights that multiply the rounded gradients (`params.weighting` says
    /// whether they do; None when the loss applies them).
    repeats: Option<&'a [f32]>,
    /// The workers of a distributed fit ([`Solo`] for one).
    comm: &'a dyn Collective,
    /// The last tree's row index, refilled for the next: a fresh one each tree was a serial
    /// fill and page faults of 4 bytes a row (~35 ms a tree at 20M rows, at any thread count).
    spare_rows: Vec<u32>,
    /// Under `POLARS_GBT_PROFILE=1`: gradients, the root's histograms, the split search, the
    /// partition with the children's histograms, the margins and leaf refits, and the
    /// boosting loop's evaluation.
    times: StageTimes<6>,
}

impl<'a> CpuLearner<'a> {
    /// A learner over `binned` whose margins start at `margin` (class-major, `k` outputs), for
    /// rows of sample weights `weights`.
    pub fn new(
        binned: Cow<'a, BinnedMatrix>,
        cuts: &'a [FeatureCuts],
        params: GrowParams,
        margin: Vec<f32>,
        weights: Option<&'a [f32]>,
        refit: Option<LeafRefit<'a>>,
    ) -> Self {
        let n = binned.n_rows;
        let k = margin.len() / n.max(1);
        let repeats = params.weighting.repeats(weights);
        let grads = vec![GradPair::default(); n * k];
        let times = StageTimes::default();
        CpuLearner {
            binned,
            cuts,
            params,
            n,
            margin,
            grads,
            refit,
            repeats,
            comm: &Solo,
            spare_rows: Vec::new(),
            times,
        }
    }

    /// The same learner as one worker of a distributed fit: gradient scales, totals and
    /// histograms are taken over every worker's rows through `comm`.
    pub fn with_collective(mut self, comm: &'a dyn Collective) -> Self {
        self.comm = comm;
        self
    }
}

impl CpuLearner<'_> {
    /// Quantises output `output`'s gradients (in place: once per round and output) and
    /// readies the steps of its tree over `rows` (None: every row), with the root's total. The
    /// tree then grows through [`GrowSteps`](crate::tree::GrowSteps), as [`Learner::grow`] does.
    pub fn begin_tree(&mut self, output: usize, rows: Option<&[u32]>) -> Result<(CpuSteps<'_>, Quantiser, GradSum)> {
        let n = self.n;
        let started = self.times.start();
        let rows = self.row_index(rows);
        let g = &mut self.grads[output * n..(output + 1) * n];
        let mut magnitudes = Quantiser::magnitudes(g, self.repeats);
        max_magnitudes(self.comm, &mut magnitudes)?;
        let weighting = self.params.weighting;
        let quantiser = Quantiser::from_magnitudes(magnitudes, weighting.shrink_bits());
        let qgrads = quantiser.quantise_in_place(g, self.repeats);
        let steps =
            CpuSteps::new(&self.binned, self.cuts, qgrads, rows, weighting.chunk_rows()).with_collective(self.comm);
        let mut total = [steps.total()];
        sum_grads(self.comm, &mut total)?;
        self.times.stop(0, started);
        Ok((steps, quantiser, total[0]))
    }
}

impl Learner for CpuLearner<'_> {
    fn evaluated(&mut self, started: std::time::Instant) {
        let started = self.times.is_on().then_some(started);
        self.times.stop(5, started);
    }

    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        let started = self.times.start();
        let t = Targets { weight: self.params.weighting.loss_weights(targets.weight), ..*targets };
        let result = loss.gradients(&self.margin, &t, &mut self.grads);
        self.times.stop(0, started);
        result
    }

    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree> {
        let n = self.n;
        let sampled_all = rows.is_none_or(|r| r.len() == n);
        let (params, cuts) = (self.params.clone(), self.cuts);
        let (mut steps, quantiser, total) = self.begin_tree(output, rows)?;
        let ctx = TreeContext { params: &params, quantiser, tree_features: &tree_features, seed, outputs: &[] };
        let mut tree = grow_tree(&mut steps, &ctx, cuts, total)?;
        let step_times = steps.times;
        let partition = steps.partition;
        self.add_step_times(&step_times);
        self.finish_tree(output, &mut tree, &partition, sampled_all)?;
        self.spare_rows = partition.rows;
        Ok(tree)
    }

    fn grow_vector(&mut self, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Vec<Tree>> {
        let n = self.n;
        let sampled_all = rows.is_none_or(|r| r.len() == n);
        let rows = self.row_index(rows);
        let (params, cuts, comm, repeats) = (self.params.clone(), self.cuts, self.comm, self.repeats);
        let weighting = params.weighting;
        // Every output's gradients quantised (in place), each with its own scale.
        let mut quantisers = Vec::new();
        let mut qgrads = Vec::new();
        for g in self.grads.chunks_mut(n.max(1)) {
            let mut magnitudes = Quantiser::magnitudes(g, repeats);
            max_magnitudes(comm, &mut magnitudes)?;
            let quantiser = Quantiser::from_magnitudes(magnitudes, weighting.shrink_bits());
            qgrads.push(quantiser.quantise_in_place(g, repeats));
            quantisers.push(quantiser);
        }
        let mut steps =
            CpuSteps::for_outputs(&self.binned, cuts, qgrads, rows, weighting.chunk_rows()).with_collective(comm);
        let mut sums = steps.totals();
        sum_grads(comm, &mut sums)?;
        let ctx = TreeContext {
            params: &params,
            quantiser: quantisers[0],
            tree_features: &tree_features,
            seed,
            outputs: &quantisers,
        };
        let mut trees = grow_vector_tree(&mut steps, &ctx, cuts, sums)?;
        let step_times = steps.times;
        let partition = steps.into_partition();
        self.add_step_times(&step_times);
        for (output, tree) in trees.iter_mut().enumerate() {
            self.finish_tree(output, tree, &partition, sampled_all)?;
        }
        self.spare_rows = partition.rows;
        Ok(trees)
    }
}

impl Drop for CpuLearner<'_> {
    fn drop(&mut self) {
        if self.times.is_on() {
            let [g, root, split, part, finish, evaluation] = self.times.seconds;
            eprintln!(
                "polars-gbt profile: CPU ({} threads): gradients {g:.3} s, root histograms {root:.3} s, \
                 split search {split:.3} s, partition and children's histograms {part:.3} s, \
                 margins and leaf refits {finish:.3} s, evaluation {evaluation:.3} s",
                rayon::current_num_threads()
            );
        }
    }
}

impl CpuLearner<'_> {
    /// A tree's row index: `rows` (sorted), or every row, in the last tree's buffer.
    fn row_index(&mut self, rows: Option<&[u32]>) -> Vec<u32> {
        let mut index = std::mem::take(&mut self.spare_rows);
        index.clear();
        match rows {
            Some(rows) => index.extend_from_slice(rows),
            None => {
                index.resize(self.n, 0);
                index.par_iter_mut().enumerate().for_each(|(i, r)| *r = i as u32);
            }
        }
        index
    }

    /// Adds a grown tree's step times to the fit's.
    fn add_step_times(&mut self, steps: &StageTimes<3>) {
        for (total, s) in self.times.seconds[1..4].iter_mut().zip(steps.seconds) {
            *total += s;
        }
    }

    /// Refits `tree`'s leaves (L1-type losses) and adds it to output `output`'s training
    /// margins: through the rows of its leaves when every row took part, else by walking it.
    fn finish_tree(
        &mut self,
        output: usize,
        tree: &mut Tree,
        partition: &RowPartition,
        sampled_all: bool,
    ) -> Result<()> {
        let started = self.times.start();
        let n = self.n;
        let mut margin = std::mem::take(&mut self.margin);
        let m = &mut margin[output * n..(output + 1) * n];
        if let Some(refit) = &self.refit {
            refit.apply(output, tree, |leaf| partition.rows_of(leaf), m, self.params.learning_rate)?;
        }
        if sampled_all {
            let leaves: Vec<u32> = (0..tree.n_nodes() as u32).filter(|&n| tree.is_leaf(n)).collect();
            partition.scatter_add(&leaves, |leaf| tree.value[leaf as usize], m);
        } else {
            add_tree_binned(tree, &self.binned, m);
        }
        self.margin = margin;
        self.times.stop(4, started);
        Ok(())
    }
}
