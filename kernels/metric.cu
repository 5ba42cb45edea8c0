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
