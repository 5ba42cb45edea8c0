// Quantisation of raw feature values into bins (src/data/cuts.rs: FeatureCuts::bin): the cut
// points as the kernels take them, and the bin of one value. columns.cu bins the columns with
// it into the training matrix.

// The kernels' argument structs (each kernel takes one, by value), mirrored in
// src/backend/cuda/data.rs and checked by the layout probe.

// The cut points: feature f's at cuts[cut_offsets[f] .. cut_offsets[f + 1]].
struct BinCuts {
    const float* cuts;
    const u32* cut_offsets;
    const u32* categorical;
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

