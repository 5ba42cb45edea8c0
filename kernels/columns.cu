// Feature columns on the device as Arrow lays them out (src/backend/cuda/columns.rs): each
// chunk's values buffer (f32, f64, integers, booleans as bits, or a dictionary's keys) and its
// validity bitmap, copied as they are. Everything the host once did value by value happens
// here: the conversion to f32 (clamped to finite, nulls and the missing sentinel as NaN,
// dictionary keys through their chunk's category codes), the cut points' sample
// (src/data/cuts.rs, ported exactly: the same hash-sampled rows, sorted, one sequential f64
// scan per feature, so the cuts are the CPU's bit for bit), the binning into the dense
// training matrix, and the row sizing and placing of compressed rows.

#define DTYPE_F32 0u
#define DTYPE_F64 1u
#define DTYPE_I8 2u
#define DTYPE_I16 3u
#define DTYPE_I32 4u
#define DTYPE_I64 5u
#define DTYPE_U8 6u
#define DTYPE_U16 7u
#define DTYPE_U32 8u
#define DTYPE_U64 9u
#define DTYPE_BOOL 10u

// One Arrow chunk of one feature: rows row0 .. row0 + rows of the frame.
struct ColumnChunk {
    const u8* values;    // the values (or dictionary keys) of the chunk's rows; booleans as bits
    const u8* validity;  // validity bits from validity_bit on; null: no nulls
    const float* codes;  // a dictionary chunk: each key's category code (NaN: a null entry); else null
    u32 n_codes;
    u32 rows;
    u32 row0;
    u32 dtype;       // DTYPE_*: of the values, or of a dictionary's keys
    u32 values_bit;  // booleans: the bit of the first row
    u32 validity_bit;
    u32 has_missing;  // a numeric value that reads as missing (XGBoost's `missing`)
    float missing;
};

// The columns of a frame: feature f's chunks are chunks[chunk_start[f] .. chunk_start[f + 1]],
// in row order.
struct Columns {
    const ColumnChunk* chunks;
    const u32* chunk_start;
};

__device__ __forceinline__ float nan_value() { return __int_as_float(0x7fc00000); }

__device__ __forceinline__ bool bit_at(const u8* bits, u32 first, u32 i) {
    const u32 b = first + i;
    return (bits[b >> 3] >> (b & 7)) & 1u;
}

// Infinities and the extreme floats as +-FINITE_LIMIT (src/data/cuts.rs), NaN kept.
__device__ __forceinline__ float clamp_finite(float x) {
    const float limit = __int_as_float(0x7f7ffffe);
    return isnan(x) ? x : fminf(fmaxf(x, -limit), limit);
}

// Row i of chunk c as FeatureColumn::read gives it (src/data/column.rs): NaN when missing.
__device__ float chunk_value(const ColumnChunk& c, u32 i) {
    if (c.validity && !bit_at(c.validity, c.validity_bit, i)) return nan_value();
    if (c.codes) {
        // A key outside the dictionary (only possible in a null slot) reads as missing.
        u64 k;
        bool negative = false;
        switch (c.dtype) {
            case DTYPE_I8: { const i8 v = ((const i8*)c.values)[i]; negative = v < 0; k = (u64)v; break; }
            case DTYPE_I16: { const short v = ((const short*)c.values)[i]; negative = v < 0; k = (u64)v; break; }
            case DTYPE_I32: { const int v = ((const int*)c.values)[i]; negative = v < 0; k = (u64)v; break; }
            case DTYPE_I64: { const i64 v = ((const i64*)c.values)[i]; negative = v < 0; k = (u64)v; break; }
            case DTYPE_U8: k = ((const u8*)c.values)[i]; break;
            case DTYPE_U16: k = ((const u16*)c.values)[i]; break;
            case DTYPE_U32: k = ((const u32*)c.values)[i]; break;
            default: k = ((const u64*)c.values)[i]; break;
        }
        return (!negative && k < c.n_codes) ? c.codes[k] : nan_value();
    }
    float x;
    switch (c.dtype) {
        case DTYPE_F32: x = clamp_finite(((const float*)c.values)[i]); break;
        case DTYPE_F64: x = clamp_finite((float)((const double*)c.values)[i]); break;
        case DTYPE_I8: x = (float)((const i8*)c.values)[i]; break;
        case DTYPE_I16: x = (float)((const short*)c.values)[i]; break;
        case DTYPE_I32: x = (float)((const int*)c.values)[i]; break;
        case DTYPE_I64: x = (float)((const i64*)c.values)[i]; break;
        case DTYPE_U8: x = (float)((const u8*)c.values)[i]; break;
        case DTYPE_U16: x = (float)((const u16*)c.values)[i]; break;
        case DTYPE_U32: x = (float)((const u32*)c.values)[i]; break;
        case DTYPE_U64: x = (float)((const u64*)c.values)[i]; break;
        default: x = bit_at(c.values, c.values_bit, i) ? 1.0f : 0.0f; break;
    }
    return (c.has_missing && x == c.missing) ? nan_value() : x;
}

// Feature f's value in row `row` (NaN when missing): its chunk found by bisection.
__device__ __forceinline__ float column_value(const Columns& cols, u32 f, u32 row) {
    u32 lo = cols.chunk_start[f], hi = cols.chunk_start[f + 1];
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) / 2;
        if (cols.chunks[mid].row0 <= row) lo = mid; else hi = mid;
    }
    const ColumnChunk& c = cols.chunks[lo];
    return chunk_value(c, row - c.row0);
}

// ---- The cut points' sample (src/data/cuts.rs: CutSketch) ----

// random.rs: hash64.
__device__ __forceinline__ u64 hash64(u64 key, u64 index) {
    u64 z = key + index * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The rows of the sample: a row whose hash of (seed, its global row) is at most keep_below
// and whose weight is above 0. A worker's rows are runs of consecutive global rows: run j
// starts at local row span_local[j] and global row span_global[j]. Null `rows`: only counted;
// else appended in any order (the samples are sorted before use, so the order does not matter).
struct SampleRowsArgs {
    const float* weights;  // null: unit weights
    u32 n_rows;
    u32 n_spans;
    const u64* span_global;
    const u32* span_local;
    u64 seed;
    u64 keep_below;
    u32* count;
    u32* rows;
};

extern "C" __global__ void sample_rows(const SampleRowsArgs a) {
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < a.n_rows; r += gridDim.x * blockDim.x) {
        const float w = a.weights ? a.weights[r] : 1.0f;
        if (!(w > 0.0f)) continue;
        if (a.keep_below != ~0ull) {
            u32 lo = 0, hi = a.n_spans;
            while (hi - lo > 1) {
                const u32 mid = (lo + hi) / 2;
                if (a.span_local[mid] <= r) lo = mid; else hi = mid;
            }
            if (hash64(a.seed, a.span_global[lo] + (r - a.span_local[lo])) > a.keep_below) continue;
        }
        const u32 at = atomicAdd(a.count, 1u);
        if (a.rows) a.rows[at] = r;
    }
}

// A sampled value with its weight, as the CPU sorts them: the value's order key high, the
// weight's bits low. A missing value is NO_SAMPLE, after every present one.
#define NO_SAMPLE 0xffffffffffffffffull

// Segment s's keys (feature features[s]'s value in each sampled row): keys[s * stride + i],
// the segment padded from n_sample to `stride` keys with NO_SAMPLE.
struct SampleValuesArgs {
    Columns columns;
    const u32* features;
    u32 n_segments;
    u32 n_sample;
    const u32* rows;
    const float* weights;  // null: unit weights
    u64* keys;
    u32 stride;
    u32 pad;
};

extern "C" __global__ void sample_values(const SampleValuesArgs a) {
    const u64 total = (u64)a.n_segments * a.stride;
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < total; e += (u64)gridDim.x * blockDim.x) {
        const u32 s = (u32)(e / a.stride), i = (u32)(e % a.stride);
        if (i >= a.n_sample) {
            a.keys[e] = NO_SAMPLE;
            continue;
        }
        const u32 row = a.rows[i];
        const float x = column_value(a.columns, a.features[s], row);
        const float w = a.weights ? a.weights[row] : 1.0f;
        a.keys[e] = isnan(x) ? NO_SAMPLE : (((u64)order_key(x) << 32) | __float_as_uint(w));
    }
}

// Each segment of `len` keys sorted ascending, one block a segment: a least-significant-digit
// radix sort, 8 bits a pass, stable within a pass (warps rank their keys with match_any, and
// take their places in warp order). A pass whose digit is the same in every key (the weights'
// passes without weights) moves nothing, and is skipped. `tmp` is as large as `keys`.
#define SORT_THREADS 1024
#define SORT_WARPS (SORT_THREADS / 32)

struct SortSegmentsArgs {
    u64* keys;
    u64* tmp;
    u32 len;
    u32 n_segments;
};

extern "C" __global__ void __launch_bounds__(SORT_THREADS) sort_segments(const SortSegmentsArgs a) {
    __shared__ u32 base[256];
    __shared__ u32 tile_total[256];
    __shared__ u32 warp_count[SORT_WARPS][256];
    __shared__ u32 skip;
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (u32 s = blockIdx.x; s < a.n_segments; s += gridDim.x) {
        u64* from = a.keys + (u64)s * a.len;
        u64* to = a.tmp + (u64)s * a.len;
        for (u32 shift = 0; shift < 64; shift += 8) {
            for (u32 d = tid; d < 256; d += blockDim.x) base[d] = 0;
            __syncthreads();
            for (u32 i = tid; i < a.len; i += blockDim.x) atomicAdd(&base[(from[i] >> shift) & 255u], 1u);
            __syncthreads();
            if (tid == 0) {
                skip = a.len == 0 || base[(from[0] >> shift) & 255u] == a.len;
                u32 run = 0;
                for (u32 d = 0; d < 256; ++d) {
                    const u32 c = base[d];
                    base[d] = run;
                    run += c;
                }
            }
            __syncthreads();
            if (skip) continue;
            for (u32 t0 = 0; t0 < a.len; t0 += blockDim.x) {
                for (u32 j = tid; j < SORT_WARPS * 256; j += blockDim.x) (&warp_count[0][0])[j] = 0;
                __syncthreads();
                const u32 i = t0 + tid;
                const bool valid = i < a.len;
                const u64 key = valid ? from[i] : 0;
                const u32 digit = valid ? (u32)((key >> shift) & 255u) : 256u;
                const u32 peers = __match_any_sync(0xffffffffu, digit);
                const u32 rank = __popc(peers & ((1u << lane) - 1u));
                if (valid && rank == 0) warp_count[warp][digit] = __popc(peers);
                __syncthreads();
                for (u32 d = tid; d < 256; d += blockDim.x) {
                    u32 run = 0;
                    for (u32 w = 0; w < SORT_WARPS; ++w) {
                        const u32 c = warp_count[w][d];
                        warp_count[w][d] = run;
                        run += c;
                    }
                    tile_total[d] = run;
                }
                __syncthreads();
                if (valid) to[base[digit] + warp_count[warp][digit] + rank] = key;
                __syncthreads();
                for (u32 d = tid; d < 256; d += blockDim.x) base[d] += tile_total[d];
                __syncthreads();
            }
            u64* t = from;
            from = to;
            to = t;
        }
        // An odd number of passes left the sorted keys in tmp.
        if (from != a.keys + (u64)s * a.len) {
            for (u32 i = tid; i < a.len; i += blockDim.x) to[i] = from[i];
        }
        __syncthreads();
    }
}

// cuts.rs: midpoint, a cut strictly above a and at most b.
__device__ __forceinline__ float cut_between(float a, float b) {
    const float m = (float)(((double)a + (double)b) / 2.0);
    return (m > a && m <= b && isfinite(m)) ? m : b;
}

// The cut points of each sorted segment: cuts.rs's weighted_quantile_cuts, whose answer is
// reproduced exactly. One block a segment. The CPU sums the weights in f64 in sorted order;
// when every partial sum is exact (the weights are multiples of 2^e and their total is below
// 2^(e + 52), as unit, whole and most fractional f32 weights are) any order of addition gives
// the same sums, so the block computes them in parallel: the distinct values, each one's
// running total, and a cut after a value exactly when the CPU's sequence of thresholds
// (step, step + step, ... added one at a time in f64) has a term in (the running total before
// it, its running total]. Otherwise the first warp walks the keys as the CPU does.
#define CUT_THREADS 1024
#define CUT_STAGE 256

struct SegmentCutsArgs {
    const u64* keys;
    u32 len;
    u32 n_segments;
    u32 budget;  // bins (max_bin - 1): at most budget - 1 cuts
    u32 pad;
    float* cuts;        // segment s's at cuts[s * budget ..]
    u32* n_cuts;
    double* thresholds;  // segment s's at thresholds[s * (budget + 2) ..]: scratch
};

__device__ __forceinline__ float key_value(u64 k) { return from_order_key((u32)(k >> 32)); }
__device__ __forceinline__ float key_weight(u64 k) { return __uint_as_float((u32)k); }

// The exponent of the lowest set bit of a positive finite weight (w = m * 2^e, m odd).
__device__ __forceinline__ int low_bit_exponent(float w) {
    const u32 b = __float_as_uint(w), e = (b >> 23) & 0xffu, m = b & 0x7fffffu;
    if (e == 0) return -149 + (__ffs(m) - 1);
    return (int)e - 150 + (__ffs(m | 0x800000u) - 1);
}

// Block-wide inclusive scans (CUT_THREADS threads); `total` gets the whole block's.
template <typename T, typename Op>
__device__ T block_scan(T v, Op op, T* warp_totals, T& total) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (u32 o = 1; o < 32; o <<= 1) {
        const T n = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v = op(v, n);
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T t = warp_totals[lane];
        for (u32 o = 1; o < 32; o <<= 1) {
            const T n = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t = op(t, n);
        }
        warp_totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v = op(v, warp_totals[warp - 1]);
    total = warp_totals[31];
    __syncthreads();
    return v;
}

// cuts.rs's loop as it is, by the first lane of the first warp: for weights whose sums round.
// Calls visit(value, mass, next value or NaN) for each distinct present value, in order.
template <typename Visit>
__device__ void distinct_values(const u64* keys, u32 len, u64* stage, Visit visit) {
    const u32 lane = threadIdx.x & 31;
    bool have = false, done = false;
    float last = 0.0f;
    double mass = 0.0;
    for (u32 c0 = 0; c0 < len && !done; c0 += CUT_STAGE) {
        const u32 n = min(CUT_STAGE, len - c0);
        for (u32 j = lane; j < n; j += 32) stage[j] = keys[c0 + j];
        __syncwarp();
        if (lane == 0) {
            for (u32 j = 0; j < n; ++j) {
                const u64 k = stage[j];
                if (k == NO_SAMPLE) {
                    done = true;
                    break;
                }
                const float x = key_value(k);
                const double w = (double)key_weight(k);
                if (have && x == last) {
                    mass += w;
                } else {
                    if (have) visit(last, mass, x);
                    last = x;
                    mass = w;
                    have = true;
                }
            }
        }
        done = __shfl_sync(0xffffffffu, done, 0);
        __syncwarp();
    }
    if (lane == 0 && have) visit(last, mass, nan_value());
}

__device__ u32 sequential_cuts(const u64* keys, u32 len, u32 budget, float* cuts, u64* stage) {
    u32 n_values = 0, n = 0;
    double total = 0.0;
    distinct_values(keys, len, stage, [&](float, double mass, float) {
        ++n_values;
        total += mass;
    });
    if (n_values <= budget) {
        distinct_values(keys, len, stage, [&](float x, double, float next) {
            if (!isnan(next)) cuts[n++] = cut_between(x, next);
        });
    } else {
        const double step = total / (double)budget;
        double acc = 0.0, next_mass = step;
        distinct_values(keys, len, stage, [&](float x, double mass, float next) {
            if (isnan(next)) return;
            acc += mass;
            if (acc >= next_mass && n + 1 < budget) {
                cuts[n++] = cut_between(x, next);
                while (next_mass <= acc) next_mass += step;
            }
        });
    }
    return n;
}

extern "C" __global__ void __launch_bounds__(CUT_THREADS) segment_cuts(const SegmentCutsArgs a) {
    __shared__ double dtot[32];
    __shared__ u32 utot[32];
    __shared__ int itot[32];
    __shared__ u64 stage[CUT_STAGE];
    __shared__ u32 n_thresholds;
    const u32 s = blockIdx.x, tid = threadIdx.x;
    const u64* keys = a.keys + (u64)s * a.len;
    float* cuts = a.cuts + (u64)s * a.budget;
    const auto sum_u = [](u32 x, u32 y) { return x + y; };
    const auto sum_d = [](double x, double y) { return x + y; };
    // The present keys come first (NO_SAMPLE sorts last): count them.
    u32 lo = 0, hi = a.len;
    while (lo < hi) {
        const u32 mid = (lo + hi) / 2;
        if (keys[mid] == NO_SAMPLE) hi = mid; else lo = mid + 1;
    }
    const u32 n = lo;
    // Pass 1: the distinct values, the total weight, and the weights' lowest bit.
    u32 n_values = 0;
    double total = 0.0;
    int low_exp = 1 << 20;
    for (u32 t0 = 0; t0 < n; t0 += CUT_THREADS) {
        const u32 i = t0 + tid;
        const bool valid = i < n;
        const u64 k = valid ? keys[i] : 0;
        const bool first = valid && (i == 0 || key_value(keys[i - 1]) != key_value(k));
        const float w = valid ? key_weight(k) : 0.0f;
        u32 t_values;
        double t_total;
        int t_exp;
        block_scan<u32>(first, sum_u, utot, t_values);
        block_scan<double>((double)w, sum_d, dtot, t_total);
        const int e = !valid ? (1 << 20) : (isfinite(w) && w > 0.0f) ? low_bit_exponent(w) : -(1 << 20);
        block_scan<int>(e, [](int x, int y) { return min(x, y); }, itot, t_exp);
        n_values += t_values;
        total += t_total;
        low_exp = min(low_exp, t_exp);
    }
    // Every partial sum is a multiple of 2^low_exp below 2^(low_exp + 53): exact in f64, so
    // the parallel sums are the CPU's. (The margin of a factor 2 covers the rounding of the
    // parallel total itself.)
    const bool exact = n == 0 || (low_exp > -(1 << 19) && total < ldexp(1.0, low_exp + 52));
    if (!exact) {
        if (tid < 32) {
            const u32 count = sequential_cuts(keys, n, a.budget, cuts, stage);
            if (tid == 0) a.n_cuts[s] = count;
        }
        return;
    }
    if (n_values <= a.budget) {
        // A cut between each pair of neighbouring distinct values, written where the later
        // one's run starts.
        u32 before = 0;
        for (u32 t0 = 0; t0 < n; t0 += CUT_THREADS) {
            const u32 i = t0 + tid;
            const bool valid = i < n;
            const float x = valid ? key_value(keys[i]) : 0.0f;
            const bool first = valid && (i == 0 || key_value(keys[i - 1]) != x);
            u32 t_values;
            const u32 d = before + block_scan<u32>(first, sum_u, utot, t_values) - 1;
            if (first && i > 0) cuts[d - 1] = cut_between(key_value(keys[i - 1]), x);
            before += t_values;
        }
        if (tid == 0) a.n_cuts[s] = n_values == 0 ? 0 : n_values - 1;
        return;
    }
    // The CPU's thresholds: step, then each the last plus step, until past the total.
    double* thresholds = a.thresholds + (u64)s * (a.budget + 2);
    if (tid == 0) {
        const double step = total / (double)a.budget;
        double next = step;
        u32 k = 0;
        while (k < a.budget + 1 && next <= total) {
            thresholds[k++] = next;
            next += step;
        }
        thresholds[k++] = next;  // past every running total
        n_thresholds = k;
    }
    __syncthreads();
    const u32 n_thr = n_thresholds;
    // Pass 2: the CPU cuts after distinct value d (not the last) exactly when one of its
    // thresholds lies in (the running total before d's run, the running total through it),
    // and keeps the first budget - 1 of those.
    double carried = 0.0, run_start_carried = 0.0;
    u32 made = 0;
    for (u32 t0 = 0; t0 < n; t0 += CUT_THREADS) {
        const u32 i = t0 + tid;
        const bool valid = i < n;
        const u64 k = valid ? keys[i] : 0;
        const float x = key_value(k);
        const double w = valid ? (double)key_weight(k) : 0.0;
        double t_total, t_start;
        const double acc = carried + block_scan<double>(w, sum_d, dtot, t_total);
        const bool first = valid && (i == 0 || key_value(keys[i - 1]) != x);
        const double run_start = fmax(
            run_start_carried,
            block_scan<double>(first ? acc - w : -1.0, [](double p, double q) { return fmax(p, q); }, dtot, t_start));
        const bool ends = valid && i + 1 < n && key_value(keys[i + 1]) != x;
        bool cut = false;
        if (ends) {
            u32 l = 0, h = n_thr;
            while (l < h) {
                const u32 m = (l + h) / 2;
                if (thresholds[m] > run_start) h = m; else l = m + 1;
            }
            cut = l < n_thr && thresholds[l] <= acc;
        }
        u32 t_cuts;
        const u32 rank = made + block_scan<u32>(cut, sum_u, utot, t_cuts) - cut;
        if (cut && rank + 1 < a.budget) cuts[rank] = cut_between(x, key_value(keys[i + 1]));
        made += t_cuts;
        carried += t_total;
        run_start_carried = fmax(run_start_carried, t_start);
    }
    if (tid == 0) a.n_cuts[s] = min(made, a.budget - 1);
}

// ---- Binning (binning.cu: value_bin) straight from the columns ----

// A tile of BIN_TILE_ROWS rows x 32 features a block: each warp reads features a column run
// at a time (coalesced), bins them into shared memory and the column copy, then the block
// writes the tile's rows, a row's features side by side (coalesced again).
#define BIN_TILE_ROWS 64
#define BIN_THREADS 256

struct BinColumns {
    Columns columns;
    u32 n_rows;
    u32 n_features;
    u32 stride;
    u32 pad;
    BinCuts binning;
    u32* any_present;  // set when a value is present
};

template <typename Bin>
struct BinColumnsArgs {
    BinColumns b;
    Bin* bins;
    Bin* cols;  // null: no column copy (8- and 16-bit bins of narrow data keep one)
};

template <typename Bin>
__device__ void bin_columns(const BinColumns& a, Bin* bins, Bin* cols) {
    __shared__ u32 tile[BIN_TILE_ROWS][33];
    __shared__ u32 present;
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u32 row0 = blockIdx.x * BIN_TILE_ROWS, f0 = blockIdx.y * 32;
    if (threadIdx.x == 0) present = 0;
    __syncthreads();
    u32 seen = 0;
    for (u32 lf = warp; lf < 32; lf += BIN_THREADS / 32) {
        const u32 f = f0 + lf;
        if (f >= a.n_features) break;
        for (u32 r = lane; r < BIN_TILE_ROWS; r += 32) {
            const u32 row = row0 + r;
            if (row >= a.n_rows) break;
            const float x = column_value(a.columns, f, row);
            seen |= !isnan(x);
            const u32 bin = value_bin(x, f, a.binning.cuts, a.binning.cut_offsets, a.binning.categorical);
            tile[r][lf] = bin;
            if (cols) cols[(u64)f * a.n_rows + row] = (Bin)bin;
        }
    }
    if (__any_sync(0xffffffffu, seen) && lane == 0) present = 1;
    __syncthreads();
    for (u32 t = threadIdx.x; t < BIN_TILE_ROWS * 32; t += BIN_THREADS) {
        const u32 r = t / 32, lf = t % 32, row = row0 + r, f = f0 + lf;
        if (row < a.n_rows && f < a.n_features) bins[(u64)row * a.stride + f] = (Bin)tile[r][lf];
    }
    if (threadIdx.x == 0 && present && *a.any_present == 0) atomicOr(a.any_present, 1u);
}

#define BIN_COLUMNS_KERNEL(BIN)                                                   \
    extern "C" __global__ void __launch_bounds__(BIN_THREADS)                     \
        bin_columns_##BIN(const BinColumnsArgs<BIN> a) {                          \
        bin_columns<BIN>(a.b, a.bins, a.cols);                                    \
    }

BIN_COLUMNS_KERNEL(u8)
BIN_COLUMNS_KERNEL(u16)
BIN_COLUMNS_KERNEL(u32)

// ---- Compressed rows (sparse.cu) straight from the columns ----

// Each row's present values, counted a tile (as bin_columns reads it) at a time.
struct CountPresentArgs {
    Columns columns;
    u32 n_rows;
    u32 n_features;
    u32* row_len;
};

extern "C" __global__ void __launch_bounds__(BIN_THREADS) count_present(const CountPresentArgs a) {
    __shared__ u32 count[BIN_TILE_ROWS];
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u32 row0 = blockIdx.x * BIN_TILE_ROWS, f0 = blockIdx.y * 32;
    for (u32 r = threadIdx.x; r < BIN_TILE_ROWS; r += BIN_THREADS) count[r] = 0;
    __syncthreads();
    for (u32 lf = warp; lf < 32; lf += BIN_THREADS / 32) {
        const u32 f = f0 + lf;
        if (f >= a.n_features) break;
        for (u32 r = lane; r < BIN_TILE_ROWS; r += 32) {
            const u32 row = row0 + r;
            if (row < a.n_rows && !isnan(column_value(a.columns, f, row))) atomicAdd(&count[r], 1u);
        }
    }
    __syncthreads();
    for (u32 r = threadIdx.x; r < BIN_TILE_ROWS; r += BIN_THREADS) {
        if (row0 + r < a.n_rows && count[r]) atomicAdd(&a.row_len[row0 + r], count[r]);
    }
}

// Each present value binned into its row's entries (as its histogram slot), at the row's next
// free entry (`row_len` counts them); sort_rows then orders each row.
struct PlaceColumns {
    Columns columns;
    u32 n_rows;
    u32 n_features;
    BinCuts binning;
    const u32* slot_offsets;
    const u32* row_words;
    u32* row_len;
};

template <typename E>
struct PlaceColumnsArgs {
    PlaceColumns p;
    E* entries;
};

template <typename E>
__device__ void place_columns(const PlaceColumns& a, E* entries) {
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u32 row0 = blockIdx.x * BIN_TILE_ROWS, f0 = blockIdx.y * 32;
    for (u32 lf = warp; lf < 32; lf += BIN_THREADS / 32) {
        const u32 f = f0 + lf;
        if (f >= a.n_features) break;
        for (u32 r = lane; r < BIN_TILE_ROWS; r += 32) {
            const u32 row = row0 + r;
            if (row >= a.n_rows) break;
            const float x = column_value(a.columns, f, row);
            if (isnan(x)) continue;
            const u32 slot =
                a.slot_offsets[f] + value_bin(x, f, a.binning.cuts, a.binning.cut_offsets, a.binning.categorical);
            // Rows were sized by count_present: k stays inside the row.
            const u32 k = atomicAdd(&a.row_len[row], 1u);
            const u64 at = (u64)a.row_words[row] * Entry<E>::PER_WORD + k;
            if (at < (u64)a.row_words[row + 1] * Entry<E>::PER_WORD) entries[at] = (E)slot;
        }
    }
}

#define PLACE_COLUMNS_KERNEL(NAME, E)                                             \
    extern "C" __global__ void __launch_bounds__(BIN_THREADS)                     \
        place_columns_##NAME(const PlaceColumnsArgs<E> a) {                       \
        place_columns<E>(a.p, a.entries);                                         \
    }

PLACE_COLUMNS_KERNEL(s16, u16)
PLACE_COLUMNS_KERNEL(s32, u32)
