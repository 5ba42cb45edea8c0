// Evaluation on the device: each row's term of an elementwise metric, from its margins through
// the objective's link (as finish_predictions applies it) and its weight, and the terms'
// sums in src/metric/sum.rs's order, so that the values are the host's bit for bit: groups of
// METRIC_GROUP consecutive values, each summed by halving (value i plus value i + 512, then
// i + 256, ..., a short group padded with zeros), then the groups' sums the same way.
// Each metric's term is its twin in src/metric/ (regression.rs, classification.rs, aft.rs),
// operation for operation, with kernels/math.cuh's logarithm.

#define METRIC_GROUP 1024u
#define METRIC_THREADS 512u

#define METRIC_RMSE 0u
#define METRIC_MAE 1u
#define METRIC_LOGLOSS 2u
#define METRIC_ERROR 3u
#define METRIC_MLOGLOSS 4u
#define METRIC_MERROR 5u
#define METRIC_QUANTILE 6u
#define METRIC_EXPECTILE 7u
#define METRIC_GAMMA_NLOGLIK 8u
#define METRIC_GAMMA_DEVIANCE 9u
#define METRIC_INTERVAL_ACCURACY 10u

// One evaluation set's rows and a metric over them.
struct MetricRows {
    const float* margin;       // class-major: output c of row i at c * n + i
    const float* label;
    const float* label_upper;  // null: none
    const float* weight;       // null: unit weights
    const double* alphas;      // the quantiles (METRIC_QUANTILE), or the expectile at 0
    u32 n_alphas;
    u32 n;
    u32 k;
    u32 link;
    u32 metric;
    u32 pad;
};

// metric_terms: rows' terms (and weights, when weighted) summed a group a block; group g's
// sums at sums[g] and sums[n_groups + g].
struct MetricTermsArgs {
    MetricRows rows;
    double* sums;
    u32 n_groups;
    u32 pad;
};

// halve_sums: `n` values of each of gridDim.y series (series s from values + s * n), a group
// a block; group g of series s at out[s * out_stride + g].
struct HalveSumsArgs {
    const double* values;
    u32 n;
    u32 out_stride;
    double* out;
};

// A row's prediction of output c, through the link (finish_predictions' arithmetic); for the
// softmax, `top` and `sum` are the row's largest margin and sum of exponentials.
__device__ __forceinline__ float metric_prediction(const MetricRows& r, u32 row, u32 c, float top, float sum) {
    const float m = r.margin[(size_t)c * r.n + row];
    switch (r.link) {
        case LINK_LOGISTIC:
            return portable_sigmoidf(m);
        case LINK_EXP:
            return portable_expf(m);
        case LINK_HINGE:
            return m > 0.0f ? 1.0f : 0.0f;
        case LINK_SOFTMAX:
            return portable_expf(m - top) / sum;
        default:
            return m;
    }
}

__device__ __forceinline__ double clamp_f64(double x, double lo, double hi) {
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return x;
}

// Row `row`'s term, unweighted.
__device__ double metric_term(const MetricRows& r, u32 row) {
    float top = 0.0f, sum = 0.0f;
    if (r.link == LINK_SOFTMAX) {
        top = r.margin[row];
        for (u32 c = 1; c < r.k; ++c) top = fmaxf(top, r.margin[(size_t)c * r.n + row]);
        for (u32 c = 0; c < r.k; ++c) sum += portable_expf(r.margin[(size_t)c * r.n + row] - top);
    }
    const float label = r.label[row];
    const double y = (double)label;
    const double EPS = 1e-15;
    switch (r.metric) {
        case METRIC_RMSE: {
            const double d = (double)metric_prediction(r, row, 0, top, sum) - y;
            return d * d;
        }
        case METRIC_MAE:
            return fabs((double)metric_prediction(r, row, 0, top, sum) - y);
        case METRIC_LOGLOSS: {
            const double p = clamp_f64((double)metric_prediction(r, row, 0, top, sum), EPS, 1.0 - EPS);
            if (y == 1.0) return -portable_log(p);
            if (y == 0.0) return -portable_log(1.0 - p);
            return -(y * portable_log(p) + (1.0 - y) * portable_log(1.0 - p));
        }
        case METRIC_ERROR:
            return (metric_prediction(r, row, 0, top, sum) > 0.5f) != (label > 0.5f) ? 1.0 : 0.0;
        case METRIC_MLOGLOSS: {
            const double p = (double)metric_prediction(r, row, (u32)label, top, sum);
            return -portable_log(clamp_f64(p, EPS, 1.0));
        }
        case METRIC_MERROR: {
            u32 best = 0;
            float best_p = metric_prediction(r, row, 0, top, sum);
            for (u32 c = 1; c < r.k; ++c) {
                const float p = metric_prediction(r, row, c, top, sum);
                if (p > best_p) {
                    best = c;
                    best_p = p;
                }
            }
            return best == (u32)label ? 0.0 : 1.0;
        }
        case METRIC_QUANTILE: {
            double acc = -0.0;
            for (u32 j = 0; j < r.k; ++j) {
                const double alpha = r.alphas[min(j, r.n_alphas - 1)];
                const double d = y - (double)metric_prediction(r, row, j, top, sum);
                acc += d >= 0.0 ? alpha * d : (alpha - 1.0) * d;
            }
            return acc / (double)r.k;
        }
        case METRIC_EXPECTILE: {
            const double d = y - (double)metric_prediction(r, row, 0, top, sum);
            return (d >= 0.0 ? r.alphas[0] : 1.0 - r.alphas[0]) * d * d;
        }
        case METRIC_GAMMA_NLOGLIK: {
            const double p = fmax((double)metric_prediction(r, row, 0, top, sum), 1e-16);
            return y / p + portable_log(p);
        }
        case METRIC_GAMMA_DEVIANCE: {
            const double ratio = (y + 1e-6) / ((double)metric_prediction(r, row, 0, top, sum) + 1e-6);
            return ratio - portable_log(ratio) - 1.0;
        }
        case METRIC_INTERVAL_ACCURACY: {
            const double upper = r.label_upper ? (double)r.label_upper[row] : y;
            const double p = (double)metric_prediction(r, row, 0, top, sum);
            return (y <= p && p <= upper) ? 1.0 : 0.0;
        }
        default:
            return __longlong_as_double(0x7ff8000000000000ll);
    }
}

// The halving sum of a block's group: thread t holds value t + value t + 512 (the first
// halving); the rest halves in shared memory, then within the first warp. Thread 0 gets it.
__device__ __forceinline__ double group_sum(double v, double* shared) {
    const u32 t = threadIdx.x;
    shared[t] = v;
    __syncthreads();
    for (u32 h = METRIC_THREADS / 2; h >= 32; h /= 2) {
        if (t < h) shared[t] = shared[t] + shared[t + h];
        __syncthreads();
    }
    double s = t < 32 ? shared[t] : 0.0;
    for (int o = 16; o > 0; o /= 2) s = s + __shfl_down_sync(0xffffffffu, s, o);
    __syncthreads();
    return s;
}

extern "C" __global__ void __launch_bounds__(METRIC_THREADS) metric_terms(const MetricTermsArgs a) {
    __shared__ double shared[METRIC_THREADS];
    const MetricRows& r = a.rows;
    const u32 first = blockIdx.x * METRIC_GROUP + threadIdx.x;
    const u32 second = first + METRIC_THREADS;
    const double w0 = first < r.n && r.weight ? (double)r.weight[first] : 1.0;
    const double w1 = second < r.n && r.weight ? (double)r.weight[second] : 1.0;
    const double t0 = first < r.n ? metric_term(r, first) * w0 : 0.0;
    const double t1 = second < r.n ? metric_term(r, second) * w1 : 0.0;
    const double terms = group_sum(t0 + t1, shared);
    if (threadIdx.x == 0) a.sums[blockIdx.x] = terms;
    if (r.weight) {
        const double weights = group_sum((first < r.n ? w0 : 0.0) + (second < r.n ? w1 : 0.0), shared);
        if (threadIdx.x == 0) a.sums[a.n_groups + blockIdx.x] = weights;
    }
}

extern "C" __global__ void __launch_bounds__(METRIC_THREADS) halve_sums(const HalveSumsArgs a) {
    __shared__ double shared[METRIC_THREADS];
    const double* values = a.values + (size_t)blockIdx.y * a.n;
    const u32 first = blockIdx.x * METRIC_GROUP + threadIdx.x;
    const u32 second = first + METRIC_THREADS;
    const double v = (first < a.n ? values[first] : 0.0) + (second < a.n ? values[second] : 0.0);
    const double s = group_sum(v, shared);
    if (threadIdx.x == 0) a.out[(size_t)blockIdx.y * a.out_stride + blockIdx.x] = s;
}

// ---- Unweighted AUC: src/metric/classification.rs (auc_counts) on the device ----------------
// Each row becomes (order_key(prediction, -0 as +0) << 1) | positive; the items are sorted
// (a bitonic sort, padded with ~0 to a power of two of at least BITONIC_TILE); each positive
// then finds its run of equal keys [s, e) by binary search and adds s + e + 1, and the
// positives are counted: integer sums, the same in any order. The host finishes
// 2U = sum - P (P + 1) and the AUC as the CPU does.

#define BITONIC_TILE 2048u
#define BITONIC_THREADS 1024u

// auc_keys: the items of `rows` (n_padded of them; row n onwards padding), and `result` zeroed.
struct AucKeysArgs {
    MetricRows rows;
    unsigned long long* items;
    unsigned long long* result;
    u32 n_padded;
    u32 pad;
};

// bitonic_tiles / bitonic_merge_tiles / bitonic_step: the stages of a bitonic sort of `items`.
struct BitonicArgs {
    unsigned long long* items;
    u32 k;
    u32 j;
};

// auc_ranks: `result[0]` += s + e + 1 over the positives, `result[1]` += their count.
struct AucRanksArgs {
    const unsigned long long* items;
    unsigned long long* result;
    u32 n;
    u32 pad;
};

extern "C" __global__ void auc_keys(const AucKeysArgs a) {
    const MetricRows& r = a.rows;
    if (blockIdx.x == 0 && threadIdx.x == 0) a.result[0] = a.result[1] = 0ull;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n_padded; i += gridDim.x * blockDim.x) {
        if (i < r.n) {
            const float p = metric_prediction(r, i, 0, 0.0f, 0.0f) + 0.0f;
            a.items[i] = ((unsigned long long)order_key(p) << 1) | (r.label[i] > 0.5f ? 1ull : 0ull);
        } else {
            a.items[i] = ~0ull;
        }
    }
}

// One compare-exchange of the pair (i, i + j) of stage k: ascending where i & k is 0.
__device__ __forceinline__ void bitonic_pair(unsigned long long* v, u32 i, u32 j, u32 global_i, u32 k) {
    const unsigned long long x = v[i], y = v[i + j];
    const bool ascending = (global_i & k) == 0;
    if ((x > y) == ascending) {
        v[i] = y;
        v[i + j] = x;
    }
}

// Every stage k <= BITONIC_TILE of each tile of BITONIC_TILE items, in shared memory.
extern "C" __global__ void __launch_bounds__(BITONIC_THREADS) bitonic_tiles(const BitonicArgs a) {
    __shared__ unsigned long long v[BITONIC_TILE];
    const u32 base = blockIdx.x * BITONIC_TILE, t = threadIdx.x;
    v[t] = a.items[base + t];
    v[t + BITONIC_THREADS] = a.items[base + t + BITONIC_THREADS];
    __syncthreads();
    for (u32 k = 2; k <= BITONIC_TILE; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            const u32 i = (t / j) * 2 * j + (t % j);
            bitonic_pair(v, i, j, base + i, k);
            __syncthreads();
        }
    }
    a.items[base + t] = v[t];
    a.items[base + t + BITONIC_THREADS] = v[t + BITONIC_THREADS];
}

// Stage k's steps j < BITONIC_TILE, each tile in shared memory.
extern "C" __global__ void __launch_bounds__(BITONIC_THREADS) bitonic_merge_tiles(const BitonicArgs a) {
    __shared__ unsigned long long v[BITONIC_TILE];
    const u32 base = blockIdx.x * BITONIC_TILE, t = threadIdx.x;
    v[t] = a.items[base + t];
    v[t + BITONIC_THREADS] = a.items[base + t + BITONIC_THREADS];
    __syncthreads();
    for (u32 j = BITONIC_TILE >> 1; j > 0; j >>= 1) {
        const u32 i = (t / j) * 2 * j + (t % j);
        bitonic_pair(v, i, j, base + i, a.k);
        __syncthreads();
    }
    a.items[base + t] = v[t];
    a.items[base + t + BITONIC_THREADS] = v[t + BITONIC_THREADS];
}

// Stage k's step j >= BITONIC_TILE over the whole array: one thread a pair.
extern "C" __global__ void bitonic_step(const BitonicArgs a) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 i = (t / a.j) * 2 * a.j + (t % a.j);
    bitonic_pair(a.items, i, a.j, i, a.k);
}

// The first of the n sorted items at or above `x`.
__device__ __forceinline__ u32 lower_bound_u64(const unsigned long long* items, u32 n, unsigned long long x) {
    u32 lo = 0, hi = n;
    while (lo < hi) {
        const u32 mid = lo + (hi - lo) / 2;
        if (items[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

extern "C" __global__ void auc_ranks(const AucRanksArgs a) {
    unsigned long long ranks = 0, positives = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) {
        const unsigned long long item = a.items[i];
        if (item & 1ull) {
            const unsigned long long key = item & ~1ull;
            ranks += (unsigned long long)lower_bound_u64(a.items, a.n, key) +
                     (unsigned long long)lower_bound_u64(a.items, a.n, key + 2) + 1ull;
            positives += 1;
        }
    }
    for (int o = 16; o > 0; o /= 2) {
        ranks += __shfl_down_sync(0xffffffffu, ranks, o);
        positives += __shfl_down_sync(0xffffffffu, positives, o);
    }
    if ((threadIdx.x & 31) == 0 && positives > 0) {
        atomicAdd(a.result, ranks);
        atomicAdd(a.result + 1, positives);
    }
}
