// Leaf refits of the L1-type losses on the device (src/backend/cuda/refit.rs): after a tree
// grows, each leaf's value is the k-th smallest residual (label - margin) of its rows,
// k = max(1, ceil(alpha * count)) as src/objective/mod.rs's `quantile` takes it. Rows are
// counted per leaf, their residuals scattered into one run per leaf (in any order: a selection
// does not depend on it), and every leaf's k-th key is selected eight bits at a time, each pass
// over all keys at once. With whole sample weights a row of weight w counts as w rows (its
// key's weight beside it, sums in 64 bits): the weighted quantile, exactly.

// The kernels' argument structs (each kernel takes one, by value), mirrored in
// src/backend/cuda/refit.rs and checked by the layout probe. `rows`: the tree's rows
// (rows[0..m]), or null for 0..m.
struct RefitCountArgs {
    const float* leaf_of;
    const u32* rows;
    u32 m;
    u32 n_nodes;
    u32 use_shared;
    u32* counts;
};

struct RefitWeighArgs {
    const float* leaf_of;
    const u32* rows;
    u32 m;
    const float* repeats;
    u64* sums;
};

// Null `repeats`, `unit_leaf`, `key_weight`: unit weights.
struct RefitScatterArgs {
    const float* leaf_of;
    const u32* rows;
    u32 m;
    const float* label;
    const float* margin;
    const float* repeats;
    const u32* unit_leaf;
    u32 n_nodes;
    u32 use_shared;
    u32* cursor;
    u32* keys;
    u32* key_leaf;
    u32* key_weight;
};

struct RadixCountArgs {
    const u32* keys;
    const u32* key_leaf;
    u32 m;
    const u32* prefix;
    u32 shift;
    u32* hist;
};

struct RadixWeighArgs {
    const u32* keys;
    const u32* key_leaf;
    const u32* key_weight;
    u32 m;
    const u32* prefix;
    u32 shift;
    u64* hist;
};

// The per-leaf byte histograms' counts: u32 (counting) or u64 (weighing).
template <typename Count>
struct RadixPickArgs {
    Count* hist;
    u32 n_nodes;
    u32 shift;
    u32* prefix;
    u64* remaining;
};

struct RefitValuesArgs {
    const u32* prefix;
    const u64* remaining;
    u32 n_nodes;
    float* out;
};

struct RefitAddArgs {
    const float* leaf_of;
    const float* values;
    u32 n;
    float* margin;
};

// Per-node counters live in shared memory when the tree is small enough (`use_shared`, with
// n_nodes words of dynamic shared memory): rows sharing a leaf then contend in their block, and
// each block adds its totals to global memory once per node.

// Rows of the tree (rows[0..m], or 0..m when rows is null) per leaf; `leaf_of` holds each row's
// leaf id as a float.
__device__ __forceinline__ void refit_count_body(const float* leaf_of, const u32* rows, u32 m, u32 n_nodes,
                                                 u32 use_shared, u32* counts) {
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

extern "C" __global__ void refit_count(const RefitCountArgs a) {
    refit_count_body(a.leaf_of, a.rows, a.m, a.n_nodes, a.use_shared, a.counts);
}

// Each leaf's total weight (whole weights, `repeats`), into `sums` (zeroed).
extern "C" __global__ void refit_weigh(const RefitWeighArgs a) {
    const float* leaf_of = a.leaf_of;
    const u32* rows = a.rows;
    const u32 m = a.m;
    const float* repeats = a.repeats;
    u64* sums = a.sums;
    for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) {
        const u32 r = rows ? rows[j] : j;
        const u32 w = (u32)repeats[r];
        if (w) atomicAdd(&sums[(u32)leaf_of[r]], (u64)w);
    }
}

// The weight a key of row r in `leaf` counts for: its whole weight, or 1 in a leaf whose rows
// all weigh 0 (`unit_leaf`), where the CPU's weighted quantile takes the largest value.
__device__ __forceinline__ u32 key_weight_of(const float* repeats, const u32* unit_leaf, u32 r, u32 leaf) {
    return unit_leaf[leaf] ? 1u : (u32)repeats[r];
}

#define REFIT_ROWS_PER_THREAD 8

// Each row's residual key into its leaf's run; `cursor` starts at each run's first slot. With
// shared counters, a block takes a tile of rows, ranks them within their leaves in shared
// memory, reserves each leaf's slots with one global atomic, then writes.
// With `repeats`, each key's weight goes to `key_weight` beside it.
__device__ __forceinline__ void refit_scatter_body(const float* leaf_of, const u32* rows, u32 m,
                                                   const float* label, const float* margin, const float* repeats,
                                                   const u32* unit_leaf, u32 n_nodes, u32 use_shared, u32* cursor,
                                                   u32* keys, u32* key_leaf, u32* key_weight) {
    extern __shared__ u32 local[];
    if (!use_shared) {
        for (u32 j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x) {
            const u32 r = rows ? rows[j] : j;
            const u32 leaf = (u32)leaf_of[r];
            const u32 slot = atomicAdd(&cursor[leaf], 1u);
            keys[slot] = order_key(label[r] - margin[r]);
            key_leaf[slot] = leaf;
            if (repeats) key_weight[slot] = key_weight_of(repeats, unit_leaf, r, leaf);
        }
        return;
    }
    const u32 tile = blockDim.x * REFIT_ROWS_PER_THREAD;
    for (u32 base = blockIdx.x * tile; base < m; base += gridDim.x * tile) {
        for (u32 b = threadIdx.x; b < n_nodes; b += blockDim.x) local[b] = 0;
        __syncthreads();
        u32 leaf[REFIT_ROWS_PER_THREAD], rank[REFIT_ROWS_PER_THREAD];
        u32 key[REFIT_ROWS_PER_THREAD], weight[REFIT_ROWS_PER_THREAD];
        const u32 lane = threadIdx.x % 32;
        for (u32 t = 0; t < REFIT_ROWS_PER_THREAD; ++t) {
            const u32 j = base + t * blockDim.x + threadIdx.x;
            const bool in = j < m;
            leaf[t] = 0xffffffffu;
            if (in) {
                const u32 r = rows ? rows[j] : j;
                leaf[t] = (u32)leaf_of[r];
                key[t] = order_key(label[r] - margin[r]);
                weight[t] = repeats ? key_weight_of(repeats, unit_leaf, r, leaf[t]) : 1u;
            }
            // The lanes of one leaf take their ranks with one shared atomic: late in a fit most
            // rows share a leaf, and one counter taking a block's rows one by one serialises.
            const u32 peers = __match_any_sync(0xffffffffu, leaf[t]);
            const u32 first = __ffs(peers) - 1;
            u32 taken = 0;
            if (in && lane == first) taken = atomicAdd(&local[leaf[t]], (u32)__popc(peers));
            taken = __shfl_sync(0xffffffffu, taken, first);
            rank[t] = taken + __popc(peers & ((1u << lane) - 1u));
        }
        __syncthreads();
        for (u32 b = threadIdx.x; b < n_nodes; b += blockDim.x)
            if (local[b]) local[b] = atomicAdd(&cursor[b], local[b]);
        __syncthreads();
        for (u32 t = 0; t < REFIT_ROWS_PER_THREAD; ++t) {
            const u32 j = base + t * blockDim.x + threadIdx.x;
            if (j < m) {
                keys[local[leaf[t]] + rank[t]] = key[t];
                key_leaf[local[leaf[t]] + rank[t]] = leaf[t];
                if (repeats) key_weight[local[leaf[t]] + rank[t]] = weight[t];
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void refit_scatter(const RefitScatterArgs a) {
    refit_scatter_body(a.leaf_of, a.rows, a.m, a.label, a.margin, a.repeats, a.unit_leaf, a.n_nodes, a.use_shared,
                       a.cursor, a.keys, a.key_leaf, a.key_weight);
}

// Every leaf's rank-k key, by radix selection over all runs at once: four passes, most
// significant byte first. Each pass counts, per leaf, the next byte of the keys that share the
// bytes chosen so far (`refit_radix_count`, over every key, so a large leaf is spread over the
// whole grid); then a warp per leaf picks the byte that holds its rank (`refit_radix_pick`).
// `prefix[leaf]` gathers the chosen bytes; `remaining[leaf]` starts at the rank (0: no rows or
// not a leaf) and becomes the rank within the keys sharing the prefix.
__device__ __forceinline__ void radix_count_body(const u32* keys, const u32* key_leaf, u32 m, const u32* prefix,
                                                 u32 shift, u32* hist) {
    const u32 lane = threadIdx.x % 32;
    const u32 mask = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
    const u32 rounds = (m + blockDim.x - 1) / blockDim.x;
    // Whole warps take every round, so that all their lanes join the match.
    for (u32 round = blockIdx.x; round < rounds; round += gridDim.x) {
        const u32 i = round * blockDim.x + threadIdx.x;
        const bool in = i < m;
        const u32 key = in ? keys[i] : 0, leaf = in ? key_leaf[i] : 0;
        const bool hit = in && (key & mask) == (prefix[leaf] & mask);
        // (leaf, byte) as one value; lanes with the same one add once.
        const u32 slot = hit ? leaf * 256u + ((key >> shift) & 255u) : 0xffffffffu;
        const u32 peers = __match_any_sync(0xffffffffu, slot);
        if (hit && lane == (u32)(__ffs(peers) - 1)) atomicAdd(&hist[slot], (u32)__popc(peers));
    }
}

extern "C" __global__ void refit_radix_count(const RadixCountArgs a) {
    radix_count_body(a.keys, a.key_leaf, a.m, a.prefix, a.shift, a.hist);
}

// The same with whole weights: each key adds its weight, in 64 bits (a zero weight adds nothing).
extern "C" __global__ void refit_radix_weigh(const RadixWeighArgs a) {
    const u32 *keys = a.keys, *key_leaf = a.key_leaf, *key_weight = a.key_weight, *prefix = a.prefix;
    const u32 m = a.m, shift = a.shift;
    u64* hist = a.hist;
    const u32 mask = shift == 24 ? 0u : 0xffffffffu << (shift + 8);
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {
        const u32 key = keys[i], leaf = key_leaf[i], w = key_weight[i];
        if (w && (key & mask) == (prefix[leaf] & mask))
            atomicAdd(&hist[leaf * 256u + ((key >> shift) & 255u)], (u64)w);
    }
}

// A warp per leaf: each lane holds 8 consecutive digits' counts, a shuffle scan over the lanes
// finds the lane whose digits hold the rank, and that lane walks its 8. (A thread per leaf
// walking 256 counts one dependent load at a time took ~110 us a pass at 2M rows: ncu.)
template <typename Count>
__device__ void radix_pick(Count* hist, u32 n_nodes, u32 shift, u32* prefix, u64* remaining) {
    const u32 lane = threadIdx.x % 32;
    const u32 warps = gridDim.x * (blockDim.x / 32);
    for (u32 leaf = (blockIdx.x * blockDim.x + threadIdx.x) / 32; leaf < n_nodes; leaf += warps) {
        Count* h = hist + (u64)leaf * 256u + lane * 8u;
        Count c[8];
        u64 sum = 0;
        for (u32 i = 0; i < 8; ++i) {
            c[i] = h[i];
            sum += c[i];
        }
        // Zeroed for the next pass (each lane its own digits, read above).
        for (u32 i = 0; i < 8; ++i) h[i] = 0;
        const u64 k = remaining[leaf];
        if (k == 0) continue;  // the same for the whole warp
        u64 inclusive = sum;
        for (u32 o = 1; o < 32; o *= 2) {
            const u64 v = __shfl_up_sync(0xffffffffu, inclusive, o);
            if (lane >= o) inclusive += v;
        }
        const u64 below_lane = inclusive - sum;
        // The first lane whose running total reaches the rank (lanes with no keys never hold it).
        const u32 holder = __ffs(__ballot_sync(0xffffffffu, below_lane < k && k <= inclusive)) - 1;
        if (lane == holder) {
            u64 below = below_lane;
            u32 i = 0;
            while (below + c[i] < k) below += c[i++];
            prefix[leaf] |= (lane * 8u + i) << shift;
            remaining[leaf] = k - below;
        }
    }
}

extern "C" __global__ void refit_radix_pick(const RadixPickArgs<u32> a) {
    radix_pick<u32>(a.hist, a.n_nodes, a.shift, a.prefix, a.remaining);
}

extern "C" __global__ void refit_radix_pick_weighed(const RadixPickArgs<u64> a) {
    radix_pick<u64>(a.hist, a.n_nodes, a.shift, a.prefix, a.remaining);
}

// Each leaf's selected value (0 where nothing was selected: a selection leaves a rank of at
// least 1 remaining, and nodes with nothing to select keep 0).
extern "C" __global__ void refit_values(const RefitValuesArgs a) {
    const u32* prefix = a.prefix;
    const u64* remaining = a.remaining;
    const u32 n_nodes = a.n_nodes;
    float* out = a.out;
    for (u32 leaf = blockIdx.x * blockDim.x + threadIdx.x; leaf < n_nodes; leaf += gridDim.x * blockDim.x)
        out[leaf] = remaining[leaf] ? from_order_key(prefix[leaf]) : 0.0f;
}

// The refit tree's leaf values added to the margins: each row's leaf is known from the marking
// (`leaf_of`), so a gather does what a second walk of the tree would (the same float adds).
extern "C" __global__ void refit_add_leaves(const RefitAddArgs a) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
        a.margin[i] += a.values[(u32)a.leaf_of[i]];
}
