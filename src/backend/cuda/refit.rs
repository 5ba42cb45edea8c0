//! Leaf refits of the L1-type losses on the device (kernels/refit.cu), for unit or whole
//! weights: the tree's rows are counted (and weighed) per leaf, their residuals scattered into
//! one run per leaf, and every leaf's quantile selected by a radix selection over all keys at
//! once (so one large leaf does not wait on one block), so that only the leaf values cross to
//! the host. The rank is the CPU's (`objective::quantile_rank`, of the count or of the whole
//! weight: a row of weight w is w rows) and the order f32's total order, so the values are the
//! CPU's. Fractional weights read the rows' leaves back and refit on the host.

use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, LaunchConfig};

use super::buffers::{FitDevice, Scratch};
use super::data::DeviceMatrix;
use super::launch::{kernel_args, DevPtr, DevPtrMut};
use super::partition::MarginUpdate;
use crate::error::Result;
use crate::objective::quantile_rank;
use crate::tree::Tree;

/// Trees of at most this many nodes count rows per leaf in shared memory (32 KiB);
/// POLARS_GBT_REFIT_SHARED_NODES lowers it (tests force the global-memory counters with 0).
const SHARED_NODES: usize = 8192;
/// `REFIT_ROWS_PER_THREAD` of kernels/refit.cu: rows each thread of `refit_scatter` ranks.
pub(super) const ROWS_PER_THREAD: u64 = 8;

/// `refit_count` (`RefitCountArgs` in kernels/refit.cu): rows per node, `rows` null for 0..m.
#[repr(C)]
pub struct RefitCountArgs<'a> {
    pub leaf_of: DevPtr<'a, f32>,
    pub rows: DevPtr<'a, u32>,
    pub m: u32,
    pub n_nodes: u32,
    pub use_shared: u32,
    pub counts: DevPtrMut<'a, u32>,
}

/// `refit_weigh`: each node's total whole weight.
#[repr(C)]
pub struct RefitWeighArgs<'a> {
    pub leaf_of: DevPtr<'a, f32>,
    pub rows: DevPtr<'a, u32>,
    pub m: u32,
    pub repeats: DevPtr<'a, f32>,
    pub sums: DevPtrMut<'a, u64>,
}

/// `refit_scatter`: null `repeats`, `unit_leaf`, `key_weight` for unit weights.
#[repr(C)]
pub struct RefitScatterArgs<'a> {
    pub leaf_of: DevPtr<'a, f32>,
    pub rows: DevPtr<'a, u32>,
    pub m: u32,
    pub label: DevPtr<'a, f32>,
    pub margin: DevPtr<'a, f32>,
    pub repeats: DevPtr<'a, f32>,
    pub unit_leaf: DevPtr<'a, u32>,
    pub n_nodes: u32,
    pub use_shared: u32,
    pub cursor: DevPtrMut<'a, u32>,
    pub keys: DevPtrMut<'a, u32>,
    pub key_leaf: DevPtrMut<'a, u32>,
    pub key_weight: DevPtrMut<'a, u32>,
}

/// `refit_radix_count`.
#[repr(C)]
pub struct RadixCountArgs<'a> {
    pub keys: DevPtr<'a, u32>,
    pub key_leaf: DevPtr<'a, u32>,
    pub m: u32,
    pub prefix: DevPtr<'a, u32>,
    pub shift: u32,
    pub hist: DevPtrMut<'a, u32>,
}

/// `refit_radix_weigh`.
#[repr(C)]
pub struct RadixWeighArgs<'a> {
    pub keys: DevPtr<'a, u32>,
    pub key_leaf: DevPtr<'a, u32>,
    pub key_weight: DevPtr<'a, u32>,
    pub m: u32,
    pub prefix: DevPtr<'a, u32>,
    pub shift: u32,
    pub hist: DevPtrMut<'a, u64>,
}

/// `refit_radix_pick` (u32 counts), `refit_radix_pick_weighed` (u64 weights).
#[repr(C)]
pub struct RadixPickArgs<'a, C> {
    pub hist: DevPtrMut<'a, C>,
    pub n_nodes: u32,
    pub shift: u32,
    pub prefix: DevPtrMut<'a, u32>,
    pub remaining: DevPtrMut<'a, u64>,
}

/// `refit_values`.
#[repr(C)]
pub struct RefitValuesArgs<'a> {
    pub prefix: DevPtr<'a, u32>,
    pub remaining: DevPtr<'a, u64>,
    pub n_nodes: u32,
    pub out: DevPtrMut<'a, f32>,
}

/// `refit_add_leaves`.
#[repr(C)]
pub struct RefitAddArgs<'a> {
    pub leaf_of: DevPtr<'a, f32>,
    pub values: DevPtr<'a, f32>,
    pub n: u32,
    pub margin: DevPtrMut<'a, f32>,
}

kernel_args!(
    RefitAddArgs,
    RefitCountArgs,
    RefitWeighArgs,
    RefitScatterArgs,
    RadixCountArgs,
    RadixWeighArgs,
    RadixPickArgs<C>,
    RefitValuesArgs
);

/// What every launch of one refit shares: whether the tree's rows are the uploaded sample
/// (else 0..m), how many, and the tree's nodes and whether their counters fit shared memory.
#[derive(Clone, Copy)]
struct Shape {
    sampled: bool,
    m: u32,
    n_nodes: u32,
    use_shared: u32,
}

pub(super) struct DeviceRefit {
    /// Each row's leaf in the tree just grown, as a float (`MarginUpdate::mark_leaves`).
    pub(super) leaf_of: CudaSlice<f32>,
    /// The residuals' order keys, one run per leaf, and each key's leaf.
    keys: CudaSlice<u32>,
    key_leaf: CudaSlice<u32>,
    /// The tree's rows when it grew on a sample.
    sample: Scratch<u32>,
    counts: Scratch<u32>,
    cursor: Scratch<u32>,
    /// Per leaf: the rank left among the keys sharing the bytes chosen so far (its quantile's
    /// rank to begin with; 0 throughout for nodes with nothing to select), and those bytes.
    remaining: Scratch<u64>,
    prefix: Scratch<u32>,
    /// Per leaf, 256 counts of the next byte.
    hist: Scratch<u32>,
    out: Scratch<f32>,
    /// The refit tree's node values, which the margins take by each row's leaf.
    values: Scratch<f32>,
    /// With whole sample weights: what the selection weighs instead of counting.
    weighed: Option<Weighed>,
    /// With POLARS_GBT_PROFILE=1: seconds in each step (marking leaves, counting, planning the
    /// runs, scattering, selecting), each ended by a synchronisation, and when the last ended.
    pub(super) steps: Option<([f64; 5], Instant)>,
}

/// The buffers of a selection by whole weights.
struct Weighed {
    /// Each key's weight, beside it.
    key_weight: CudaSlice<u32>,
    /// Per node: its rows' total weight; whether they all weigh 0 (then they count 1 each).
    sums: Scratch<u64>,
    unit_leaf: Scratch<u32>,
    /// Per leaf, 256 weight sums of the next byte.
    hist: Scratch<u64>,
}

impl DeviceRefit {
    /// Device bytes a fit holds here per row (`weighed`: with whole sample weights).
    pub(super) fn bytes_per_row(weighed: bool) -> usize {
        if weighed {
            16
        } else {
            12
        }
    }

    /// Buffers for `n` rows, and for weighing them when `weighed`; `profile`: time the steps
    /// (POLARS_GBT_PROFILE=1).
    pub(super) fn new(dev: &mut FitDevice, n: usize, weighed: bool, profile: bool) -> Result<Self> {
        Ok(DeviceRefit {
            leaf_of: dev.zeros(n)?,
            keys: dev.zeros(n)?,
            key_leaf: dev.zeros(n)?,
            sample: dev.scratch(1)?,
            counts: dev.scratch(256)?,
            cursor: dev.scratch(256)?,
            remaining: dev.scratch(256)?,
            prefix: dev.scratch(256)?,
            hist: dev.scratch(256 * 256)?,
            out: dev.scratch(256)?,
            values: dev.scratch(256)?,
            weighed: match weighed {
                true => Some(Weighed {
                    key_weight: dev.zeros(n)?,
                    sums: dev.scratch(256)?,
                    unit_leaf: dev.scratch(256)?,
                    hist: dev.scratch(256 * 256)?,
                }),
                false => None,
            },
            steps: profile.then(|| ([0.0; 5], Instant::now())),
        })
    }

    fn lap(&mut self, dev: &FitDevice, step: usize) {
        if let Some((seconds, last)) = &mut self.steps {
            let _ = dev.stream.synchronize();
            let now = Instant::now();
            seconds[step] += (now - *last).as_secs_f64();
            *last = now;
        }
    }

    /// Each node's `alpha`-quantile of the residuals `label - margin` of its rows among
    /// `sample` (None: every row) (0 for inner nodes and empty leaves), before the learning
    /// rate, each row weighing its whole weight in `repeats` when the refit was made `weighed`.
    /// (The row index of the growth cannot say: it drops the rows of nodes that stopped.)
    #[allow(clippy::too_many_arguments)]
    pub(super) fn quantiles(
        &mut self,
        dev: &mut FitDevice,
        matrix: &DeviceMatrix,
        margins: &mut MarginUpdate,
        tree: &Tree,
        sample: Option<&[u32]>,
        label: CudaView<f32>,
        margin: CudaView<f32>,
        repeats: Option<&CudaSlice<f32>>,
        alpha: f64,
    ) -> Result<Vec<f32>> {
        let repeats = match (repeats, &self.weighed) {
            (Some(w), Some(_)) => Some(w),
            (None, None) => None,
            _ => unreachable!("a refit is made weighed exactly when the fit's weights are whole"),
        };
        if let Some((_, last)) = &mut self.steps {
            *last = Instant::now();
        }
        margins.mark_leaves(dev, matrix, tree, &mut self.leaf_of)?;
        let m = sample.map_or(self.keys.len(), <[u32]>::len) as u32;
        if let Some(rows) = sample {
            dev.fill(&mut self.sample, rows)?;
        }
        self.lap(dev, 0);
        let nodes = tree.n_nodes();
        dev.fill(&mut self.counts, &vec![0u32; nodes])?;
        // Per-node counters in shared memory for trees up to `limit` nodes, else in global memory.
        let limit = super::knob::<usize>("POLARS_GBT_REFIT_SHARED_NODES").map_or(SHARED_NODES, |k| k.min(SHARED_NODES));
        let shape =
            Shape { sampled: sample.is_some(), m, n_nodes: nodes as u32, use_shared: u32::from(nodes <= limit) };
        let (counts, sums) = self.count(dev, shape, repeats)?;
        self.lap(dev, 1);
        let mut start = Vec::with_capacity(nodes);
        let mut next = 0u32;
        for &c in &counts {
            start.push(next);
            next += c;
        }
        // A leaf whose rows all weigh 0 counts them 1 each and takes the largest (rank =
        // count), as the CPU's weighted quantile does.
        let rank: Vec<u64> = (0..nodes)
            .map(|i| match (counts[i], sums.as_ref().map(|s| s[i])) {
                (c, _) if c == 0 || !tree.is_leaf(i as u32) => 0,
                (_, Some(w)) if w > 0 => quantile_rank(w as usize, alpha) as u64,
                (c, Some(_)) => c as u64,
                (c, None) => quantile_rank(c as usize, alpha) as u64,
            })
            .collect();
        if let (Some(wd), Some(sums)) = (&mut self.weighed, &sums) {
            let unit: Vec<u32> = (0..nodes).map(|i| u32::from(sums[i] == 0)).collect();
            dev.fill(&mut wd.unit_leaf, &unit)?;
            dev.reserve(&mut wd.hist, nodes * 256)?;
        }
        dev.fill(&mut self.cursor, &start)?;
        dev.fill(&mut self.remaining, &rank)?;
        dev.fill(&mut self.prefix, &vec![0u32; nodes])?;
        dev.fill(&mut self.out, &vec![0f32; nodes])?;
        // The byte histograms: zero from their allocation, and zeroed again by each pick.
        dev.reserve(&mut self.hist, nodes * 256)?;
        self.lap(dev, 2);
        self.scatter(dev, shape, label, margin, repeats)?;
        self.lap(dev, 3);
        self.select(dev, shape)?;
        let out = dev.download(self.out.buf.slice(..nodes))?;
        self.lap(dev, 4);
        Ok(out)
    }

    /// Adds the refit `tree`'s leaf values to `margin` (every row's), each row's leaf read from
    /// the marking the refit made, instead of walking the tree again.
    pub(super) fn add_tree(&mut self, dev: &mut FitDevice, tree: &Tree, mut margin: CudaViewMut<f32>) -> Result<()> {
        dev.fill(&mut self.values, &tree.value)?;
        let n = margin.len();
        debug_assert_eq!(n, self.leaf_of.len(), "every row's leaf is marked");
        let mut p = dev.pins();
        let args = RefitAddArgs {
            leaf_of: p.read(&self.leaf_of),
            values: p.read(&self.values.buf),
            n: n as u32,
            margin: p.write(&mut margin),
        };
        // SAFETY: leaf_of and margin hold n rows; every marked leaf is a node of the tree.
        unsafe { dev.launch(&dev.rt.kernels.refit_add_leaves, &args, dev.grid(n as u64, 256)) }
    }

    /// The launch shape of the per-row kernels: `work` items, with the node counters in
    /// shared memory when `shape` says so.
    fn rows_grid(dev: &FitDevice, shape: Shape, work: u64) -> LaunchConfig {
        let mut grid = dev.grid(work, 256);
        grid.shared_mem_bytes = if shape.use_shared == 1 { 4 * shape.n_nodes } else { 0 };
        grid
    }

    /// Each node's row count, and with whole weights (`repeats`) its total weight.
    fn count(
        &mut self,
        dev: &mut FitDevice,
        shape: Shape,
        repeats: Option<&CudaSlice<f32>>,
    ) -> Result<(Vec<u32>, Option<Vec<u64>>)> {
        let (k, nodes) = (&dev.rt.kernels, shape.n_nodes as usize);
        // SAFETY (both launches): sampled rows are below n; leaf ids are below `nodes`, the
        // length of every per-node buffer; the shared counters hold `nodes` words.
        {
            let mut p = dev.pins();
            let args = RefitCountArgs {
                leaf_of: p.read(&self.leaf_of),
                rows: p.read_opt(shape.sampled.then_some(&self.sample.buf)),
                m: shape.m,
                n_nodes: shape.n_nodes,
                use_shared: shape.use_shared,
                counts: p.write(&mut self.counts.buf),
            };
            unsafe { dev.launch(&k.refit_count, &args, Self::rows_grid(dev, shape, shape.m as u64)) }?;
        }
        let counts = dev.download(self.counts.buf.slice(..nodes))?;
        // Whole weights: each node's total, from which its rank is taken.
        let (Some(wd), Some(w)) = (&mut self.weighed, repeats) else { return Ok((counts, None)) };
        dev.fill(&mut wd.sums, &vec![0u64; nodes])?;
        {
            let mut p = dev.pins();
            let args = RefitWeighArgs {
                leaf_of: p.read(&self.leaf_of),
                rows: p.read_opt(shape.sampled.then_some(&self.sample.buf)),
                m: shape.m,
                repeats: p.read(w),
                sums: p.write(&mut wd.sums.buf),
            };
            unsafe { dev.launch(&k.refit_weigh, &args, dev.grid(shape.m as u64, 256)) }?;
        }
        Ok((counts, Some(dev.download(wd.sums.buf.slice(..nodes))?)))
    }

    /// Each row's residual key into its node's run (and with whole weights its weight beside it).
    fn scatter(
        &mut self,
        dev: &FitDevice,
        shape: Shape,
        label: CudaView<f32>,
        margin: CudaView<f32>,
        repeats: Option<&CudaSlice<f32>>,
    ) -> Result<()> {
        let mut p = dev.pins();
        let (unit_leaf, key_weight) = match &mut self.weighed {
            Some(wd) => (Some(&wd.unit_leaf.buf), Some(&mut wd.key_weight)),
            None => (None, None),
        };
        let weights = repeats.zip(unit_leaf);
        let args = RefitScatterArgs {
            leaf_of: p.read(&self.leaf_of),
            rows: p.read_opt(shape.sampled.then_some(&self.sample.buf)),
            m: shape.m,
            label: p.read(&label),
            margin: p.read(&margin),
            repeats: p.read_opt(weights.map(|(w, _)| w)),
            unit_leaf: p.read_opt(weights.map(|(_, u)| u)),
            n_nodes: shape.n_nodes,
            use_shared: shape.use_shared,
            cursor: p.write(&mut self.cursor.buf),
            keys: p.write(&mut self.keys),
            key_leaf: p.write(&mut self.key_leaf),
            key_weight: key_weight.map_or(DevPtrMut::NULL, |kw| p.write(kw)),
        };
        let tiles = Self::rows_grid(dev, shape, (shape.m as u64).div_ceil(ROWS_PER_THREAD));
        // SAFETY: as `count`'s; the runs fit `keys` (their lengths sum to m <= n), and the
        // weights are given together or not at all.
        unsafe { dev.launch(&dev.rt.kernels.refit_scatter, &args, tiles) }
    }

    /// Every leaf's quantile into `out`: a radix selection, a byte a pass, over every key of
    /// every leaf at once (so a large leaf is spread over the grid); counting, or with whole
    /// weights weighing: the same passes, another histogram width.
    fn select(&mut self, dev: &FitDevice, shape: Shape) -> Result<()> {
        let k = &dev.rt.kernels;
        let (m, n_nodes) = (shape.m, shape.n_nodes);
        let (rows, per_node) = (dev.grid(m as u64, 256), dev.grid(n_nodes as u64, 256));
        // The picks take a warp a node.
        let warp_per_node = dev.grid(n_nodes as u64 * 32, 256);
        // SAFETY (all launches): the keys' leaves are below `n_nodes`, and every per-node
        // buffer (the histograms 256 a node) holds `n_nodes`.
        for shift in [24u32, 16, 8, 0] {
            let mut p = dev.pins();
            let (keys, key_leaf, prefix) = (p.read(&self.keys), p.read(&self.key_leaf), p.read(&self.prefix.buf));
            match &mut self.weighed {
                Some(wd) => {
                    let key_weight = p.read(&wd.key_weight);
                    let hist = p.write(&mut wd.hist.buf);
                    let args = RadixWeighArgs { keys, key_leaf, key_weight, m, prefix, shift, hist };
                    unsafe { dev.launch(&k.refit_radix_weigh, &args, rows) }?;
                }
                None => {
                    let args = RadixCountArgs { keys, key_leaf, m, prefix, shift, hist: p.write(&mut self.hist.buf) };
                    unsafe { dev.launch(&k.refit_radix_count, &args, rows) }?;
                }
            }
            drop(p);
            let mut p = dev.pins();
            let (prefix, remaining) = (p.write(&mut self.prefix.buf), p.write(&mut self.remaining.buf));
            match &mut self.weighed {
                Some(wd) => {
                    let args = RadixPickArgs { hist: p.write(&mut wd.hist.buf), n_nodes, shift, prefix, remaining };
                    unsafe { dev.launch(&k.refit_radix_pick_weighed, &args, warp_per_node) }?;
                }
                None => {
                    let args = RadixPickArgs { hist: p.write(&mut self.hist.buf), n_nodes, shift, prefix, remaining };
                    unsafe { dev.launch(&k.refit_radix_pick, &args, warp_per_node) }?;
                }
            }
        }
        let mut p = dev.pins();
        let args = RefitValuesArgs {
            prefix: p.read(&self.prefix.buf),
            remaining: p.read(&self.remaining.buf),
            n_nodes,
            out: p.write(&mut self.out.buf),
        };
        unsafe { dev.launch(&k.refit_values, &args, per_node) }
    }
}
