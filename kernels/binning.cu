// Quantisation of raw feature values into bins (src/data/cuts.rs: FeatureCuts::bin), written
// row-major: bins[row * stride + f], rows padded to a whole number of 32-bit words. One launch bins a block of rows of every feature,
// staged column-major as they came from the Arrow columns.

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
                          const u32* cut_offsets, const u32* categorical, Bin* bins) {
    u64 total = (u64)block_rows * n_features;
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < total; e += (u64)gridDim.x * blockDim.x) {
        u32 r = (u32)(e / n_features), f = (u32)(e % n_features);
        float x = values[(u64)f * block_rows + r];
        const u32 bin = value_bin(x, f, cuts, cut_offsets, categorical);
        bins[(u64)(row0 + r) * stride + f] = (Bin)bin;
    }
}

extern "C" __global__ void bin_block_u8(const float* values, u32 block_rows, u32 row0, u32 n_features,
                                        u32 stride, const float* cuts, const u32* cut_offsets, const u32* categorical, u8* bins) {
    bin_block<u8>(values, block_rows, row0, n_features, stride, cuts, cut_offsets, categorical, bins);
}

extern "C" __global__ void bin_block_u16(const float* values, u32 block_rows, u32 row0, u32 n_features,
                                         u32 stride, const float* cuts, const u32* cut_offsets, const u32* categorical,
                                         u16* bins) {
    bin_block<u16>(values, block_rows, row0, n_features, stride, cuts, cut_offsets, categorical, bins);
}

extern "C" __global__ void bin_block_u32(const float* values, u32 block_rows, u32 row0, u32 n_features,
                                         u32 stride, const float* cuts, const u32* cut_offsets, const u32* categorical,
                                         u32* bins) {
    bin_block<u32>(values, block_rows, row0, n_features, stride, cuts, cut_offsets, categorical, bins);
}
