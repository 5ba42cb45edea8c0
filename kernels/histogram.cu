// Gradient histograms of many nodes in one launch (seed 000; XGBoost's gpu_hist design).
//
// Block x of the grid works on up to `rows_per_block` rows of one node (RowTask), block y on
// one group of features whose histogram fits in shared memory. Each block sums in shared
// memory with 32-bit atomics, exact because a block sees at most 2^15 rows of values of at
// most 2^15, then adds its non-zero slots to the node's 64-bit histogram in global memory.
// (Packing g and h into one 64-bit shared atomic was tried: 2.3x slower on an H100, see
// docs/gpu-notes.md.)
// Integer addition is associative, so the result is the same in any order: bitwise equal to
// the CPU's histogram.

// The histogram of one feature group. In shared memory, every feature of the group gets the
// same number of slots (the group's largest), so a bin's slot is j * stride + bin with no
// per-feature offset to look up; g and h sums sit in separate arrays (interleaved, a warp's
// g atomics could reach only the even banks). A group wider than the block's shared memory
// (a feature of thousands of categories) sums straight into the node's histogram in global
// memory with 64-bit atomics, still exact. The host makes such a group one word of features.
struct GroupHistogram {
    int* acc_g;
    int* acc_h;
    u32 stride;    // slots per feature in shared memory
    u32 n_shared;  // slots in shared memory (0 for a global group)
    GradSum* out;  // the node's histogram
    const u32* slot_offsets;
    u32 f0;

    __device__ __forceinline__ void add_shared(u32 j, u32 bin, QuantGrad q) const {
        const u32 slot = j * stride + bin;
        atomicAdd(&acc_g[slot], q.g);
        atomicAdd(&acc_h[slot], q.h);
    }

    __device__ __forceinline__ void add_global(u32 j, u32 bin, QuantGrad q) const {
        GradSum* s = out + slot_offsets[f0 + j] + bin;
        atomicAdd((u64*)&s->g, (u64)(i64)q.g);
        atomicAdd((u64*)&s->h, (u64)(i64)q.h);
    }

    // Adds the block's non-zero shared sums to the node's histogram (after a __syncthreads),
    // or, when the block is the node's only one (`sole`), stores them: a deep level's many
    // small nodes would otherwise spend their time in global atomics.
    __device__ void flush(bool sole) const {
        for (u32 i = threadIdx.x; i < n_shared; i += blockDim.x) {
            const u32 j = i / stride, b = i - j * stride;
            const u32 first = slot_offsets[f0 + j];
            if (b >= slot_offsets[f0 + j + 1] - first) continue;
            const int g = acc_g[i], h = acc_h[i];
            if (sole) {
                const GradSum sum = {(i64)g, (i64)h};
                out[first + b] = sum;
                continue;
            }
            if (g != 0) atomicAdd((u64*)&out[first + b].g, (u64)(i64)g);
            if (h != 0) atomicAdd((u64*)&out[first + b].h, (u64)(i64)h);
        }
    }
};

// Sets up features f0..f1's histogram for a block whose shared memory holds `shared_slots`
// slots (g and h), zeroing it when the group fits there.
__device__ GroupHistogram start_group_histogram(const u32* slot_offsets, u32 f0, u32 f1, u32 shared_slots,
                                                int* shared, GradSum* out) {
    __shared__ u32 group_stride;
    if (threadIdx.x < 32) {
        u32 widest = 0;
        for (u32 f = f0 + threadIdx.x; f < f1; f += 32) widest = max(widest, slot_offsets[f + 1] - slot_offsets[f]);
        for (int o = 16; o > 0; o /= 2) widest = max(widest, __shfl_xor_sync(0xffffffffu, widest, o));
        if (threadIdx.x == 0) group_stride = widest;
    }
    __syncthreads();
    GroupHistogram hg;
    hg.stride = group_stride;
    hg.n_shared = (f1 - f0) * hg.stride <= shared_slots ? (f1 - f0) * hg.stride : 0;
    hg.acc_g = shared;
    hg.acc_h = shared + hg.n_shared;
    hg.out = out;
    hg.slot_offsets = slot_offsets;
    hg.f0 = f0;
    for (u32 i = threadIdx.x; i < 2 * hg.n_shared; i += blockDim.x) shared[i] = 0;
    __syncthreads();
    return hg;
}

// Each row's part of the group is read by `lanes` neighbouring threads (a power of two up to
// 32), a word each in turn, so that a warp's loads fall on a few sectors: with one thread a
// row, a warp's load touches 32 rows' sectors and uses 4 bytes of each, and a wide group's
// rows are too many for the little L1 that the shared histogram leaves (ncu: 4 of 32 bytes a
// sector used, warps waiting on L1TEX 60% of the time). One lane a row suits narrow groups.
// A thread takes ROWS_AT_ONCE rows a step, their loads issued together: each row is a chain
// of two dependent loads (its index, then its bins), and one chain at a time left the warps
// waiting on them (ncu: 65% of the cycles between issues).
#define ROWS_AT_ONCE 4
// `only`: sum only the rows whose flag (by row-index position) is set (null: every row): a
// paged fit sums its left children from their parents' runs as the partition routes them.
template <typename Bin, bool GLOBAL>
__device__ void sum_rows_into(const DenseBins<Bin> rows, const QuantGrad* grads, const u32* ridx, const u8* only,
                              RowTask task, u32 begin, u32 end, u32 width, u32 lanes, const GroupHistogram& hg) {
    constexpr u32 PER_WORD = 4 / sizeof(Bin), BITS = 8 * sizeof(Bin);
    constexpr u32 MASK = BITS == 32 ? 0xffffffffu : (1u << (BITS % 32)) - 1;
    const u32 lane = threadIdx.x & (lanes - 1), rows_at_once = blockDim.x / lanes;
    for (u32 p0 = begin + threadIdx.x / lanes; p0 < end; p0 += ROWS_AT_ONCE * rows_at_once) {
        const u32* r[ROWS_AT_ONCE];
        QuantGrad q[ROWS_AT_ONCE];
#pragma unroll
        for (u32 u = 0; u < ROWS_AT_ONCE; ++u) {
            const u32 p = p0 + u * rows_at_once;
            const u32 row = p < end ? ridx[task.start + p] : 0;
            // A paged matrix's other pages' rows are summed when their page is here.
            const bool here = p < end && rows.holds(row) && (only == nullptr || only[task.start + p]);
            q[u] = here ? grads[row] : QuantGrad{0, 0};
            // Rows and groups start on 32-bit words: read the bins a word at a time.
            r[u] = (q[u].g == 0 && q[u].h == 0) ? nullptr : (const u32*)(rows.row_bins(row) + hg.f0);
        }
        for (u32 w = lane; w * PER_WORD < width; w += lanes) {
            u32 words[ROWS_AT_ONCE];
#pragma unroll
            for (u32 u = 0; u < ROWS_AT_ONCE; ++u) words[u] = r[u] ? r[u][w] : 0;
#pragma unroll
            for (u32 u = 0; u < ROWS_AT_ONCE; ++u) {
                if (!r[u]) continue;
#pragma unroll
                for (u32 b = 0; b < PER_WORD; ++b) {
                    const u32 j = w * PER_WORD + b;
                    if (j < width) {
                        const u32 bin = (words[u] >> (BITS * b % 32)) & MASK;
                        if (GLOBAL) hg.add_global(j, bin, q[u]);
                        else hg.add_shared(j, bin, q[u]);
                    }
                }
            }
        }
    }
}

// Threads reading one row's part of a group `width` features wide: a power of two covering
// its words, at most `max_lanes`.
template <typename Bin>
__device__ __forceinline__ u32 lanes_per_row(u32 width, u32 max_lanes) {
    const u32 words = (width * sizeof(Bin) + 3) / 4;
    u32 lanes = 1;
    while (lanes < words && lanes < max_lanes) lanes *= 2;
    return lanes;
}

template <typename Bin>
__device__ void build_histograms(const DenseBins<Bin> rows, const QuantGrad* grads, const u32* ridx, const u8* only,
                                 const RowTask* tasks, u32 n_tasks, const u32* slot_offsets,
                                 const u32* group_first_feature, u32 shared_slots, u32 total_slots,
                                 u32 rows_per_block, u32 max_lanes, GradSum* hist) {
    extern __shared__ int shared[];
    const u32 f0 = group_first_feature[blockIdx.y], f1 = group_first_feature[blockIdx.y + 1];
    const RowTask task = tasks[find_task(tasks, n_tasks, blockIdx.x)];
    u32 begin = (blockIdx.x - task.first_block) * rows_per_block;
    // Blocks are reserved for half the parent's rows; the built child may have fewer.
    if (begin >= task.len) return;
    u32 end = min(begin + rows_per_block, task.len);
    // A page sums only its own rows; a block with none leaves at once.
    rows.narrow(ridx + task.start, begin, end);
    if (begin >= end) return;
    const GroupHistogram hg =
        start_group_histogram(slot_offsets, f0, f1, shared_slots, shared, hist + (u64)task.slot * total_slots);
    const u32 lanes = lanes_per_row<Bin>(f1 - f0, max_lanes);
    if (hg.n_shared == 0) {
        sum_rows_into<Bin, true>(rows, grads, ridx, only, task, begin, end, f1 - f0, lanes, hg);
        return;
    }
    sum_rows_into<Bin, false>(rows, grads, ridx, only, task, begin, end, f1 - f0, lanes, hg);
    __syncthreads();
    // A page's sums add to the other pages'.
    hg.flush(task.len <= rows_per_block && rows.whole());
}

// A histogram build's arguments but the rows (src/backend/cuda/histogram.rs: HistogramBuild).
struct HistogramBuild {
    const QuantGrad* grads;
    const u32* ridx;
    const u8* only;  // dense bins: the rows to sum, by flag (null: all); see sum_rows_into
    const RowTask* tasks;
    u32 n_tasks;
    const u32* slot_offsets;
    const u32* group_first_feature;
    u32 shared_slots;
    u32 total_slots;
    u32 rows_per_block;
    u32 max_lanes;  // threads reading one row at most (a power of two, 1..32)
    GradSum* hist;
};

template <typename B>
struct HistogramArgs {
    DenseBins<B> rows;
    HistogramBuild build;
};

#define HISTOGRAM_KERNEL(BIN)                                                                                  \
    extern "C" __global__ void histogram_##BIN(const HistogramArgs<BIN> a) {                                     \
        const HistogramBuild& b = a.build;                                                                       \
        build_histograms<BIN>(a.rows, b.grads, b.ridx, b.only, b.tasks, b.n_tasks, b.slot_offsets,  \
                              b.group_first_feature, b.shared_slots, b.total_slots, b.rows_per_block,        \
                              b.max_lanes, b.hist);                                                            \
    }

HISTOGRAM_KERNEL(u8)
HISTOGRAM_KERNEL(u16)
HISTOGRAM_KERNEL(u32)

// Zeroes the histograms of tasks[blockIdx.y] before a build.
// The launches over whole histogram slots: a slot list (tasks, triples or pairs), the slots'
// length, and the pool (src/backend/cuda/histogram.rs: SlotsArgs).
template <typename T>
struct SlotsArgs {
    const T* list;
    u32 total_slots;
    GradSum* hist;
};

extern "C" __global__ void zero_histograms(const SlotsArgs<RowTask> a) {
    const RowTask* tasks = a.list;
    const u32 total_slots = a.total_slots;
    GradSum* hist = a.hist;
    GradSum* h = hist + (u64)tasks[blockIdx.y].slot * total_slots;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < total_slots; i += gridDim.x * blockDim.x) {
        h[i].g = 0;
        h[i].h = 0;
    }
}

// Each split node's children from its parent and its built child, in place (no third slot):
// triples (parent slot, fresh slot, built_right). The smaller child was built into the fresh
// slot; the left child ends there and the right child in the parent's slot.
extern "C" __global__ void derive_siblings(const SlotsArgs<u32> a) {
    const u32* triples = a.list;
    const u32 total_slots = a.total_slots;
    GradSum* hist = a.hist;
    const u32* t = triples + 3 * blockIdx.y;
    GradSum* parent = hist + (u64)t[0] * total_slots;
    GradSum* fresh = hist + (u64)t[1] * total_slots;
    const bool built_right = t[2] != 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < total_slots; i += gridDim.x * blockDim.x) {
        const GradSum p = parent[i], built = fresh[i];
        const GradSum other = {p.g - built.g, p.h - built.h};
        // Built left: the parent's slot becomes the right child. Built right: swap them.
        fresh[i] = built_right ? other : built;
        parent[i] = built_right ? built : other;
    }
}

// Copies histograms between slots: pairs (from, to), one per blockIdx.y (a distributed fit
// gathers a level's histograms into one run, summed over the workers there in one exchange).
extern "C" __global__ void copy_histograms(const SlotsArgs<u32> a) {
    const u32* pairs = a.list;
    const u32 total_slots = a.total_slots;
    GradSum* hist = a.hist;
    const GradSum* from = hist + (u64)pairs[2 * blockIdx.y] * total_slots;
    GradSum* to = hist + (u64)pairs[2 * blockIdx.y + 1] * total_slots;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < total_slots; i += gridDim.x * blockDim.x) {
        to[i] = from[i];
    }
}

// Which child of each split node to build (the one with fewer rows, ties to the left; the CPU
// picks by hessian before partitioning, which gives the same sums: subtraction is exact),
// decided on the device from the partition's counts, so the host need not wait for them:
// build tasks (into the fresh slot) and the triples of derive_siblings. Blocks (i, y) zero
// parent i's fresh histogram together, a part each (one block a parent zeroed a wide
// histogram alone: 16 us a level for 200 features of 256 bins, whatever the level's nodes),
// and block (i, 0) plans it.
struct PlanChildrenArgs {
    const ChildSlots* parents;
    const u32* node_left;
    u32 total_slots;
    RowTask* builds;
    u32* triples;
    GradSum* hist;
};

extern "C" __global__ void plan_children(const PlanChildrenArgs a) {
    const ChildSlots* parents = a.parents;
    const u32* node_left = a.node_left;
    const u32 total_slots = a.total_slots;
    RowTask* builds = a.builds;
    u32* triples = a.triples;
    GradSum* hist = a.hist;
    const u32 i = blockIdx.x;
    const ChildSlots p = parents[i];
    if (blockIdx.y == 0 && threadIdx.x == 0) {
        const u32 n_left = p.len == 0 ? 0 : node_left[p.task];
        const bool left_small = n_left <= p.len - n_left;
        RowTask b;
        b.start = left_small ? p.start : p.start + n_left;
        b.len = left_small ? n_left : p.len - n_left;
        b.first_block = p.first_block;
        b.slot = p.left_slot;
        builds[i] = b;
        triples[3 * i] = p.parent_slot;
        triples[3 * i + 1] = p.left_slot;
        triples[3 * i + 2] = left_small ? 0 : 1;
    }
    GradSum* h = hist + (u64)p.left_slot * total_slots;
    for (u32 k = blockIdx.y * blockDim.x + threadIdx.x; k < total_slots; k += gridDim.y * blockDim.x) {
        h[k].g = 0;
        h[k].h = 0;
    }
}
