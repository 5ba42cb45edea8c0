// Split search for every node of a level in one launch: block (feature, node) scans one
// feature's histogram, a second launch keeps each node's best feature. The arithmetic mirrors
// src/tree/split/ (mod.rs and numeric.rs) operation for operation, in double precision and
// without FMA contraction (--fmad=false), so gains, and therefore the chosen splits, equal the
// CPU's bit for bit. This file holds the gain formula and the numeric search; the categorical
// search (split_categorical.cu) and the vector-leaf search (split_vector.cu) follow it in the
// concatenation and use its helpers.

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
