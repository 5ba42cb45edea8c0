//! The ranking objectives' gradients on the device (`kernels/ranking.cu`): the tables fixed by
//! the labels go up once per fit, then each round one launch (a block per query group) ranks
//! each query's documents (a sort in shared memory for long queries) and turns the margins
//! into float gradient pairs, which `Gradients` quantises as any other.

use cudarc::driver::CudaSlice;

use super::buffers::FitDevice;
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut};
use super::layout::GradPair;
use crate::error::{Error, Result};
use crate::objective::{PairMetric, RankingParams, RankingTables, Targets};

/// Threads per query group (RANK_THREADS in the kernel).
const THREADS: u32 = 128;
/// Queries up to this long are ranked by counting, longer ones by a sort (RANK_COUNT_MAX).
const COUNT_MAX: usize = 128;

/// `lambdarank`'s arguments (kernels/ranking.cu). Null `weight`: none.
#[repr(C)]
pub struct LambdarankArgs<'a> {
    pub score: DevPtr<'a, f32>,
    pub label: DevPtr<'a, f32>,
    pub gain: DevPtr<'a, f64>,
    pub inv_idcg: DevPtr<'a, f64>,
    pub discount: DevPtr<'a, f64>,
    pub offsets: DevPtr<'a, u32>,
    pub weight: DevPtr<'a, f32>,
    pub top_k: u32,
    /// RANK_PAIRWISE, RANK_NDCG or RANK_MAP.
    pub metric: u32,
    pub normalise: u32,
    pub score_normalise: u32,
    pub sort_capacity: u32,
    pub position: DevPtrMut<'a, u32>,
    pub ranked: DevPtrMut<'a, u32>,
    pub sums: DevPtrMut<'a, f64>,
    pub relevant: DevPtrMut<'a, u32>,
    pub precision_sum: DevPtrMut<'a, f64>,
    pub out: DevPtrMut<'a, GradPair>,
}

kernel_args!(LambdarankArgs);

pub(super) struct RankingGradients {
    offsets: CudaSlice<u32>,
    gain: CudaSlice<f64>,
    inv_idcg: CudaSlice<f64>,
    discount: CudaSlice<f64>,
    /// Scratch: each row's rank in its query, the row at each rank, and its (g, h, |lambda|) sums.
    position: CudaSlice<u32>,
    ranked: CudaSlice<u32>,
    sums: CudaSlice<f64>,
    /// rank:map's scratch, by rank: relevant documents at or above it, and the running sum of
    /// relevance / (rank + 1). One element each for the other metrics.
    relevant: CudaSlice<u32>,
    precision_sum: CudaSlice<f64>,
    n_groups: u32,
    /// Keys of the largest query's sort (a power of two; 0 when every query is ranked by
    /// counting, see RANK_COUNT_MAX), within the shared memory a block may take.
    sort_capacity: u32,
    metric: PairMetric,
    params: RankingParams,
}

impl RankingGradients {
    /// Device bytes per row: the tables' gain, and the scratch (rank:map's included).
    pub(super) const BYTES_PER_ROW: usize = 8 + 4 + 4 + 3 * 8 + 4 + 8;

    pub(super) fn new(dev: &mut FitDevice, t: &Targets, metric: PairMetric, params: RankingParams) -> Result<Self> {
        let offsets = t.groups.ok_or_else(|| Error::Data("ranking objectives need query groups".into()))?;
        let n = t.n_rows();
        if n > u32::MAX as usize / 3 {
            return Err(Error::Data(format!("{n} rows are more than the GPU ranking kernel indexes (1.4 billion)")));
        }
        let tables = RankingTables::new(t, &params);
        let offsets32: Vec<u32> = offsets.iter().map(|&o| o as u32).collect();
        let largest = offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        // The most keys, a power of two, a block's shared memory holds.
        let keys = dev.rt.rank_shared_budget as usize / 8;
        let fits = if keys == 0 { 0 } else { 1 << keys.ilog2() };
        // A query longer than the shared memory holds is ranked by counting (slower, the same ranks).
        let sort_capacity = if largest > COUNT_MAX { largest.next_power_of_two().min(fits) as u32 } else { 0 };
        Ok(RankingGradients {
            offsets: dev.upload(&offsets32)?,
            gain: dev.upload(&tables.gain)?,
            inv_idcg: dev.upload(&tables.inv_idcg)?,
            discount: dev.upload(&tables.discount)?,
            position: dev.zeros(n)?,
            ranked: dev.zeros(n)?,
            sums: dev.zeros(3 * n)?,
            relevant: dev.zeros(if metric == PairMetric::Map { n } else { 1 })?,
            precision_sum: dev.zeros(if metric == PairMetric::Map { n } else { 1 })?,
            n_groups: (offsets.len() - 1) as u32,
            sort_capacity,
            metric,
            params,
        })
    }

    /// This round's gradient pairs of every row into `out`, from `margin`.
    pub(super) fn compute(
        &mut self,
        dev: &FitDevice,
        margin: &CudaSlice<f32>,
        label: &CudaSlice<f32>,
        weight: Option<&CudaSlice<f32>>,
        out: &mut CudaSlice<GradPair>,
    ) -> Result<()> {
        if self.n_groups == 0 {
            return Ok(());
        }
        let top_k = self.params.top_k.min(u32::MAX as usize) as u32;
        let mut p = dev.pins();
        let args = LambdarankArgs {
            score: p.read(margin),
            label: p.read(label),
            gain: p.read(&self.gain),
            inv_idcg: p.read(&self.inv_idcg),
            discount: p.read(&self.discount),
            offsets: p.read(&self.offsets),
            weight: p.read_opt(weight),
            top_k,
            metric: self.metric as u32,
            normalise: self.params.normalise as u32,
            score_normalise: self.params.score_normalise as u32,
            sort_capacity: self.sort_capacity,
            position: p.write(&mut self.position),
            ranked: p.write(&mut self.ranked),
            sums: p.write(&mut self.sums),
            relevant: p.write(&mut self.relevant),
            precision_sum: p.write(&mut self.precision_sum),
            out: p.write(out),
        };
        // SAFETY: every buffer holds a value per row (sums three; rank:map's two scratch
        // buffers, read only for it), the tables one per row, group or position; the dynamic
        // shared memory holds sort_capacity keys.
        unsafe {
            dev.launch(&dev.rt.kernels.lambdarank, &args, cfg((self.n_groups, 1), THREADS, 8 * self.sort_capacity))
        }
    }
}
