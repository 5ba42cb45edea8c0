//! Training on the GPU: the margins, gradients and row index of a fit live on the device, and
//! each tree grows level by level as on the CPU (`backend/cpu/grow.rs`), with every pass over
//! rows or histograms in a kernel. The host keeps the tree and decides what to expand; per
//! level it reads back each node's left-going row count and best split.
//!
//! This file holds the learner's state, its set-up and the round's gradients; `grow.rs` the
//! tree driver, `steps.rs` the per-level steps, `buffers.rs` the buffers they share.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};

use super::buffers::{HistPool, Scratch, UploadArena};
use super::data::{grid_for, DeviceMatrix};
use super::layout::{
    ChildSlots, EvalTask, GradPair, GradSum, QuantGrad, Quantisation, RowTask, SplitResult, SplitRule, TreeNode,
};
use super::runtime::Runtime;
use super::steps::cfg;
use super::{device_error, DeviceMemory};
use crate::backend::cpu::GrowParams;
use crate::backend::Learner;
use crate::config::{GrowPolicy, Objective, TrainConfig};
use crate::data::{Dataset, FeatureCuts};
use crate::error::{Error, Result};
use crate::objective::{Loss, Targets};
use crate::tree::Tree;

/// Rows one histogram block sums: at most 2^15, so its 32-bit shared sums are exact; at
/// least 2^10, so that flushing the block's histogram stays a small part of its work.
pub(super) const HIST_MAX_ROWS_PER_BLOCK: u32 = 1 << 15;
pub(super) const HIST_MIN_ROWS_PER_BLOCK: u32 = 1 << 10;
const HIST_THREADS: u32 = 1024;
/// Waves of histogram blocks aimed at (docs/gpu-notes.md has the measurements behind both).
const HIST_WAVES: u64 = 2;
/// Rows one partition block routes.
const PARTITION_ROWS_PER_BLOCK: u32 = 1 << 12;
const PARTITION_THREADS: u32 = 256;
pub(super) const SCAN_THREADS: u32 = 256;

/// The histogram launch shape: threads per block, waves of blocks, or a fixed number of rows
/// per block. `POLARS_GBT_HIST_THREADS`, `POLARS_GBT_HIST_WAVES` and
/// `POLARS_GBT_HIST_BLOCK_ROWS` override the defaults (for tuning on new GPUs).
pub(super) struct HistShape {
    pub(super) threads: u32,
    pub(super) waves: u64,
    pub(super) rows_per_block: Option<u32>,
    /// Rows and threads of a partition block (POLARS_GBT_PARTITION_ROWS / _THREADS).
    pub(super) partition_rows: u32,
    pub(super) partition_threads: u32,
}

impl HistShape {
    fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        HistShape {
            threads: var("POLARS_GBT_HIST_THREADS").map_or(HIST_THREADS, |t| (t as u32).clamp(32, 1024) / 32 * 32),
            waves: var("POLARS_GBT_HIST_WAVES").unwrap_or(HIST_WAVES).max(1),
            rows_per_block: var("POLARS_GBT_HIST_BLOCK_ROWS").map(|r| r as u32),
            partition_rows: var("POLARS_GBT_PARTITION_ROWS").map_or(PARTITION_ROWS_PER_BLOCK, |r| (r as u32).max(256)),
            partition_threads: var("POLARS_GBT_PARTITION_THREADS")
                .map_or(PARTITION_THREADS, |t| (t as u32).clamp(32, 1024) / 32 * 32),
        }
    }
}

/// Where the time goes, when `POLARS_GBT_PROFILE=1` (each stage then ends with a device
/// synchronisation, which slows training a little).
pub(super) struct Profile {
    on: bool,
    last: Instant,
    /// gradients, histograms, split search, partition, other
    seconds: [f64; 5],
}

#[derive(Clone, Copy)]
pub(super) enum Stage {
    Gradients = 0,
    Histograms = 1,
    SplitSearch = 2,
    Partition = 3,
    Other = 4,
}

impl Profile {
    pub(super) fn lap(&mut self, stream: &CudaStream, stage: Stage) {
        if self.on {
            let _ = stream.synchronize();
            let now = Instant::now();
            self.seconds[stage as usize] += (now - self.last).as_secs_f64();
            self.last = now;
        }
    }
}

/// How the round's gradients are computed: by a kernel (its objective code in
/// kernels/gradients.cu and parameter), or on the host (ranking, whose pairs span a query
/// group, and the losses with leaf refits).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum GradientKernel {
    Device { kind: u32, param: f32 },
    Host,
}

/// A node that may still be split.
#[derive(Clone)]
pub(super) struct Open {
    pub(super) node: u32,
    pub(super) depth: usize,
    pub(super) total: GradSum,
    pub(super) start: u32,
    pub(super) len: u32,
    pub(super) slot: u32,
    pub(super) best: SplitResult,
    /// The left-going categories of a categorical best split (sorted); empty otherwise.
    pub(super) categories: Vec<u32>,
}

pub struct GpuLearner<'r> {
    pub(super) rt: &'r Runtime,
    pub(super) stream: Arc<CudaStream>,
    pub(super) memory: DeviceMemory,
    pub(super) matrix: DeviceMatrix,
    pub(super) cuts: &'r [FeatureCuts],
    pub(super) params: GrowParams,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) label: CudaSlice<f32>,
    pub(super) weight: Option<CudaSlice<f32>>,
    pub(super) margin: CudaSlice<f32>,
    /// Float gradients of every output, for objectives computed on the host only.
    pub(super) grads: Option<CudaSlice<GradPair>>,
    /// With several outputs and gradients computed per tree on the device: the margins as the
    /// round began, so that output c's gradients do not see this round's trees of outputs < c.
    pub(super) round_margin: Option<CudaSlice<f32>>,
    pub(super) qgrads: CudaSlice<QuantGrad>,
    pub(super) quant: CudaSlice<Quantisation>,
    pub(super) root_sum: CudaSlice<GradSum>,
    pub(super) ridx: CudaSlice<u32>,
    pub(super) ridx_tmp: CudaSlice<u32>,
    /// Per row-index position: whether the row goes left at this level's split.
    pub(super) flags: CudaSlice<u8>,
    pub(super) arena: UploadArena,
    /// The first feature of each group of features whose histograms fit in shared memory.
    pub(super) groups: Vec<u32>,
    pub(super) groups_dev: CudaSlice<u32>,
    pub(super) group_shared_bytes: u32,
    pub(super) pool: HistPool,
    pub(super) tasks: Scratch<RowTask>,
    pub(super) builds: Scratch<RowTask>,
    pub(super) plan: Scratch<ChildSlots>,
    pub(super) rules: Scratch<SplitRule>,
    pub(super) slots: Scratch<u32>,
    pub(super) evals: Scratch<EvalTask>,
    pub(super) masks: Scratch<u8>,
    pub(super) per_feature: Scratch<SplitResult>,
    pub(super) best: Scratch<SplitResult>,
    pub(super) block_left: Scratch<u32>,
    pub(super) node_left: Scratch<u32>,
    pub(super) tree_nodes: Scratch<TreeNode>,
    /// Category bit words of a level's split rules, and of a finished tree's nodes.
    pub(super) rule_words: Scratch<u32>,
    pub(super) tree_words: Scratch<u32>,
    /// Categorical features: (feature, first histogram slot, slots), and all their slots
    /// listed, for gathering their histograms to the host.
    pub(super) categorical: Vec<(u32, u32, u32)>,
    pub(super) categorical_slots: CudaSlice<u32>,
    pub(super) gathered: Scratch<GradSum>,
    pub(super) gradient_kernel: GradientKernel,
    /// Histogram launch shape; environment variables override it for tuning experiments.
    pub(super) hist: HistShape,
    pub(super) host_margin: Vec<f32>,
    pub(super) host_grads: Vec<GradPair>,
    pub(super) profile: Profile,
}

/// The largest `max_bin` the GPU histograms take: two features of 8193 slots in one block's
/// shared memory (128 KiB) fit every GPU since Volta.
pub const MAX_BIN: usize = 8192;

/// Why a configuration cannot train on the GPU yet, if it cannot.
pub fn unsupported(objective: Objective, max_bin: usize) -> Option<String> {
    if max_bin > MAX_BIN {
        return Some(format!("max_bin={max_bin} is above the CUDA backend's limit of {MAX_BIN}"));
    }
    if objective.refits_leaves() {
        return Some(format!("{} (leaf refits) is not supported by the CUDA backend yet", objective.name()));
    }
    None
}

impl<'r> GpuLearner<'r> {
    /// Moves `data` to the device and prepares a fit of `cfg`'s outputs starting from
    /// `start_margin` (class-major).
    pub fn new(
        rt: &'r Runtime,
        data: &Dataset,
        cuts: &'r [FeatureCuts],
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &[f32],
    ) -> Result<Self> {
        let (objective, k) = (cfg.objective, cfg.num_outputs());
        let stream = rt.stream.clone();
        let clock = Instant::now();
        let (n, nf) = (data.n_rows(), data.features.n_features());
        if n >= u32::MAX as usize / 2 {
            return Err(Error::Data(format!("the CUDA backend takes at most 2^31 rows, not {n}")));
        }
        let mut memory = DeviceMemory::default();
        // Everything the fit will hold, known before the first allocation.
        let row_bytes = 4 * 2 + 8 * k + 8 * k + 8 + 4 * 2 + 1; // labels, weights, margins (x2), gradients, ...
                                                               // The layout is planned once: for mostly-null data that reads every value on the host.
        let layout = DeviceMatrix::plan(&data.features, cuts);
        let estimate = n * (layout.bytes_per_row() + row_bytes);
        DeviceMemory::check_fits(&stream, estimate)?;

        let matrix = DeviceMatrix::upload(rt, &mut memory, &data.features, cuts, layout)?;
        let total_slots = matrix.total_slots();
        // Pack features into groups whose shared histograms (2 x i32 per slot) fit the device's
        // per-block shared memory. Groups start on a word of bins, as the kernel reads them.
        let budget = rt.hist_shared_budget as usize;
        let per_word = matrix.per_word();
        // In shared memory each feature of a group takes as many slots as the group's widest.
        let mut groups = vec![0u32];
        let (mut group_features, mut group_widest, mut widest_group_bytes) = (0usize, 0usize, 0usize);
        for first in (0..nf).step_by(per_word) {
            let word = first..(first + per_word).min(nf);
            let widest = word.clone().map(|f| matrix.n_bins[f] as usize + 1).max().unwrap_or(0);
            let bytes_with = |features: usize, widest: usize| features * widest * 8;
            if bytes_with(word.len(), widest) > budget {
                return Err(Error::param(
                    "max_bin",
                    format!(
                        "the histograms of features {first}.. need {} bytes, more than the GPU's {budget} bytes of shared memory per block",
                        bytes_with(word.len(), widest)
                    ),
                ));
            }
            let merged = group_widest.max(widest);
            if group_features > 0 && bytes_with(group_features + word.len(), merged) > budget {
                groups.push(first as u32);
                widest_group_bytes = widest_group_bytes.max(bytes_with(group_features, group_widest));
                (group_features, group_widest) = (0, 0);
            }
            group_features += word.len();
            group_widest = group_widest.max(widest);
        }
        widest_group_bytes = widest_group_bytes.max(group_features * group_widest * 8);
        groups.push(nf as u32);
        let widest = widest_group_bytes;
        let groups_dev = memory.upload(&stream, &groups)?;
        let mut categorical = Vec::new();
        let mut categorical_slots: Vec<u32> = Vec::new();
        for (f, c) in cuts.iter().enumerate() {
            if c.is_categorical() {
                let (first, end) = (matrix.slot_offsets[f], matrix.slot_offsets[f + 1]);
                categorical.push((f as u32, categorical_slots.len() as u32, end - first));
                categorical_slots.extend(first..end);
            }
        }

        let label = memory.upload(&stream, &data.label)?;
        let weight = match &data.weight {
            Some(w) => Some(memory.upload(&stream, w)?),
            None => None,
        };
        let margin = memory.upload(&stream, start_margin)?;
        let gradient_kernel = match objective.gpu_gradient() {
            Some(g) => GradientKernel::Device { kind: g as u32, param: g.param(&cfg.objective_params()) },
            None => GradientKernel::Host,
        };
        let mut learner = GpuLearner {
            rt,
            grads: match gradient_kernel {
                GradientKernel::Host => Some(memory.zeros(&stream, n * k)?),
                GradientKernel::Device { .. } => None,
            },
            round_margin: match gradient_kernel {
                GradientKernel::Device { .. } if k > 1 => Some(memory.zeros(&stream, n * k)?),
                _ => None,
            },
            qgrads: memory.zeros(&stream, n)?,
            quant: memory.zeros(&stream, 1)?,
            root_sum: memory.zeros(&stream, 1)?,
            ridx: memory.zeros(&stream, n)?,
            ridx_tmp: memory.zeros(&stream, n)?,
            flags: memory.zeros(&stream, n)?,
            arena: UploadArena::new(&stream)?,
            pool: HistPool { buf: memory.zeros(&stream, 1)?, capacity: 0, free: Vec::new(), total_slots },
            tasks: Scratch::new(&mut memory, &stream, 64)?,
            builds: Scratch::new(&mut memory, &stream, 64)?,
            plan: Scratch::new(&mut memory, &stream, 64)?,
            rules: Scratch::new(&mut memory, &stream, 64)?,
            slots: Scratch::new(&mut memory, &stream, 64)?,
            evals: Scratch::new(&mut memory, &stream, 64)?,
            masks: Scratch::new(&mut memory, &stream, 64)?,
            per_feature: Scratch::new(&mut memory, &stream, 64 * nf)?,
            best: Scratch::new(&mut memory, &stream, 64)?,
            block_left: Scratch::new(&mut memory, &stream, 1024)?,
            node_left: Scratch::new(&mut memory, &stream, 64)?,
            tree_nodes: Scratch::new(&mut memory, &stream, 256)?,
            rule_words: Scratch::new(&mut memory, &stream, 64)?,
            tree_words: Scratch::new(&mut memory, &stream, 64)?,
            categorical_slots: memory.upload(&stream, &categorical_slots)?,
            categorical,
            gathered: Scratch::new(&mut memory, &stream, 64)?,
            matrix,
            cuts,
            params,
            n,
            k,
            label,
            weight,
            margin,
            groups,
            groups_dev,
            group_shared_bytes: widest as u32,
            gradient_kernel,
            hist: HistShape::from_env(),
            host_margin: Vec::new(),
            host_grads: Vec::new(),
            profile: Profile {
                on: std::env::var_os("POLARS_GBT_PROFILE").is_some_and(|v| v == "1"),
                last: Instant::now(),
                seconds: [0.0; 5],
            },
            stream,
            memory,
        };
        // Depth-wise growth holds at most three histograms per node of the second-to-last
        // level with histograms (parents plus both children): size the pool for that once,
        // rather than doubling it as trees deepen (which briefly holds both copies).
        if learner.params.policy == GrowPolicy::Depthwise && learner.params.max_depth >= 2 {
            let slots = 3u64 << (learner.params.max_depth - 2).min(20);
            if slots * (total_slots as u64) * 16 <= 256 << 20 {
                let s = learner.stream.clone();
                learner.pool.reserve(&mut learner.memory, &s, slots as u32)?;
            }
        }
        if learner.profile.on {
            learner.stream.synchronize().map_err(device_error)?;
            eprintln!(
                "polars-gbt profile: ingest and binning on {} ({}): {:.3} s, {:.0} MiB on the device",
                rt.name,
                rt.arch,
                clock.elapsed().as_secs_f64(),
                learner.memory.allocated as f64 / (1024.0 * 1024.0)
            );
            learner.profile.last = Instant::now();
        }
        Ok(learner)
    }
}

/// The scales from the maxima in `quant`.
fn finish_quantisation(s: &CudaStream, rt: &Runtime, quant: &mut CudaSlice<Quantisation>) -> Result<()> {
    // SAFETY: one Quantisation, as the kernel expects.
    unsafe { s.launch_builder(&rt.kernels.finish_quantisation).arg(quant).launch(cfg((1, 1), 32, 0)) }
        .map(drop)
        .map_err(device_error)
}

impl GpuLearner<'_> {
    /// Queues the fixed-point gradients of output `c` into `qgrads` (the scales into `quant`).
    pub(super) fn quantise(&mut self, c: usize) -> Result<()> {
        let n = self.n as u32;
        let s = self.stream.clone();
        s.memset_zeros(&mut self.quant).map_err(device_error)?;
        let g = grid_for(self.rt, self.n as u64, 256);
        let null = 0u64;
        // SAFETY (all launches below): arguments match the kernels' signatures in order and
        // type; buffers are at least as long as the counts passed with them.
        match (self.gradient_kernel, &self.grads) {
            (GradientKernel::Device { kind, param }, _) => {
                let (k, c32) = (self.k as u32, c as u32);
                let margin = self.round_margin.as_ref().unwrap_or(&self.margin);
                let mut launch = s.launch_builder(&self.rt.kernels.objective_max);
                launch.arg(&kind).arg(&param).arg(margin).arg(&self.label);
                match &self.weight {
                    Some(w) => launch.arg(w),
                    None => launch.arg(&null),
                };
                launch.arg(&n).arg(&k).arg(&c32).arg(&mut self.quant);
                unsafe { launch.launch(g) }.map_err(device_error)?;
                finish_quantisation(&s, self.rt, &mut self.quant)?;
                let mut launch = s.launch_builder(&self.rt.kernels.objective_quantise);
                launch.arg(&kind).arg(&param).arg(margin).arg(&self.label);
                match &self.weight {
                    Some(w) => launch.arg(w),
                    None => launch.arg(&null),
                };
                launch.arg(&n).arg(&k).arg(&c32).arg(&self.quant).arg(&mut self.qgrads);
                unsafe { launch.launch(g) }.map_err(device_error)?;
            }
            (GradientKernel::Host, Some(all)) => {
                let grads = all.slice(c * self.n..(c + 1) * self.n);
                unsafe {
                    s.launch_builder(&self.rt.kernels.gradient_max).arg(&grads).arg(&n).arg(&mut self.quant).launch(g)
                }
                .map_err(device_error)?;
                finish_quantisation(&s, self.rt, &mut self.quant)?;
                unsafe {
                    s.launch_builder(&self.rt.kernels.quantise)
                        .arg(&grads)
                        .arg(&n)
                        .arg(&self.quant)
                        .arg(&mut self.qgrads)
                        .launch(g)
                }
                .map_err(device_error)?;
            }
            (GradientKernel::Host, None) => unreachable!("host gradients have a device buffer"),
        }
        Ok(())
    }
}

impl Learner for GpuLearner<'_> {
    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        let s = self.stream.clone();
        if let Some(grads) = &mut self.grads {
            // Objectives without a kernel: the margins visit the host once a round.
            self.host_margin.resize(self.n * self.k, 0.0);
            self.host_grads.resize(self.n * self.k, GradPair::default());
            s.memcpy_dtoh(&self.margin, &mut self.host_margin).map_err(device_error)?;
            self.arena.drained();
            loss.gradients(&self.host_margin, targets, &mut self.host_grads);
            s.memcpy_htod(&self.host_grads, grads).map_err(device_error)?;
        }
        // Objectives with a kernel compute their gradients as they quantise them (per tree),
        // from the margins as the round began.
        if let Some(round) = &mut self.round_margin {
            s.memcpy_dtod(&self.margin, round).map_err(device_error)?;
        }
        self.profile.lap(&s, Stage::Gradients);
        Ok(())
    }

    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree> {
        self.grow_tree(output, rows, &tree_features, seed)
    }
}

impl Drop for GpuLearner<'_> {
    fn drop(&mut self) {
        if self.profile.on {
            let [g, h, sp, p, o] = self.profile.seconds;
            eprintln!(
                "polars-gbt profile: gradients {g:.3} s, histograms {h:.3} s, split search {sp:.3} s, \
                 partition {p:.3} s, other {o:.3} s; peak {:.0} MiB on the device",
                self.memory.peak as f64 / (1024.0 * 1024.0)
            );
        }
    }
}
