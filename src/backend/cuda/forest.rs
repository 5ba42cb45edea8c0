//! A model's trees laid out for the prediction kernels (`kernels/predict.cu`), built on the
//! host once per model. One layout per model:
//!
//! * **complete** when every tree is at most [`MAX_COMPLETE_DEPTH`] deep and padding the trees
//!   to complete ones costs at most [`MAX_PADDING`] times their nodes (shallow, dense trees,
//!   as depth-wise growth makes): 8-byte nodes in heap order, copied to shared memory a tile
//!   of trees at a time;
//! * **linked** otherwise (deep or sparse trees, as loss-guided growth and LightGBM make):
//!   16-byte nodes with explicit children, read through the read-only cache.
//!
//! Trees are stored output-major (all trees of output 0 in model order, then output 1, ...) so
//! the kernel sums each output's trees in the CPU's order. [`HostForest::leaf`] walks the
//! layout exactly as the kernel does, so the layouts are tested without a GPU.

use super::layout::{LinkedNode, PredNode, PredTile, PredTree};
use crate::tree::{category_code, Tree, NO_CHILD};

pub const DEFAULT_LEFT: u32 = 1 << 31;
pub const CATEGORICAL: u32 = 1 << 30;
pub const FEATURE_MASK: u32 = (1 << 30) - 1;

/// Deepest tree of the complete layout: 2^13 - 1 nodes (64 KiB) and 4096 leaves per tree.
pub const MAX_COMPLETE_DEPTH: usize = 12;
/// Most padding (complete-layout slots per real node) the complete layout may cost.
pub const MAX_PADDING: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForestLayout {
    Complete,
    Linked,
}

/// The forest as the kernels read it.
#[derive(Debug, Default)]
pub struct HostForest {
    pub trees: Vec<PredTree>,
    /// Complete layout: nodes, last-level leaf values and their original node ids.
    pub nodes: Vec<PredNode>,
    pub leaf_values: Vec<f32>,
    pub leaf_ids: Vec<u32>,
    /// Linked layout: nodes and the original id of each.
    pub linked: Vec<LinkedNode>,
    pub linked_ids: Vec<u32>,
    /// Categorical sets: (first word, words) into `words`.
    pub sets: Vec<[u32; 2]>,
    pub words: Vec<u32>,
    pub has_categorical: bool,
    pub max_depth: usize,
}

/// How split `k` of `t` tests a value, as the prediction and SHAP kernels read it: the flags
/// (DEFAULT_LEFT, CATEGORICAL; no feature) and the threshold or, for a categorical split, the
/// bits of its category set's index, the set appended to `sets` (first word, words) and `words`.
pub(super) fn split_test(t: &Tree, k: usize, sets: &mut Vec<[u32; 2]>, words: &mut Vec<u32>) -> (u32, f32) {
    let default_left = if t.default_left[k] { DEFAULT_LEFT } else { 0 };
    if t.category_len[k] == 0 {
        return (default_left, t.threshold[k]);
    }
    let set = sets.len() as u32;
    let (start, len) = (t.category_start[k] as usize, t.category_len[k] as usize);
    sets.push([words.len() as u32, len as u32]);
    words.extend_from_slice(&t.category_words[start..start + len]);
    (default_left | CATEGORICAL, f32::from_bits(set))
}

/// Whether `x` goes left at a split tested as `split_test` gives it (`goes_left` in
/// kernels/predict.cu).
pub(super) fn goes_left(word: u32, threshold: f32, x: f32, sets: &[[u32; 2]], words: &[u32]) -> bool {
    if word & CATEGORICAL != 0 {
        if x.is_nan() {
            return word & DEFAULT_LEFT != 0;
        }
        let [start, len] = sets[threshold.to_bits() as usize];
        let code = category_code(x);
        return (code >> 5) < len && (words[(start + (code >> 5)) as usize] >> (code & 31)) & 1 != 0;
    }
    (x < threshold) || (x.is_nan() && word & DEFAULT_LEFT != 0)
}

impl HostForest {
    /// The layout for `trees` (tree `t` adds to output `t % n_outputs`).
    pub fn choose(trees: &[Tree]) -> ForestLayout {
        let depth = trees.iter().map(Tree::depth).max().unwrap_or(0);
        let slots: usize = trees.iter().map(|t| (1usize << (t.depth().min(30) + 1)) - 1).sum();
        let nodes: usize = trees.iter().map(Tree::n_nodes).sum();
        if depth <= MAX_COMPLETE_DEPTH && slots <= MAX_PADDING * nodes {
            ForestLayout::Complete
        } else {
            ForestLayout::Linked
        }
    }

    pub fn build(trees: &[Tree], n_outputs: usize, layout: ForestLayout) -> Self {
        let mut f = HostForest::default();
        for k in 0..n_outputs {
            for (t, tree) in trees.iter().enumerate().skip(k).step_by(n_outputs) {
                let depth = tree.depth();
                f.max_depth = f.max_depth.max(depth);
                let mut entry =
                    PredTree { depth: depth as u32, output: k as u32, original: t as u32, ..Default::default() };
                match layout {
                    ForestLayout::Complete => {
                        entry.node_offset = f.nodes.len() as u32;
                        entry.leaf_offset = f.leaf_values.len() as u32;
                        f.push_complete(tree, depth);
                    }
                    ForestLayout::Linked => {
                        entry.node_offset = f.linked.len() as u32;
                        f.push_linked(tree);
                    }
                }
                f.trees.push(entry);
            }
        }
        if f.sets.is_empty() {
            // Never an empty upload.
            f.sets.push([0, 0]);
            f.words.push(0);
        }
        f
    }

    /// The node word of split `k` of `t` (registering its category set).
    fn split_word(&mut self, t: &Tree, k: usize) -> (u32, f32) {
        let (flags, threshold) = split_test(t, k, &mut self.sets, &mut self.words);
        self.has_categorical |= flags & CATEGORICAL != 0;
        ((t.feature[k] & FEATURE_MASK) | flags, threshold)
    }

    fn push_complete(&mut self, t: &Tree, depth: usize) {
        let base = self.nodes.len();
        let leaf_base = self.leaf_values.len();
        let size = (1usize << (depth + 1)) - 1;
        let last = (1usize << depth) - 1;
        // Padding nodes and leaves above the last level send every row left (+inf threshold,
        // missing left); their leaf is the leftmost last-level slot below them.
        self.nodes.resize(base + size, PredNode { word: DEFAULT_LEFT, threshold: f32::INFINITY });
        self.leaf_values.resize(leaf_base + (1 << depth), 0.0);
        self.leaf_ids.resize(leaf_base + (1 << depth), 0);
        // Each tree starts 16-byte aligned in both arrays (of 4-byte entries), for the
        // kernels' vector copies: pad to a multiple of 4 entries.
        let padded = (base + size).next_multiple_of(4);
        self.nodes.resize(padded, PredNode { word: DEFAULT_LEFT, threshold: f32::INFINITY });
        let padded = self.leaf_values.len().next_multiple_of(4);
        self.leaf_values.resize(padded, 0.0);
        self.leaf_ids.resize(padded, 0);
        let mut stack = vec![(0usize, 0u32)];
        while let Some((slot, node)) = stack.pop() {
            let k = node as usize;
            if t.left[k] == NO_CHILD {
                // Rows reach a leaf above the last level and keep going left.
                let mut s = slot;
                while s < last {
                    s = 2 * s + 1;
                }
                self.leaf_values[leaf_base + s - last] = t.value[k];
                self.leaf_ids[leaf_base + s - last] = node;
            } else {
                let (word, threshold) = self.split_word(t, k);
                self.nodes[base + slot] = PredNode { word, threshold };
                stack.push((2 * slot + 1, t.left[k]));
                stack.push((2 * slot + 2, t.right[k]));
            }
        }
    }

    fn push_linked(&mut self, t: &Tree) {
        let base = self.linked.len() as u32;
        // Breadth-first, both children of a node in consecutive slots.
        let mut order = vec![0u32];
        let mut slot_of = vec![0u32; t.n_nodes()];
        let mut i = 0;
        while i < order.len() {
            let n = order[i] as usize;
            if t.left[n] != NO_CHILD {
                for c in [t.left[n], t.right[n]] {
                    slot_of[c as usize] = order.len() as u32;
                    order.push(c);
                }
            }
            i += 1;
        }
        for &n in &order {
            let k = n as usize;
            let node = if t.left[k] == NO_CHILD {
                LinkedNode { word: DEFAULT_LEFT, threshold: f32::INFINITY, left: base + slot_of[k], value: t.value[k] }
            } else {
                let (word, threshold) = self.split_word(t, k);
                LinkedNode { word, threshold, left: base + slot_of[t.left[k] as usize], value: t.value[k] }
            };
            self.linked.push(node);
            self.linked_ids.push(n);
        }
    }

    /// Groups trees into tiles of at most `budget` bytes of nodes (`node_bytes` each) and
    /// leaves (`leaf_bytes` each; 0 when the kernel leaves them in global memory); a tree
    /// larger than the budget gets a tile of its own. Returns the tiles and the largest tile's
    /// node and leaf counts.
    pub fn tiles(&self, budget: usize, node_bytes: usize, leaf_bytes: usize) -> (Vec<PredTile>, usize, usize) {
        let mut tiles: Vec<PredTile> = Vec::new();
        let (mut max_nodes, mut max_leaves) = (0, 0);
        for (t, tree) in self.trees.iter().enumerate() {
            let nodes = (1u32 << (tree.depth + 1)) - 1;
            let leaves = 1u32 << tree.depth;
            let fits = tiles.last().is_some_and(|tile| {
                let bytes = (tile.node_end - tile.node_begin + nodes) as usize * node_bytes
                    + (tile.leaf_end - tile.leaf_begin + leaves) as usize * leaf_bytes;
                bytes <= budget
            });
            if fits {
                let tile = tiles.last_mut().unwrap();
                tile.end = t as u32 + 1;
                tile.node_end = tree.node_offset + nodes;
                tile.leaf_end = tree.leaf_offset + leaves;
            } else {
                tiles.push(PredTile {
                    first: t as u32,
                    end: t as u32 + 1,
                    node_begin: tree.node_offset,
                    node_end: tree.node_offset + nodes,
                    leaf_begin: tree.leaf_offset,
                    leaf_end: tree.leaf_offset + leaves,
                });
            }
            let tile = tiles.last().unwrap();
            max_nodes = max_nodes.max((tile.node_end - tile.node_begin) as usize);
            max_leaves = max_leaves.max((tile.leaf_end - tile.leaf_begin) as usize);
        }
        (tiles, max_nodes, max_leaves)
    }

    fn goes_left(&self, word: u32, threshold: f32, x: f32) -> bool {
        goes_left(word, threshold, x, &self.sets, &self.words)
    }

    /// The (leaf value, original leaf id) that tree `i` (in layout order) gives `row`, walked
    /// as the kernel walks it.
    pub fn leaf(&self, layout: ForestLayout, i: usize, row: &[f32]) -> (f32, u32) {
        let tree = self.trees[i];
        match layout {
            ForestLayout::Complete => {
                let nodes = &self.nodes[tree.node_offset as usize..];
                let mut at = 0usize;
                for _ in 0..tree.depth {
                    let n = nodes[at];
                    let left = self.goes_left(n.word, n.threshold, row[(n.word & FEATURE_MASK) as usize]);
                    at = 2 * at + 2 - left as usize;
                }
                let slot = tree.leaf_offset as usize + at - ((1 << tree.depth) - 1);
                (self.leaf_values[slot], self.leaf_ids[slot])
            }
            ForestLayout::Linked => {
                let mut at = tree.node_offset as usize;
                for _ in 0..tree.depth {
                    let n = self.linked[at];
                    let left = self.goes_left(n.word, n.threshold, row[(n.word & FEATURE_MASK) as usize]);
                    at = n.left as usize + !left as usize;
                }
                (self.linked[at].value, self.linked_ids[at])
            }
        }
    }
}

/// Largest bin counts of the quantised traversal: the top two bin values are reserved for
/// missing values and for categories no set holds. Wide bins are stored in 16 bits but read
/// sign-extended by the kernel (missing 0xffff is then 0xffffffff, which wraps to 0 when missing
/// values go left without a mask: one instruction less per step), so real bins stay below
/// 0x7ffe; a forest with more thresholds on one feature is scored by the float kernels.
pub const MAX_U8_BINS: usize = 254;
pub const MAX_WIDE_BINS: usize = 0x7ffe;

/// Quantised node word: bit 0 missing-goes-left, bits 1..=14 the feature, bit 15 categorical,
/// bits 16..=31 the split bin plus the missing bit (or the category set's index).
pub(super) const QNODE_DEFAULT_LEFT: u32 = 1;
pub(super) const QNODE_FEATURE_SHIFT: u32 = 1;
pub(super) const QNODE_FEATURE_MASK: u32 = 0x3fff;
pub(super) const QNODE_CATEGORICAL: u32 = 0x8000;

/// The complete layout on u8 or u16 bins (`predict_binned*` in kernels/predict.cu): each feature's
/// distinct thresholds, and nodes of four bytes: feature (14 bits), categorical and
/// missing-goes-left flags, and the split's bin (or category set) in the high half.
#[derive(Debug, Default)]
pub struct QuantisedForest {
    pub nodes: Vec<u32>,
    /// Sorted distinct thresholds of each numeric feature: `cuts[cut_offsets[f]..cut_offsets[f + 1]]`.
    pub cuts: Vec<f32>,
    pub cut_offsets: Vec<u32>,
    /// Category count of categorical features (their codes are the bins), 0 for numeric ones.
    pub n_categories: Vec<u32>,
    /// 16-bit bins, read sign-extended (some feature has more than 254 thresholds or
    /// categories), else u8.
    pub wide: bool,
}

impl QuantisedForest {
    /// The quantised form of a complete-layout forest, when every feature fits in wide bins.
    /// `categories[f]` is feature f's category count (None for numeric features).
    pub fn new(host: &HostForest, categories: &[Option<u32>]) -> Option<Self> {
        let nf = categories.len();
        if nf > QNODE_FEATURE_MASK as usize || host.nodes.is_empty() || host.sets.len() > u16::MAX as usize {
            return None;
        }
        let padding = |n: &PredNode| n.word & CATEGORICAL == 0 && n.threshold == f32::INFINITY;
        let mut thresholds: Vec<Vec<f32>> = vec![Vec::new(); nf];
        for n in host.nodes.iter().filter(|n| !padding(n) && n.word & CATEGORICAL == 0) {
            thresholds[(n.word & FEATURE_MASK) as usize].push(n.threshold);
        }
        let mut q = QuantisedForest { cut_offsets: vec![0], ..Default::default() };
        for (f, t) in thresholds.iter_mut().enumerate() {
            t.sort_by(f32::total_cmp);
            t.dedup();
            let bins = categories[f].map_or(t.len(), |c| c as usize);
            if bins > MAX_WIDE_BINS {
                return None;
            }
            q.wide |= bins > MAX_U8_BINS;
            q.cuts.extend_from_slice(t);
            q.cut_offsets.push(q.cuts.len() as u32);
            q.n_categories.push(categories[f].unwrap_or(0));
        }
        // A numeric split goes left when `read(bin) + missing_left <= split + missing_left`,
        // where `read` masks to 8 bits for u8 bins and sign-extends wide ones: the missing bin
        // wraps to 0 exactly when missing values go left, and every other bin compares as
        // `bin <= split`. Padding sends everything left: missing values too, and a split of
        // 0xffff for the rest.
        for n in &host.nodes {
            let feature = n.word & FEATURE_MASK;
            let missing_left = (n.word & DEFAULT_LEFT != 0) as u32;
            let mut word = feature << QNODE_FEATURE_SHIFT;
            let split = if padding(n) {
                word |= QNODE_DEFAULT_LEFT;
                0xffff
            } else if n.word & CATEGORICAL != 0 {
                word |= QNODE_CATEGORICAL | missing_left;
                n.threshold.to_bits()
            } else {
                word |= missing_left;
                let t = &thresholds[feature as usize];
                t.partition_point(|&c| c < n.threshold) as u32 + missing_left
            };
            q.nodes.push(word | split << 16);
        }
        Some(q)
    }

    /// The bin that means "missing".
    pub fn missing_bin(&self) -> u32 {
        if self.wide {
            0xffff
        } else {
            0xff
        }
    }

    /// The bin of value `x` of feature `f`, as `bin_rows` computes it.
    pub fn bin(&self, f: usize, x: f32) -> u32 {
        if x.is_nan() {
            self.missing_bin()
        } else if self.n_categories[f] > 0 {
            let code = category_code(x);
            if code < self.n_categories[f] {
                code
            } else {
                self.missing_bin() - 1
            }
        } else {
            let cuts = &self.cuts[self.cut_offsets[f] as usize..self.cut_offsets[f + 1] as usize];
            cuts.partition_point(|&c| c <= x) as u32
        }
    }

    /// The (leaf value, original leaf id) that tree `i` gives `row`, walked on bins as the
    /// kernel walks it.
    pub fn leaf(&self, host: &HostForest, i: usize, row: &[f32]) -> (f32, u32) {
        let tree = host.trees[i];
        let nodes = &self.nodes[tree.node_offset as usize..];
        let mut at = 0usize;
        for _ in 0..tree.depth {
            let node = nodes[at];
            let f = ((node >> QNODE_FEATURE_SHIFT) & QNODE_FEATURE_MASK) as usize;
            let b = self.bin(f, row[f]);
            let split = node >> 16;
            let missing_left = node & QNODE_DEFAULT_LEFT;
            let left = if node & QNODE_CATEGORICAL != 0 {
                if b == self.missing_bin() {
                    missing_left != 0
                } else {
                    let [start, len] = host.sets[split as usize];
                    (b >> 5) < len && (host.words[(start + (b >> 5)) as usize] >> (b & 31)) & 1 != 0
                }
            } else if self.wide {
                // Read sign-extended: missing (0xffff) is 0xffffffff, 0 once missing_left is added.
                (b as u16 as i16 as i32 as u32).wrapping_add(missing_left) <= split
            } else {
                ((b + missing_left) & 0xff) <= split
            };
            at = 2 * at + 2 - left as usize;
        }
        let slot = tree.leaf_offset as usize + at - ((1 << tree.depth) - 1);
        (host.leaf_values[slot], host.leaf_ids[slot])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::model::SplitSpec;

    /// A random tree over 4 features, with missing directions and (optionally) category sets.
    fn random_tree(seed: u64, splits: usize, categorical: bool) -> Tree {
        let mut rng = crate::random::Rng::new(seed, 0);
        let mut t = Tree::leaf(0.5, 1.0);
        let mut leaves = vec![0u32];
        for s in 0..splits {
            let pick = (rng.next_u64() as usize) % leaves.len();
            let node = leaves.swap_remove(pick);
            let feature = (rng.next_u64() % 4) as u32;
            let cats: Vec<u32> = if categorical && feature == 3 { vec![1, 4, 33] } else { vec![] };
            let spec = SplitSpec {
                feature,
                threshold: (rng.next_u64() % 100) as f32 / 10.0,
                split_bin: 0,
                default_left: rng.next_u64().is_multiple_of(2),
                left_categories: &cats,
                gain: 1.0,
            };
            let (l, r) = t.split(node, &spec, (s as f32, 1.0), (-(s as f32) - 0.25, 1.0));
            leaves.extend([l, r]);
        }
        t
    }

    /// A stump on `feature` at `threshold`, missing values going left on even `i`.
    fn stump(feature: u32, threshold: f32, i: usize) -> Tree {
        let mut t = Tree::leaf(0.0, 1.0);
        let spec = SplitSpec {
            feature,
            threshold,
            split_bin: 0,
            default_left: i.is_multiple_of(2),
            left_categories: &[],
            gain: 1.0,
        };
        t.split(0, &spec, (i as f32, 1.0), (-(i as f32), 1.0));
        t
    }

    #[test]
    fn layouts_walk_to_the_trees_own_leaves() {
        let mut rng = crate::random::Rng::new(9, 0);
        for (categorical, wide) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut trees: Vec<Tree> = (0..12).map(|i| random_tree(i, 1 + i as usize * 3, categorical)).collect();
            if wide {
                // 300 more thresholds on feature 1: wide bins, read sign-extended by the walk,
                // under the random trees' padding and missing values.
                trees.extend((0..300).map(|i| stump(1, i as f32 * 0.037, i)));
            }
            for layout in [ForestLayout::Complete, ForestLayout::Linked] {
                let forest = HostForest::build(&trees, 3, layout);
                assert_eq!(forest.has_categorical, categorical);
                for _ in 0..500 {
                    let row: Vec<f32> = (0..4)
                        .map(|f| match rng.next_u64() % 5 {
                            0 => f32::NAN,
                            1 if f == 3 => 33.0,
                            1 => -1.0,
                            _ => (rng.next_u64() % 110) as f32 / 10.0,
                        })
                        .collect();
                    // Feature 3 holds category codes below 40 when the trees are categorical.
                    let categories = [None, None, None, categorical.then_some(40)];
                    let quantised = (layout == ForestLayout::Complete)
                        .then(|| QuantisedForest::new(&forest, &categories).expect("few thresholds: quantisable"));
                    assert!(quantised.as_ref().is_none_or(|q| q.wide == wide));
                    for (i, entry) in forest.trees.iter().enumerate() {
                        let tree = &trees[entry.original as usize];
                        assert_eq!(entry.output as usize, entry.original as usize % 3);
                        let expected = tree.leaf_of(|f| row[f]);
                        assert_eq!(forest.leaf(layout, i, &row), (tree.value[expected as usize], expected));
                        if let Some(q) = &quantised {
                            assert_eq!(q.leaf(&forest, i, &row), (tree.value[expected as usize], expected));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn features_with_many_thresholds_take_u16_bins() {
        // 300 thresholds on feature 0: more than u8 bins hold.
        let trees: Vec<Tree> = (0..300).map(|i| stump(0, i as f32 * 0.5, i)).collect();
        let forest = HostForest::build(&trees, 1, ForestLayout::Complete);
        let q = QuantisedForest::new(&forest, &[None, None]).unwrap();
        assert!(q.wide);
        for x in [f32::NAN, -1.0, 0.0, 0.25, 0.5, 77.0, 149.5, 150.0, 1e9] {
            for (i, entry) in forest.trees.iter().enumerate() {
                let tree = &trees[entry.original as usize];
                let expected = tree.leaf_of(|_| x);
                assert_eq!(q.leaf(&forest, i, &[x, 0.0]), (tree.value[expected as usize], expected), "x={x}");
            }
        }
    }

    #[test]
    fn features_beyond_wide_bins_are_not_quantised() {
        // One threshold more than wide bins hold: the float kernels score this forest.
        let at_limit: Vec<Tree> = (0..MAX_WIDE_BINS).map(|i| stump(0, i as f32, i)).collect();
        let forest = HostForest::build(&at_limit, 1, ForestLayout::Complete);
        assert!(QuantisedForest::new(&forest, &[None]).is_some_and(|q| q.wide));
        let beyond: Vec<Tree> = (0..MAX_WIDE_BINS + 1).map(|i| stump(0, i as f32, i)).collect();
        let forest = HostForest::build(&beyond, 1, ForestLayout::Complete);
        assert!(QuantisedForest::new(&forest, &[None]).is_none());
    }

    #[test]
    fn tiles_cover_every_tree_within_the_budget() {
        let trees: Vec<Tree> = (0..40).map(|i| random_tree(i, 10, false)).collect();
        let forest = HostForest::build(&trees, 1, ForestLayout::Complete);
        let (tiles, max_nodes, max_leaves) = forest.tiles(4096, 8, 4);
        assert_eq!(tiles.first().unwrap().first, 0);
        assert_eq!(tiles.last().unwrap().end as usize, trees.len());
        assert!(tiles
            .windows(2)
            .all(|w| w[0].end == w[1].first && w[0].node_end.next_multiple_of(4) == w[1].node_begin));
        for t in &tiles {
            let bytes = (t.node_end - t.node_begin) as usize * 8 + (t.leaf_end - t.leaf_begin) as usize * 4;
            assert!(bytes <= 4096 || t.end == t.first + 1);
        }
        assert!(max_nodes * 8 + max_leaves * 4 <= 2 * 4096);
        assert_eq!(HostForest::choose(&trees), ForestLayout::Linked); // 10 random splits: deep, sparse
    }
}
