// Prediction from raw feature values (src/backend/cuda/forest.rs lays the forest out,
// src/backend/cuda/predict/ launches these kernels).
//
// A block scores ROWS = 4 * blockDim.x rows: thread i walks rows i, i + blockDim.x, ... The
// rows' features are staged in shared memory column-major (feature f of block row r at
// f * ROWS + r), so the 32 lanes of a warp, which hold 32 consecutive rows, read 32 different
// banks whatever features their nodes ask for. Trees are walked in a fixed number of steps
// (their depth) without exit tests, four rows per thread at a time for independent loads in
// flight.
//
// Two forest layouts (chosen per model on the host):
//  * complete: a tree of depth D is 2^(D+1)-1 eight-byte nodes, node i's children at 2i+1 and
//    2i+2; leaves above the last level pass rows straight down (threshold +inf, missing goes
//    left). Trees are copied a tile at a time into shared memory, so every block reads the
//    whole forest from L2 once per ROWS rows and every step is a shared-memory load.
//  * linked: 16-byte nodes with explicit children (siblings adjacent), read through the
//    read-only cache; for deep, sparse trees that a complete layout would pad enormously.
// Trees are ordered output-major, so a thread sums one output's trees in the model's order
// into one register: the sums are the CPU predictor's, operation for operation.

#define PRED_DEFAULT_LEFT 0x80000000u
#define PRED_CATEGORICAL 0x40000000u
#define PRED_FEATURE_MASK 0x3fffffffu

// A node of the complete layout. Categorical nodes keep the index of their category set in
// `threshold`'s bits.
struct PredNode {
    u32 word;  // feature | flags
    float threshold;
};

// A node of the linked layout; a leaf points at itself, with threshold +inf.
struct LinkedNode {
    u32 word;
    float threshold;
    u32 left;  // right child is left + 1
    float value;
};

// One tree, in output-major order.
struct PredTree {
    u32 node_offset;  // first node (in its layout's array)
    u32 leaf_offset;  // complete layout: first leaf value (and leaf id) of the last level
    u32 depth;
    u32 output;  // which output the tree adds to
    u32 original;  // index in the model (for leaf output)
    u32 pad;
};

// Trees [first, end) whose complete-layout nodes [node_begin, node_end) and leaves
// [leaf_begin, leaf_end) are copied to shared memory together.
struct PredTile {
    u32 first;
    u32 end;
    u32 node_begin;
    u32 node_end;
    u32 leaf_begin;
    u32 leaf_end;
};

// The kernels' argument structs (each kernel takes one, by value), mirrored in
// src/backend/cuda/predict/ and checked by the layout probe.

// The forest as both kernel families read it after their nodes and leaves.
struct PredForest {
    const PredTree* trees;
    u32 n_trees;
    const PredTile* tiles;
    u32 n_tiles;
    u32 tile_nodes;
    const uint2* sets;
    const u32* words;
    const float* base;
};

// Where scores go: margins into `out` (starting from `row_base`, or the model's `base` when
// null), or each row's leaf ids into `leaf_out` when it is set.
struct PredOutputs {
    const float* row_base;
    u32 n_outputs;
    float* out;
    u32* leaf_out;
};

// predict_complete* and predict_linked*: raw values, `n` rows column-major.
struct PredictArgs {
    const float* x;
    u32 n;
    u32 n_features;
    const PredNode* nodes;
    const float* leaf_values;
    const u32* leaf_ids;
    const LinkedNode* linked;
    const u32* linked_ids;
    PredForest forest;
    PredOutputs outputs;
};

// predict_binned* on u8 or u16 bins (bin_rows' output), quantised nodes.
template <typename Bin>
struct PredictBinnedArgs {
    const Bin* bins;
    u32 n;
    u32 n_features;
    const u32* nodes;
    const float* leaf_values;
    const u32* leaf_ids;
    PredForest forest;
    PredOutputs outputs;
};

template <typename Bin>
struct BinRowsArgs {
    const float* x;
    u32 n;
    const float* cuts;
    const u32* cut_offsets;
    const u32* n_categories;
    u32 staged_cap;
    Bin* bins;
};

struct FinishPredictionsArgs {
    float* margin;
    u32 n;
    u32 k;
    u32 link;
    u32* classes;
};

// Whether a present value goes left at a categorical node: its integer code is in the set.
__device__ __forceinline__ bool category_left(float x, u32 set_index, const uint2* __restrict__ sets,
                                              const u32* __restrict__ words) {
    const u32 code = x >= 0.0f ? (u32)x : 0xffffffffu;  // float to u32 saturates, as in Rust
    const uint2 set = __ldg(&sets[set_index]);
    return (code >> 5) < set.y && ((__ldg(&words[set.x + (code >> 5)]) >> (code & 31)) & 1u);
}

template <bool CAT>
__device__ __forceinline__ bool goes_left(u32 word, float threshold, float x, const uint2* __restrict__ sets,
                                          const u32* __restrict__ words) {
    if (CAT && (word & PRED_CATEGORICAL)) {
        return isnan(x) ? (word & PRED_DEFAULT_LEFT) != 0 : category_left(x, __float_as_uint(threshold), sets, words);
    }
    // NaN fails the comparison, so it goes left exactly when the node says missing goes left.
    return (x < threshold) | (isnan(x) & ((word & PRED_DEFAULT_LEFT) != 0));
}

// The starting margin of (row, output): the row's own base margin when given, else the model's.
__device__ __forceinline__ float start_margin(const float* __restrict__ row_base, const float* __restrict__ base,
                                              u32 row, u32 output, u32 n_outputs) {
    return row_base ? row_base[(size_t)row * n_outputs + output] : base[output];
}

// Rows each thread scores at once: independent walks whose loads overlap.
#define PRED_ROWS_PER_THREAD 4

// Scores rows [row0 + k * grid_rows ...] of `x` (column-major, `n` rows, feature f at f * n).
// Writes margins (row-major, n_outputs per row) or, when leaf_out is set, the leaf id each row
// reaches in each tree (row-major, n_trees per row).
template <bool LINKED, bool CAT, bool SHARED_ROWS>
__device__ void predict_rows(const float* __restrict__ x, u32 n, u32 n_features, const PredNode* __restrict__ nodes,
                             const float* __restrict__ leaf_values, const u32* __restrict__ leaf_ids,
                             const LinkedNode* __restrict__ linked, const u32* __restrict__ linked_ids,
                             const PredTree* __restrict__ trees, u32 n_trees, const PredTile* __restrict__ tiles,
                             u32 n_tiles, u32 tile_nodes, const uint2* __restrict__ sets,
                             const u32* __restrict__ words, const float* __restrict__ base,
                             const float* __restrict__ row_base, u32 n_outputs, float* __restrict__ out,
                             u32* __restrict__ leaf_out) {
    constexpr u32 R = PRED_ROWS_PER_THREAD;
    extern __shared__ __align__(16) unsigned char smem[];
    const u32 rows_per_block = R * blockDim.x;
    const u32 rows_bytes = SHARED_ROWS ? ((n_features * rows_per_block * 4 + 15) & ~15u) : 0;
    float* s_rows = (float*)smem;
    PredNode* s_nodes = (PredNode*)(smem + rows_bytes);
    float* s_leaves = (float*)(s_nodes + tile_nodes);

    for (u32 row0 = blockIdx.x * rows_per_block; row0 < n; row0 += gridDim.x * rows_per_block) {
        // This thread's rows: threadIdx.x + j * blockDim.x, so a warp's lanes hold consecutive
        // rows (conflict-free column-major reads).
        u32 row[R];
#pragma unroll
        for (u32 j = 0; j < R; ++j) row[j] = row0 + threadIdx.x + j * blockDim.x;
        __syncthreads();  // the previous rows are done with shared memory
        if (SHARED_ROWS) {
            for (u32 i = threadIdx.x; i < n_features * rows_per_block; i += blockDim.x) {
                const u32 f = i / rows_per_block, r = i - f * rows_per_block;
                s_rows[i] = row0 + r < n ? x[(size_t)f * n + row0 + r] : 0.0f;
            }
        }
        // Feature f of this thread's row j.
        auto value = [&](u32 f, u32 j) -> float {
            if (SHARED_ROWS) return s_rows[f * rows_per_block + threadIdx.x + j * blockDim.x];
            return row[j] < n ? x[(size_t)f * n + row[j]] : 0.0f;
        };
        u32 output = trees[0].output;
        float acc[R];
#pragma unroll
        for (u32 j = 0; j < R; ++j)
            acc[j] = (!leaf_out && row[j] < n) ? start_margin(row_base, base, row[j], output, n_outputs) : 0.0f;
        for (u32 tile = 0; tile < (LINKED ? 1u : n_tiles); ++tile) {
            u32 first = 0, end = n_trees, node_begin = 0, leaf_begin = 0;
            if (!LINKED) {
                const PredTile tl = tiles[tile];
                first = tl.first;
                end = tl.end;
                node_begin = tl.node_begin;
                leaf_begin = tl.leaf_begin;
                __syncthreads();  // everyone is done with the previous tile
                const uint2* src = (const uint2*)(nodes + tl.node_begin);
                uint2* dst = (uint2*)s_nodes;
                for (u32 i = threadIdx.x; i < tl.node_end - tl.node_begin; i += blockDim.x) dst[i] = __ldg(&src[i]);
                for (u32 i = threadIdx.x; i < tl.leaf_end - tl.leaf_begin; i += blockDim.x)
                    s_leaves[i] = __ldg(&leaf_values[tl.leaf_begin + i]);
                __syncthreads();
            }
            for (u32 t = first; t < end; ++t) {
                const PredTree tree = trees[t];
                if (!leaf_out && tree.output != output) {
                    // Output-major order: this output's trees are all summed.
#pragma unroll
                    for (u32 j = 0; j < R; ++j) {
                        if (row[j] < n) {
                            out[(size_t)row[j] * n_outputs + output] = acc[j];
                            acc[j] = start_margin(row_base, base, row[j], tree.output, n_outputs);
                        }
                    }
                    output = tree.output;
                }
                u32 at[R];
                float v[R];
                u32 id[R];
                if (LINKED) {
#pragma unroll
                    for (u32 j = 0; j < R; ++j) at[j] = tree.node_offset;
                    for (u32 d = 0; d < tree.depth; ++d) {
#pragma unroll
                        for (u32 j = 0; j < R; ++j) {
                            const LinkedNode a = linked[at[j]];
                            const bool l = goes_left<CAT>(a.word, a.threshold, value(a.word & PRED_FEATURE_MASK, j), sets, words);
                            at[j] = a.left + !l;
                        }
                    }
#pragma unroll
                    for (u32 j = 0; j < R; ++j) {
                        v[j] = linked[at[j]].value;
                        if (leaf_out) id[j] = linked_ids[at[j]];
                    }
                } else {
                    const PredNode* tn = s_nodes + (tree.node_offset - node_begin);
#pragma unroll
                    for (u32 j = 0; j < R; ++j) at[j] = 0;
                    for (u32 d = 0; d < tree.depth; ++d) {
#pragma unroll
                        for (u32 j = 0; j < R; ++j) {
                            const PredNode a = tn[at[j]];
                            const bool l = goes_left<CAT>(a.word, a.threshold, value(a.word & PRED_FEATURE_MASK, j), sets, words);
                            at[j] = 2 * at[j] + 2 - l;
                        }
                    }
                    const u32 last = (1u << tree.depth) - 1;  // first node of the last level
                    const float* lv = s_leaves + (tree.leaf_offset - leaf_begin);
#pragma unroll
                    for (u32 j = 0; j < R; ++j) {
                        v[j] = lv[at[j] - last];
                        if (leaf_out) id[j] = leaf_ids[tree.leaf_offset + at[j] - last];
                    }
                }
#pragma unroll
                for (u32 j = 0; j < R; ++j) {
                    if (leaf_out) {
                        if (row[j] < n) leaf_out[(size_t)row[j] * n_trees + tree.original] = id[j];
                    } else {
                        acc[j] += v[j];
                    }
                }
            }
        }
        if (!leaf_out) {
#pragma unroll
            for (u32 j = 0; j < R; ++j)
                if (row[j] < n) out[(size_t)row[j] * n_outputs + output] = acc[j];
        }
    }
}

#define PREDICT_KERNEL(NAME, LINKED, CAT, SHARED_ROWS)                                                   \
    extern "C" __global__ void NAME(const PredictArgs a) {                                               \
        const PredForest& f = a.forest;                                                                  \
        const PredOutputs& o = a.outputs;                                                                \
        predict_rows<LINKED, CAT, SHARED_ROWS>(a.x, a.n, a.n_features, a.nodes, a.leaf_values, a.leaf_ids, \
                                               a.linked, a.linked_ids, f.trees, f.n_trees, f.tiles,      \
                                               f.n_tiles, f.tile_nodes, f.sets, f.words, f.base,         \
                                               o.row_base, o.n_outputs, o.out, o.leaf_out);              \
    }

PREDICT_KERNEL(predict_complete, false, false, true)
PREDICT_KERNEL(predict_complete_cat, false, true, true)
PREDICT_KERNEL(predict_complete_global_rows, false, false, false)
PREDICT_KERNEL(predict_complete_cat_global_rows, false, true, false)
PREDICT_KERNEL(predict_linked, true, false, true)
PREDICT_KERNEL(predict_linked_cat, true, true, true)
PREDICT_KERNEL(predict_linked_global_rows, true, false, false)
PREDICT_KERNEL(predict_linked_cat_global_rows, true, true, false)

// The objective's link (LINK_* in common.cuh) on margins (row-major, k per row), in place, as
// src/objective/descriptor.rs (Link::apply) computes it. With `classes` set, writes each row's
// class instead (k == 1: margin > 0; else the first largest margin).
// Every link code has its own case; the default traps as a backstop only (a trap poisons the
// context): the host checks the code before launching, and that check is the error path.
__device__ __forceinline__ void finish_predictions_body(float* __restrict__ margin, u32 n, u32 k, u32 link,
                                                        u32* __restrict__ classes) {
    for (u32 row = blockIdx.x * blockDim.x + threadIdx.x; row < n; row += gridDim.x * blockDim.x) {
        float* m = margin + (size_t)row * k;
        if (classes) {
            u32 best = 0;
            if (k == 1) {
                best = m[0] > 0.0f;
            } else {
                for (u32 c = 1; c < k; ++c) best = m[c] > m[best] ? c : best;
            }
            classes[row] = best;
            continue;
        }
        switch (link) {
            case LINK_IDENTITY:
                break;
            case LINK_LOGISTIC:
                for (u32 c = 0; c < k; ++c) m[c] = portable_sigmoidf(m[c]);
                break;
            case LINK_EXP:
                for (u32 c = 0; c < k; ++c) m[c] = portable_expf(m[c]);
                break;
            case LINK_HINGE:
                m[0] = m[0] > 0.0f ? 1.0f : 0.0f;
                break;
            case LINK_SOFTMAX: {
                float top = m[0];
                for (u32 c = 1; c < k; ++c) top = fmaxf(top, m[c]);
                float sum = 0.0f;
                for (u32 c = 0; c < k; ++c) {
                    m[c] = portable_expf(m[c] - top);
                    sum += m[c];
                }
                for (u32 c = 0; c < k; ++c) m[c] /= sum;
                break;
            }
            default:
                __trap();
        }
    }
}

extern "C" __global__ void finish_predictions(const FinishPredictionsArgs a) {
    finish_predictions_body(a.margin, a.n, a.k, a.link, a.classes);
}

// ---- Quantised traversal -------------------------------------------------------------------
// For forests whose every feature has at most 32,766 distinct thresholds: each value becomes
// the number of the feature's thresholds at or below it (a u8 bin when every feature has at
// most 254, as our models and histogram-trained XGBoost/LightGBM models mostly do, else 16 bits),
// so `x < threshold_k` is exactly `bin <= k`. Nodes shrink to four bytes and rows to one or two
// bytes per feature: tiles of trees and a block's rows take a fraction of the shared memory,
// so more blocks fit on an SM and each reads the forest from L2 once per more rows.

// A quantised node (src/backend/cuda/forest.rs): bit 0 missing-goes-left, bits 1..14 the
// feature, bit 15 categorical, bits 16..31 the split bin plus the missing bit (or the index of
// the category set).
#define QNODE_DEFAULT_LEFT 0x1u
#define QNODE_FEATURE_SHIFT 1
#define QNODE_FEATURE 0x3fffu
#define QNODE_CATEGORICAL 0x8000u

// Bins of `n` rows (column-major, feature f at f * n) against each feature's sorted thresholds
// cuts[cut_offsets[f] .. cut_offsets[f + 1]] (categorical features: their category count).
// u8 bins reserve 255 for missing and 254 for categories no set holds; u16 bins 0xffff and 0xfffe.
// Blocks are laid out (row blocks, features): a block bins rows of one feature, so the feature's
// thresholds are read once into shared memory (when at most `staged_cap` of them) and the
// binary search runs there instead of through L1 (deep forests have thousands per feature).
template <typename Bin>
__device__ void bin_rows(const float* __restrict__ x, u32 n, const float* __restrict__ cuts,
                         const u32* __restrict__ cut_offsets, const u32* __restrict__ n_categories,
                         u32 staged_cap, Bin* __restrict__ bins) {
    extern __shared__ float staged[];
    const u32 missing = (Bin)~0u, other = missing - 1;
    const u32 f = blockIdx.y;
    const u32 n_cats = n_categories[f];
    const u32 first = cut_offsets[f], m = cut_offsets[f + 1] - first;
    const float* c = cuts + first;
    if (!n_cats && m <= staged_cap) {
        for (u32 i = threadIdx.x; i < m; i += blockDim.x) staged[i] = __ldg(&c[i]);
        __syncthreads();
        c = staged;
    }
    const float* col = x + (size_t)f * n;
    Bin* out = bins + (size_t)f * n;
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x) {
        const float v = col[r];
        u32 b;
        if (isnan(v)) {
            b = missing;
        } else if (n_cats) {
            const u32 code = v >= 0.0f ? (u32)v : 0xffffffffu;
            b = code < n_cats ? code : other;
        } else {
            // The number of thresholds <= v; the lanes of a warp take nearly the same steps.
            u32 lo = 0, len = m;
            while (len > 0) {
                const u32 half = len >> 1;
                const bool right = c[lo + half] <= v;
                lo = right ? lo + half + 1 : lo;
                len = right ? len - half - 1 : half;
            }
            b = lo;
        }
        out[r] = (Bin)b;
    }
}

extern "C" __global__ void bin_rows_u8(const BinRowsArgs<u8> a) {
    bin_rows<u8>(a.x, a.n, a.cuts, a.cut_offsets, a.n_categories, a.staged_cap, a.bins);
}

extern "C" __global__ void bin_rows_u16(const BinRowsArgs<u16> a) {
    bin_rows<u16>(a.x, a.n, a.cuts, a.cut_offsets, a.n_categories, a.staged_cap, a.bins);
}

// A staged bin as the walk compares it: u8 bins as they are, 16-bit bins sign-extended, so that
// the missing bin 0xffff reads as 0xffffffff and wraps to 0 when a step adds missing-goes-left
// without masking (real bins are below 0x7ffe: see MAX_WIDE_BINS in src/backend/cuda/forest.rs).
__device__ __forceinline__ u32 read_bin(const u8* s, u32 i) { return s[i]; }
__device__ __forceinline__ u32 read_bin(const u16* s, u32 i) { return (u32)(int)((const short*)s)[i]; }

template <bool CAT, typename Bin>
__device__ __forceinline__ bool qgoes_left(u32 node, u32 b, const uint2* __restrict__ sets, const u32* __restrict__ words) {
    const u32 split = node >> 16;
    const u32 missing = sizeof(Bin) == 1 ? 0xffu : 0xffffffffu;
    if (CAT && (node & QNODE_CATEGORICAL)) {
        if (b == missing) return node & QNODE_DEFAULT_LEFT;
        // Codes no set holds (0xfe, or 0xfffe read as 0xfffffffe) index past every set.
        const uint2 set = __ldg(&sets[split]);
        return (b >> 5) < set.y && ((__ldg(&words[set.x + (b >> 5)]) >> (b & 31)) & 1u);
    }
    // With missing going left, the missing bin wraps to 0 and the split was stored one higher;
    // padding (missing going left, a split of 0xffff) sends every bin left.
    if (sizeof(Bin) == 1) return ((b + (node & QNODE_DEFAULT_LEFT)) & missing) <= split;
    return b + (node & QNODE_DEFAULT_LEFT) <= split;
}

// Asynchronous 16-byte copies from global to shared memory (sm_80+; plain copies before).
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
#if __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
#else
    *(uint4*)dst = __ldg((const uint4*)src);
#endif
}

__device__ __forceinline__ void copies_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most `N` committed groups of this thread's copies are still in flight.
template <int N>
__device__ __forceinline__ void copies_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Starts copying tile `tl`'s nodes (16-byte aligned and padded, see
// src/backend/cuda/forest.rs) into shared memory. Leaves stay in global memory: a row reads
// one per tree, through the cache, and leaving them out of the tiles lets more blocks share
// an SM.
__device__ __forceinline__ void load_tile_async(const PredTile& tl, const u32* __restrict__ nodes, u32* s_nodes) {
    const u32 node_vectors = (tl.node_end - tl.node_begin + 3) / 4;
    for (u32 i = threadIdx.x; i < node_vectors; i += blockDim.x) copy16_async(s_nodes + 4 * i, nodes + tl.node_begin + 4 * i);
    copies_commit();
}

// As predict_rows with the complete layout, on bins (column-major, n rows). Rows are staged in
// shared memory with a stride of ROWS + 4 bins per feature, which spreads the features of
// neighbouring lanes over different banks. Tiles of trees are double-buffered: the next tile
// is copied asynchronously while the rows walk the current one; leaves are read from global
// memory.
template <bool CAT, typename Bin, u32 R>
__device__ void predict_binned_rows(const Bin* __restrict__ bins, u32 n, u32 n_features, const u32* __restrict__ nodes,
                                    const float* __restrict__ leaf_values, const u32* __restrict__ leaf_ids,
                                    const PredTree* __restrict__ trees, u32 n_trees,
                                    const PredTile* __restrict__ tiles, u32 n_tiles, u32 tile_nodes,
                                    const uint2* __restrict__ sets, const u32* __restrict__ words,
                                    const float* __restrict__ base, const float* __restrict__ row_base,
                                    u32 n_outputs, float* __restrict__ out, u32* __restrict__ leaf_out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const u32 rows_per_block = R * blockDim.x;
    const u32 stride = rows_per_block + 4;
    const u32 rows_bytes = (n_features * stride * (u32)sizeof(Bin) + 15) & ~15u;
    Bin* s_bins = (Bin*)smem;
    // Two tile buffers of `tile_nodes` nodes (a multiple of 4).
    u32* s_nodes[2];
    s_nodes[0] = (u32*)(smem + rows_bytes);
    s_nodes[1] = s_nodes[0] + tile_nodes;

    for (u32 row0 = blockIdx.x * rows_per_block; row0 < n; row0 += gridDim.x * rows_per_block) {
        u32 row[R];
#pragma unroll
        for (u32 j = 0; j < R; ++j) row[j] = row0 + threadIdx.x + j * blockDim.x;
        __syncthreads();  // the previous rows are done with shared memory
        load_tile_async(tiles[0], nodes, s_nodes[0]);
        for (u32 i = threadIdx.x; i < n_features * rows_per_block; i += blockDim.x) {
            const u32 f = i / rows_per_block, r = i - f * rows_per_block;
            s_bins[f * stride + r] = row0 + r < n ? bins[(size_t)f * n + row0 + r] : (Bin)~0u;
        }
        u32 output = trees[0].output;
        float acc[R];
#pragma unroll
        for (u32 j = 0; j < R; ++j)
            acc[j] = (!leaf_out && row[j] < n) ? start_margin(row_base, base, row[j], output, n_outputs) : 0.0f;
        for (u32 tile = 0; tile < n_tiles; ++tile) {
            const PredTile tl = tiles[tile];
            const u32 buf = tile & 1;
            if (tile + 1 < n_tiles) {
                load_tile_async(tiles[tile + 1], nodes, s_nodes[buf ^ 1]);
                copies_wait<1>();  // this tile's copies are done, the next one's may still run
            } else {
                copies_wait<0>();
            }
            __syncthreads();  // every thread's copies of this tile (and the rows) are visible
            for (u32 t = tl.first; t < tl.end; ++t) {
                const PredTree tree = trees[t];
                if (!leaf_out && tree.output != output) {
#pragma unroll
                    for (u32 j = 0; j < R; ++j) {
                        if (row[j] < n) {
                            out[(size_t)row[j] * n_outputs + output] = acc[j];
                            acc[j] = start_margin(row_base, base, row[j], tree.output, n_outputs);
                        }
                    }
                    output = tree.output;
                }
                const u32* tn = s_nodes[buf] + (tree.node_offset - tl.node_begin);
                u32 at[R];
#pragma unroll
                for (u32 j = 0; j < R; ++j) at[j] = 0;
                for (u32 d = 0; d < tree.depth; ++d) {
#pragma unroll
                    for (u32 j = 0; j < R; ++j) {
                        const u32 node = tn[at[j]];
                        const u32 b = read_bin(s_bins, ((node >> QNODE_FEATURE_SHIFT) & QNODE_FEATURE) * stride + threadIdx.x + j * blockDim.x);
                        at[j] = 2 * at[j] + 2 - qgoes_left<CAT, Bin>(node, b, sets, words);
                    }
                }
                const u32 first_leaf = tree.leaf_offset - ((1u << tree.depth) - 1);
#pragma unroll
                for (u32 j = 0; j < R; ++j) {
                    if (leaf_out) {
                        if (row[j] < n) leaf_out[(size_t)row[j] * n_trees + tree.original] = leaf_ids[first_leaf + at[j]];
                    } else {
                        acc[j] += __ldg(&leaf_values[first_leaf + at[j]]);
                    }
                }
            }
            __syncthreads();  // done with this buffer before the copy after next overwrites it
        }
        if (!leaf_out) {
#pragma unroll
            for (u32 j = 0; j < R; ++j)
                if (row[j] < n) out[(size_t)row[j] * n_outputs + output] = acc[j];
        }
    }
}

#define PREDICT_BINNED_KERNEL(NAME, CAT, BIN, R)                                                             \
    extern "C" __global__ void NAME(const PredictBinnedArgs<BIN> a) {                                        \
        const PredForest& f = a.forest;                                                                      \
        const PredOutputs& o = a.outputs;                                                                    \
        predict_binned_rows<CAT, BIN, R>(a.bins, a.n, a.n_features, a.nodes, a.leaf_values, a.leaf_ids,      \
                                         f.trees, f.n_trees, f.tiles, f.n_tiles, f.tile_nodes, f.sets,       \
                                         f.words, f.base, o.row_base, o.n_outputs, o.out, o.leaf_out);       \
    }

// Four rows per thread (eight measured slower on an H100: docs/gpu-notes.md).
PREDICT_BINNED_KERNEL(predict_binned, false, u8, PRED_ROWS_PER_THREAD)
PREDICT_BINNED_KERNEL(predict_binned_cat, true, u8, PRED_ROWS_PER_THREAD)
PREDICT_BINNED_KERNEL(predict_binned_u16, false, u16, PRED_ROWS_PER_THREAD)
PREDICT_BINNED_KERNEL(predict_binned_cat_u16, true, u16, PRED_ROWS_PER_THREAD)

// ---------------------------------------------------------------------------------------------
// Rows the caller holds in device memory (a cupy array, a torch tensor): float32 or float64,
// element (r, f) at x[r * row_stride + f * col_stride] for any strides (C or Fortran order,
// slices, negative steps). They become the column-major f32 rows the kernels above read, each
// value as FeatureColumn::read gives it on the host (src/data/column.rs): float64 rounded to
// the nearest float32, infinities and the extreme floats clamped to +-FINITE_LIMIT, NaN kept,
// and the model's `missing` value, when it has one, read as NaN. A block transposes a tile of
// 32 rows x 32 features through shared memory, reading along whichever index has the smaller
// stride, so that both the reads and the column-major writes are coalesced.
struct GatherRowsArgs {
    const u8* x;
    i64 row_stride;
    i64 col_stride;
    u32 n;
    u32 n_features;
    u32 is_f64;
    u32 has_missing;
    float missing;
    float* out;
};

#define GATHER_TILE 32

extern "C" __global__ void gather_rows(const GatherRowsArgs a) {
    __shared__ float tile[GATHER_TILE][GATHER_TILE + 1];
    const u32 r0 = blockIdx.x * GATHER_TILE, f0 = blockIdx.y * GATHER_TILE;
    const i64 rs = a.row_stride < 0 ? -a.row_stride : a.row_stride;
    const i64 cs = a.col_stride < 0 ? -a.col_stride : a.col_stride;
    const bool rows_inner = rs <= cs;
    for (u32 j = threadIdx.y; j < GATHER_TILE; j += blockDim.y) {
        const u32 r = r0 + (rows_inner ? threadIdx.x : j);
        const u32 f = f0 + (rows_inner ? j : threadIdx.x);
        if (r < a.n && f < a.n_features) {
            const i64 at = (i64)r * a.row_stride + (i64)f * a.col_stride;
            float v = a.is_f64 ? (float)((const double*)a.x)[at] : ((const float*)a.x)[at];
            v = clamp_finite(v);
            if (a.has_missing && v == a.missing) v = nan_value();
            tile[f - f0][r - r0] = v;
        }
    }
    __syncthreads();
    for (u32 j = threadIdx.y; j < GATHER_TILE; j += blockDim.y) {
        const u32 f = f0 + j, r = r0 + threadIdx.x;
        if (r < a.n && f < a.n_features) a.out[(size_t)f * a.n + r] = tile[j][threadIdx.x];
    }
}
