// Gradients of the common objectives, and their quantisation to fixed point. Objectives
// without a kernel here have their gradients computed on the host and quantised below.
// Formulas mirror src/objective/*.rs exactly (the kernels are compiled with --fmad=false), so
// the CPU and GPU see the same gradients.

// The objectives' codes: the discriminants of GpuGradient (src/objective/descriptor.rs), which
// the layout probe (src/backend/cuda/layout.rs) checks against these.
#define OBJECTIVE_SQUARED_ERROR 0u
#define OBJECTIVE_LOGISTIC 1u
#define OBJECTIVE_PSEUDO_HUBER 2u
#define OBJECTIVE_POISSON 3u
#define OBJECTIVE_TWEEDIE 4u
#define OBJECTIVE_SOFTMAX 5u
#define OBJECTIVE_GAMMA 6u
#define OBJECTIVE_QUANTILE 7u
#define OBJECTIVE_ABSOLUTE_ERROR 8u
#define OBJECTIVE_EXPECTILE 9u

// The kernels' argument structs (each kernel takes one, by value), mirrored in
// src/backend/cuda/gradients.rs and checked by the layout probe.

// The rows of one output whose gradients an objective kernel computes (objective_gradient's
// arguments). Null `weight`, `repeats`: none.
struct ObjectiveRows {
    u32 kind;
    float param;
    const float* margin;
    const float* label;
    const float* weight;
    const float* repeats;
    u32 n;
    u32 k;
    u32 c;
};

struct ObjectiveMaxArgs {
    ObjectiveRows rows;
    Quantisation* q;
};

// `sum` (zeroed; null: not wanted): the quantised pairs of every row summed, the root's total
// when the tree takes every row.
struct ObjectiveQuantiseArgs {
    ObjectiveRows rows;
    const Quantisation* q;
    QuantGrad* out;
    GradSum* sum;
};

// Float gradient pairs computed elsewhere (the host, the ranking kernel).
struct GradientRows {
    const GradPair* grads;
    const float* repeats;
    u32 n;
};

struct GradientMaxArgs {
    GradientRows rows;
    Quantisation* q;
};

struct QuantiseArgs {
    GradientRows rows;
    const Quantisation* q;
    QuantGrad* out;
};

struct FinishQuantisationArgs {
    Quantisation* q;
    u32 shrink_bits;
};

struct SumRowsArgs {
    const QuantGrad* grads;
    const u32* ridx;
    u32 n;
    GradSum* out;
};

struct FillIdentityArgs {
    u32* ridx;
    u32 n;
};

// The gradient pair of output c of row i; margins are class-major (output c of row i at
// c * n + i). `param`: the Huber slope, the Tweedie power, the
// logistic loss's scale_pos_weight, or output c's quantile. Each formula repeats its Rust
// twin in src/objective/ operation for operation.
__device__ __forceinline__ GradPair objective_gradient(u32 kind, const float* margin, const float* label,
                                                       const float* weight, u32 i, u32 n, u32 k, u32 c,
                                                       float param) {
    const float w = weight ? weight[i] : 1.0f;
    // Output c's labels: the host passes target c's column when there are several targets.
    const float y = label[i];
    GradPair p;
    if (kind == OBJECTIVE_SOFTMAX) {
        float max = -__int_as_float(0x7f800000);  // -infinity
        for (u32 j = 0; j < k; ++j) max = fmaxf(max, margin[(u64)j * n + i]);
        float sum = 0.0f, mine = 0.0f;
        for (u32 j = 0; j < k; ++j) {
            const float e = portable_expf(margin[(u64)j * n + i] - max);
            sum += e;
            if (j == c) mine = e;
        }
        const float pc = mine / sum;
        const float target = (u32)y == c ? 1.0f : 0.0f;
        p.g = (pc - target) * w;
        p.h = fmaxf(2.0f * pc * (1.0f - pc), 1e-16f) * w;
        return p;
    }
    const float m = margin[(u64)c * n + i];
    switch (kind) {
        case OBJECTIVE_LOGISTIC: {
            // param: scale_pos_weight, on rows labelled exactly 1 (as XGBoost).
            const float ws = y == 1.0f ? w * param : w;
            const float prob = portable_sigmoidf(m);
            p.g = (prob - y) * ws;
            p.h = fmaxf(prob * (1.0f - prob), 1e-16f) * ws;
            break;
        }
        case OBJECTIVE_PSEUDO_HUBER: {
            const float z = m - y;
            const float s = sqrtf(1.0f + (z / param) * (z / param));
            p.g = z / s * w;
            p.h = w / (s * s * s);
            break;
        }
        case OBJECTIVE_POISSON:
            p.g = (portable_expf(m) - y) * w;
            p.h = portable_expf(m + 0.7f) * w;
            break;
        case OBJECTIVE_GAMMA: {
            const float ratio = y / portable_expf(m);
            p.g = (1.0f - ratio) * w;
            p.h = ratio * w;
            break;
        }
        case OBJECTIVE_TWEEDIE: {
            const float a = portable_expf((1.0f - param) * m), b = portable_expf((2.0f - param) * m);
            p.g = (-y * a + b) * w;
            p.h = (-y * (1.0f - param) * a + (2.0f - param) * b) * w;
            break;
        }
        case OBJECTIVE_QUANTILE:
        case OBJECTIVE_ABSOLUTE_ERROR:
            // Which side of the label: the leaves are refit to quantiles afterwards.
            p.g = (m >= y ? 1.0f - param : -param) * w;
            p.h = w;
            break;
        case OBJECTIVE_EXPECTILE: {
            // param: expectile_alpha; 1 - alpha at or above the label, alpha below it.
            const float d = m - y;
            const float side = d >= 0.0f ? 1.0f - param : param;
            p.g = side * d * w;
            p.h = side * w;
            break;
        }
        case OBJECTIVE_SQUARED_ERROR:
            p.g = (m - y) * w;
            p.h = w;
            break;
        case OBJECTIVE_SOFTMAX:  // returned above
        default:
            // A backstop only: the host checks every code before a launch (objective_code in
            // src/backend/cuda/gradients.rs), and that check is how an unknown code is reported.
            // A trap poisons the whole CUDA context, so it must never be the error path.
            __trap();
    }
    return p;
}

__device__ __forceinline__ void max_into(Quantisation* q, float gm, float hm, bool negative) {
    for (int o = 16; o > 0; o /= 2) {
        gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, o));
        hm = fmaxf(hm, __shfl_xor_sync(0xffffffffu, hm, o));
    }
    negative = __any_sync(0xffffffffu, negative);
    if ((threadIdx.x & 31) == 0) {
        atomicMax(&q->g_max_bits, __float_as_uint(gm));
        atomicMax(&q->h_max_bits, __float_as_uint(hm));
        if (negative) atomicOr(&q->negative_hessian, 1u);
    }
}

// Whole sample weights applied after rounding (src/tree/gradient.rs: Weighting::Repeats):
// `repeats` holds them, and the objective then sees no weights. Null: the objective applied
// the weights (or there are none). A row of weight 0 takes no part in the scale.

// The objectives with a kernel never store float gradients: one pass finds the largest
// magnitudes, a second recomputes each gradient and quantises it (a few flops per row are
// cheaper than 8 bytes per row of device memory, written and read back).
__device__ __forceinline__ void objective_max_body(u32 kind, float param, const float* margin, const float* label,
                                                  const float* weight, const float* repeats, u32 n, u32 k, u32 c,
                                                  Quantisation* q) {
    float gm = 0.0f, hm = 0.0f;
    bool negative = false;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (repeats && repeats[i] == 0.0f) continue;
        GradPair p = objective_gradient(kind, margin, label, weight, i, n, k, c, param);
        gm = fmaxf(gm, fabsf(p.g));
        hm = fmaxf(hm, fabsf(p.h));
        negative |= p.h < 0.0f;
    }
    max_into(q, gm, hm, negative);
}

extern "C" __global__ void objective_max(const ObjectiveMaxArgs a) {
    const ObjectiveRows& r = a.rows;
    objective_max_body(r.kind, r.param, r.margin, r.label, r.weight, r.repeats, r.n, r.k, r.c, a.q);
}

// Largest |g| and |h|, into q (zeroed before the launch).
__device__ __forceinline__ void gradient_max_body(const GradPair* grads, const float* repeats, u32 n, Quantisation* q) {
    float gm = 0.0f, hm = 0.0f;
    bool negative = false;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (repeats && repeats[i] == 0.0f) continue;
        GradPair p = grads[i];
        gm = fmaxf(gm, fabsf(p.g));
        hm = fmaxf(hm, fabsf(p.h));
        negative |= p.h < 0.0f;
    }
    max_into(q, gm, hm, negative);
}

extern "C" __global__ void gradient_max(const GradientMaxArgs a) {
    gradient_max_body(a.rows.grads, a.rows.repeats, a.rows.n, a.q);
}

// The largest power of two with max_abs * scale <= 2^15 (src/tree/gradient.rs: scale_for).
__device__ double scale_for(float max_abs) {
    if (!(max_abs > 0.0f) || isinf(max_abs)) return 1.0;
    int e;
    double m = frexp((double)max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
    int ceil_log2 = (m == 0.5) ? e - 1 : e;
    return ldexp(1.0, 15 - ceil_log2);
}

// The scales, lowered `shrink_bits` halvings (Weighting::shrink_bits: exact, powers of two).
extern "C" __global__ void finish_quantisation(const FinishQuantisationArgs a) {
    Quantisation* q = a.q;
    const u32 shrink_bits = a.shrink_bits;
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        q->g_scale = ldexp(scale_for(__uint_as_float(q->g_max_bits)), -(int)shrink_bits);
        q->h_scale = ldexp(scale_for(__uint_as_float(q->h_max_bits)), -(int)shrink_bits);
    }
}

// Row i's pair rounded to fixed point, then times its whole weight when there are repeats.
__device__ __forceinline__ QuantGrad quantise_pair(GradPair p, double gs, double hs, const float* repeats, u32 i) {
    QuantGrad r;
    // A row of weight 0 took no part in the scale: its pair may not fit; it adds nothing.
    const int w = repeats ? (int)repeats[i] : 1;
    if (w == 0) {
        r.g = 0;
        r.h = 0;
        return r;
    }
    r.g = (int)round((double)p.g * gs) * w;
    r.h = (int)round((double)p.h * hs) * w;
    return r;
}

__device__ __forceinline__ void quantise_body(const GradPair* grads, const float* repeats, u32 n, const Quantisation* q,
                                              QuantGrad* out) {
    double gs = q->g_scale, hs = q->h_scale;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = quantise_pair(grads[i], gs, hs, repeats, i);
}

extern "C" __global__ void quantise(const QuantiseArgs a) {
    quantise_body(a.rows.grads, a.rows.repeats, a.rows.n, a.q, a.out);
}

// Adds every thread's (g, h) sums into `out` (a whole grid's total): summed within each warp,
// then one 64-bit atomic each a warp. Integer sums: the same total in any order. Every lane of
// a warp must call it.
__device__ __forceinline__ void add_thread_sums(GradSum* out, i64 g, i64 h) {
    for (int o = 16; o > 0; o /= 2) {
        g += __shfl_xor_sync(0xffffffffu, g, o);
        h += __shfl_xor_sync(0xffffffffu, h, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd((u64*)&out->g, (u64)g);
        atomicAdd((u64*)&out->h, (u64)h);
    }
}

__device__ __forceinline__ void objective_quantise_body(u32 kind, float param, const float* margin,
                                                       const float* label, const float* weight,
                                                       const float* repeats, u32 n, u32 k, u32 c,
                                                       const Quantisation* q, QuantGrad* out, GradSum* sum) {
    double gs = q->g_scale, hs = q->h_scale;
    i64 g = 0, h = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const QuantGrad p =
            quantise_pair(objective_gradient(kind, margin, label, weight, i, n, k, c, param), gs, hs, repeats, i);
        out[i] = p;
        g += p.g;
        h += p.h;
    }
    if (sum != nullptr) add_thread_sums(sum, g, h);
}

extern "C" __global__ void objective_quantise(const ObjectiveQuantiseArgs a) {
    const ObjectiveRows& r = a.rows;
    objective_quantise_body(r.kind, r.param, r.margin, r.label, r.weight, r.repeats, r.n, r.k, r.c, a.q, a.out,
                            a.sum);
}

// Sum of the quantised pairs of rows ridx[0..n] (the root's total), into out (zeroed).
extern "C" __global__ void sum_rows(const SumRowsArgs a) {
    const QuantGrad* grads = a.grads;
    const u32* ridx = a.ridx;
    const u32 n = a.n;
    GradSum* out = a.out;
    i64 g = 0, h = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        QuantGrad q = grads[ridx[i]];
        g += q.g;
        h += q.h;
    }
    add_thread_sums(out, g, h);
}

extern "C" __global__ void fill_identity(const FillIdentityArgs a) {
    u32* ridx = a.ridx;
    const u32 n = a.n;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) ridx[i] = i;
}
