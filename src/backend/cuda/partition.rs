//! The row index on the device and what moves rows through a tree (`kernels/partition.cu`):
//! partitioning split nodes' rows (in one pass, each block learning its place in the node from
//! the blocks before it, reading the split feature's column-major bins where the matrix keeps
//! them; paged bins in two, route then scatter), and adding a finished tree to the training
//! margins by walking it on the bins.

use cudarc::driver::{CudaSlice, CudaViewMut, LaunchConfig};

use super::buffers::{bytes_of, FitDevice, Scratch};
use super::data::{DenseBins, DeviceBins, DeviceMatrix, MatrixRows, SparseEntries};
use super::device_error;
use super::launch::{cfg, kernel_args, DevPtr, DevPtrMut, Pins};
use super::layout::{RowTask, SplitRule, TreeNode};
use super::pages::Window;
use crate::error::Result;
use crate::tree::{Tree, NO_CHILD};

/// Rows one block of the paged partition's two passes routes, and its threads.
const ROWS_PER_BLOCK: u32 = 1 << 12;
const THREADS: u32 = 256;
/// The one-pass partition's block: threads, and rows (16 a thread, held in registers);
/// ONE_PASS_THREADS and ONE_PASS_ROWS in kernels/partition.cu.
const ONE_PASS_THREADS: u32 = 256;
const ONE_PASS_ROWS: u32 = ONE_PASS_THREADS * 16;

/// A level's rows and how they split, as both partitions read them (`LevelRoutes` in
/// kernels/partition.cu): the tasks' runs in `ridx`, each task's rule, and the categorical
/// rules' bits.
#[repr(C)]
pub struct LevelRoutes<'a> {
    pub ridx: DevPtr<'a, u32>,
    pub tasks: DevPtr<'a, RowTask>,
    pub n_tasks: u32,
    pub rules: DevPtr<'a, SplitRule>,
    pub category_words: DevPtr<'a, u32>,
}

/// `partition_level`'s arguments but the rows (`Partition` in kernels/partition.cu): each
/// task's rows by its rule into the children's runs of `ridx_out`, each task's left-going count
/// into `node_left`. `lookback`: one more than the launch's blocks, zeroed.
#[repr(C)]
pub struct Partition<'a> {
    pub level: LevelRoutes<'a>,
    pub lookback: DevPtrMut<'a, u64>,
    pub node_left: DevPtrMut<'a, u32>,
    pub ridx_out: DevPtrMut<'a, u32>,
}

/// `partition_u8`, `_u16`, `_u32`: dense bins.
#[repr(C)]
pub struct PartitionArgs<'a, B> {
    pub rows: DenseBins<'a, B>,
    pub part: Partition<'a>,
}

/// `partition_cols_u8`, `_u16`: the column-major 8- or 16-bit bins of `n_rows` rows (bytes).
#[repr(C)]
pub struct PartitionColsArgs<'a> {
    pub cols: DevPtr<'a, u8>,
    pub n_rows: u32,
    pub part: Partition<'a>,
}

/// `partition_s16`, `_s32`: compressed rows, whose entries are histogram slots.
#[repr(C)]
pub struct SparsePartitionArgs<'a, E> {
    pub rows: SparseEntries<'a, E>,
    pub part: Partition<'a>,
    pub slot_offsets: DevPtr<'a, u32>,
}

/// `count_left`'s arguments but the rows (`CountLeft` in kernels/partition.cu): each task's
/// rows of a page routed by its rule into `flags`, each block's left-going count added to
/// `block_left` (zeroed before the first page).
#[repr(C)]
pub struct CountLeft<'a> {
    pub level: LevelRoutes<'a>,
    pub rows_per_block: u32,
    pub flags: DevPtrMut<'a, u8>,
    pub block_left: DevPtrMut<'a, u32>,
}

/// `count_left_u8`, `_u16`, `_u32`: dense bins.
#[repr(C)]
pub struct CountLeftArgs<'a, B> {
    pub rows: DenseBins<'a, B>,
    pub part: CountLeft<'a>,
}

/// `count_left_s16`, `_s32`: compressed rows, whose entries are histogram slots.
#[repr(C)]
pub struct SparseCountLeftArgs<'a, E> {
    pub rows: SparseEntries<'a, E>,
    pub part: CountLeft<'a>,
    pub slot_offsets: DevPtr<'a, u32>,
}

/// `scatter`.
#[repr(C)]
pub struct ScatterArgs<'a> {
    pub flags: DevPtr<'a, u8>,
    pub ridx: DevPtr<'a, u32>,
    pub tasks: DevPtr<'a, RowTask>,
    pub n_tasks: u32,
    pub rows_per_block: u32,
    pub block_left: DevPtr<'a, u32>,
    pub node_left: DevPtrMut<'a, u32>,
    pub ridx_out: DevPtrMut<'a, u32>,
}

/// `copy_runs`: the tasks' runs of `from` into `to`.
#[repr(C)]
pub struct CopyRunsArgs<'a> {
    pub from: DevPtr<'a, u32>,
    pub tasks: DevPtr<'a, RowTask>,
    pub n_tasks: u32,
    pub rows_per_block: u32,
    pub to: DevPtrMut<'a, u32>,
}

/// `add_tree`'s arguments but the rows (`TreeWalk`): each of `n_rows` rows walks `nodes` and
/// adds its leaf's value to `margin`.
#[repr(C)]
pub struct TreeWalk<'a> {
    pub n_rows: u32,
    pub nodes: DevPtr<'a, TreeNode>,
    pub category_words: DevPtr<'a, u32>,
    pub margin: DevPtrMut<'a, f32>,
}

/// `add_tree_u8`, `_u16`, `_u32`.
#[repr(C)]
pub struct AddTreeArgs<'a, B> {
    pub rows: DenseBins<'a, B>,
    pub walk: TreeWalk<'a>,
}

/// `add_tree_s16`, `_s32`.
#[repr(C)]
pub struct SparseAddTreeArgs<'a, E> {
    pub rows: SparseEntries<'a, E>,
    pub walk: TreeWalk<'a>,
    pub slot_offsets: DevPtr<'a, u32>,
}

/// `fill_identity` (kernels/gradients.cu): `ridx[i] = i` for `i < n`, a tree's row index over
/// every row.
#[repr(C)]
pub struct FillIdentityArgs<'a> {
    pub ridx: DevPtrMut<'a, u32>,
    pub n: u32,
}

kernel_args!(
    LevelRoutes,
    Partition,
    PartitionArgs<B>,
    PartitionColsArgs,
    SparsePartitionArgs<E>,
    CountLeft,
    CountLeftArgs<B>,
    SparseCountLeftArgs<E>,
    ScatterArgs,
    CopyRunsArgs,
    TreeWalk,
    AddTreeArgs<B>,
    SparseAddTreeArgs<E>,
    FillIdentityArgs
);

/// How a level's rows move: in one pass (bins on the device whole), or routed page by page
/// into flags (the pages' counts added up) and then scattered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Passes {
    One,
    Paged,
}

/// A level's partition once planned: its tasks, the launch covering their rows, and its passes.
#[derive(Clone, Copy)]
pub(super) struct Level {
    n_tasks: u32,
    blocks: u32,
    rows_per_block: u32,
    c: LaunchConfig,
    passes: Passes,
}

/// The tasks' first blocks for `rows_per_block` rows a block, and the blocks in all.
/// Where a level's tasks, rules and category words start in the partitioner's `level` bytes.
#[derive(Clone, Copy, Default)]
struct LevelParts {
    tasks_at: usize,
    rules_at: usize,
    words_at: usize,
}

/// The routes of the level `plan` uploaded into `level` at `parts`.
fn level_routes<'a>(
    p: &mut Pins<'a>,
    ridx: &'a CudaSlice<u32>,
    level: &'a Scratch<u8>,
    parts: LevelParts,
    n_tasks: u32,
) -> LevelRoutes<'a> {
    let uploaded = p.read(&level.buf);
    // SAFETY (the three parts): `plan` uploaded them at these offsets, each aligned to 16.
    LevelRoutes {
        ridx: p.read(ridx),
        tasks: unsafe { uploaded.part(parts.tasks_at) },
        n_tasks,
        rules: unsafe { uploaded.part(parts.rules_at) },
        category_words: unsafe { uploaded.part(parts.words_at) },
    }
}

pub(super) fn assign_blocks(tasks: &mut [RowTask], rows_per_block: u32) -> u32 {
    let mut next = 0;
    for t in tasks.iter_mut() {
        t.first_block = next;
        next += t.len.div_ceil(rows_per_block);
    }
    next
}

pub(super) struct RowPartitioner {
    /// The tree's rows, each node's a contiguous run.
    pub(super) ridx: CudaSlice<u32>,
    ridx_tmp: CudaSlice<u32>,
    /// Per row-index position: whether the row goes left at this level's split.
    flags: CudaSlice<u8>,
    /// A level's tasks, rules and the category bit words of its categorical rules, uploaded
    /// together (`fill_parts`), and where each part starts.
    level: Scratch<u8>,
    parts: LevelParts,
    block_left: Scratch<u32>,
    /// The one-pass launch's next block place, then each block's published count.
    lookback: Scratch<u64>,
    /// Left-going rows of each task of the last partition.
    pub(super) node_left: Scratch<u32>,
    /// Rows and threads of a paged pass's block (POLARS_GBT_PARTITION_ROWS / _THREADS
    /// override them).
    rows_per_block: u32,
    threads: u32,
}

impl RowPartitioner {
    pub(super) fn new(dev: &mut FitDevice, n: usize) -> Result<Self> {
        let var = super::knob::<u32>;
        Ok(RowPartitioner {
            ridx: dev.zeros(n)?,
            ridx_tmp: dev.zeros(n)?,
            flags: dev.zeros(n)?,
            level: dev.scratch(256)?,
            parts: LevelParts::default(),
            block_left: dev.scratch(1024)?,
            lookback: dev.scratch(1024)?,
            node_left: dev.scratch(64)?,
            rows_per_block: var("POLARS_GBT_PARTITION_ROWS").map_or(ROWS_PER_BLOCK, |r| r.max(256)),
            threads: var("POLARS_GBT_PARTITION_THREADS").map_or(THREADS, |t| t.clamp(32, 1024) / 32 * 32),
        })
    }

    /// Device bytes a row costs here (two row indices and a flag), for the up-front check.
    pub(super) fn bytes_per_row() -> usize {
        4 * 2 + 1
    }

    /// Starts a tree on `rows` (sorted), or on all `n` rows; returns how many.
    pub(super) fn reset(&mut self, dev: &mut FitDevice, rows: Option<&[u32]>, n: usize) -> Result<u32> {
        match rows {
            Some(r) => dev.stream.memcpy_htod(r, &mut self.ridx.slice_mut(..r.len())).map_err(device_error)?,
            None => {
                let n32 = n as u32;
                let mut p = dev.pins();
                let args = FillIdentityArgs { ridx: p.write(&mut self.ridx), n: n32 };
                // SAFETY: ridx holds n rows.
                unsafe { dev.launch(&dev.rt.kernels.fill_identity, &args, dev.grid(n as u64, 256)) }?;
            }
        }
        Ok(rows.map_or(n, <[u32]>::len) as u32)
    }

    /// Partitions each task's rows by its rule, in one pass; the left-going counts are left in
    /// `node_left`. `keep_others`: rows of nodes outside `tasks` must stay where they are
    /// (loss-guided growth). Bins on the device whole: a paged level routes page by page with
    /// its histograms (`grow.rs`, [`plan`](Self::plan), [`route_in`](Self::route_in),
    /// [`scatter`](Self::scatter)).
    pub(super) fn partition(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        tasks: Vec<RowTask>,
        rules: &[SplitRule],
        words: &[u32],
        keep_others: bool,
    ) -> Result<()> {
        debug_assert!(!matrix.is_paged(), "a paged level partitions in grow.rs's one pass");
        let Some(level) = self.plan(dev, tasks, rules, words, Passes::One)? else { return Ok(()) };
        let lookback = level.blocks as usize + 1;
        dev.reserve(&mut self.lookback, lookback)?;
        dev.stream.memset_zeros(&mut self.lookback.buf.slice_mut(..lookback)).map_err(device_error)?;
        let k = &dev.rt.kernels;
        {
            let mut p = dev.pins();
            let part = Partition {
                level: level_routes(&mut p, &self.ridx, &self.level, self.parts, level.n_tasks),
                lookback: p.write(&mut self.lookback.buf),
                node_left: p.write(&mut self.node_left.buf),
                ridx_out: p.write(&mut self.ridx_tmp),
            };
            let c = level.c;
            // SAFETY: the tasks' runs lie in ridx, the blocks of `c` cover them (ONE_PASS_ROWS
            // each), and `lookback` holds one more than them, zeroed; compressed rows find a
            // feature's bin among its histogram slots.
            unsafe {
                if let Some(cols) = &matrix.cols {
                    // The copy has the bins' width: 8 or 16 bits.
                    let wide = matches!(matrix.bins, DeviceBins::U16(_));
                    let args = PartitionColsArgs { cols: p.read(cols), n_rows: matrix.n_rows as u32, part };
                    dev.launch(if wide { &k.partition_cols_u16 } else { &k.partition_cols_u8 }, &args, c)?;
                } else {
                    match matrix.rows_in(&mut p, &Window::whole(matrix.n_rows)) {
                        MatrixRows::U8(rows) => dev.launch(&k.partition_u8, &PartitionArgs { rows, part }, c),
                        MatrixRows::U16(rows) => dev.launch(&k.partition_u16, &PartitionArgs { rows, part }, c),
                        MatrixRows::U32(rows) => dev.launch(&k.partition_u32, &PartitionArgs { rows, part }, c),
                        MatrixRows::S16(rows) => {
                            let slot_offsets = p.read(&matrix.slot_offsets_dev);
                            dev.launch(&k.partition_s16, &SparsePartitionArgs { rows, part, slot_offsets }, c)
                        }
                        MatrixRows::S32(rows) => {
                            let slot_offsets = p.read(&matrix.slot_offsets_dev);
                            dev.launch(&k.partition_s32, &SparsePartitionArgs { rows, part, slot_offsets }, c)
                        }
                    }?;
                }
            }
        }
        self.settle(dev, level, keep_others)
    }

    /// Uploads a level's tasks and rules, and for a paged matrix zeroes the blocks' counts
    /// that each page adds to; None when the tasks have no rows.
    pub(super) fn plan(
        &mut self,
        dev: &mut FitDevice,
        mut tasks: Vec<RowTask>,
        rules: &[SplitRule],
        words: &[u32],
        passes: Passes,
    ) -> Result<Option<Level>> {
        dev.reserve(&mut self.node_left, tasks.len())?;
        let (rows_per_block, threads) = match passes {
            Passes::One => (ONE_PASS_ROWS, ONE_PASS_THREADS),
            Passes::Paged => (self.rows_per_block, self.threads),
        };
        let blocks = assign_blocks(&mut tasks, rows_per_block);
        if blocks == 0 {
            return Ok(None);
        }
        let words = if words.is_empty() { &[0] } else { words };
        let [tasks_at, rules_at, words_at] =
            dev.fill_parts(&mut self.level, [bytes_of(&tasks), bytes_of(rules), bytes_of(words)])?;
        self.parts = LevelParts { tasks_at, rules_at, words_at };
        if passes == Passes::Paged {
            dev.reserve(&mut self.block_left, blocks as usize)?;
            let counts = &mut self.block_left.buf.slice_mut(..blocks as usize);
            dev.stream.memset_zeros(counts).map_err(device_error)?;
        }
        let (n_tasks, c) = (tasks.len() as u32, cfg((blocks, 1), threads, 0));
        Ok(Some(Level { n_tasks, blocks, rows_per_block, c, passes }))
    }

    /// Routes the paged level's rows that `window` holds (`flags`, and each block's
    /// left-going count added to `block_left`).
    pub(super) fn route_in(
        &mut self,
        dev: &FitDevice,
        matrix: &DeviceMatrix,
        window: &Window,
        level: Level,
    ) -> Result<()> {
        debug_assert!(level.passes == Passes::Paged && matrix.cols.is_none());
        let k = &dev.rt.kernels;
        let c = level.c;
        let mut p = dev.pins();
        let part = CountLeft {
            level: level_routes(&mut p, &self.ridx, &self.level, self.parts, level.n_tasks),
            rows_per_block: level.rows_per_block,
            flags: p.write(&mut self.flags),
            block_left: p.write(&mut self.block_left.buf),
        };
        // SAFETY: the tasks' runs lie in ridx, and the blocks of `c` cover them; compressed
        // rows find a feature's bin among its histogram slots; a page's kernel reads only the
        // rows its window holds.
        unsafe {
            match matrix.rows_in(&mut p, window) {
                MatrixRows::U8(rows) => dev.launch(&k.count_left_u8, &CountLeftArgs { rows, part }, c),
                MatrixRows::U16(rows) => dev.launch(&k.count_left_u16, &CountLeftArgs { rows, part }, c),
                MatrixRows::U32(rows) => dev.launch(&k.count_left_u32, &CountLeftArgs { rows, part }, c),
                MatrixRows::S16(rows) => {
                    let slot_offsets = p.read(&matrix.slot_offsets_dev);
                    dev.launch(&k.count_left_s16, &SparseCountLeftArgs { rows, part, slot_offsets }, c)
                }
                MatrixRows::S32(rows) => {
                    let slot_offsets = p.read(&matrix.slot_offsets_dev);
                    dev.launch(&k.count_left_s32, &SparseCountLeftArgs { rows, part, slot_offsets }, c)
                }
            }
        }
    }

    /// Whether each row of the level's runs goes left (by row-index position), once every row
    /// is routed.
    pub(super) fn flags(&self) -> &CudaSlice<u8> {
        &self.flags
    }

    /// Scatters the paged level's routed rows into their children's runs.
    pub(super) fn scatter(&mut self, dev: &mut FitDevice, level: Level, keep_others: bool) -> Result<()> {
        let (n_tasks, c, rpb) = (level.n_tasks, level.c, level.rows_per_block);
        let k = &dev.rt.kernels;
        {
            let mut p = dev.pins();
            let args = ScatterArgs {
                flags: p.read(&self.flags),
                ridx: p.read(&self.ridx),
                // SAFETY: `plan` uploaded the tasks there.
                tasks: unsafe { p.read(&self.level.buf).part(self.parts.tasks_at) },
                n_tasks,
                rows_per_block: rpb,
                block_left: p.read(&self.block_left.buf),
                node_left: p.write(&mut self.node_left.buf),
                ridx_out: p.write(&mut self.ridx_tmp),
            };
            // SAFETY: the tasks' runs lie in the row indices, and the blocks of `c` cover them
            // (as count_left's).
            unsafe { dev.launch(&k.scatter, &args, c) }?;
        }
        self.settle(dev, level, keep_others)
    }

    /// The children's runs, in `ridx_tmp`, become the row index's.
    fn settle(&mut self, dev: &mut FitDevice, level: Level, keep_others: bool) -> Result<()> {
        let (n_tasks, c, rpb) = (level.n_tasks, level.c, level.rows_per_block);
        if keep_others {
            let mut p = dev.pins();
            let args = CopyRunsArgs {
                from: p.read(&self.ridx_tmp),
                // SAFETY: `plan` uploaded the tasks there.
                tasks: unsafe { p.read(&self.level.buf).part(self.parts.tasks_at) },
                n_tasks,
                rows_per_block: rpb,
                to: p.write(&mut self.ridx),
            };
            // SAFETY: the tasks' runs lie in both row indices, and the blocks of `c` cover them.
            unsafe { dev.launch(&dev.rt.kernels.copy_runs, &args, c) }?;
        } else {
            // Only the split nodes' rows are needed from here on, and they are all in ridx_tmp.
            std::mem::swap(&mut self.ridx, &mut self.ridx_tmp);
        }
        Ok(())
    }

    /// The left-going row counts of the last partition's first `n` tasks.
    pub(super) fn left_counts(&self, dev: &mut FitDevice, n: usize) -> Result<Vec<u32>> {
        dev.download(self.node_left.buf.slice(..n))
    }

    /// The rows at positions `start..start + len` of the row index.
    pub(super) fn rows(&self, dev: &mut FitDevice, start: u32, len: u32) -> Result<Vec<u32>> {
        let (a, b) = (start as usize, (start + len) as usize);
        dev.download(self.ridx.slice(a..b))
    }
}

/// Adds finished trees to the training margins, each row walking the tree on its bins (the
/// kernels share partition.cu's row reader).
pub(super) struct MarginUpdate {
    nodes: Scratch<TreeNode>,
    words: Scratch<u32>,
}

impl MarginUpdate {
    pub(super) fn new(dev: &mut FitDevice) -> Result<Self> {
        Ok(MarginUpdate { nodes: dev.scratch(256)?, words: dev.scratch(64)? })
    }

    /// Writes each row's leaf of `tree` into `leaf_of`, as a float (ids below 2^24 are
    /// exact): the tree walked with every leaf's value its own node id, added to zeros.
    pub(super) fn mark_leaves(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        tree: &Tree,
        leaf_of: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let mut ids = tree.clone();
        for (i, v) in ids.value.iter_mut().enumerate() {
            *v = i as f32;
        }
        dev.stream.memset_zeros(leaf_of).map_err(device_error)?;
        self.add_tree(dev, matrix, &ids, leaf_of.slice_mut(..))
    }

    /// Adds `tree`'s leaf values to `margin` (one output's, every row of `matrix`).
    pub(super) fn add_tree(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        tree: &Tree,
        mut margin: CudaViewMut<f32>,
    ) -> Result<()> {
        let nodes: Vec<TreeNode> = (0..tree.n_nodes())
            .map(|i| {
                let f = tree.feature[i];
                TreeNode {
                    left: tree.left[i],
                    right: tree.right[i],
                    feature: f,
                    split_bin: tree.split_bin[i],
                    missing_bin: if tree.left[i] == NO_CHILD { 0 } else { matrix.n_bins[f as usize] },
                    default_left: tree.default_left[i] as u32,
                    value: tree.value[i],
                    category_start: tree.category_start[i],
                    category_len: tree.category_len[i],
                    pad: 0,
                }
            })
            .collect();
        dev.fill(&mut self.nodes, &nodes)?;
        let words = if tree.category_words.is_empty() { &[0u32][..] } else { &tree.category_words };
        dev.fill(&mut self.words, words)?;
        let k = &dev.rt.kernels;
        // Each window's rows walk the tree from its first (a page's bins and margins from 0).
        for page in matrix.sweep() {
            let window = matrix.enter(&dev.stream, page)?;
            let rows = window.rows.clone();
            let c = dev.grid(rows.len() as u64, 256);
            let mut margin = margin.slice_mut(rows.clone());
            let mut p = dev.pins();
            let walk = TreeWalk {
                n_rows: rows.len() as u32,
                nodes: p.read(&self.nodes.buf),
                category_words: p.read(&self.words.buf),
                margin: p.write(&mut margin),
            };
            // SAFETY: the tree's nodes and words are uploaded whole; the window's bins and
            // margin slice hold its rows.
            unsafe {
                match matrix.rows_in(&mut p, &window.from_zero()) {
                    MatrixRows::U8(rows) => dev.launch(&k.add_tree_u8, &AddTreeArgs { rows, walk }, c),
                    MatrixRows::U16(rows) => dev.launch(&k.add_tree_u16, &AddTreeArgs { rows, walk }, c),
                    MatrixRows::U32(rows) => dev.launch(&k.add_tree_u32, &AddTreeArgs { rows, walk }, c),
                    MatrixRows::S16(rows) => {
                        let slot_offsets = p.read(&matrix.slot_offsets_dev);
                        dev.launch(&k.add_tree_s16, &SparseAddTreeArgs { rows, walk, slot_offsets }, c)
                    }
                    MatrixRows::S32(rows) => {
                        let slot_offsets = p.read(&matrix.slot_offsets_dev);
                        dev.launch(&k.add_tree_s32, &SparseAddTreeArgs { rows, walk, slot_offsets }, c)
                    }
                }
            }?;
            drop(p);
            matrix.leave(&dev.stream, &window)?;
        }
        Ok(())
    }
}
