//! Execution backends. The boundary is coarse, as DESIGN.md asks: a backend keeps the
//! training margins, computes each round's gradients and grows a whole tree from them;
//! everything that is not execution (cuts, split math, objectives, the model) is shared. The
//! CPU backend is also the oracle for tests. Each backend is reached through its [`Engine`]
//! (`engine.rs`): availability, a learner for a fit, a predictor for a forest.
//!
//! Backends sit below the model: they take what they need (data, cuts, trees as a
//! [`ForestSpec`](crate::prediction::ForestSpec)) and never import `crate::model`. Without the `cuda` feature, [`cuda`] is a
//! stub (`cuda_stub.rs`) with the same names, whose `availability()` says why there is no GPU
//! and whose GPU types cannot be made, so no code outside this directory needs a `cfg`.

pub mod cpu;
#[cfg_attr(not(feature = "cuda"), path = "cuda_stub.rs")]
pub mod cuda;
pub mod engine;
pub mod refit;
pub mod select;

pub use engine::{Backend, Boost, Engine, Fit, FitRows, StartMargin};
pub use select::{device_collective, for_scoring, select};

use crate::data::{BinnedMatrix, FeatureColumn, FeatureFrame};
use crate::error::Result;
use crate::metric::{Metric, MetricParams};
use crate::objective::{Loss, Objective, Targets};
use crate::prediction::{ExportArrays, PredictOutput, Predictions};
use crate::tree::Tree;

/// What the boosting loop asks of a backend.
pub trait Learner {
    /// This round's gradients of every output, from the current training margins.
    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()>;
    /// Grows output `output`'s tree on `rows` (None: every row), splitting only on
    /// `tree_features`, and adds it to the training margins.
    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree>;
    /// Grows one vector-leaf tree over every output (`multi_strategy="multi_output_tree"`):
    /// each output's tree, sharing one structure, added to its training margins. Engines
    /// whose `unsupported` refuses vector leaves never get here; the default says so anyway.
    fn grow_vector(&mut self, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Vec<Tree>> {
        let _ = (rows, tree_features, seed);
        Err(crate::error::Error::param("multi_strategy", "\"multi_output_tree\" trains on the CPU only"))
    }

    /// Adds `tree`, as [`grow`](Learner::grow) or [`grow_vector`](Learner::grow_vector)
    /// returned it, to an evaluation set's margins of the tree's output: `margin[row]` for
    /// every row of `binned` (the set binned with the fit's cut points).
    ///
    /// The default walks the tree over the bins on the host, with the CPU backend's code: it
    /// is the CPU learner's implementation, and the GPU learner's until its evaluation sets
    /// live on the device (issue 55).
    fn add_tree_to_eval(&mut self, tree: &Tree, binned: &BinnedMatrix, margin: &mut [f32]) -> Result<()> {
        cpu::predict::add_tree_binned(tree, binned, margin);
        Ok(())
    }

    /// Offers the learner evaluation set `set`, to keep where it trains: `Some(id)` when it
    /// took it (it then adds each tree to the set's margins, [`Learner::add_tree_to_held`],
    /// and computes its metrics, [`Learner::held_metrics`]), None when the host keeps the set
    /// (the default: the boosting loop bins it and walks each tree over it, as above).
    fn hold_eval_set(&mut self, set: EvalSetRows<'_>) -> Result<Option<usize>> {
        let _ = set;
        Ok(None)
    }

    /// Adds output `output`'s `tree` to held set `set`'s margins of that output.
    fn add_tree_to_held(&mut self, set: usize, output: usize, tree: &Tree) -> Result<()> {
        let _ = (set, output, tree);
        Err(crate::error::Error::Device("this learner holds no evaluation set".into()))
    }

    /// Held set `set`'s margins, class-major (read back from where the learner keeps them).
    fn held_margins(&mut self, set: usize) -> Result<Vec<f32>> {
        let _ = set;
        Err(crate::error::Error::Device("this learner holds no evaluation set".into()))
    }

    /// The values of `metrics` on each held set of `sets`, predictions through `objective`'s
    /// link: each the bits [`Metric::evaluate`] gives on the host, or None for a metric the
    /// learner leaves to the host (which then reads the set's margins). One call a round, so
    /// that a device can return every set's values after one wait.
    fn held_metrics(
        &mut self,
        sets: &[usize],
        metrics: &[Metric],
        params: &MetricParams,
        objective: Objective,
    ) -> Result<Vec<Vec<Option<f64>>>> {
        let _ = (params, objective);
        Ok(vec![vec![None; metrics.len()]; sets.len()])
    }

    /// The boosting loop's work after a round's trees, begun at `started` (the evaluation
    /// sets' margins and metrics, the round's callback), is done: under `POLARS_GBT_PROFILE=1`
    /// the learner counts it as its `evaluation` stage rather than in its next one.
    fn evaluated(&mut self, started: std::time::Instant) {
        let _ = started;
    }
}

/// An evaluation set as the boosting loop offers it to a learner ([`Learner::hold_eval_set`]).
pub struct EvalSetRows<'a> {
    /// Its feature columns, bound to the fit's features (in their order, categories mapped).
    pub features: &'a FeatureFrame,
    /// Its labels, bounds and weights (the metrics read them).
    pub targets: Targets<'a>,
    /// Its margins to start from, class-major.
    pub margin: StartMargin,
}

/// A model's forest laid out for one backend ([`cpu::predict::FlatForest`],
/// [`cuda::GpuForest`]): built once from a [`ForestSpec`](crate::prediction::ForestSpec), it
/// scores any number of batches. `Model::predict_with` calls it.
pub trait Predictor {
    /// `output` for `n_rows` rows of `columns` (the model's features, in order), from the
    /// per-row margins `base_margin` (row-major, `n_rows * n_outputs`; ignored for leaves) or
    /// else the forest's base margin: SHAP values from [`Predictor::contributions`], every
    /// other output from [`Predictor::scores`].
    fn predict(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        output: PredictOutput,
    ) -> Result<Predictions> {
        match output {
            PredictOutput::Contrib => self.contributions(columns, n_rows, base_margin, false),
            PredictOutput::Interaction => self.contributions(columns, n_rows, base_margin, true),
            _ => self.scores(columns, n_rows, base_margin, output),
        }
    }

    /// Margins, values, classes or leaves ([`Predictor::predict`]'s other outputs).
    fn scores(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        output: PredictOutput,
    ) -> Result<Predictions>;

    /// SHAP values, or with `interactions` SHAP interaction values, in XGBoost's layouts (see
    /// [`PredictOutput::Contrib`]), the bias from `base_margin` or the forest's.
    fn contributions(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        interactions: bool,
    ) -> Result<Predictions>;

    /// `output` for rows the caller holds in GPU memory, written into GPU memory the caller
    /// holds: `export` is called once, with the stream the work is queued on, and returns the
    /// arrays ([`DeviceBinding`](crate::prediction::DeviceBinding)); the scores are in place
    /// when this returns. `missing` is a value read as missing (the model's sentinel). Only
    /// the CUDA backend has this; the others say so.
    fn predict_device(&self, output: PredictOutput, missing: Option<f32>, export: &mut ExportArrays<'_>) -> Result<()> {
        let _ = (output, missing, export);
        Err(crate::Error::Device("arrays in GPU memory are scored by the CUDA backend only".into()))
    }
}
