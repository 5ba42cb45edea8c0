//! A fit's labels, margins and gradients on the device (`kernels/gradients.cu`): each round's
//! gradients, quantised to fixed point per tree, and the sum of a tree's rows.

use std::mem::offset_of;

use cudarc::driver::{CudaSlice, CudaView, DevicePtrMut};

use super::buffers::FitDevice;
use super::device_error;
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut, Pins};
use super::layout::{GradPair, GradSum, QuantGrad, Quantisation};
use super::ranking::RankingGradients;
use crate::backend::StartMargin;
use crate::collective::{sum_grads, Collective, DeviceOp, DeviceReduction};
use crate::config::{MultiStrategy, TrainConfig};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::objective::{DeviceGradient, GpuGradient, Loss, ObjectiveParams, PairMetric, Targets};
use crate::tree::{Quantiser, Weighting};

/// The rows of one output whose gradients an objective kernel computes (`ObjectiveRows` in
/// kernels/gradients.cu). Null `weight`, `repeats`: none.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ObjectiveRows<'a> {
    /// The objective's code, checked by [`objective_code`].
    pub kind: u32,
    pub param: f32,
    pub margin: DevPtr<'a, f32>,
    pub label: DevPtr<'a, f32>,
    pub weight: DevPtr<'a, f32>,
    pub repeats: DevPtr<'a, f32>,
    pub n: u32,
    pub k: u32,
    pub c: u32,
}

/// `objective_max`: the rows' largest gradient magnitudes, into `q`.
#[repr(C)]
pub struct ObjectiveMaxArgs<'a> {
    pub rows: ObjectiveRows<'a>,
    pub q: DevPtrMut<'a, Quantisation>,
}

/// `objective_quantise`: the rows' gradients at `q`'s scales, into `out`.
#[repr(C)]
pub struct ObjectiveQuantiseArgs<'a> {
    pub rows: ObjectiveRows<'a>,
    pub q: DevPtr<'a, Quantisation>,
    pub out: DevPtrMut<'a, QuantGrad>,
    /// Null: no sum wanted.
    pub sum: DevPtrMut<'a, GradSum>,
}

/// Float gradient pairs computed elsewhere (`GradientRows`). Null `repeats`: none.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GradientRows<'a> {
    pub grads: DevPtr<'a, GradPair>,
    pub repeats: DevPtr<'a, f32>,
    pub n: u32,
}

/// `gradient_max`.
#[repr(C)]
pub struct GradientMaxArgs<'a> {
    pub rows: GradientRows<'a>,
    pub q: DevPtrMut<'a, Quantisation>,
}

/// `quantise`.
#[repr(C)]
pub struct QuantiseArgs<'a> {
    pub rows: GradientRows<'a>,
    pub q: DevPtr<'a, Quantisation>,
    pub out: DevPtrMut<'a, QuantGrad>,
}

/// `finish_quantisation`.
#[repr(C)]
pub struct FinishQuantisationArgs<'a> {
    pub q: DevPtrMut<'a, Quantisation>,
    pub shrink_bits: u32,
}

/// `sum_rows`: the sum of `grads` over rows `ridx[..n]`, into `out` (zeroed).
#[repr(C)]
pub struct SumRowsArgs<'a> {
    pub grads: DevPtr<'a, QuantGrad>,
    pub ridx: DevPtr<'a, u32>,
    pub n: u32,
    pub out: DevPtrMut<'a, GradSum>,
}

kernel_args!(
    ObjectiveRows,
    ObjectiveMaxArgs,
    ObjectiveQuantiseArgs,
    GradientRows,
    GradientMaxArgs,
    QuantiseArgs,
    FinishQuantisationArgs,
    SumRowsArgs
);

/// The code of `gradient` in kernels/gradients.cu, checked before any launch: the kernel's
/// `switch` traps on a code it does not know, which would poison the CUDA context, so an
/// unknown code must be an error here instead.
pub(super) fn objective_code(gradient: GpuGradient) -> Result<u32> {
    let code = gradient as u32;
    if GpuGradient::ALL.iter().any(|g| *g as u32 == code) {
        Ok(code)
    } else {
        Err(Error::Device(format!("objective code {code} has no gradient kernel")))
    }
}

/// How the round's gradients are computed: row by row by a kernel (its objective code in
/// kernels/gradients.cu, with the objective's parameters), over query groups by the ranking
/// kernel, or on the host (objectives without a kernel, and users' objectives).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum GradientKernel {
    Device { gradient: GpuGradient },
    Ranking { metric: PairMetric },
    Host,
}

impl GradientKernel {
    fn of(cfg: &TrainConfig) -> Self {
        if cfg.custom_objective.is_some() {
            // A user's objective runs on the host, in Python.
            return GradientKernel::Host;
        }
        match cfg.objective.gpu_gradient() {
            Some(DeviceGradient::Pointwise(g)) => GradientKernel::Device { gradient: g },
            Some(DeviceGradient::LambdaRank { metric }) => GradientKernel::Ranking { metric },
            None => GradientKernel::Host,
        }
    }
}

pub(super) struct Gradients {
    n: usize,
    k: usize,
    kernel: GradientKernel,
    /// What the kernels' parameters come from.
    params: ObjectiveParams,
    /// The labels, target-major: `n_targets` columns of `n`.
    label: CudaSlice<f32>,
    n_targets: usize,
    weight: Option<CudaSlice<f32>>,
    /// Whether `weight` enters the loss or multiplies the rounded pairs.
    weighting: Weighting,
    /// The training margins, class-major.
    pub(super) margin: CudaSlice<f32>,
    /// Float gradients of every output, for objectives whose gradients are not computed as
    /// they are quantised (ranking, and those computed on the host).
    float_grads: Option<CudaSlice<GradPair>>,
    ranking: Option<RankingGradients>,
    /// With several outputs and gradients computed per tree on the device: the margins as the
    /// round began, so that output c's gradients do not see this round's trees of outputs < c.
    round_margin: Option<CudaSlice<f32>>,
    /// The tree's fixed-point gradients, by row.
    pub(super) quantised: CudaSlice<QuantGrad>,
    /// A vector-leaf fit's (`multi_strategy="multi_output_tree"`) fixed-point gradients of
    /// each output, by row, for the tree that grows over all of them; empty otherwise.
    outputs: Vec<CudaSlice<QuantGrad>>,
    quant: CudaSlice<Quantisation>,
    root_sum: CudaSlice<GradSum>,
    host_margin: Vec<f32>,
    host_grads: Vec<GradPair>,
}

/// The margins of `n` rows as they start, class-major on the device: each output's constant
/// filled there (its 32 bits, a memset), or the rows' own margins uploaded.
fn start_margins(dev: &mut FitDevice, start: &StartMargin, n: usize) -> Result<CudaSlice<f32>> {
    let base = match start {
        StartMargin::Rows(rows) => return dev.upload(rows),
        StartMargin::Constant(base) => base,
    };
    let mut margin = dev.zeros::<f32>(n * base.len())?;
    for (c, &b) in base.iter().enumerate() {
        if b.to_bits() == 0 || n == 0 {
            continue;
        }
        let mut part = margin.slice_mut(c * n..(c + 1) * n);
        let (ptr, _record) = part.device_ptr_mut(&dev.stream);
        // SAFETY: `part` holds n f32s on the fit's stream, written with b's bits.
        unsafe { cudarc::driver::sys::cuMemsetD32Async(ptr, b.to_bits(), n, dev.stream.cu_stream()) }
            .result()
            .map_err(device_error)?;
    }
    Ok(margin)
}

impl Gradients {
    /// The labels and weights of `data` on the device, margins starting at `start_margin`
    /// (class-major, `cfg.num_outputs()` outputs), the weights applied as `weighting` says.
    pub(super) fn new(
        dev: &mut FitDevice,
        data: &Dataset,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        weighting: Weighting,
    ) -> Result<Self> {
        let (n, k) = (data.n_rows(), cfg.num_outputs());
        let kernel = GradientKernel::of(cfg);
        Ok(Gradients {
            n,
            k,
            kernel,
            params: cfg.objective_params(),
            label: dev.upload(&data.label)?,
            n_targets: data.n_targets(),
            weight: match &data.weight {
                Some(w) => Some(dev.upload(w)?),
                None => None,
            },
            weighting,
            margin: start_margins(dev, start_margin, n)?,
            float_grads: match kernel {
                GradientKernel::Host | GradientKernel::Ranking { .. } => Some(dev.zeros(n * k)?),
                GradientKernel::Device { .. } => None,
            },
            ranking: match kernel {
                GradientKernel::Ranking { metric } => {
                    Some(RankingGradients::new(dev, &data.targets(), metric, cfg.objective_params().ranking)?)
                }
                _ => None,
            },
            round_margin: match kernel {
                GradientKernel::Device { .. } if k > 1 => Some(dev.zeros(n * k)?),
                _ => None,
            },
            quantised: dev.zeros(n)?,
            outputs: match cfg.multi_strategy {
                MultiStrategy::MultiOutputTree => (0..k).map(|_| dev.zeros(n)).collect::<Result<_>>()?,
                MultiStrategy::OneOutputPerTree => Vec::new(),
            },
            quant: dev.zeros(1)?,
            root_sum: dev.zeros(1)?,
            host_margin: Vec::new(),
            host_grads: Vec::new(),
        })
    }

    /// The sample weights when they are whole and so multiply whole rows (`Weighting::Repeats`).
    pub(super) fn repeats(&self) -> Option<&CudaSlice<f32>> {
        match self.weighting {
            Weighting::Repeats { .. } => self.weight.as_ref(),
            Weighting::InLoss => None,
        }
    }

    /// Output `output`'s labels: target `output`'s column with several targets, else the one.
    pub(super) fn label_of(&self, output: usize) -> CudaView<'_, f32> {
        label_column(&self.label, self.n, self.n_targets, output)
    }

    /// Device bytes a fit of `n` rows and `k` outputs holds here, for the up-front check.
    pub(super) fn bytes_per_row(cfg: &TrainConfig) -> usize {
        let k = cfg.num_outputs();
        let ranking = match GradientKernel::of(cfg) {
            GradientKernel::Ranking { .. } => RankingGradients::BYTES_PER_ROW,
            _ => 0,
        };
        // Vector leaves keep every output's fixed-point gradients at once.
        let outputs = match cfg.multi_strategy {
            MultiStrategy::MultiOutputTree => 8 * k,
            MultiStrategy::OneOutputPerTree => 0,
        };
        // labels (one per target), weights, margins (twice), float gradients, fixed-point
        // gradients
        4 * cfg.num_target.max(1) + 4 + 8 * k + 8 * k + 8 + outputs + ranking
    }

    /// Starts a round: the ranking kernel computes the gradients of the round's one output;
    /// objectives without a kernel compute every output's on the host (the margins visit the
    /// host once a round); the others keep the round's starting margins and compute their
    /// gradients per tree, as they quantise them.
    pub(super) fn start_round(&mut self, dev: &mut FitDevice, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        let s = dev.stream.clone();
        let in_loss = self.weighting == Weighting::InLoss;
        if let (Some(ranking), Some(grads)) = (&mut self.ranking, &mut self.float_grads) {
            let weight = self.weight.as_ref().filter(|_| in_loss);
            ranking.compute(dev, &self.margin, &self.label, weight, grads)?;
        } else if let Some(grads) = &mut self.float_grads {
            self.host_margin.resize(self.n * self.k, 0.0);
            self.host_grads.resize(self.n * self.k, GradPair::default());
            dev.drain()?;
            s.memcpy_dtoh(&self.margin, &mut self.host_margin).map_err(device_error)?;
            dev.arena.drained();
            let t = Targets { weight: self.weighting.loss_weights(targets.weight), ..*targets };
            loss.gradients(&self.host_margin, &t, &mut self.host_grads)?;
            s.memcpy_htod(&self.host_grads, grads).map_err(device_error)?;
        }
        if let Some(round) = &mut self.round_margin {
            s.memcpy_dtod(&self.margin, round).map_err(device_error)?;
        }
        Ok(())
    }

    /// Quantises output `c`'s gradients and sums the rows `ridx[..n_active]`: the tree's
    /// scales and the root's total, read back in one synchronisation.
    pub(super) fn quantise_tree(
        &mut self,
        dev: &mut FitDevice,
        c: usize,
        ridx: &CudaSlice<u32>,
        n_active: u32,
        comm: &dyn Collective,
    ) -> Result<(Quantiser, GradSum)> {
        let s = dev.stream.clone();
        s.memset_zeros(&mut self.root_sum).map_err(device_error)?;
        // A tree of every row (its index the identity) has its total summed as its gradients are
        // quantised, with no second pass over them.
        let summed = self.quantise(dev, c, comm, n_active as usize == self.n)?;
        if !summed {
            let mut p = dev.pins();
            let args = SumRowsArgs {
                grads: p.read(&self.quantised),
                ridx: p.read(ridx),
                n: n_active,
                out: p.write(&mut self.root_sum),
            };
            // SAFETY: ridx holds at least n_active rows, each below the gradients' length.
            unsafe { dev.launch(&dev.rt.kernels.sum_rows, &args, dev.grid(n_active as u64, 256)) }?;
        }
        let summed_on_device = match comm.device_sums().filter(|_| comm.world() > 1) {
            Some(sums) => {
                let s = dev.stream.clone();
                let (address, sync) = self.root_sum.device_ptr_mut(&s);
                let sum = DeviceReduction { address, len: 2, op: DeviceOp::SumI64 };
                // SAFETY: one GradSum (two i64) on this GPU, written by `sum_rows` or the quantising
                // kernel on the stream.
                unsafe { sums.queue_in_place(&[sum]) }?;
                drop(sync);
                true
            }
            None => false,
        };
        let (scales, mut total) = dev.download_pair(self.quant.slice(..), self.root_sum.slice(..))?;
        let scales = scales[0];
        if !summed_on_device {
            sum_grads(comm, &mut total)?;
        }
        let total = total[0];
        if scales.negative_hessian != 0 {
            return Err(Error::Data("the objective produced a negative hessian, which training cannot use".into()));
        }
        Ok((Quantiser::from_scales(scales.g_scale, scales.h_scale), total))
    }

    /// A vector-leaf tree's start: every output's gradients quantised, each with its own
    /// scales (as the CPU's), and each output's sum over the rows `ridx[..n_active]`.
    pub(super) fn quantise_outputs(
        &mut self,
        dev: &mut FitDevice,
        ridx: &CudaSlice<u32>,
        n_active: u32,
        comm: &dyn Collective,
    ) -> Result<(Vec<Quantiser>, Vec<GradSum>)> {
        let (mut quantisers, mut sums) = (Vec::with_capacity(self.k), Vec::with_capacity(self.k));
        for c in 0..self.outputs.len() {
            let (q, total) = self.quantise_tree(dev, c, ridx, n_active, comm)?;
            // The output's gradients move to its own buffer, with no copy.
            std::mem::swap(&mut self.quantised, &mut self.outputs[c]);
            quantisers.push(q);
            sums.push(total);
        }
        Ok((quantisers, sums))
    }

    /// The fixed-point gradients a histogram of output `k` reads: a vector-leaf tree's of that
    /// output, else the tree's own.
    pub(super) fn of_output(&self, k: usize) -> &CudaSlice<QuantGrad> {
        self.outputs.get(k).unwrap_or(&self.quantised)
    }

    /// Queues the fixed-point gradients of output `c` into `quantised` (the scales into `quant`).
    fn quantise(&mut self, dev: &mut FitDevice, c: usize, comm: &dyn Collective, sum_all: bool) -> Result<bool> {
        let rt = dev.rt;
        dev.stream.memset_zeros(&mut self.quant).map_err(device_error)?;
        let shrink = self.weighting.shrink_bits();
        // The weights go to the loss, or multiply the rounded pairs (kernels/gradients.cu).
        let (in_loss, repeats) = match self.weighting {
            Weighting::InLoss => (self.weight.as_ref(), None),
            Weighting::Repeats { .. } => (None, self.weight.as_ref()),
        };
        match (self.kernel, &self.float_grads) {
            (GradientKernel::Device { gradient }, _) => {
                let margin = self.round_margin.as_ref().unwrap_or(&self.margin);
                let label = label_column(&self.label, self.n, self.n_targets, c);
                let s = dev.stream.clone();
                let mut p = Pins::new(&s);
                let rows = ObjectiveRows {
                    kind: objective_code(gradient)?,
                    // Output c's parameter: its own quantile with several.
                    param: gradient.param(&self.params, c),
                    margin: p.read(margin),
                    label: p.read(&label),
                    weight: p.read_opt(in_loss),
                    repeats: p.read_opt(repeats),
                    n: self.n as u32,
                    k: self.k as u32,
                    c: c as u32,
                };
                let (k, g) = (&rt.kernels, dev.grid(self.n as u64, 256));
                let mut q = Pins::new(&s);
                // SAFETY (both launches): the rows' buffers hold n rows (k outputs of margins).
                unsafe { dev.launch(&k.objective_max, &ObjectiveMaxArgs { rows, q: q.write(&mut self.quant) }, g) }?;
                drop(q);
                scale(dev, &mut self.quant, comm, shrink)?;
                let mut q = Pins::new(&s);
                let sum = if sum_all { q.write(&mut self.root_sum) } else { DevPtrMut::NULL };
                let args =
                    ObjectiveQuantiseArgs { rows, q: q.read(&self.quant), out: q.write(&mut self.quantised), sum };
                unsafe { dev.launch(&k.objective_quantise, &args, g) }?;
                Ok(sum_all)
            }
            (GradientKernel::Host | GradientKernel::Ranking { .. }, Some(all)) => {
                // These float pairs are unweighted when the weights are repeats.
                let grads: CudaView<GradPair> = all.slice(c * self.n..(c + 1) * self.n);
                let s = dev.stream.clone();
                let mut p = Pins::new(&s);
                let rows = GradientRows { grads: p.read(&grads), repeats: p.read_opt(repeats), n: self.n as u32 };
                let (k, g) = (&rt.kernels, dev.grid(self.n as u64, 256));
                let mut q = Pins::new(&s);
                // SAFETY (both launches): the rows' buffers hold n rows.
                unsafe { dev.launch(&k.gradient_max, &GradientMaxArgs { rows, q: q.write(&mut self.quant) }, g) }?;
                drop(q);
                scale(dev, &mut self.quant, comm, shrink)?;
                let mut q = Pins::new(&s);
                let args = QuantiseArgs { rows, q: q.read(&self.quant), out: q.write(&mut self.quantised) };
                unsafe { dev.launch(&k.quantise, &args, g) }?;
                Ok(false)
            }
            (GradientKernel::Host | GradientKernel::Ranking { .. }, None) => {
                unreachable!("host and ranking gradients have a device buffer")
            }
        }
    }
}

/// The scales from the maxima in `quant` (every worker's, in a distributed fit).
fn scale(dev: &mut FitDevice, quant: &mut CudaSlice<Quantisation>, comm: &dyn Collective, shrink: u32) -> Result<()> {
    share_maxima(dev, quant, comm)?;
    finish_quantisation(dev, quant, shrink)
}

/// In a distributed fit, the gradients' magnitudes (and the negative-hessian flag) of every
/// worker's rows, so every worker scales alike: queued on the devices where the collective
/// reaches them (NCCL), else one round trip through the host a tree.
fn share_maxima(dev: &mut FitDevice, quant: &mut CudaSlice<Quantisation>, comm: &dyn Collective) -> Result<()> {
    if comm.world() == 1 {
        return Ok(());
    }
    if let Some(sums) = comm.device_sums() {
        // The maxima are of non-negative floats' bits: as unsigned integers they order alike.
        const G: usize = offset_of!(Quantisation, g_max_bits);
        const _: () = assert!(offset_of!(Quantisation, h_max_bits) == G + 4, "g and h maxima side by side");
        const FLAG: usize = offset_of!(Quantisation, negative_hessian);
        let s = dev.stream.clone();
        let (address, sync) = quant.device_ptr_mut(&s);
        let max = |at: usize, len| DeviceReduction { address: address + at as u64, len, op: DeviceOp::MaxU32 };
        // SAFETY: one Quantisation on this GPU, written by the maxima kernel on the stream.
        unsafe { sums.queue_in_place(&[max(G, 2), max(FLAG, 1)]) }?;
        drop(sync);
        return Ok(());
    }
    let mut q = dev.download(quant.slice(..))?;
    let mut m = [q[0].g_max_bits as i64, q[0].h_max_bits as i64, q[0].negative_hessian as i64];
    comm.all_reduce_max(&mut m)?;
    (q[0].g_max_bits, q[0].h_max_bits, q[0].negative_hessian) = (m[0] as u32, m[1] as u32, m[2] as u32);
    dev.stream.memcpy_htod(&q, quant).map_err(device_error)
}

/// The scales from the maxima in `quant`, lowered `shrink_bits` halvings.
fn finish_quantisation(dev: &FitDevice, quant: &mut CudaSlice<Quantisation>, shrink_bits: u32) -> Result<()> {
    let mut p = dev.pins();
    let args = FinishQuantisationArgs { q: p.write(quant), shrink_bits };
    // SAFETY: one Quantisation, as the kernel expects.
    unsafe { dev.launch(&dev.rt.kernels.finish_quantisation, &args, cfg((1, 1), 32, 0)) }
}

/// Output `output`'s labels among `n_targets` target-major columns of `n`.
fn label_column(label: &CudaSlice<f32>, n: usize, n_targets: usize, output: usize) -> CudaView<'_, f32> {
    match n_targets {
        1 => label.slice(..),
        _ => label.slice(output * n..(output + 1) * n),
    }
}
