// Compressed rows for mostly-missing data (the LibSVM kind): each row keeps only its present
// values, as their histogram slots (`slot_offsets[feature] + bin`, XGBoost's global bin
// index), sorted, so in feature order. An entry is 16 bits when every slot fits (with 0xffff
// left for padding), else 32. Row r's entries fill the 16-byte words row_words[r] ..
// row_words[r + 1] (padded with NONE to whole words, read a word a load): memory follows the
// present values, not rows x features, nor the longest row.
// Missing values are absent, so a node's missing-value sums are its total minus the present
// sums (seed 000, "Missing values"): fill_missing writes them before a split search.

template <typename E>
struct Entry {
    static constexpr u32 NONE = (E)~0u;           // padding: after every slot
    static constexpr u32 PER_WORD = 16 / sizeof(E);  // entries a 16-byte load brings
    // The entries of 16-byte word w of `entries`, in order.
    static __device__ __forceinline__ void load(const E* entries, u64 w, u32 (&e)[PER_WORD]) {
        unpack(((const uint4*)entries)[w], e);
    }
    // The entries of a 16-byte word already loaded, in order.
    static __device__ __forceinline__ void unpack(const uint4 v, u32 (&e)[PER_WORD]) {
        const u32 words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (u32 i = 0; i < 4; ++i) {
            if constexpr (sizeof(E) == 2) {
                e[2 * i] = words[i] & 0xffffu;
                e[2 * i + 1] = words[i] >> 16;
            } else {
                e[i] = words[i];
            }
        }
    }
};

// One thread per row: its entries sorted (each feature appears once, so the order is unique
// whatever order place_columns wrote them in), the rest of its words padded with NONE.
template <typename E>
__device__ void sort_rows(const u32* row_len, u32 n_rows, const u32* row_words, E* entries) {
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += gridDim.x * blockDim.x) {
        E* e = entries + (u64)row_words[r] * Entry<E>::PER_WORD;
        const u32 room = (row_words[r + 1] - row_words[r]) * Entry<E>::PER_WORD;
        const u32 len = min(row_len[r], room);
        for (u32 i = 1; i < len; ++i) {
            const E x = e[i];
            u32 j = i;
            for (; j > 0 && e[j - 1] > x; --j) e[j] = e[j - 1];
            e[j] = x;
        }
        for (u32 k = len; k < room; ++k) e[k] = (E)Entry<E>::NONE;
    }
}

// Where each feature group's entries start in each row, counted from the row's first entry
// (`starts[row * n_groups + g]`), so that a histogram block reads only its group's part of a
// row rather than the row up to it.
template <typename E>
__device__ void index_groups(const E* entries, u32 n_rows, const u32* row_words, const u32* slot_offsets,
                             const u32* group_first_feature, u32 n_groups, u16* starts) {
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += gridDim.x * blockDim.x) {
        const E* e = entries + (u64)row_words[r] * Entry<E>::PER_WORD;
        const u32 room = (row_words[r + 1] - row_words[r]) * Entry<E>::PER_WORD;
        u32 k = 0;
        for (u32 g = 0; g < n_groups; ++g) {
            const u32 first_slot = slot_offsets[group_first_feature[g]];
            while (k < room && e[k] < first_slot) ++k;
            starts[(u64)r * n_groups + g] = (u16)k;
        }
    }
}

// A feature group's histogram for compressed rows: an entry is its slot, so the group's
// slots are one run (first .. first + n) and sum in shared memory at slot - first, with no
// per-feature layout; a group too wide for shared memory sums in global memory.
struct SlotHistogram {
    int* acc_g;
    int* acc_h;
    u32 first;
    u32 n_shared;  // 0: a global group
    GradSum* out;

    __device__ __forceinline__ void add(u32 slot, QuantGrad q) const {
        if (n_shared == 0) {
            atomicAdd((u64*)&out[slot].g, (u64)(i64)q.g);
            atomicAdd((u64*)&out[slot].h, (u64)(i64)q.h);
        } else {
            atomicAdd(&acc_g[slot - first], q.g);
            atomicAdd(&acc_h[slot - first], q.h);
        }
    }

    // As GroupHistogram::flush (kernels/histogram.cu): the node's only block stores.
    __device__ void flush(bool sole) const {
        for (u32 i = threadIdx.x; i < n_shared; i += blockDim.x) {
            const int g = acc_g[i], h = acc_h[i];
            if (sole) {
                const GradSum sum = {(i64)g, (i64)h};
                out[first + i] = sum;
                continue;
            }
            if (g != 0) atomicAdd((u64*)&out[first + i].g, (u64)(i64)g);
            if (h != 0) atomicAdd((u64*)&out[first + i].h, (u64)(i64)h);
        }
    }
};

// Rows a thread of histogram_sparse holds at once (their loads in flight together).
#define SPARSE_ROWS_AT_ONCE 4

// Whether word `w` of a row whose entries fill words w0..w1 still holds entries of the group,
// which ends before entry k1 of the row (`per` entries a word).
__device__ __forceinline__ bool holds_group(u32 w, u32 w0, u32 w1, u32 k1, u32 per) {
    return w < w1 && (w - w0) * per < k1;
}

// As histogram.cu's build_histograms, over compressed rows. With several feature groups,
// `group_starts` (index_groups) says where a row's part of this block's group begins and
// ends; with one group it is not read.
template <typename E>
__device__ void histogram_sparse(const E* entries, const u32* row_words, const QuantGrad* grads, const u32* ridx,
                                 const RowTask* tasks, u32 n_tasks, const u32* slot_offsets,
                                 const u32* group_first_feature, u32 shared_slots, u32 total_slots,
                                 u32 rows_per_block, GradSum* hist, const u16* group_starts) {
    extern __shared__ int sparse_shared[];
    constexpr u32 PER = Entry<E>::PER_WORD;
    const u32 g = blockIdx.y, n_groups = gridDim.y;
    const u32 lo = slot_offsets[group_first_feature[g]], hi = slot_offsets[group_first_feature[g + 1]];
    const RowTask task = tasks[find_task(tasks, n_tasks, blockIdx.x)];
    const u32 begin = (blockIdx.x - task.first_block) * rows_per_block;
    if (begin >= task.len) return;  // reserved for half the parent's rows; the child has fewer
    SlotHistogram hg;
    hg.first = lo;
    hg.n_shared = hi - lo <= shared_slots ? hi - lo : 0;
    hg.acc_g = sparse_shared;
    hg.acc_h = sparse_shared + hg.n_shared;
    hg.out = hist + (u64)task.slot * total_slots;
    for (u32 i = threadIdx.x; i < 2 * hg.n_shared; i += blockDim.x) sparse_shared[i] = 0;
    __syncthreads();
    const u32 end = min(begin + rows_per_block, task.len);
    // Each thread takes SPARSE_ROWS_AT_ONCE rows at a time and issues their loads together
    // (index and gradient, then word range and group bounds, then first words): one row's
    // loads are a chain of three dependent reads, and one chain at a time left warps waiting.
    constexpr u32 R = SPARSE_ROWS_AT_ONCE;
    for (u32 p0 = begin + threadIdx.x; p0 < end; p0 += R * blockDim.x) {
        u32 row[R], w0[R], w[R], w1[R], k1[R];
        QuantGrad q[R];
#pragma unroll
        for (u32 u = 0; u < R; ++u) {
            const u32 p = p0 + u * blockDim.x;
            row[u] = p < end ? ridx[task.start + p] : 0;
            q[u] = p < end ? grads[row[u]] : QuantGrad{0, 0};
        }
#pragma unroll
        for (u32 u = 0; u < R; ++u) {
            // No words for rows past the end or without gradient.
            const bool live = q[u].g != 0 || q[u].h != 0;
            w0[u] = live ? row_words[row[u]] : 0;
            w1[u] = live ? row_words[row[u] + 1] : 0;
            const u16* at = group_starts + (u64)row[u] * n_groups;
            const u32 k0 = live && n_groups > 1 ? at[g] : 0;
            k1[u] = live && n_groups > 1 && g + 1 < n_groups ? at[g + 1] : (w1[u] - w0[u]) * PER;
            w[u] = w0[u] + k0 / PER;  // the word holding entry k0
        }
        // The rows' first words, loaded together and kept packed (4 registers a row).
        uint4 first[R];
#pragma unroll
        for (u32 u = 0; u < R; ++u) {
            if (holds_group(w[u], w0[u], w1[u], k1[u], PER)) first[u] = ((const uint4*)entries)[w[u]];
        }
        // Whole 16-byte words of entries k0 .. k1; entries of other groups and the padding
        // (NONE, after every slot) are skipped.
#pragma unroll
        for (u32 u = 0; u < R; ++u) {
            for (bool at_first = true; holds_group(w[u], w0[u], w1[u], k1[u], PER); ++w[u], at_first = false) {
                u32 e[PER];
                if (at_first) Entry<E>::unpack(first[u], e);
                else Entry<E>::load(entries, w[u], e);
                bool past = false;
#pragma unroll
                for (u32 i = 0; i < PER; ++i) {
                    past = past || e[i] >= hi;
                    if (!past && e[i] >= lo) hg.add(e[i], q[u]);
                }
                if (past) break;
            }
        }
    }
    if (hg.n_shared == 0) return;
    __syncthreads();
    hg.flush(task.len <= rows_per_block);
}

// Grid (n_features, n_tasks): each feature's missing slot = node total - its present bins.
// fill_missing's arguments (src/backend/cuda/split.rs: FillMissingArgs).
struct FillMissingArgs {
    const EvalTask* tasks;
    const u32* slot_offsets;
    u32 total_slots;
    GradSum* hist;
};

extern "C" __global__ void fill_missing(const FillMissingArgs a) {
    const EvalTask* tasks = a.tasks;
    const u32* slot_offsets = a.slot_offsets;
    const u32 total_slots = a.total_slots;
    GradSum* hist = a.hist;
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

// Rows of the sparse layout for count_left and add_tree (kernels/partition.cu): the bin of
// feature f is the row's entry within f's slots, less their first, or `missing_bin` when the
// row has none (entries are sorted, and padding comes after every slot).
template <typename E>
struct SparseRows {
    const E* entries;
    const u32* row_words;
    const u32* slot_offsets;
    __device__ __forceinline__ u32 bin(u32 row, u32 feature, u32 missing_bin) const {
        const u32 lo = slot_offsets[feature], hi = slot_offsets[feature + 1];
        const u32 w1 = row_words[row + 1];
        for (u32 w = row_words[row]; w < w1; ++w) {
            u32 e[Entry<E>::PER_WORD];
            Entry<E>::load(entries, w, e);
#pragma unroll
            for (u32 i = 0; i < Entry<E>::PER_WORD; ++i) {
                if (e[i] >= hi) return missing_bin;
                if (e[i] >= lo) return e[i] - lo;
            }
        }
        return missing_bin;
    }
    __device__ __forceinline__ bool holds(u32 /*row*/) const { return true; }
    __device__ __forceinline__ void narrow(const u32* /*run*/, u32& /*begin*/, u32& /*end*/) const {}
};

// The argument structs of the compressed rows' kernels (src/backend/cuda/histogram.rs).
template <typename E>
struct IndexGroupsArgs {
    SparseEntries<E> rows;
    u32 n_rows;
    const u32* slot_offsets;
    const u32* group_first_feature;
    u32 n_groups;
    u16* starts;
};

// The dense build's, and each row's first entry of each feature group.
template <typename E>
struct SparseHistogramArgs {
    SparseEntries<E> rows;
    HistogramBuild build;
    const u16* group_starts;
};

// The partition's and the margin update's, with the histogram slots a feature's entries lie in.
template <typename E>
struct SparseCountLeftArgs {
    SparseEntries<E> rows;
    CountLeft part;
    const u32* slot_offsets;
};

template <typename E>
struct SparsePartitionArgs {
    SparseEntries<E> rows;
    Partition part;
    const u32* slot_offsets;
};

template <typename E>
struct SparseAddTreeArgs {
    SparseEntries<E> rows;
    TreeWalk walk;
    const u32* slot_offsets;
};

template <typename E>
struct SortRowsArgs {
    const u32* row_len;
    u32 n_rows;
    const u32* row_words;
    E* entries;
};

// The kernels of compressed rows, for 16- and 32-bit entries (`_s16`, `_s32`).
#define SPARSE_KERNELS(E, NAME)                                                                                  \
    extern "C" __global__ void sort_rows_##NAME(const SortRowsArgs<E> a) {                                      \
        sort_rows<E>(a.row_len, a.n_rows, a.row_words, a.entries);                                              \
    }                                                                                                           \
    extern "C" __global__ void index_groups_##NAME(const IndexGroupsArgs<E> a) {                                 \
        index_groups<E>(a.rows.entries, a.n_rows, a.rows.row_words, a.slot_offsets, a.group_first_feature,       \
                        a.n_groups, a.starts);                                                                  \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(1024) histogram_##NAME(const SparseHistogramArgs<E> a) {        \
        const HistogramBuild& b = a.build;                                                                       \
        histogram_sparse<E>(a.rows.entries, a.rows.row_words, b.grads, b.ridx, b.tasks, b.n_tasks,               \
                            b.slot_offsets, b.group_first_feature, b.shared_slots, b.total_slots,               \
                            b.rows_per_block, b.hist, a.group_starts);                                          \
    }                                                                                                           \
    extern "C" __global__ void count_left_##NAME(const SparseCountLeftArgs<E> a) {                                \
        count_left(SparseRows<E>{a.rows.entries, a.rows.row_words, a.slot_offsets}, a.part);                      \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(ONE_PASS_THREADS)                                               \
        partition_##NAME(const SparsePartitionArgs<E> a) {                                                       \
        partition_level(SparseRows<E>{a.rows.entries, a.rows.row_words, a.slot_offsets}, a.part);                 \
    }                                                                                                           \
    extern "C" __global__ void add_tree_##NAME(const SparseAddTreeArgs<E> a) {                                   \
        add_tree(SparseRows<E>{a.rows.entries, a.rows.row_words, a.slot_offsets}, a.walk.n_rows, a.walk.nodes,   \
                 a.walk.category_words, a.walk.margin);                                                          \
    }

SPARSE_KERNELS(u16, s16)
SPARSE_KERNELS(u32, s32)
