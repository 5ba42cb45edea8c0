//! The CPU side of the boosting loop: margins and gradients in host memory, trees grown by
//! [`grow_tree`], leaves refit for L1-type losses.

use super::partition::RowPartition;
use super::predict::add_tree_binned;
use super::{grow_tree, GrowParams};
use crate::backend::Learner;
use crate::data::{BinnedMatrix, FeatureCuts};
use crate::error::Result;
use crate::objective::{weighted_quantile, Loss, Targets};
use crate::tree::{GradPair, Quantiser, Tree};

/// Leaves set to a quantile of their rows' residuals instead of the Newton step.
pub struct LeafRefit<'a> {
    pub alpha: f64,
    pub label: &'a [f32],
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

    /// Sets each leaf to the `alpha`-quantile of its rows' residuals (times the learning rate).
    fn refit_leaves(&self, refit: &LeafRefit, tree: &mut Tree, partition: &RowPartition, margin: &[f32]) {
        for leaf in 0..tree.n_nodes() as u32 {
            if !tree.is_leaf(leaf) {
                continue;
            }
            let rows = partition.rows_of(leaf);
            let residuals: Vec<f32> = rows.iter().map(|&r| refit.label[r as usize] - margin[r as usize]).collect();
            let q = weighted_quantile(
                &residuals,
                |i| refit.weight.as_ref().map_or(1.0, |w| w[rows[i] as usize]),
                refit.alpha,
            );
            tree.value[leaf as usize] = (q as f64 * self.params.learning_rate) as f32;
        }
    }
}

impl Learner for CpuLearner<'_> {
    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        loss.gradients(&self.margin, targets, &mut self.grads);
        Ok(())
    }

    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree> {
        let n = self.n;
        let g = &mut self.grads[output * n..(output + 1) * n];
        let quantiser = Quantiser::fit(g);
        let qgrads = quantiser.quantise_in_place(g);
        let rows = rows.map_or_else(|| (0..n as u32).collect(), <[u32]>::to_vec);
        let sampled_all = rows.len() == n;
        let grown = grow_tree(&self.binned, self.cuts, qgrads, &quantiser, &self.params, rows, tree_features, seed);
        let mut tree = grown.tree;
        let mut margin = std::mem::take(&mut self.margin);
        let m = &mut margin[output * n..(output + 1) * n];
        if let Some(refit) = &self.refit {
            self.refit_leaves(refit, &mut tree, &grown.partition, m);
        }
        if sampled_all {
            let leaves: Vec<u32> = (0..tree.n_nodes() as u32).filter(|&n| tree.is_leaf(n)).collect();
            grown.partition.scatter_add(&leaves, |leaf| tree.value[leaf as usize], m);
        } else {
            add_tree_binned(&tree, &self.binned, m);
        }
        self.margin = margin;
        Ok(tree)
    }
}
