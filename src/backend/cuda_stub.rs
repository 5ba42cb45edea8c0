//! `backend::cuda` when the `cuda` feature is off (candle's pattern): the names the rest of
//! the crate uses, so that no code outside `src/backend/` needs a `cfg`. [`availability`] and
//! the [`engine::CudaEngine`] answer that this build has no CUDA backend.

const NO_CUDA: &str = "this build of polars-gbt has no CUDA backend (the `cuda` feature is off)";

/// Why training cannot run on a GPU here: always, in this build.
pub fn availability() -> std::result::Result<(), String> {
    Err(NO_CUDA.into())
}

pub mod engine {
    use std::sync::Arc;

    use crate::backend::{Backend, Boost, Engine, Fit, Predictor};
    use crate::collective::Collective;
    use crate::config::TrainConfig;
    use crate::error::{Error, Result};
    use crate::prediction::ForestSpec;

    /// The CUDA engine of a build without one: never available.
    pub struct CudaEngine;

    impl Engine for CudaEngine {
        fn backend(&self) -> Backend {
            Backend::Cuda
        }

        fn availability(&self) -> std::result::Result<(), String> {
            super::availability()
        }

        fn unsupported(&self, _: &TrainConfig) -> Option<String> {
            Some(super::NO_CUDA.into())
        }

        fn fit(&self, _: Fit<'_>, _: &mut Boost<'_>) -> Result<()> {
            Err(Error::Device(super::NO_CUDA.into()))
        }

        fn on_each_device(&self, _: usize, _: &(dyn Fn(usize, &dyn Collective) -> Result<()> + Sync)) -> Result<()> {
            Err(Error::Device(super::NO_CUDA.into()))
        }

        fn join_devices(
            &self,
            _: &dyn Collective,
            _: usize,
            _: std::time::Duration,
        ) -> Result<Box<dyn Collective + Send + Sync>> {
            Err(Error::Device(super::NO_CUDA.into()))
        }

        fn has_device_collective(&self) -> bool {
            false
        }

        fn predictor(&self, _: &ForestSpec) -> Result<Arc<dyn Predictor + Send + Sync>> {
            Err(Error::Device(super::NO_CUDA.into()))
        }
    }
}
