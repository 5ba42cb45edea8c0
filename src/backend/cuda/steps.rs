//! The per-level steps of growing a tree on the GPU, each a few kernel launches: histograms
//! (root, and children by building the smaller and subtracting), split search (numeric on
//! the device, categorical on the host over gathered histograms), row partitioning, and the
//! margin update once a tree is finished.

use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::buffers::download;
use super::data::{grid_for, DeviceBins};
use super::device_error;
use super::layout::{ChildSlots, EvalTask, RowTask, SplitParamsDev, SplitResult, SplitRule, TreeNode, NO_MASK};
use super::learner::{GpuLearner, Open, HIST_MAX_ROWS_PER_BLOCK, HIST_MIN_ROWS_PER_BLOCK, SCAN_THREADS};
use crate::error::Result;
use crate::tree::model::NO_CHILD;
use crate::tree::split::SplitScorer;
use crate::tree::{Quantiser, Tree};

/// Passes the bin matrix, whatever its width.
pub(super) fn bins_arg<'a>(bins: &'a DeviceBins, launch: &mut cudarc::driver::LaunchArgs<'a>) {
    match bins {
        DeviceBins::U8(b) => launch.arg(b),
        DeviceBins::U16(b) => launch.arg(b),
        DeviceBins::Sparse(b) => launch.arg(b),
    };
}

/// Blocks for each task and the total, filling in `first_block`.
pub(super) fn assign_blocks(tasks: &mut [RowTask], rows_per_block: u32) -> u32 {
    let mut next = 0;
    for t in tasks.iter_mut() {
        t.first_block = next;
        next += t.len.div_ceil(rows_per_block);
    }
    next
}

pub(super) fn cfg(blocks: (u32, u32), threads: u32, shared: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks.0, blocks.1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared }
}

impl GpuLearner<'_> {
    /// The kernel of a family for the bins' layout: (u8, u16, sparse).
    pub(super) fn for_layout<'k>(&self, kernels: [&'k CudaFunction; 3]) -> &'k CudaFunction {
        match self.matrix.bins {
            DeviceBins::U8(_) => kernels[0],
            DeviceBins::U16(_) => kernels[1],
            DeviceBins::Sparse(_) => kernels[2],
        }
    }

    pub(super) fn split_params(&self, q: &Quantiser) -> SplitParamsDev {
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
    pub(super) fn hist_rows_per_block(&self, rows: u64) -> u32 {
        // Blocks an SM holds at once: limited by its shared memory and its 2048 threads.
        let by_memory = self.rt.max_shared_per_block / self.group_shared_bytes.max(1);
        let resident = by_memory.min(2048 / self.hist.threads).max(1) as u64;
        let target_blocks = self.rt.sm_count as u64 * resident * self.hist.waves;
        let rpb = self.hist.rows_per_block.unwrap_or_else(|| rows.div_ceil(target_blocks).next_power_of_two() as u32);
        rpb.clamp(HIST_MIN_ROWS_PER_BLOCK, HIST_MAX_ROWS_PER_BLOCK)
    }

    /// Builds the histograms of the `n_tasks` tasks in `self.builds` (zeroed beforehand).
    pub(super) fn launch_histograms(&mut self, n_tasks: u32, blocks: u32, rpb: u32) -> Result<()> {
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
    pub(super) fn build_root(&mut self, n_active: u32, slot: u32) -> Result<()> {
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
    pub(super) fn build_children(&mut self, mut plan: Vec<ChildSlots>) -> Result<()> {
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
    pub(super) fn evaluate(&mut self, tasks: &[EvalTask], masks: &[u8], q: &Quantiser) -> Result<Vec<SplitResult>> {
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
    pub(super) fn partition(
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
    pub(super) fn masks(&self, tree_features: &[u32], seed: u64, nodes: &[(usize, u32)]) -> (Vec<u8>, bool) {
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
    pub(super) fn evaluate_open(
        &mut self,
        open: &mut [Open],
        tree_features: &[u32],
        seed: u64,
        q: &Quantiser,
    ) -> Result<()> {
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
    pub(super) fn evaluate_categorical(
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

    /// Adds `tree` to output `c`'s margins.
    pub(super) fn add_tree(&mut self, c: usize, tree: &Tree) -> Result<()> {
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
