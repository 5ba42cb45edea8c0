//! What a device is, to the rest of the crate: an [`Engine`]. The booster asks the engine of
//! its [`Backend`] for a learner and hands it the boosting loop; the model and the plugin's
//! model cache ask it for a predictor of a forest. Only `src/backend/` names the backends, so a
//! new device is one more [`Backend`] and one more engine, and nothing above this layer changes.
//!
//! Engines are process-wide (`Backend::engine`, in `select.rs`, gives a `'static` one): what a device keeps
//! between fits and predictions (the CUDA contexts, compiled kernels, pinned buffers and the
//! lanes that share a GPU) belongs to its engine's module and outlives any one fit.

use std::sync::Arc;

use super::refit::LeafRefit;
use super::{Learner, Predictor};
use crate::collective::cuts::compute_cuts_sharded;
use crate::collective::{Collective, Shard};
use crate::config::TrainConfig;
use crate::data::{BinSink, BinnedView, Dataset, FeatureCuts, FeatureFrame};
use crate::error::Result;
use crate::prediction::ForestSpec;
use crate::tree::GrowParams;

/// Where a fit or a prediction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Cpu,
    Cuda,
}

impl Backend {
    /// Every backend, in [`Backend::index`] order.
    pub const ALL: [Backend; 2] = [Backend::Cpu, Backend::Cuda];

    /// The backend's place in [`Backend::ALL`] (for per-backend tables, such as a model's
    /// predictors).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Everything a backend needs to train: the rows, what shapes a tree, the starting margins,
/// the leaf refits of L1-type losses, and this worker's place among the fit's workers
/// ([`Shard::solo`] for one). The cut points are the engine's to compute (`cfg.max_bin`,
/// `cfg.seed`), where its data is.
pub struct Fit<'a> {
    pub data: &'a Dataset,
    pub grow: GrowParams,
    pub cfg: &'a TrainConfig,
    pub margin: StartMargin,
    pub refit: Option<LeafRefit<'a>>,
    pub shard: &'a Shard<'a>,
}

/// Where a fit's margins start: one value an output (the base margin), or each row's own
/// (the data's `base_margin`), class-major: output c's margins for every row, then output
/// c + 1's. A GPU fit fills the constant on the device, without building every row's copy
/// on the host first (a tenth of a second at 50M rows).
pub enum StartMargin {
    Constant(Vec<f32>),
    Rows(Vec<f32>),
}

impl StartMargin {
    /// Every row's margins, class-major, for `n` rows.
    pub fn into_rows(self, n: usize) -> Vec<f32> {
        match self {
            StartMargin::Constant(base) => base.iter().flat_map(|&b| std::iter::repeat_n(b, n)).collect(),
            StartMargin::Rows(rows) => rows,
        }
    }
}

/// A fit's rows as an engine receives them: columns (whose cut points the engine computes),
/// or already binned with their cuts (a streamed fit, `data::stream`).
pub enum FitRows<'a> {
    Columns(&'a FeatureFrame),
    Binned(BinnedView<'a>),
}

impl<'a> Fit<'a> {
    pub fn rows(&self) -> FitRows<'a> {
        match self.data.binned() {
            Some(b) => FitRows::Binned(b),
            None => FitRows::Columns(self.data.features()),
        }
    }
}

/// The boosting loop an engine runs a fit's learner in, given the fit's cut points.
pub type Boost<'a> = dyn FnMut(&[FeatureCuts], &mut dyn Learner) -> Result<()> + 'a;

/// The cut points of a fit's features computed on the host (`compute_cuts`, or the gathered
/// sketches of every worker), timed under `POLARS_GBT_PROFILE=1`.
pub(crate) fn host_cuts(fit: &Fit) -> Result<Vec<FeatureCuts>> {
    let clock = std::time::Instant::now();
    let weights = fit.data.weight.as_deref();
    let cuts = compute_cuts_sharded(&fit.data.features, weights, fit.cfg.max_bin, fit.cfg.seed, fit.shard)?;
    if crate::profile::on() {
        eprintln!("polars-gbt profile: cut points on the host {:.3} s", clock.elapsed().as_secs_f64());
    }
    Ok(cuts)
}

/// A kind of device the crate trains and scores on.
pub trait Engine: Sync {
    fn backend(&self) -> Backend;

    /// Whether this engine can run here; the error says why not.
    fn availability(&self) -> std::result::Result<(), String>;

    /// Why this engine cannot train `cfg`, when it cannot (besides not being available).
    fn unsupported(&self, cfg: &TrainConfig) -> Option<String>;

    /// Computes the cut points of `fit`'s features (over every worker's rows, the same bit for
    /// bit on every engine: [`CutSketch`](crate::data::cuts::CutSketch)'s algorithm), makes a
    /// learner on the rows binned with them, and hands both to `boost`, which runs the whole
    /// boosting loop; the engine's share of the device is held until `boost` returns.
    fn fit(&self, fit: Fit<'_>, boost: &mut Boost<'_>) -> Result<()>;

    /// Whether [`Engine::fit`] takes rows already binned ([`FitRows::Binned`]); the booster
    /// refuses such a fit on an engine that does not.
    fn takes_binned_rows(&self) -> bool {
        false
    }

    /// Where a streamed fit of `cfg` on one device bins its `n` rows (with `cuts`) as they
    /// stream (`data::stream_dataset_into`): a sink that keeps them where this engine trains
    /// (the GPU's memory, when they fit there), or None for the host matrix (the default).
    fn stream_bins(&self, _cfg: &TrainConfig, _n: usize, _cuts: &[FeatureCuts]) -> Result<Option<Box<dyn BinSink>>> {
        Ok(None)
    }

    /// Runs `work` once for each of `k` devices of this process, each as one worker of a
    /// distributed fit over the collective it is given (device `rank` of `k`); the result is
    /// the first failure, or success.
    fn on_each_device(&self, k: usize, work: &(dyn Fn(usize, &dyn Collective) -> Result<()> + Sync)) -> Result<()>;

    /// A collective over the devices of a distributed fit's workers, one device each (this
    /// worker's is its `ordinal`), started through `host` (the workers' host collective), for
    /// the device's own sums (NCCL between GPUs, as `n_gpus` uses in one process); None when
    /// this engine has none here. Every worker must call it with the same answer of
    /// [`Engine::has_device_collective`] (see [`device_collective`]).
    fn join_devices(
        &self,
        host: &dyn Collective,
        ordinal: usize,
        timeout: std::time::Duration,
    ) -> Result<Box<dyn Collective + Send + Sync>>;

    /// Whether [`Engine::join_devices`] can work here.
    fn has_device_collective(&self) -> bool;

    /// A model's forest laid out for this engine, to score any number of batches.
    fn predictor(&self, spec: &ForestSpec) -> Result<Arc<dyn Predictor + Send + Sync>>;
}
