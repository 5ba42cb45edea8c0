// Split search, vector leaves; it follows split.cu in the concatenation and uses its gain
// formula per output. A vector-leaf node (multi_output_tree) has a histogram per output; a
// split's gain is the sum over the outputs of each one's scalar terms
// (src/tree/split_vector.rs, VectorScorer, mirrored operation for operation, in the same order
// over the outputs). Its tasks are the nodes'
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
