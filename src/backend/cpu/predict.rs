//! CPU prediction from raw feature values. The forest is rebuilt once into a compact layout:
//! 16-byte nodes, each tree's nodes in breadth-first order with siblings adjacent, so a step
//! is `next = left + !goes_left` and the top levels of a tree share cache lines. Rows are
//! read from the Arrow columns in blocks of 64 into a small row-major buffer; each block
//! walks every tree while the tree stays in cache. Blocks run in parallel.

use rayon::prelude::*;

use crate::data::FeatureColumn;
use crate::tree::Tree;

const LEAF: u32 = 1 << 31;
const DEFAULT_LEFT: u32 = 1 << 30;
const CATEGORICAL: u32 = 1 << 29;
const FEATURE_MASK: u32 = (1 << 29) - 1;

/// Rows per block: 64 rows of up to a few hundred features stay in L1/L2.
const BLOCK_ROWS: usize = 64;

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct FlatNode {
    /// Feature index and the flags above.
    feature: u32,
    /// Threshold, or the leaf value for leaves.
    value: f32,
    /// Left child (right is left + 1), or the original node id for leaves.
    left: u32,
    /// Index into `cat_sets` for categorical splits.
    cat: u32,
}

/// A forest laid out for prediction.
pub struct FlatForest {
    nodes: Vec<FlatNode>,
    roots: Vec<u32>,
    /// (start, len) of each categorical split's bitset in `cat_words`.
    cat_sets: Vec<(u32, u32)>,
    cat_words: Vec<u32>,
    n_features: usize,
}

impl FlatForest {
    pub fn new(trees: &[Tree], n_features: usize) -> Self {
        let mut f = FlatForest {
            nodes: Vec::new(),
            roots: Vec::new(),
            cat_sets: Vec::new(),
            cat_words: Vec::new(),
            n_features,
        };
        for t in trees {
            f.roots.push(f.nodes.len() as u32);
            f.push_tree(t);
        }
        f
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
                FlatNode { feature: LEAF, value: t.value[k], left: n, cat: 0 }
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
                FlatNode { feature, value: t.threshold[k], left: base + slot_of[t.left[k] as usize], cat }
            };
            self.nodes.push(node);
        }
    }

    #[inline]
    fn leaf_of(&self, tree: usize, row: &[f32]) -> &FlatNode {
        let mut n = &self.nodes[self.roots[tree] as usize];
        while n.feature & LEAF == 0 {
            let x = row[(n.feature & FEATURE_MASK) as usize];
            let left = if x.is_nan() {
                n.feature & DEFAULT_LEFT != 0
            } else if n.feature & CATEGORICAL != 0 {
                let (start, len) = self.cat_sets[n.cat as usize];
                let code = x as u32;
                (code / 32) < len && self.cat_words[(start + code / 32) as usize] & (1 << (code % 32)) != 0
            } else {
                x < n.value
            };
            n = &self.nodes[(n.left + (!left) as u32) as usize];
        }
        n
    }

    /// Runs `visit(block_rows, row_values, out_block)` over blocks of rows in parallel;
    /// `out` has `width` values per row.
    fn for_blocks<T: Send>(
        &self,
        columns: &[FeatureColumn],
        out: &mut [T],
        width: usize,
        visit: impl Fn(usize, &[f32], &mut [T]) + Sync,
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
            visit(rows, &block, out_block);
        });
    }

    /// Adds each tree's leaf value to `out[row * n_outputs + tree % n_outputs]`.
    pub fn predict_margin(&self, columns: &[FeatureColumn], n_outputs: usize, out: &mut [f32]) {
        let nf = self.n_features;
        self.for_blocks(columns, out, n_outputs, |rows, block, out_block| {
            for t in 0..self.roots.len() {
                let k = t % n_outputs;
                for r in 0..rows {
                    out_block[r * n_outputs + k] += self.leaf_of(t, &block[r * nf..(r + 1) * nf]).value;
                }
            }
        });
    }

    /// Writes the leaf (original node id) each row reaches in each tree.
    pub fn predict_leaf(&self, columns: &[FeatureColumn], out: &mut [u32]) {
        let nf = self.n_features;
        let n_trees = self.roots.len();
        self.for_blocks(columns, out, n_trees, |rows, block, out_block| {
            for t in 0..n_trees {
                for r in 0..rows {
                    out_block[r * n_trees + t] = self.leaf_of(t, &block[r * nf..(r + 1) * nf]).left;
                }
            }
        });
    }
}

/// The leaf a binned row reaches (training-time prediction on bins).
#[inline]
pub fn leaf_binned(tree: &Tree, binned: &crate::data::BinnedMatrix, row: usize) -> u32 {
    let mut node = 0;
    while !tree.is_leaf(node) {
        let f = tree.feature[node as usize] as usize;
        node = tree.next_binned(node, binned.columns[f].get(row), binned.n_bins[f]);
    }
    node
}

/// Adds `tree`'s output to `margin[row]` for every row of `binned`.
pub fn add_tree_binned(tree: &Tree, binned: &crate::data::BinnedMatrix, margin: &mut [f32]) {
    margin.par_iter_mut().enumerate().for_each(|(r, m)| *m += tree.value[leaf_binned(tree, binned, r) as usize]);
}
