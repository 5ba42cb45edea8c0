//! The CPU side of the boosting loop: margins and gradients in host memory, trees grown by
//! the shared driver over [`CpuSteps`], leaves refit for L1-type losses.

use super::grow::CpuSteps;
use super::partition::RowPartition;
use super::predict::add_tree_binned;
use crate::backend::Learner;
use crate::data::{BinnedMatrix, FeatureCuts};
use crate::error::Result;
use crate::objective::{weighted_quantile, Loss, Targets};
use crate::tree::grow::TreeContext;
use crate::tree::{grow_tree, GradPair, GradSum, GrowParams, Quantiser, Tree};

/// Leaves set to a quantile of their rows' residuals instead of the Newton step.
pub struct LeafRefit<'a> {
    /// The quantile of each output.
    pub alphas: Vec<f64>,
    /// The labels of each output.
    pub labels: Vec<&'a [f32]>,
    pub weight: Option<&'a [f32]>,
}

pub struct CpuLearner<'a> {
    binned: BinnedMatrix,
    cuts: &'a [FeatureCuts],
    params: GrowParams,
    n: usize,
    margin: Vec<f32>,
    /// This round's gradient pairs, output-major; an output's are quantised in place when its
    /// tree grows.
    grads: Vec<GradPair>,
    refit: Option<LeafRefit<'a>>,
}

impl<'a> CpuLearner<'a> {
    /// A learner over `binned` whose margins start at `margin` (class-major, `k` outputs).
    pub fn new(
        binned: BinnedMatrix,
        cuts: &'a [FeatureCuts],
        params: GrowParams,
        margin: Vec<f32>,
        refit: Option<LeafRefit<'a>>,
    ) -> Self {
        let n = binned.n_rows;
        let k = margin.len() / n.max(1);
        CpuLearner { binned, cuts, params, n, margin, grads: vec![GradPair::default(); n * k], refit }
    }

    /// Sets each leaf of output `output`'s tree to its quantile of the leaf rows' residuals
    /// (times the learning rate).
    fn refit_leaves(
        &self,
        refit: &LeafRefit,
        output: usize,
        tree: &mut Tree,
        partition: &RowPartition,
        margin: &[f32],
    ) {
        for leaf in 0..tree.n_nodes() as u32 {
            if !tree.is_leaf(leaf) {
                continue;
            }
            let rows = partition.rows_of(leaf);
            let residuals: Vec<f32> =
                rows.iter().map(|&r| refit.labels[output][r as usize] - margin[r as usize]).collect();
            let q = weighted_quantile(
                &residuals,
                |i| refit.weight.as_ref().map_or(1.0, |w| w[rows[i] as usize]),
                refit.alphas[output],
            );
            tree.value[leaf as usize] = (q as f64 * self.params.learning_rate) as f32;
        }
    }
}

impl CpuLearner<'_> {
    /// Quantises output `output`'s gradients (in place: once per round and output) and
    /// readies the steps of its tree over `rows` (None: every row), with the root's total. The
    /// tree then grows through [`GrowSteps`](crate::tree::GrowSteps), as [`Learner::grow`] does.
    pub fn begin_tree(&mut self, output: usize, rows: Option<&[u32]>) -> (CpuSteps<'_>, Quantiser, GradSum) {
        let n = self.n;
        let g = &mut self.grads[output * n..(output + 1) * n];
        let quantiser = Quantiser::fit(g);
        let qgrads = quantiser.quantise_in_place(g);
        let rows = rows.map_or_else(|| (0..n as u32).collect(), <[u32]>::to_vec);
        let steps = CpuSteps::new(&self.binned, self.cuts, qgrads, rows);
        let total = steps.total();
        (steps, quantiser, total)
    }
}

impl Learner for CpuLearner<'_> {
    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        loss.gradients(&self.margin, targets, &mut self.grads)
    }

    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree> {
        let n = self.n;
        let sampled_all = rows.is_none_or(|r| r.len() == n);
        let (params, cuts) = (self.params.clone(), self.cuts);
        let (mut steps, quantiser, total) = self.begin_tree(output, rows);
        let ctx = TreeContext { params: &params, quantiser, tree_features: &tree_features, seed };
        let mut tree = grow_tree(&mut steps, &ctx, cuts, total)?;
        let partition = steps.partition;
        let mut margin = std::mem::take(&mut self.margin);
        let m = &mut margin[output * n..(output + 1) * n];
        if let Some(refit) = &self.refit {
            self.refit_leaves(refit, output, &mut tree, &partition, m);
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
