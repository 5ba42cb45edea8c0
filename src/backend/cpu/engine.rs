//! The CPU's [`Engine`]: rayon on this process's threads, always available.

use std::borrow::Cow;
use std::sync::Arc;

use super::predict::FlatForest;
use super::{memory, CpuLearner};
use crate::backend::engine::host_cuts;
use crate::backend::{Backend, Boost, Engine, Fit, FitRows, Predictor};
use crate::collective::{Collective, Solo};
use crate::config::TrainConfig;
use crate::data::{BinnedMatrix, FeatureCuts};
use crate::error::{Error, Result};
use crate::prediction::ForestSpec;

pub struct CpuEngine;

impl Engine for CpuEngine {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }

    fn availability(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn unsupported(&self, _: &TrainConfig) -> Option<String> {
        None
    }

    fn fit(&self, fit: Fit<'_>, boost: &mut Boost<'_>) -> Result<()> {
        let (n, k) = (fit.data.n_rows(), fit.cfg.num_outputs());
        let (cuts, binned) = match fit.rows() {
            FitRows::Columns(features) => {
                let cuts = host_cuts(&fit)?;
                let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
                let width = BinnedMatrix::bin_width(&n_bins);
                memory::check_fits(memory::fit_bytes(n, cuts.len(), width, k), n, cuts.len())?;
                let binned = BinnedMatrix::new(features, &cuts);
                (Cow::Owned(cuts), Cow::Owned(binned))
            }
            // A streamed fit's bins exist already: only the per-row state is still to come.
            FitRows::Binned(rows) if rows.all.elsewhere.is_some() => {
                return Err(Error::Device("these rows were binned into a GPU's memory as they streamed".into()))
            }
            FitRows::Binned(rows) => {
                let nf = rows.cuts().len();
                memory::check_fits(memory::fit_bytes(n, nf, 0, k), n, nf)?;
                (Cow::Borrowed(rows.cuts()), rows.matrix())
            }
        };
        let weights = fit.data.weight.as_deref();
        let mut learner = CpuLearner::new(binned, &cuts, fit.grow, fit.margin.into_rows(n), weights, fit.refit)
            .with_collective(fit.shard.comm);
        boost(&cuts, &mut learner)
    }

    fn takes_binned_rows(&self) -> bool {
        true
    }

    fn on_each_device(&self, k: usize, work: &(dyn Fn(usize, &dyn Collective) -> Result<()> + Sync)) -> Result<()> {
        match k {
            1 => work(0, &Solo),
            _ => Err(Error::param("n_gpus", "trains on several GPUs: it needs device=\"cuda\" (or \"auto\")")),
        }
    }

    fn join_devices(
        &self,
        _: &dyn Collective,
        _: usize,
        _: std::time::Duration,
    ) -> Result<Box<dyn Collective + Send + Sync>> {
        Err(Error::Collective("the CPU's workers sum through their host collective".into()))
    }

    fn has_device_collective(&self) -> bool {
        false
    }

    fn predictor(&self, spec: &ForestSpec) -> Result<Arc<dyn Predictor + Send + Sync>> {
        Ok(Arc::new(FlatForest::new(spec)))
    }
}
