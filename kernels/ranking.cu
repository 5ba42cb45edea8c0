// LambdaMART gradients of the ranking objectives (rank:ndcg, rank:map, rank:pairwise), one
// block per query group. Computes exactly what src/objective/ranking.rs computes, operation for
// operation and in the same order (its module comment says which), so the CPU and the GPU
// grow the same trees. The gains, 1/IDCG per query and the position discounts come from the
// host once per fit (they depend only on the labels).

#define RANK_THREADS 128
// Queries longer than this are ranked by a sort in shared memory; shorter ones by counting,
// for each document, the documents ahead of it (n^2 comparisons, no synchronisation).
#define RANK_COUNT_MAX 128

// A document's sort key: descending score, then ascending row (the CPU's order: equal
// scores, -0 and +0 included, keep row order).
__device__ __forceinline__ u64 rank_key(float score, u32 row) {
    const u32 bits = __float_as_uint(score + 0.0f);  // -0 becomes +0
    const u32 ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ((u64)~ascending << 32) | row;
}

// Sorts keys[0..m) ascending in place (m a power of two), the block's threads together.
__device__ void bitonic_sort(u64* keys, u32 m) {
    for (u32 size = 2; size <= m; size <<= 1) {
        for (u32 stride = size >> 1; stride > 0; stride >>= 1) {
            for (u32 t = threadIdx.x; t < m / 2; t += blockDim.x) {
                const u32 i = 2 * t - (t & (stride - 1)), j = i + stride;
                const u64 a = keys[i], b = keys[j];
                if ((a > b) == ((i & size) == 0)) {
                    keys[i] = b;
                    keys[j] = a;
                }
            }
            __syncthreads();
        }
    }
}

#define RANK_PAIRWISE 0
#define RANK_NDCG 1
#define RANK_MAP 2

// |change in average precision| if the documents at ranks high < low (labels y_high, y_low)
// swapped places, as src/objective/ranking.rs's delta_map (XGBoost's DeltaMAP).
__device__ __forceinline__ double delta_map(const u32* relevant, const double* precision_sum, u32 n, float y_high,
                                            float y_low, u32 high, u32 low) {
    const double r_h = (double)high + 1.0, r_l = (double)low + 1.0;
    const double total = (double)relevant[n - 1];
    const double m = (double)relevant[low], c = (double)relevant[high];
    const double b = precision_sum[low - 1] - precision_sum[high];
    const double delta = y_high < y_low ? (m / r_l - (c + 1.0) / r_h - b) / total : (c / r_h - m / r_l + b) / total;
    return fabs(delta);
}

// The query as the pairs see it (pointers from its first row, or by rank for rank:map's).
struct RankQuery {
    const float* s;
    const float* y;
    const double* gain;
    const u32* position;
    const double* discount;
    double inv_idcg;
    const u32* relevant;
    const double* precision_sum;
    u32 n;
    u32 metric;
};

// (lambda, hessian) of the pair whose more relevant document is h.
__device__ __forceinline__ void rank_pair(const RankQuery& q, bool score_normalise, u32 h, u32 l, double* lambda,
                                          double* hess) {
    double delta = 1.0;
    if (q.metric == RANK_NDCG) {
        delta = fabs((q.gain[h] - q.gain[l]) * (q.discount[q.position[h]] - q.discount[q.position[l]])) * q.inv_idcg;
    } else if (q.metric == RANK_MAP) {
        const u32 ph = q.position[h], pl = q.position[l];
        delta = ph < pl ? delta_map(q.relevant, q.precision_sum, q.n, q.y[h], q.y[l], ph, pl)
                        : delta_map(q.relevant, q.precision_sum, q.n, q.y[l], q.y[h], pl, ph);
    }
    const float* s = q.s;
    const float diff = s[h] - s[l];
    if (score_normalise) delta /= (double)fabsf(diff) + 0.01;
    const double sig = (double)portable_sigmoidf(diff);
    *lambda = (sig - 1.0) * delta;
    *hess = fmax(sig * (1.0 - sig), 1e-16) * delta * 2.0;
}

// Scratch (global, per row): position (rank in the query), ranked (row at each rank) and
// sums (g, h, |lambda| per row, as doubles), all indexed from the query's first row.
__device__ __forceinline__ void lambdarank_body(const float* __restrict__ score, const float* __restrict__ label,
                                                const double* __restrict__ gain, const double* __restrict__ inv_idcg,
                                                const double* __restrict__ discount, const u32* __restrict__ offsets,
                                                const float* __restrict__ weight, u32 top_k, u32 metric, u32 normalise,
                                                u32 score_normalise, u32 sort_capacity, u32* __restrict__ position,
                                                u32* __restrict__ ranked, double* __restrict__ sums,
                                                u32* __restrict__ relevant, double* __restrict__ precision_sum,
                                                GradPair* __restrict__ out) {
    // sort_capacity keys (a power of two, or 0) of dynamic shared memory.
    extern __shared__ u64 rank_keys[];
    __shared__ float top[RANK_THREADS], bottom[RANK_THREADS];
    __shared__ double norm;
    const u32 start = offsets[blockIdx.x], n = offsets[blockIdx.x + 1] - start;
    const float* s = score + start;
    const float* y = label + start;
    if (n < 2) {
        for (u32 r = threadIdx.x; r < n; r += blockDim.x) out[start + r] = GradPair{0.0f, 0.0f};
        return;
    }
    // Highest and lowest score (score normalisation applies only when they differ).
    float hi = s[0], lo = s[0];
    for (u32 r = threadIdx.x; r < n; r += blockDim.x) {
        hi = fmaxf(hi, s[r]);
        lo = fminf(lo, s[r]);
    }
    top[threadIdx.x] = hi;
    bottom[threadIdx.x] = lo;
    __syncthreads();
    for (u32 half = RANK_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            top[threadIdx.x] = fmaxf(top[threadIdx.x], top[threadIdx.x + half]);
            bottom[threadIdx.x] = fminf(bottom[threadIdx.x], bottom[threadIdx.x + half]);
        }
        __syncthreads();
    }
    const bool spread = score_normalise && top[0] != bottom[0];

    // Each document's rank: the documents scored higher, or equal and earlier.
    u32* pos = position + start;
    u32* by_rank = ranked + start;
    u32 m = 1;
    while (m < n) m <<= 1;
    if (n > RANK_COUNT_MAX && m <= sort_capacity) {
        for (u32 i = threadIdx.x; i < m; i += blockDim.x) rank_keys[i] = i < n ? rank_key(s[i], i) : ~0ull;
        __syncthreads();
        bitonic_sort(rank_keys, m);
        for (u32 p = threadIdx.x; p < n; p += blockDim.x) {
            const u32 r = (u32)rank_keys[p];
            pos[r] = p;
            by_rank[p] = r;
        }
    } else {
        for (u32 r = threadIdx.x; r < n; r += blockDim.x) {
            const float sr = s[r];
            u32 p = 0;
            for (u32 o = 0; o < n; ++o) p += (s[o] > sr) | ((s[o] == sr) & (o < r));
            pos[r] = p;
            by_rank[p] = r;
        }
    }
    __syncthreads();
    // rank:map's running counts by rank, added in rank order by one thread as the CPU adds them.
    if (metric == RANK_MAP && threadIdx.x == 0) {
        u32 count = 0;
        double sum = 0.0;
        for (u32 p = 0; p < n; ++p) {
            const float yp = y[by_rank[p]];
            count += (u32)yp;
            sum = sum + (double)yp / ((double)p + 1.0);
            relevant[start + p] = count;
            precision_sum[start + p] = sum;
        }
    }
    __syncthreads();

    const u32 k = min(top_k, n);
    const RankQuery q = {s, y, gain + start, pos, discount, inv_idcg[blockIdx.x], relevant + start,
                         precision_sum + start, n, metric};
    double* sum = sums + 3 * (u64)start;
    // Each document's pairs, summed in the CPU's order: a top-k document visits every document
    // by row, the others the top k by rank. Threads take documents by rank, the top k first,
    // so that the long visits of the top k share warps with each other, not with short ones
    // (a warp runs as long as its longest lane).
    for (u32 p = threadIdx.x; p < n; p += blockDim.x) {
        const u32 r = by_rank[p];
        double G = 0.0, H = 0.0, A = 0.0;
        const float yr = y[r];
        const bool in_top = p < k;
        const u32 count = in_top ? n : k;
        for (u32 i = 0; i < count; ++i) {
            const u32 o = in_top ? i : by_rank[i];
            if (o == r || y[o] == yr) continue;
            const bool r_high = yr > y[o];
            double lambda, hess;
            rank_pair(q, spread, r_high ? r : o, r_high ? o : r, &lambda, &hess);
            G += r_high ? lambda : -lambda;
            H += hess;
            A -= lambda;
        }
        sum[3 * r] = G;
        sum[3 * r + 1] = H;
        sum[3 * r + 2] = A;
    }
    __syncthreads();
    // The query's total, added in row order as the CPU adds it.
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (u32 r = 0; r < n; ++r) total = total + sum[3 * r + 2];
        norm = (normalise && total > 0.0) ? portable_log2(1.0 + total) / total : 1.0;
    }
    __syncthreads();
    const float w = weight ? weight[start] : 1.0f;
    for (u32 r = threadIdx.x; r < n; r += blockDim.x) {
        GradPair p;
        p.g = (float)(sum[3 * r] * norm) * w;
        p.h = fmaxf((float)(sum[3 * r + 1] * norm), 1e-16f) * w;
        out[start + r] = p;
    }
}

// lambdarank's arguments (src/backend/cuda/ranking.rs: LambdarankArgs). Null `weight`: none.
struct LambdarankArgs {
    const float* score;
    const float* label;
    const double* gain;
    const double* inv_idcg;
    const double* discount;
    const u32* offsets;
    const float* weight;
    u32 top_k;
    u32 metric;
    u32 normalise;
    u32 score_normalise;
    u32 sort_capacity;
    u32* position;
    u32* ranked;
    double* sums;
    u32* relevant;
    double* precision_sum;
    GradPair* out;
};

extern "C" __global__ void lambdarank(const LambdarankArgs a) {
    // The host passes a PairMetric (a Rust enum, its codes checked against these by the layout
    // probe); an unknown code is a bug, stopped here rather than trained as pairwise. A trap
    // poisons the context: never the way an error is reported.
    if (a.metric != RANK_PAIRWISE && a.metric != RANK_NDCG && a.metric != RANK_MAP) __trap();
    lambdarank_body(a.score, a.label, a.gain, a.inv_idcg, a.discount, a.offsets, a.weight, a.top_k, a.metric,
                    a.normalise, a.score_normalise, a.sort_capacity, a.position, a.ranked, a.sums, a.relevant,
                    a.precision_sum, a.out);
}
