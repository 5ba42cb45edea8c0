// Compressed rows for mostly-missing data (the LibSVM kind): each row keeps only its present
// values, as (feature << 16 | bin) words sorted by feature, padded with NO_ENTRY to the
// longest row (ELLPACK). Memory then follows the present values, not rows x features.
// Missing values are absent, so a node's missing-value sums are its total minus the present
// sums (seed 000, "Missing values"): fill_missing writes them before a split search.

#define NO_ENTRY 0xffffffffu

// A staged block of mostly-null columns arrives as its present values only: `rows[i]` and
// `vals[i]` for i < n_present, column f's at col_start[f]..col_start[f + 1] (a column's part is
// sized by its valid rows; slots its NaN values left unused hold the row NO_ENTRY). Each value
// is binned and put straight into its row, at the next free entry of that row (`row_len`
// counts them), so no block of rows x features is ever formed; sort_rows then puts each
// row's entries in feature order.
extern "C" __global__ void place_present(const u32* rows, const float* vals, u32 n_present, const u32* col_start,
                                         u32 n_features, u32 row0, const float* cuts, const u32* cut_offsets,
                                         const u32* categorical, u32 row_stride, u32* row_len, u32* entries) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n_present; i += gridDim.x * blockDim.x) {
        if (rows[i] == NO_ENTRY) continue;
        // The column holding entry i: the last f with col_start[f] <= i.
        u32 lo = 0, hi = n_features;
        while (hi - lo > 1) {
            const u32 mid = (lo + hi) / 2;
            if (col_start[mid] <= i) lo = mid; else hi = mid;
        }
        const u32 row = row0 + rows[i];
        const u32 bin = value_bin(vals[i], lo, cuts, cut_offsets, categorical);
        // The host sized the stride by the longest row's present values: k < row_stride.
        const u32 k = atomicAdd(&row_len[row], 1u);
        if (k < row_stride) entries[(u64)row * row_stride + k] = (lo << 16) | bin;
    }
}

// One thread per row: its entries sorted by feature (each feature appears once, so the order
// is unique whatever order place_present wrote them in), the rest padded with NO_ENTRY.
extern "C" __global__ void sort_rows(const u32* row_len, u32 n_rows, u32 row_stride, u32* entries) {
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += gridDim.x * blockDim.x) {
        u32* e = entries + (u64)r * row_stride;
        const u32 len = min(row_len[r], row_stride);
        for (u32 i = 1; i < len; ++i) {
            const u32 x = e[i];
            u32 j = i;
            for (; j > 0 && e[j - 1] > x; --j) e[j] = e[j - 1];
            e[j] = x;
        }
        for (u32 k = len; k < row_stride; ++k) e[k] = NO_ENTRY;
    }
}

// Where each feature group's entries start in each row (`starts[row * n_groups + g]`), so
// that a histogram block reads only its group's part of a row rather than the row up to it.
extern "C" __global__ void index_groups(const u32* entries, u32 n_rows, u32 row_stride, const u32* group_first_feature,
                                        u32 n_groups, u16* starts) {
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += gridDim.x * blockDim.x) {
        const u32* e = entries + (u64)r * row_stride;
        u32 k = 0;
        for (u32 g = 0; g < n_groups; ++g) {
            const u32 f0 = group_first_feature[g];
            while (k < row_stride && (e[k] >> 16) < f0) ++k;
            starts[(u64)r * n_groups + g] = (u16)k;
        }
    }
}

// A compressed row's entries four at a time (rows are padded to a multiple of four entries,
// 16-byte aligned): one load instead of four, and a warp's loads touch a quarter as many
// sectors per entry.
__device__ __forceinline__ uint4 entries_at(const u32* row, u32 k) { return ((const uint4*)row)[k]; }

// The bin of feature `f` in a compressed row, or `missing` when the row has no value for it
// (entries are sorted by feature, and NO_ENTRY sorts after every feature).
__device__ __forceinline__ u32 sparse_bin(const u32* row, u32 row_stride, u32 f, u32 missing) {
    for (u32 k = 0; k < row_stride / 4; ++k) {
        const uint4 v = entries_at(row, k);
        const u32 e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if ((e[i] >> 16) > f) return missing;
            if ((e[i] >> 16) == f) return e[i] & 0xffffu;
        }
    }
    return missing;
}

// As histogram.cu's build_histograms, over compressed rows (the same histogram layouts). With
// several feature groups, `group_starts` (index_groups) says where a row's part of this
// block's group begins and ends; with one group it is not read.
extern "C" __global__ void histogram_sparse(const u32* entries, u32 row_stride, const QuantGrad* grads,
                                            const u32* ridx, const RowTask* tasks, u32 n_tasks,
                                            const u32* slot_offsets, const u32* group_first_feature,
                                            u32 shared_slots, u32 total_slots, u32 rows_per_block, GradSum* hist,
                                            const u16* group_starts) {
    extern __shared__ int sparse_shared[];
    const u32 g = blockIdx.y, n_groups = gridDim.y;
    const u32 f0 = group_first_feature[g], f1 = group_first_feature[g + 1];
    const RowTask task = tasks[find_task(tasks, n_tasks, blockIdx.x)];
    const GroupHistogram hg = start_group_histogram(slot_offsets, f0, f1, shared_slots, sparse_shared,
                                                    hist + (u64)task.slot * total_slots);
    const u32 begin = (blockIdx.x - task.first_block) * rows_per_block;
    const u32 end = min(begin + rows_per_block, task.len);
    for (u32 p = begin + threadIdx.x; p < end; p += blockDim.x) {
        const u32 row = ridx[task.start + p];
        const QuantGrad q = grads[row];
        if (q.g == 0 && q.h == 0) continue;
        const u32* r = entries + (u64)row * row_stride;
        const u16* at = group_starts + (u64)row * n_groups;
        const u32 k0 = n_groups > 1 ? at[g] : 0;
        const u32 k1 = n_groups > 1 && g + 1 < n_groups ? at[g + 1] : row_stride;
        // Whole 16-byte loads from the one holding entry k0; entries of other groups and
        // NO_ENTRY (feature 0xffff) padding are skipped.
        for (u32 k = k0 / 4; 4 * k < k1; ++k) {
            const uint4 v = entries_at(r, k);
            const u32 e[4] = {v.x, v.y, v.z, v.w};
            bool past = false;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const u32 f = e[i] >> 16;
                past = past || f >= f1;
                if (past || f < f0) continue;
                if (hg.n_shared == 0) hg.add_global(f - f0, e[i] & 0xffffu, q);
                else hg.add_shared(f - f0, e[i] & 0xffffu, q);
            }
            if (past) break;
        }
    }
    if (hg.n_shared == 0) return;
    __syncthreads();
    hg.flush();
}

// Grid (n_features, n_tasks): each feature's missing slot = node total - its present bins.
extern "C" __global__ void fill_missing(const EvalTask* tasks, const u32* slot_offsets, u32 total_slots,
                                        GradSum* hist) {
    __shared__ i64 sum_g[32], sum_h[32];
    const u32 f = blockIdx.x;
    const EvalTask task = tasks[blockIdx.y];
    GradSum* h = hist + (u64)task.slot * total_slots + slot_offsets[f];
    const u32 n_bins = slot_offsets[f + 1] - slot_offsets[f] - 1;
    i64 g = 0, hh = 0;
    for (u32 b = threadIdx.x; b < n_bins; b += blockDim.x) {
        g += h[b].g;
        hh += h[b].h;
    }
    for (int o = 16; o > 0; o /= 2) {
        g += __shfl_xor_sync(0xffffffffu, g, o);
        hh += __shfl_xor_sync(0xffffffffu, hh, o);
    }
    if ((threadIdx.x & 31) == 0) {
        sum_g[threadIdx.x / 32] = g;
        sum_h[threadIdx.x / 32] = hh;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        i64 tg = 0, th = 0;
        for (u32 w = 0; w < blockDim.x / 32; ++w) {
            tg += sum_g[w];
            th += sum_h[w];
        }
        h[n_bins].g = task.total.g - tg;
        h[n_bins].h = task.total.h - th;
    }
}

// Rows of the sparse layout for count_left and add_tree (kernels/partition.cu).
struct SparseRows {
    const u32* entries;
    u32 row_stride;
    __device__ __forceinline__ u32 bin(u32 row, u32 feature, u32 missing_bin) const {
        return sparse_bin(entries + (u64)row * row_stride, row_stride, feature, missing_bin);
    }
};

extern "C" __global__ void count_left_sparse(const u32* entries, u32 row_stride, const u32* ridx,
                                             const RowTask* tasks, u32 n_tasks, const SplitRule* rules,
                                             const u32* category_words, u32 rows_per_block, u8* flags,
                                             u32* block_left) {
    count_left(SparseRows{entries, row_stride}, ridx, tasks, n_tasks, rules, category_words, rows_per_block, flags,
               block_left);
}

extern "C" __global__ void add_tree_sparse(const u32* entries, u32 row_stride, u32 n_rows, const TreeNode* nodes,
                                           const u32* category_words, float* margin) {
    add_tree(SparseRows{entries, row_stride}, n_rows, nodes, category_words, margin);
}
