// Stable partition of the nodes' rows by their splits, all nodes of a level at once: one
// launch routes each row (reading its bin once) into a byte flag and counts each block's
// left-going rows; a second scatters every row to its child's run (a block's offset is the
// sum of the counts of the blocks before it in its node, so the result does not depend on
// scheduling). The left child keeps the front of the node's run, the right child the back,
// both in ascending row order. The runs land in a second row index; depth-wise growth swaps
// the two, loss-guided growth copies the runs back (other open leaves live in the first).

// How the partition and the margin update read a row's bin of one feature: from the dense
// bin matrix here, from the sparse entries in sparse.cu. The kernels are the same otherwise.
// Paged bins hold one page's rows (DenseBins in common.cuh): count_left routes only those.
template <typename Bin>
struct DenseRows {
    DenseBins<Bin> rows;
    __device__ __forceinline__ u32 bin(u32 row, u32 feature, u32 /*missing_bin*/) const {
        return rows.row_bins(row)[feature];
    }
    __device__ __forceinline__ bool holds(u32 row) const { return rows.holds(row); }
    __device__ __forceinline__ void narrow(const u32* run, u32& begin, u32& end) const { rows.narrow(run, begin, end); }
};

// The bins column-major (DeviceMatrix::cols): a node's rows, ascending, read their split
// feature's bins from one run, so a 32-byte sector serves every row of the node it holds.
template <typename Bin>
struct DenseCols {
    const Bin* cols;
    u32 n_rows;
    __device__ __forceinline__ u32 bin(u32 row, u32 feature, u32 /*missing_bin*/) const {
        return cols[(u64)feature * n_rows + row];
    }
    __device__ __forceinline__ bool holds(u32 /*row*/) const { return true; }
    __device__ __forceinline__ void narrow(const u32* /*run*/, u32& /*begin*/, u32& /*end*/) const {}
};

// `accumulate`: a page of paged bins, whose block counts add to the other pages' (block_left
// zeroed before the first); else each block stores its count.
template <typename Rows>
__device__ void count_left(const Rows rows, const u32* ridx, const RowTask* tasks, u32 n_tasks,
                           const SplitRule* rules, const u32* category_words, u32 rows_per_block, u8* flags,
                           u32* block_left, u32 accumulate) {
    const u32 ti = find_task(tasks, n_tasks, blockIdx.x);
    const RowTask task = tasks[ti];
    const SplitRule rule = rules[ti];
    u32 begin = (blockIdx.x - task.first_block) * rows_per_block;
    u32 end = min(begin + rows_per_block, task.len);
    rows.narrow(ridx + task.start, begin, end);  // a page routes its own rows only
    u32 count = 0;
    for (u32 p = begin + threadIdx.x; p < end; p += blockDim.x) {
        const u32 row = ridx[task.start + p];
        if (!rows.holds(row)) continue;
        const bool left = rule_goes_left(rule, rows.bin(row, rule.feature, rule.missing_bin), category_words);
        flags[task.start + p] = left;
        count += left;
    }
    for (int o = 16; o > 0; o /= 2) count += __shfl_xor_sync(0xffffffffu, count, o);
    __shared__ u32 block_count;
    if (threadIdx.x == 0) block_count = 0;
    __syncthreads();
    if ((threadIdx.x & 31) == 0 && count) atomicAdd(&block_count, count);
    __syncthreads();
    if (threadIdx.x == 0) {
        if (!accumulate) block_left[blockIdx.x] = block_count;
        else if (block_count) atomicAdd(&block_left[blockIdx.x], block_count);
    }
}

// The kernels' argument structs (src/backend/cuda/partition.rs). count_left's but the rows:
struct CountLeft {
    const u32* ridx;
    const RowTask* tasks;
    u32 n_tasks;
    const SplitRule* rules;
    const u32* category_words;
    u32 rows_per_block;
    u8* flags;
    u32* block_left;
    u32 accumulate;
};

template <typename B>
struct CountLeftArgs {
    DenseBins<B> rows;
    CountLeft part;
};

// The column-major 8-bit bins (DeviceMatrix::cols) and their rows.
struct CountLeftColsArgs {
    const u8* cols;
    u32 n_rows;
    CountLeft part;
};

struct ScatterArgs {
    const u8* flags;
    const u32* ridx;
    const RowTask* tasks;
    u32 n_tasks;
    u32 rows_per_block;
    const u32* block_left;
    u32* node_left;
    u32* ridx_out;
};

struct CopyRunsArgs {
    const u32* from;
    const RowTask* tasks;
    u32 n_tasks;
    u32 rows_per_block;
    u32* to;
};

// add_tree's arguments but the rows.
struct TreeWalk {
    u32 n_rows;
    const TreeNode* nodes;
    const u32* category_words;
    float* margin;
};

template <typename B>
struct AddTreeArgs {
    DenseBins<B> rows;
    TreeWalk walk;
};

__device__ __forceinline__ void scatter_body(const u8* flags, const u32* ridx, const RowTask* tasks, u32 n_tasks,
                                             u32 rows_per_block, const u32* block_left, u32* node_left,
                                             u32* ridx_out) {
    __shared__ u32 warp_counts[32];
    __shared__ u32 shared_base, shared_total;
    const u32 ti = find_task(tasks, n_tasks, blockIdx.x);
    const RowTask task = tasks[ti];
    const u32 block_in_task = blockIdx.x - task.first_block;
    const u32 begin = block_in_task * rows_per_block;
    const u32 end = min(begin + rows_per_block, task.len);
    // Left-going rows in the node's earlier blocks, and in all of them (the node's count,
    // which block 0 of the node also stores for the host and plan_children).
    const u32 n_blocks = (task.len + rows_per_block - 1) / rows_per_block;
    u32 before = 0, total = 0;
    for (u32 b = threadIdx.x; b < n_blocks; b += blockDim.x) {
        const u32 c = block_left[task.first_block + b];
        total += c;
        if (b < block_in_task) before += c;
    }
    for (int o = 16; o > 0; o /= 2) {
        before += __shfl_xor_sync(0xffffffffu, before, o);
        total += __shfl_xor_sync(0xffffffffu, total, o);
    }
    if (threadIdx.x == 0) shared_base = shared_total = 0;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
        if (before) atomicAdd(&shared_base, before);
        if (total) atomicAdd(&shared_total, total);
    }
    __syncthreads();
    u32 left_done = shared_base;  // left rows placed before this chunk
    const u32 n_left = shared_total;
    if (block_in_task == 0 && threadIdx.x == 0) node_left[ti] = n_left;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (u32 base = begin; base < end; base += blockDim.x) {
        const u32 p = base + threadIdx.x;
        u32 row = 0;
        bool left = false;
        if (p < end) {
            row = ridx[task.start + p];
            left = flags[task.start + p] != 0;
        }
        const u32 ballot = __ballot_sync(0xffffffffu, left);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        u32 warp_before = 0, chunk_left = 0;
        for (u32 w = 0; w < blockDim.x / 32; ++w) {
            if (w < warp) warp_before += warp_counts[w];
            chunk_left += warp_counts[w];
        }
        const u32 rank_left = left_done + warp_before + __popc(ballot & ((1u << lane) - 1));
        if (p < end) {
            // Right-going rows before p in the node: positions before p minus left-going ones.
            const u32 dst = left ? rank_left : n_left + (p - rank_left);
            ridx_out[task.start + dst] = row;
        }
        left_done += chunk_left;
        __syncthreads();
    }
}

extern "C" __global__ void scatter(const ScatterArgs a) {
    scatter_body(a.flags, a.ridx, a.tasks, a.n_tasks, a.rows_per_block, a.block_left, a.node_left, a.ridx_out);
}

extern "C" __global__ void count_left_u8(const CountLeftArgs<u8> a) {
    const CountLeft& c = a.part;
    count_left(DenseRows<u8>{a.rows}, c.ridx, c.tasks, c.n_tasks, c.rules, c.category_words,
               c.rows_per_block, c.flags, c.block_left, c.accumulate);
}

extern "C" __global__ void count_left_u16(const CountLeftArgs<u16> a) {
    const CountLeft& c = a.part;
    count_left(DenseRows<u16>{a.rows}, c.ridx, c.tasks, c.n_tasks, c.rules, c.category_words,
               c.rows_per_block, c.flags, c.block_left, c.accumulate);
}

extern "C" __global__ void count_left_u32(const CountLeftArgs<u32> a) {
    const CountLeft& c = a.part;
    count_left(DenseRows<u32>{a.rows}, c.ridx, c.tasks, c.n_tasks, c.rules, c.category_words,
               c.rows_per_block, c.flags, c.block_left, c.accumulate);
}

// Copies the partitioned runs back into the row index.
// The column-major variants (8- and 16-bit bins): `cols` and `n_rows` in the place of `bins`
// and `stride`.
extern "C" __global__ void count_left_cols_u8(const CountLeftColsArgs a) {
    const CountLeft& c = a.part;
    count_left(DenseCols<u8>{a.cols, a.n_rows}, c.ridx, c.tasks, c.n_tasks, c.rules, c.category_words,
               c.rows_per_block, c.flags, c.block_left, c.accumulate);
}

extern "C" __global__ void count_left_cols_u16(const CountLeftColsArgs a) {
    const CountLeft& c = a.part;
    count_left(DenseCols<u16>{(const u16*)a.cols, a.n_rows}, c.ridx, c.tasks, c.n_tasks, c.rules, c.category_words,
               c.rows_per_block, c.flags, c.block_left, c.accumulate);
}

extern "C" __global__ void copy_runs(const CopyRunsArgs a) {
    const u32* from = a.from;
    const RowTask* tasks = a.tasks;
    const u32 n_tasks = a.n_tasks, rows_per_block = a.rows_per_block;
    u32* to = a.to;
    const RowTask task = tasks[find_task(tasks, n_tasks, blockIdx.x)];
    const u32 begin = (blockIdx.x - task.first_block) * rows_per_block;
    const u32 end = min(begin + rows_per_block, task.len);
    for (u32 p = begin + threadIdx.x; p < end; p += blockDim.x) to[task.start + p] = from[task.start + p];
}

// Adds a finished tree's leaf values to the training margins, walking each row's bins.
template <typename Rows>
__device__ void add_tree(const Rows rows, u32 n_rows, const TreeNode* nodes, const u32* category_words, float* margin) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n_rows; i += gridDim.x * blockDim.x) {
        u32 n = 0;
        while (nodes[n].left != NO_CHILD) {
            const TreeNode node = nodes[n];
            const u32 bin = rows.bin(i, node.feature, node.missing_bin);
            const bool left = goes_left(bin, node.missing_bin, node.default_left, node.split_bin, node.category_start,
                                        node.category_len, category_words);
            n = left ? node.left : node.right;
        }
        margin[i] += nodes[n].value;
    }
}

extern "C" __global__ void add_tree_u8(const AddTreeArgs<u8> a) {
    add_tree(DenseRows<u8>{a.rows}, a.walk.n_rows, a.walk.nodes, a.walk.category_words,
             a.walk.margin);
}

extern "C" __global__ void add_tree_u16(const AddTreeArgs<u16> a) {
    add_tree(DenseRows<u16>{a.rows}, a.walk.n_rows, a.walk.nodes, a.walk.category_words,
             a.walk.margin);
}

extern "C" __global__ void add_tree_u32(const AddTreeArgs<u32> a) {
    add_tree(DenseRows<u32>{a.rows}, a.walk.n_rows, a.walk.nodes, a.walk.category_words,
             a.walk.margin);
}
