//! One regression tree as flat arrays (struct of arrays), indexed by node id; node 0 is the
//! root. This is the stored form; prediction builds a cache-friendlier copy from it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Child id of a leaf.
pub const NO_CHILD: u32 = u32::MAX;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    pub left: Vec<u32>,
    pub right: Vec<u32>,
    /// Split feature (index into the model's features); 0 for leaves.
    pub feature: Vec<u32>,
    /// Numeric splits send `x < threshold` left.
    pub threshold: Vec<f32>,
    /// The same test on bins: `bin <= split_bin` goes left.
    pub split_bin: Vec<u32>,
    /// Where missing values go.
    pub default_left: Vec<bool>,
    /// Categorical splits: the bitset of left-going category codes is
    /// `category_words[category_start..category_start + category_len]`; `category_len` is 0
    /// for numeric splits.
    pub category_start: Vec<u32>,
    pub category_len: Vec<u32>,
    pub category_words: Vec<u32>,
    /// Leaf output (learning rate applied); for inner nodes, the value the node would have as a leaf.
    pub value: Vec<f32>,
    /// Loss reduction of the split (0 for leaves).
    pub gain: Vec<f32>,
    /// Hessian sum of the training rows that reached the node.
    pub cover: Vec<f32>,
}

/// The category code of a present value: its integer part; negative values match no
/// category (as in XGBoost and LightGBM), and so go where unlisted categories go.
#[inline]
pub fn category_code(x: f32) -> u32 {
    if x >= 0.0 {
        x as u32
    } else {
        u32::MAX
    }
}

/// A split to apply to a leaf.
pub struct SplitSpec<'a> {
    pub feature: u32,
    pub threshold: f32,
    pub split_bin: u32,
    pub default_left: bool,
    pub left_categories: &'a [u32],
    pub gain: f32,
}

impl Tree {
    /// A tree with only a root leaf.
    pub fn leaf(value: f32, cover: f32) -> Self {
        let mut t = Tree::default();
        t.push_leaf(value, cover);
        t
    }

    fn push_leaf(&mut self, value: f32, cover: f32) -> u32 {
        self.left.push(NO_CHILD);
        self.right.push(NO_CHILD);
        self.feature.push(0);
        self.threshold.push(0.0);
        self.split_bin.push(0);
        self.default_left.push(false);
        self.category_start.push(0);
        self.category_len.push(0);
        self.value.push(value);
        self.gain.push(0.0);
        self.cover.push(cover);
        (self.left.len() - 1) as u32
    }

    /// Turns leaf `node` into a split with two new leaves; returns their ids.
    pub fn split(&mut self, node: u32, s: &SplitSpec, left: (f32, f32), right: (f32, f32)) -> (u32, u32) {
        let n = node as usize;
        debug_assert!(self.is_leaf(node));
        let l = self.push_leaf(left.0, left.1);
        let r = self.push_leaf(right.0, right.1);
        self.left[n] = l;
        self.right[n] = r;
        self.feature[n] = s.feature;
        self.threshold[n] = s.threshold;
        self.split_bin[n] = s.split_bin;
        self.default_left[n] = s.default_left;
        self.gain[n] = s.gain;
        if !s.left_categories.is_empty() {
            let max = *s.left_categories.iter().max().unwrap();
            let words = max as usize / 32 + 1;
            let start = self.category_words.len();
            self.category_words.resize(start + words, 0);
            for &c in s.left_categories {
                self.category_words[start + c as usize / 32] |= 1 << (c % 32);
            }
            self.category_start[n] = start as u32;
            self.category_len[n] = words as u32;
            self.threshold[n] = 0.0;
        }
        (l, r)
    }

    /// Splits leaf `node` as `from` splits its node `at`, with the same children (values and
    /// covers); returns the new children's ids.
    pub fn split_as(&mut self, node: u32, from: &Tree, at: u32) -> (u32, u32) {
        let a = at as usize;
        let words = &from.category_words[from.category_start[a] as usize..][..from.category_len[a] as usize];
        let left_categories: Vec<u32> =
            (0..words.len() as u32 * 32).filter(|&c| words[c as usize / 32] & (1 << (c % 32)) != 0).collect();
        let spec = SplitSpec {
            feature: from.feature[a],
            threshold: from.threshold[a],
            split_bin: from.split_bin[a],
            default_left: from.default_left[a],
            left_categories: &left_categories,
            gain: from.gain[a],
        };
        let (l, r) = (from.left[a] as usize, from.right[a] as usize);
        self.split(node, &spec, (from.value[l], from.cover[l]), (from.value[r], from.cover[r]))
    }

    /// Whether `other` has the same nodes and splits (values, gains and covers aside): the
    /// trees of a vector-leaf round do.
    pub fn same_splits(&self, other: &Tree) -> bool {
        self.left == other.left
            && self.right == other.right
            && self.feature == other.feature
            && self.threshold == other.threshold
            && self.split_bin == other.split_bin
            && self.default_left == other.default_left
            && self.category_start == other.category_start
            && self.category_len == other.category_len
            && self.category_words == other.category_words
    }

    pub fn n_nodes(&self) -> usize {
        self.left.len()
    }

    #[inline]
    pub fn is_leaf(&self, node: u32) -> bool {
        self.left[node as usize] == NO_CHILD
    }

    #[inline]
    pub fn is_categorical(&self, node: u32) -> bool {
        self.category_len[node as usize] > 0
    }

    /// Whether category `code` is in the left set of categorical split `node`.
    #[inline]
    pub fn category_goes_left(&self, node: u32, code: u32) -> bool {
        let n = node as usize;
        let word = (code / 32) as usize;
        word < self.category_len[n] as usize
            && self.category_words[self.category_start[n] as usize + word] & (1 << (code % 32)) != 0
    }

    /// The child a raw feature value goes to (NaN is missing; categories as codes).
    #[inline]
    pub fn next(&self, node: u32, x: f32) -> u32 {
        let n = node as usize;
        let left = if x.is_nan() {
            self.default_left[n]
        } else if self.is_categorical(node) {
            self.category_goes_left(node, category_code(x))
        } else {
            x < self.threshold[n]
        };
        if left {
            self.left[n]
        } else {
            self.right[n]
        }
    }

    /// The child a binned value goes to; `missing_bin` is the feature's missing bin id.
    #[inline]
    pub fn next_binned(&self, node: u32, bin: u32, missing_bin: u32) -> u32 {
        let n = node as usize;
        let left = if bin == missing_bin {
            self.default_left[n]
        } else if self.is_categorical(node) {
            self.category_goes_left(node, bin)
        } else {
            bin <= self.split_bin[n]
        };
        if left {
            self.left[n]
        } else {
            self.right[n]
        }
    }

    /// The leaf reached by a row whose feature `f` reads `value(f)`.
    #[inline]
    pub fn leaf_of(&self, value: impl Fn(usize) -> f32) -> u32 {
        let mut node = 0;
        while !self.is_leaf(node) {
            node = self.next(node, value(self.feature[node as usize] as usize));
        }
        node
    }

    /// Each leaf's depth (a lone root has depth 0). Children come after their parents
    /// (`validate`), so one forward pass gives every node its depth: no recursion, whatever
    /// the depth.
    pub fn leaf_depths(&self) -> impl Iterator<Item = usize> + '_ {
        let mut depth = vec![0usize; self.n_nodes()];
        for n in 0..self.n_nodes() {
            if self.left[n] != NO_CHILD {
                for c in [self.left[n], self.right[n]] {
                    depth[c as usize] = depth[n] + 1;
                }
            }
        }
        (0..self.n_nodes()).filter(|&n| self.left[n] == NO_CHILD).map(move |n| depth[n])
    }

    /// Depth of the deepest leaf (a lone root has depth 0).
    pub fn depth(&self) -> usize {
        self.leaf_depths().max().unwrap_or(0)
    }

    /// Checks that the arrays agree in length, children point forward within the tree (so
    /// every walk ends), features exist, and category sets lie inside `category_words`.
    pub fn validate(&self, n_features: usize) -> Result<()> {
        let n = self.left.len();
        let lengths = [
            self.right.len(),
            self.feature.len(),
            self.threshold.len(),
            self.split_bin.len(),
            self.default_left.len(),
            self.category_start.len(),
            self.category_len.len(),
            self.value.len(),
            self.gain.len(),
            self.cover.len(),
        ];
        if n == 0 || lengths.iter().any(|&l| l != n) {
            return Err(Error::model("tree arrays are empty or differ in length"));
        }
        for i in 0..n {
            let (l, r) = (self.left[i], self.right[i]);
            if (l == NO_CHILD) != (r == NO_CHILD) {
                return Err(Error::model(format!("node {i} has exactly one child")));
            }
            if l != NO_CHILD {
                if l as usize <= i || r as usize <= i || l as usize >= n || r as usize >= n {
                    return Err(Error::model(format!(
                        "node {i} has children {l} and {r} outside the tree or before it"
                    )));
                }
                if self.feature[i] as usize >= n_features {
                    return Err(Error::model(format!(
                        "node {i} splits on feature {} of {n_features}",
                        self.feature[i]
                    )));
                }
                if self.category_len[i] == 0 && !self.threshold[i].is_finite() {
                    // Trained and imported thresholds are finite; a NaN would send every value
                    // right on the CPU and have no place among the GPU's sorted thresholds.
                    return Err(Error::model(format!("node {i} has the non-finite threshold {}", self.threshold[i])));
                }
                let (start, len) = (self.category_start[i] as usize, self.category_len[i] as usize);
                if start.checked_add(len).is_none_or(|end| end > self.category_words.len()) {
                    return Err(Error::model(format!("node {i} has a category set outside the tree's category words")));
                }
            }
            if !self.value[i].is_finite() {
                return Err(Error::model(format!("node {i} has a non-finite value")));
            }
        }
        // A proper tree: every node but the root is the child of exactly one split (so a walk
        // is finite and the flattened layouts hold each node once).
        let mut parents = vec![0u8; n];
        for i in 0..n {
            for c in [self.left[i], self.right[i]] {
                if c != NO_CHILD && (c as usize) < n {
                    parents[c as usize] = parents[c as usize].saturating_add(1);
                }
            }
        }
        if parents[0] != 0 || parents[1..].iter().any(|&p| p != 1) {
            return Err(Error::model(
                "nodes are not a tree: some node has no parent, two parents, or is the root's child",
            ));
        }
        Ok(())
    }
}
