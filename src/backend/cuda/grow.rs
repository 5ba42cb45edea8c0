//! Growing one tree on the GPU. The driver mirrors `backend/cpu/grow.rs`: the root's
//! histogram and best split, then, level by level (or leaf by leaf), apply the chosen splits,
//! partition their rows, build the children's histograms and find their best splits. The
//! tree itself is kept on the host; the margins are updated on the device once it is done.

use cudarc::driver::PushKernelArg;

use super::buffers::download;
use super::data::grid_for;
use super::device_error;
use super::layout::{ChildSlots, GradSum, RowTask, SplitResult, SplitRule};
use super::learner::{GpuLearner, Open, Stage};
use crate::backend::cpu::grow::next_batch;
use crate::config::GrowPolicy;
use crate::error::{Error, Result};
use crate::tree::model::SplitSpec;
use crate::tree::{Quantiser, Tree};

impl GpuLearner<'_> {
    pub(super) fn grow_tree(
        &mut self,
        c: usize,
        rows: Option<&[u32]>,
        tree_features: &[u32],
        seed: u64,
    ) -> Result<Tree> {
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
}
