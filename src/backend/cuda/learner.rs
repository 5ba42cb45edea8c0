//! Training on the GPU: the margins, gradients and row index of a fit live on the device, and
//! each tree grows level by level as on the CPU (`backend/cpu/grow.rs`), with every pass over
//! rows or histograms in a kernel. The host keeps the tree and decides what to expand; per
//! level it reads back each node's left-going row count and best split.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, LaunchConfig, PinnedHostSlice, PushKernelArg,
    ValidAsZeroBits,
};

use super::data::{grid_for, DeviceBins, DeviceMatrix};
use super::layout::{
    ChildSlots, EvalTask, GradPair, GradSum, QuantGrad, Quantisation, RowTask, SplitParamsDev, SplitResult, SplitRule,
    TreeNode, NO_MASK,
};
use super::runtime::Runtime;
use super::{device_error, DeviceMemory};
use crate::backend::cpu::grow::next_batch;
use crate::backend::cpu::GrowParams;
use crate::backend::Learner;
use crate::config::{GrowPolicy, Objective, TrainConfig};
use crate::data::{Dataset, FeatureCuts};
use crate::error::{Error, Result};
use crate::objective::{Loss, Targets};
use crate::tree::model::{SplitSpec, NO_CHILD};
use crate::tree::split::SplitScorer;
use crate::tree::{Quantiser, Tree};

/// Rows one histogram block sums: at most 2^15, so its 32-bit shared sums are exact; at
/// least 2^10, so that flushing the block's histogram stays a small part of its work.
const HIST_MAX_ROWS_PER_BLOCK: u32 = 1 << 15;
const HIST_MIN_ROWS_PER_BLOCK: u32 = 1 << 10;
const HIST_THREADS: u32 = 1024;
/// Waves of histogram blocks aimed at (docs/gpu-notes.md has the measurements behind both).
const HIST_WAVES: u64 = 2;
/// Rows one partition block routes.
const PARTITION_ROWS_PER_BLOCK: u32 = 1 << 12;
const PARTITION_THREADS: u32 = 256;
const SCAN_THREADS: u32 = 256;

/// Small uploads (a level's tasks, rules, masks) go through one pinned host buffer, so they
/// stay asynchronous: cudarc copies from pageable memory only after draining the stream. The
/// buffer is reused from its start after each download, which drains the stream anyway.
struct UploadArena {
    host: PinnedHostSlice<u8>,
    base: *mut u8,
    used: usize,
}

impl UploadArena {
    const BYTES: usize = 4 << 20;

    fn new(stream: &Arc<CudaStream>) -> Result<Self> {
        // SAFETY: the buffer is written only at offsets no queued copy reads (see `upload`).
        let mut host = unsafe { stream.context().alloc_pinned::<u8>(Self::BYTES) }.map_err(device_error)?;
        let base = host.as_mut_ptr().map_err(device_error)?;
        Ok(UploadArena { host, base, used: 0 })
    }

    /// Queues a copy of `data` into the front of `dst`.
    fn upload<T: DeviceRepr>(&mut self, stream: &Arc<CudaStream>, data: &[T], dst: &mut CudaSlice<T>) -> Result<()> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Ok(());
        }
        assert!(dst.len() >= data.len(), "upload larger than its destination");
        if bytes > Self::BYTES {
            return stream.memcpy_htod(data, &mut dst.slice_mut(..data.len())).map_err(device_error);
        }
        let mut start = self.used.next_multiple_of(16);
        if start + bytes > self.host.len() {
            // Every queued copy out of the buffer must finish before it is overwritten.
            stream.synchronize().map_err(device_error)?;
            start = 0;
        }
        // SAFETY: [start, start + bytes) lies in the pinned buffer and no queued copy reads it
        // (copies queued since the last drain use earlier offsets); T is plain data.
        let staged = unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr() as *const u8, self.base.add(start), bytes);
            std::slice::from_raw_parts(self.base.add(start) as *const T, data.len())
        };
        let (dst_ptr, _record) = dst.device_ptr_mut(stream);
        // SAFETY: the destination holds at least data.len() elements; the source is pinned and
        // stays untouched until the stream passes this copy.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst_ptr, staged, stream.cu_stream()) }
            .map_err(device_error)?;
        self.used = start + bytes;
        Ok(())
    }

    /// After the stream has been drained: the whole buffer is free again.
    fn drained(&mut self) {
        self.used = 0;
    }
}

/// A device buffer that grows to the largest size asked of it.
struct Scratch<T: DeviceRepr + ValidAsZeroBits> {
    buf: CudaSlice<T>,
}

impl<T: DeviceRepr + ValidAsZeroBits> Scratch<T> {
    fn new(memory: &mut DeviceMemory, stream: &Arc<CudaStream>, len: usize) -> Result<Self> {
        Ok(Scratch { buf: memory.zeros(stream, len)? })
    }

    fn reserve(&mut self, memory: &mut DeviceMemory, stream: &Arc<CudaStream>, len: usize) -> Result<()> {
        if len > self.buf.len() {
            memory.allocated -= self.buf.len() * std::mem::size_of::<T>();
            self.buf = memory.zeros(stream, len.max(self.buf.len() * 2))?;
        }
        Ok(())
    }

    fn upload(
        &mut self,
        memory: &mut DeviceMemory,
        arena: &mut UploadArena,
        stream: &Arc<CudaStream>,
        data: &[T],
    ) -> Result<()> {
        self.reserve(memory, stream, data.len())?;
        arena.upload(stream, data, &mut self.buf)
    }
}

/// Histograms of the nodes that may still split, one slot each, in one growable buffer.
struct HistPool {
    buf: CudaSlice<GradSum>,
    capacity: u32,
    free: Vec<u32>,
    total_slots: usize,
}

impl HistPool {
    /// Room for `slots` histograms at once, allocated up front.
    fn reserve(&mut self, memory: &mut DeviceMemory, stream: &Arc<CudaStream>, slots: u32) -> Result<()> {
        if slots > self.capacity {
            memory.allocated -= self.buf.len() * std::mem::size_of::<GradSum>();
            self.buf = memory.zeros::<GradSum>(stream, slots as usize * self.total_slots)?;
            self.free = (0..slots).rev().collect();
            self.capacity = slots;
        }
        Ok(())
    }

    fn alloc(&mut self, memory: &mut DeviceMemory, stream: &Arc<CudaStream>) -> Result<u32> {
        if let Some(s) = self.free.pop() {
            return Ok(s);
        }
        // Double the pool, keeping the histograms in use.
        let new_capacity = (self.capacity * 2).max(8);
        let mut grown = memory.zeros::<GradSum>(stream, new_capacity as usize * self.total_slots)?;
        if self.capacity > 0 {
            let used = self.capacity as usize * self.total_slots;
            stream.memcpy_dtod(&self.buf.slice(..used), &mut grown.slice_mut(..used)).map_err(device_error)?;
        }
        memory.allocated -= self.buf.len() * std::mem::size_of::<GradSum>();
        self.buf = grown;
        self.free.extend((self.capacity..new_capacity).rev());
        self.capacity = new_capacity;
        Ok(self.free.pop().unwrap())
    }

    fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }
}

/// The histogram launch shape: threads per block, waves of blocks, or a fixed number of rows
/// per block. `POLARS_GBT_HIST_THREADS`, `POLARS_GBT_HIST_WAVES` and
/// `POLARS_GBT_HIST_BLOCK_ROWS` override the defaults (for tuning on new GPUs).
struct HistShape {
    threads: u32,
    waves: u64,
    rows_per_block: Option<u32>,
    /// Rows and threads of a partition block (POLARS_GBT_PARTITION_ROWS / _THREADS).
    partition_rows: u32,
    partition_threads: u32,
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
struct Profile {
    on: bool,
    last: Instant,
    /// gradients, histograms, split search, partition, other
    seconds: [f64; 5],
}

#[derive(Clone, Copy)]
enum Stage {
    Gradients = 0,
    Histograms = 1,
    SplitSearch = 2,
    Partition = 3,
    Other = 4,
}

impl Profile {
    fn lap(&mut self, stream: &CudaStream, stage: Stage) {
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
enum GradientKernel {
    Device { kind: u32, param: f32 },
    Host,
}

/// A node that may still be split.
#[derive(Clone)]
struct Open {
    node: u32,
    depth: usize,
    total: GradSum,
    start: u32,
    len: u32,
    slot: u32,
    best: SplitResult,
    /// The left-going categories of a categorical best split (sorted); empty otherwise.
    categories: Vec<u32>,
}

pub struct GpuLearner<'r> {
    rt: &'r Runtime,
    stream: Arc<CudaStream>,
    memory: DeviceMemory,
    matrix: DeviceMatrix,
    cuts: &'r [FeatureCuts],
    params: GrowParams,
    n: usize,
    k: usize,
    label: CudaSlice<f32>,
    weight: Option<CudaSlice<f32>>,
    margin: CudaSlice<f32>,
    /// Float gradients of every output, for objectives computed on the host only.
    grads: Option<CudaSlice<GradPair>>,
    /// With several outputs and gradients computed per tree on the device: the margins as the
    /// round began, so that output c's gradients do not see this round's trees of outputs < c.
    round_margin: Option<CudaSlice<f32>>,
    qgrads: CudaSlice<QuantGrad>,
    quant: CudaSlice<Quantisation>,
    root_sum: CudaSlice<GradSum>,
    ridx: CudaSlice<u32>,
    ridx_tmp: CudaSlice<u32>,
    /// Per row-index position: whether the row goes left at this level's split.
    flags: CudaSlice<u8>,
    arena: UploadArena,
    /// The first feature of each group of features whose histograms fit in shared memory.
    groups: Vec<u32>,
    groups_dev: CudaSlice<u32>,
    group_shared_bytes: u32,
    pool: HistPool,
    tasks: Scratch<RowTask>,
    builds: Scratch<RowTask>,
    plan: Scratch<ChildSlots>,
    rules: Scratch<SplitRule>,
    slots: Scratch<u32>,
    evals: Scratch<EvalTask>,
    masks: Scratch<u8>,
    per_feature: Scratch<SplitResult>,
    best: Scratch<SplitResult>,
    block_left: Scratch<u32>,
    node_left: Scratch<u32>,
    tree_nodes: Scratch<TreeNode>,
    /// Category bit words of a level's split rules, and of a finished tree's nodes.
    rule_words: Scratch<u32>,
    tree_words: Scratch<u32>,
    /// Categorical features: (feature, first histogram slot, slots), and all their slots
    /// listed, for gathering their histograms to the host.
    categorical: Vec<(u32, u32, u32)>,
    categorical_slots: CudaSlice<u32>,
    gathered: Scratch<GradSum>,
    gradient_kernel: GradientKernel,
    /// Histogram launch shape; environment variables override it for tuning experiments.
    hist: HistShape,
    host_margin: Vec<f32>,
    host_grads: Vec<GradPair>,
    profile: Profile,
}

/// The largest `max_bin` the GPU histograms take: two features of 8193 slots in one block's
/// shared memory (128 KiB) fit every GPU since Volta.
pub const MAX_BIN: usize = 8192;

/// Why a configuration cannot train on the GPU yet, if it cannot.
pub fn unsupported(objective: Objective, max_bin: usize) -> Option<String> {
    if max_bin > MAX_BIN {
        return Some(format!("max_bin={max_bin} is above the CUDA backend's limit of {MAX_BIN}"));
    }
    if matches!(objective, Objective::AbsoluteError | Objective::Quantile) {
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
        let (huber_slope, tweedie_power) = (cfg.huber_slope, cfg.tweedie_variance_power);
        let stream = rt.stream.clone();
        let clock = Instant::now();
        let (n, nf) = (data.n_rows(), data.features.n_features());
        if n >= u32::MAX as usize / 2 {
            return Err(Error::Data(format!("the CUDA backend takes at most 2^31 rows, not {n}")));
        }
        let mut memory = DeviceMemory::default();
        // Everything the fit will hold, known before the first allocation.
        let row_bytes = 4 * 2 + 8 * k + 8 * k + 8 + 4 * 2 + 1; // labels, weights, margins (x2), gradients, ...
        let estimate = n * (DeviceMatrix::plan(&data.features, cuts).bytes_per_row() + row_bytes);
        DeviceMemory::check_fits(&stream, estimate)?;

        let matrix = DeviceMatrix::upload(rt, &mut memory, &data.features, cuts)?;
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
        let device = |kind, param: f64| GradientKernel::Device { kind, param: param as f32 };
        let gradient_kernel = match objective {
            Objective::SquaredError => device(0, 0.0),
            Objective::BinaryLogistic => device(1, 0.0),
            Objective::PseudoHuber => device(2, huber_slope),
            Objective::Poisson => device(3, 0.0),
            Objective::Tweedie => device(4, tweedie_power),
            Objective::MultiSoftprob | Objective::MultiSoftmax => device(5, 0.0),
            _ => GradientKernel::Host,
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

/// Copies the first `len` elements of `src` to the host, which drains the stream (and so frees
/// the upload arena).
fn download<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    arena: &mut UploadArena,
    src: &CudaSlice<T>,
    len: usize,
) -> Result<Vec<T>> {
    let v = stream.clone_dtoh(&src.slice(..len)).map_err(device_error)?;
    arena.drained();
    Ok(v)
}

/// The scales from the maxima in `quant`.
fn finish_quantisation(s: &CudaStream, rt: &Runtime, quant: &mut CudaSlice<Quantisation>) -> Result<()> {
    // SAFETY: one Quantisation, as the kernel expects.
    unsafe { s.launch_builder(&rt.kernels.finish_quantisation).arg(quant).launch(cfg((1, 1), 32, 0)) }
        .map(drop)
        .map_err(device_error)
}

/// Passes the bin matrix, whatever its width.
fn bins_arg<'a>(bins: &'a DeviceBins, launch: &mut cudarc::driver::LaunchArgs<'a>) {
    match bins {
        DeviceBins::U8(b) => launch.arg(b),
        DeviceBins::U16(b) => launch.arg(b),
        DeviceBins::Sparse(b) => launch.arg(b),
    };
}

/// Blocks for each task and the total, filling in `first_block`.
fn assign_blocks(tasks: &mut [RowTask], rows_per_block: u32) -> u32 {
    let mut next = 0;
    for t in tasks.iter_mut() {
        t.first_block = next;
        next += t.len.div_ceil(rows_per_block);
    }
    next
}

fn cfg(blocks: (u32, u32), threads: u32, shared: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks.0, blocks.1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared }
}

impl GpuLearner<'_> {
    /// The kernel of a family for the bins' layout: (u8, u16, sparse).
    fn for_layout<'k>(&self, kernels: [&'k CudaFunction; 3]) -> &'k CudaFunction {
        match self.matrix.bins {
            DeviceBins::U8(_) => kernels[0],
            DeviceBins::U16(_) => kernels[1],
            DeviceBins::Sparse(_) => kernels[2],
        }
    }

    /// Queues the fixed-point gradients of output `c` into `qgrads` (the scales into `quant`).
    fn quantise(&mut self, c: usize) -> Result<()> {
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

    fn split_params(&self, q: &Quantiser) -> SplitParamsDev {
        let p = &self.params.split;
        let (g_unit, h_unit) = q.units();
        SplitParamsDev {
            reg_lambda: p.reg_lambda,
            reg_alpha: p.reg_alpha,
            gamma: p.gamma,
            min_child_weight: p.min_child_weight,
            max_delta_step: p.max_delta_step,
            g_unit,
            h_unit,
        }
    }

    /// Rows per histogram block for a launch over `rows` rows: about two waves of blocks over
    /// the GPU (seed 002: the launch shape comes from the device). Fewer blocks leave SMs idle
    /// at deep levels; more spend their time flushing.
    fn hist_rows_per_block(&self, rows: u64) -> u32 {
        // Blocks an SM holds at once: limited by its shared memory and its 2048 threads.
        let by_memory = self.rt.max_shared_per_block / self.group_shared_bytes.max(1);
        let resident = by_memory.min(2048 / self.hist.threads).max(1) as u64;
        let target_blocks = self.rt.sm_count as u64 * resident * self.hist.waves;
        let rpb = self.hist.rows_per_block.unwrap_or_else(|| rows.div_ceil(target_blocks).next_power_of_two() as u32);
        rpb.clamp(HIST_MIN_ROWS_PER_BLOCK, HIST_MAX_ROWS_PER_BLOCK)
    }

    /// Builds the histograms of the `n_tasks` tasks in `self.builds` (zeroed beforehand).
    fn launch_histograms(&mut self, n_tasks: u32, blocks: u32, rpb: u32) -> Result<()> {
        if n_tasks == 0 || blocks == 0 {
            return Ok(());
        }
        let s = self.stream.clone();
        let total = self.pool.total_slots as u32;
        let stride = self.matrix.stride as u32;
        let k = &self.rt.kernels;
        let f = self.for_layout([&k.histogram_u8, &k.histogram_u16, &k.histogram_sparse]);
        let mut launch = s.launch_builder(f);
        bins_arg(&self.matrix.bins, &mut launch);
        launch
            .arg(&stride)
            .arg(&self.qgrads)
            .arg(&self.ridx)
            .arg(&self.builds.buf)
            .arg(&n_tasks)
            .arg(&self.matrix.slot_offsets_dev)
            .arg(&self.groups_dev)
            .arg(&total)
            .arg(&rpb)
            .arg(&mut self.pool.buf);
        let groups = self.groups.len() as u32 - 1;
        unsafe { launch.launch(cfg((blocks, groups), self.hist.threads, self.group_shared_bytes)) }
            .map_err(device_error)?;
        Ok(())
    }

    /// The root's histogram, from rows `ridx[..n_active]`.
    fn build_root(&mut self, n_active: u32, slot: u32) -> Result<()> {
        let s = self.stream.clone();
        let rpb = self.hist_rows_per_block(n_active as u64);
        let mut tasks = vec![RowTask { start: 0, len: n_active, first_block: 0, slot }];
        let blocks = assign_blocks(&mut tasks, rpb);
        self.builds.upload(&mut self.memory, &mut self.arena, &s, &tasks)?;
        let total = self.pool.total_slots as u32;
        unsafe {
            s.launch_builder(&self.rt.kernels.zero_histograms)
                .arg(&self.builds.buf)
                .arg(&total)
                .arg(&mut self.pool.buf)
                .launch(cfg((total.div_ceil(256).min(64), 1), 256, 0))
        }
        .map_err(device_error)?;
        self.launch_histograms(1, blocks, rpb)
    }

    /// The children's histograms of the split nodes in `plan`: the smaller child of each is
    /// built, the other is its parent minus it. Which is smaller is decided on the device
    /// (`plan_children`), from the partition's counts, with no round trip to the host.
    fn build_children(&mut self, mut plan: Vec<ChildSlots>) -> Result<()> {
        if plan.is_empty() {
            return Ok(());
        }
        let s = self.stream.clone();
        // A smaller child has at most half its parent's rows: reserve blocks for that many.
        let rows: u64 = plan.iter().map(|p| (p.len / 2) as u64).sum();
        let rpb = self.hist_rows_per_block(rows);
        let mut blocks = 0;
        for p in plan.iter_mut() {
            p.first_block = blocks;
            blocks += (p.len / 2).div_ceil(rpb);
        }
        let n = plan.len();
        self.plan.upload(&mut self.memory, &mut self.arena, &s, &plan)?;
        self.builds.reserve(&mut self.memory, &s, n)?;
        self.slots.reserve(&mut self.memory, &s, 3 * n)?;
        let n32 = n as u32;
        let total = self.pool.total_slots as u32;
        unsafe {
            s.launch_builder(&self.rt.kernels.plan_children)
                .arg(&self.plan.buf)
                .arg(&self.node_left.buf)
                .arg(&total)
                .arg(&mut self.builds.buf)
                .arg(&mut self.slots.buf)
                .arg(&mut self.pool.buf)
                .launch(cfg((n32, 1), 256, 0))
        }
        .map_err(device_error)?;
        self.launch_histograms(n32, blocks, rpb)?;
        unsafe {
            s.launch_builder(&self.rt.kernels.subtract_histograms)
                .arg(&self.slots.buf)
                .arg(&total)
                .arg(&mut self.pool.buf)
                .launch(cfg((total.div_ceil(256).min(64), n32), 256, 0))
        }
        .map_err(device_error)?;
        Ok(())
    }

    /// The best split of each node of `tasks` (found or not).
    fn evaluate(&mut self, tasks: &[EvalTask], masks: &[u8], q: &Quantiser) -> Result<Vec<SplitResult>> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        let s = self.stream.clone();
        let nf = self.matrix.n_features as u32;
        self.evals.upload(&mut self.memory, &mut self.arena, &s, tasks)?;
        self.masks.upload(&mut self.memory, &mut self.arena, &s, if masks.is_empty() { &[0u8] } else { masks })?;
        self.per_feature.reserve(&mut self.memory, &s, tasks.len() * nf as usize)?;
        self.best.reserve(&mut self.memory, &s, tasks.len())?;
        let params = self.split_params(q);
        let total = self.pool.total_slots as u32;
        let n_tasks = tasks.len() as u32;
        if matches!(self.matrix.bins, DeviceBins::Sparse(_)) {
            // Compressed rows leave missing values out: their sums are the totals' remainder.
            unsafe {
                s.launch_builder(&self.rt.kernels.fill_missing)
                    .arg(&self.evals.buf)
                    .arg(&self.matrix.slot_offsets_dev)
                    .arg(&total)
                    .arg(&mut self.pool.buf)
                    .launch(cfg((nf, n_tasks), 256, 0))
            }
            .map_err(device_error)?;
        }
        unsafe {
            s.launch_builder(&self.rt.kernels.evaluate_features)
                .arg(&self.pool.buf)
                .arg(&total)
                .arg(&self.matrix.slot_offsets_dev)
                .arg(&self.matrix.categorical_dev)
                .arg(&self.evals.buf)
                .arg(&self.masks.buf)
                .arg(&nf)
                .arg(&params)
                .arg(&mut self.per_feature.buf)
                .launch(cfg((nf, n_tasks), SCAN_THREADS, 0))
        }
        .map_err(device_error)?;
        unsafe {
            s.launch_builder(&self.rt.kernels.best_feature)
                .arg(&self.per_feature.buf)
                .arg(&nf)
                .arg(&n_tasks)
                .arg(&mut self.best.buf)
                .launch(cfg((n_tasks, 1), 32, 0))
        }
        .map_err(device_error)?;
        download(&s, &mut self.arena, &self.best.buf, tasks.len())
    }

    /// Partitions each task's rows by its rule; the left-going counts are left in `node_left`.
    /// `keep_others`: rows of nodes outside `tasks` must stay where they are (loss-guided growth).
    fn partition(
        &mut self,
        mut tasks: Vec<RowTask>,
        rules: &[SplitRule],
        words: &[u32],
        keep_others: bool,
    ) -> Result<()> {
        let s = self.stream.clone();
        self.node_left.reserve(&mut self.memory, &s, tasks.len())?;
        let blocks = assign_blocks(&mut tasks, self.hist.partition_rows);
        if blocks == 0 {
            return Ok(());
        }
        self.tasks.upload(&mut self.memory, &mut self.arena, &s, &tasks)?;
        self.rules.upload(&mut self.memory, &mut self.arena, &s, rules)?;
        self.rule_words.upload(&mut self.memory, &mut self.arena, &s, if words.is_empty() { &[0] } else { words })?;
        self.block_left.reserve(&mut self.memory, &s, blocks as usize)?;
        let (stride, n_tasks, rpb) = (self.matrix.stride as u32, tasks.len() as u32, self.hist.partition_rows);
        let threads = self.hist.partition_threads;
        let k = &self.rt.kernels;
        let count = self.for_layout([&k.count_left_u8, &k.count_left_u16, &k.count_left_sparse]);
        let mut launch = s.launch_builder(count);
        bins_arg(&self.matrix.bins, &mut launch);
        launch
            .arg(&stride)
            .arg(&self.ridx)
            .arg(&self.tasks.buf)
            .arg(&n_tasks)
            .arg(&self.rules.buf)
            .arg(&self.rule_words.buf)
            .arg(&rpb)
            .arg(&mut self.flags)
            .arg(&mut self.block_left.buf);
        unsafe { launch.launch(cfg((blocks, 1), threads, 0)) }.map_err(device_error)?;
        unsafe {
            s.launch_builder(&k.scatter)
                .arg(&self.flags)
                .arg(&self.ridx)
                .arg(&self.tasks.buf)
                .arg(&n_tasks)
                .arg(&rpb)
                .arg(&self.block_left.buf)
                .arg(&mut self.node_left.buf)
                .arg(&mut self.ridx_tmp)
                .launch(cfg((blocks, 1), threads, 0))
        }
        .map_err(device_error)?;
        if keep_others {
            unsafe {
                s.launch_builder(&k.copy_runs)
                    .arg(&self.ridx_tmp)
                    .arg(&self.tasks.buf)
                    .arg(&n_tasks)
                    .arg(&rpb)
                    .arg(&mut self.ridx)
                    .launch(cfg((blocks, 1), threads, 0))
            }
            .map_err(device_error)?;
        } else {
            // Only the split nodes' rows are needed from here on, and they are all in ridx_tmp.
            std::mem::swap(&mut self.ridx, &mut self.ridx_tmp);
        }
        Ok(())
    }

    /// Feature masks of `nodes` (one row each), or none when every feature may split.
    fn masks(&self, tree_features: &[u32], seed: u64, nodes: &[(usize, u32)]) -> (Vec<u8>, bool) {
        let nf = self.matrix.n_features;
        if !self.params.samples_nodes() && tree_features.len() == nf {
            return (Vec::new(), false);
        }
        let mut m = vec![0u8; nodes.len() * nf];
        for (i, &(depth, node)) in nodes.iter().enumerate() {
            for f in self.params.node_features(tree_features, seed, depth, node) {
                m[i * nf + f as usize] = 1;
            }
        }
        (m, true)
    }

    /// Best splits of `open` nodes (whose histograms are built), kept in `open[i].best`.
    fn evaluate_open(&mut self, open: &mut [Open], tree_features: &[u32], seed: u64, q: &Quantiser) -> Result<()> {
        let nodes: Vec<(usize, u32)> = open.iter().map(|o| (o.depth, o.node)).collect();
        let (masks, masked) = self.masks(tree_features, seed, &nodes);
        let tasks: Vec<EvalTask> = open
            .iter()
            .enumerate()
            .map(|(i, o)| EvalTask { total: o.total, slot: o.slot, mask_row: if masked { i as u32 } else { NO_MASK } })
            .collect();
        let found = self.evaluate(&tasks, &masks, q)?;
        for (o, b) in open.iter_mut().zip(found) {
            o.best = b;
            o.categories.clear();
        }
        if !self.categorical.is_empty() && !open.is_empty() {
            self.evaluate_categorical(open, &tasks, &masks, q)?;
        }
        Ok(())
    }

    /// Categorical splits, searched on the host by the CPU's own code over the categorical
    /// features' histograms (gathered in one copy: they are small). The best split of each
    /// node is then the best over all features, ties to the lower feature, as on the CPU.
    fn evaluate_categorical(
        &mut self,
        open: &mut [Open],
        tasks: &[EvalTask],
        masks: &[u8],
        q: &Quantiser,
    ) -> Result<()> {
        let s = self.stream.clone();
        let n_slots = self.categorical_slots.len();
        self.gathered.reserve(&mut self.memory, &s, tasks.len() * n_slots)?;
        let (total, n32) = (self.pool.total_slots as u32, n_slots as u32);
        unsafe {
            s.launch_builder(&self.rt.kernels.gather_slots)
                .arg(&self.pool.buf)
                .arg(&total)
                .arg(&self.evals.buf)
                .arg(&self.categorical_slots)
                .arg(&n32)
                .arg(&mut self.gathered.buf)
                .launch(cfg((tasks.len() as u32, 1), 256, 0))
        }
        .map_err(device_error)?;
        let hists = download(&s, &mut self.arena, &self.gathered.buf, tasks.len() * n_slots)?;
        let nf = self.matrix.n_features;
        for (t, o) in open.iter_mut().enumerate() {
            let scorer = SplitScorer::new(&self.params.split, q, o.total);
            for &(f, first, len) in &self.categorical {
                if tasks[t].mask_row != NO_MASK && masks[t * nf + f as usize] == 0 {
                    continue;
                }
                let h = &hists[t * n_slots + first as usize..t * n_slots + (first + len) as usize];
                let Some(c) = scorer.best_categorical(f, h) else { continue };
                let b = &o.best;
                if b.found == 0 || c.gain > b.gain || (c.gain == b.gain && f < b.feature) {
                    o.best = SplitResult {
                        left: c.left,
                        gain: c.gain,
                        feature: f,
                        split_bin: 0,
                        default_left: c.default_left as u32,
                        found: 1,
                    };
                    o.categories = c.left_categories;
                }
            }
        }
        Ok(())
    }

    fn grow_tree(&mut self, c: usize, rows: Option<&[u32]>, tree_features: &[u32], seed: u64) -> Result<Tree> {
        let s = self.stream.clone();
        let n_active = rows.map_or(self.n, <[u32]>::len) as u32;
        match rows {
            Some(r) => s.memcpy_htod(r, &mut self.ridx.slice_mut(..r.len())).map_err(device_error)?,
            None => {
                let n = self.n as u32;
                unsafe {
                    s.launch_builder(&self.rt.kernels.fill_identity).arg(&mut self.ridx).arg(&n).launch(grid_for(
                        self.rt,
                        self.n as u64,
                        256,
                    ))
                }
                .map_err(device_error)?;
            }
        }
        self.quantise(c)?;
        s.memset_zeros(&mut self.root_sum).map_err(device_error)?;
        unsafe {
            s.launch_builder(&self.rt.kernels.sum_rows)
                .arg(&self.qgrads)
                .arg(&self.ridx)
                .arg(&n_active)
                .arg(&mut self.root_sum)
                .launch(grid_for(self.rt, n_active as u64, 256))
        }
        .map_err(device_error)?;
        // One synchronisation for both: the scales and the root's sums.
        let scales = download(&s, &mut self.arena, &self.quant, 1)?[0];
        let total = download(&s, &mut self.arena, &self.root_sum, 1)?[0];
        if scales.negative_hessian != 0 {
            return Err(Error::Data("the objective produced a negative hessian, which training cannot use".into()));
        }
        let q = Quantiser::from_scales(scales.g_scale, scales.h_scale);
        self.profile.lap(&s, Stage::Gradients);
        let cover = |t: GradSum| q.to_float(t).1 as f32;
        let mut tree = Tree::leaf(self.params.leaf_value(&q, total), cover(total));
        let mut open: Vec<Open> = Vec::new();
        if self.params.can_split_at(0) {
            let slot = self.pool.alloc(&mut self.memory, &s)?;
            self.build_root(n_active, slot)?;
            self.profile.lap(&s, Stage::Histograms);
            let mut root = vec![Open {
                node: 0,
                depth: 0,
                total,
                start: 0,
                len: n_active,
                slot,
                best: SplitResult::default(),
                categories: Vec::new(),
            }];
            self.evaluate_open(&mut root, tree_features, seed, &q)?;
            self.profile.lap(&s, Stage::SplitSearch);
            if root[0].best.found != 0 {
                open = root;
            } else {
                self.pool.release(slot);
            }
        }
        let mut n_leaves = 1;
        while !open.is_empty() {
            let batch = next_batch(&mut open, self.params.policy, |o| (o.best.gain, o.node));
            let mut expanding = Vec::new();
            for o in batch {
                if self.params.max_leaves == 0 || n_leaves < self.params.max_leaves {
                    n_leaves += 1;
                    expanding.push(o);
                } else {
                    self.pool.release(o.slot);
                }
            }
            if expanding.is_empty() {
                break;
            }
            open.extend(self.expand(&mut tree, expanding, &q, tree_features, seed)?);
        }
        for o in open {
            self.pool.release(o.slot);
        }
        self.add_tree(c, &tree)?;
        self.profile.lap(&s, Stage::Other);
        Ok(tree)
    }

    /// Splits `parents`, then builds and evaluates their children.
    fn expand(
        &mut self,
        tree: &mut Tree,
        parents: Vec<Open>,
        q: &Quantiser,
        tree_features: &[u32],
        seed: u64,
    ) -> Result<Vec<Open>> {
        let s = self.stream.clone();
        let mut children_nodes = Vec::with_capacity(parents.len());
        let mut tasks = Vec::with_capacity(parents.len());
        let mut rules = Vec::with_capacity(parents.len());
        let mut rule_words: Vec<u32> = Vec::new();
        for p in &parents {
            let b = &p.best;
            let right = p.total - b.left;
            let categorical = !p.categories.is_empty();
            let spec = SplitSpec {
                feature: b.feature,
                threshold: if categorical { 0.0 } else { self.cuts[b.feature as usize].upper_bound(b.split_bin) },
                split_bin: b.split_bin,
                default_left: b.default_left != 0,
                left_categories: &p.categories,
                gain: b.gain as f32,
            };
            let cover = |t: GradSum| q.to_float(t).1 as f32;
            let (l, r) = tree.split(
                p.node,
                &spec,
                (self.params.leaf_value(q, b.left), cover(b.left)),
                (self.params.leaf_value(q, right), cover(right)),
            );
            children_nodes.push((l, r));
            tasks.push(RowTask { start: p.start, len: p.len, first_block: 0, slot: 0 });
            let (category_start, category_len) = if categorical {
                let n = p.node as usize;
                let (start, len) = (tree.category_start[n] as usize, tree.category_len[n] as usize);
                rule_words.extend_from_slice(&tree.category_words[start..start + len]);
                ((rule_words.len() - len) as u32, len as u32)
            } else {
                (0, 0)
            };
            rules.push(SplitRule {
                feature: b.feature,
                split_bin: b.split_bin,
                missing_bin: self.matrix.n_bins[b.feature as usize],
                default_left: b.default_left,
                category_start,
                category_len,
            });
        }
        // Children that cannot split need no rows: the margins are updated by walking the tree.
        if !parents.iter().any(|p| self.params.can_split_at(p.depth + 1)) {
            for p in &parents {
                self.pool.release(p.slot);
            }
            return Ok(Vec::new());
        }
        let keep_others = self.params.policy == GrowPolicy::Lossguide;
        self.partition(tasks, &rules, &rule_words, keep_others)?;
        self.profile.lap(&s, Stage::Partition);

        let mut children: Vec<Open> = Vec::new();
        let mut plan = Vec::new();
        for (i, (p, &(l, r))) in parents.iter().zip(&children_nodes).enumerate() {
            if !self.params.can_split_at(p.depth + 1) {
                self.pool.release(p.slot);
                continue;
            }
            let left_slot = self.pool.alloc(&mut self.memory, &s)?;
            let right_slot = self.pool.alloc(&mut self.memory, &s)?;
            plan.push(ChildSlots {
                start: p.start,
                len: p.len,
                first_block: 0,
                task: i as u32,
                parent_slot: p.slot,
                left_slot,
                right_slot,
                pad: 0,
            });
            // The runs are filled in once the partition's counts arrive, below.
            let child = |node, total, slot| Open {
                node,
                depth: p.depth + 1,
                total,
                start: p.start,
                len: 0,
                slot,
                best: SplitResult::default(),
                categories: Vec::new(),
            };
            children.push(child(l, p.best.left, left_slot));
            children.push(child(r, p.total - p.best.left, right_slot));
        }
        self.build_children(plan)?;
        for p in &parents {
            if self.params.can_split_at(p.depth + 1) {
                // Later launches on the stream may reuse the slot: the subtraction is queued first.
                self.pool.release(p.slot);
            }
        }
        self.profile.lap(&s, Stage::Histograms);
        self.evaluate_open(&mut children, tree_features, seed, q)?;
        // The evaluation's download drained the stream: the counts are ready too.
        let lefts = download(&s, &mut self.arena, &self.node_left.buf, parents.len())?;
        let mut k = 0;
        for (p, &nl) in parents.iter().zip(&lefts) {
            // A run with no rows had no block to store its count.
            let nl = if p.len == 0 { 0 } else { nl };
            if self.params.can_split_at(p.depth + 1) {
                children[k].len = nl;
                children[k + 1].start = p.start + nl;
                children[k + 1].len = p.len - nl;
                k += 2;
            }
        }
        self.profile.lap(&s, Stage::SplitSearch);
        let mut open = Vec::new();
        for c in children {
            if c.best.found != 0 {
                open.push(c);
            } else {
                self.pool.release(c.slot);
            }
        }
        Ok(open)
    }

    /// Adds `tree` to output `c`'s margins.
    fn add_tree(&mut self, c: usize, tree: &Tree) -> Result<()> {
        let s = self.stream.clone();
        let nodes: Vec<TreeNode> = (0..tree.n_nodes())
            .map(|i| {
                let f = tree.feature[i];
                TreeNode {
                    left: tree.left[i],
                    right: tree.right[i],
                    feature: f,
                    split_bin: tree.split_bin[i],
                    missing_bin: if tree.left[i] == NO_CHILD { 0 } else { self.matrix.n_bins[f as usize] },
                    default_left: tree.default_left[i] as u32,
                    value: tree.value[i],
                    category_start: tree.category_start[i],
                    category_len: tree.category_len[i],
                    pad: 0,
                }
            })
            .collect();
        self.tree_nodes.upload(&mut self.memory, &mut self.arena, &s, &nodes)?;
        let words = if tree.category_words.is_empty() { &[0u32][..] } else { &tree.category_words };
        self.tree_words.upload(&mut self.memory, &mut self.arena, &s, words)?;
        let (stride, n) = (self.matrix.stride as u32, self.n as u32);
        let k = &self.rt.kernels;
        let f = self.for_layout([&k.add_tree_u8, &k.add_tree_u16, &k.add_tree_sparse]);
        let mut margin = self.margin.slice_mut(c * self.n..(c + 1) * self.n);
        let mut launch = s.launch_builder(f);
        bins_arg(&self.matrix.bins, &mut launch);
        launch.arg(&stride).arg(&n).arg(&self.tree_nodes.buf).arg(&self.tree_words.buf).arg(&mut margin);
        unsafe { launch.launch(grid_for(self.rt, self.n as u64, 256)) }.map(drop).map_err(device_error)
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
