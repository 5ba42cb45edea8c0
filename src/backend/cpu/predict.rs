//! CPU prediction from raw feature values. Each tree is rebuilt once into one of two layouts:
//!
//! * complete (heap) layout, for numeric trees of depth <= 12: 8-byte nodes, node `i` has
//!   children `2i + 1` and `2i + 2`, and a leaf above the last level is padded into a path
//!   that always goes left, so a step is `i = 2i + 2 - goes_left` with no child pointer;
//! * linked layout, for the rest (deep or categorical trees): 16-byte nodes in breadth-first
//!   order with siblings adjacent, `next = left + !goes_left`, leaves stepping to themselves.
//!
//! Either way every row takes exactly `depth` steps with no exit test: the 64 rows of a
//! block walk a tree in lockstep, their independent loads overlap, and no branch depends on
//! where a row is. Rows are read from the Arrow columns in blocks of 64 into a small
//! row-major buffer; blocks run in parallel.

use rayon::prelude::*;

use super::heap_simd;
use super::node_layout::{FlatNode, HeapNode, CATEGORICAL, DEFAULT_LEFT, FEATURE_MASK};
use super::shap::TreeShap;
use crate::backend::Predictor;
use crate::config::Objective;
use crate::data::FeatureColumn;
use crate::error::Result;
use crate::prediction::{finish, ForestSpec, PredictOutput, Predictions};
use crate::tree::Tree;

/// Rows per block: 64 rows of up to a few hundred features stay in L1/L2.
const BLOCK_ROWS: usize = 64;

/// Deepest tree given the complete layout (2^13 - 1 nodes, 64 KiB).
const MAX_HEAP_DEPTH: usize = 12;

/// How a tree is laid out.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// Nodes `heap[base..base + 2^(depth+1) - 1]`.
    Heap { base: u32 },
    /// Nodes from `nodes[roots[t]]`.
    Linked,
}

/// A forest laid out for prediction.
pub struct FlatForest {
    layout: Vec<Layout>,
    heap: Vec<HeapNode>,
    /// Leaf value and original node id of each heap slot (meaningful on the last level).
    heap_value: Vec<f32>,
    heap_node_id: Vec<u32>,
    nodes: Vec<FlatNode>,
    /// Leaf value and original node id of each flat node (meaningful for leaves).
    value: Vec<f32>,
    node_id: Vec<u32>,
    roots: Vec<u32>,
    depth: Vec<u32>,
    /// Whether a tree has categorical splits (else it takes the branch-free numeric step).
    has_categorical: Vec<bool>,
    /// (start, len) of each categorical split's bitset in `cat_words`.
    cat_sets: Vec<(u32, u32)>,
    cat_words: Vec<u32>,
    n_features: usize,
    n_outputs: usize,
    base_margin: Vec<f32>,
    objective: Objective,
    /// The trees as they are, for SHAP values (which need the covers).
    trees: Vec<Tree>,
}

impl FlatForest {
    /// A model's forest (`Model::forest_spec`) laid out for the CPU.
    pub fn new(spec: &ForestSpec) -> Self {
        let (trees, n_features) = (spec.trees, spec.n_features());
        let mut f = FlatForest {
            layout: Vec::new(),
            heap: Vec::new(),
            heap_value: Vec::new(),
            heap_node_id: Vec::new(),
            nodes: Vec::new(),
            value: Vec::new(),
            node_id: Vec::new(),
            roots: Vec::new(),
            depth: Vec::new(),
            has_categorical: Vec::new(),
            cat_sets: Vec::new(),
            cat_words: Vec::new(),
            n_features,
            n_outputs: spec.n_outputs,
            base_margin: spec.base_margin.to_vec(),
            objective: spec.objective,
            trees: trees.to_vec(),
        };
        for t in trees {
            let depth = t.depth();
            let categorical = (0..t.n_nodes() as u32).any(|n| !t.is_leaf(n) && t.is_categorical(n));
            f.roots.push(f.nodes.len() as u32);
            f.depth.push(depth as u32);
            f.has_categorical.push(categorical);
            if depth <= MAX_HEAP_DEPTH && !categorical {
                f.layout.push(Layout::Heap { base: f.heap.len() as u32 });
                f.push_heap_tree(t, depth);
            } else {
                f.layout.push(Layout::Linked);
                f.push_tree(t);
            }
        }
        // What the unchecked step relies on: a split's children (left and left + 1) are nodes;
        // a leaf points at itself and always goes left (every value read is below +inf, and
        // its missing direction is left); every feature index is a column of the row block.
        let n = f.nodes.len();
        let is_leaf = |i: usize, x: &FlatNode| x.left as usize == i && x.threshold == f32::INFINITY;
        assert!(f.nodes.iter().enumerate().all(|(i, x)| is_leaf(i, x) || (x.left as usize) + 1 < n));
        assert!(f.nodes.iter().all(|x| ((x.feature & FEATURE_MASK) as usize) < n_features.max(1)));
        assert!(f.heap.iter().all(|x| ((x.feature & FEATURE_MASK) as usize) < n_features.max(1)));
        f
    }

    fn push_heap_tree(&mut self, t: &Tree, depth: usize) {
        let base = self.heap.len();
        let size = (1usize << (depth + 1)) - 1;
        self.heap.resize(base + size, HeapNode::default());
        self.heap_value.resize(base + size, 0.0);
        self.heap_node_id.resize(base + size, 0);
        // (slot, tree node, depth of the slot)
        let mut stack = vec![(0usize, 0u32, 0usize)];
        while let Some((slot, node, d)) = stack.pop() {
            let k = node as usize;
            let at = base + slot;
            if t.is_leaf(node) {
                self.heap_value[at] = t.value[k];
                self.heap_node_id[at] = node;
                // Above the last level, pass the leaf down both sides (rows only go left).
                self.heap[at] = HeapNode { feature: DEFAULT_LEFT, threshold: f32::INFINITY };
                if d < depth {
                    stack.push((2 * slot + 1, node, d + 1));
                    stack.push((2 * slot + 2, node, d + 1));
                }
            } else {
                let flag = if t.default_left[k] { DEFAULT_LEFT } else { 0 };
                self.heap[at] = HeapNode { feature: t.feature[k] | flag, threshold: t.threshold[k] };
                stack.push((2 * slot + 1, t.left[k], d + 1));
                stack.push((2 * slot + 2, t.right[k], d + 1));
            }
        }
    }

    fn push_tree(&mut self, t: &Tree) {
        let base = self.nodes.len() as u32;
        // Breadth-first, assigning both children of a node consecutive slots.
        let mut order = vec![0u32];
        let mut slot_of = vec![0u32; t.n_nodes()];
        let mut i = 0;
        while i < order.len() {
            let n = order[i];
            if !t.is_leaf(n) {
                for c in [t.left[n as usize], t.right[n as usize]] {
                    slot_of[c as usize] = order.len() as u32;
                    order.push(c);
                }
            }
            i += 1;
        }
        for &n in &order {
            let k = n as usize;
            let node = if t.is_leaf(n) {
                let own = base + slot_of[k];
                FlatNode { feature: DEFAULT_LEFT, threshold: f32::INFINITY, left: own, cat: 0 }
            } else {
                let mut feature = t.feature[k] & FEATURE_MASK;
                if t.default_left[k] {
                    feature |= DEFAULT_LEFT;
                }
                let mut cat = 0;
                if t.is_categorical(n) {
                    feature |= CATEGORICAL;
                    cat = self.cat_sets.len() as u32;
                    let start = self.cat_words.len() as u32;
                    let (a, len) = (t.category_start[k] as usize, t.category_len[k] as usize);
                    self.cat_words.extend_from_slice(&t.category_words[a..a + len]);
                    self.cat_sets.push((start, len as u32));
                }
                FlatNode { feature, threshold: t.threshold[k], left: base + slot_of[t.left[k] as usize], cat }
            };
            self.nodes.push(node);
            self.value.push(t.value[k]);
            self.node_id.push(n);
        }
    }

    /// One step of every row of a block down a tree with numeric splits only, without
    /// branches: NaN fails `x < threshold`, so missing goes left exactly when the node says.
    #[inline]
    fn step_numeric(&self, block: &[f32], at: &mut [u32]) {
        let nf = self.n_features;
        assert!(block.len() >= at.len() * nf);
        for (r, idx) in at.iter_mut().enumerate() {
            // SAFETY: `idx` starts at a root and only moves to `left` or `left + 1`, which
            // `new` checked are nodes; the feature is below `nf` (checked in `new`) and `r`
            // is below `at.len()`, so the value lies in `block` (asserted above).
            let (n, x) = unsafe {
                let n = *self.nodes.get_unchecked(*idx as usize);
                (n, *block.get_unchecked(r * nf + (n.feature & FEATURE_MASK) as usize))
            };
            let left = (x < n.threshold) | (x.is_nan() & (n.feature & DEFAULT_LEFT != 0));
            *idx = n.left + (!left) as u32;
        }
    }

    /// One step of every row of a block down tree nodes `at`, categorical splits included.
    #[inline]
    fn step(&self, block: &[f32], at: &mut [u32]) {
        let nf = self.n_features;
        for (r, idx) in at.iter_mut().enumerate() {
            let n = self.nodes[*idx as usize];
            let x = block[r * nf + (n.feature & FEATURE_MASK) as usize];
            let left = if x.is_nan() {
                n.feature & DEFAULT_LEFT != 0
            } else if n.feature & CATEGORICAL != 0 {
                let (start, len) = self.cat_sets[n.cat as usize];
                let code = crate::tree::category_code(x);
                (code / 32) < len && self.cat_words[(start + code / 32) as usize] & (1 << (code % 32)) != 0
            } else {
                x < n.threshold
            };
            *idx = n.left + (!left) as u32;
        }
    }

    /// The leaf each row of `block` reaches in tree `t`, as an index into the returned
    /// (leaf values, original node ids).
    #[inline]
    fn leaves(&self, t: usize, block: &[f32], at: &mut [u32]) -> (&[f32], &[u32]) {
        if let Layout::Heap { base } = self.layout[t] {
            let base = base as usize;
            let size = (1usize << (self.depth[t] + 1)) - 1;
            let nodes = &self.heap[base..base + size];
            // SAFETY: `new` checked that every heap node's feature is below n_features.
            if !unsafe { heap_simd::walk(nodes, self.depth[t], block, self.n_features, at) } {
                heap_simd::walk_scalar(nodes, self.depth[t], block, self.n_features, at);
            }
            return (&self.heap_value[base..base + size], &self.heap_node_id[base..base + size]);
        }
        at.fill(self.roots[t]);
        if self.has_categorical[t] {
            for _ in 0..self.depth[t] {
                self.step(block, at);
            }
        } else {
            for _ in 0..self.depth[t] {
                self.step_numeric(block, at);
            }
        }
        (&self.value, &self.node_id)
    }

    /// Runs `visit(first_row, rows, row_values, out_block)` over blocks of rows in parallel;
    /// `out` has `width` values per row.
    fn for_blocks<T: Send>(
        &self,
        columns: &[FeatureColumn],
        out: &mut [T],
        width: usize,
        visit: impl Fn(usize, usize, &[f32], &mut [T]) + Sync,
    ) {
        let nf = self.n_features;
        out.par_chunks_mut(BLOCK_ROWS * width).enumerate().for_each(|(b, out_block)| {
            let start = b * BLOCK_ROWS;
            let rows = out_block.len() / width;
            let mut column = [0f32; BLOCK_ROWS];
            let mut block = vec![0f32; rows * nf];
            for (f, col) in columns.iter().enumerate() {
                col.read(start, &mut column[..rows]);
                for r in 0..rows {
                    block[r * nf + f] = column[r];
                }
            }
            visit(start, rows, &block, out_block);
        });
    }

    /// Adds each tree's leaf value to `out[row * n_outputs + tree % n_outputs]`.
    pub fn predict_margin(&self, columns: &[FeatureColumn], out: &mut [f32]) {
        let n_outputs = self.n_outputs;
        self.for_blocks(columns, out, n_outputs, |_, rows, block, out_block| {
            let mut at = [0u32; BLOCK_ROWS];
            let at = &mut at[..rows];
            for t in 0..self.roots.len() {
                let (value, _) = self.leaves(t, block, at);
                let k = t % n_outputs;
                for (r, &leaf) in at.iter().enumerate() {
                    out_block[r * n_outputs + k] += value[leaf as usize];
                }
            }
        });
    }

    /// SHAP values (or, with `interactions`, SHAP interaction values) of every row (see
    /// `shap`), the bias from `base_margin` or the forest's.
    fn shap_values(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        interactions: bool,
    ) -> Predictions {
        let shap = TreeShap::new(&self.trees, self.n_outputs, self.n_features);
        let width = if interactions { shap.interaction_width() } else { shap.width() };
        let (k, nf) = (self.n_outputs, self.n_features);
        let mut out = vec![0f32; n_rows * width];
        self.for_blocks(columns, &mut out, width, |start, rows, block, out_block| {
            for r in 0..rows {
                let base = match base_margin {
                    Some(b) => &b[(start + r) * k..(start + r + 1) * k],
                    None => &self.base_margin[..],
                };
                let (x, out) = (&block[r * nf..(r + 1) * nf], &mut out_block[r * width..(r + 1) * width]);
                if interactions {
                    shap.interactions(x, base, out);
                } else {
                    shap.row(x, base, out);
                }
            }
        });
        Predictions::Float { values: out, width }
    }

    /// Writes the leaf (original node id) each row reaches in each tree.
    pub fn predict_leaf(&self, columns: &[FeatureColumn], out: &mut [u32]) {
        let n_trees = self.roots.len();
        self.for_blocks(columns, out, n_trees, |_, rows, block, out_block| {
            let mut at = [0u32; BLOCK_ROWS];
            let at = &mut at[..rows];
            for t in 0..n_trees {
                let (_, node_id) = self.leaves(t, block, at);
                for (r, &leaf) in at.iter().enumerate() {
                    out_block[r * n_trees + t] = node_id[leaf as usize];
                }
            }
        });
    }
}

impl Predictor for FlatForest {
    fn scores(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        output: PredictOutput,
    ) -> Result<Predictions> {
        if output == PredictOutput::Leaf {
            let n_trees = self.roots.len();
            let mut leaves = vec![0u32; n_rows * n_trees];
            self.predict_leaf(columns, &mut leaves);
            return Ok(Predictions::Index { values: leaves, width: n_trees });
        }
        let mut margin = match base_margin {
            Some(b) => b.to_vec(),
            None => (0..n_rows).flat_map(|_| self.base_margin.iter().copied()).collect(),
        };
        self.predict_margin(columns, &mut margin);
        Ok(finish(self.objective, self.n_outputs, margin, output))
    }

    fn contributions(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        interactions: bool,
    ) -> Result<Predictions> {
        Ok(self.shap_values(columns, n_rows, base_margin, interactions))
    }
}

/// The leaf a binned row reaches (training-time prediction on bins).
#[inline]
pub fn leaf_binned(tree: &Tree, binned: &crate::data::BinnedMatrix, row: usize) -> u32 {
    let mut node = 0;
    while !tree.is_leaf(node) {
        let f = tree.feature[node as usize] as usize;
        node = tree.next_binned(node, binned.get(row, f), binned.n_bins[f]);
    }
    node
}

/// Adds `tree`'s output to `margin[row]` for every row of `binned`.
pub fn add_tree_binned(tree: &Tree, binned: &crate::data::BinnedMatrix, margin: &mut [f32]) {
    margin.par_iter_mut().enumerate().for_each(|(r, m)| *m += tree.value[leaf_binned(tree, binned, r) as usize]);
}
