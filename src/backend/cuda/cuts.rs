//! Cut points on the device, from the columns already there: [`CutSketch`]'s algorithm ported
//! (kernels/columns.cu), not another sketch. The rows of the sample are the CPU's (a hash of
//! the seed and the global row, rows of weight zero left out), each numeric feature's sampled
//! present values are sorted as the CPU sorts them (value, then weight), and one sequential
//! f64 scan per feature places the cuts, so they equal the CPU's bit for bit and the CPU and
//! GPU trees stay byte-identical. Features are done a batch at a time, so that the samples'
//! memory stays within [`SAMPLE_BYTES`] however wide the data.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::columns::{Columns, DeviceColumns};
use super::launch::{grid_for, kernel_args, launch, DevPtr, DevPtrMut, Pins};
use super::runtime::Runtime;
use super::{device_error, DeviceMemory};
use crate::collective::{Collective, DeviceSums, RowSpans};
use crate::data::cuts::{sample_key, sample_threshold, CutSketch};
use crate::data::{FeatureCuts, FeatureFrame};
use crate::error::{Error, Result};

/// Device bytes of the sampled values (and their sort's second buffer) held at once.
const SAMPLE_BYTES: usize = 256 << 20;
/// Threads of a block of `sort_segments` (`SORT_THREADS`) and of `segment_cuts` (`CUT_THREADS`).
pub(super) const SORT_THREADS: u32 = 1024;
pub(super) const CUT_THREADS: u32 = 1024;

/// `sample_rows`.
#[repr(C)]
pub struct SampleRowsArgs<'a> {
    pub weights: DevPtr<'a, f32>,
    pub n_rows: u32,
    pub n_spans: u32,
    pub span_global: DevPtr<'a, u64>,
    pub span_local: DevPtr<'a, u32>,
    pub seed: u64,
    pub keep_below: u64,
    pub count: DevPtrMut<'a, u32>,
    pub rows: DevPtrMut<'a, u32>,
}

/// `sample_values`: segment s holds feature `features[s]`'s key in each sampled row.
#[repr(C)]
pub struct SampleValuesArgs<'a> {
    pub columns: Columns<'a>,
    pub features: DevPtr<'a, u32>,
    pub n_segments: u32,
    pub n_sample: u32,
    pub rows: DevPtr<'a, u32>,
    pub weights: DevPtr<'a, f32>,
    pub keys: DevPtrMut<'a, u64>,
    pub stride: u32,
    pub pad: u32,
}

/// `sort_segments`.
#[repr(C)]
pub struct SortSegmentsArgs<'a> {
    pub keys: DevPtrMut<'a, u64>,
    pub tmp: DevPtrMut<'a, u64>,
    pub len: u32,
    pub n_segments: u32,
}

/// `segment_cuts`.
#[repr(C)]
pub struct SegmentCutsArgs<'a> {
    pub keys: DevPtr<'a, u64>,
    pub len: u32,
    pub n_segments: u32,
    pub budget: u32,
    pub pad: u32,
    pub cuts: DevPtrMut<'a, f32>,
    pub n_cuts: DevPtrMut<'a, u32>,
    pub thresholds: DevPtrMut<'a, f64>,
}

kernel_args!(SampleRowsArgs, SampleValuesArgs, SortSegmentsArgs, SegmentCutsArgs);

/// The cut points of `frame`'s features, whose columns are `columns` on the device, weighted
/// by `weights` (on the device, one per row): what
/// [`compute_cuts`](crate::data::cuts::compute_cuts) gives on the host, bit for bit. In a
/// distributed fit (`comm`, this worker's rows placed by `rows`) every worker samples its own
/// rows by their global index, the samples are gathered (in rank order: the sort makes the
/// order moot), and every worker sorts and scans all of them, as `compute_cuts_sharded` does.
#[allow(clippy::too_many_arguments)]
pub fn device_cuts(
    rt: &Runtime,
    stream: &Arc<CudaStream>,
    memory: &mut DeviceMemory,
    frame: &FeatureFrame,
    columns: &DeviceColumns,
    weights: Option<&CudaSlice<f32>>,
    max_bin: usize,
    seed: u64,
    rows: &RowSpans,
    comm: &dyn Collective,
) -> Result<Vec<FeatureCuts>> {
    // Checks the categorical columns as the host does (no rows are read).
    CutSketch::new(frame, seed, rows.n_global())?;
    let numeric: Vec<u32> =
        (0..frame.n_features() as u32).filter(|&f| !frame.columns()[f as usize].is_categorical()).collect();
    let mut cuts: Vec<Option<FeatureCuts>> = frame
        .columns()
        .iter()
        .map(|c| c.categories().map(|cats| FeatureCuts::Categorical { n_categories: cats.len() as u32 }))
        .collect();
    let mut laps = Laps::new(stream);
    if !numeric.is_empty() {
        let sampled = sample_rows(rt, stream, memory, frame.n_rows(), weights, seed, rows)?;
        laps.lap(0)?;
        let segments = Segments::new(comm, sampled.len())?;
        let mut scan = SegmentScan::new(stream, memory, &segments, numeric.len(), max_bin)?;
        for batch in numeric.chunks(scan.per_batch) {
            let features = memory.upload(stream, batch)?;
            let sample = Sample { columns, features: &features, rows: &sampled, weights };
            scan.sample_values(rt, stream, &segments, sample, batch.len())?;
            scan.gather(stream, comm, &segments, batch.len())?;
            laps.lap(1)?;
            scan.sort(rt, stream, &segments, batch.len())?;
            laps.lap(2)?;
            scan.place_cuts(rt, stream, &segments, batch.len())?;
            laps.lap(3)?;
            for (&f, c) in batch.iter().zip(scan.read_cuts(stream, batch.len())?) {
                cuts[f as usize] = Some(c);
            }
            memory.allocated -= 4 * features.len();
        }
        memory.allocated -= scan.bytes() + 4 * sampled.dev.len();
    }
    laps.report();
    Ok(cuts.into_iter().map(|c| c.expect("every feature's cuts are set")).collect())
}

/// How the workers' samples meet in each feature's segment of sorted keys: GPUs of one NCCL
/// communicator gather them on the devices, each rank's part padded to the largest
/// (NO_SAMPLE sorts last); workers without one through the host.
struct Segments<'c> {
    world: usize,
    /// The workers' device collective, in a fit over several GPUs of one communicator.
    device: Option<&'c dyn DeviceSums>,
    /// Every worker's sample count: the merged segments hold them all, rank after rank.
    counts: Vec<usize>,
    /// This worker's sampled rows.
    n_local: usize,
    /// Keys of a segment this worker samples into, and of a merged segment.
    stride: usize,
    len: usize,
}

impl<'c> Segments<'c> {
    fn new(comm: &'c dyn Collective, n_local: usize) -> Result<Self> {
        let counts: Vec<usize> = match comm.world() {
            1 => vec![n_local],
            _ => comm
                .all_gather(&(n_local as u64).to_le_bytes())?
                .iter()
                .map(|b| b.as_slice().try_into().map(|b| u64::from_le_bytes(b) as usize))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| Error::Collective("a worker's sample count is malformed".into()))?,
        };
        let world = comm.world();
        let n_max = counts.iter().copied().max().unwrap_or(0);
        let device = comm.device_sums().filter(|_| world > 1);
        let (stride, len) = match (world, device) {
            (1, _) => (n_local, n_local),
            (_, Some(_)) => (n_max, world * n_max),
            _ => (n_local, counts.iter().sum::<usize>()),
        };
        Ok(Segments { world, device, counts, n_local, stride, len })
    }
}

/// What `sample_values` reads for a batch: the columns, the batch's features (on the device),
/// the sampled rows and their weights.
struct Sample<'a> {
    columns: &'a DeviceColumns,
    features: &'a CudaSlice<u32>,
    rows: &'a SampledRows,
    weights: Option<&'a CudaSlice<f32>>,
}

/// The device buffers of a batch of features' segments: the sampled keys (and the sort's
/// second buffer, where several workers' samples are first written), and what the scan places.
struct SegmentScan {
    /// Features a batch at most.
    per_batch: usize,
    /// Cuts a feature at most (`max_bin - 1`).
    budget: usize,
    keys: CudaSlice<u64>,
    tmp: CudaSlice<u64>,
    out: CudaSlice<f32>,
    n_cuts: CudaSlice<u32>,
    thresholds: CudaSlice<f64>,
}

impl SegmentScan {
    fn new(
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        segments: &Segments,
        n_numeric: usize,
        max_bin: usize,
    ) -> Result<Self> {
        let segment = segments.len.max(1);
        let per_batch = (SAMPLE_BYTES / (16 * segment)).clamp(1, n_numeric);
        let budget = max_bin - 1;
        Ok(SegmentScan {
            per_batch,
            budget,
            keys: memory.zeros::<u64>(stream, per_batch * segment)?,
            tmp: memory.zeros::<u64>(stream, per_batch * segment)?,
            out: memory.zeros::<f32>(stream, per_batch * budget)?,
            n_cuts: memory.zeros::<u32>(stream, per_batch)?,
            thresholds: memory.zeros::<f64>(stream, per_batch * (budget + 2))?,
        })
    }

    /// Device bytes of the buffers, as the fit's memory account counts them.
    fn bytes(&self) -> usize {
        16 * self.keys.len() + 4 * self.out.len() + 4 * self.n_cuts.len() + 8 * self.thresholds.len()
    }

    /// Queues the sampling of the batch's `n_segments` features' keys: one worker's into the
    /// segments; several workers' into `tmp`, this worker's part, gathered by [`Self::gather`].
    fn sample_values(
        &mut self,
        rt: &Runtime,
        stream: &Arc<CudaStream>,
        segments: &Segments,
        sample: Sample,
        n_segments: usize,
    ) -> Result<()> {
        let target = if segments.world == 1 { &mut self.keys } else { &mut self.tmp };
        let mut p = Pins::new(stream);
        let args = SampleValuesArgs {
            columns: sample.columns.pin(&mut p),
            features: p.read(sample.features),
            n_segments: n_segments as u32,
            n_sample: segments.n_local as u32,
            rows: p.read(&sample.rows.dev),
            weights: p.read_opt(sample.weights),
            keys: p.write(target),
            stride: segments.stride as u32,
            pad: 0,
        };
        let cfg = grid_for(rt.sm_count, n_segments as u64 * segments.stride as u64, 256);
        // SAFETY: the target holds n_segments x stride keys (stride <= len); the
        // sampled rows are below the columns' rows; `features` holds n_segments features.
        unsafe { launch(stream, &rt.kernels.sample_values, &args, cfg) }
    }

    /// Several workers' samples of the batch's `n_segments` features merged into the segments,
    /// rank after rank: on the devices, or through the host.
    fn gather(
        &mut self,
        stream: &Arc<CudaStream>,
        comm: &dyn Collective,
        segments: &Segments,
        n_segments: usize,
    ) -> Result<()> {
        let (stride, len) = (segments.stride, segments.len);
        match (segments.world, segments.device) {
            (1, _) => {}
            (_, Some(sums)) => {
                let (send, _s) = self.tmp.device_ptr(stream);
                let (receive, _r) = self.keys.device_ptr_mut(stream);
                let parts: Vec<(u64, u64)> = (0..n_segments as u64)
                    .map(|s| (send + s * 8 * stride as u64, receive + s * 8 * len as u64))
                    .collect();
                // SAFETY: segment s of tmp holds `stride` keys and of keys `world * stride`,
                // both on this GPU, written on its runtime's stream (the fit's, for a worker
                // of a fit over several GPUs).
                unsafe { sums.gather_in_place(&parts, 8 * stride)? };
            }
            _ => {
                let mine = stream.clone_dtoh(&self.tmp.slice(..n_segments * stride)).map_err(device_error)?;
                let merged = merge_samples(comm, &mine, n_segments, &segments.counts)?;
                stream.memcpy_htod(&merged, &mut self.keys.slice_mut(..merged.len())).map_err(device_error)?;
            }
        }
        Ok(())
    }

    /// Queues the sorting of each of the `n_segments` segments' keys.
    fn sort(&mut self, rt: &Runtime, stream: &Arc<CudaStream>, segments: &Segments, n_segments: usize) -> Result<()> {
        let (len, n_segments) = (segments.len as u32, n_segments as u32);
        let mut p = Pins::new(stream);
        let sort = SortSegmentsArgs { keys: p.write(&mut self.keys), tmp: p.write(&mut self.tmp), len, n_segments };
        let cfg = LaunchConfig { grid_dim: (n_segments, 1, 1), block_dim: (SORT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: keys and tmp hold n_segments segments of `len` keys.
        unsafe { launch(stream, &rt.kernels.sort_segments, &sort, cfg) }
    }

    /// Queues the scan that places each sorted segment's cuts.
    fn place_cuts(
        &mut self,
        rt: &Runtime,
        stream: &Arc<CudaStream>,
        segments: &Segments,
        n_segments: usize,
    ) -> Result<()> {
        let n_segments = n_segments as u32;
        let mut p = Pins::new(stream);
        let scan = SegmentCutsArgs {
            keys: p.read(&self.keys),
            len: segments.len as u32,
            n_segments,
            budget: self.budget as u32,
            pad: 0,
            cuts: p.write(&mut self.out),
            n_cuts: p.write(&mut self.n_cuts),
            thresholds: p.write(&mut self.thresholds),
        };
        let cfg = LaunchConfig { grid_dim: (n_segments, 1, 1), block_dim: (CUT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: keys hold n_segments sorted segments of `len`; out holds budget floats a
        // segment, n_cuts one count, thresholds budget + 2.
        unsafe { launch(stream, &rt.kernels.segment_cuts, &scan, cfg) }
    }

    /// The placed cuts of the batch's `n_segments` features, read back.
    fn read_cuts(&self, stream: &Arc<CudaStream>, n_segments: usize) -> Result<Vec<FeatureCuts>> {
        let budget = self.budget;
        let counts = stream.clone_dtoh(&self.n_cuts.slice(..n_segments)).map_err(device_error)?;
        let values = stream.clone_dtoh(&self.out.slice(..n_segments * budget)).map_err(device_error)?;
        Ok((0..n_segments)
            .map(|s| FeatureCuts::Numeric { cuts: values[s * budget..s * budget + counts[s] as usize].to_vec() })
            .collect())
    }
}

/// The cut points' steps timed under `POLARS_GBT_PROFILE=1` (each then ends with a device
/// synchronisation).
struct Laps<'s> {
    stream: Option<&'s CudaStream>,
    last: std::time::Instant,
    seconds: [f64; 4],
}

impl<'s> Laps<'s> {
    fn new(stream: &'s CudaStream) -> Self {
        let on = crate::profile::on();
        Laps { stream: on.then_some(stream), last: std::time::Instant::now(), seconds: [0.0; 4] }
    }

    fn lap(&mut self, step: usize) -> Result<()> {
        if let Some(stream) = self.stream {
            stream.synchronize().map_err(device_error)?;
            self.seconds[step] += self.last.elapsed().as_secs_f64();
            self.last = std::time::Instant::now();
        }
        Ok(())
    }

    fn report(&self) {
        if self.stream.is_some() {
            let [rows, values, sort, scan] = self.seconds;
            eprintln!(
                "polars-gbt profile: device cut points: sample rows {rows:.4} s, values {values:.4} s, \
                 sort {sort:.4} s, scan {scan:.4} s"
            );
        }
    }
}

/// Every worker's sample keys of a batch of `n_segments` features (`mine`: this worker's,
/// feature-major), merged feature by feature in rank order: segment s is rank 0's keys of
/// feature s, then rank 1's, and so on (`counts`: each rank's sampled rows).
fn merge_samples(comm: &dyn Collective, mine: &[u64], n_segments: usize, counts: &[usize]) -> Result<Vec<u64>> {
    let bytes: Vec<u8> = mine.iter().flat_map(|k| k.to_le_bytes()).collect();
    let all = comm.all_gather(&bytes)?;
    let len: usize = counts.iter().sum();
    let mut merged = vec![0u64; n_segments * len];
    let mut at = 0;
    for (rank, (part, &n)) in all.iter().zip(counts).enumerate() {
        if part.len() != 8 * n_segments * n {
            return Err(Error::Collective(format!("worker {rank}'s cut point samples are malformed")));
        }
        for s in 0..n_segments {
            let keys = part[8 * s * n..8 * (s + 1) * n].chunks_exact(8);
            for (o, k) in merged[s * len + at..s * len + at + n].iter_mut().zip(keys) {
                *o = u64::from_le_bytes(k.try_into().expect("8 bytes"));
            }
        }
        at += n;
    }
    Ok(merged)
}

/// The sampled rows on the device, in no order.
struct SampledRows {
    dev: CudaSlice<u32>,
    count: usize,
}

impl SampledRows {
    fn len(&self) -> usize {
        self.count
    }
}

/// The rows of the cut points' sample (`CutSketch`'s: by a hash of the seed and the row's
/// global index, at the rate the fit's global row count sets, rows of weight zero left out):
/// counted, then listed.
fn sample_rows(
    rt: &Runtime,
    stream: &Arc<CudaStream>,
    memory: &mut DeviceMemory,
    n_rows: usize,
    weights: Option<&CudaSlice<f32>>,
    seed: u64,
    rows: &RowSpans,
) -> Result<SampledRows> {
    let mut count = memory.zeros::<u32>(stream, 1)?;
    let (keep_below, key) = (sample_threshold(rows.n_global()), sample_key(seed));
    let span_global: Vec<u64> = rows.spans().iter().map(|&(start, _)| start).collect();
    let span_local: Vec<u32> =
        rows.spans().iter().scan(0u64, |at, &(_, len)| Some(std::mem::replace(at, *at + len) as u32)).collect();
    let (span_global, span_local) = (memory.upload(stream, &span_global)?, memory.upload(stream, &span_local)?);
    let cfg = grid_for(rt.sm_count, n_rows as u64, 256);
    let mut rows_dev: Option<CudaSlice<u32>> = None;
    // Twice: the first launch counts the rows, the second lists them.
    for listing in [false, true] {
        if listing {
            let n = stream.clone_dtoh(&count).map_err(device_error)?[0] as usize;
            rows_dev = Some(memory.zeros::<u32>(stream, n.max(1))?);
            stream.memset_zeros(&mut count).map_err(device_error)?;
        }
        let mut p = Pins::new(stream);
        let args = SampleRowsArgs {
            weights: p.read_opt(weights),
            n_rows: n_rows as u32,
            n_spans: span_local.len() as u32,
            span_global: p.read(&span_global),
            span_local: p.read(&span_local),
            seed: key,
            keep_below,
            count: p.write(&mut count),
            rows: rows_dev.as_mut().map_or(DevPtrMut::NULL, |r| p.write(r)),
        };
        // SAFETY: weights (when given) hold n_rows values; the spans cover the n_rows rows;
        // count is one counter and rows (when given) holds the rows the first launch counted.
        unsafe { launch(stream, &rt.kernels.sample_rows, &args, cfg)? };
    }
    let n = stream.clone_dtoh(&count).map_err(device_error)?[0] as usize;
    memory.allocated -= 4 + 8 * span_global.len() + 4 * span_local.len();
    Ok(SampledRows { dev: rows_dev.expect("the second launch listed the rows"), count: n })
}
