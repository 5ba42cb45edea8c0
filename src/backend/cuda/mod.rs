//! The CUDA backend: the training matrix on the device and the whole boosting iteration in
//! kernels (`kernels/*.cu`, compiled by NVRTC for the device at run time).
//!
//! | step | kernel | `.cu` | component (Rust) |
//! |---|---|---|---|
//! | Arrow columns on the device | (copies) | | [`columns::DeviceColumns`] |
//! | cut points | `sample_rows`, `sample_values`, `sort_segments`, `segment_cuts` | `columns.cu` | [`cuts::device_cuts`] |
//! | binning | `bin_columns_*`, `count_present`, `place_columns_*`, `sort_rows` | `columns.cu`, `binning.cu`, `sparse.cu` | `binning.rs`, into [`data::DeviceMatrix`] |
//! | gradients, fixed point | `objective_*`, `gradient_max`, `quantise` | `gradients.cu` | `gradients::Gradients` |
//! | histograms, subtraction | `histogram_*`, `plan_children`, `derive_siblings` | `histogram.cu` | `histogram::HistogramBuilder` |
//! | split search | `evaluate_features`, `best_feature`; `evaluate_categorical`, `gather_runs`; `evaluate_vector`, `vector_left_sums` | `split.cu`, `split_categorical.cu`, `split_vector.cu` | `split::SplitEvaluator` |
//! | partition, margin update | `count_left_*`, `scatter`, `add_tree_*` | `partition.cu` | `partition::{RowPartitioner, MarginUpdate}` |
//! | evaluation sets' metrics | `metric_terms`, `halve_sums` (margins: `add_tree_*`) | `metric.cu` | `evaluation::DeviceEvaluation` |
//! | prediction | `predict_*`, `finish_predictions` | `predict.cu` | [`predict::GpuForest`] |
//! | SHAP values | `shap_contrib_*`, `shap_interactions` | `shap.cu` | [`shap::ShapPaths`] |
//!
//! Several GPUs of one process train as the workers of a distributed fit (`gpus.rs`), their
//! histograms summed in place through NCCL (`nccl.rs`).
//!
//! [`GpuLearner`] is these components; it implements the steps of the shared growth driver
//! (`tree::grow`, in `grow.rs`) and reads back only small things: each level's row counts and
//! best splits (a few bytes per node).

mod binning;
mod buffers;
pub mod columns;
pub mod cuts;
pub mod data;
pub mod engine;
mod evaluation;
pub mod forest;
pub mod gpus;
mod gradients;
mod grow;
mod histogram;
pub mod kernels;
mod launch;
pub mod layout;
pub mod learner;
pub mod nccl;
pub mod pages;
mod partition;
pub mod placement;
pub mod predict;
mod ranking;
mod refit;
pub mod runtime;
pub mod shap;
mod split;
pub mod stream_bins;
mod transfer;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, DriverError, ValidAsZeroBits};

use crate::error::{Error, Result};

pub use gpus::{join_workers, on_each_gpu};
pub use grow::GpuNode;
pub use learner::GpuLearner;
pub use predict::GpuForest;
pub use runtime::{availability, runtime, runtime_on, Runtime};

pub(crate) fn device_error(e: DriverError) -> Error {
    Error::Device(format!("CUDA error: {e}"))
}

const MIB: f64 = 1024.0 * 1024.0;

/// A tuning knob from the environment (for benchmarks and tests): `name`'s value, when it is
/// set and parses.
pub(crate) fn knob<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Device allocations of one fit, counted, with out-of-memory turned into an error that says
/// how much was asked for and how much was free. Buffers free themselves when dropped.
#[derive(Default)]
pub struct DeviceMemory {
    pub allocated: usize,
    pub peak: usize,
}

impl DeviceMemory {
    fn account<V>(&mut self, stream: &CudaStream, bytes: usize, r: std::result::Result<V, DriverError>) -> Result<V> {
        match r {
            Ok(v) => {
                self.allocated += bytes;
                self.peak = self.peak.max(self.allocated);
                Ok(v)
            }
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Err(out_of_memory(stream, bytes, self.allocated))
            }
            Err(e) => Err(device_error(e)),
        }
    }

    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(
        &mut self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        let len = len.max(1);
        let r = stream.alloc_zeros::<T>(len);
        self.account(stream, len * std::mem::size_of::<T>(), r)
    }

    /// A new device buffer holding `data`: large ones through pinned staging
    /// ([`transfer`]), as the driver's pageable copies run at a fraction of the link's speed.
    pub fn upload<T: DeviceRepr>(&mut self, stream: &Arc<CudaStream>, data: &[T]) -> Result<CudaSlice<T>> {
        let bytes = std::mem::size_of_val(data);
        if bytes <= transfer::SMALL_BYTES {
            let r = stream.clone_htod(data);
            return self.account(stream, bytes, r);
        }
        // SAFETY: uninitialised device memory, every byte of which is written below before use.
        let r = unsafe { stream.alloc::<T>(data.len()) };
        let mut dev = self.account(stream, bytes, r)?;
        // SAFETY: DeviceRepr types are plain data: their bytes are what the device reads.
        let raw = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, bytes) };
        let mut view =
            unsafe { dev.transmute_mut::<u8>(bytes) }.ok_or_else(|| Error::Device("a device buffer's bytes".into()))?;
        transfer::copy_pieces(stream, &[transfer::Piece { bytes: raw, at: 0 }], &mut view, bytes)?;
        Ok(dev)
    }

    /// Fails early when a fit needing `bytes` more cannot fit in what the GPU has free.
    pub fn check_fits(stream: &CudaStream, bytes: usize) -> Result<()> {
        let (free, _) = stream.context().mem_get_info().map_err(device_error)?;
        if bytes > free {
            return Err(out_of_memory(stream, bytes, 0));
        }
        Ok(())
    }
}

fn out_of_memory(stream: &CudaStream, bytes: usize, held: usize) -> Error {
    let (free, total) = stream.context().mem_get_info().unwrap_or((0, 0));
    Error::Device(format!(
        "the GPU is out of memory: this fit needs {:.0} MiB more (it holds {:.0} MiB), and {:.0} MiB of {:.0} MiB are free; \
         use fewer rows, a smaller max_bin, or device=\"cpu\"",
        bytes as f64 / MIB,
        held as f64 / MIB,
        free as f64 / MIB,
        total as f64 / MIB
    ))
}

/// The cut points of `data` as a one-GPU fit computes them, on GPU 0, from its columns copied
/// there (for tests and benchmarks: a fit computes them in [`learner::Ingest::cut_points`]).
pub fn cut_points(data: &crate::data::Dataset, max_bin: usize, seed: u64) -> Result<Vec<crate::data::FeatureCuts>> {
    let rt = runtime()?;
    let cfg = crate::config::TrainConfig { max_bin, seed, ..Default::default() };
    let mut ingest = GpuLearner::ingest(&rt, data, &cfg, &crate::collective::Solo)?;
    let rows = crate::collective::RowSpans::whole(data.n_rows());
    ingest.cut_points(data, max_bin, seed, &rows, &crate::collective::Solo)
}
