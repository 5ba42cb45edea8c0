//! A fit's labels, margins and gradients on the device (`kernels/gradients.cu`): each round's
//! gradients, quantised to fixed point per tree, and the sum of a tree's rows.

use cudarc::driver::{CudaSlice, CudaView, LaunchArgs, PushKernelArg};

use super::buffers::{cfg, FitDevice};
use super::device_error;
use super::layout::{GradPair, GradSum, QuantGrad, Quantisation};
use super::ranking::RankingGradients;
use crate::collective::{sum_grads, Collective};
use crate::config::TrainConfig;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::objective::{DeviceGradient, GpuGradient, Loss, ObjectiveParams, PairMetric, Targets};
use crate::tree::{Quantiser, Weighting};

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
    quant: CudaSlice<Quantisation>,
    root_sum: CudaSlice<GradSum>,
    host_margin: Vec<f32>,
    host_grads: Vec<GradPair>,
}

impl Gradients {
    /// The labels and weights of `data` on the device, margins starting at `start_margin`
    /// (class-major, `cfg.num_outputs()` outputs), the weights applied as `weighting` says.
    pub(super) fn new(
        dev: &mut FitDevice,
        data: &Dataset,
        cfg: &TrainConfig,
        start_margin: &[f32],
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
            margin: dev.upload(start_margin)?,
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
        // labels (one per target), weights, margins (twice), float gradients, fixed-point
        // gradients
        4 * cfg.num_target.max(1) + 4 + 8 * k + 8 * k + 8 + ranking
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
        self.quantise(dev, c, comm)?;
        let s = dev.stream.clone();
        s.memset_zeros(&mut self.root_sum).map_err(device_error)?;
        // SAFETY: ridx holds at least n_active rows, each below the gradients' length.
        unsafe {
            dev.launcher(&dev.rt.kernels.sum_rows)
                .arg(&self.quantised)
                .arg(ridx)
                .arg(&n_active)
                .arg(&mut self.root_sum)
                .launch(dev.grid(n_active as u64, 256))
        }
        .map_err(device_error)?;
        let scales = dev.download(self.quant.slice(..))?[0];
        let mut total = dev.download(self.root_sum.slice(..))?;
        sum_grads(comm, &mut total)?;
        let total = total[0];
        if scales.negative_hessian != 0 {
            return Err(Error::Data("the objective produced a negative hessian, which training cannot use".into()));
        }
        Ok((Quantiser::from_scales(scales.g_scale, scales.h_scale), total))
    }

    /// Queues the fixed-point gradients of output `c` into `quantised` (the scales into `quant`).
    fn quantise(&mut self, dev: &mut FitDevice, c: usize, comm: &dyn Collective) -> Result<()> {
        let n = self.n as u32;
        let s = dev.stream.clone();
        s.memset_zeros(&mut self.quant).map_err(device_error)?;
        let g = dev.grid(self.n as u64, 256);
        let null = 0u64;
        let k = &dev.rt.kernels;
        let shrink = self.weighting.shrink_bits();
        // The weights go to the loss, or multiply the rounded pairs (kernels/gradients.cu).
        let (in_loss, repeats) = match self.weighting {
            Weighting::InLoss => (self.weight.as_ref(), None),
            Weighting::Repeats { .. } => (None, self.weight.as_ref()),
        };
        // SAFETY (all launches below): arguments match the kernels' signatures in order and
        // type; buffers are at least as long as the counts passed with them.
        match (self.kernel, &self.float_grads) {
            (GradientKernel::Device { gradient }, _) => {
                // Output c's parameter: its own quantile with several.
                let (kind, param) = (gradient as u32, gradient.param(&self.params, c));
                let (outputs, c32) = (self.k as u32, c as u32);
                let margin = self.round_margin.as_ref().unwrap_or(&self.margin);
                let label = label_column(&self.label, self.n, self.n_targets, c);
                let mut launch = dev.launcher(&k.objective_max);
                launch.arg(&kind).arg(&param).arg(margin).arg(&label);
                weights_arg(&mut launch, in_loss, &null);
                weights_arg(&mut launch, repeats, &null);
                launch.arg(&n).arg(&outputs).arg(&c32).arg(&mut self.quant);
                unsafe { launch.launch(g) }.map_err(device_error)?;
                share_maxima(dev, &mut self.quant, comm)?;
                finish_quantisation(dev, &mut self.quant, shrink)?;
                let mut launch = dev.launcher(&k.objective_quantise);
                launch.arg(&kind).arg(&param).arg(margin).arg(&label);
                weights_arg(&mut launch, in_loss, &null);
                weights_arg(&mut launch, repeats, &null);
                launch.arg(&n).arg(&outputs).arg(&c32).arg(&self.quant).arg(&mut self.quantised);
                unsafe { launch.launch(g) }.map_err(device_error)?;
            }
            (GradientKernel::Host | GradientKernel::Ranking { .. }, Some(all)) => {
                // These float pairs are unweighted when the weights are repeats.
                let grads: CudaView<GradPair> = all.slice(c * self.n..(c + 1) * self.n);
                let mut launch = dev.launcher(&k.gradient_max);
                launch.arg(&grads);
                weights_arg(&mut launch, repeats, &null);
                launch.arg(&n).arg(&mut self.quant);
                unsafe { launch.launch(g) }.map_err(device_error)?;
                share_maxima(dev, &mut self.quant, comm)?;
                finish_quantisation(dev, &mut self.quant, shrink)?;
                let mut launch = dev.launcher(&k.quantise);
                launch.arg(&grads);
                weights_arg(&mut launch, repeats, &null);
                launch.arg(&n).arg(&self.quant).arg(&mut self.quantised);
                unsafe { launch.launch(g) }.map_err(device_error)?;
            }
            (GradientKernel::Host | GradientKernel::Ranking { .. }, None) => {
                unreachable!("host and ranking gradients have a device buffer")
            }
        }
        Ok(())
    }
}

/// In a distributed fit, the gradients' magnitudes (and the negative-hessian flag) of every
/// worker's rows, so every worker scales alike: one round trip a tree.
fn share_maxima(dev: &mut FitDevice, quant: &mut CudaSlice<Quantisation>, comm: &dyn Collective) -> Result<()> {
    if comm.world() == 1 {
        return Ok(());
    }
    let mut q = dev.download(quant.slice(..))?;
    let mut m = [q[0].g_max_bits as i64, q[0].h_max_bits as i64, q[0].negative_hessian as i64];
    comm.all_reduce_max(&mut m)?;
    (q[0].g_max_bits, q[0].h_max_bits, q[0].negative_hessian) = (m[0] as u32, m[1] as u32, m[2] as u32);
    dev.stream.memcpy_htod(&q, quant).map_err(device_error)
}

/// Passes `w`, or a null pointer for none.
fn weights_arg<'a>(launch: &mut LaunchArgs<'a>, w: Option<&'a CudaSlice<f32>>, null: &'a u64) {
    match w {
        Some(w) => launch.arg(w),
        None => launch.arg(null),
    };
}

/// The scales from the maxima in `quant`, lowered `shrink_bits` halvings.
fn finish_quantisation(dev: &FitDevice, quant: &mut CudaSlice<Quantisation>, shrink_bits: u32) -> Result<()> {
    // SAFETY: one Quantisation, as the kernel expects.
    unsafe { dev.launcher(&dev.rt.kernels.finish_quantisation).arg(quant).arg(&shrink_bits).launch(cfg((1, 1), 32, 0)) }
        .map(drop)
        .map_err(device_error)
}

/// Output `output`'s labels among `n_targets` target-major columns of `n`.
fn label_column(label: &CudaSlice<f32>, n: usize, n_targets: usize, output: usize) -> CudaView<'_, f32> {
    match n_targets {
        1 => label.slice(..),
        _ => label.slice(output * n..(output + 1) * n),
    }
}
