// Split search, categorical features; it follows split.cu in the concatenation and uses its
// gain formula and helpers. Block (categorical feature, node) mirrors
// SplitScorer::best_categorical (src/tree/split/categorical.rs): one category against the rest
// when few are present, else the prefixes of the categories ordered by regularised leaf
// weight. The order is sorted on the device (a bitonic sort, in shared memory a chunk at a
// time) and kept in the sort buffers, so that the host reads only the winners' categories
// (gathered by gather_runs, at the end).

// The order of f64::total_cmp, as an unsigned key.
__device__ __forceinline__ u64 total_order(double w) {
    const u64 b = (u64)__double_as_longlong(w);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

__device__ __forceinline__ bool sorts_before(u64 ka, u32 ta, u64 kb, u32 tb) {
    return ka < kb || (ka == kb && ta < tb);
}

// One bitonic step (merge size `size`, distance `stride`) over keys[0..n), whose first element
// is element `base` of the whole sequence (the direction depends on the whole index).
__device__ void bitonic_step(u64* keys, u32* tags, u32 n, u32 base, u32 size, u32 stride) {
    for (u32 i = threadIdx.x; i < n / 2; i += blockDim.x) {
        const u32 lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool ascending = ((base + lo) & size) == 0;
        if (sorts_before(keys[hi], tags[hi], keys[lo], tags[lo]) == ascending) {
            const u64 k = keys[lo];
            keys[lo] = keys[hi];
            keys[hi] = k;
            const u32 t = tags[lo];
            tags[lo] = tags[hi];
            tags[hi] = t;
        }
    }
}

// The steps of merge size `size` whose distances are below the chunk, chunk by chunk in shared
// memory (all sizes up to the chunk when `size` is 0: each chunk sorted whole).
__device__ void chunk_steps(u64* keys, u32* tags, u32 n, u32 chunk, u32 size, u64* sk, u32* st) {
    for (u32 c = 0; c < n; c += chunk) {
        for (u32 i = threadIdx.x; i < chunk; i += blockDim.x) {
            sk[i] = keys[c + i];
            st[i] = tags[c + i];
        }
        __syncthreads();
        if (size == 0) {
            for (u32 s = 2; s <= chunk; s <<= 1) {
                for (u32 d = s / 2; d > 0; d >>= 1) {
                    bitonic_step(sk, st, chunk, c, s, d);
                    __syncthreads();
                }
            }
        } else {
            for (u32 d = chunk / 2; d > 0; d >>= 1) {
                bitonic_step(sk, st, chunk, c, size, d);
                __syncthreads();
            }
        }
        for (u32 i = threadIdx.x; i < chunk; i += blockDim.x) {
            keys[c + i] = sk[i];
            tags[c + i] = st[i];
        }
        __syncthreads();
    }
}

// Sorts n (a power of two) (key, tag) pairs ascending, one block: distances of a chunk or more
// step through global memory, shorter ones through shared memory (sk, st: max_chunk pairs).
__device__ void block_sort(u64* keys, u32* tags, u32 n, u32 max_chunk, u64* sk, u32* st) {
    const u32 chunk = min(n, max_chunk);
    chunk_steps(keys, tags, n, chunk, 0, sk, st);
    for (u32 size = 2 * chunk; size <= n; size <<= 1) {
        for (u32 d = size / 2; d >= chunk; d >>= 1) {
            bitonic_step(keys, tags, n, 0, size, d);
            __syncthreads();
        }
        chunk_steps(keys, tags, n, chunk, size, sk, st);
    }
}

// A node's categorical search: its parameters, sums and row estimate.
struct CategoricalNode {
    SplitParams p;
    SplitParams partition;  // the children of partition splits: reg_lambda + cat_l2
    CategoricalParams cp;
    EvalTask task;
    double parent_score;
    double rows_per_hessian;
    GradSum missing;
    bool has_missing;

    // SplitScorer::rows_of: the rows behind a sum, estimated from its hessian.
    __device__ double rows_of(GradSum s) const { return round((double)s.h * p.h_unit * rows_per_hessian); }

    // SplitScorer::best_categorical's `consider`: the options for sending `left` left (with and
    // without the missing values), candidate keys 2 * index and 2 * index + 1.
    __device__ void consider(GradSum left, u32 index, bool is_partition, double* best_gain, u32* best_key,
                             GradSum* best_left) const {
        const GradSum total = task.total;
        for (u32 option = 0; option < (has_missing ? 2u : 1u); ++option) {
            GradSum l = left;
            if (option == 1) { l.g += missing.g; l.h += missing.h; }
            double gain;
            bool ok;
            if (is_partition) {
                const GradSum r = {total.g - l.g, total.h - l.h};
                if (cp.min_data_per_group > 0.0 &&
                    !(rows_of(l) >= cp.min_data_per_group && rows_of(r) >= cp.min_data_per_group))
                    continue;
                ok = split_gain(partition, task, l, 0, parent_score, &gain);
            } else {
                ok = split_gain(p, task, l, 0, parent_score, &gain);
            }
            const u32 key = 2 * index + option;
            if (ok && better(gain, key, *best_gain, *best_key)) {
                *best_gain = gain;
                *best_key = key;
                *best_left = l;
            }
        }
    }
};

// The best of each thread's (gain, key, left): better() over the block, into thread 0's
// arguments (every thread must call it; blockDim.x a multiple of 32).
__device__ void block_best(double* gain, u32* key, GradSum* left) {
    __shared__ double w_gain[32];
    __shared__ u32 w_key[32];
    __shared__ GradSum w_left[32];
    for (int o = 16; o > 0; o /= 2) {
        const double og = __shfl_down_sync(0xffffffffu, *gain, o);
        const u32 ok = __shfl_down_sync(0xffffffffu, *key, o);
        const i64 olg = __shfl_down_sync(0xffffffffu, left->g, o), olh = __shfl_down_sync(0xffffffffu, left->h, o);
        if (better(og, ok, *gain, *key)) {
            *gain = og;
            *key = ok;
            left->g = olg;
            left->h = olh;
        }
    }
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        w_gain[warp] = *gain;
        w_key[warp] = *key;
        w_left[warp] = *left;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < blockDim.x / 32; ++w) {
            if (better(w_gain[w], w_key[w], *gain, *key)) {
                *gain = w_gain[w];
                *key = w_key[w];
                *left = w_left[w];
            }
        }
    }
}

// Grid (categorical features, tasks); any multiple of 32 threads; dynamic shared memory for
// sort_chunk (a power of two) pairs of the sort. features[x] is the feature;
// regions[x] its first element in a task's run of the sort buffers (task t's run starts at
// t * region_per_task; a feature's region holds its categories rounded up to a power of two).
// Writes out[t][feature] (which evaluate_features left unfound) and, for a found split, the
// categories sent left first in the feature's region of sort_tags.
struct EvaluateCategoricalArgs {
    const GradSum* hist;
    u32 total_slots;
    const u32* slot_offsets;
    const u32* features;
    const u32* regions;
    u32 region_per_task;
    const EvalTask* tasks;
    const TaskRows* task_rows;
    const u32* node_left;
    const u8* masks;
    u32 n_features;
    SplitParams p;
    CategoricalParams cp;
    u32 sort_chunk;
    u64* sort_keys;
    u32* sort_tags;
    SplitResult* out;
};

__device__ __forceinline__ void evaluate_categorical_body(
    const GradSum* hist, u32 total_slots, const u32* slot_offsets, const u32* features, const u32* regions,
    u32 region_per_task, const EvalTask* tasks, const TaskRows* task_rows, const u32* node_left, const u8* masks,
    u32 n_features, SplitParams p, CategoricalParams cp, u32 sort_chunk, u64* sort_keys, u32* sort_tags,
    SplitResult* out) {
    __shared__ i64 warp_g[32], warp_h[32];
    extern __shared__ u64 sort_shared[];
    u64* sk = sort_shared;
    u32* st = (u32*)(sort_shared + sort_chunk);
    const u32 f = features[blockIdx.x], t = blockIdx.y;
    const EvalTask task = tasks[t];
    SplitResult* result = out + (u64)t * n_features + f;
    if (task.mask_row != NO_CHILD && !masks[(u64)task.mask_row * n_features + f]) {
        if (threadIdx.x == 0) result->found = 0;
        return;
    }
    const GradSum* h = hist + (u64)task.slot * total_slots + slot_offsets[f];
    const u32 n_bins = slot_offsets[f + 1] - slot_offsets[f] - 1;
    u64* keys = sort_keys + (u64)t * region_per_task + regions[blockIdx.x];
    u32* tags = sort_tags + (u64)t * region_per_task + regions[blockIdx.x];

    CategoricalNode node;
    node.p = p;
    node.partition = p;
    node.partition.reg_lambda = p.reg_lambda + cp.cat_l2;
    node.cp = cp;
    node.task = task;
    double parent_weight;
    node.parent_score =
        bounded_score(p, (double)task.total.g * p.g_unit, (double)task.total.h * p.h_unit, task, &parent_weight);
    const u32 rows = rows_of(task_rows[t], node_left);
    const double total_h = (double)task.total.h * p.h_unit;
    node.rows_per_hessian = total_h > 0.0 ? (double)rows / total_h : 0.0;
    node.missing = h[n_bins];
    node.has_missing = node.missing.g != 0 || node.missing.h != 0;

    // Present categories, and those common enough for the partition order.
    u32 n_present = 0, n_ordered = 0;
    for (u32 base = 0; base < n_bins; base += blockDim.x) {
        const u32 c = base + threadIdx.x;
        bool present = false, ordered = false;
        if (c < n_bins) {
            const GradSum s = h[c];
            present = s.g != 0 || s.h != 0;
            ordered = present && node.rows_of(s) >= cp.cat_smooth;
        }
        n_present += __syncthreads_count(present);
        n_ordered += __syncthreads_count(ordered);
    }
    if (n_present == 0 || (n_present == 1 && !node.has_missing)) {
        if (threadIdx.x == 0) result->found = 0;
        return;
    }

    double best_gain = -1.0 / 0.0;
    u32 best_key = 0xffffffffu;
    GradSum best_left = {0, 0};
    const bool one_hot = n_present <= cp.max_cat_to_onehot;
    if (one_hot) {
        for (u32 c = threadIdx.x; c < n_bins; c += blockDim.x) {
            const GradSum s = h[c];
            if (s.g != 0 || s.h != 0) node.consider(s, c, false, &best_gain, &best_key, &best_left);
        }
    } else {
        // The ordered categories, compacted in code order with their weights' keys, padded to
        // a power of two and sorted by (weight, code).
        i64 carry = 0;
        for (u32 base = 0; base < n_bins; base += blockDim.x) {
            const u32 c = base + threadIdx.x;
            GradSum s = {0, 0};
            bool ordered = false;
            if (c < n_bins) {
                s = h[c];
                ordered = (s.g != 0 || s.h != 0) && node.rows_of(s) >= cp.cat_smooth;
            }
            i64 at = ordered, unused = 0;
            block_scan(at, unused, warp_g, warp_h);
            if (ordered) {
                const double w = leaf_weight(p, (double)s.g * p.g_unit, (double)s.h * p.h_unit + cp.cat_smooth);
                keys[carry + at - 1] = total_order(w);
                tags[carry + at - 1] = c;
            }
            if (threadIdx.x == blockDim.x - 1) warp_g[0] = at;
            __syncthreads();
            carry += warp_g[0];
            __syncthreads();
        }
        // With rare categories left out, every ordered category left would split off just the
        // rare ones: not a candidate.
        const u32 last = n_ordered < n_present ? (n_ordered == 0 ? 0 : n_ordered - 1) : n_ordered;
        if (last > 0) {
            u32 n = 1;
            while (n < n_ordered) n <<= 1;
            for (u32 i = n_ordered + threadIdx.x; i < n; i += blockDim.x) {
                keys[i] = ~0ull;
                tags[i] = 0xffffffffu;
            }
            __syncthreads();
            block_sort(keys, tags, n, sort_chunk, sk, st);
            // Prefixes of the order, the side sent left holding at most max_cat_threshold
            // categories (either side may be the small one).
            i64 carry_g = 0, carry_h = 0;
            const u32 cap = cp.max_cat_threshold;
            for (u32 base = 0; base < last; base += blockDim.x) {
                const u32 i = base + threadIdx.x;
                GradSum s = {0, 0};
                if (i < last) s = h[tags[i]];
                i64 g = s.g, hh = s.h;
                block_scan(g, hh, warp_g, warp_h);
                const u32 k = i + 1;
                if (i < last && (k <= cap || n_ordered - k <= cap)) {
                    const GradSum left = {carry_g + g, carry_h + hh};
                    node.consider(left, k, true, &best_gain, &best_key, &best_left);
                }
                if (threadIdx.x == blockDim.x - 1) { warp_g[0] = g; warp_h[0] = hh; }
                __syncthreads();
                carry_g += warp_g[0];
                carry_h += warp_h[0];
                __syncthreads();
            }
        }
    }
    block_best(&best_gain, &best_key, &best_left);
    if (threadIdx.x != 0) return;
    const u32 key = best_key;
    if (key == 0xffffffffu) {
        result->found = 0;
        return;
    }
    const GradSum left = best_left;
    u32 n_left = key / 2;
    if (one_hot) {
        tags[0] = key / 2;  // the one category sent left
        n_left = 1;
    }
    result->left = left;
    result->gain = best_gain;
    result->feature = f;
    result->split_bin = n_left;
    // Unseen missing values follow the heavier child when the node saw none.
    result->default_left = node.has_missing ? (key & 1) : (left.h >= task.total.h - left.h ? 1 : 0);
    result->found = 1;
}

extern "C" __global__ void evaluate_categorical(const EvaluateCategoricalArgs a) {
    evaluate_categorical_body(a.hist, a.total_slots, a.slot_offsets, a.features, a.regions, a.region_per_task,
                              a.tasks, a.task_rows, a.node_left, a.masks, a.n_features, a.p, a.cp, a.sort_chunk,
                              a.sort_keys, a.sort_tags, a.out);
}

// Block i copies the first runs[3i + 2] elements of task runs[3i]'s region runs[3i + 1] of
// `src` (a task's regions span region_per_task elements) to out[offsets[i]..]: the winning
// categorical splits' categories, for one download.
struct GatherRunsArgs {
    const u32* src;
    u32 region_per_task;
    const u32* runs;
    const u32* offsets;
    u32* out;
};

extern "C" __global__ void gather_runs(const GatherRunsArgs a) {
    const u32* src = a.src;
    const u32 region_per_task = a.region_per_task;
    const u32* runs = a.runs;
    const u32* offsets = a.offsets;
    u32* out = a.out;
    const u32* run = runs + 3 * blockIdx.x;
    const u32* from = src + (u64)run[0] * region_per_task + run[1];
    for (u32 i = threadIdx.x; i < run[2]; i += blockDim.x) out[offsets[blockIdx.x] + i] = from[i];
}
