// Leaf refits of the L1-type losses on the device, for unit weights (src/backend/cuda/refit.rs):
// after a tree grows, each leaf's value is the k-th smallest residual (label - margin) of its
// rows, k = max(1, ceil(alpha * count)) as src/objective/mod.rs's `quantile` takes it. Rows are
// counted per leaf, their residuals scattered into one run per leaf (in any order: a selection
// does not depend on it), and one block per leaf selects its k-th key eight bits at a time.

// f32's total order (Rust's `total_cmp`, which the CPU's selection uses) as unsigned integers:
// negative values' magnitude bits flipped, then the sign bit flipped.
__device__ __forceinline__ u32 order_key(float v) {
    const int i = __float_as_int(v);
    return (u32)(i ^ (int)(((u32)(i >> 31)) >> 1)) ^ 0x80000000u;
}

__device__ __forceinline__ float from_order_key(u32 key) {
    const int i = (int)(key ^ 0x80000000u);
    return __int_as_float(i ^ (int)(((u32)(i >> 31)) >> 1));
}

// Per-node counters live in shared memory when the tree is small enough (`use_shared`, with
// n_nodes words of dynamic shared memory): rows sharing a leaf then contend in their block, and
// each block adds its totals to global memory once per node.

// Rows of the tree (rows[0..m], or 0..m when rows is null) per leaf; `leaf_of` holds each row's
// leaf id as a float.
extern "C" __global__ void refit_count(const float* leaf_of, const u32* rows, u32 m, u32 n_nodes, u32 use_shared,
                                       u32* counts) {
    extern __shared__ u32 local[];
    if (!use_shared) {
        for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
            atomicAdd(&counts[(u32)leaf_of[rows ? rows[j] : j]], 1u);
        return;
    }
    for (u32 b = threadIdx.x; b < n_nodes; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
        atomicAdd(&local[(u32)leaf_of[rows ? rows[j] : j]], 1u);
    __syncthreads();
    for (u32 b = threadIdx.x; b < n_nodes; b += blockDim.x)
        if (local[b]) atomicAdd(&counts[b], local[b]);
}

#define REFIT_ROWS_PER_THREAD 8

// Each row's residual key into its leaf's run; `cursor` starts at each run's first slot. With
// shared counters, a block takes a tile of rows, ranks them within their leaves in shared
// memory, reserves each leaf's slots with one global atomic, then writes.
extern "C" __global__ void refit_scatter(const float* leaf_of, const u32* rows, u32 m, const float* label,
                                         const float* margin, u32 n_nodes, u32 use_shared, u32* cursor,
                                         u32* keys) {
    extern __shared__ u32 local[];
    if (!use_shared) {
        for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) {
            const u32 r = rows ? rows[j] : j;
            const u32 slot = atomicAdd(&cursor[(u32)leaf_of[r]], 1u);
            keys[slot] = order_key(label[r] - margin[r]);
        }
        return;
    }
    const u32 tile = blockDim.x * REFIT_ROWS_PER_THREAD;
    for (u32 base = blockIdx.x * tile; base < m; base += gridDim.x * tile) {
        for (u32 b = threadIdx.x; b < n_nodes; b += blockDim.x) local[b] = 0;
        __syncthreads();
        u32 leaf[REFIT_ROWS_PER_THREAD], rank[REFIT_ROWS_PER_THREAD];
        u32 key[REFIT_ROWS_PER_THREAD];
        for (u32 t = 0; t < REFIT_ROWS_PER_THREAD; ++t) {
            const u32 j = base + t * blockDim.x + threadIdx.x;
            if (j < m) {
                const u32 r = rows ? rows[j] : j;
                leaf[t] = (u32)leaf_of[r];
                key[t] = order_key(label[r] - margin[r]);
                rank[t] = atomicAdd(&local[leaf[t]], 1u);
            }
        }
        __syncthreads();
        for (u32 b = threadIdx.x; b < n_nodes; b += blockDim.x)
            if (local[b]) local[b] = atomicAdd(&cursor[b], local[b]);
        __syncthreads();
        for (u32 t = 0; t < REFIT_ROWS_PER_THREAD; ++t) {
            const u32 j = base + t * blockDim.x + threadIdx.x;
            if (j < m) keys[local[leaf[t]] + rank[t]] = key[t];
        }
        __syncthreads();
    }
}

#define REFIT_SELECT_WARPS 8

// Block `leaf` (of REFIT_SELECT_WARPS warps) selects the rank[leaf]-th smallest key (1-based; 0:
// no rows or not a leaf) of the run keys[start[leaf] .. start[leaf] + count[leaf]] into
// out[leaf]: per pass, a histogram of the next eight bits among the keys that share the bits
// chosen so far. Keys of one leaf are alike in their high bits, so each warp counts into its
// own histogram and lanes with the same digit add once.
extern "C" __global__ void refit_select(const u32* keys, const u32* start, const u32* count, const u32* rank,
                                        float* out) {
    __shared__ u32 hist[REFIT_SELECT_WARPS][256];
    __shared__ u32 chosen, remaining;
    const u32 leaf = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    u32 k = rank[leaf];
    if (k == 0) return;
    const u32* run = keys + start[leaf];
    const u32 len = count[leaf];
    u32 prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (u32 b = threadIdx.x; b < REFIT_SELECT_WARPS * 256; b += blockDim.x) (&hist[0][0])[b] = 0;
        __syncthreads();
        // Every lane runs every round, so that the whole warp takes part in the match.
        for (u32 round = 0; round < len; round += blockDim.x) {
            const u32 i = round + threadIdx.x;
            const u32 key = i < len ? run[i] : 0;
            const bool hit = i < len && (key & mask) == prefix;
            const u32 digit = hit ? (key >> shift) & 255u : 256u;
            const u32 peers = __match_any_sync(0xffffffffu, digit);
            if (hit && lane == (u32)(__ffs(peers) - 1)) atomicAdd(&hist[warp][digit], (u32)__popc(peers));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            u32 below = 0, digit = 0;
            for (;; ++digit) {
                u32 here = 0;
                for (u32 w = 0; w < REFIT_SELECT_WARPS; ++w) here += hist[w][digit];
                if (below + here >= k) break;
                below += here;
            }
            chosen = prefix | (digit << shift);
            remaining = k - below;
        }
        __syncthreads();
        prefix = chosen;
        k = remaining;
        mask |= 255u << shift;
        __syncthreads();
    }
    if (threadIdx.x == 0) out[leaf] = from_order_key(prefix);
}
