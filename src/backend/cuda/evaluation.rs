//! Evaluation sets on the device (issue 55): a set's rows binned there with the fit's cut
//! points, as the training rows are; its margins, class-major, updated by each new tree with
//! the training margins' kernel ([`MarginUpdate`]); and its elementwise metrics computed there
//! (kernels/metric.cu), summed in `metric::sum`'s order, so that each value is the host's, bit
//! for bit. The host reads back two numbers a metric, every set's at once, once a round.

use cudarc::driver::CudaSlice;

use super::buffers::{FitDevice, Scratch};
use super::columns::DeviceColumns;
use super::data::DeviceMatrix;
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut, Pins};
use super::partition::MarginUpdate;
use super::DeviceMemory;
use crate::backend::EvalSetRows;
use crate::data::FeatureCuts;
use crate::error::{Error, Result};
use crate::metric::{Metric, MetricParams};
use crate::objective::{Link, Objective};
use crate::tree::Tree;

/// Values one block of `metric_terms` or `halve_sums` sums (`metric::sum::GROUP`).
const GROUP: usize = crate::metric::sum::GROUP;
pub const METRIC_THREADS: u32 = (GROUP / 2) as u32;

/// One evaluation set's rows and a metric over them (`MetricRows` in kernels/metric.cu).
#[repr(C)]
pub struct MetricRows<'a> {
    pub margin: DevPtr<'a, f32>,
    pub label: DevPtr<'a, f32>,
    pub label_upper: DevPtr<'a, f32>,
    pub weight: DevPtr<'a, f32>,
    pub alphas: DevPtr<'a, f64>,
    pub n_alphas: u32,
    pub n: u32,
    pub k: u32,
    pub link: u32,
    pub metric: u32,
    pub pad: u32,
}

/// `metric_terms`: each group's sums of terms, then of weights (when weighted), into `sums`.
#[repr(C)]
pub struct MetricTermsArgs<'a> {
    pub rows: MetricRows<'a>,
    pub sums: DevPtrMut<'a, f64>,
    pub n_groups: u32,
    pub pad: u32,
}

/// `halve_sums`: each group of `n` values of every series, summed, into `out`.
#[repr(C)]
pub struct HalveSumsArgs<'a> {
    pub values: DevPtr<'a, f64>,
    pub n: u32,
    pub out_stride: u32,
    pub out: DevPtrMut<'a, f64>,
}

/// `auc_keys`: each row's item (its prediction's order key, then whether it is positive) and
/// the padding to `n_padded`; zeroes `result`.
#[repr(C)]
pub struct AucKeysArgs<'a> {
    pub rows: MetricRows<'a>,
    pub items: DevPtrMut<'a, u64>,
    pub result: DevPtrMut<'a, u64>,
    pub n_padded: u32,
    pub pad: u32,
}

/// `bitonic_tiles`, `bitonic_merge_tiles` (stage `k`), `bitonic_step` (stage `k`, step `j`).
#[repr(C)]
pub struct BitonicArgs<'a> {
    pub items: DevPtrMut<'a, u64>,
    pub k: u32,
    pub j: u32,
}

/// `auc_ranks`: the positives' rank sums and count over the `n` sorted items, into `result`.
#[repr(C)]
pub struct AucRanksArgs<'a> {
    pub items: DevPtr<'a, u64>,
    pub result: DevPtrMut<'a, u64>,
    pub n: u32,
    pub pad: u32,
}

kernel_args!(MetricRows, MetricTermsArgs, HalveSumsArgs, AucKeysArgs, BitonicArgs, AucRanksArgs);

/// Items a block of the bitonic sort sorts in shared memory (`BITONIC_TILE`), with
/// `BITONIC_THREADS` threads.
pub const BITONIC_TILE: usize = 2048;
pub const BITONIC_THREADS: u32 = 1024;

/// How one metric of a held set is computed.
#[derive(Clone, Copy)]
enum Plan {
    /// Its rows' terms summed on the device (kernels/metric.cu's code).
    Terms(u32),
    /// The unweighted AUC's counts on the device.
    Auc,
    /// On the host, from the margins read back.
    Host,
}

/// The metrics kernels/metric.cu computes, by their codes there (`METRIC_*`); the others
/// (rankings, AUC, survival, the log-gamma and `ln_1p` of Poisson and RMSLE) stay on the host.
pub const DEVICE_METRICS: [(Metric, &str); 11] = [
    (Metric::Rmse, "METRIC_RMSE"),
    (Metric::Mae, "METRIC_MAE"),
    (Metric::Logloss, "METRIC_LOGLOSS"),
    (Metric::Error, "METRIC_ERROR"),
    (Metric::Mlogloss, "METRIC_MLOGLOSS"),
    (Metric::Merror, "METRIC_MERROR"),
    (Metric::Quantile, "METRIC_QUANTILE"),
    (Metric::Expectile, "METRIC_EXPECTILE"),
    (Metric::GammaNloglik, "METRIC_GAMMA_NLOGLIK"),
    (Metric::GammaDeviance, "METRIC_GAMMA_DEVIANCE"),
    (Metric::IntervalRegressionAccuracy, "METRIC_INTERVAL_ACCURACY"),
];

fn metric_code(m: Metric) -> Option<u32> {
    DEVICE_METRICS.iter().position(|&(d, _)| d == m).map(|c| c as u32)
}

/// An evaluation set on the device.
struct HeldSet {
    matrix: DeviceMatrix,
    n: usize,
    /// Class-major: output c's margins of every row, then output c + 1's.
    margin: CudaSlice<f32>,
    label: CudaSlice<f32>,
    label_upper: Option<CudaSlice<f32>>,
    weight: Option<CudaSlice<f32>>,
}

impl HeldSet {
    /// The set's rows as the metric kernels read them: metric `code`, predictions through
    /// `link`, the first `n_alphas` values of `alphas` its parameters.
    fn rows<'a>(
        &'a self,
        p: &mut Pins<'a>,
        alphas: &'a Scratch<f64>,
        n_alphas: usize,
        link: Link,
        code: u32,
    ) -> MetricRows<'a> {
        MetricRows {
            margin: p.read(&self.margin),
            label: p.read(&self.label),
            label_upper: p.read_opt(self.label_upper.as_ref()),
            weight: p.read_opt(self.weight.as_ref()),
            alphas: p.read(&alphas.buf),
            n_alphas: n_alphas as u32,
            n: self.n as u32,
            k: (self.margin.len() / self.n.max(1)) as u32,
            link: link as u32,
            metric: code,
            pad: 0,
        }
    }
}

/// A fit's evaluation sets on the device, and what evaluating them takes.
pub(super) struct DeviceEvaluation {
    sets: Vec<HeldSet>,
    update: MarginUpdate,
    /// The groups' sums of a metric's levels, alternately.
    sums: [Scratch<f64>; 2],
    /// Each metric's sums of terms and of weights, read back together.
    values: Scratch<f64>,
    alphas: Scratch<f64>,
    /// The AUC's sorted items.
    items: Scratch<u64>,
}

impl DeviceEvaluation {
    pub(super) fn new(dev: &mut FitDevice) -> Result<Self> {
        Ok(DeviceEvaluation {
            sets: Vec::new(),
            update: MarginUpdate::new(dev)?,
            sums: [dev.scratch(2)?, dev.scratch(2)?],
            values: dev.scratch(2)?,
            alphas: dev.scratch(1)?,
            items: dev.scratch(BITONIC_TILE)?,
        })
    }

    /// Bins `set`'s features on the device with `cuts` and keeps them, with its margins and
    /// targets; returns the set's id.
    pub(super) fn hold(&mut self, dev: &mut FitDevice, set: EvalSetRows<'_>, cuts: &[FeatureCuts]) -> Result<usize> {
        let n = set.features.n_rows();
        if n >= u32::MAX as usize / 2 {
            return Err(Error::Data(format!("the CUDA backend evaluates at most 2^31 rows, not {n}")));
        }
        let layout = DeviceMatrix::dense(set.features, cuts);
        let margin = set.margin.into_rows(n);
        let targets = 4 * (set.targets.label.len() + n * 2);
        let bytes = DeviceColumns::bytes_for(set.features) + layout.device_bytes(n, cuts.len()) + 4 * margin.len();
        DeviceMemory::check_fits(&dev.stream, bytes + targets)?;
        let columns = DeviceColumns::upload(&dev.stream, &mut dev.memory, set.features)?;
        let (mut matrix, _) = DeviceMatrix::upload(dev.rt, &dev.stream, &mut dev.memory, &columns, cuts, layout)?;
        dev.memory.allocated -= columns.bytes;
        drop(columns);
        // The column-major copy serves the partition, which an evaluation set never meets.
        if let Some(cols) = matrix.cols.take() {
            dev.memory.allocated -= cols.len();
        }
        let upload = |dev: &mut FitDevice, v: Option<&[f32]>| v.map(|v| dev.upload(v)).transpose();
        let t = set.targets;
        self.sets.push(HeldSet {
            matrix,
            n,
            margin: dev.upload(&margin)?,
            label: dev.upload(&t.label[..n])?,
            label_upper: upload(dev, t.label_upper)?,
            weight: upload(dev, t.weight)?,
        });
        Ok(self.sets.len() - 1)
    }

    /// Adds `tree` to output `output`'s margins of held set `set`.
    pub(super) fn add_tree(&mut self, dev: &mut FitDevice, set: usize, output: usize, tree: &Tree) -> Result<()> {
        let s = &mut self.sets[set];
        let n = s.n;
        self.update.add_tree(dev, &s.matrix, tree, s.margin.slice_mut(output * n..(output + 1) * n))
    }

    /// Held set `set`'s margins, class-major.
    pub(super) fn margins(&self, dev: &mut FitDevice, set: usize) -> Result<Vec<f32>> {
        dev.download(self.sets[set].margin.slice(..))
    }

    /// `metrics` on each held set of `sets` (None for those left to the host), predictions
    /// through `objective`'s link: every set's and metric's sums queued, then read back at once.
    pub(super) fn metrics(
        &mut self,
        dev: &mut FitDevice,
        sets: &[usize],
        metrics: &[Metric],
        params: &MetricParams,
        objective: Objective,
    ) -> Result<Vec<Vec<Option<f64>>>> {
        let link = objective.link();
        // (place in `sets`, metric, plan) of every value the device computes, a slot each.
        let mut queued: Vec<(usize, usize, Plan)> = Vec::new();
        for (j, &set) in sets.iter().enumerate() {
            let s = &self.sets[set];
            let k = s.margin.len() / s.n.max(1);
            for (i, &m) in metrics.iter().enumerate() {
                let plan = match (m, metric_code(m)) {
                    _ if s.n == 0 || (link == Link::Hinge && k > 1) => Plan::Host,
                    (_, Some(code)) => Plan::Terms(code),
                    (Metric::Auc, None) if k == 1 && s.weight.is_none() => Plan::Auc,
                    _ => Plan::Host,
                };
                if !matches!(plan, Plan::Host) {
                    queued.push((j, i, plan));
                }
            }
        }
        let mut out = vec![vec![None; metrics.len()]; sets.len()];
        if queued.is_empty() {
            return Ok(out);
        }
        dev.reserve(&mut self.values, 2 * queued.len())?;
        for (slot, &(j, i, plan)) in queued.iter().enumerate() {
            match plan {
                Plan::Terms(code) => {
                    let alphas: Vec<f64> = match metrics[i] {
                        Metric::Expectile => vec![params.expectile_alpha],
                        _ => params.quantile_alpha.as_slice().to_vec(),
                    };
                    self.queue_sums(dev, sets[j], code, link, &alphas, slot)?;
                }
                Plan::Auc => self.queue_auc(dev, sets[j], link, slot)?,
                Plan::Host => unreachable!("only the device's metrics are queued"),
            }
        }
        let sums = dev.download(self.values.buf.slice(..2 * queued.len()))?;
        for (slot, &(j, i, plan)) in queued.iter().enumerate() {
            let s = &self.sets[sets[j]];
            let (a, b) = (sums[2 * slot], sums[2 * slot + 1]);
            out[j][i] = Some(match plan {
                Plan::Auc => {
                    // Integers, in the slot's bits: the rank sum and the positives.
                    let (ranks, positives) = (a.to_bits() as u128, b.to_bits());
                    let twice_u = ranks - positives as u128 * (positives as u128 + 1);
                    crate::metric::auc_of_counts(twice_u, positives, s.n as u64)
                }
                _ => {
                    let w = if s.weight.is_some() { b } else { s.n as f64 };
                    metrics[i].finish(Metric::mean(a, w))
                }
            });
        }
        Ok(out)
    }

    /// Queues the unweighted AUC's counts over held set `set` into the slot's two values (as
    /// integers): the items keyed, sorted, and each positive's run found.
    fn queue_auc(&mut self, dev: &mut FitDevice, set: usize, link: Link, slot: usize) -> Result<()> {
        let s = &self.sets[set];
        let n = s.n;
        let padded = n.next_power_of_two().max(BITONIC_TILE);
        dev.reserve(&mut self.items, padded)?;
        let mut value_slot = self.values.buf.slice_mut(2 * slot..2 * slot + 2);
        {
            let mut p = dev.pins();
            // The AUC reads each row's prediction and label only.
            let rows = s.rows(&mut p, &self.alphas, 0, link, 0);
            let args = AucKeysArgs {
                rows,
                items: p.write(&mut self.items.buf),
                result: p.write(&mut value_slot).cast(),
                n_padded: padded as u32,
                pad: 0,
            };
            // SAFETY: the items hold `padded` values; the slot two.
            unsafe { dev.launch(&dev.rt.kernels.auc_keys, &args, dev.grid(padded as u64, 256)) }?;
        }
        let tiles = (padded / BITONIC_TILE) as u32;
        let k = &dev.rt.kernels;
        let launch = |dev: &FitDevice, items: &mut Scratch<u64>, kernel, kk: usize, j: usize, blocks: u32, threads| {
            let mut p = dev.pins();
            let args = BitonicArgs { items: p.write(&mut items.buf), k: kk as u32, j: j as u32 };
            // SAFETY: `padded` items, a power of two: every pair (i, i + j) of the grid lies in them.
            unsafe { dev.launch(kernel, &args, cfg((blocks, 1), threads, 0)) }
        };
        launch(dev, &mut self.items, &k.bitonic_tiles, 0, 0, tiles, BITONIC_THREADS)?;
        let mut stage = 2 * BITONIC_TILE;
        while stage <= padded {
            let mut j = stage / 2;
            while j >= BITONIC_TILE {
                launch(dev, &mut self.items, &k.bitonic_step, stage, j, (padded / 512) as u32, 256)?;
                j /= 2;
            }
            launch(dev, &mut self.items, &k.bitonic_merge_tiles, stage, 0, tiles, BITONIC_THREADS)?;
            stage *= 2;
        }
        let mut p = dev.pins();
        let args = AucRanksArgs {
            items: p.read(&self.items.buf),
            result: p.write(&mut value_slot).cast(),
            n: n as u32,
            pad: 0,
        };
        // SAFETY: the first n items are the rows' (the padding sorts last); the slot holds two.
        unsafe { dev.launch(&dev.rt.kernels.auc_ranks, &args, dev.grid(n as u64, 256)) }
    }

    /// Queues one metric's sums over held set `set` into `values[2 slot..2 slot + 2]`: the
    /// groups' sums of terms (and weights), then levels of halving sums until one is left.
    fn queue_sums(
        &mut self,
        dev: &mut FitDevice,
        set: usize,
        code: u32,
        link: Link,
        alphas: &[f64],
        slot: usize,
    ) -> Result<()> {
        let s = &self.sets[set];
        let n = s.n;
        let series = if s.weight.is_some() { 2 } else { 1 };
        dev.fill(&mut self.alphas, alphas)?;
        let mut n_groups = n.div_ceil(GROUP);
        dev.reserve(&mut self.sums[0], 2 * n_groups)?;
        dev.reserve(&mut self.sums[1], 2 * n_groups.div_ceil(GROUP))?;
        let [first, second] = &mut self.sums;
        let mut value_slot = self.values.buf.slice_mut(2 * slot..2 * slot + 2);
        {
            let mut p = dev.pins();
            let rows = s.rows(&mut p, &self.alphas, alphas.len(), link, code);
            let sums = if n_groups == 1 { p.write(&mut value_slot) } else { p.write(&mut first.buf) };
            let args = MetricTermsArgs { rows, sums, n_groups: n_groups as u32, pad: 0 };
            // SAFETY: the set's buffers hold its n rows (k margins each); `sums` holds both
            // series of n_groups groups, or is the slot's two values when one group is all.
            unsafe { dev.launch(&dev.rt.kernels.metric_terms, &args, cfg((n_groups as u32, 1), METRIC_THREADS, 0)) }?;
        }
        let (mut from, mut to) = (first, second);
        while n_groups > 1 {
            let next = n_groups.div_ceil(GROUP);
            let mut p = dev.pins();
            let values = p.read(&from.buf);
            let (out, out_stride) =
                if next == 1 { (p.write(&mut value_slot), 1) } else { (p.write(&mut to.buf), next as u32) };
            let args = HalveSumsArgs { values, n: n_groups as u32, out_stride, out };
            // SAFETY: `from` holds `series` runs of n_groups sums; `out` holds `series` runs of
            // `next` (or the slot's two values).
            unsafe { dev.launch(&dev.rt.kernels.halve_sums, &args, cfg((next as u32, series), METRIC_THREADS, 0)) }?;
            drop(p);
            std::mem::swap(&mut from, &mut to);
            n_groups = next;
        }
        Ok(())
    }
}
