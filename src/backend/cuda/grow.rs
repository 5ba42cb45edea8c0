//! The GPU's steps of growing a tree ([`GrowSteps`]; the driver is `tree::grow`), composed
//! from the learner's components: each node is a histogram slot and a run of the row index.
//! The host reads back, per level, only each node's best split and left-going row count, in
//! one synchronisation: the counts of a partition are read when the children's splits are.
//!
//! A vector-leaf tree's node holds a histogram slot per output, built from that output's
//! gradients; its splits are searched on the device over every output's histogram, or, with
//! categorical features, on the host (`best_vector_splits`, the CPU's).
//!
//! In a distributed fit each worker's slots hold its own rows' histograms, so the smaller
//! child (chosen by local counts) and the subtraction stay exact locally; before a level is
//! evaluated, its nodes' histograms and row counts are summed over the workers into slots of
//! their own (`share`), which the split search reads: one exchange a level, on the device
//! when the collective reaches it (NCCL), else through the host.

use super::layout::{ChildSlots, GradSum, RowTask, SplitRule, TaskRows};
use super::learner::{GpuLearner, Stage};
use super::partition::Passes;
use super::split::{EvalNode, NodeRowsArgs, VectorEvalNode};
use cudarc::driver::DevicePtrMut;

use crate::collective::{sum_grads, DeviceOp, DeviceReduction, DeviceSums};
use crate::error::Result;
use crate::tree::grow::{Expansion, GrowSteps, Open, TreeContext};
use crate::tree::split_vector::best_vector_splits;
use crate::tree::{GrowPolicy, Tree};

/// A node on the device: its histogram slot and its rows' run in the row index.
pub struct GpuNode {
    slot: u32,
    /// A vector-leaf node's histogram slots of outputs 1 and on (`slot` is output 0's).
    other_outputs: Vec<u32>,
    start: u32,
    len: RowCount,
    /// In a distributed fit, once shared: the histogram and rows over every worker.
    shared: Option<Shared>,
}

/// A node's histogram and rows, summed over the workers: the histogram in a slot of the
/// pool's exchange run, valid until the next level's exchange; the rows as the split search
/// reads them (known, or on the device: see `share_on_device`).
#[derive(Clone, Copy)]
struct Shared {
    slot: u32,
    rows: TaskRows,
}

/// A run's length, known once the partition that made it has been read back.
#[derive(Clone, Copy)]
enum RowCount {
    Known(u32),
    /// The left or right child of partition task `task`, whose parent had `parent_len` rows.
    Pending {
        task: u32,
        parent_len: u32,
        right: bool,
    },
}

impl GpuNode {
    /// The node's histogram slot of each output (one for a scalar tree).
    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::once(self.slot).chain(self.other_outputs.iter().copied())
    }
}

impl GpuLearner<'_> {
    /// Reads the partition's counts into the runs of `nodes` that wait for them.
    fn resolve_counts(&mut self, nodes: Vec<&mut GpuNode>) -> Result<()> {
        let Some(n_tasks) = Self::pending_tasks(nodes.iter().map(|n| &**n)) else { return Ok(()) };
        let lefts = self.rows.left_counts(&mut self.dev, n_tasks)?;
        Self::apply_counts(nodes, &lefts);
        Ok(())
    }

    /// How many of the last partition's counts the runs of `nodes` wait for (None: none).
    fn pending_tasks<'n>(nodes: impl Iterator<Item = &'n GpuNode>) -> Option<usize> {
        let tasks = nodes.filter_map(|n| match n.len {
            RowCount::Pending { task, .. } => Some(task as usize + 1),
            RowCount::Known(_) => None,
        });
        tasks.max()
    }

    /// Sets the runs of `nodes` that wait for the last partition's counts from `lefts`, its
    /// tasks' left-going rows.
    fn apply_counts(nodes: Vec<&mut GpuNode>, lefts: &[u32]) {
        for n in nodes {
            if let RowCount::Pending { task, parent_len, right } = n.len {
                // A run with no rows had no block to store its count.
                let left = if parent_len == 0 { 0 } else { lefts[task as usize] };
                n.len = RowCount::Known(if right { parent_len - left } else { left });
                if right {
                    n.start += left;
                }
            }
        }
    }

    /// Sums the histograms and row counts of `nodes` over the workers through the host, into
    /// slots of their own (the nodes' row counts known).
    fn share_on_host(&mut self, nodes: Vec<&mut GpuNode>) -> Result<()> {
        let width = self.hist.pool.total_slots;
        let mut flat = Vec::with_capacity(nodes.len() * (width + 1));
        for n in &nodes {
            flat.extend(self.hist.download(&mut self.dev, n.slot)?);
        }
        let counts_at = flat.len();
        flat.extend(nodes.iter().map(|n| GradSum { g: Self::known_len(n) as i64, h: 0 }));
        sum_grads(self.comm, &mut flat)?;
        let first = self.hist.pool.exchange_run(&mut self.dev.memory, &self.dev.stream, nodes.len() as u32)?;
        for (i, n) in nodes.into_iter().enumerate() {
            let slot = first + i as u32;
            self.hist.pool.write(&self.dev.stream, slot, &flat[i * width..(i + 1) * width])?;
            let rows = TaskRows { rows: flat[counts_at + i].g as u32, ..TaskRows::default() };
            n.shared = Some(Shared { slot, rows });
        }
        Ok(())
    }

    /// [`share_on_host`](Self::share_on_host) through a collective that reduces device memory
    /// (NCCL), with no host synchronisation: the nodes' histograms are copied into consecutive
    /// slots, their row counts (pending ones read from the partition's counts) into
    /// `share_counts`, and both summed there in one exchange queued on the stream. The split
    /// search queued after it reads the sums; the host waits once, for the search's results.
    fn share_on_device(&mut self, sums: &dyn DeviceSums, nodes: Vec<&mut GpuNode>) -> Result<()> {
        let m = nodes.len() as u32;
        if m == 0 {
            return Ok(());
        }
        let first = self.hist.pool.exchange_run(&mut self.dev.memory, &self.dev.stream, m)?;
        let pairs: Vec<u32> = nodes.iter().enumerate().flat_map(|(i, n)| [n.slot, first + i as u32]).collect();
        self.hist.copy_slots(&mut self.dev, &pairs)?;
        let rows: Vec<TaskRows> = nodes.iter().map(|n| Self::local_rows(n)).collect();
        self.dev.fill(&mut self.share_rows, &rows)?;
        self.dev.reserve(&mut self.share_counts, m as usize)?;
        {
            let mut p = self.dev.pins();
            let args = NodeRowsArgs {
                task_rows: p.read(&self.share_rows.buf),
                node_left: p.read(&self.rows.node_left.buf),
                n: m,
                out: p.write(&mut self.share_counts.buf),
            };
            // SAFETY: m task rows in, m counts out; pending ones name tasks of the last partition.
            unsafe { self.dev.launch(&self.dev.rt.kernels.node_rows, &args, self.dev.grid(m as u64, 128)) }?;
        }
        let stream = self.dev.stream.clone();
        let width = self.hist.pool.total_slots;
        let mut run = self.hist.pool.run_mut(first, m);
        let (hist_ptr, hist_sync) = run.device_ptr_mut(&stream);
        let (count_ptr, count_sync) = self.share_counts.buf.device_ptr_mut(&stream);
        let sum = |address, len, op| DeviceReduction { address, len, op };
        // SAFETY: the run holds m histograms of `width` pairs of i64 and the counts buffer at
        // least m u32, on this learner's GPU, written by work queued on its stream; both stay
        // allocated (the run is the pool's, the counts the learner's) while it runs.
        unsafe {
            sums.queue_in_place(&[
                sum(hist_ptr, m as usize * width * 2, DeviceOp::SumI64),
                sum(count_ptr, m as usize, DeviceOp::SumU32),
            ])?
        };
        drop((hist_sync, count_sync));
        for (i, n) in nodes.into_iter().enumerate() {
            n.shared = Some(Shared { slot: first + i as u32, rows: TaskRows::summed_at(i as u32) });
        }
        Ok(())
    }

    /// Gives back a node's slots (its summed histogram, if any, lies in the exchange run).
    fn release_node(&mut self, node: &GpuNode) {
        node.slots().for_each(|slot| self.hist.release(slot));
    }

    /// A vector-leaf level's split search: on the device (`SplitEvaluator::evaluate_vector`)
    /// when every feature is numeric, else on the host as the CPU's (`best_vector_splits`).
    fn evaluate_vector(&mut self, nodes: &mut [Open<GpuNode>], ctx: &TreeContext) -> Result<()> {
        if !self.split.searches_vectors(ctx.outputs.len()) {
            return self.evaluate_vector_on_host(nodes, ctx);
        }
        let eval: Vec<VectorEvalNode> = nodes
            .iter()
            .map(|o| VectorEvalNode {
                key: o.key,
                depth: o.depth,
                limits: &o.limits,
                slots: o.state.slots().collect(),
                sums: &o.sums,
                output_limits: &o.output_limits,
            })
            .collect();
        let found = self.split.evaluate_vector(&mut self.dev, &self.matrix, &mut self.hist.pool, &eval, ctx)?;
        nodes.iter_mut().zip(found).for_each(|(o, best)| o.best = best);
        // The search's download drained the stream: the partition's counts are ready too.
        self.resolve_counts(nodes.iter_mut().map(|o| &mut o.state).collect())?;
        self.profile.lap(&self.dev.stream, Stage::SplitSearch);
        Ok(())
    }

    /// The host's vector-leaf search, for nodes with categorical features: each node's
    /// histogram of every output is copied into one run of slots and read back in one download.
    fn evaluate_vector_on_host(&mut self, nodes: &mut [Open<GpuNode>], ctx: &TreeContext) -> Result<()> {
        self.resolve_counts(nodes.iter_mut().map(|o| &mut o.state).collect())?;
        let k_out = ctx.outputs.len();
        // Compressed rows leave missing values out: their sums are the totals' remainder.
        let slots = nodes.iter().flat_map(|o| o.state.slots().zip(o.sums.iter().copied()));
        self.split.fill_missing_of(&mut self.dev, &self.matrix, &mut self.hist.pool, slots)?;
        let m = (nodes.len() * k_out) as u32;
        let first = self.hist.pool.exchange_run(&mut self.dev.memory, &self.dev.stream, m)?;
        let pairs: Vec<u32> =
            nodes.iter().flat_map(|o| o.state.slots()).zip(first..).flat_map(|(from, to)| [from, to]).collect();
        self.hist.copy_slots(&mut self.dev, &pairs)?;
        let hists = self.dev.download(self.hist.pool.run(first, m))?;
        let width = self.hist.pool.total_slots;
        let offsets = &self.matrix.slot_offsets;
        let rows: Vec<u32> = nodes.iter().map(|o| Self::known_len(&o.state)).collect();
        let nodes_now: &[Open<GpuNode>] = nodes;
        let hist = |i: usize, k: usize, f: usize| {
            let at = (i * k_out + k) * width;
            &hists[at + offsets[f] as usize..at + offsets[f + 1] as usize]
        };
        let found = best_vector_splits(nodes_now, ctx, self.cuts, &rows, hist);
        nodes.iter_mut().zip(found).for_each(|(o, best)| o.best = best);
        self.profile.lap(&self.dev.stream, Stage::SplitSearch);
        Ok(())
    }

    /// A level's partition and children's histograms over bins paged from host memory, in one
    /// pass over the pages: each page's rows are routed, and those going left summed into
    /// their left child's histogram from the parent's run (the right child is the parent's
    /// less it), so that each page crosses the link once a level rather than twice (once for
    /// the partition, once for the smaller children's histograms, as in-core fits read them).
    fn partition_and_build_paged(
        &mut self,
        tasks: Vec<RowTask>,
        rules: &[SplitRule],
        rule_words: &[u32],
        keep_others: bool,
        plans: Vec<Vec<ChildSlots>>,
    ) -> Result<()> {
        let Some(level) = self.rows.plan(&mut self.dev, tasks, rules, rule_words, Passes::Paged)? else {
            return Ok(());
        };
        let shape = self.hist.plan_left_children(&mut self.dev, &plans)?;
        for page in self.matrix.sweep() {
            let window = self.matrix.enter(&self.dev.stream, page)?;
            self.rows.route_in(&self.dev, &self.matrix, &window, level)?;
            for k in 0..plans.len() {
                let (grads, ridx, left) = (self.gradients.of_output(k), &self.rows.ridx, self.rows.flags());
                self.hist.build_left_in(&self.dev, &self.matrix, &window, grads, ridx, left, shape, k)?;
            }
            self.matrix.leave(&self.dev.stream, &window)?;
        }
        // The flags of every page are in: the rows move to their children's runs.
        self.rows.scatter(&mut self.dev, level, keep_others)?;
        self.hist.derive_right(&mut self.dev, shape, plans.len())
    }

    /// A node's rows on this worker, as the device reads them.
    fn local_rows(node: &GpuNode) -> TaskRows {
        match node.len {
            RowCount::Known(rows) => TaskRows { rows, ..TaskRows::default() },
            RowCount::Pending { task, parent_len, right } => {
                TaskRows { rows: parent_len, task, pending: 1, right: right as u32 }
            }
        }
    }

    fn known_len(node: &GpuNode) -> u32 {
        match node.len {
            RowCount::Known(len) => len,
            RowCount::Pending { .. } => unreachable!("a node's rows are counted when it is evaluated"),
        }
    }
}

impl GrowSteps for GpuLearner<'_> {
    type Node = GpuNode;

    /// One histogram per output of a vector-leaf tree.
    fn build_root(&mut self, ctx: &TreeContext) -> Result<GpuNode> {
        let mut slots = Vec::with_capacity(ctx.outputs.len().max(1));
        for k in 0..ctx.outputs.len().max(1) {
            let slot = self.hist.alloc(&mut self.dev)?;
            let (grads, ridx) = (self.gradients.of_output(k), &self.rows.ridx);
            self.hist.build_root(&mut self.dev, &self.matrix, grads, ridx, self.n_active, slot)?;
            slots.push(slot);
        }
        self.profile.lap(&self.dev.stream, Stage::Histograms);
        let other_outputs = slots.split_off(1);
        Ok(GpuNode { slot: slots[0], other_outputs, start: 0, len: RowCount::Known(self.n_active), shared: None })
    }

    fn evaluate(&mut self, nodes: &mut [Open<GpuNode>], ctx: &TreeContext) -> Result<()> {
        if ctx.is_vector() {
            return self.evaluate_vector(nodes, ctx);
        }
        // Where pending row counts are read: the last partition's counts, or in a fit over
        // several GPUs that sums on the devices, the level's summed counts.
        let mut counts_on_device = false;
        if self.comm.world() > 1 {
            match self.comm.device_sums() {
                Some(sums) => {
                    self.share_on_device(sums, nodes.iter_mut().map(|o| &mut o.state).collect())?;
                    counts_on_device = true;
                }
                None => {
                    self.resolve_counts(nodes.iter_mut().map(|o| &mut o.state).collect())?;
                    self.share_on_host(nodes.iter_mut().map(|o| &mut o.state).collect())?;
                }
            }
        }
        let eval: Vec<EvalNode> = nodes
            .iter()
            .map(|o| EvalNode {
                key: o.key,
                depth: o.depth,
                total: o.total,
                limits: o.limits.clone(),
                slot: o.state.shared.map_or(o.state.slot, |s| s.slot),
                rows: o.state.shared.map_or_else(|| Self::local_rows(&o.state), |s| s.rows),
            })
            .collect();
        let node_left = match counts_on_device {
            true => self.share_counts.buf.as_view(),
            false => self.rows.node_left.buf.as_view(),
        };
        // The partition's counts that the nodes' runs wait for come back with the splits.
        let pending = Self::pending_tasks(nodes.iter().map(|o| &o.state));
        let lefts = pending.map(|n| self.rows.node_left.buf.slice(..n));
        let (found, lefts) =
            self.split.evaluate(&mut self.dev, &self.matrix, &mut self.hist.pool, &eval, node_left, lefts, ctx)?;
        for (o, best) in nodes.iter_mut().zip(found) {
            o.best = best;
        }
        Self::apply_counts(nodes.iter_mut().map(|o| &mut o.state).collect(), &lefts);
        self.profile.lap(&self.dev.stream, Stage::SplitSearch);
        Ok(())
    }

    fn partition_and_build(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<GpuNode>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[GpuNode; 2]>>> {
        // Children that cannot split need no rows: the margins are updated by walking the tree.
        if !expansions.iter().any(|e| e.grow_children) {
            return Ok(expansions.into_iter().map(|e| self.release_node(&e.state)).map(|()| None).collect());
        }
        let mut tasks = Vec::with_capacity(expansions.len());
        let mut rules = Vec::with_capacity(expansions.len());
        let mut rule_words: Vec<u32> = Vec::new();
        for e in &expansions {
            let b = &e.split;
            tasks.push(RowTask { start: e.state.start, len: Self::known_len(&e.state), first_block: 0, slot: 0 });
            let (category_start, category_len) = if b.is_categorical() {
                let n = e.node as usize;
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
                default_left: b.default_left as u32,
                category_start,
                category_len,
            });
        }
        let keep_others = self.params.policy == GrowPolicy::Lossguide;

        // Per output (one for a scalar tree), each split node's children: the right child
        // keeps the parent's slot, its histogram derived there in place.
        let n_outputs = ctx.outputs.len().max(1);
        let mut plans: Vec<Vec<ChildSlots>> = (0..n_outputs).map(|_| Vec::new()).collect();
        let mut out = Vec::with_capacity(expansions.len());
        for (i, e) in expansions.iter().enumerate() {
            if !e.grow_children {
                // Its slots may hold this level's new children.
                self.release_node(&e.state);
                out.push(None);
                continue;
            }
            let (start, parent_len) = (e.state.start, Self::known_len(&e.state));
            let mut left_slots = Vec::with_capacity(n_outputs);
            for (plan, parent_slot) in plans.iter_mut().zip(e.state.slots()) {
                let left_slot = self.hist.alloc(&mut self.dev)?;
                plan.push(ChildSlots {
                    start,
                    len: parent_len,
                    first_block: 0,
                    task: i as u32,
                    parent_slot,
                    left_slot,
                });
                left_slots.push(left_slot);
            }
            let child = |mut slots: Vec<u32>, right| GpuNode {
                slot: slots.remove(0),
                other_outputs: slots,
                start,
                len: RowCount::Pending { task: i as u32, parent_len, right },
                shared: None,
            };
            out.push(Some([child(left_slots, false), child(e.state.slots().collect(), true)]));
        }
        if self.matrix.is_paged() {
            self.partition_and_build_paged(tasks, &rules, &rule_words, keep_others, plans)?;
        } else {
            self.rows.partition(&mut self.dev, &self.matrix, tasks, &rules, &rule_words, keep_others)?;
            self.profile.lap(&self.dev.stream, Stage::Partition);
            for (k, plan) in plans.into_iter().enumerate() {
                let (grads, ridx) = (self.gradients.of_output(k), &self.rows.ridx);
                self.hist.build_children(&mut self.dev, &self.matrix, grads, ridx, &self.rows.node_left.buf, plan)?;
            }
        }
        self.profile.lap(&self.dev.stream, Stage::Histograms);
        Ok(out)
    }

    fn discard(&mut self, node: GpuNode) {
        self.release_node(&node);
    }

    /// Nothing on the device is kept by node id: the margins and refits walk the final tree.
    fn renumber(&mut self, _: &[u32], _: &[u32]) -> Result<()> {
        Ok(())
    }

    /// For layouts that leave missing values out, the missing slots are filled in by
    /// `evaluate`: read a node's histogram after its evaluation (in a distributed fit, before
    /// the next evaluation, whose exchange reuses the summed histograms' slots).
    /// A vector-leaf node's histograms of each output in turn, as the CPU's.
    fn histogram(&mut self, node: &GpuNode) -> Result<Vec<GradSum>> {
        let mut hist = self.hist.download(&mut self.dev, node.shared.map_or(node.slot, |s| s.slot))?;
        for &slot in &node.other_outputs {
            hist.extend(self.hist.download(&mut self.dev, slot)?);
        }
        Ok(hist)
    }

    fn rows(&mut self, node: &GpuNode) -> Result<Vec<u32>> {
        let mut node_now =
            GpuNode { slot: node.slot, other_outputs: Vec::new(), start: node.start, len: node.len, shared: None };
        self.resolve_counts(vec![&mut node_now])?;
        let mut rows = self.rows.rows(&mut self.dev, node_now.start, Self::known_len(&node_now))?;
        rows.sort_unstable();
        Ok(rows)
    }
}
