//! The CUDA [`Engine`]. What it keeps between fits lives in `runtime.rs`: each GPU's context,
//! stream, compiled kernels, pinned buffers and lanes, started on first use and kept for the
//! process.

use std::sync::Arc;

use super::data::DeviceMatrix;
use super::stream_bins::StreamedBins;
use super::{availability, join_workers, learner, nccl, on_each_gpu, placement, runtime_on, GpuForest, GpuLearner};
use crate::backend::{Backend, Boost, Engine, Fit, FitRows, Predictor};
use crate::collective::Collective;
use crate::config::{MultiStrategy, TrainConfig};
use crate::data::cuts::compute_cuts;
use crate::data::{BinSink, BinnedMatrix, BinnedRows, FeatureCuts};
use crate::error::{Error, Result};
use crate::prediction::ForestSpec;

/// A GPU fit of at most this many values (rows x features) shares the GPU with other small
/// fits, each on its own stream (`Runtime::take_turn`); a larger one has the GPU to itself.
/// 4M values is a few tens of MiB on the device, and enough rows to keep the GPU busy alone.
const SMALL_GPU_FIT_CELLS: usize = 1 << 22;

pub struct CudaEngine;

impl Engine for CudaEngine {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }

    fn availability(&self) -> std::result::Result<(), String> {
        availability()
    }

    fn unsupported(&self, cfg: &TrainConfig) -> Option<String> {
        learner::unsupported(cfg)
    }

    fn fit(&self, fit: Fit<'_>, boost: &mut Boost<'_>) -> Result<()> {
        let shard = fit.shard;
        // A worker of a fit over several GPUs trains on its communicator's GPU.
        let ordinal = shard.comm.device_sums().map_or(0, |d| d.ordinal());
        let rt = runtime_on(ordinal)?;
        // Small fits share the GPU (a lane each), a large one has it to itself; others queue
        // here. Not a distributed fit's worker: its fit waits on the other workers, which may
        // share this GPU (a fit over several GPUs took them whole).
        if shard.is_distributed() && fit.cfg.multi_strategy == MultiStrategy::MultiOutputTree {
            return Err(Error::param("multi_strategy", learner::VECTOR_ON_ONE_GPU));
        }
        if shard.is_distributed() && fit.cfg.max_device_memory.is_some() {
            // A Dask GPU worker's fit sums its histograms with the others': it does not page.
            return Err(Error::param(
                "max_device_memory",
                "limits a fit on one GPU: distributed GPU workers do not page their bins yet",
            ));
        }
        let whole = fit.data.n_rows() * fit.data.features.n_features().max(1) > SMALL_GPU_FIT_CELLS;
        let _turn = (!shard.is_distributed()).then(|| rt.take_turn(whole));
        if let FitRows::Binned(rows) = fit.rows() {
            // A streamed fit: its rows were binned on the host as they streamed, with the cut
            // points of every row (`data::stream`; a distributed fit's workers agreed on them
            // there). On one GPU of several, `rows` is its share.
            let (data, cfg, comm) = (fit.data, fit.cfg, shard.comm);
            if let Some(elsewhere) = &rows.all.elsewhere {
                // Binned on this GPU as they streamed (`stream_bins.rs`).
                let taken = elsewhere.take().ok_or_else(|| {
                    Error::Device("a stream's bins on the GPU train one fit: stream the data again for another".into())
                })?;
                let bins =
                    taken.downcast::<StreamedBins>().map_err(|_| Error::Device("bins of another engine".into()))?;
                if !Arc::ptr_eq(&bins.rt, &rt) || shard.is_distributed() {
                    return Err(Error::Device("a stream's bins on one GPU train a fit on that GPU only".into()));
                }
                let cuts = rows.cuts();
                let mut learner =
                    GpuLearner::on_streamed(&rt, *bins, data, cuts, fit.grow, cfg, &fit.margin, fit.refit, comm)?;
                return boost(cuts, &mut learner);
            }
            let mut learner = GpuLearner::from_binned(&rt, data, rows, fit.grow, cfg, &fit.margin, fit.refit, comm)?;
            return boost(rows.cuts(), &mut learner);
        }
        if !shard.is_distributed() && !placement::fits_in_core(&rt, fit.data, fit.cfg)? {
            // Columns that do not fit the GPU (or max_device_memory) with their bins: binned
            // on the host with the cut points the device would compute (the CPU's), as a
            // streamed fit's are, and placed as those (paged when the bins do not fit either).
            let (data, cfg, comm) = (fit.data, fit.cfg, shard.comm);
            let cuts = compute_cuts(&data.features, data.weight.as_deref(), cfg.max_bin, cfg.seed)?;
            let rows = BinnedRows::new(BinnedMatrix::new(&data.features, &cuts), cuts);
            let mut learner =
                GpuLearner::from_binned(&rt, data, rows.view(), fit.grow, cfg, &fit.margin, fit.refit, comm)?;
            return boost(&rows.cuts, &mut learner);
        }
        if !shard.is_distributed() && DeviceMatrix::ingests_in_batches(&fit.data.features, fit.cfg.max_bin) {
            // Wide dense data: its columns go to the device a batch of features at a time.
            let (data, cfg, comm) = (fit.data, fit.cfg, shard.comm);
            let (cuts, binned) = GpuLearner::bin_in_batches(&rt, data, cfg, &shard.rows)?;
            let mut learner = GpuLearner::on_matrix(binned, data, &cuts, fit.grow, cfg, &fit.margin, fit.refit, comm)?;
            return boost(&cuts, &mut learner);
        }
        let mut ingest = GpuLearner::ingest(&rt, fit.data, fit.cfg, shard.comm)?;
        // From the columns on the device; a distributed fit's workers gather their samples.
        let cuts = ingest.cut_points(fit.data, fit.cfg.max_bin, fit.cfg.seed, &shard.rows, shard.comm)?;
        let (data, cfg, comm) = (fit.data, fit.cfg, shard.comm);
        let mut learner = GpuLearner::start(ingest, data, &cuts, fit.grow, cfg, &fit.margin, fit.refit, comm)?;
        boost(&cuts, &mut learner)
    }

    fn takes_binned_rows(&self) -> bool {
        true
    }

    fn stream_bins(&self, cfg: &TrainConfig, n: usize, cuts: &[FeatureCuts]) -> Result<Option<Box<dyn BinSink>>> {
        if self.availability().is_err() {
            return Ok(None);
        }
        super::stream_bins::sink(runtime_on(0)?, cfg, n, cuts)
    }

    fn on_each_device(&self, k: usize, work: &(dyn Fn(usize, &dyn Collective) -> Result<()> + Sync)) -> Result<()> {
        on_each_gpu(k, work)
    }

    fn join_devices(
        &self,
        host: &dyn Collective,
        ordinal: usize,
        timeout: std::time::Duration,
    ) -> Result<Box<dyn Collective + Send + Sync>> {
        Ok(Box::new(join_workers(host, ordinal, timeout)?))
    }

    fn has_device_collective(&self) -> bool {
        nccl::probe().is_ok()
    }

    fn predictor(&self, spec: &ForestSpec) -> Result<Arc<dyn Predictor + Send + Sync>> {
        Ok(Arc::new(GpuForest::new(spec)?))
    }
}
