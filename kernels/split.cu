// Split search for every node of a level in one launch: block (feature, node) scans one
// feature's histogram, a second launch keeps each node's best feature. The arithmetic mirrors
// src/tree/split.rs operation for operation, in double precision and without FMA contraction
// (--fmad=false), so gains, and therefore the chosen splits, equal the CPU's bit for bit.

#define MIN_GAIN 1e-6
#define SCAN_THREADS 256

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

// Grid (n_features, n_tasks), SCAN_THREADS threads: the best numeric split of one feature of one node.
extern "C" __global__ void evaluate_features(const GradSum* hist, u32 total_slots, const u32* slot_offsets,
                                             const u32* categorical, const EvalTask* tasks, const u8* masks,
                                             const i8* monotone, u32 n_features, SplitParams p,
                                             SplitResult* out) {
    __shared__ i64 warp_g[32], warp_h[32];
    __shared__ double red_gain[SCAN_THREADS];
    __shared__ u32 red_key[SCAN_THREADS];
    const u32 f = blockIdx.x, t = blockIdx.y;
    const EvalTask task = tasks[t];
    SplitResult* result = out + (u64)t * n_features + f;
    const bool allowed = !categorical[f] && (task.mask_row == NO_CHILD || masks[(u64)task.mask_row * n_features + f]);
    if (!allowed) {
        if (threadIdx.x == 0) result->found = 0;
        return;
    }
    const GradSum* h = hist + (u64)task.slot * total_slots + slot_offsets[f];
    const u32 n_bins = slot_offsets[f + 1] - slot_offsets[f] - 1;
    const GradSum missing = h[n_bins];
    const bool has_missing = missing.g != 0 || missing.h != 0;
    const GradSum total = task.total;
    const int direction = monotone[f];
    double parent_weight;
    const double parent_score =
        bounded_score(p, (double)total.g * p.g_unit, (double)total.h * p.h_unit, task, &parent_weight);

    double best_gain = -1.0 / 0.0;
    u32 best_key = 0xffffffffu;
    i64 carry_g = 0, carry_h = 0;
    for (u32 base = 0; base < n_bins; base += blockDim.x) {
        const u32 b = base + threadIdx.x;
        GradSum slot = {0, 0};
        if (b < n_bins) slot = h[b];
        i64 g = slot.g, hh = slot.h;
        block_scan(g, hh, warp_g, warp_h);
        GradSum left = {carry_g + g, carry_h + hh};
        if (b < n_bins && (slot.g != 0 || slot.h != 0)) {
            double gain;
            if (has_missing) {
                if (split_gain(p, task, left, direction, parent_score, &gain) && better(gain, 2 * b, best_gain, best_key)) {
                    best_gain = gain;
                    best_key = 2 * b;
                }
                GradSum with_missing = {left.g + missing.g, left.h + missing.h};
                if (split_gain(p, task, with_missing, direction, parent_score, &gain) &&
                    better(gain, 2 * b + 1, best_gain, best_key)) {
                    best_gain = gain;
                    best_key = 2 * b + 1;
                }
            } else if (split_gain(p, task, left, direction, parent_score, &gain) && better(gain, 2 * b, best_gain, best_key)) {
                best_gain = gain;
                best_key = 2 * b;
            }
        }
        // The last thread's prefix is the chunk's total.
        if (threadIdx.x == blockDim.x - 1) { warp_g[0] = g; warp_h[0] = hh; }
        __syncthreads();
        carry_g += warp_g[0];
        carry_h += warp_h[0];
        __syncthreads();
    }
    red_gain[threadIdx.x] = best_gain;
    red_key[threadIdx.x] = best_key;
    __syncthreads();
    for (u32 s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s && better(red_gain[threadIdx.x + s], red_key[threadIdx.x + s], red_gain[threadIdx.x],
                                      red_key[threadIdx.x])) {
            red_gain[threadIdx.x] = red_gain[threadIdx.x + s];
            red_key[threadIdx.x] = red_key[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    if (red_key[0] == 0xffffffffu) {
        result->found = 0;
        return;
    }
    // Recompute the winner's left sum from the histogram: one thread, at most n_bins adds.
    const u32 bin = red_key[0] / 2;
    GradSum left = {0, 0};
    for (u32 b = 0; b <= bin; ++b) { left.g += h[b].g; left.h += h[b].h; }
    bool default_left;
    if (has_missing) {
        default_left = (red_key[0] & 1) != 0;
        if (default_left) { left.g += missing.g; left.h += missing.h; }
    } else {
        default_left = left.h >= total.h - left.h;  // unseen missing values follow the heavier child
    }
    result->left = left;
    result->gain = red_gain[0];
    result->feature = f;
    result->split_bin = bin;
    result->default_left = default_left ? 1 : 0;
    result->found = 1;
}

// One warp per node: the best feature, ties to the lowest feature index (as on the CPU).
extern "C" __global__ void best_feature(const SplitResult* per_feature, u32 n_features, u32 n_tasks,
                                        SplitResult* out) {
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

// Copies the histogram slots listed in `slots` of each task's node into out[task][i]: the
// categorical features' histograms, which the host searches with the CPU's own code.
extern "C" __global__ void gather_slots(const GradSum* hist, u32 total_slots, const EvalTask* tasks,
                                        const u32* slots, u32 n_slots, GradSum* out) {
    const GradSum* h = hist + (u64)tasks[blockIdx.x].slot * total_slots;
    for (u32 i = threadIdx.x; i < n_slots; i += blockDim.x) out[(u64)blockIdx.x * n_slots + i] = h[slots[i]];
}
