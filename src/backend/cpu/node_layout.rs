//! The nodes CPU prediction walks, as laid out in memory (see `predict` for the two
//! layouts): the feature word both layouts share (a feature index and its flags), the linked
//! layout's 16-byte node and the complete layout's 8-byte node, which the vector walk
//! (`heap_simd`) gathers from by offset.

/// The feature word's flag: missing values go left.
pub(super) const DEFAULT_LEFT: u32 = 1 << 31;
/// The feature word's flag: a categorical split (the linked layout only).
pub(super) const CATEGORICAL: u32 = 1 << 30;
/// The feature word's bits below the flags: the feature index.
pub(super) const FEATURE_MASK: u32 = (1 << 30) - 1;

/// A node of the linked layout.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub(super) struct FlatNode {
    /// Feature index and the flags above.
    pub feature: u32,
    /// Threshold (`+inf` for leaves, so every value goes "left").
    pub threshold: f32,
    /// Left child (right is left + 1); a leaf's own index.
    pub left: u32,
    /// Index into `cat_sets` for categorical splits.
    pub cat: u32,
}

/// A node of the complete layout: a leaf's padding and the last level always go left. The
/// vector walk reads node `i`'s feature word at 32-bit offset `2i` and its threshold at
/// `2i + 1`, hence `repr(C)` and no other fields.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(super) struct HeapNode {
    /// Feature index and the DEFAULT_LEFT flag.
    pub feature: u32,
    pub threshold: f32,
}
