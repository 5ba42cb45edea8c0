//! Evaluation sets on the device (issue 55): a set's rows binned there with the fit's cut
//! points, as the training rows are; its margins, class-major, updated by each new tree with
//! the training margins' kernel ([`MarginUpdate`]); and its elementwise metrics computed there
//! (kernels/metric.cu), summed in `metric::sum`'s order, so that each value is the host's, bit
//! for bit. The host reads back two numbers a metric, once a set and round.

use cudarc::driver::CudaSlice;

use super::buffers::{FitDevice, Scratch};
use super::columns::DeviceColumns;
use super::data::DeviceMatrix;
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut};
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

kernel_args!(MetricRows, MetricTermsArgs, HalveSumsArgs);

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

/// A fit's evaluation sets on the device, and what evaluating them takes.
pub(super) struct DeviceEvaluation {
    sets: Vec<HeldSet>,
    update: MarginUpdate,
    /// The groups' sums of a metric's levels, alternately.
    sums: [Scratch<f64>; 2],
    /// Each metric's sums of terms and of weights, read back together.
    values: Scratch<f64>,
    alphas: Scratch<f64>,
}

impl DeviceEvaluation {
    pub(super) fn new(dev: &mut FitDevice) -> Result<Self> {
        Ok(DeviceEvaluation {
            sets: Vec::new(),
            update: MarginUpdate::new(dev)?,
            sums: [dev.scratch(2)?, dev.scratch(2)?],
            values: dev.scratch(2)?,
            alphas: dev.scratch(1)?,
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

    /// `metrics` on held set `set` (None for those left to the host), predictions through
    /// `objective`'s link: every metric's sums queued, then read back at once.
    pub(super) fn metrics(
        &mut self,
        dev: &mut FitDevice,
        set: usize,
        metrics: &[Metric],
        params: &MetricParams,
        objective: Objective,
    ) -> Result<Vec<Option<f64>>> {
        let link = objective.link();
        let s = &self.sets[set];
        let k = s.margin.len() / s.n.max(1);
        let on_device: Vec<Option<u32>> =
            metrics.iter().map(|&m| metric_code(m).filter(|_| s.n > 0 && (link != Link::Hinge || k == 1))).collect();
        let queued: Vec<(usize, u32)> = on_device.iter().enumerate().filter_map(|(i, c)| c.map(|c| (i, c))).collect();
        if queued.is_empty() {
            return Ok(vec![None; metrics.len()]);
        }
        dev.reserve(&mut self.values, 2 * queued.len())?;
        for (slot, &(i, code)) in queued.iter().enumerate() {
            let alphas: Vec<f64> = match metrics[i] {
                Metric::Expectile => vec![params.expectile_alpha],
                _ => params.quantile_alpha.as_slice().to_vec(),
            };
            self.queue_sums(dev, set, code, link, &alphas, slot)?;
        }
        let sums = dev.download(self.values.buf.slice(..2 * queued.len()))?;
        let mut out = vec![None; metrics.len()];
        let s = &self.sets[set];
        for (slot, &(i, _)) in queued.iter().enumerate() {
            let w = if s.weight.is_some() { sums[2 * slot + 1] } else { s.n as f64 };
            out[i] = Some(metrics[i].finish(Metric::mean(sums[2 * slot], w)));
        }
        Ok(out)
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
        let (n, k) = (s.n, s.margin.len() / s.n);
        let series = if s.weight.is_some() { 2 } else { 1 };
        dev.fill(&mut self.alphas, alphas)?;
        let mut n_groups = n.div_ceil(GROUP);
        dev.reserve(&mut self.sums[0], 2 * n_groups)?;
        dev.reserve(&mut self.sums[1], 2 * n_groups.div_ceil(GROUP))?;
        let [first, second] = &mut self.sums;
        let mut value_slot = self.values.buf.slice_mut(2 * slot..2 * slot + 2);
        {
            let mut p = dev.pins();
            let rows = MetricRows {
                margin: p.read(&s.margin),
                label: p.read(&s.label),
                label_upper: p.read_opt(s.label_upper.as_ref()),
                weight: p.read_opt(s.weight.as_ref()),
                alphas: p.read(&self.alphas.buf),
                n_alphas: alphas.len() as u32,
                n: n as u32,
                k: k as u32,
                link: link as u32,
                metric: code,
                pad: 0,
            };
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
