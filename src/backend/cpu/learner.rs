//! The CPU side of the boosting loop: margins and gradients in host memory, trees grown by
//! the shared driver over [`CpuSteps`], leaves refit for L1-type losses.

use std::borrow::Cow;

use super::grow::CpuSteps;
use super::predict::add_tree_binned;
use crate::backend::refit::LeafRefit;
use crate::backend::Learner;
use crate::collective::{max_magnitudes, sum_grads, Collective, Solo};
use crate::data::{BinnedMatrix, FeatureCuts};
use crate::error::Result;
use crate::objective::{Loss, Targets};
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
        CpuLearner { binned, cuts, params, n, margin, grads, refit, repeats, comm: &Solo }
    }

    /// The same learner as one worker of a distributed fit: gradient scales, totals and
    /// histograms are taken over every worker's rows through `comm`.
    pub fn with_collective(self, comm: &'a dyn Collective) -> Self {
        CpuLearner { comm, ..self }
    }
}

impl CpuLearner<'_> {
    /// Quantises output `output`'s gradients (in place: once per round and output) and
    /// readies the steps of its tree over `rows` (None: every row), with the root's total. The
    /// tree then grows through [`GrowSteps`](crate::tree::GrowSteps), as [`Learner::grow`] does.
    pub fn begin_tree(&mut self, output: usize, rows: Option<&[u32]>) -> Result<(CpuSteps<'_>, Quantiser, GradSum)> {
        let n = self.n;
        let g = &mut self.grads[output * n..(output + 1) * n];
        let mut magnitudes = Quantiser::magnitudes(g, self.repeats);
        max_magnitudes(self.comm, &mut magnitudes)?;
        let weighting = self.params.weighting;
        let quantiser = Quantiser::from_magnitudes(magnitudes, weighting.shrink_bits());
        let qgrads = quantiser.quantise_in_place(g, self.repeats);
        let rows = rows.map_or_else(|| (0..n as u32).collect(), <[u32]>::to_vec);
        let steps =
            CpuSteps::new(&self.binned, self.cuts, qgrads, rows, weighting.chunk_rows()).with_collective(self.comm);
        let mut total = [steps.total()];
        sum_grads(self.comm, &mut total)?;
        Ok((steps, quantiser, total[0]))
    }
}

impl Learner for CpuLearner<'_> {
    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        let t = Targets { weight: self.params.weighting.loss_weights(targets.weight), ..*targets };
        loss.gradients(&self.margin, &t, &mut self.grads)
    }

    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree> {
        let n = self.n;
        let sampled_all = rows.is_none_or(|r| r.len() == n);
        let (params, cuts) = (self.params.clone(), self.cuts);
        let (mut steps, quantiser, total) = self.begin_tree(output, rows)?;
        let ctx = TreeContext { params: &params, quantiser, tree_features: &tree_features, seed };
        let mut tree = grow_tree(&mut steps, &ctx, cuts, total)?;
        let partition = steps.partition;
        let mut margin = std::mem::take(&mut self.margin);
        let m = &mut margin[output * n..(output + 1) * n];
        if let Some(refit) = &self.refit {
            refit.apply(output, &mut tree, |leaf| partition.rows_of(leaf), m, self.params.learning_rate)?;
        }
        if sampled_all {
            let leaves: Vec<u32> = (0..tree.n_nodes() as u32).filter(|&n| tree.is_leaf(n)).collect();
            partition.scatter_add(&leaves, |leaf| tree.value[leaf as usize], m);
        } else {
            add_tree_binned(&tree, &self.binned, m);
        }
        self.margin = margin;
        Ok(tree)
    }
}
