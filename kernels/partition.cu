// Partition of the nodes' rows by their splits, all nodes of a level at once. The left
// child keeps the front of the node's run in the parent's order; the right child the back, in
// the parent's order reversed (so every run is monotone in row: a node's rows read their
// split feature's column-major bins from one run, ascending or descending). The runs land in a
// second row index; depth-wise growth swaps the two, loss-guided growth copies the runs back
// (other open leaves live in the first).
//
// Bins on the device whole take one pass (`partition_level`): a block routes its rows, holds
// them, and learns the left-going rows of the node's earlier blocks by a decoupled look-back
// (each block publishes its count, then its running total); blocks take their places in the
// node in the order they start, so a block only waits on blocks already running. The result
// does not depend on scheduling: a block's rows and their order are fixed by its place.
// Paged bins (one page of rows on the device at a time) take two passes: `count_left` routes
// each page's rows into byte flags and counts each block's left-going rows, then `scatter`
// moves every row (a block's offset is the sum of the counts of the blocks before it); their
// flags also feed the paged level's left children's histograms (grow.rs).

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

// A level's rows and how they split, as both partitions read them: the tasks' runs in the row
// index, and each task's rule (categorical rules' bits in `category_words`).
struct LevelRoutes {
    const u32* ridx;
    const RowTask* tasks;
    u32 n_tasks;
    const SplitRule* rules;
    const u32* category_words;
};

// count_left's arguments but the rows: the routes, then its outputs.
struct CountLeft {
    LevelRoutes level;
    u32 rows_per_block;
    u8* flags;
    u32* block_left;
};

// partition_level's arguments but the rows. `lookback` (zeroed before each launch): the next
// block's place in the launch, then each place's published state.
struct Partition {
    LevelRoutes level;
    u64* lookback;
    u32* node_left;
    u32* ridx_out;
};

// A page of paged bins: its blocks' counts add to the other pages' (block_left zeroed before
// the first).
template <typename Rows>
__device__ void count_left(const Rows rows, const CountLeft& c) {
    const u32* ridx = c.level.ridx;
    const u32 rows_per_block = c.rows_per_block;
    const u32 ti = find_task(c.level.tasks, c.level.n_tasks, blockIdx.x);
    const RowTask task = c.level.tasks[ti];
    const SplitRule rule = c.level.rules[ti];
    u32 begin = (blockIdx.x - task.first_block) * rows_per_block;
    u32 end = min(begin + rows_per_block, task.len);
    rows.narrow(ridx + task.start, begin, end);  // a page routes its own rows only
    u32 count = 0;
    for (u32 p = begin + threadIdx.x; p < end; p += blockDim.x) {
        const u32 row = ridx[task.start + p];
        if (!rows.holds(row)) continue;
        const bool left = rule_goes_left(rule, rows.bin(row, rule.feature, rule.missing_bin), c.level.category_words);
        c.flags[task.start + p] = left;
        count += left;
    }
    for (int o = 16; o > 0; o /= 2) count += __shfl_xor_sync(0xffffffffu, count, o);
    __shared__ u32 block_count;
    if (threadIdx.x == 0) block_count = 0;
    __syncthreads();
    if ((threadIdx.x & 31) == 0 && count) atomicAdd(&block_count, count);
    __syncthreads();
    if (threadIdx.x == 0 && block_count) atomicAdd(&c.block_left[blockIdx.x], block_count);
}

// One pass: a block of ONE_PASS_THREADS threads holds ONE_PASS_ITEMS rows a thread.
#define ONE_PASS_THREADS 256
#define ONE_PASS_ITEMS 16
#define ONE_PASS_ROWS (ONE_PASS_THREADS * ONE_PASS_ITEMS)
#define ONE_PASS_WARPS (ONE_PASS_THREADS / 32)

// A block's published state (zeroed before the launch): the state in the high word,
// the count in the low, so one 64-bit store publishes both.
#define BLOCK_COUNTED 1ull    // the block's own left-going rows
#define BLOCK_FINISHED 2ull   // the left-going rows of the node's blocks up to this one
__device__ __forceinline__ void publish(u64* state, u64 kind, u32 count) {
    *(volatile u64*)state = (kind << 32) | count;
}

// The left-going rows of the node's blocks before `place` (warp 0, every lane): 32 states at a
// time, nearest first, waiting on any not yet published, down to the nearest finished one (or
// the node's first block).
__device__ u32 left_before(const u64* states, u32 place, u32 first) {
    const u32 lane = threadIdx.x & 31;
    u32 sum = 0;
    for (i64 top = (i64)place - 1;; top -= 32) {
        const i64 at = top - lane;
        u64 s = at >= (i64)first ? *(const volatile u64*)&states[at] : (BLOCK_FINISHED << 32);
        while (__any_sync(0xffffffffu, (s >> 32) == 0)) {
            if ((s >> 32) == 0) s = *(const volatile u64*)&states[at];
        }
        const u32 finished = __ballot_sync(0xffffffffu, (s >> 32) == BLOCK_FINISHED);
        const u32 stop = finished ? __ffs(finished) - 1 : 32;
        u32 v = lane <= stop ? (u32)s : 0;
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
        sum += v;
        if (finished) return sum;
    }
}

template <typename Rows>
__device__ void partition_level(const Rows rows, const Partition& c) {
    const u32* ridx = c.level.ridx;
    __shared__ u32 staged[ONE_PASS_ROWS];
    __shared__ u32 ballots[ONE_PASS_ITEMS * ONE_PASS_WARPS];  // then their exclusive prefix sums
    __shared__ u32 shared_place, shared_left, shared_before;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) shared_place = (u32)atomicAdd(&c.lookback[0], 1ull);
    __syncthreads();
    const u32 place = shared_place;
    u64* states = c.lookback + 1;
    const u32 ti = find_task(c.level.tasks, c.level.n_tasks, place);
    const RowTask task = c.level.tasks[ti];
    const SplitRule rule = c.level.rules[ti];
    const u32 begin = (place - task.first_block) * ONE_PASS_ROWS;
    const u32 n = min(ONE_PASS_ROWS, task.len - begin);
    // Item k of thread t is the block's row k * THREADS + t: each load is one warp's run.
    u32 row[ONE_PASS_ITEMS];
#pragma unroll
    for (u32 k = 0; k < ONE_PASS_ITEMS; ++k) {
        const u32 i = k * ONE_PASS_THREADS + threadIdx.x;
        row[k] = i < n ? ridx[task.start + begin + i] : 0;
    }
    u32 left_mask = 0;
#pragma unroll
    for (u32 k = 0; k < ONE_PASS_ITEMS; ++k) {
        const u32 i = k * ONE_PASS_THREADS + threadIdx.x;
        const bool left =
            i < n && rule_goes_left(rule, rows.bin(row[k], rule.feature, rule.missing_bin), c.level.category_words);
        const u32 ballot = __ballot_sync(0xffffffffu, left);
        left_mask |= (u32)left << k;
        if (lane == 0) ballots[k * ONE_PASS_WARPS + warp] = ballot;
    }
    __syncthreads();
    // Warp 0: the ballots' counts in row order (item, then warp) to exclusive prefix sums,
    // four a lane; the block's count published at once, then the node's earlier blocks'.
    if (warp == 0) {
        constexpr u32 PER_LANE = ONE_PASS_ITEMS * ONE_PASS_WARPS / 32;
        u32 counts[PER_LANE], own = 0;
#pragma unroll
        for (u32 j = 0; j < PER_LANE; ++j) {
            counts[j] = __popc(ballots[lane * PER_LANE + j]);
            own += counts[j];
        }
        u32 scan = own;
        for (int o = 1; o < 32; o *= 2) {
            const u32 v = __shfl_up_sync(0xffffffffu, scan, o);
            if (lane >= (u32)o) scan += v;
        }
        u32 run = scan - own;
#pragma unroll
        for (u32 j = 0; j < PER_LANE; ++j) {
            ballots[lane * PER_LANE + j] = run;
            run += counts[j];
        }
        const u32 block_left = __shfl_sync(0xffffffffu, scan, 31);
        const bool first = place == task.first_block;
        if (lane == 0) publish(&states[place], first ? BLOCK_FINISHED : BLOCK_COUNTED, block_left);
        const u32 before = first ? 0 : left_before(states, place, task.first_block);
        if (lane == 0) {
            if (!first) publish(&states[place], BLOCK_FINISHED, before + block_left);
            if (begin + n == task.len) c.node_left[ti] = before + block_left;
            shared_left = block_left;
            shared_before = before;
        }
    }
    __syncthreads();
    // Staged in block order: the left-going rows first, then the right-going ones.
    const u32 block_left = shared_left;
    const u32 lanes_before = (1u << lane) - 1;
#pragma unroll
    for (u32 k = 0; k < ONE_PASS_ITEMS; ++k) {
        const u32 i = k * ONE_PASS_THREADS + threadIdx.x;
        const bool left = (left_mask >> k) & 1;
        const u32 left_mates = __popc(__ballot_sync(0xffffffffu, left) & lanes_before);
        if (i >= n) continue;
        // The block's left-going rows before this warp's item k, then before this lane's.
        const u32 rank_left = ballots[k * ONE_PASS_WARPS + warp] + left_mates;
        staged[left ? rank_left : block_left + (i - rank_left)] = row[k];
    }
    __syncthreads();
    // Out: the left runs ascend from the node's front; the right ones descend from its back
    // (its right-going rows before this block: positions before it less its left-going ones).
    const u32 before = shared_before;
    const u32 right_before = begin - before;
    for (u32 i = threadIdx.x; i < n; i += ONE_PASS_THREADS) {
        const u32 dst = i < block_left ? before + i : task.len - 1 - (right_before + (i - block_left));
        c.ridx_out[task.start + dst] = staged[i];
    }
}

// The kernels' argument structs (src/backend/cuda/partition.rs), with CountLeft and
// Partition above.
template <typename B>
struct CountLeftArgs {
    DenseBins<B> rows;
    CountLeft part;
};

template <typename B>
struct PartitionArgs {
    DenseBins<B> rows;
    Partition part;
};

struct PartitionColsArgs {
    const u8* cols;
    u32 n_rows;
    Partition part;
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

extern "C" __global__ void __launch_bounds__(ONE_PASS_THREADS) partition_u8(const PartitionArgs<u8> a) {
    partition_level(DenseRows<u8>{a.rows}, a.part);
}

extern "C" __global__ void __launch_bounds__(ONE_PASS_THREADS) partition_u16(const PartitionArgs<u16> a) {
    partition_level(DenseRows<u16>{a.rows}, a.part);
}

extern "C" __global__ void __launch_bounds__(ONE_PASS_THREADS) partition_u32(const PartitionArgs<u32> a) {
    partition_level(DenseRows<u32>{a.rows}, a.part);
}

// The column-major copy of 8- or 16-bit bins: `cols` and `n_rows` in the place of the rows.
extern "C" __global__ void __launch_bounds__(ONE_PASS_THREADS) partition_cols_u8(const PartitionColsArgs a) {
    partition_level(DenseCols<u8>{a.cols, a.n_rows}, a.part);
}

extern "C" __global__ void __launch_bounds__(ONE_PASS_THREADS) partition_cols_u16(const PartitionColsArgs a) {
    partition_level(DenseCols<u16>{(const u16*)a.cols, a.n_rows}, a.part);
}

extern "C" __global__ void count_left_u8(const CountLeftArgs<u8> a) { count_left(DenseRows<u8>{a.rows}, a.part); }

extern "C" __global__ void count_left_u16(const CountLeftArgs<u16> a) { count_left(DenseRows<u16>{a.rows}, a.part); }

extern "C" __global__ void count_left_u32(const CountLeftArgs<u32> a) { count_left(DenseRows<u32>{a.rows}, a.part); }

// Copies the partitioned runs back into the row index.
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
