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

// Rows of the tree (rows[0..m], or 0..m when rows is null) per leaf; `leaf_of` holds each row's
// leaf id as a float.
extern "C" __global__ void refit_count(const float* leaf_of, const u32* rows, u32 m, u32* counts) {
    for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
        atomicAdd(&counts[(u32)leaf_of[rows ? rows[j] : j]], 1u);
}

// Each row's residual key into its leaf's run; `cursor` starts at each run's first slot.
extern "C" __global__ void refit_scatter(const float* leaf_of, const u32* rows, u32 m, const float* label,
                                         const float* margin, u32* cursor, u32* keys) {
    for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) {
        const u32 r = rows ? rows[j] : j;
        const u32 slot = atomicAdd(&cursor[(u32)leaf_of[r]], 1u);
        keys[slot] = order_key(label[r] - margin[r]);
    }
}

// Block `leaf` selects the rank[leaf]-th smallest key (1-based; 0: no rows or not a leaf) of the
// run keys[start[leaf] .. start[leaf] + count[leaf]] into out[leaf]: per pass, a histogram of
// the next eight bits among the keys that share the bits chosen so far.
extern "C" __global__ void refit_select(const u32* keys, const u32* start, const u32* count, const u32* rank,
                                        float* out) {
    __shared__ u32 hist[256];
    __shared__ u32 chosen, remaining;
    const u32 leaf = blockIdx.x;
    u32 k = rank[leaf];
    if (k == 0) return;
    const u32* run = keys + start[leaf];
    const u32 len = count[leaf];
    u32 prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (u32 b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        for (u32 i = threadIdx.x; i < len; i += blockDim.x) {
            const u32 key = run[i];
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            u32 below = 0, digit = 0;
            while (below + hist[digit] < k) below += hist[digit++];
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
