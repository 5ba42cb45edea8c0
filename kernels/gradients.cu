// Gradients of the common objectives, and their quantisation to fixed point. Objectives
// without a kernel here have their gradients computed on the host and quantised below.
// Formulas mirror src/objective/*.rs exactly (the kernels are compiled with --fmad=false), so
// the CPU and GPU see the same gradients.

#define OBJECTIVE_SQUARED_ERROR 0u
#define OBJECTIVE_LOGISTIC 1u

__device__ __forceinline__ GradPair objective_gradient(u32 kind, float margin, float label, float w) {
    GradPair p;
    if (kind == OBJECTIVE_LOGISTIC) {
        float prob = 1.0f / (1.0f + expf(-margin));
        p.g = (prob - label) * w;
        p.h = fmaxf(prob * (1.0f - prob), 1e-16f) * w;
    } else {
        p.g = (margin - label) * w;
        p.h = w;
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

// The objectives with a kernel never store float gradients: one pass finds the largest
// magnitudes, a second recomputes each gradient and quantises it (a few flops per row are
// cheaper than 8 bytes per row of device memory, written and read back).
extern "C" __global__ void objective_max(u32 kind, const float* margin, const float* label, const float* weight, u32 n,
                                         Quantisation* q) {
    float gm = 0.0f, hm = 0.0f;
    bool negative = false;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        GradPair p = objective_gradient(kind, margin[i], label[i], weight ? weight[i] : 1.0f);
        gm = fmaxf(gm, fabsf(p.g));
        hm = fmaxf(hm, fabsf(p.h));
        negative |= p.h < 0.0f;
    }
    max_into(q, gm, hm, negative);
}

// Largest |g| and |h|, into q (zeroed before the launch).
extern "C" __global__ void gradient_max(const GradPair* grads, u32 n, Quantisation* q) {
    float gm = 0.0f, hm = 0.0f;
    bool negative = false;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        GradPair p = grads[i];
        gm = fmaxf(gm, fabsf(p.g));
        hm = fmaxf(hm, fabsf(p.h));
        negative |= p.h < 0.0f;
    }
    max_into(q, gm, hm, negative);
}

// The largest power of two with max_abs * scale <= 2^15 (src/tree/gradient.rs: scale_for).
__device__ double scale_for(float max_abs) {
    if (!(max_abs > 0.0f) || isinf(max_abs)) return 1.0;
    int e;
    double m = frexp((double)max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
    int ceil_log2 = (m == 0.5) ? e - 1 : e;
    return ldexp(1.0, 15 - ceil_log2);
}

extern "C" __global__ void finish_quantisation(Quantisation* q) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        q->g_scale = scale_for(__uint_as_float(q->g_max_bits));
        q->h_scale = scale_for(__uint_as_float(q->h_max_bits));
    }
}

__device__ __forceinline__ QuantGrad quantise_pair(GradPair p, double gs, double hs) {
    QuantGrad r;
    r.g = (int)round((double)p.g * gs);
    r.h = (int)round((double)p.h * hs);
    return r;
}

extern "C" __global__ void quantise(const GradPair* grads, u32 n, const Quantisation* q, QuantGrad* out) {
    double gs = q->g_scale, hs = q->h_scale;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = quantise_pair(grads[i], gs, hs);
}

extern "C" __global__ void objective_quantise(u32 kind, const float* margin, const float* label, const float* weight,
                                              u32 n, const Quantisation* q, QuantGrad* out) {
    double gs = q->g_scale, hs = q->h_scale;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = quantise_pair(objective_gradient(kind, margin[i], label[i], weight ? weight[i] : 1.0f), gs, hs);
}

// Sum of the quantised pairs of rows ridx[0..n] (the root's total), into out (zeroed).
extern "C" __global__ void sum_rows(const QuantGrad* grads, const u32* ridx, u32 n, GradSum* out) {
    i64 g = 0, h = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        QuantGrad q = grads[ridx[i]];
        g += q.g;
        h += q.h;
    }
    for (int o = 16; o > 0; o /= 2) {
        g += __shfl_xor_sync(0xffffffffu, g, o);
        h += __shfl_xor_sync(0xffffffffu, h, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd((u64*)&out->g, (u64)g);
        atomicAdd((u64*)&out->h, (u64)h);
    }
}

extern "C" __global__ void fill_identity(u32* ridx, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) ridx[i] = i;
}
