//! Split search on the device (`kernels/split.cu`): every (node, numeric feature) scanned in
//! one launch with the CPU's double-precision arithmetic, then the best feature per node.
//! Categorical features' histograms are gathered and searched on the host by the CPU's own
//! code (they are small).

use cudarc::driver::{CudaSlice, PushKernelArg};
use rayon::prelude::*;

use super::buffers::{cfg, FitDevice, HistPool, Scratch};
use super::data::{DeviceBins, DeviceMatrix};
use super::device_error;
use super::layout::{EvalTask, GradSum, SplitParamsDev, SplitResult, NO_MASK};
use crate::data::FeatureCuts;
use crate::error::Result;
use crate::tree::grow::TreeContext;
use crate::tree::split::{SplitCandidate, SplitScorer};
use crate::tree::NodeLimits;

/// Threads of a block scanning one (node, feature).
const SCAN_THREADS: u32 = 256;

/// A node whose best split is wanted: its place in the tree, its sum, its limits, its
/// histogram slot and its rows (counted when categorical features need them, see
/// `needs_row_counts`).
pub(super) struct EvalNode {
    pub(super) node: u32,
    pub(super) depth: usize,
    pub(super) total: GradSum,
    pub(super) limits: NodeLimits,
    pub(super) slot: u32,
    pub(super) rows: Option<u32>,
}

pub(super) struct SplitEvaluator {
    tasks: Scratch<EvalTask>,
    masks: Scratch<u8>,
    /// Monotone direction per feature (all 0 without monotone constraints).
    monotone: CudaSlice<i8>,
    per_feature: Scratch<SplitResult>,
    best: Scratch<SplitResult>,
    /// Categorical features: (feature, first histogram slot, slots), and all their slots
    /// listed, for gathering their histograms to the host.
    categorical: Vec<(u32, u32, u32)>,
    categorical_slots: CudaSlice<u32>,
    gathered: Scratch<GradSum>,
}

impl SplitEvaluator {
    /// Whether evaluation needs each node's row count: the categorical search estimates rows
    /// per category from it. Numeric features do not, and then the counts stay on the device
    /// until the evaluation's own download (one synchronisation per level).
    pub(super) fn needs_row_counts(&self) -> bool {
        !self.categorical.is_empty()
    }

    pub(super) fn new(
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        cuts: &[FeatureCuts],
        monotone: &[i8],
    ) -> Result<Self> {
        let mut categorical = Vec::new();
        let mut categorical_slots: Vec<u32> = Vec::new();
        for (f, c) in cuts.iter().enumerate() {
            if c.is_categorical() {
                let (first, end) = (matrix.slot_offsets[f], matrix.slot_offsets[f + 1]);
                categorical.push((f as u32, categorical_slots.len() as u32, end - first));
                categorical_slots.extend(first..end);
            }
        }
        Ok(SplitEvaluator {
            tasks: dev.scratch(64)?,
            masks: dev.scratch(64)?,
            monotone: dev
                .upload(&(0..matrix.n_features).map(|f| monotone.get(f).copied().unwrap_or(0)).collect::<Vec<i8>>())?,
            per_feature: dev.scratch(64 * matrix.n_features)?,
            best: dev.scratch(64)?,
            categorical_slots: dev.upload(&categorical_slots)?,
            categorical,
            gathered: dev.scratch(64)?,
        })
    }

    /// The best split of each node (None where none qualifies), over the features
    /// `ctx.node_features` allows it; ties go to the lowest feature, as on the CPU.
    pub(super) fn evaluate(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &mut HistPool,
        nodes: &[EvalNode],
        ctx: &TreeContext,
    ) -> Result<Vec<Option<SplitCandidate>>> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let nf = matrix.n_features;
        // Feature masks, one row per node, unless every node may split on every feature.
        let masked = !ctx.all_features_everywhere(nf);
        let mut masks = vec![0u8; if masked { nodes.len() * nf } else { 1 }];
        if masked {
            for (i, o) in nodes.iter().enumerate() {
                for f in ctx.node_features(o.depth, o.node, &o.limits) {
                    masks[i * nf + f as usize] = 1;
                }
            }
        }
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
        let found = self.evaluate_numeric(dev, matrix, pool, &tasks, &masks, ctx)?;
        let mut best: Vec<(SplitResult, Vec<u32>)> = found.into_iter().map(|b| (b, Vec::new())).collect();
        if !self.categorical.is_empty() {
            let rows: Vec<u32> =
                nodes.iter().map(|o| o.rows.expect("row counts are resolved before a categorical search")).collect();
            self.evaluate_categorical(dev, pool, &tasks, nodes, &rows, &masks, nf, &mut best, ctx)?;
        }
        Ok(best
            .into_iter()
            .zip(nodes)
            .map(|((b, left_categories), o)| {
                (b.found != 0).then(|| SplitCandidate {
                    feature: b.feature,
                    gain: b.gain,
                    split_bin: b.split_bin,
                    left_categories,
                    default_left: b.default_left != 0,
                    left: b.left,
                    right: o.total - b.left,
                })
            })
            .collect())
    }

    /// The best numeric split of each task (found or not).
    fn evaluate_numeric(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        pool: &mut HistPool,
        tasks: &[EvalTask],
        masks: &[u8],
        ctx: &TreeContext,
    ) -> Result<Vec<SplitResult>> {
        let nf = matrix.n_features as u32;
        dev.fill(&mut self.tasks, tasks)?;
        dev.fill(&mut self.masks, masks)?;
        dev.reserve(&mut self.per_feature, tasks.len() * nf as usize)?;
        dev.reserve(&mut self.best, tasks.len())?;
        let p = &ctx.params.split;
        let (g_unit, h_unit) = ctx.quantiser.units();
        let params = SplitParamsDev {
            reg_lambda: p.reg_lambda,
            reg_alpha: p.reg_alpha,
            gamma: p.gamma,
            min_child_weight: p.min_child_weight,
            max_delta_step: p.max_delta_step,
            g_unit,
            h_unit,
        };
        let total = pool.total_slots as u32;
        let n_tasks = tasks.len() as u32;
        let k = &dev.rt.kernels;
        // SAFETY (all launches): arguments follow the kernels' signatures; every task's slot
        // lies in the pool, and the outputs hold n_tasks x nf results.
        if matches!(matrix.bins, DeviceBins::Sparse(_)) {
            // Compressed rows leave missing values out: their sums are the totals' remainder.
            unsafe {
                dev.launcher(&k.fill_missing)
                    .arg(&self.tasks.buf)
                    .arg(&matrix.slot_offsets_dev)
                    .arg(&total)
                    .arg(&mut pool.buf)
                    .launch(cfg((nf, n_tasks), 256, 0))
            }
            .map_err(device_error)?;
        }
        unsafe {
            dev.launcher(&k.evaluate_features)
                .arg(&pool.buf)
                .arg(&total)
                .arg(&matrix.slot_offsets_dev)
                .arg(&matrix.categorical_dev)
                .arg(&self.tasks.buf)
                .arg(&self.masks.buf)
                .arg(&self.monotone)
                .arg(&nf)
                .arg(&params)
                .arg(&mut self.per_feature.buf)
                .launch(cfg((nf, n_tasks), SCAN_THREADS, 0))
        }
        .map_err(device_error)?;
        unsafe {
            dev.launcher(&k.best_feature)
                .arg(&self.per_feature.buf)
                .arg(&nf)
                .arg(&n_tasks)
                .arg(&mut self.best.buf)
                .launch(cfg((n_tasks, 1), 32, 0))
        }
        .map_err(device_error)?;
        dev.download(self.best.buf.slice(..tasks.len()))
    }

    /// Categorical splits, searched on the host by the CPU's own code over the categorical
    /// features' histograms (gathered in one copy). Each node's best split is then the best
    /// over all features, ties to the lower feature, as on the CPU.
    #[allow(clippy::too_many_arguments)]
    fn evaluate_categorical(
        &mut self,
        dev: &mut FitDevice,
        pool: &HistPool,
        tasks: &[EvalTask],
        nodes: &[EvalNode],
        rows: &[u32],
        masks: &[u8],
        nf: usize,
        best: &mut [(SplitResult, Vec<u32>)],
        ctx: &TreeContext,
    ) -> Result<()> {
        let n_slots = self.categorical_slots.len();
        dev.reserve(&mut self.gathered, tasks.len() * n_slots)?;
        let (total, n32) = (pool.total_slots as u32, n_slots as u32);
        // SAFETY: the gathered buffer holds n_slots per task; every slot lies in the pool.
        unsafe {
            dev.launcher(&dev.rt.kernels.gather_slots)
                .arg(&pool.buf)
                .arg(&total)
                .arg(&self.tasks.buf)
                .arg(&self.categorical_slots)
                .arg(&n32)
                .arg(&mut self.gathered.buf)
                .launch(cfg((tasks.len() as u32, 1), 256, 0))
        }
        .map_err(device_error)?;
        let hists = dev.download(self.gathered.buf.slice(..tasks.len() * n_slots))?;
        // Nodes in parallel: sorting thousands of categories per node and feature is the
        // level's longest step.
        let categorical = &self.categorical;
        best.par_iter_mut().enumerate().for_each(|(t, (b, categories))| {
            let limits = &nodes[t].limits;
            let monotone = &ctx.params.constraints.monotone;
            let scorer = SplitScorer::new(&ctx.params.split, &ctx.quantiser, tasks[t].total, rows[t], limits, monotone);
            for &(f, first, len) in categorical {
                if tasks[t].mask_row != NO_MASK && masks[t * nf + f as usize] == 0 {
                    continue;
                }
                let h = &hists[t * n_slots + first as usize..t * n_slots + (first + len) as usize];
                let Some(c) = scorer.best_categorical(f, h) else { continue };
                if b.found == 0 || c.gain > b.gain || (c.gain == b.gain && f < b.feature) {
                    *b = SplitResult {
                        left: c.left,
                        gain: c.gain,
                        feature: f,
                        split_bin: 0,
                        default_left: c.default_left as u32,
                        found: 1,
                    };
                    *categories = c.left_categories;
                }
            }
        });
        Ok(())
    }
}
