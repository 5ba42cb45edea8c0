//! `backend::cuda` when the `cuda` feature is off (candle's pattern): the names the rest of
//! the crate uses, so that no code outside `src/backend/` needs a `cfg`. [`availability`] and
//! [`runtime`] answer that this build has no CUDA backend; the GPU types are enums without
//! variants, so none can exist and their methods are `match *self {}`.

use std::sync::Arc;

use crate::backend::{Learner, Predictor};
use crate::config::TrainConfig;
use crate::data::{Dataset, FeatureColumn, FeatureCuts};
use crate::error::{Error, Result};
use crate::objective::{Loss, Targets};
use crate::prediction::{ForestSpec, PredictOutput, Predictions};
use crate::tree::GrowParams;
use crate::tree::Tree;

const NO_CUDA: &str = "this build of polars-gbt has no CUDA backend (the `cuda` feature is off)";

/// Why training cannot run on a GPU here: always, in this build.
pub fn availability() -> std::result::Result<(), String> {
    Err(NO_CUDA.into())
}

/// The CUDA runtime, which this build does not have.
pub fn runtime() -> Result<Arc<Runtime>> {
    Err(Error::Device(NO_CUDA.into()))
}

/// The runtime of one of several GPUs, which this build does not have.
pub fn runtime_on(_: usize) -> Result<Arc<Runtime>> {
    Err(Error::Device(NO_CUDA.into()))
}

/// Work on each of several GPUs: this build has none.
pub fn on_each_gpu<T: Send>(
    _: usize,
    _: impl Fn(usize, &dyn crate::collective::Collective) -> Result<T> + Sync,
) -> Result<T> {
    Err(Error::Device(NO_CUDA.into()))
}

/// The GPU and what was built for it; none exists in this build.
pub enum Runtime {}

/// A fit's share of a GPU; none exists in this build.
pub enum Turn {}

impl Runtime {
    /// A fit's share of the GPU.
    pub fn take_turn(&self, _whole: bool) -> Turn {
        match *self {}
    }
}

/// A model's forest on the device; none exists in this build.
pub enum GpuForest {}

impl GpuForest {
    /// Fails: this build has no CUDA backend.
    pub fn new(_: &ForestSpec) -> Result<Self> {
        Err(Error::Device(NO_CUDA.into()))
    }
}

impl Predictor for GpuForest {
    fn predict(&self, _: &[FeatureColumn], _: usize, _: Option<&[f32]>, _: PredictOutput) -> Result<Predictions> {
        match *self {}
    }
}

/// Training on the device; none exists in this build.
pub enum GpuLearner {}

impl GpuLearner {
    /// Mirrors the CUDA learner's constructor; unreachable, as no [`Runtime`] exists.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rt: &Runtime,
        _data: &Dataset,
        _cuts: &[FeatureCuts],
        _params: GrowParams,
        _cfg: &TrainConfig,
        _start_margin: &[f32],
        _refit: Option<crate::backend::refit::LeafRefit>,
        _comm: &dyn crate::collective::Collective,
    ) -> Result<Self> {
        match *rt {}
    }
}

impl Learner for GpuLearner {
    fn compute_gradients(&mut self, _: &dyn Loss, _: &Targets) -> Result<()> {
        match *self {}
    }

    fn grow(&mut self, _: usize, _: Option<&[u32]>, _: Vec<u32>, _: u64) -> Result<Tree> {
        match *self {}
    }
}

pub mod learner {
    pub use super::GpuLearner;

    /// Why the CUDA backend cannot train a configuration: in this build, it does not exist.
    pub fn unsupported(_: usize) -> Option<String> {
        Some(super::NO_CUDA.into())
    }
}
