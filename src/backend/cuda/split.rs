//! Split search on the device (`kernels/split.cu`, `split_categorical.cu`, `split_vector.cu`):
//! every (node, numeric feature) scanned in one launch, every (node, categorical feature)
//! searched in another (categories ordered and sorted on the device), both with the CPU's
//! double-precision arithmetic, then the best feature per node. The host reads back each
//! node's best split and, for categorical winners, the categories sent left.

use cudarc::driver::{CudaSlice, CudaView};

use super::buffers::{FitDevice, HistPool, Scratch};
use super::data::DeviceMatrix;
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut};
use super::layout::{CategoricalParams, EvalTask, GradSum, SplitParamsDev, SplitResult, TaskRows, NO_MASK};
use crate::data::FeatureCuts;
use crate::error::Result;
use crate::tree::grow::TreeContext;
use crate::tree::split::{SplitCandidate, SplitParams};
use crate::tree::split_vector::vector_parent_score;
use crate::tree::NodeLimits;

/// `evaluate_features` (kernels/split.cu): the best numeric split of each (task, feature).
#[repr(C)]
pub struct EvaluateFeaturesArgs<'a> {
    pub hist: DevPtr<'a, GradSum>,
    pub total_slots: u32,
    pub slot_offsets: DevPtr<'a, u32>,
    pub categorical: DevPtr<'a, u32>,
    pub tasks: DevPtr<'a, EvalTask>,
    pub masks: DevPtr<'a, u8>,
    pub monotone: DevPtr<'a, i8>,
    pub n_features: u32,
    pub p: SplitParamsDev,
    pub out: DevPtrMut<'a, SplitResult>,
}

/// `best_feature`: each task's best of its features' splits.
#[repr(C)]
pub struct BestFeatureArgs<'a> {
    pub per_feature: DevPtr<'a, SplitResult>,
    pub n_features: u32,
    pub n_tasks: u32,
    pub out: DevPtrMut<'a, SplitResult>,
}

/// `evaluate_categorical`: the best split of each (task, categorical feature).
#[repr(C)]
pub struct EvaluateCategoricalArgs<'a> {
    pub hist: DevPtr<'a, GradSum>,
    pub total_slots: u32,
    pub slot_offsets: DevPtr<'a, u32>,
    pub features: DevPtr<'a, u32>,
    pub regions: DevPtr<'a, u32>,
    pub region_per_task: u32,
    pub tasks: DevPtr<'a, EvalTask>,
    pub task_rows: DevPtr<'a, TaskRows>,
    pub node_left: DevPtr<'a, u32>,
    pub masks: DevPtr<'a, u8>,
    pub n_features: u32,
    pub p: SplitParamsDev,
    pub cp: CategoricalParams,
    pub sort_chunk: u32,
    pub sort_keys: DevPtrMut<'a, u64>,
    pub sort_tags: DevPtrMut<'a, u32>,
    pub out: DevPtrMut<'a, SplitResult>,
}

/// `gather_runs`: runs (task, start, length) of the tasks' regions of `src`, into `out` at
/// `offsets`.
#[repr(C)]
pub struct GatherRunsArgs<'a> {
    pub src: DevPtr<'a, u32>,
    pub region_per_task: u32,
    pub runs: DevPtr<'a, u32>,
    pub offsets: DevPtr<'a, u32>,
    pub out: DevPtrMut<'a, u32>,
}

/// `fill_missing` (kernels/sparse.cu): each feature's missing slot of the tasks' histograms.
#[repr(C)]
pub struct FillMissingArgs<'a> {
    pub tasks: DevPtr<'a, EvalTask>,
    pub slot_offsets: DevPtr<'a, u32>,
    pub total_slots: u32,
    pub hist: DevPtrMut<'a, GradSum>,
}

/// `node_rows`: each node's row count (known, or from the partition's left counts) into `out`.
#[repr(C)]
pub struct NodeRowsArgs<'a> {
    pub task_rows: DevPtr<'a, TaskRows>,
    pub node_left: DevPtr<'a, u32>,
    pub n: u32,
    pub out: DevPtrMut<'a, u32>,
}

/// `evaluate_vector`: the best numeric split of each (vector-leaf node, feature), its gain
/// summed over the outputs.
#[repr(C)]
pub struct EvaluateVectorArgs<'a> {
    pub hist: DevPtr<'a, GradSum>,
    pub total_slots: u32,
    pub slot_offsets: DevPtr<'a, u32>,
    pub categorical: DevPtr<'a, u32>,
    /// Per node, each output's: node-major.
    pub tasks: DevPtr<'a, EvalTask>,
    pub parent_score: DevPtr<'a, f64>,
    /// Per output, its (g_unit, h_unit).
    pub units: DevPtr<'a, f64>,
    pub masks: DevPtr<'a, u8>,
    pub monotone: DevPtr<'a, i8>,
    pub n_features: u32,
    pub n_outputs: u32,
    pub p: SplitParamsDev,
    pub out: DevPtrMut<'a, SplitResult>,
}

/// `vector_left_sums`: each output's left sum of each node's winning split.
#[repr(C)]
pub struct VectorLeftSumsArgs<'a> {
    pub hist: DevPtr<'a, GradSum>,
    pub total_slots: u32,
    pub slot_offsets: DevPtr<'a, u32>,
    pub tasks: DevPtr<'a, EvalTask>,
    pub best: DevPtr<'a, SplitResult>,
    pub n_outputs: u32,
    pub out: DevPtrMut<'a, GradSum>,
}

kernel_args!(
    EvaluateFeaturesArgs,
    BestFeatureArgs,
    EvaluateCategoricalArgs,
    GatherRunsArgs,
    FillMissingArgs,
    NodeRowsArgs,
    EvaluateVectorArgs,
    VectorLeftSumsArgs
);

/// Threads of a numeric search block: a warp scans one (node, feature), eight to a block.
const SCAN_THREADS: u32 = 256;
/// Threads of a block searching one (node, categorical feature): its bitonic steps in global
/// memory wait on memory, and more threads hide more of it.
const CATEGORICAL_THREADS: u32 = 512;
/// The most (key, category) pairs a categorical search block sorts in shared memory at once:
/// 96 KiB, two blocks an SM. Orders up to this long never touch global memory in the sort;
/// longer ones take fewer passes through it the larger the chunk.
const MAX_SORT_CHUNK: usize = 8192;
/// Shared bytes of one sorted pair.
const SORT_PAIR_BYTES: usize = 12;

/// Shared bytes the vector search's warps keep their outputs' running sums in, at most: the
/// default 48 KiB a block, so that up to 3,072 outputs search on the device.
const VECTOR_SHARED_BYTES: usize = 48 << 10;

/// The split regularisation as the kernels take it, with the fixed-point units `(g, h)`.
fn device_params(p: &SplitParams, (g_unit, h_unit): (f64, f64)) -> SplitParamsDev {
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

/// The vector-leaf splits read back: each node's best (None where none qualifies), with each
/// output's left sums (`left`, `k_out` a node) and their remainders on the right.
fn vector_candidates(
    best: Vec<SplitResult>,
    nodes: &[VectorEvalNode],
    left: &[GradSum],
    k_out: usize,
) -> Vec<Option<SplitCandidate>> {
    best.into_iter()
        .zip(nodes)
        .zip(left.chunks(k_out))
        .map(|((b, o), left)| {
            (b.found != 0).then(|| SplitCandidate {
                feature: b.feature,
                gain: b.gain,
                split_bin: b.split_bin,
                left_categories: Vec::new(),
                default_left: b.default_left != 0,
                left: GradSum::default(),
                right: GradSum::default(),
                left_sums: left.to_vec(),
                right_sums: o.sums.iter().zip(left).map(|(&t, &l)| t - l).collect(),
            })
        })
        .collect()
}

/// A vector-leaf node whose best split is wanted: its path key and depth, its path limits
/// (for its features), and each output's histogram slot, sum and weight bounds.
pub(super) struct VectorEvalNode<'a> {
    pub(super) key: u64,
    pub(super) depth: usize,
    pub(super) limits: &'a NodeLimits,
    pub(super) slots: Vec<u32>,
    pub(super) sums: &'a [GradSum],
    pub(super) output_limits: &'a [NodeLimits],
}

/// A node whose best split is wanted: its path key and depth, its sum, its limits, its
/// histogram slot and where its row count is (the categorical search estimates rows per
/// category from it).
pub(super) struct EvalNode {
    pub(super) key: u64,
    pub(super) depth: usize,
    pub(super) total: GradSum,
    pub(super) limits: NodeLimits,
    pub(super) slot: u32,
    pub(super) rows: TaskRows,
}

/// The categorical features and the device buffers of their search.
struct CategoricalSearch {
    /// Feature index of each categorical feature.
    features: CudaSlice<u32>,
    /// Each categorical feature's first element in a task's run of the sort buffers: its
    /// categories rounded up to a power of two (the bitonic sort's length).
    regions: CudaSlice<u32>,
    /// Per feature (index), its region (categorical features only).
    region_of: Vec<u32>,
    region_per_task: usize,
    n: u32,
    /// Pairs the search sorts in shared memory at once (a power of two).
    sort_chunk: u32,
    /// Per task, every categorical feature's (weight key, category) order.
    sort_keys: Scratch<u64>,
    sort_tags: Scratch<u32>,
    task_rows: Scratch<TaskRows>,
    /// The winners' (task, region, length) triples in `sort_tags`, their offsets in
    /// `gathered`, and their categories.
    runs: Scratch<u32>,
    offsets: Scratch<u32>,
    gathered: Scratch<u32>,
}

pub(super) struct SplitEvaluator {
    tasks: Scratch<EvalTask>,
    /// Vector leaves: each node's parent score, each output's units, and the winners' left
    /// sums per output.
    parent_scores: Scratch<f64>,
    units: Scratch<f64>,
    left_sums: Scratch<GradSum>,
    masks: Scratch<u8>,
    /// Monotone direction per feature (all 0 without monotone constraints).
    monotone: CudaSlice<i8>,
    per_feature: Scratch<SplitResult>,
    best: Scratch<SplitResult>,
    /// None without categorical features.
    categorical: Option<CategoricalSearch>,
    /// Whether each feature is categorical.
    is_categorical: Vec<bool>,
}

impl SplitEvaluator {
    pub(super) fn new(
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        cuts: &[FeatureCuts],
        monotone: &[i8],
    ) -> Result<Self> {
        let is_categorical: Vec<bool> = cuts.iter().map(FeatureCuts::is_categorical).collect();
        let (mut features, mut regions, mut region_per_task, mut longest) = (Vec::new(), Vec::new(), 0usize, 1usize);
        let mut region_of = vec![u32::MAX; cuts.len()];
        for (f, _) in is_categorical.iter().enumerate().filter(|(_, &c)| c) {
            let n_categories = (matrix.slot_offsets[f + 1] - matrix.slot_offsets[f] - 1) as usize;
            let region = n_categories.max(1).next_power_of_two();
            features.push(f as u32);
            regions.push(region_per_task as u32);
            region_of[f] = region_per_task as u32;
            region_per_task += region;
            longest = longest.max(region);
        }
        // The chunk: no longer than the longest order, within the block's shared memory.
        let fits = dev.rt.categorical_shared_budget as usize / SORT_PAIR_BYTES;
        let sort_chunk = longest.min(MAX_SORT_CHUNK).min(1 << fits.max(1).ilog2()) as u32;
        let categorical = if features.is_empty() {
            None
        } else {
            Some(CategoricalSearch {
                n: features.len() as u32,
                sort_chunk,
                features: dev.upload(&features)?,
                regions: dev.upload(&regions)?,
                region_of,
                region_per_task,
                sort_keys: dev.scratch(region_per_task)?,
                sort_tags: dev.scratch(region_per_task)?,
                task_rows: dev.scratch(64)?,
                runs: dev.scratch(192)?,
                offsets: dev.scratch(64)?,
                gathered: dev.scratch(64)?,
            })
        };
        Ok(SplitEvaluator {
            tasks: dev.scratch(64)?,
            parent_scores: dev.scratch(64)?,
            units: dev.scratch(64)?,
            left_sums: dev.scratch(64)?,
            masks: dev.scratch(64)?,
            monotone: dev
                .upload(&(0..matrix.n_features).map(|f| monotone.get(f).copied().unwrap_or(0)).collect::<Vec<i8>>())?,
            per_feature: dev.scratch(64 * matrix.n_features)?,
            best: dev.scratch(64)?,
            categorical,
            is_categorical,
        })
    }

    /// The best split of each node (None where none qualifies), over the features
    /// `ctx.node_features` allows it; ties go to the lowest feature, as on the CPU.
    /// `node_left` holds the last partition's left counts, which pending row counts read.
    /// `read_too`, when given, is read back with the results, in the same wait (the last
    /// partition's counts, which the host needs for the nodes' runs).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn evaluate(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &mut HistPool,
        nodes: &[EvalNode],
        node_left: CudaView<'_, u32>,
        read_too: Option<CudaView<'_, u32>>,
        ctx: &TreeContext,
    ) -> Result<(Vec<Option<SplitCandidate>>, Vec<u32>)> {
        if nodes.is_empty() {
            let read = read_too.map_or(Ok(Vec::new()), |v| dev.download(v))?;
            return Ok((Vec::new(), read));
        }
        let nf = matrix.n_features;
        let masked = self.fill_masks(dev, nf, ctx, nodes.iter().map(|o| (o.depth, o.key, &o.limits)))?;
        let tasks: Vec<EvalTask> = nodes
            .iter()
            .enumerate()
            .map(|(i, o)| EvalTask {
                total: o.total,
                slot: o.slot,
                mask_row: if masked { i as u32 } else { NO_MASK },
                lower: o.limits.lower,
                upper: o.limits.upper,
            })
            .collect();
        dev.fill(&mut self.tasks, &tasks)?;
        dev.reserve(&mut self.per_feature, tasks.len() * nf)?;
        dev.reserve(&mut self.best, tasks.len())?;
        let params = device_params(&ctx.params.split, ctx.quantiser.units());
        self.launch_numeric(dev, matrix, pool, tasks.len() as u32, &params)?;
        if self.categorical.is_some() {
            let rows: Vec<TaskRows> = nodes.iter().map(|o| o.rows).collect();
            self.launch_categorical(dev, matrix, pool, &rows, node_left, &params, ctx)?;
        }
        self.launch_best_feature(dev, nf as u32, tasks.len() as u32)?;
        let best = self.best.buf.slice(..tasks.len());
        let (best, read) = match read_too {
            Some(v) => dev.download_pair(best, v)?,
            None => (dev.download(best)?, Vec::new()),
        };
        let mut left_categories = self.categories_of_winners(dev, &best)?;
        let found = best
            .into_iter()
            .zip(nodes)
            .enumerate()
            .map(|(t, (b, o))| {
                (b.found != 0).then(|| SplitCandidate {
                    feature: b.feature,
                    gain: b.gain,
                    split_bin: if self.is_categorical[b.feature as usize] { 0 } else { b.split_bin },
                    left_categories: std::mem::take(&mut left_categories[t]),
                    default_left: b.default_left != 0,
                    left: b.left,
                    right: o.total - b.left,
                    left_sums: Vec::new(),
                    right_sums: Vec::new(),
                })
            })
            .collect();
        Ok((found, read))
    }

    /// Uploads the feature masks of the nodes `(depth, key, limits)`, one row per node, unless
    /// every node may split on every feature (then returns false: no masks).
    fn fill_masks<'n>(
        &mut self,
        dev: &mut FitDevice,
        nf: usize,
        ctx: &TreeContext,
        nodes: impl ExactSizeIterator<Item = (usize, u64, &'n NodeLimits)>,
    ) -> Result<bool> {
        if ctx.all_features_everywhere(nf) {
            // The kernels read no mask (`NO_MASK`): nothing to upload.
            return Ok(false);
        }
        let mut masks = vec![0u8; nodes.len() * nf];
        for (i, (depth, key, limits)) in nodes.enumerate() {
            for f in ctx.node_features(depth, key, limits) {
                masks[i * nf + f as usize] = 1;
            }
        }
        dev.fill(&mut self.masks, &masks)?;
        Ok(true)
    }

    /// Whether vector-leaf nodes of `n_outputs` outputs are searched on the device: their
    /// numeric features are (categorical ones are searched on the host, `best_vector_splits`).
    pub(super) fn searches_vectors(&self, n_outputs: usize) -> bool {
        !self.is_categorical.iter().any(|&c| c) && n_outputs * 16 <= VECTOR_SHARED_BYTES
    }

    /// The best split of each vector-leaf node (None where none qualifies), over the
    /// features `ctx.node_features` allows it, with the CPU's arithmetic (`VectorScorer`):
    /// every (node, feature) scanned over every output in one launch, then each node's best
    /// feature, then the winners' left sums per output; one download of each.
    pub(super) fn evaluate_vector(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &mut HistPool,
        nodes: &[VectorEvalNode],
        ctx: &TreeContext,
    ) -> Result<Vec<Option<SplitCandidate>>> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let (nf, k_out) = (matrix.n_features, ctx.outputs.len());
        let n_tasks = self.upload_vector_tasks(dev, nf, nodes, ctx)?;
        let n_nodes = nodes.len() as u32;
        dev.reserve(&mut self.per_feature, nodes.len() * nf)?;
        dev.reserve(&mut self.best, nodes.len())?;
        dev.reserve(&mut self.left_sums, n_tasks)?;
        // One task per (node, output): each output's missing sums are its total's remainder.
        self.fill_missing(dev, matrix, pool, n_tasks as u32)?;
        self.launch_vector(dev, matrix, pool, n_nodes, k_out, &ctx.params.split)?;
        self.launch_best_feature(dev, nf as u32, n_nodes)?;
        self.launch_vector_left_sums(dev, matrix, pool, n_nodes, k_out)?;
        let best = dev.download(self.best.buf.slice(..nodes.len()))?;
        let left = dev.download(self.left_sums.buf.slice(..n_tasks))?;
        Ok(vector_candidates(best, nodes, &left, k_out))
    }

    /// Uploads the vector-leaf nodes' tasks (one per node and output, in that order), their
    /// feature masks, each node's parent score and each output's units; returns the tasks.
    fn upload_vector_tasks(
        &mut self,
        dev: &mut FitDevice,
        nf: usize,
        nodes: &[VectorEvalNode],
        ctx: &TreeContext,
    ) -> Result<usize> {
        let masked = self.fill_masks(dev, nf, ctx, nodes.iter().map(|o| (o.depth, o.key, o.limits)))?;
        let p = &ctx.params.split;
        let mut tasks = Vec::with_capacity(nodes.len() * ctx.outputs.len());
        for (i, o) in nodes.iter().enumerate() {
            for ((&slot, &total), limits) in o.slots.iter().zip(o.sums).zip(o.output_limits) {
                let mask_row = if masked { i as u32 } else { NO_MASK };
                tasks.push(EvalTask { total, slot, mask_row, lower: limits.lower, upper: limits.upper });
            }
        }
        let parents: Vec<f64> =
            nodes.iter().map(|o| vector_parent_score(p, ctx.outputs, o.sums, o.output_limits)).collect();
        let units: Vec<f64> = ctx.outputs.iter().flat_map(|q| <[f64; 2]>::from(q.units())).collect();
        dev.fill(&mut self.tasks, &tasks)?;
        dev.fill(&mut self.parent_scores, &parents)?;
        dev.fill(&mut self.units, &units)?;
        Ok(tasks.len())
    }

    /// Queues the best vector-leaf split of each (node, feature) into `per_feature`, over the
    /// `k_out` outputs' histograms of each of `n_nodes` nodes.
    fn launch_vector(
        &mut self,
        dev: &FitDevice,
        matrix: &DeviceMatrix,
        pool: &HistPool,
        n_nodes: u32,
        k_out: usize,
        split: &SplitParams,
    ) -> Result<()> {
        let (nf32, k32) = (matrix.n_features as u32, k_out as u32);
        // Each output's units come with its tasks' sums (`units`), not with the parameters.
        let params = device_params(split, (0.0, 0.0));
        // Up to 8 warps a block, as many as the outputs' running sums leave room for.
        let warps = (VECTOR_SHARED_BYTES / (k_out * 16)).clamp(1, 8) as u32;
        let mut p = dev.pins();
        let args = EvaluateVectorArgs {
            hist: p.read(&pool.buf),
            total_slots: pool.total_slots as u32,
            slot_offsets: p.read(&matrix.slot_offsets_dev),
            categorical: p.read(&matrix.categorical_dev),
            tasks: p.read(&self.tasks.buf),
            parent_score: p.read(&self.parent_scores.buf),
            units: p.read(&self.units.buf),
            masks: p.read(&self.masks.buf),
            monotone: p.read(&self.monotone),
            n_features: nf32,
            n_outputs: k32,
            p: params,
            out: p.write(&mut self.per_feature.buf),
        };
        let c = cfg((nf32.div_ceil(warps), n_nodes), warps * 32, warps * k32 * 16);
        // SAFETY: every task's slot lies in the pool, per_feature holds n_nodes x nf
        // results, and the dynamic shared memory 2 x n_outputs i64 a warp.
        unsafe { dev.launch(&dev.rt.kernels.evaluate_vector, &args, c) }
    }

    /// Queues each output's left sums of each of `n_nodes` nodes' best split into `left_sums`.
    fn launch_vector_left_sums(
        &mut self,
        dev: &FitDevice,
        matrix: &DeviceMatrix,
        pool: &HistPool,
        n_nodes: u32,
        k_out: usize,
    ) -> Result<()> {
        let k32 = k_out as u32;
        let mut p = dev.pins();
        let args = VectorLeftSumsArgs {
            hist: p.read(&pool.buf),
            total_slots: pool.total_slots as u32,
            slot_offsets: p.read(&matrix.slot_offsets_dev),
            tasks: p.read(&self.tasks.buf),
            best: p.read(&self.best.buf),
            n_outputs: k32,
            out: p.write(&mut self.left_sums.buf),
        };
        // SAFETY: best holds n_nodes results, whose features and bins lie in the layout;
        // left_sums n_nodes x n_outputs.
        unsafe { dev.launch(&dev.rt.kernels.vector_left_sums, &args, cfg((k32, n_nodes), 32, 0)) }
    }

    /// For compressed rows, which leave missing values out: queues each feature's missing slot
    /// of the first `n_tasks` uploaded tasks' histograms, their totals' remainder.
    fn fill_missing(&self, dev: &FitDevice, matrix: &DeviceMatrix, pool: &mut HistPool, n_tasks: u32) -> Result<()> {
        if !matrix.is_sparse() {
            return Ok(());
        }
        let mut p = dev.pins();
        let args = FillMissingArgs {
            tasks: p.read(&self.tasks.buf),
            slot_offsets: p.read(&matrix.slot_offsets_dev),
            total_slots: pool.total_slots as u32,
            hist: p.write(&mut pool.buf),
        };
        // SAFETY: every task's slot lies in the pool.
        unsafe { dev.launch(&dev.rt.kernels.fill_missing, &args, cfg((matrix.n_features as u32, n_tasks), 256, 0)) }
    }

    /// For compressed rows: queues the missing slots of the histograms in `slots`, each the
    /// remainder of its `total` (the host's vector-leaf search reads them back filled).
    pub(super) fn fill_missing_of(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &mut HistPool,
        slots: impl Iterator<Item = (u32, GradSum)>,
    ) -> Result<()> {
        if !matrix.is_sparse() {
            return Ok(());
        }
        let (lower, upper) = (f64::NEG_INFINITY, f64::INFINITY);
        let tasks: Vec<EvalTask> =
            slots.map(|(slot, total)| EvalTask { total, slot, mask_row: NO_MASK, lower, upper }).collect();
        dev.fill(&mut self.tasks, &tasks)?;
        self.fill_missing(dev, matrix, pool, tasks.len() as u32)
    }

    /// Queues each of `n_tasks` tasks' best of its `nf` features' splits into `best`.
    fn launch_best_feature(&mut self, dev: &FitDevice, nf: u32, n_tasks: u32) -> Result<()> {
        let mut p = dev.pins();
        let args = BestFeatureArgs {
            per_feature: p.read(&self.per_feature.buf),
            n_features: nf,
            n_tasks,
            out: p.write(&mut self.best.buf),
        };
        // SAFETY: per_feature holds n_tasks x nf results, best n_tasks.
        unsafe { dev.launch(&dev.rt.kernels.best_feature, &args, cfg((n_tasks, 1), 32, 0)) }
    }

    /// Queues the best numeric split of each (task, feature) into `per_feature`.
    fn launch_numeric(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &mut HistPool,
        n_tasks: u32,
        params: &SplitParamsDev,
    ) -> Result<()> {
        let nf = matrix.n_features as u32;
        let total = pool.total_slots as u32;
        let k = &dev.rt.kernels;
        self.fill_missing(dev, matrix, pool, n_tasks)?;
        let mut p = dev.pins();
        let args = EvaluateFeaturesArgs {
            hist: p.read(&pool.buf),
            total_slots: total,
            slot_offsets: p.read(&matrix.slot_offsets_dev),
            categorical: p.read(&matrix.categorical_dev),
            tasks: p.read(&self.tasks.buf),
            masks: p.read(&self.masks.buf),
            monotone: p.read(&self.monotone),
            n_features: nf,
            p: *params,
            out: p.write(&mut self.per_feature.buf),
        };
        // SAFETY: every task's slot lies in the pool, and per_feature holds n_tasks x nf results.
        unsafe {
            dev.launch(&k.evaluate_features, &args, cfg((nf.div_ceil(SCAN_THREADS / 32), n_tasks), SCAN_THREADS, 0))
        }
    }

    /// Queues the best categorical split of each (task, categorical feature) into
    /// `per_feature` (after `launch_numeric`, which leaves those entries unfound).
    #[allow(clippy::too_many_arguments)]
    fn launch_categorical(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &HistPool,
        rows: &[TaskRows],
        node_left: CudaView<'_, u32>,
        params: &SplitParamsDev,
        ctx: &TreeContext,
    ) -> Result<()> {
        let Some(cat) = self.categorical.as_mut() else { return Ok(()) };
        let n_tasks = rows.len();
        dev.fill(&mut cat.task_rows, rows)?;
        dev.reserve(&mut cat.sort_keys, n_tasks * cat.region_per_task)?;
        dev.reserve(&mut cat.sort_tags, n_tasks * cat.region_per_task)?;
        let p = &ctx.params.split;
        let saturate = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        let cp = CategoricalParams {
            cat_smooth: p.cat_smooth,
            cat_l2: p.cat_l2,
            min_data_per_group: p.min_data_per_group,
            max_cat_to_onehot: saturate(p.max_cat_to_onehot),
            max_cat_threshold: saturate(p.max_cat_threshold),
        };
        let (total, nf, per_task) = (pool.total_slots as u32, matrix.n_features as u32, cat.region_per_task as u32);
        let mut p = dev.pins();
        let args = EvaluateCategoricalArgs {
            hist: p.read(&pool.buf),
            total_slots: total,
            slot_offsets: p.read(&matrix.slot_offsets_dev),
            features: p.read(&cat.features),
            regions: p.read(&cat.regions),
            region_per_task: per_task,
            tasks: p.read(&self.tasks.buf),
            task_rows: p.read(&cat.task_rows.buf),
            node_left: p.read(&node_left),
            masks: p.read(&self.masks.buf),
            n_features: nf,
            p: *params,
            cp,
            sort_chunk: cat.sort_chunk,
            sort_keys: p.write(&mut cat.sort_keys.buf),
            sort_tags: p.write(&mut cat.sort_tags.buf),
            out: p.write(&mut self.per_feature.buf),
        };
        let c = cfg((cat.n, n_tasks as u32), CATEGORICAL_THREADS, cat.sort_chunk * SORT_PAIR_BYTES as u32);
        // SAFETY: every task's slot lies in the pool, the sort buffers hold n_tasks runs of
        // region_per_task, per_feature n_tasks x nf; the dynamic shared memory holds a chunk.
        unsafe { dev.launch(&dev.rt.kernels.evaluate_categorical, &args, c) }
    }

    /// The categories each task's split sends left (sorted; empty unless categorical), read
    /// from the search's order in one gather and one download.
    fn categories_of_winners(&mut self, dev: &mut FitDevice, best: &[SplitResult]) -> Result<Vec<Vec<u32>>> {
        let mut out = vec![Vec::new(); best.len()];
        let Some(cat) = self.categorical.as_mut() else { return Ok(out) };
        let (mut runs, mut offsets, mut winners) = (Vec::new(), Vec::new(), Vec::new());
        let mut n_gathered = 0u32;
        for (t, b) in best.iter().enumerate() {
            if b.found == 0 || !self.is_categorical[b.feature as usize] {
                continue;
            }
            runs.extend([t as u32, cat.region_of[b.feature as usize], b.split_bin]);
            offsets.push(n_gathered);
            winners.push((t, n_gathered as usize, b.split_bin as usize));
            n_gathered += b.split_bin;
        }
        if winners.is_empty() {
            return Ok(out);
        }
        dev.fill(&mut cat.runs, &runs)?;
        dev.fill(&mut cat.offsets, &offsets)?;
        dev.reserve(&mut cat.gathered, n_gathered as usize)?;
        let per_task = cat.region_per_task as u32;
        {
            let mut p = dev.pins();
            let args = GatherRunsArgs {
                src: p.read(&cat.sort_tags.buf),
                region_per_task: per_task,
                runs: p.read(&cat.runs.buf),
                offsets: p.read(&cat.offsets.buf),
                out: p.write(&mut cat.gathered.buf),
            };
            // SAFETY: every run lies in sort_tags (a region of a task of this evaluation), and
            // gathered holds the runs' total length.
            unsafe { dev.launch(&dev.rt.kernels.gather_runs, &args, cfg((winners.len() as u32, 1), 256, 0)) }?;
        }
        let gathered = dev.download(cat.gathered.buf.slice(..n_gathered as usize))?;
        for (t, at, len) in winners {
            let mut set = gathered[at..at + len].to_vec();
            set.sort_unstable();
            out[t] = set;
        }
        Ok(out)
    }
}
