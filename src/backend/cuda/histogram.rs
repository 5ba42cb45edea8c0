//! Node histograms on the device (`kernels/histogram.cu`): a pool of histogram slots, the
//! feature groups whose histograms fit one block's shared memory, and the launches that build
//! the root's histogram and the children's (the smaller built, the sibling subtracted).

use cudarc::driver::CudaSlice;

use super::buffers::{FitDevice, HistPool, Scratch};
use super::data::{DenseBins, DeviceMatrix, MatrixRows, SparseEntries};
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut};
use super::layout::{ChildSlots, GradSum, QuantGrad, RowTask};
use super::pages::Window;
use crate::error::Result;
use crate::tree::{GrowParams, GrowPolicy};

/// Rows one histogram block sums: at most 2^15, so its 32-bit shared sums are exact; at
/// least 2^10, so that flushing the block's histogram stays a small part of its work.
const MAX_ROWS_PER_BLOCK: u32 = 1 << 15;
const MIN_ROWS_PER_BLOCK: u32 = 1 << 10;
const THREADS: u32 = 1024;
/// Waves of histogram blocks aimed at (docs/gpu-notes.md has the measurements behind both).
const WAVES: u64 = 2;
/// Shared memory the driver keeps for each block (1 KiB on every GPU since Ampere).
const DRIVER_SHARED_PER_BLOCK: u32 = 1024;
/// The most threads that read one row's part of a feature group together (kernels/histogram.cu,
/// `sum_rows_into`): a warp, for the widest groups.
const MAX_ROW_LANES: u32 = 32;

/// A histogram build's arguments but the rows (`HistogramBuild` in kernels/histogram.cu):
/// the tasks' rows `ridx[task.start..][..task.len]`, blocks `first_block..` of a task working
/// on `rows_per_block` rows each, feature group `blockIdx.y` summed into `hist`'s task slot.
#[repr(C)]
pub struct HistogramBuild<'a> {
    pub grads: DevPtr<'a, QuantGrad>,
    pub ridx: DevPtr<'a, u32>,
    /// Dense bins: only the rows whose flag (by row-index position) is set, or every row (null).
    pub only: DevPtr<'a, u8>,
    pub tasks: DevPtr<'a, RowTask>,
    pub n_tasks: u32,
    pub slot_offsets: DevPtr<'a, u32>,
    pub group_first_feature: DevPtr<'a, u32>,
    pub shared_slots: u32,
    pub total_slots: u32,
    pub rows_per_block: u32,
    /// Threads reading one row's part of a group at most (a power of two, 1..32).
    pub max_lanes: u32,
    pub hist: DevPtrMut<'a, GradSum>,
}

/// `histogram_u8`, `_u16`, `_u32`: dense bins of type `B`.
#[repr(C)]
pub struct HistogramArgs<'a, B> {
    pub rows: DenseBins<'a, B>,
    pub build: HistogramBuild<'a>,
}

/// `histogram_s16`, `_s32`: compressed rows, with each row's first entry of each feature group.
#[repr(C)]
pub struct SparseHistogramArgs<'a, E> {
    pub rows: SparseEntries<'a, E>,
    pub build: HistogramBuild<'a>,
    pub group_starts: DevPtr<'a, u16>,
}

/// The launches over whole histogram slots (`zero_histograms` over tasks, `derive_siblings`
/// over triples, `copy_histograms` over pairs): one list entry per `blockIdx.y`.
#[repr(C)]
pub struct SlotsArgs<'a, T> {
    pub list: DevPtr<'a, T>,
    pub total_slots: u32,
    pub hist: DevPtrMut<'a, GradSum>,
}

/// `plan_children`.
#[repr(C)]
pub struct PlanChildrenArgs<'a> {
    pub parents: DevPtr<'a, ChildSlots>,
    pub node_left: DevPtr<'a, u32>,
    pub total_slots: u32,
    pub builds: DevPtrMut<'a, RowTask>,
    pub triples: DevPtrMut<'a, u32>,
    pub hist: DevPtrMut<'a, GradSum>,
}

/// `index_groups_s16`, `_s32`.
#[repr(C)]
pub struct IndexGroupsArgs<'a, E> {
    pub rows: SparseEntries<'a, E>,
    pub n_rows: u32,
    pub slot_offsets: DevPtr<'a, u32>,
    pub group_first_feature: DevPtr<'a, u32>,
    pub n_groups: u32,
    pub starts: DevPtrMut<'a, u16>,
}

kernel_args!(
    HistogramBuild,
    HistogramArgs<B>,
    SparseHistogramArgs<E>,
    SlotsArgs<T>,
    PlanChildrenArgs,
    IndexGroupsArgs<E>
);

/// The histogram launch shape: threads per block, waves of blocks, or a fixed number of rows
/// per block, the most threads reading one row, and a cap on a group's shared memory.
/// `POLARS_GBT_HIST_THREADS`, `POLARS_GBT_HIST_WAVES`, `POLARS_GBT_HIST_BLOCK_ROWS`,
/// `POLARS_GBT_HIST_ROW_LANES` and `POLARS_GBT_HIST_SHARED_BYTES` override the defaults (for
/// tuning on new GPUs).
struct HistShape {
    threads: u32,
    waves: u64,
    rows_per_block: Option<u32>,
    max_lanes: u32,
    shared_bytes: Option<u32>,
}

impl HistShape {
    fn from_env() -> Self {
        let var = super::knob::<u64>;
        HistShape {
            threads: var("POLARS_GBT_HIST_THREADS").map_or(THREADS, |t| (t as u32).clamp(32, 1024) / 32 * 32),
            waves: var("POLARS_GBT_HIST_WAVES").unwrap_or(WAVES).max(1),
            rows_per_block: var("POLARS_GBT_HIST_BLOCK_ROWS").map(|r| r as u32),
            max_lanes: var("POLARS_GBT_HIST_ROW_LANES")
                .map_or(MAX_ROW_LANES, |l| (l as u32).clamp(1, 32).next_power_of_two()),
            shared_bytes: var("POLARS_GBT_HIST_SHARED_BYTES").map(|b| b as u32),
        }
    }

    /// Shared memory for one feature group's histogram: as much as lets an SM hold as many
    /// blocks as its 2048 threads allow. A block of 1024 threads taking all of an SM's shared
    /// memory runs alone there, at half occupancy, its warps waiting on memory with no other
    /// warps to switch to (400k x 2000: groups of 229 KB, 50% occupancy, 10.9 ms of histograms
    /// a tree; of 112 KB, two blocks an SM, 7.75 ms; docs/gpu-notes.md). Narrow data's one group
    /// is smaller than either.
    fn shared_budget(&self, rt: &super::runtime::Runtime) -> u32 {
        let blocks_by_threads = (2048 / self.threads).max(1);
        let fair = (rt.max_shared_per_sm / blocks_by_threads).saturating_sub(DRIVER_SHARED_PER_BLOCK + 1024);
        let budget = self.shared_bytes.unwrap_or(fair).max(4096);
        budget.min(rt.hist_shared_budget)
    }
}

pub(super) struct HistogramBuilder {
    pub(super) pool: HistPool,
    /// The first feature of each group of features whose histograms fit in shared memory
    /// (and the feature count at the end).
    groups: Vec<u32>,
    groups_dev: CudaSlice<u32>,
    /// Shared memory of the widest group.
    group_shared_bytes: u32,
    /// Compressed rows split into several groups: where each group's entries start in each
    /// row (`kernels/sparse.cu`, index_groups), so that a group's blocks read only its part.
    /// One unused element otherwise.
    group_starts: CudaSlice<u16>,
    shape: HistShape,
    /// At most MAX_ROWS_PER_BLOCK; fewer when whole sample weights enlarge a row's pair
    /// (`Weighting::chunk_rows`).
    max_rows_per_block: u32,
    /// A launch's build tasks, the split nodes it plans children for, and the (parent, fresh,
    /// built right) triples of the in-place subtraction.
    builds: Scratch<RowTask>,
    plan: Scratch<ChildSlots>,
    triples: Scratch<u32>,
}

impl HistogramBuilder {
    pub(super) fn new(dev: &mut FitDevice, matrix: &DeviceMatrix, params: &GrowParams) -> Result<Self> {
        let shape = HistShape::from_env();
        let groups = feature_groups(matrix, shape.shared_budget(dev.rt) as usize);
        let total_slots = matrix.total_slots();
        let group_starts = index_groups(dev, matrix, &groups.starts)?;
        let mut builder = HistogramBuilder {
            pool: HistPool { buf: dev.zeros(1)?, capacity: 0, free: Vec::new(), total_slots, exchange: None },
            groups_dev: dev.upload(&groups.starts)?,
            groups: groups.starts,
            group_shared_bytes: groups.widest_bytes as u32,
            group_starts,
            shape,
            // Whole sample weights make a row's pair larger: fewer rows sum exactly in i32.
            max_rows_per_block: (params.weighting.chunk_rows() as u32).min(MAX_ROWS_PER_BLOCK),
            builds: dev.scratch(64)?,
            plan: dev.scratch(64)?,
            triples: dev.scratch(64)?,
        };
        // Depth-wise growth holds at most two histograms per node of the second-to-last
        // level with histograms (each parent's slot becomes its right child's, the left child
        // takes a fresh one): reserve that once, rather than doubling the pool as trees deepen
        // (which briefly holds both copies), when it is at most 256 MiB or no larger than the
        // bins it summarises. No level has more nodes than rows.
        if params.policy == GrowPolicy::Depthwise && params.max_depth >= 2 {
            let slots = (2u64 << (params.max_depth - 2).min(20)).min(matrix.n_rows.max(1) as u64);
            let bytes = slots * (total_slots as u64) * 16;
            if bytes <= (256 << 20).max(matrix.bytes() as u64) {
                builder.pool.reserve(&mut dev.memory, &dev.stream, slots as u32)?;
            }
        }
        Ok(builder)
    }

    pub(super) fn alloc(&mut self, dev: &mut FitDevice) -> Result<u32> {
        self.pool.alloc(&mut dev.memory, &dev.stream)
    }

    pub(super) fn release(&mut self, slot: u32) {
        self.pool.release(slot);
    }

    /// The histogram in `slot`, on the host.
    pub(super) fn download(&self, dev: &mut FitDevice, slot: u32) -> Result<Vec<GradSum>> {
        dev.download(self.pool.slot(slot))
    }

    /// Rows per histogram block for a launch over `rows` rows: about two waves of blocks over
    /// the GPU, counting every feature group's blocks (seed 002: the launch shape comes from
    /// the device). Fewer blocks leave SMs idle at deep levels; more spend their time
    /// flushing: each block adds its whole shared histogram to global memory, so a launch
    /// over G groups of S slots with B blocks a group costs B x G x S global atomics against
    /// rows x features shared ones, and wide data (G ~ 20) needs B small.
    fn rows_per_block(&self, dev: &FitDevice, rows: u64) -> u32 {
        // Blocks an SM holds at once: limited by its shared memory and its 2048 threads.
        let by_memory = dev.rt.max_shared_per_sm / (self.group_shared_bytes + DRIVER_SHARED_PER_BLOCK);
        let resident = by_memory.min(2048 / self.shape.threads).max(1) as u64;
        let groups = (self.groups.len() as u64 - 1).max(1);
        let target_blocks = (dev.rt.sm_count as u64 * resident * self.shape.waves).div_ceil(groups);
        let rpb = self.shape.rows_per_block.unwrap_or_else(|| rows.div_ceil(target_blocks).next_power_of_two() as u32);
        rpb.clamp(MIN_ROWS_PER_BLOCK.min(self.max_rows_per_block), self.max_rows_per_block)
    }

    /// The root's histogram in `slot`, from rows `ridx[..n_active]`.
    pub(super) fn build_root(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        grads: &CudaSlice<QuantGrad>,
        ridx: &CudaSlice<u32>,
        n_active: u32,
        slot: u32,
    ) -> Result<()> {
        let rpb = self.rows_per_block(dev, n_active as u64);
        let blocks = n_active.div_ceil(rpb);
        dev.fill(&mut self.builds, &[RowTask { start: 0, len: n_active, first_block: 0, slot }])?;
        self.zero_builds(dev, 1)?;
        self.launch(dev, matrix, grads, ridx, 1, blocks, rpb)
    }

    /// The children's histograms of the split nodes in `plan`: the smaller child of each is
    /// built into its fresh slot, the other is its parent minus it, in place. Which is smaller
    /// is decided on the device (`plan_children`), from the partition's counts `node_left`,
    /// with no round trip; either way the left child ends in `left_slot`, the right child in
    /// `parent_slot`.
    pub(super) fn build_children(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        grads: &CudaSlice<QuantGrad>,
        ridx: &CudaSlice<u32>,
        node_left: &CudaSlice<u32>,
        mut plan: Vec<ChildSlots>,
    ) -> Result<()> {
        if plan.is_empty() {
            return Ok(());
        }
        // A smaller child has at most half its parent's rows: reserve blocks for that many.
        let rows: u64 = plan.iter().map(|p| (p.len / 2) as u64).sum();
        let rpb = self.rows_per_block(dev, rows);
        let mut blocks = 0;
        for p in plan.iter_mut() {
            p.first_block = blocks;
            blocks += (p.len / 2).div_ceil(rpb);
        }
        let n = plan.len();
        dev.fill(&mut self.plan, &plan)?;
        dev.reserve(&mut self.builds, n)?;
        dev.reserve(&mut self.triples, 3 * n)?;
        let (n32, total) = (n as u32, self.pool.total_slots as u32);
        let k = &dev.rt.kernels;
        {
            let mut p = dev.pins();
            let args = PlanChildrenArgs {
                parents: p.read(&self.plan.buf),
                node_left: p.read(node_left),
                total_slots: total,
                builds: p.write(&mut self.builds.buf),
                triples: p.write(&mut self.triples.buf),
                hist: p.write(&mut self.pool.buf),
            };
            // SAFETY: n plans, builds and triples; every slot lies in the pool. Each parent's
            // fresh slot is zeroed by up to 64 blocks, as zero_histograms does.
            let parts = total.div_ceil(256).min(64);
            unsafe { dev.launch(&k.plan_children, &args, cfg((n32, parts), 256, 0)) }?;
        }
        self.launch(dev, matrix, grads, ridx, n32, blocks, rpb)?;
        self.derive_siblings(dev, n32)
    }

    /// Zeroes the slots of the first `n` tasks in `builds`, before they are built.
    fn zero_builds(&mut self, dev: &FitDevice, n: u32) -> Result<()> {
        let total = self.pool.total_slots as u32;
        let mut p = dev.pins();
        let args = SlotsArgs { list: p.read(&self.builds.buf), total_slots: total, hist: p.write(&mut self.pool.buf) };
        // SAFETY: n build tasks, whose slots lie in the pool.
        unsafe { dev.launch(&dev.rt.kernels.zero_histograms, &args, cfg((total.div_ceil(256).min(64), n), 256, 0)) }
    }

    /// Each of the first `n` (parent, fresh, built right) triples in `triples`: the built child
    /// and its sibling (the parent less it), in place.
    fn derive_siblings(&mut self, dev: &FitDevice, n: u32) -> Result<()> {
        let total = self.pool.total_slots as u32;
        let mut p = dev.pins();
        let args = SlotsArgs { list: p.read(&self.triples.buf), total_slots: total, hist: p.write(&mut self.pool.buf) };
        // SAFETY: n triples of slots of the pool.
        unsafe { dev.launch(&dev.rt.kernels.derive_siblings, &args, cfg((total.div_ceil(256).min(64), n), 256, 0)) }
    }

    /// Copies the histogram of each `(from, to)` slot pair, in one launch.
    pub(super) fn copy_slots(&mut self, dev: &mut FitDevice, pairs: &[u32]) -> Result<()> {
        let n = (pairs.len() / 2) as u32;
        if n == 0 {
            return Ok(());
        }
        dev.fill(&mut self.triples, pairs)?;
        let total = self.pool.total_slots as u32;
        let mut p = dev.pins();
        let args = SlotsArgs { list: p.read(&self.triples.buf), total_slots: total, hist: p.write(&mut self.pool.buf) };
        // SAFETY: n pairs of slots of the pool.
        unsafe { dev.launch(&dev.rt.kernels.copy_histograms, &args, cfg((total.div_ceil(256).min(64), n), 256, 0)) }
    }

    /// Builds the histograms of the `n_tasks` tasks in `builds` (zeroed beforehand): one launch
    /// over the whole matrix, or one a page, each adding its rows' sums.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &mut self,
        dev: &FitDevice,
        matrix: &DeviceMatrix,
        grads: &CudaSlice<QuantGrad>,
        ridx: &CudaSlice<u32>,
        n_tasks: u32,
        blocks: u32,
        rpb: u32,
    ) -> Result<()> {
        if n_tasks == 0 || blocks == 0 {
            return Ok(());
        }
        let shape = Launch { n_tasks, blocks, rpb };
        for page in matrix.sweep() {
            let window = matrix.enter(&dev.stream, page)?;
            self.launch_in(dev, matrix, &window, grads, ridx, None, shape, 0)?;
            matrix.leave(&dev.stream, &window)?;
        }
        Ok(())
    }

    /// The histogram launch of `shape` over the rows of `window` (the whole matrix, or a page
    /// entered by the caller), its tasks `builds[first_task..]`, summing only the rows flagged
    /// in `only` when given.
    #[allow(clippy::too_many_arguments)]
    fn launch_in(
        &mut self,
        dev: &FitDevice,
        matrix: &DeviceMatrix,
        window: &Window,
        grads: &CudaSlice<QuantGrad>,
        ridx: &CudaSlice<u32>,
        only: Option<&CudaSlice<u8>>,
        shape: Launch,
        first_task: usize,
    ) -> Result<()> {
        let total = self.pool.total_slots as u32;
        // Groups wider than this sum in global memory (see `feature_groups`).
        let shared_slots = self.group_shared_bytes / 8;
        let k = &dev.rt.kernels;
        let groups = self.groups.len() as u32 - 1;
        let c = cfg((shape.blocks, groups), self.shape.threads, self.group_shared_bytes);
        let tasks = self.builds.buf.slice(first_task..);
        let mut p = dev.pins();
        let build = HistogramBuild {
            grads: p.read(grads),
            ridx: p.read(ridx),
            only: p.read_opt(only),
            tasks: p.read(&tasks),
            n_tasks: shape.n_tasks,
            slot_offsets: p.read(&matrix.slot_offsets_dev),
            group_first_feature: p.read(&self.groups_dev),
            shared_slots,
            total_slots: total,
            rows_per_block: shape.rpb,
            max_lanes: self.shape.max_lanes,
            hist: p.write(&mut self.pool.buf),
        };
        // SAFETY: the tasks' rows lie in ridx (and their flags in `only`), their slots in the
        // pool; the groups' shared histograms fit group_shared_bytes; group_starts holds each
        // row's starts of every group; a page's kernel reads only the rows its window holds.
        unsafe {
            match matrix.rows_in(&mut p, window) {
                MatrixRows::U8(rows) => dev.launch(&k.histogram_u8, &HistogramArgs { rows, build }, c),
                MatrixRows::U16(rows) => dev.launch(&k.histogram_u16, &HistogramArgs { rows, build }, c),
                MatrixRows::U32(rows) => dev.launch(&k.histogram_u32, &HistogramArgs { rows, build }, c),
                MatrixRows::S16(rows) => {
                    let group_starts = p.read(&self.group_starts);
                    dev.launch(&k.histogram_s16, &SparseHistogramArgs { rows, build, group_starts }, c)
                }
                MatrixRows::S32(rows) => {
                    let group_starts = p.read(&self.group_starts);
                    dev.launch(&k.histogram_s32, &SparseHistogramArgs { rows, build, group_starts }, c)
                }
            }
        }
    }

    /// A paged fit's children (`plans`, one per output, before the partition's scatter): each
    /// left child is to be built from its parent's run, of the rows the partition flags left as
    /// each page comes ([`build_left_in`](Self::build_left_in)), and the right child derived
    /// after ([`derive_right`](Self::derive_right)), so that a level reads each page once.
    /// Uploads every output's builds (output k's from `k * n`) and zeroes their slots; returns
    /// the launch shape of one output's builds.
    pub(super) fn plan_left_children(&mut self, dev: &mut FitDevice, plans: &[Vec<ChildSlots>]) -> Result<Launch> {
        let first = plans.first().map_or(&[][..], Vec::as_slice);
        let rows: u64 = first.iter().map(|p| p.len as u64).sum();
        let rpb = self.rows_per_block(dev, rows);
        let mut builds = Vec::with_capacity(plans.len() * first.len());
        let mut triples = Vec::with_capacity(3 * builds.capacity());
        let mut blocks = 0;
        for plan in plans {
            blocks = 0;
            for p in plan {
                builds.push(RowTask { start: p.start, len: p.len, first_block: blocks, slot: p.left_slot });
                triples.extend([p.parent_slot, p.left_slot, 0]);
                blocks += p.len.div_ceil(rpb);
            }
        }
        if !builds.is_empty() {
            dev.fill(&mut self.builds, &builds)?;
            dev.fill(&mut self.triples, &triples)?;
            self.zero_builds(dev, builds.len() as u32)?;
        }
        Ok(Launch { n_tasks: first.len() as u32, blocks, rpb })
    }

    /// Adds the rows of `window` (a page entered by the caller) that `left` flags to output
    /// `output`'s left children planned by [`plan_left_children`](Self::plan_left_children).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn build_left_in(
        &mut self,
        dev: &FitDevice,
        matrix: &DeviceMatrix,
        window: &Window,
        grads: &CudaSlice<QuantGrad>,
        ridx: &CudaSlice<u32>,
        left: &CudaSlice<u8>,
        shape: Launch,
        output: usize,
    ) -> Result<()> {
        if shape.n_tasks == 0 || shape.blocks == 0 {
            return Ok(());
        }
        let first_task = output * shape.n_tasks as usize;
        self.launch_in(dev, matrix, window, grads, ridx, Some(left), shape, first_task)
    }

    /// Each planned parent's right child (of every output), its histogram less its left
    /// child's, in the parent's slot ([`plan_left_children`](Self::plan_left_children)).
    pub(super) fn derive_right(&mut self, dev: &mut FitDevice, shape: Launch, outputs: usize) -> Result<()> {
        let n = shape.n_tasks * outputs as u32;
        if n == 0 {
            return Ok(());
        }
        self.derive_siblings(dev, n)
    }
}

/// A histogram launch's tasks (in `builds`), blocks and rows a block.
#[derive(Clone, Copy)]
pub(super) struct Launch {
    n_tasks: u32,
    blocks: u32,
    rpb: u32,
}

/// For compressed rows in several feature groups: each row's first entry of each group.
fn index_groups(dev: &mut FitDevice, matrix: &DeviceMatrix, starts: &[u32]) -> Result<CudaSlice<u16>> {
    let n_groups = starts.len() - 1;
    if matrix.row_words.is_none() || n_groups < 2 || matrix.n_rows == 0 {
        return dev.zeros(1);
    }
    let mut out = dev.zeros::<u16>(matrix.n_rows * n_groups)?;
    let first_features = dev.upload(starts)?;
    let (n_rows, n_groups) = (matrix.n_rows as u32, n_groups as u32);
    let config = dev.grid(matrix.n_rows as u64, 256);
    let k = &dev.rt.kernels;
    let mut p = dev.pins();
    let (slot_offsets, group_first_feature) = (p.read(&matrix.slot_offsets_dev), p.read(&first_features));
    let starts = p.write(&mut out);
    // SAFETY: the entries hold each row's words at row_words; `out` holds n_rows x n_groups
    // starts, each below 2^16 (a row has at most MAX_SPARSE_FEATURES entries and a word's padding).
    unsafe {
        match matrix.rows(&mut p) {
            MatrixRows::S16(rows) => {
                let args = IndexGroupsArgs { rows, n_rows, slot_offsets, group_first_feature, n_groups, starts };
                dev.launch(&k.index_groups_s16, &args, config)
            }
            MatrixRows::S32(rows) => {
                let args = IndexGroupsArgs { rows, n_rows, slot_offsets, group_first_feature, n_groups, starts };
                dev.launch(&k.index_groups_s32, &args, config)
            }
            _ => unreachable!("only compressed rows have row words"),
        }
    }?;
    drop(p);
    Ok(out)
}

struct FeatureGroups {
    starts: Vec<u32>,
    widest_bytes: usize,
}

/// Packs features into groups whose shared histograms (2 x i32 per slot) fit `budget` bytes
/// of a block's shared memory. Groups start on a word of bins, as the kernel reads them; in
/// shared memory each feature of a group takes as many slots as the group's widest. A word
/// too wide for the budget (a feature of thousands of categories) is a group of its own,
/// which the kernel sums in global memory.
fn feature_groups(matrix: &DeviceMatrix, budget: usize) -> FeatureGroups {
    let nf = matrix.n_features;
    let per_word = matrix.per_word();
    let bytes_with = |features: usize, widest: usize| features * widest * 8;
    let mut starts = vec![0u32];
    let mut widest_bytes = 0usize;
    // The open group's features and widest feature.
    let (mut features, mut widest) = (0usize, 0usize);
    for first in (0..nf).step_by(per_word) {
        let word = first..(first + per_word).min(nf);
        let word_widest = word.clone().map(|f| matrix.n_bins[f] as usize + 1).max().unwrap_or(0);
        let alone = bytes_with(word.len(), word_widest) > budget;
        let fits = bytes_with(features + word.len(), widest.max(word_widest)) <= budget;
        if features > 0 && (alone || !fits) {
            starts.push(first as u32);
            widest_bytes = widest_bytes.max(bytes_with(features, widest));
            (features, widest) = (0, 0);
        }
        if alone {
            // A group of its own, summed in global memory.
            if word.end < nf {
                starts.push(word.end as u32);
            }
            continue;
        }
        features += word.len();
        widest = widest.max(word_widest);
    }
    widest_bytes = widest_bytes.max(bytes_with(features, widest));
    starts.push(nf as u32);
    FeatureGroups { starts, widest_bytes }
}
