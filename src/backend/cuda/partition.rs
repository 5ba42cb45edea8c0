//! The row index on the device and what moves rows through a tree (`kernels/partition.cu`):
//! partitioning split nodes' rows (route each row once into a flag byte, reading the split
//! feature's column-major bins where the matrix keeps them, then a stable scatter), and
//! adding a finished tree to the training margins by walking it on the bins.

use cudarc::driver::{CudaSlice, CudaViewMut, PushKernelArg};

use super::buffers::{cfg, FitDevice, Scratch};
use super::data::DeviceMatrix;
use super::device_error;
use super::gradients::FillIdentityArgs;
use super::layout::{RowTask, SplitRule, TreeNode};
use crate::error::Result;
use crate::tree::{Tree, NO_CHILD};

/// Rows one partition block routes, and its threads.
const ROWS_PER_BLOCK: u32 = 1 << 12;
const THREADS: u32 = 256;

/// The tasks' first blocks for `rows_per_block` rows a block, and the blocks in all.
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
    tasks: Scratch<RowTask>,
    rules: Scratch<SplitRule>,
    /// Category bit words of a level's categorical rules.
    rule_words: Scratch<u32>,
    block_left: Scratch<u32>,
    /// Left-going rows of each task of the last partition.
    pub(super) node_left: Scratch<u32>,
    /// Rows and threads of a block (POLARS_GBT_PARTITION_ROWS / _THREADS override them).
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
            tasks: dev.scratch(64)?,
            rules: dev.scratch(64)?,
            rule_words: dev.scratch(64)?,
            block_left: dev.scratch(1024)?,
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

    /// Partitions each task's rows by its rule; the left-going counts are left in `node_left`.
    /// `keep_others`: rows of nodes outside `tasks` must stay where they are (loss-guided growth).
    pub(super) fn partition(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        mut tasks: Vec<RowTask>,
        rules: &[SplitRule],
        words: &[u32],
        keep_others: bool,
    ) -> Result<()> {
        dev.reserve(&mut self.node_left, tasks.len())?;
        let rpb = self.rows_per_block;
        let blocks = assign_blocks(&mut tasks, rpb);
        if blocks == 0 {
            return Ok(());
        }
        dev.fill(&mut self.tasks, &tasks)?;
        dev.fill(&mut self.rules, rules)?;
        dev.fill(&mut self.rule_words, if words.is_empty() { &[0] } else { words })?;
        dev.reserve(&mut self.block_left, blocks as usize)?;
        let (n_tasks, threads) = (tasks.len() as u32, self.threads);
        let k = &dev.rt.kernels;
        // The column-major copy where there is one (one feature's bins in one run), else the rows.
        let cols_rows = matrix.n_rows as u32;
        let mut launch = match &matrix.cols {
            Some(cols) => {
                let mut launch = dev.launcher(&k.count_left_cols_u8);
                launch.arg(cols).arg(&cols_rows);
                launch
            }
            None => {
                let mut launch = dev.launcher(matrix.kernel_for([
                    &k.count_left_u8,
                    &k.count_left_u16,
                    &k.count_left_u32,
                    &k.count_left_s16,
                    &k.count_left_s32,
                ]));
                matrix.rows_arg(&mut launch);
                launch
            }
        };
        launch
            .arg(&self.ridx)
            .arg(&self.tasks.buf)
            .arg(&n_tasks)
            .arg(&self.rules.buf)
            .arg(&self.rule_words.buf)
            .arg(&rpb)
            .arg(&mut self.flags)
            .arg(&mut self.block_left.buf);
        // Compressed rows find a feature's bin among its histogram slots.
        if matrix.is_sparse() {
            launch.arg(&matrix.slot_offsets_dev);
        }
        // SAFETY (all launches): arguments follow the kernels' signatures; the tasks' runs lie
        // in ridx, and `blocks` blocks cover them.
        unsafe { launch.launch(cfg((blocks, 1), threads, 0)) }.map_err(device_error)?;
        unsafe {
            dev.launcher(&k.scatter)
                .arg(&self.flags)
                .arg(&self.ridx)
                .arg(&self.tasks.buf)
                .arg(&n_tasks)
                .arg(&rpb)
                .arg(&self.block_left.buf)
                .arg(&mut self.node_left.buf)
                .arg(&mut self.ridx_tmp)
                .launch(cfg((blocks, 1), threads, 0))
        }
        .map_err(device_error)?;
        if keep_others {
            unsafe {
                dev.launcher(&k.copy_runs)
                    .arg(&self.ridx_tmp)
                    .arg(&self.tasks.buf)
                    .arg(&n_tasks)
                    .arg(&rpb)
                    .arg(&mut self.ridx)
                    .launch(cfg((blocks, 1), threads, 0))
            }
            .map_err(device_error)?;
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
        let n = matrix.n_rows as u32;
        let k = &dev.rt.kernels;
        let mut launch = dev.launcher(matrix.kernel_for([
            &k.add_tree_u8,
            &k.add_tree_u16,
            &k.add_tree_u32,
            &k.add_tree_s16,
            &k.add_tree_s32,
        ]));
        matrix.rows_arg(&mut launch);
        launch.arg(&n).arg(&self.nodes.buf).arg(&self.words.buf).arg(&mut margin);
        if matrix.is_sparse() {
            launch.arg(&matrix.slot_offsets_dev);
        }
        // SAFETY: the tree's nodes and words are uploaded whole; margin holds n rows.
        unsafe { launch.launch(dev.grid(n as u64, 256)) }.map(drop).map_err(device_error)
    }
}
