// SHAP values (exact TreeSHAP) from raw feature values; src/backend/cuda/shap.rs lays the
// forest out. The design follows the idea of GPUTreeShap (Mitchell, Frank, Wang and Coleman,
// 2022): TreeSHAP's recursion visits every leaf, and what it adds at a leaf depends only on
// the path to it. So each root-to-leaf path is a list of elements, one per distinct feature it
// splits on (splits on the same feature merged: their cover shares multiplied, their tests
// all required), and a path's contributions to a row are computed on their own.
//
// Paths are packed into warps: one element per lane, a path's elements on consecutive lanes,
// its first lane a bias element with no feature. For one row, the lanes of a path hold the
// weights of the feature subsets of each size ("extend" in Lundberg et al., 2018, built by
// shuffles), then each lane takes its own feature out again ("unwound sum") for its
// contribution. A warp keeps its paths in registers and walks a tile of rows, two rows per
// step (their chains of shuffles overlap); contributions gather in shared memory and go to
// global memory once per tile. Interactions take one row per step.
//
// The arithmetic is the CPU's (src/backend/cpu/shap.rs) in floats, with divisions turned into
// multiplications by reciprocals; the sums of contributions are in atomic (unordered) float
// additions, so the last bits of a value may differ between runs.

#define SHAP_NO_FEATURE 0xffffffffu
// In a split's word, beside PRED_DEFAULT_LEFT and PRED_CATEGORICAL: the path goes left here.
#define SHAP_TAKES_LEFT 0x20000000u
#define SHAP_FULL 0xffffffffu
// Reciprocals 1 / k of the path arithmetic: k up to a path's length plus one.
#define LANES_RECIP 34

// One lane of a packed warp: one feature of one path (src/backend/cuda/layout.rs: ShapElement).
struct ShapElement {
    u32 feature;  // SHAP_NO_FEATURE: the path's bias element, or a padding lane
    float zero;  // the share of the cover that follows the path at this feature's splits
    float value;  // the path's leaf value
    u32 output;  // the output its tree adds to
    u32 shape;  // the path's first lane (bits 0-7) and length (bits 8-15); length 0: padding
    u32 word;  // the path's first split on the feature: flags as PredNode, and SHAP_TAKES_LEFT
    float threshold;  // its threshold, or the bits of its category set's index
    u32 more_begin;  // further splits on the feature along the path: [more_begin, more_end)
    u32 more_end;
};

// A further split of an element (its feature's word and threshold, as above).
struct ShapSplit {
    u32 word;
    float threshold;
};

__device__ __forceinline__ bool shap_follows(u32 word, float threshold, float x, const uint2* __restrict__ sets,
                                             const u32* __restrict__ words) {
    return goes_left<true>(word, threshold, x, sets, words) == ((word & SHAP_TAKES_LEFT) != 0);
}

// 1 when the value `v` of the element's feature follows every split of that feature along
// the path, else 0 (the bias element, with no feature, always 1).
__device__ __forceinline__ float shap_one(const ShapElement& e, float v, const ShapSplit* __restrict__ more,
                                          const uint2* __restrict__ sets, const u32* __restrict__ words) {
    if (e.feature == SHAP_NO_FEATURE) return 1.0f;
    bool follows = shap_follows(e.word, e.threshold, v, sets, words);
    for (u32 i = e.more_begin; i < e.more_end; ++i) {
        const ShapSplit s = more[i];
        follows = follows && shap_follows(s.word, s.threshold, v, sets, words);
    }
    return follows ? 1.0f : 0.0f;
}

// Divisions are the costly part of the path arithmetic (an IEEE division is a dozen
// instructions), and every divisor is a small integer or an element's zero fraction: so the
// kernels divide by multiplying with `recip[k]` = 1 / k (correctly rounded, in shared memory)
// and with each element's 1 / zero, computed once per warp of paths.

// The path's subset weights after every element has been added (TreeSHAP's EXTEND), for R
// rows at once (independent chains whose shuffles overlap; the zero fractions and reciprocals
// are shared): the lane at position `pos` of its path gets, per row, the weight of the subsets
// of size `pos`. Every lane of the warp runs the same `max_len` steps; lanes past their path's
// length only keep their value. (A lane above step i keeps 0: its own weight and the one below
// it are still 0; the first lane of a path takes nothing from below, as `pos` is 0.)
template <int R>
__device__ __forceinline__ void shap_extend(float zero, const float (&one)[R], u32 first, u32 pos, u32 len,
                                            u32 max_len, const float* recip, float (&w)[R]) {
    const float pos_f = (float)pos;
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = pos == 0 ? 1.0f : 0.0f;
    float i_f = 1.0f;
    for (u32 i = 1; i < max_len; ++i, i_f += 1.0f) {
        const float zero_i = __shfl_sync(SHAP_FULL, zero, (first + i) & 31);
        const float kept = zero_i * (i_f - pos_f), step = recip[i + 1];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float one_i = __shfl_sync(SHAP_FULL, one[r], (first + i) & 31);
            const float below = __shfl_up_sync(SHAP_FULL, w[r], 1);
            const float next = (w[r] * kept + one_i * below * pos_f) * step;
            w[r] = i < len ? next : w[r];
        }
    }
}

// The total weight of the path of `len` elements (weights `w`, one per lane, per row) with one
// element (fractions `one` per row, `zero`, and 1 / zero) taken out (TreeSHAP's UNWOUNDSUM),
// without changing the weights. `one` is 0 or 1; both cases are computed, without a branch.
template <int R>
__device__ __forceinline__ void shap_unwound_sum(const float (&w)[R], const float (&one)[R], float zero,
                                                 float inv_zero, u32 first, u32 len, u32 max_len, const float* recip,
                                                 float (&total)[R]) {
    const u32 l = len > 0 ? len - 1 : 0;
    const float grown = (float)(l + 1), zero_shrunk = zero * recip[l + 1], grown_inv_zero = grown * inv_zero;
    float next[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        next[r] = __shfl_sync(SHAP_FULL, w[r], (first + l) & 31);
        total[r] = 0.0f;
    }
    for (int j = (int)max_len - 2; j >= 0; --j) {
        const bool inside = (u32)j < l;
        const float up = grown * recip[j + 1], down = grown_inv_zero * recip[inside ? l - j : 1];
        const float shrink = zero_shrunk * (float)(l - j);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float wj = __shfl_sync(SHAP_FULL, w[r], (first + (u32)j) & 31);
            if (inside) {
                const float t = next[r] * up;
                total[r] += one[r] != 0.0f ? t : wj * down;
                next[r] = wj - t * shrink;
            }
        }
    }
}

// The weights of the path with the element of fractions (`one`, `zero`, 1 / zero) taken out
// (TreeSHAP's UNWIND): the lane at position p gets the weight of size p of the `len - 1` left.
__device__ __forceinline__ float shap_unwind(float w, float one, float zero, float inv_zero, u32 first, u32 pos,
                                             u32 len, u32 max_len, const float* recip) {
    const u32 l = len > 0 ? len - 1 : 0;
    const float grown = (float)(l + 1), shrink = recip[l + 1];
    float next = __shfl_sync(SHAP_FULL, w, (first + l) & 31);
    float mine = 0.0f;
    for (int j = (int)max_len - 2; j >= 0; --j) {
        const float wj = __shfl_sync(SHAP_FULL, w, (first + (u32)j) & 31);
        if ((u32)j < l) {
            float unwound;
            if (one != 0.0f) {
                unwound = next * grown * recip[j + 1];
                next = wj - unwound * zero * (float)(l - j) * shrink;
            } else {
                unwound = wj * grown * inv_zero * recip[l - j];
            }
            if ((u32)j == pos) mine = unwound;
        }
    }
    return mine;
}

// The SHAP values of rows [r, r + R) of the tile (row0 + r, ...) from one warp of paths:
// added to the tile's values in shared memory (SHARED) or straight to `out`.
template <int R, bool SHARED>
__device__ __forceinline__ void shap_contrib_rows(const ShapElement& e, u32 r, u32 row0, const float* __restrict__ x,
                                                  u32 n, const float* s_x, u32 staged, u32 n_features,
                                                  const ShapSplit* __restrict__ more, const uint2* __restrict__ sets,
                                                  const u32* __restrict__ words, u32 first, u32 pos, u32 len,
                                                  u32 max_len, float inv_zero, const float* recip, u32 m,
                                                  u32 out_width, float* s_out, float* __restrict__ out) {
    float one[R], w[R], total[R];
#pragma unroll
    for (int k = 0; k < R; ++k) {
        float v = 0.0f;
        if (e.feature != SHAP_NO_FEATURE) {
            v = staged ? s_x[(r + k) * n_features + e.feature] : __ldg(&x[(size_t)e.feature * n + row0 + r + k]);
        }
        one[k] = shap_one(e, v, more, sets, words);
    }
    shap_extend<R>(e.zero, one, first, pos, len, max_len, recip, w);
    shap_unwound_sum<R>(w, one, e.zero, inv_zero, first, len, max_len, recip, total);
    if (pos > 0 && pos < len) {
        const u32 at = e.output * m + e.feature;
#pragma unroll
        for (int k = 0; k < R; ++k) {
            const float phi = total[k] * (one[k] - e.zero) * e.value;
            if (SHARED) {
                atomicAdd(&s_out[(r + k) * out_width + at], phi);
            } else {
                atomicAdd(&out[(size_t)(row0 + r + k) * out_width + at], phi);
            }
        }
    }
}

// Rows [row0 + ...) of `x` (column-major, `n` rows, feature f at f * n), in tiles of
// `tile_rows`; this block's paths are warps [blockIdx.y * bins_per_group, ...). `out` holds
// `out_width` values per row: per output, `n_features + 1` SHAP values (bias last, left to the
// host) or, with INTERACTIONS, a matrix of (n_features + 1) squared. SHARED gathers a tile's
// SHAP values in shared memory first; `staged` copies a tile's rows into shared memory
// (row-major, so the lanes of a warp, which ask for different features of one row, read
// different banks) after the values, when they fit.
template <bool SHARED, bool INTERACTIONS>
__device__ void shap_rows(const float* __restrict__ x, u32 n, const ShapElement* __restrict__ elements, u32 n_bins,
                          u32 bins_per_group, const ShapSplit* __restrict__ more, const uint2* __restrict__ sets,
                          const u32* __restrict__ words, u32 n_features, u32 out_width, float* __restrict__ out,
                          u32 tile_rows, u32 staged) {
    extern __shared__ __align__(16) unsigned char smem[];
    float* s_out = (float*)smem;
    float* s_x = s_out + (SHARED ? tile_rows * out_width : 0);
    __shared__ float recip[LANES_RECIP];
    for (u32 k = threadIdx.x; k < LANES_RECIP; k += blockDim.x) recip[k] = k > 0 ? 1.0f / (float)k : 0.0f;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const u32 m = n_features + 1;
    const u32 bin_begin = blockIdx.y * bins_per_group;
    const u32 bin_end = min(n_bins, bin_begin + bins_per_group);
    for (u32 row0 = blockIdx.x * tile_rows; row0 < n; row0 += gridDim.x * tile_rows) {
        const u32 rows = min(tile_rows, n - row0);
        if (SHARED) {
            for (u32 i = threadIdx.x; i < rows * out_width; i += blockDim.x) s_out[i] = 0.0f;
        }
        if (staged) {
            // Coalesced reads down each column.
            for (u32 i = threadIdx.x; i < rows * n_features; i += blockDim.x) {
                const u32 f = i / rows, r = i - f * rows;
                s_x[r * n_features + f] = x[(size_t)f * n + row0 + r];
            }
        }
        __syncthreads();
        for (u32 bin = bin_begin + warp; bin < bin_end; bin += warps) {
            const ShapElement e = elements[(size_t)bin * 32 + lane];
            const u32 first = e.shape & 0xff, len = (e.shape >> 8) & 0xff, pos = lane - first;
            u32 max_len = len;
            for (int o = 16; o > 0; o /= 2) max_len = max(max_len, __shfl_xor_sync(SHAP_FULL, max_len, o));
            const bool contributes = pos > 0 && pos < len;
            // A zero fraction of 0 (a branch no training row took) has no inverse; its terms are 0.
            const float inv_zero = e.zero != 0.0f ? 1.0f / e.zero : 0.0f;
            const bool has_feature = e.feature != SHAP_NO_FEATURE;
            if (!INTERACTIONS) {
                // Two rows per step, then the odd one out.
                u32 r = 0;
                for (; r + 2 <= rows; r += 2) {
                    shap_contrib_rows<2, SHARED>(e, r, row0, x, n, s_x, staged, n_features, more, sets, words, first,
                                                 pos, len, max_len, inv_zero, recip, m, out_width, s_out, out);
                }
                if (r < rows) {
                    shap_contrib_rows<1, SHARED>(e, r, row0, x, n, s_x, staged, n_features, more, sets, words, first,
                                                 pos, len, max_len, inv_zero, recip, m, out_width, s_out, out);
                }
                continue;
            }
            for (u32 r = 0; r < rows; ++r) {
                const u32 row = row0 + r;
                float v = 0.0f;
                if (has_feature) v = staged ? s_x[r * n_features + e.feature] : __ldg(&x[(size_t)e.feature * n + row]);
                const float one[1] = {shap_one(e, v, more, sets, words)};
                float w[1], total[1];
                shap_extend<1>(e.zero, one, first, pos, len, max_len, recip, w);
                shap_unwound_sum<1>(w, one, e.zero, inv_zero, first, len, max_len, recip, total);
                const float phi = total[0] * (one[0] - e.zero) * e.value;
                // Interactions: each feature's SHAP value on its diagonal, then, with each
                // feature c of the path held (its element taken out), half the difference the
                // others' contributions make between c known and c unknown: (one_c - zero_c)
                // times their contributions without c. That goes to (c, e), and off c's diagonal.
                float* row_out = out + (size_t)row * out_width + (size_t)e.output * m * m;
                if (contributes) atomicAdd(&row_out[e.feature * m + e.feature], phi);
                for (u32 c = 1; c < max_len; ++c) {
                    const u32 src = (first + c) & 31;
                    const float one_c = __shfl_sync(SHAP_FULL, one[0], src);
                    const float zero_c = __shfl_sync(SHAP_FULL, e.zero, src);
                    const float inv_zero_c = __shfl_sync(SHAP_FULL, inv_zero, src);
                    const u32 feature_c = __shfl_sync(SHAP_FULL, e.feature, src);
                    const float held[1] = {shap_unwind(w[0], one_c, zero_c, inv_zero_c, first, pos, len, max_len, recip)};
                    float rest[1];
                    shap_unwound_sum<1>(held, one, e.zero, inv_zero, first, len > 0 ? len - 1 : 0, max_len, recip, rest);
                    if (contributes && c < len && pos != c) {
                        const float half = rest[0] * (one[0] - e.zero) * e.value * (one_c - zero_c) * 0.5f;
                        atomicAdd(&row_out[feature_c * m + e.feature], half);
                        atomicAdd(&row_out[feature_c * m + feature_c], -half);
                    }
                }
            }
        }
        __syncthreads();
        if (SHARED) {
            // Each thread flushes, then (next tile) zeroes, the same entries: no barrier between.
            for (u32 i = threadIdx.x; i < rows * out_width; i += blockDim.x) {
                const float v = s_out[i];
                if (v != 0.0f) atomicAdd(&out[(size_t)row0 * out_width + i], v);
            }
        }
    }
}

// The three kernels' argument struct (each takes one, by value), mirrored in
// src/backend/cuda/shap.rs and checked by the layout probe.
struct ShapArgs {
    const float* x;
    u32 n;
    const ShapElement* elements;
    u32 n_bins;
    u32 bins_per_group;
    const ShapSplit* more;
    const uint2* sets;
    const u32* words;
    u32 n_features;
    u32 out_width;
    float* out;
    u32 tile_rows;
    u32 staged;
};

#define SHAP_PASS(a)                                                                                               \
    a.x, a.n, a.elements, a.n_bins, a.bins_per_group, a.more, a.sets, a.words, a.n_features, a.out_width, a.out, \
        a.tile_rows, a.staged

extern "C" __global__ void shap_contrib_shared(const ShapArgs a) { shap_rows<true, false>(SHAP_PASS(a)); }
extern "C" __global__ void shap_contrib_global(const ShapArgs a) { shap_rows<false, false>(SHAP_PASS(a)); }
extern "C" __global__ void shap_interactions(const ShapArgs a) { shap_rows<false, true>(SHAP_PASS(a)); }
