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
use crate::collective::{Collective, RowSpans};
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
        // Every worker's sample count: the merged segments hold them all, rank after rank.
        let counts: Vec<usize> = match comm.world() {
            1 => vec![sampled.len()],
            _ => comm
                .all_gather(&(sampled.len() as u64).to_le_bytes())?
                .iter()
                .map(|b| b.as_slice().try_into().map(|b| u64::from_le_bytes(b) as usize))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| Error::Collective("a worker's sample count is malformed".into()))?,
        };
        // How the workers' samples meet: GPUs of one NCCL communicator gather them on the
        // devices, each rank's part padded to the largest (NO_SAMPLE sorts last); workers
        // without one through the host.
        let world = comm.world();
        let n_local = sampled.len();
        let n_max = counts.iter().copied().max().unwrap_or(0);
        let device = comm.device_sums().filter(|_| world > 1);
        let (stride, len) = match (world, device) {
            (1, _) => (n_local, n_local),
            (_, Some(_)) => (n_max, world * n_max),
            _ => (n_local, counts.iter().sum::<usize>()),
        };
        let segment = len.max(1);
        let per_batch = (SAMPLE_BYTES / (16 * segment)).clamp(1, numeric.len());
        let budget = max_bin - 1;
        let mut keys = memory.zeros::<u64>(stream, per_batch * segment)?;
        let mut tmp = memory.zeros::<u64>(stream, per_batch * segment)?;
        let mut out = memory.zeros::<f32>(stream, per_batch * budget)?;
        let mut n_cuts = memory.zeros::<u32>(stream, per_batch)?;
        let mut thresholds = memory.zeros::<f64>(stream, per_batch * (budget + 2))?;
        for batch in numeric.chunks(per_batch) {
            let features = memory.upload(stream, batch)?;
            let n_segments = batch.len() as u32;
            {
                // One worker samples into the segments; several into `tmp`, this worker's
                // part, gathered below.
                let target = if world == 1 { &mut keys } else { &mut tmp };
                let mut p = Pins::new(stream);
                let sample = SampleValuesArgs {
                    columns: columns.pin(&mut p),
                    features: p.read(&features),
                    n_segments,
                    n_sample: n_local as u32,
                    rows: p.read(&sampled.dev),
                    weights: p.read_opt(weights),
                    keys: p.write(target),
                    stride: stride as u32,
                    pad: 0,
                };
                let cfg = grid_for(rt.sm_count, n_segments as u64 * stride as u64, 256);
                // SAFETY: the target holds n_segments x stride keys (stride <= len); the
                // sampled rows are below the columns' rows; `features` holds n_segments features.
                unsafe { launch(stream, &rt.kernels.sample_values, &sample, cfg)? };
            }
            match (world, device) {
                (1, _) => {}
                (_, Some(sums)) => {
                    let (send, _s) = tmp.device_ptr(stream);
                    let (receive, _r) = keys.device_ptr_mut(stream);
                    let parts: Vec<(u64, u64)> = (0..batch.len() as u64)
                        .map(|s| (send + s * 8 * stride as u64, receive + s * 8 * len as u64))
                        .collect();
                    // SAFETY: segment s of tmp holds `stride` keys and of keys `world * stride`,
                    // both on this GPU, written on its runtime's stream (the fit's, for a worker
                    // of a fit over several GPUs).
                    unsafe { sums.gather_in_place(&parts, 8 * stride)? };
                }
                _ => {
                    let mine = stream.clone_dtoh(&tmp.slice(..batch.len() * stride)).map_err(device_error)?;
                    let merged = merge_samples(comm, &mine, batch.len(), &counts)?;
                    stream.memcpy_htod(&merged, &mut keys.slice_mut(..merged.len())).map_err(device_error)?;
                }
            }
            laps.lap(1)?;
            let len = len as u32;
            {
                let mut p = Pins::new(stream);
                let sort = SortSegmentsArgs { keys: p.write(&mut keys), tmp: p.write(&mut tmp), len, n_segments };
                let cfg =
                    LaunchConfig { grid_dim: (n_segments, 1, 1), block_dim: (SORT_THREADS, 1, 1), shared_mem_bytes: 0 };
                // SAFETY: keys and tmp hold n_segments segments of `len` keys.
                unsafe { launch(stream, &rt.kernels.sort_segments, &sort, cfg)? };
            }
            laps.lap(2)?;
            let mut p = Pins::new(stream);
            let scan = SegmentCutsArgs {
                keys: p.read(&keys),
                len,
                n_segments,
                budget: budget as u32,
                pad: 0,
                cuts: p.write(&mut out),
                n_cuts: p.write(&mut n_cuts),
                thresholds: p.write(&mut thresholds),
            };
            let cfg =
                LaunchConfig { grid_dim: (n_segments, 1, 1), block_dim: (CUT_THREADS, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: keys hold n_segments sorted segments of `len`; out holds budget floats a
            // segment, n_cuts one count, thresholds budget + 2.
            unsafe { launch(stream, &rt.kernels.segment_cuts, &scan, cfg)? };
            drop(p);
            laps.lap(3)?;
            let counts = stream.clone_dtoh(&n_cuts.slice(..batch.len())).map_err(device_error)?;
            let values = stream.clone_dtoh(&out.slice(..batch.len() * budget)).map_err(device_error)?;
            for (s, &f) in batch.iter().enumerate() {
                let c = values[s * budget..s * budget + counts[s] as usize].to_vec();
                cuts[f as usize] = Some(FeatureCuts::Numeric { cuts: c });
            }
            memory.allocated -= 4 * features.len();
        }
        memory.allocated -=
            16 * keys.len() + 4 * out.len() + 4 * n_cuts.len() + 8 * thresholds.len() + 4 * sampled.dev.len();
    }
    laps.report();
    Ok(cuts.into_iter().map(|c| c.expect("every feature's cuts are set")).collect())
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
