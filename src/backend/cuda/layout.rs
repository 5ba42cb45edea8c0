//! The structs shared with the kernels, mirrored from `kernels/common.cuh`. Kernel arguments
//! are not type-checked at launch, so [`layout_probe`] has the CUDA compiler report these
//! layouts, and the codes passed with them, for a test to compare (`tests/cuda_kernels.rs`).

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use super::forest;
use crate::objective::{GpuGradient, Link, PairMetric};
pub use crate::tree::gradient::{GradPair, GradSum, QuantGrad};
use crate::tree::NO_CHILD;

/// This round's power-of-two gradient scales, as the kernels find them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Quantisation {
    pub g_max_bits: u32,
    pub h_max_bits: u32,
    pub g_scale: f64,
    pub h_scale: f64,
    /// Non-zero when some hessian is negative (no loss of ours produces one).
    pub negative_hessian: u32,
    pub pad: u32,
}

/// The split regularisation with this round's fixed-point units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct SplitParamsDev {
    pub reg_lambda: f64,
    pub reg_alpha: f64,
    pub gamma: f64,
    pub min_child_weight: f64,
    pub max_delta_step: f64,
    pub g_unit: f64,
    pub h_unit: f64,
}

/// A run of row-index positions (one node's rows) and the blocks that work on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RowTask {
    pub start: u32,
    pub len: u32,
    pub first_block: u32,
    pub slot: u32,
}

/// How one node's rows split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SplitRule {
    pub feature: u32,
    pub split_bin: u32,
    pub missing_bin: u32,
    pub default_left: u32,
    /// A categorical split's left-going set: bit words `category_start..+category_len` of
    /// the launch's word buffer (no words: a numeric split).
    pub category_start: u32,
    pub category_len: u32,
}

/// A split node whose children get histograms (see `plan_children`): the right child keeps
/// the parent's slot, the left child gets `left_slot`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ChildSlots {
    pub start: u32,
    pub len: u32,
    pub first_block: u32,
    pub task: u32,
    pub parent_slot: u32,
    pub left_slot: u32,
}

/// A node whose best split is wanted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct EvalTask {
    pub total: GradSum,
    pub slot: u32,
    /// Row of the feature mask, or [`NO_MASK`] when every feature may split.
    pub mask_row: u32,
    /// The node's weight bounds (monotone constraints; infinite when free).
    pub lower: f64,
    pub upper: f64,
}

pub const NO_MASK: u32 = u32::MAX;

/// Where a node's row count is, for the categorical search: known, or a child's count in the
/// last partition's `node_left`, which the kernel reads (no download before the search).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TaskRows {
    /// The count when known; the parent's rows when pending.
    pub rows: u32,
    /// The partition task whose left count decides it, when pending.
    pub task: u32,
    pub pending: u32,
    /// Pending: the right child (the parent's rows less the left count).
    pub right: u32,
}

impl TaskRows {
    /// The count at `index` of the counts the split search is given in place of the
    /// partition's (a level's row counts summed over the workers on the devices): read as a
    /// pending left child's.
    pub fn summed_at(index: u32) -> TaskRows {
        TaskRows { rows: u32::MAX, task: index, pending: 1, right: 0 }
    }
}

/// The regularisation of categorical splits (see `SplitScorer::best_categorical`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct CategoricalParams {
    pub cat_smooth: f64,
    pub cat_l2: f64,
    pub min_data_per_group: f64,
    pub max_cat_to_onehot: u32,
    pub max_cat_threshold: u32,
}

/// The best split of a node. For a categorical split `split_bin` is how many categories go
/// left: the first ones of the search's order for the node and feature.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct SplitResult {
    pub left: GradSum,
    pub gain: f64,
    pub feature: u32,
    pub split_bin: u32,
    pub default_left: u32,
    pub found: u32,
}

/// One node of a finished tree, for updating the training margins on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct TreeNode {
    pub left: u32,
    pub right: u32,
    pub feature: u32,
    pub split_bin: u32,
    pub missing_bin: u32,
    pub default_left: u32,
    pub value: f32,
    pub category_start: u32,
    pub category_len: u32,
    pub pad: u32,
}

/// A node of the complete prediction layout (`kernels/predict.cu`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct PredNode {
    /// Feature index | DEFAULT_LEFT | CATEGORICAL.
    pub word: u32,
    /// Threshold; for categorical nodes, the bits of the category set's index.
    pub threshold: f32,
}

/// A node of the linked prediction layout; leaves point at themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct LinkedNode {
    pub word: u32,
    pub threshold: f32,
    /// Left child; the right child is `left + 1`.
    pub left: u32,
    pub value: f32,
}

/// One tree of a forest laid out for prediction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PredTree {
    pub node_offset: u32,
    pub leaf_offset: u32,
    pub depth: u32,
    pub output: u32,
    pub original: u32,
    pub pad: u32,
}

/// Trees whose complete-layout nodes and leaves are copied to shared memory together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PredTile {
    pub first: u32,
    pub end: u32,
    pub node_begin: u32,
    pub node_end: u32,
    pub leaf_begin: u32,
    pub leaf_end: u32,
}

/// One lane of a warp of SHAP paths (`kernels/shap.cu`): one feature of one root-to-leaf path.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct ShapElement {
    /// The feature; `shap::NO_FEATURE` for a path's bias element and for padding lanes.
    pub feature: u32,
    /// The share of the cover that follows the path at this feature's splits.
    pub zero: f32,
    /// The path's leaf value.
    pub value: f32,
    pub output: u32,
    /// The path's first lane (bits 0-7) and length (bits 8-15); length 0 for padding.
    pub shape: u32,
    /// The path's first split on the feature: a prediction word with `shap::TAKES_LEFT`.
    pub word: u32,
    pub threshold: f32,
    /// Further splits on the feature along the path, in the launch's `ShapSplit`s.
    pub more_begin: u32,
    pub more_end: u32,
}

/// A further split of a SHAP path element on its feature.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct ShapSplit {
    pub word: u32,
    pub threshold: f32,
}

macro_rules! device_types {
    ($($t:ty),*) => {$(
        // SAFETY: plain #[repr(C)] structs of integers and floats, valid for any bits and
        // laid out as the kernels expect (checked by the layout test).
        unsafe impl DeviceRepr for $t {}
        unsafe impl ValidAsZeroBits for $t {}
    )*};
}
device_types!(
    GradPair,
    QuantGrad,
    GradSum,
    Quantisation,
    SplitParamsDev,
    RowTask,
    SplitRule,
    ChildSlots,
    EvalTask,
    TaskRows,
    CategoricalParams,
    SplitResult,
    TreeNode,
    PredNode,
    LinkedNode,
    PredTree,
    PredTile,
    ShapElement,
    ShapSplit
);

/// The kernels' argument structs, probed as the shared structs are (their `probe!` lines,
/// family by family).
macro_rules! kernel_arg_probes {
    ($probe:ident) => {
        use super::gradients::*;
        $probe!(ObjectiveRows, "ObjectiveRows", [kind, param, margin, label, weight, repeats, n, k, c]);
        $probe!(ObjectiveMaxArgs, "ObjectiveMaxArgs", [rows, q]);
        $probe!(ObjectiveQuantiseArgs, "ObjectiveQuantiseArgs", [rows, q, out, sum]);
        $probe!(GradientRows, "GradientRows", [grads, repeats, n]);
        $probe!(GradientMaxArgs, "GradientMaxArgs", [rows, q]);
        $probe!(QuantiseArgs, "QuantiseArgs", [rows, q, out]);
        $probe!(FinishQuantisationArgs, "FinishQuantisationArgs", [q, shrink_bits]);
        $probe!(SumRowsArgs, "SumRowsArgs", [grads, ridx, n, out]);
        use super::data::{BinCuts, DenseBins, SparseEntries};
        $probe!(DenseBins<u8>, "DenseBins<u8>", [bins, stride, first_row, page_rows]);
        $probe!(DenseBins<u16>, "DenseBins<u16>", [bins, stride, first_row, page_rows]);
        $probe!(DenseBins<u32>, "DenseBins<u32>", [bins, stride, first_row, page_rows]);
        $probe!(SparseEntries<u16>, "SparseEntries<u16>", [entries, row_words]);
        $probe!(SparseEntries<u32>, "SparseEntries<u32>", [entries, row_words]);
        use super::binning::*;
        $probe!(BinCuts, "BinCuts", [cuts, cut_offsets, categorical]);
        $probe!(BinColumns, "BinColumns", [columns, n_rows, n_features, stride, binning, any_present]);
        $probe!(BinColumnsArgs<u8>, "BinColumnsArgs<u8>", [b, bins, cols]);
        $probe!(BinColumnsArgs<u16>, "BinColumnsArgs<u16>", [b, bins, cols]);
        $probe!(BinColumnsArgs<u32>, "BinColumnsArgs<u32>", [b, bins, cols]);
        $probe!(CountPresentArgs, "CountPresentArgs", [columns, n_rows, n_features, row_len]);
        $probe!(PlaceColumns, "PlaceColumns", [columns, n_rows, n_features, binning, slot_offsets, row_words, row_len]);
        $probe!(PlaceColumnsArgs<u16>, "PlaceColumnsArgs<u16>", [p, entries]);
        $probe!(PlaceColumnsArgs<u32>, "PlaceColumnsArgs<u32>", [p, entries]);
        use super::columns::*;
        $probe!(Columns, "Columns", [chunks, chunk_start]);
        $probe!(
            ColumnChunk,
            "ColumnChunk",
            [values, validity, codes, n_codes, rows, row0, dtype, values_bit, validity_bit, has_missing, missing]
        );
        use super::cuts::*;
        $probe!(
            SampleRowsArgs,
            "SampleRowsArgs",
            [weights, n_rows, n_spans, span_global, span_local, seed, keep_below, count, rows]
        );
        $probe!(
            SampleValuesArgs,
            "SampleValuesArgs",
            [columns, features, n_segments, n_sample, rows, weights, keys, stride]
        );
        $probe!(SortSegmentsArgs, "SortSegmentsArgs", [keys, tmp, len, n_segments]);
        $probe!(SegmentCutsArgs, "SegmentCutsArgs", [keys, len, n_segments, budget, cuts, n_cuts, thresholds]);
        $probe!(SortRowsArgs<u16>, "SortRowsArgs<u16>", [row_len, n_rows, row_words, entries]);
        $probe!(SortRowsArgs<u32>, "SortRowsArgs<u32>", [row_len, n_rows, row_words, entries]);
        use super::histogram::*;
        $probe!(
            HistogramBuild,
            "HistogramBuild",
            [
                grads,
                ridx,
                only,
                tasks,
                n_tasks,
                slot_offsets,
                group_first_feature,
                shared_slots,
                total_slots,
                rows_per_block,
                hist
            ]
        );
        $probe!(HistogramArgs<u8>, "HistogramArgs<u8>", [rows, build]);
        $probe!(HistogramArgs<u16>, "HistogramArgs<u16>", [rows, build]);
        $probe!(HistogramArgs<u32>, "HistogramArgs<u32>", [rows, build]);
        $probe!(SparseHistogramArgs<u16>, "SparseHistogramArgs<u16>", [rows, build, group_starts]);
        $probe!(SparseHistogramArgs<u32>, "SparseHistogramArgs<u32>", [rows, build, group_starts]);
        $probe!(SlotsArgs<RowTask>, "SlotsArgs<RowTask>", [list, total_slots, hist]);
        $probe!(SlotsArgs<u32>, "SlotsArgs<u32>", [list, total_slots, hist]);
        $probe!(PlanChildrenArgs, "PlanChildrenArgs", [parents, node_left, total_slots, builds, triples, hist]);
        $probe!(
            IndexGroupsArgs<u16>,
            "IndexGroupsArgs<u16>",
            [rows, n_rows, slot_offsets, group_first_feature, n_groups, starts]
        );
        $probe!(
            IndexGroupsArgs<u32>,
            "IndexGroupsArgs<u32>",
            [rows, n_rows, slot_offsets, group_first_feature, n_groups, starts]
        );
        use super::partition::*;
        $probe!(FillIdentityArgs, "FillIdentityArgs", [ridx, n]);
        $probe!(LevelRoutes, "LevelRoutes", [ridx, tasks, n_tasks, rules, category_words]);
        $probe!(Partition, "Partition", [level, lookback, node_left, ridx_out]);
        $probe!(PartitionArgs<u8>, "PartitionArgs<u8>", [rows, part]);
        $probe!(PartitionArgs<u16>, "PartitionArgs<u16>", [rows, part]);
        $probe!(PartitionArgs<u32>, "PartitionArgs<u32>", [rows, part]);
        $probe!(PartitionColsArgs, "PartitionColsArgs", [cols, n_rows, part]);
        $probe!(SparsePartitionArgs<u16>, "SparsePartitionArgs<u16>", [rows, part, slot_offsets]);
        $probe!(SparsePartitionArgs<u32>, "SparsePartitionArgs<u32>", [rows, part, slot_offsets]);
        $probe!(CountLeft, "CountLeft", [level, rows_per_block, flags, block_left]);
        $probe!(CountLeftArgs<u8>, "CountLeftArgs<u8>", [rows, part]);
        $probe!(CountLeftArgs<u16>, "CountLeftArgs<u16>", [rows, part]);
        $probe!(CountLeftArgs<u32>, "CountLeftArgs<u32>", [rows, part]);
        $probe!(SparseCountLeftArgs<u16>, "SparseCountLeftArgs<u16>", [rows, part, slot_offsets]);
        $probe!(SparseCountLeftArgs<u32>, "SparseCountLeftArgs<u32>", [rows, part, slot_offsets]);
        $probe!(
            ScatterArgs,
            "ScatterArgs",
            [flags, ridx, tasks, n_tasks, rows_per_block, block_left, node_left, ridx_out]
        );
        $probe!(CopyRunsArgs, "CopyRunsArgs", [from, tasks, n_tasks, rows_per_block, to]);
        $probe!(TreeWalk, "TreeWalk", [n_rows, nodes, category_words, margin]);
        $probe!(AddTreeArgs<u8>, "AddTreeArgs<u8>", [rows, walk]);
        $probe!(AddTreeArgs<u16>, "AddTreeArgs<u16>", [rows, walk]);
        $probe!(AddTreeArgs<u32>, "AddTreeArgs<u32>", [rows, walk]);
        $probe!(SparseAddTreeArgs<u16>, "SparseAddTreeArgs<u16>", [rows, walk, slot_offsets]);
        $probe!(SparseAddTreeArgs<u32>, "SparseAddTreeArgs<u32>", [rows, walk, slot_offsets]);
        use super::split::*;
        $probe!(
            EvaluateFeaturesArgs,
            "EvaluateFeaturesArgs",
            [hist, total_slots, slot_offsets, categorical, tasks, masks, monotone, n_features, p, out]
        );
        $probe!(BestFeatureArgs, "BestFeatureArgs", [per_feature, n_features, n_tasks, out]);
        $probe!(
            EvaluateCategoricalArgs,
            "EvaluateCategoricalArgs",
            [
                hist,
                total_slots,
                slot_offsets,
                features,
                regions,
                region_per_task,
                tasks,
                task_rows,
                node_left,
                masks,
                n_features,
                p,
                cp,
                sort_chunk,
                sort_keys,
                sort_tags,
                out
            ]
        );
        $probe!(GatherRunsArgs, "GatherRunsArgs", [src, region_per_task, runs, offsets, out]);
        $probe!(
            EvaluateVectorArgs,
            "EvaluateVectorArgs",
            [
                hist,
                total_slots,
                slot_offsets,
                categorical,
                tasks,
                parent_score,
                units,
                masks,
                monotone,
                n_features,
                n_outputs,
                p,
                out
            ]
        );
        $probe!(
            VectorLeftSumsArgs,
            "VectorLeftSumsArgs",
            [hist, total_slots, slot_offsets, tasks, best, n_outputs, out]
        );
        $probe!(FillMissingArgs, "FillMissingArgs", [tasks, slot_offsets, total_slots, hist]);
        $probe!(NodeRowsArgs, "NodeRowsArgs", [task_rows, node_left, n, out]);
        use super::refit::*;
        $probe!(RefitCountArgs, "RefitCountArgs", [leaf_of, rows, m, n_nodes, use_shared, counts]);
        $probe!(RefitWeighArgs, "RefitWeighArgs", [leaf_of, rows, m, repeats, sums]);
        $probe!(
            RefitScatterArgs,
            "RefitScatterArgs",
            [
                leaf_of, rows, m, label, margin, repeats, unit_leaf, n_nodes, use_shared, cursor, keys, key_leaf,
                key_weight
            ]
        );
        $probe!(RadixCountArgs, "RadixCountArgs", [keys, key_leaf, m, prefix, shift, hist]);
        $probe!(RadixWeighArgs, "RadixWeighArgs", [keys, key_leaf, key_weight, m, prefix, shift, hist]);
        $probe!(RadixPickArgs<u32>, "RadixPickArgs<u32>", [hist, n_nodes, shift, prefix, remaining]);
        $probe!(RadixPickArgs<u64>, "RadixPickArgs<u64>", [hist, n_nodes, shift, prefix, remaining]);
        $probe!(RefitValuesArgs, "RefitValuesArgs", [prefix, remaining, n_nodes, out]);
        $probe!(RefitAddArgs, "RefitAddArgs", [leaf_of, values, n, margin]);
        use super::predict::*;
        $probe!(PredForest, "PredForest", [trees, n_trees, tiles, n_tiles, tile_nodes, sets, words, base]);
        $probe!(PredOutputs, "PredOutputs", [row_base, n_outputs, out, leaf_out]);
        $probe!(
            PredictArgs,
            "PredictArgs",
            [x, n, n_features, nodes, leaf_values, leaf_ids, linked, linked_ids, forest, outputs]
        );
        $probe!(
            PredictBinnedArgs<u8>,
            "PredictBinnedArgs<u8>",
            [bins, n, n_features, nodes, leaf_values, leaf_ids, forest, outputs]
        );
        $probe!(
            PredictBinnedArgs<u16>,
            "PredictBinnedArgs<u16>",
            [bins, n, n_features, nodes, leaf_values, leaf_ids, forest, outputs]
        );
        $probe!(BinRowsArgs<u8>, "BinRowsArgs<u8>", [x, n, cuts, cut_offsets, n_categories, staged_cap, bins]);
        $probe!(BinRowsArgs<u16>, "BinRowsArgs<u16>", [x, n, cuts, cut_offsets, n_categories, staged_cap, bins]);
        $probe!(FinishPredictionsArgs, "FinishPredictionsArgs", [margin, n, k, link, classes]);
        use super::evaluation::*;
        $probe!(
            MetricRows,
            "MetricRows",
            [margin, label, label_upper, weight, alphas, n_alphas, n, k, link, metric, pad]
        );
        $probe!(MetricTermsArgs, "MetricTermsArgs", [rows, sums, n_groups, pad]);
        $probe!(HalveSumsArgs, "HalveSumsArgs", [values, n, out_stride, out]);
        $probe!(AucKeysArgs, "AucKeysArgs", [rows, items, result, n_padded, pad]);
        $probe!(BitonicArgs, "BitonicArgs", [items, k, j]);
        $probe!(AucRanksArgs, "AucRanksArgs", [items, result, n, pad]);
        $probe!(
            GatherRowsArgs,
            "GatherRowsArgs",
            [x, row_stride, col_stride, n, n_features, is_f64, has_missing, missing, out]
        );
        use super::shap::ShapArgs;
        $probe!(
            ShapArgs,
            "ShapArgs",
            [x, n, elements, n_bins, bins_per_group, more, sets, words, n_features, out_width, out, tile_rows, staged]
        );
        use super::ranking::*;
        $probe!(
            LambdarankArgs,
            "LambdarankArgs",
            [
                score,
                label,
                gain,
                inv_idcg,
                discount,
                offsets,
                weight,
                top_k,
                metric,
                normalise,
                score_normalise,
                sort_capacity,
                position,
                ranked,
                sums,
                relevant,
                precision_sum,
                out
            ]
        );
    };
}

/// A kernel that stores the size of every shared struct and the offset of each of its fields,
/// as the CUDA compiler lays them out, then the value of each code and flag bit the host
/// passes to kernels (objective and link codes, node word flags), with the values Rust
/// expects. The stores compile to constants, so the kernel's PTX answers without a GPU: see
/// [`read_layout_probe`]. The probe is compiled after [`super::kernels::SOURCE`], whose
/// names it reads.
pub fn layout_probe() -> (String, Vec<(String, u64)>) {
    use std::mem::{offset_of, size_of};
    let mut body = String::new();
    let mut expected: Vec<(String, u64)> = Vec::new();
    macro_rules! probe {
        ($rust:ty, $c:literal, [$($field:ident),*]) => {
            body += &format!("  out[{}] = sizeof({});\n", expected.len(), $c);
            expected.push((format!("sizeof({})", $c), size_of::<$rust>() as u64));
            $(
                body += &format!(
                    "  out[{}] = (unsigned long long)((char*)&(({}*)base)->{} - base);\n",
                    expected.len(), $c, stringify!($field)
                );
                expected.push((format!("offset of {}.{}", $c, stringify!($field)), offset_of!($rust, $field) as u64));
            )*
        };
    }
    probe!(GradPair, "GradPair", [g, h]);
    probe!(QuantGrad, "QuantGrad", [g, h]);
    probe!(GradSum, "GradSum", [g, h]);
    probe!(Quantisation, "Quantisation", [g_max_bits, h_max_bits, g_scale, h_scale, negative_hessian, pad]);
    probe!(
        SplitParamsDev,
        "SplitParams",
        [reg_lambda, reg_alpha, gamma, min_child_weight, max_delta_step, g_unit, h_unit]
    );
    probe!(RowTask, "RowTask", [start, len, first_block, slot]);
    probe!(SplitRule, "SplitRule", [feature, split_bin, missing_bin, default_left, category_start, category_len]);
    probe!(ChildSlots, "ChildSlots", [start, len, first_block, task, parent_slot, left_slot]);
    probe!(EvalTask, "EvalTask", [total, slot, mask_row, lower, upper]);
    probe!(TaskRows, "TaskRows", [rows, task, pending, right]);
    probe!(
        CategoricalParams,
        "CategoricalParams",
        [cat_smooth, cat_l2, min_data_per_group, max_cat_to_onehot, max_cat_threshold]
    );
    probe!(SplitResult, "SplitResult", [left, gain, feature, split_bin, default_left, found]);
    probe!(
        TreeNode,
        "TreeNode",
        [left, right, feature, split_bin, missing_bin, default_left, value, category_start, category_len, pad]
    );
    probe!(PredNode, "PredNode", [word, threshold]);
    probe!(LinkedNode, "LinkedNode", [word, threshold, left, value]);
    probe!(PredTree, "PredTree", [node_offset, leaf_offset, depth, output, original, pad]);
    probe!(PredTile, "PredTile", [first, end, node_begin, node_end, leaf_begin, leaf_end]);
    probe!(ShapElement, "ShapElement", [feature, zero, value, output, shape, word, threshold, more_begin, more_end]);
    probe!(ShapSplit, "ShapSplit", [word, threshold]);
    kernel_arg_probes!(probe);
    for (name, value) in kernel_constants() {
        body += &format!("  out[{}] = (unsigned long long)({name});\n", expected.len());
        expected.push((name.to_string(), value));
    }
    let source =
        format!("extern \"C\" __global__ void layout_probe(unsigned long long* out, char* base) {{\n{body}}}\n");
    (source, expected)
}

/// Every code and constant the host passes to kernels or sizes launches by, with its value in
/// Rust, for [`layout_probe`] to compare.
fn kernel_constants() -> Vec<(&'static str, u64)> {
    let mut constants: Vec<(&'static str, u64)> = Vec::new();
    constants.extend(GpuGradient::ALL.map(|g| (g.kernel_name(), g as u64)));
    constants.extend(Link::ALL.map(|l| (l.kernel_name(), l as u64)));
    constants.extend([
        ("NO_CHILD", NO_CHILD as u64),
        ("PRED_DEFAULT_LEFT", forest::DEFAULT_LEFT as u64),
        ("PRED_CATEGORICAL", forest::CATEGORICAL as u64),
        ("PRED_FEATURE_MASK", forest::FEATURE_MASK as u64),
        ("QNODE_DEFAULT_LEFT", forest::QNODE_DEFAULT_LEFT as u64),
        ("QNODE_FEATURE_SHIFT", forest::QNODE_FEATURE_SHIFT as u64),
        ("QNODE_FEATURE", forest::QNODE_FEATURE_MASK as u64),
        ("QNODE_CATEGORICAL", forest::QNODE_CATEGORICAL as u64),
        ("SHAP_NO_FEATURE", super::shap::NO_FEATURE as u64),
        ("SHAP_TAKES_LEFT", super::shap::TAKES_LEFT as u64),
        ("REFIT_ROWS_PER_THREAD", super::refit::ROWS_PER_THREAD),
        ("RANK_PAIRWISE", PairMetric::Pairwise as u64),
        ("RANK_NDCG", PairMetric::Ndcg as u64),
        ("RANK_MAP", PairMetric::Map as u64),
        ("SORT_THREADS", super::cuts::SORT_THREADS as u64),
        ("CUT_THREADS", super::cuts::CUT_THREADS as u64),
        ("BIN_TILE_ROWS", super::binning::BIN_TILE_ROWS as u64),
        ("BIN_THREADS", super::binning::BIN_THREADS as u64),
        ("METRIC_THREADS", super::evaluation::METRIC_THREADS as u64),
        ("METRIC_GROUP", crate::metric::sum::GROUP as u64),
        ("BITONIC_TILE", super::evaluation::BITONIC_TILE as u64),
        ("BITONIC_THREADS", super::evaluation::BITONIC_THREADS as u64),
    ]);
    constants
        .extend(super::evaluation::DEVICE_METRICS.iter().enumerate().map(|(code, (_, name))| (*name, code as u64)));
    constants.extend(super::columns::DTYPES.iter().enumerate().map(|(code, (name, _))| (*name, code as u64)));
    constants
}

/// The values `layout_probe` stores, read from its PTX (`mov.u64 %rdN, value` followed by
/// `st.global.u64 [%rdM+8*i], %rdN`).
pub fn read_layout_probe(ptx: &str, n: usize) -> Result<Vec<u64>, String> {
    let start = ptx.find(".entry layout_probe").ok_or("layout_probe is missing from the PTX")?;
    let mut regs = std::collections::HashMap::new();
    let mut out = vec![None; n];
    for line in ptx[start..].lines().map(str::trim) {
        let line = line.trim_end_matches(';');
        if let Some(rest) = line.strip_prefix("mov.u64").or_else(|| line.strip_prefix("mov.b64")) {
            let mut parts = rest.split(',').map(str::trim);
            if let (Some(reg), Some(value)) = (parts.next(), parts.next()) {
                if let Ok(v) = value.parse::<u64>() {
                    regs.insert(reg.to_string(), v);
                }
            }
        } else if let Some(rest) = line.strip_prefix("st.global.u64") {
            let (addr, reg) = rest.split_once(',').ok_or("unexpected store")?;
            let addr = addr.trim().trim_start_matches('[').trim_end_matches(']');
            let offset = addr.split_once('+').map_or(Ok(0), |(_, o)| o.parse::<usize>()).map_err(|e| e.to_string())?;
            let v = *regs.get(reg.trim()).ok_or_else(|| format!("store of a non-constant: {line}"))?;
            *out.get_mut(offset / 8).ok_or("store out of range")? = Some(v);
        }
    }
    out.into_iter().enumerate().map(|(i, v)| v.ok_or_else(|| format!("value {i} was not stored"))).collect()
}
