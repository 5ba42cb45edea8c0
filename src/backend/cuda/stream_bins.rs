//! A streamed fit's bins made on the GPU (issue 36, item 2): pass 2 hands each batch's columns
//! to the device in Arrow's layout (`DeviceColumns`), where they are binned straight into
//! their rows of the training matrix and freed, so the bins never exist on the host and no
//! float column is ever whole, on the host or the device. Chosen when the bins, the fit's
//! per-row state and its histograms fit the GPU (and `max_device_memory`) beside a batch;
//! otherwise the host bins the rows, to be placed (or paged) as before.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream};

use super::binning::bin_columns;
use super::columns::DeviceColumns;
use super::data::{BinTables, DeviceBins, DeviceMatrix};
use super::placement::{besides_bins_at_most, device_limit, place_bins, Placement};
use super::runtime::Runtime;
use super::{device_error, DeviceMemory};
use crate::config::TrainConfig;
use crate::data::{BinSink, BinnedMatrix, FeatureCuts, FeatureFrame};
use crate::error::{Error, Result};

/// Device memory kept free for a batch's columns while they are binned (Parquet slices are at
/// most 64 MiB of decoded columns; a streaming engine's batches are smaller).
const BATCH_ROOM: usize = 512 << 20;

/// The training matrix of a streamed fit, binned on the device: the learner's to take
/// (`GpuLearner::on_streamed`), with the stream and the memory account it was made on.
pub struct StreamedBins {
    pub(super) rt: Arc<Runtime>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) memory: DeviceMemory,
    pub(super) matrix: DeviceMatrix,
    /// When pass 2 started, for the profile's time to the training matrix.
    pub(super) clock: Instant,
}

/// Bins a stream's batches on the device as pass 2 reads them.
struct DeviceSink {
    rt: Arc<Runtime>,
    stream: Arc<CudaStream>,
    memory: DeviceMemory,
    tables: BinTables,
    bins: DeviceBins,
    any_present: CudaSlice<u32>,
    n_rows: usize,
    stride: usize,
    filled: usize,
    clock: Instant,
}

/// The sink of a one-GPU streamed fit of `cfg` over `n` rows with `cuts`, when its bins and
/// state fit the GPU's free memory (and `max_device_memory`) with room for a batch; None
/// otherwise (the host bins them, and the fit places them in core or pages them).
pub fn sink(rt: Arc<Runtime>, cfg: &TrainConfig, n: usize, cuts: &[FeatureCuts]) -> Result<Option<Box<dyn BinSink>>> {
    // POLARS_GBT_STREAM_BINS=host bins on the host as before (to compare); so do the paging
    // tests' knobs, through place_bins.
    let host = super::knob::<String>("POLARS_GBT_STREAM_BINS").is_some_and(|w| w == "host");
    if cfg.n_gpus > 1 || host {
        return Ok(None);
    }
    let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
    let width = BinnedMatrix::bin_width(&n_bins);
    let stride = cuts.len().next_multiple_of(4 / width);
    let (free, _) = rt.stream.context().mem_get_info().map_err(device_error)?;
    let room = free.saturating_sub(BATCH_ROOM);
    let limit = device_limit(cfg).map(|l| l.saturating_sub(BATCH_ROOM));
    let besides = besides_bins_at_most(n, cuts, cfg);
    match place_bins(n, stride * width, besides, 0, room, limit) {
        Ok((Placement::InCore, _)) => {}
        _ => return Ok(None),
    }
    let stream = rt.stream.context().new_stream().map_err(device_error)?;
    let mut memory = DeviceMemory::default();
    let bins = match width {
        1 => DeviceBins::U8(memory.zeros(&stream, n * stride)?),
        2 => DeviceBins::U16(memory.zeros(&stream, n * stride)?),
        _ => DeviceBins::U32(memory.zeros(&stream, n * stride)?),
    };
    let tables = BinTables::upload(&stream, &mut memory, cuts)?;
    let any_present = memory.zeros::<u32>(&stream, 1)?;
    let clock = Instant::now();
    Ok(Some(Box::new(DeviceSink {
        rt,
        stream,
        memory,
        tables,
        bins,
        any_present,
        n_rows: n,
        stride,
        filled: 0,
        clock,
    })))
}

impl BinSink for DeviceSink {
    /// Half the room kept for a batch: the columns of a larger batch go up in pieces.
    fn max_rows(&self, frame: &FeatureFrame) -> usize {
        let bytes = DeviceColumns::bytes_for(frame).max(1);
        match bytes <= BATCH_ROOM / 2 {
            true => usize::MAX,
            false => (frame.n_rows() as u128 * (BATCH_ROOM / 2) as u128 / bytes as u128) as usize,
        }
    }

    fn fill(&mut self, at: usize, frame: &FeatureFrame, _cuts: &[FeatureCuts]) -> Result<()> {
        let n = frame.n_rows();
        if at + n > self.n_rows {
            return Err(Error::data(format!("rows {at}..{} past the stream's {} rows", at + n, self.n_rows)));
        }
        let columns = DeviceColumns::upload(&self.stream, &mut self.memory, frame)?;
        let binning = self.tables.binning();
        let (rt, stream) = (&self.rt, &self.stream);
        bin_columns(rt, stream, &columns, &binning, self.stride, (at, 0), &mut self.any_present, &mut self.bins, None)?;
        // The batch's columns are freed before the next batch's come.
        self.stream.synchronize().map_err(device_error)?;
        self.memory.allocated -= columns.bytes;
        drop(columns);
        self.filled += n;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Box<dyn Any + Send>> {
        let DeviceSink { rt, stream, memory, tables, bins, n_rows, stride, filled, clock, .. } = *self;
        if filled != n_rows {
            return Err(Error::data(format!("{filled} rows binned of the stream's {n_rows}")));
        }
        let matrix = tables.into_matrix(bins, n_rows, stride, None, None);
        Ok(Box::new(StreamedBins { rt, stream, memory, matrix, clock }))
    }
}
