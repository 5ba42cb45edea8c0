// e^x computed exactly as src/math.rs computes it on the host, operation for operation,
// so that the CPU and the GPU see the same gradients and predictions, bit for bit (CUDA's expf
// differs from the host's in the last bit for some inputs). It needs the kernels' flags:
// --fmad=false (no contraction into fused multiply-adds) and subnormals kept (no -ftz).

#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.1219444e-4f

__device__ __forceinline__ float exp_pow2(int i) { return __int_as_float((i + 127) << 23); }

__device__ __forceinline__ float portable_expf(float x) {
    if (x != x) return x;
    if (x > 89.0f) return __int_as_float(0x7f800000);
    if (x < -104.0f) return 0.0f;
    const float k = floorf(x * 1.44269504f + 0.5f);
    const float r = (x - k * EXP_LN2_HI) - k * EXP_LN2_LO;
    float p = 0.00019790353f;
    p = p * r + 0.0013944649f;
    p = p * r + 0.008333497f;
    p = p * r + 0.041666295f;
    p = p * r + 0.16666666f;
    p = p * r + 0.5f;
    const float y = (r * r * p + r) + 1.0f;
    const int ki = (int)k;
    const int half = ki / 2;
    return y * exp_pow2(half) * exp_pow2(ki - half);
}

__device__ __forceinline__ float portable_sigmoidf(float x) { return 1.0f / (1.0f + portable_expf(-x)); }

// The parts of a logarithm of a positive, finite, normal double, as src/math.rs (log_parts)
// computes them: the exponent e, into *e, and ln m of the mantissa m in [sqrt(1/2), sqrt(2)).
__device__ __forceinline__ double portable_log_parts(double x, long long* e) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(x);
    *e = (long long)((bits >> 52) & 0x7ffull) - 1023;
    double m = __longlong_as_double((long long)((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull));
    if (m > 1.4142135623730951) {
        m *= 0.5;
        *e += 1;
    }
    const double s = (m - 1.0) / (m + 1.0);
    const double s2 = s * s;
    double series = 1.0 / 23.0;
    for (double k = 21.0; k > 0.0; k -= 2.0) series = series * s2 + 1.0 / k;
    return 2.0 * s * series;
}

// log2 of a positive, finite, normal double, as src/math.rs (log2) computes it.
__device__ __forceinline__ double portable_log2(double x) {
    long long e;
    const double ln_m = portable_log_parts(x, &e);
    return (double)e + ln_m * 1.4426950408889634;
}

// ln of a double, as src/math.rs (ln) computes it: the metrics' logarithm.
__device__ __forceinline__ double portable_log(double x) {
    if (x != x || x < 0.0) return __longlong_as_double(0x7ff8000000000000ll);
    if (x == 0.0) return __longlong_as_double((long long)0xfff0000000000000ull);
    if (x == __longlong_as_double(0x7ff0000000000000ll)) return x;
    long long shift = 0;
    if (x < 2.2250738585072014e-308) {
        x *= 18014398509481984.0;
        shift = -54;
    }
    long long e;
    const double ln_m = portable_log_parts(x, &e);
    const double ef = (double)(e + shift);
    return ef * __longlong_as_double(0x3fe62e42fee00000ll) + (ln_m + ef * __longlong_as_double(0x3dea39ef35793c76ll));
}
