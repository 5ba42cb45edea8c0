//! What TreeSHAP needs of a tree on every backend: the share of a node's training cover that
//! reaches a child, and the tree's expected value (its part of the SHAP bias). The CPU walk
//! (`backend/cpu/shap.rs`) and the GPU's path layout (`backend/cuda/shap.rs`) both read these,
//! so their biases agree bit for bit.

use super::Tree;

/// The share of `node`'s cover that reaches `child` (0 when the node has no cover, as an
/// imported tree without covers may).
pub fn cover_share(tree: &Tree, node: u32, child: u32) -> f64 {
    let parent = tree.cover[node as usize] as f64;
    if parent > 0.0 {
        tree.cover[child as usize] as f64 / parent
    } else {
        0.0
    }
}

/// The cover-weighted mean of the tree's leaf values below the root: its part of the bias.
///
/// Children come after their parents (`Tree::validate`), so one backward pass over the nodes
/// sees both children of a split before the split: no recursion, whatever the depth, and each
/// node's value is the same sum, in the same order, as a recursive walk would form.
pub fn expected_value(tree: &Tree) -> f64 {
    let mut below = vec![0f64; tree.n_nodes()];
    for node in (0..tree.n_nodes() as u32).rev() {
        let n = node as usize;
        below[n] = if tree.is_leaf(node) {
            tree.value[n] as f64
        } else {
            let (l, r) = (tree.left[n], tree.right[n]);
            cover_share(tree, node, l) * below[l as usize] + cover_share(tree, node, r) * below[r as usize]
        };
    }
    below[0]
}
