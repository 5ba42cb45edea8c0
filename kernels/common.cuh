// Types and helpers shared by every kernel family. NVRTC has no include path here: the Rust
// side (src/backend/cuda/kernels.rs) concatenates this file before each `.cu` file.
//
// Every struct below is mirrored by a #[repr(C)] struct in src/backend/cuda/layout.rs; a test
// compiles static_asserts generated from the Rust layouts, so the two cannot drift apart.

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define NO_CHILD 0xffffffffu

// The objectives' links, as finish_predictions (predict.cu) applies them: the discriminants
// of Link (src/objective/descriptor.rs), which the layout probe checks against these.
#define LINK_IDENTITY 0u
#define LINK_LOGISTIC 1u
#define LINK_EXP 2u
#define LINK_SOFTMAX 3u
#define LINK_HINGE 4u

// f32's total order (Rust's `total_cmp`; src/data/cuts.rs: order_key) as unsigned integers:
// negative values' magnitude bits flipped, then the sign bit flipped.
__device__ __forceinline__ u32 order_key(float v) {
    const int i = __float_as_int(v);
    return (u32)(i ^ (int)(((u32)(i >> 31)) >> 1)) ^ 0x80000000u;
}

__device__ __forceinline__ float from_order_key(u32 key) {
    const int i = (int)(key ^ 0x80000000u);
    return __int_as_float(i ^ (int)(((u32)(i >> 31)) >> 1));
}

// A float gradient pair of one row (src/tree/gradient.rs: GradPair).
struct GradPair {
    float g;
    float h;
};

// A gradient pair in fixed point: at most 2^15 in magnitude, so 2^15 rows sum exactly in i32.
struct QuantGrad {
    int g;
    int h;
};

// An exact sum of quantised pairs.
struct GradSum {
    i64 g;
    i64 h;
};

// This round's power-of-two scales (src/tree/gradient.rs: Quantiser). The maxima are the bit
// patterns of non-negative floats, which order like the floats, so atomicMax finds them.
struct Quantisation {
    u32 g_max_bits;
    u32 h_max_bits;
    double g_scale;
    double h_scale;
    u32 negative_hessian;  // set when some h < 0, which the packed histogram sums cannot hold
    u32 pad;
};

// The split regularisation (src/tree/split/mod.rs: SplitParams).
struct SplitParams {
    double reg_lambda;
    double reg_alpha;
    double gamma;
    double min_child_weight;
    double max_delta_step;
    double g_unit;  // 1 / g_scale: an integer sum times this is the float sum
    double h_unit;
};

// A run of positions in the row index (one node's rows) that some blocks work on. Blocks
// `first_block ..` of a launch belong to it; `slot` is its histogram.
struct RowTask {
    u32 start;
    u32 len;
    u32 first_block;
    u32 slot;
};

// How one node's rows split (the CPU's twin: BinRouter in src/backend/cpu/grow.rs). A categorical split sends
// left the categories whose bits are set in words[category_start .. + category_len].
struct SplitRule {
    u32 feature;
    u32 split_bin;
    u32 missing_bin;
    u32 default_left;
    u32 category_start;
    u32 category_len;
};

// A split node whose children get histograms: its run, its partition task, its slots, and the
// blocks reserved for building its smaller child (at most half its rows). The right child
// keeps its parent's slot (the sibling is derived in place); the left child gets a fresh one.
struct ChildSlots {
    u32 start;
    u32 len;
    u32 first_block;
    u32 task;
    u32 parent_slot;
    u32 left_slot;
};

// A node whose best split is wanted.
struct EvalTask {
    GradSum total;
    u32 slot;
    u32 mask_row;  // row of the feature mask, or NO_CHILD when every feature may split
    double lower;  // the node's weight bounds (monotone constraints; infinite when free)
    double upper;
};

// Where a node's row count is, for the categorical search: known (`pending` 0: `rows`), or
// the left or right child (`right`) of task `task` of the last partition, whose parent had
// `rows` rows (node_left[task] holds the left count, unwritten when the parent had none).
struct TaskRows {
    u32 rows;
    u32 task;
    u32 pending;
    u32 right;
};

// A node's row count: known, or read from the partition's left counts when pending.
__device__ __forceinline__ u32 rows_of(const TaskRows tr, const u32* node_left) {
    if (!tr.pending || tr.rows == 0) return tr.rows;
    return tr.right ? tr.rows - node_left[tr.task] : node_left[tr.task];
}

// The regularisation of categorical splits (src/tree/split/categorical.rs: best_categorical).
struct CategoricalParams {
    double cat_smooth;
    double cat_l2;
    double min_data_per_group;
    u32 max_cat_to_onehot;
    u32 max_cat_threshold;
};

// The best split of a node (or of one feature of a node). For a categorical split,
// `split_bin` is how many categories go left: the first ones of the search's order.
struct SplitResult {
    GradSum left;
    double gain;
    u32 feature;
    u32 split_bin;
    u32 default_left;
    u32 found;
};

// One node of a finished tree, for updating the training margins.
struct TreeNode {
    u32 left;
    u32 right;
    u32 feature;
    u32 split_bin;
    u32 missing_bin;
    u32 default_left;
    float value;
    u32 category_start;
    u32 category_len;
    u32 pad;
};

// The rows of a training matrix, as the kernels of every layout take them (the first field of
// their argument structs; src/backend/cuda/data.rs: DenseBins, SparseEntries): dense bins of
// type B and the stride of a row, or compressed rows' entries of type E and where each row
// starts (kernels/sparse.cu).
// Dense bins paged from host memory (src/backend/cuda/pages.rs) hold one page: rows
// first_row..first_row + page_rows, row r's bins at (r - first_row) * stride; the kernels that
// reach rows through a row index skip the rows of other pages (`holds`). A matrix on the
// device whole is the page of every row: first_row 0, page_rows ALL_ROWS.
#define ALL_ROWS 0xffffffffu
template <typename B>
struct DenseBins {
    const B* bins;
    u32 stride;
    u32 first_row;
    u32 page_rows;
    __device__ __forceinline__ bool holds(u32 row) const { return row - first_row < page_rows; }
    __device__ __forceinline__ const B* row_bins(u32 row) const { return bins + (u64)(row - first_row) * stride; }
    __device__ __forceinline__ bool whole() const { return page_rows == ALL_ROWS; }
    // Positions begin..end of a node's run `run` (its rows ascending: the row index starts
    // sorted and the paged partition is stable) narrowed to the rows of this page: two binary
    // searches, the same in every thread.
    __device__ __forceinline__ void narrow(const u32* run, u32& begin, u32& end) const {
        if (whole()) return;
        const u32 lo = first_row, hi = first_row + page_rows;
        u32 a = begin, b = end;
        while (a < b) {
            const u32 m = (a + b) / 2;
            if (run[m] < lo) a = m + 1; else b = m;
        }
        u32 c = a, d = end;
        while (c < d) {
            const u32 m = (c + d) / 2;
            if (run[m] < hi) c = m + 1; else d = m;
        }
        begin = a;
        end = c;
    }
};

template <typename E>
struct SparseEntries {
    const E* entries;
    const u32* row_words;
};

// The task that block `block` of a launch works on: tasks are ordered by first_block.
__device__ __forceinline__ u32 find_task(const RowTask* tasks, u32 n_tasks, u32 block) {
    u32 lo = 0, hi = n_tasks;
    while (hi - lo > 1) {
        u32 mid = (lo + hi) / 2;
        if (tasks[mid].first_block <= block) lo = mid; else hi = mid;
    }
    return lo;
}

// Missing values follow the default; a category goes left when its bit is set (categories
// beyond the set, unseen ones included, go right); a numeric bin goes left up to split_bin.
__device__ __forceinline__ bool goes_left(u32 bin, u32 missing_bin, u32 default_left, u32 split_bin,
                                          u32 category_start, u32 category_len, const u32* words) {
    if (bin == missing_bin) return default_left != 0;
    if (category_len != 0) {
        const u32 w = bin / 32;
        return w < category_len && ((words[category_start + w] >> (bin % 32)) & 1u) != 0;
    }
    return bin <= split_bin;
}

__device__ __forceinline__ bool rule_goes_left(const SplitRule& r, u32 bin, const u32* words) {
    return goes_left(bin, r.missing_bin, r.default_left, r.split_bin, r.category_start, r.category_len, words);
}
