// Split search for every node of a level in one launch: block (feature, node) scans one
// feature's histogram, a second launch keeps each node's best feature. The arithmetic mirrors
// src/tree/split.rs operation for operation, in double precision and without FMA contraction
// (--fmad=false), so gains, and therefore the chosen splits, equal the CPU's bit for bit.

#define MIN_GAIN 1e-6

__device__ double threshold_l1(const SplitParams& p, double g) {
    if (g > p.reg_alpha) return g - p.reg_alpha;
    if (g < -p.reg_alpha) return g + p.reg_alpha;
    return 0.0;
}

__device__ double leaf_weight(const SplitParams& p, double g, double h) {
    double denom = h + p.reg_lambda;
    if (denom <= 0.0) return 0.0;
    double w = -threshold_l1(p, g) / denom;
    if (p.max_delta_step > 0.0) w = fmin(fmax(w, -p.max_delta_step), p.max_delta_step);
    return w;
}

__device__ double score_given_weight(const SplitParams& p, double g, double h, double w) {
    double denom = h + p.reg_lambda;
    if (denom <= 0.0) return 0.0;
    return -(2.0 * g * w + denom * w * w + 2.0 * p.reg_alpha * fabs(w));
}

__device__ double leaf_score(const SplitParams& p, double g, double h) {
    if (p.max_delta_step == 0.0) {
        double denom = h + p.reg_lambda;
        if (denom <= 0.0) return 0.0;
        double t = threshold_l1(p, g);
        return t * t / denom;
    }
    return score_given_weight(p, g, h, leaf_weight(p, g, h));
}

// A leaf's weight within the node's bounds (*w), and its score: leaf_score when the weight is
// free, as SplitParams::bounded.
__device__ double bounded_score(const SplitParams& p, double g, double h, const EvalTask& node, double* w) {
    double free_w = leaf_weight(p, g, h);
    double c = fmin(fmax(free_w, node.lower), node.upper);
    *w = c;
    return c == free_w ? leaf_score(p, g, h) : score_given_weight(p, g, h, c);
}

// The gain of sending `left` left on a feature of monotone `direction`, or false when a child
// is too light, the weights run against the direction, or the gain is too small.
__device__ bool split_gain(const SplitParams& p, const EvalTask& node, GradSum left, int direction,
                           double parent_score, double* gain) {
    const GradSum total = node.total;
    double gl = (double)left.g * p.g_unit, hl = (double)left.h * p.h_unit;
    double gr = (double)(total.g - left.g) * p.g_unit, hr = (double)(total.h - left.h) * p.h_unit;
    if (hl < p.min_child_weight || hr < p.min_child_weight) return false;
    double sl, sr;
    const double inf = 1.0 / 0.0;
    if (direction == 0 && node.lower == -inf && node.upper == inf) {
        // Free weights: the plain scores (what bounded_score gives too, without the weights).
        sl = leaf_score(p, gl, hl);
        sr = leaf_score(p, gr, hr);
    } else {
        double wl, wr;
        sl = bounded_score(p, gl, hl, node, &wl);
        sr = bounded_score(p, gr, hr, node, &wr);
        if ((direction > 0 && wl > wr) || (direction < 0 && wl < wr)) return false;
    }
    double v = sl + sr - parent_score;
    *gain = v;
    return v > MIN_GAIN && v >= p.gamma;
}

// A candidate ranks above another with a larger gain, or an equal gain and a smaller key
// (the CPU scans bins upwards and keeps the first strict maximum).
__device__ __forceinline__ bool better(double gain, u32 key, double best_gain, u32 best_key) {
    return gain > best_gain || (gain == best_gain && key < best_key);
}

// Inclusive prefix sums of (g, h) over the block's threads.
__device__ void block_scan(i64& g, i64& h, i64* warp_g, i64* warp_h) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o *= 2) {
        i64 gg = __shfl_up_sync(0xffffffffu, g, o), hh = __shfl_up_sync(0xffffffffu, h, o);
        if (lane >= o) { g += gg; h += hh; }
    }
    if (lane == 31) { warp_g[warp] = g; warp_h[warp] = h; }
    __syncthreads();
    if (warp == 0) {
        const u32 n_warps = blockDim.x / 32;
        i64 wg = lane < n_warps ? warp_g[lane] : 0, wh = lane < n_warps ? warp_h[lane] : 0;
        for (int o = 1; o < 32; o *= 2) {
            i64 gg = __shfl_up_sync(0xffffffffu, wg, o), hh = __shfl_up_sync(0xffffffffu, wh, o);
            if (lane >= o) { wg += gg; wh += hh; }
        }
        if (lane < n_warps) { warp_g[lane] = wg; warp_h[lane] = wh; }
    }
    __syncthreads();
    if (warp > 0) { g += warp_g[warp - 1]; h += warp_h[warp - 1]; }
    __syncthreads();
}

// The kernels' argument structs (src/backend/cuda/split.rs).
struct EvaluateFeaturesArgs {
    const GradSum* hist;
    u32 total_slots;
    const u32* slot_offsets;
    const u32* categorical;
    const EvalTask* tasks;
    const u8* masks;
    const i8* monotone;
    u32 n_features;
    SplitParams p;
    SplitResult* out;
};

// A lane's best candidate: its gain, key (2 x bin, + 1 when the missing values go left) and
// left sums.
struct Candidate {
    double gain;
    u32 key;
    GradSum left;
};

__device__ __forceinline__ void consider(const SplitParams& p, const EvalTask& task, GradSum left, u32 key,
                                         int direction, double parent_score, Candidate& best) {
    double gain;
    if (split_gain(p, task, left, direction, parent_score, &gain) && better(gain, key, best.gain, best.key)) {
        best.gain = gain;
        best.key = key;
        best.left = left;
    }
}

// Grid (features / warps a block, n_tasks): warp w of block x scans feature x * warps + w of
// node blockIdx.y for its best numeric split, its bins 32 at a time (a shuffle scan, no block
// barriers: a level of a wide fit has hundreds of thousands of these). Each lane keeps its best
// candidate with the left sums it was scored on, and the warp the best of its lanes (`better`
// is a total order, so the winner is the CPU's whatever the lanes' order).
__device__ __forceinline__ void evaluate_features_body(const EvaluateFeaturesArgs& a) {
    const u32 lane = threadIdx.x & 31;
    const u32 f = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5), t = blockIdx.y;
    if (f >= a.n_features) return;
    const SplitParams& p = a.p;
    const EvalTask task = a.tasks[t];
    SplitResult* result = a.out + (u64)t * a.n_features + f;
    const bool allowed =
        !a.categorical[f] && (task.mask_row == NO_CHILD || a.masks[(u64)task.mask_row * a.n_features + f]);
    if (!allowed) {
        if (lane == 0) result->found = 0;
        return;
    }
    const GradSum* h = a.hist + (u64)task.slot * a.total_slots + a.slot_offsets[f];
    const u32 n_bins = a.slot_offsets[f + 1] - a.slot_offsets[f] - 1;
    const GradSum missing = h[n_bins];
    const bool has_missing = missing.g != 0 || missing.h != 0;
    const GradSum total = task.total;
    const int direction = a.monotone[f];
    double parent_weight;
    const double parent_score =
        bounded_score(p, (double)total.g * p.g_unit, (double)total.h * p.h_unit, task, &parent_weight);

    Candidate best = {-1.0 / 0.0, 0xffffffffu, {0, 0}};
    i64 carry_g = 0, carry_h = 0;
    // The next chunk's bins are loaded while this one is scored.
    GradSum next = {0, 0};
    if (lane < n_bins) next = h[lane];
    for (u32 base = 0; base < n_bins; base += 32) {
        const u32 b = base + lane;
        const GradSum slot = next;
        if (b + 32 < n_bins) next = h[b + 32];
        i64 g = slot.g, hh = slot.h;
        for (int o = 1; o < 32; o *= 2) {
            const i64 gg = __shfl_up_sync(0xffffffffu, g, o), ho = __shfl_up_sync(0xffffffffu, hh, o);
            if (lane >= o) { g += gg; hh += ho; }
        }
        const GradSum left = {carry_g + g, carry_h + hh};
        if (b < n_bins && (slot.g != 0 || slot.h != 0)) {
            consider(p, task, left, 2 * b, direction, parent_score, best);
            if (has_missing) {
                const GradSum with_missing = {left.g + missing.g, left.h + missing.h};
                consider(p, task, with_missing, 2 * b + 1, direction, parent_score, best);
            }
        }
        carry_g += __shfl_sync(0xffffffffu, g, 31);
        carry_h += __shfl_sync(0xffffffffu, hh, 31);
    }
    for (int o = 16; o > 0; o /= 2) {
        const double og = __shfl_xor_sync(0xffffffffu, best.gain, o);
        const u32 ok = __shfl_xor_sync(0xffffffffu, best.key, o);
        const i64 olg = __shfl_xor_sync(0xffffffffu, best.left.g, o);
        const i64 olh = __shfl_xor_sync(0xffffffffu, best.left.h, o);
        if (better(og, ok, best.gain, best.key)) {
            best.gain = og;
            best.key = ok;
            best.left.g = olg;
            best.left.h = olh;
        }
    }
    if (lane != 0) return;
    if (best.key == 0xffffffffu) {
        result->found = 0;
        return;
    }
    // The left sums already hold the missing values when the key says they go left.
    const bool default_left =
        has_missing ? (best.key & 1) != 0 : best.left.h >= total.h - best.left.h;  // unseen missing: heavier child
    result->left = best.left;
    result->gain = best.gain;
    result->feature = f;
    result->split_bin = best.key / 2;
    result->default_left = default_left ? 1 : 0;
    result->found = 1;
}

extern "C" __global__ void __launch_bounds__(256, 4) evaluate_features(const EvaluateFeaturesArgs a) { evaluate_features_body(a); }

// One warp per node: the best feature, ties to the lowest feature index (as on the CPU).
struct BestFeatureArgs {
    const SplitResult* per_feature;
    u32 n_features;
    u32 n_tasks;
    SplitResult* out;
};

extern "C" __global__ void best_feature(const BestFeatureArgs a) {
    const SplitResult* per_feature = a.per_feature;
    const u32 n_features = a.n_features, n_tasks = a.n_tasks;
    SplitResult* out = a.out;
    const u32 t = blockIdx.x;
    if (t >= n_tasks) return;
    const SplitResult* r = per_feature + (u64)t * n_features;
    double best_gain = -1.0 / 0.0;
    u32 best_f = 0xffffffffu;
    for (u32 f = threadIdx.x; f < n_features; f += 32) {
        if (r[f].found && better(r[f].gain, f, best_gain, best_f)) {
            best_gain = r[f].gain;
            best_f = f;
        }
    }
    for (int o = 16; o > 0; o /= 2) {
        double og = __shfl_xor_sync(0xffffffffu, best_gain, o);
        u32 of = __shfl_xor_sync(0xffffffffu, best_f, o);
        if (better(og, of, best_gain, best_f)) { best_gain = og; best_f = of; }
    }
    if (threadIdx.x == 0) {
        if (best_f == 0xffffffffu) {
            SplitResult none = {{0, 0}, 0.0, 0, 0, 0, 0};
            out[t] = none;
        } else {
            out[t] = r[best_f];
        }
    }
}

// --- Categorical features ------------------------------------------------------------------
// Block (categorical feature, node) mirrors SplitScorer::best_categorical: one category against
// the rest when few are present, else the prefixes of the categories ordered by regularised
// leaf weight. The order is sorted on the device (a bitonic sort, in shared memory a chunk at a
// time) and kept in the sort buffers, so that the host reads only the winners' categories.

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

// Each node's row count into out[i], for a fit over several GPUs to sum them on the devices
// before the split search reads them.
struct NodeRowsArgs {
    const TaskRows* task_rows;
    const u32* node_left;
    u32 n;
    u32* out;
};

extern "C" __global__ void node_rows(const NodeRowsArgs a) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a.n) a.out[i] = rows_of(a.task_rows[i], a.node_left);
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

// --- Vector leaves ---------------------------------------------------------------------------
// A vector-leaf node (multi_output_tree) has a histogram per output; a split's gain is the sum
// over the outputs of each one's scalar terms (src/tree/split_vector.rs, VectorScorer, mirrored
// operation for operation, in the same order over the outputs). Its tasks are the nodes'
// outputs, node-major: task t * n_outputs + k is output k of node t, with that output's sum,
// histogram slot and weight bounds (the mask row is node t's).
struct EvaluateVectorArgs {
    const GradSum* hist;
    u32 total_slots;
    const u32* slot_offsets;
    const u32* categorical;
    const EvalTask* tasks;
    const double* parent_score;  // per node: the sum of its outputs' bounded scores
    const double* units;         // per output: its g_unit, h_unit
    const u8* masks;
    const i8* monotone;
    u32 n_features;
    u32 n_outputs;
    SplitParams p;
    SplitResult* out;
};

// The sums of one candidate over the outputs, as VectorScorer::gain_under accumulates them.
struct VectorTerms {
    double hl, hr;    // hessians of the children, summed over the outputs
    double sl, sr;    // free weights: the children's scores, each summed over the outputs
    double bounded;   // bounded weights: (left + right score) summed over the outputs
    bool against;     // some output's weights run against the monotone direction
};

__device__ __forceinline__ void add_output(const SplitParams& p, const EvalTask& task, double gu, double hu,
                                           i64 lg, i64 lh, bool free, int direction, VectorTerms& s) {
    const double gl = (double)lg * gu, hl = (double)lh * hu;
    const double gr = (double)(task.total.g - lg) * gu, hr = (double)(task.total.h - lh) * hu;
    s.hl += hl;
    s.hr += hr;
    if (free) {
        s.sl += leaf_score(p, gl, hl);
        s.sr += leaf_score(p, gr, hr);
    } else {
        double wl, wr;
        const double a = bounded_score(p, gl, hl, task, &wl);
        const double b = bounded_score(p, gr, hr, task, &wr);
        if ((direction > 0 && wl > wr) || (direction < 0 && wl < wr)) s.against = true;
        s.bounded += a + b;
    }
}

// The candidate's gain, or false when a child's mean hessian per output is below
// min_child_weight, some output runs against the direction, or the gain is no split.
__device__ __forceinline__ bool vector_gain(const SplitParams& p, const VectorTerms& s, double least, bool free,
                                            double parent_score, double* gain) {
    if (s.hl < least || s.hr < least || s.against) return false;
    const double v = (free ? s.sl + s.sr : s.bounded) - parent_score;
    *gain = v;
    return v > MIN_GAIN && v >= p.gamma;
}

// A lane's best candidate: its gain, key (2 x bin, + 1 when the missing values go left) and
// where missing values go.
struct VectorCandidate {
    double gain;
    u32 key;
    u32 default_left;
};

__device__ __forceinline__ void keep(double gain, u32 key, u32 default_left, VectorCandidate& best) {
    if (better(gain, key, best.gain, best.key)) {
        best.gain = gain;
        best.key = key;
        best.default_left = default_left;
    }
}

// Grid (features / warps a block, nodes): warp w of block x scans feature x * warps + w of node
// blockIdx.y, its bins 32 at a time, every output's bins scanned in turn (their running sums in
// dynamic shared memory, 2 x n_outputs i64 a warp). The left sums are left to vector_left_sums,
// for the winners only.
extern "C" __global__ void __launch_bounds__(256) evaluate_vector(const EvaluateVectorArgs a) {
    extern __shared__ i64 carries[];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 f = blockIdx.x * (blockDim.x / 32) + warp, t = blockIdx.y, k_out = a.n_outputs;
    if (f >= a.n_features) return;
    const SplitParams& p = a.p;
    const EvalTask* tasks = a.tasks + (u64)t * k_out;
    SplitResult* result = a.out + (u64)t * a.n_features + f;
    const bool allowed =
        !a.categorical[f] && (tasks[0].mask_row == NO_CHILD || a.masks[(u64)tasks[0].mask_row * a.n_features + f]);
    if (!allowed) {
        if (lane == 0) result->found = 0;
        return;
    }
    const u32 offset = a.slot_offsets[f], n_bins = a.slot_offsets[f + 1] - offset - 1;
    i64* carry = carries + (u64)warp * 2 * k_out;
    const double inf = 1.0 / 0.0;
    const int direction = a.monotone[f];
    bool has_missing = false, free = direction == 0;
    for (u32 k = 0; k < k_out; ++k) {
        const GradSum m = a.hist[(u64)tasks[k].slot * a.total_slots + offset + n_bins];
        has_missing |= m.g != 0 || m.h != 0;
        free &= tasks[k].lower == -inf && tasks[k].upper == inf;
        if (lane == 0) carry[2 * k] = carry[2 * k + 1] = 0;
    }
    __syncwarp();
    const double least = p.min_child_weight * (double)k_out, parent_score = a.parent_score[t];
    VectorCandidate best = {-inf, 0xffffffffu, 0};
    for (u32 base = 0; base < n_bins; base += 32) {
        const u32 b = base + lane;
        VectorTerms left = {0.0, 0.0, 0.0, 0.0, 0.0, false}, with_missing = left;
        bool occupied = false;
        for (u32 k = 0; k < k_out; ++k) {
            const EvalTask& task = tasks[k];
            const GradSum* h = a.hist + (u64)task.slot * a.total_slots + offset;
            const GradSum slot = b < n_bins ? h[b] : GradSum{0, 0};
            occupied |= slot.g != 0 || slot.h != 0;
            i64 g = slot.g, hh = slot.h;
            for (int o = 1; o < 32; o *= 2) {
                const i64 gg = __shfl_up_sync(0xffffffffu, g, o), ho = __shfl_up_sync(0xffffffffu, hh, o);
                if (lane >= o) { g += gg; hh += ho; }
            }
            const i64 lg = carry[2 * k] + g, lh = carry[2 * k + 1] + hh;
            const i64 chunk_g = __shfl_sync(0xffffffffu, g, 31), chunk_h = __shfl_sync(0xffffffffu, hh, 31);
            const double gu = a.units[2 * k], hu = a.units[2 * k + 1];
            add_output(p, task, gu, hu, lg, lh, free, direction, left);
            if (has_missing) {
                const GradSum m = h[n_bins];
                add_output(p, task, gu, hu, lg + m.g, lh + m.h, free, direction, with_missing);
            }
            __syncwarp();
            if (lane == 0) {
                carry[2 * k] += chunk_g;
                carry[2 * k + 1] += chunk_h;
            }
            __syncwarp();
        }
        if (b >= n_bins || !occupied) continue;
        double gain;
        if (has_missing) {
            if (vector_gain(p, left, least, free, parent_score, &gain)) keep(gain, 2 * b, 0, best);
            if (vector_gain(p, with_missing, least, free, parent_score, &gain)) keep(gain, 2 * b + 1, 1, best);
        } else if (vector_gain(p, left, least, free, parent_score, &gain)) {
            // Unseen missing values follow the heavier child.
            keep(gain, 2 * b, left.hl >= left.hr ? 1 : 0, best);
        }
    }
    for (int o = 16; o > 0; o /= 2) {
        const double og = __shfl_xor_sync(0xffffffffu, best.gain, o);
        const u32 ok = __shfl_xor_sync(0xffffffffu, best.key, o);
        const u32 od = __shfl_xor_sync(0xffffffffu, best.default_left, o);
        keep(og, ok, od, best);
    }
    if (lane != 0) return;
    if (best.key == 0xffffffffu) {
        result->found = 0;
        return;
    }
    result->left = GradSum{0, 0};
    result->gain = best.gain;
    result->feature = f;
    result->split_bin = best.key / 2;
    result->default_left = best.default_left;
    result->found = 1;
}

// Grid (outputs, nodes), one warp each: output k's left sum of node t's winning split, its
// bins up to the split's plus the missing values when they go left (zero when the node saw
// none), into out[t * n_outputs + k].
struct VectorLeftSumsArgs {
    const GradSum* hist;
    u32 total_slots;
    const u32* slot_offsets;
    const EvalTask* tasks;
    const SplitResult* best;
    u32 n_outputs;
    GradSum* out;
};

extern "C" __global__ void vector_left_sums(const VectorLeftSumsArgs a) {
    const u32 k = blockIdx.x, t = blockIdx.y, lane = threadIdx.x;
    const SplitResult r = a.best[t];
    if (!r.found) return;
    const u32 offset = a.slot_offsets[r.feature], n_bins = a.slot_offsets[r.feature + 1] - offset - 1;
    const GradSum* h = a.hist + (u64)a.tasks[(u64)t * a.n_outputs + k].slot * a.total_slots + offset;
    i64 g = 0, hh = 0;
    for (u32 b = lane; b <= r.split_bin; b += 32) {
        g += h[b].g;
        hh += h[b].h;
    }
    for (int o = 16; o > 0; o /= 2) {
        g += __shfl_xor_sync(0xffffffffu, g, o);
        hh += __shfl_xor_sync(0xffffffffu, hh, o);
    }
    if (lane != 0) return;
    if (r.default_left) {
        g += h[n_bins].g;
        hh += h[n_bins].h;
    }
    a.out[(u64)t * a.n_outputs + k] = GradSum{g, hh};
}
