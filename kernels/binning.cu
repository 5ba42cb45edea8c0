// Quantisation of raw feature values into bins (src/data/cuts.rs: FeatureCuts::bin), written
// row-major: bins[row * stride + f], rows padded to a whole number of 32-bit words, and, when
// `col_rows` is not 0 (8-bit bins only), column-major as well: cols[f * col_rows + row] (what
// the partition reads). One launch bins a block of rows of every feature, staged column-major as they came
// from the Arrow columns.

// The kernels' argument structs (each kernel takes one, by value), mirrored in
// src/backend/cuda/data.rs and checked by the layout probe.

// The cut points: feature f's at cuts[cut_offsets[f] .. cut_offsets[f + 1]].
struct BinCuts {
    const float* cuts;
    const u32* cut_offsets;
    const u32* categorical;
};

// bin_block's arguments but the bins: `block_rows` staged rows from row `row0`, column-major.
struct BinBlock {
    const float* values;
    u32 block_rows;
    u32 row0;
    u32 n_features;
    u32 stride;
    BinCuts binning;
    u32 col_rows;
};

// Null `cols` (and col_rows 0): no column copy.
template <typename Bin>
struct BinBlockArgs {
    BinBlock block;
    Bin* bins;
    Bin* cols;
};

// The bin of value x of feature f (src/data/cuts.rs: FeatureCuts::bin). Categorical features
// reserve one cut slot per category, so for both kinds the bins are 0..=(end - begin) and the
// missing bin is end - begin + 1.
__device__ __forceinline__ u32 value_bin(float x, u32 f, const float* cuts, const u32* cut_offsets,
                                         const u32* categorical) {
    const u32 begin = cut_offsets[f], end = cut_offsets[f + 1], n_slots = end - begin;
    if (isnan(x)) return n_slots + 1;
    if (categorical[f]) {
        const u32 code = (u32)x;  // saturates at 0 for negative codes, as Rust's `as u32` does
        return code < n_slots ? code : n_slots;
    }
    // partition_point(cuts, c <= x): the first cut above x.
    u32 lo = begin, hi = end;
    while (lo < hi) {
        const u32 mid = (lo + hi) / 2;
        if (cuts[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo - begin;
}

template <typename Bin>
__device__ void bin_block(const float* values, u32 block_rows, u32 row0, u32 n_features, u32 stride, const float* cuts,
                          const u32* cut_offsets, const u32* categorical, Bin* bins, Bin* cols, u32 col_rows) {
    u64 total = (u64)block_rows * n_features;
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < total; e += (u64)gridDim.x * blockDim.x) {
        u32 r = (u32)(e / n_features), f = (u32)(e % n_features);
        float x = values[(u64)f * block_rows + r];
        const u32 bin = value_bin(x, f, cuts, cut_offsets, categorical);
        bins[(u64)(row0 + r) * stride + f] = (Bin)bin;
        // A block's column runs (block_rows bins each) are written into the L2 together.
        if (col_rows) cols[(u64)f * col_rows + row0 + r] = (Bin)bin;
    }
}

#define BIN_BLOCK_KERNEL(BIN)                                                                                \
    extern "C" __global__ void bin_block_##BIN(const BinBlockArgs<BIN> a) {                                  \
        const BinBlock& b = a.block;                                                                         \
        bin_block<BIN>(b.values, b.block_rows, b.row0, b.n_features, b.stride, b.binning.cuts,              \
                       b.binning.cut_offsets, b.binning.categorical, a.bins, a.cols, b.col_rows);            \
    }

BIN_BLOCK_KERNEL(u8)
BIN_BLOCK_KERNEL(u16)
BIN_BLOCK_KERNEL(u32)
