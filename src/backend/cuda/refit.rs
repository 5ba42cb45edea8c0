//! Leaf refits of the L1-type losses on the device (kernels/refit.cu), for unit or whole
//! weights: the tree's rows are counted (and weighed) per leaf, their residuals scattered into
//! one run per leaf, and every leaf's quantile selected by a radix selection over all keys at
//! once (so one large leaf does not wait on one block), so that only the leaf values cross to
//! the host. The rank is the CPU's (`objective::quantile_rank`, of the count or of the whole
//! weight: a row of weight w is w rows) and the order f32's total order, so the values are the
//! CPU's. Fractional weights read the rows' leaves back and refit on the host.

use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaView, PushKernelArg};

use super::buffers::{FitDevice, Scratch};
use super::data::DeviceMatrix;
use super::device_error;
use super::partition::MarginUpdate;
use crate::error::Result;
use crate::objective::quantile_rank;
use crate::tree::Tree;

/// Trees of at most this many nodes count rows per leaf in shared memory (32 KiB);
/// POLARS_GBT_REFIT_SHARED_NODES lowers it (tests force the global-memory counters with 0).
const SHARED_NODES: usize = 8192;
/// `REFIT_ROWS_PER_THREAD` of kernels/refit.cu: rows each thread of `refit_scatter` ranks.
pub(super) const ROWS_PER_THREAD: u64 = 8;

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
        let null = 0u64;
        let nodes = tree.n_nodes();
        dev.fill(&mut self.counts, &vec![0u32; nodes])?;
        let rt = dev.rt;
        let k = &rt.kernels;
        // Per-node counters in shared memory for trees up to `limit` nodes, else in global memory.
        let limit = super::knob::<usize>("POLARS_GBT_REFIT_SHARED_NODES").map_or(SHARED_NODES, |k| k.min(SHARED_NODES));
        let (n_nodes, use_shared) = (nodes as u32, u32::from(nodes <= limit));
        let shared = if use_shared == 1 { 4 * n_nodes } else { 0 };
        let mut grid = dev.grid(m as u64, 256);
        grid.shared_mem_bytes = shared;
        let mut tiles = dev.grid((m as u64).div_ceil(ROWS_PER_THREAD), 256);
        tiles.shared_mem_bytes = shared;
        // SAFETY (all launches): arguments match the kernels in kernels/refit.cu in order and
        // type (a null row list: every row); sampled rows are below n; leaf ids are below
        // `nodes`, the length of every per-node buffer; the runs fit `keys` (their lengths sum
        // to m <= n).
        let mut launch = dev.launcher(&k.refit_count);
        launch.arg(&self.leaf_of);
        match sample {
            Some(_) => launch.arg(&self.sample.buf),
            None => launch.arg(&null),
        };
        launch.arg(&m).arg(&n_nodes).arg(&use_shared).arg(&mut self.counts.buf);
        unsafe { launch.launch(grid) }.map_err(device_error)?;
        let counts = dev.download(self.counts.buf.slice(..nodes))?;
        // Whole weights: each node's total, from which its rank is taken.
        let sums = match (&mut self.weighed, repeats) {
            (Some(wd), Some(w)) => {
                dev.fill(&mut wd.sums, &vec![0u64; nodes])?;
                let mut launch = dev.launcher(&k.refit_weigh);
                launch.arg(&self.leaf_of);
                match sample {
                    Some(_) => launch.arg(&self.sample.buf),
                    None => launch.arg(&null),
                };
                launch.arg(&m).arg(w).arg(&mut wd.sums.buf);
                unsafe { launch.launch(dev.grid(m as u64, 256)) }.map_err(device_error)?;
                Some(dev.download(wd.sums.buf.slice(..nodes))?)
            }
            _ => None,
        };
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
        let mut launch = dev.launcher(&k.refit_scatter);
        launch.arg(&self.leaf_of);
        match sample {
            Some(_) => launch.arg(&self.sample.buf),
            None => launch.arg(&null),
        };
        launch.arg(&m).arg(&label).arg(&margin);
        let (unit_leaf, key_weight) = match &mut self.weighed {
            Some(wd) => (Some(&wd.unit_leaf.buf), Some(&mut wd.key_weight)),
            None => (None, None),
        };
        match (repeats, unit_leaf) {
            (Some(w), Some(unit)) => launch.arg(w).arg(unit),
            _ => launch.arg(&null).arg(&null),
        };
        launch.arg(&n_nodes).arg(&use_shared);
        launch.arg(&mut self.cursor.buf).arg(&mut self.keys).arg(&mut self.key_leaf);
        match key_weight {
            Some(kw) => launch.arg(kw),
            None => launch.arg(&null),
        };
        unsafe { launch.launch(tiles) }.map_err(device_error)?;
        self.lap(dev, 3);
        // Every key of every leaf counts in each pass, so a large leaf is spread over the grid.
        let per_node = dev.grid(nodes as u64, 256);
        // Counting, or with whole weights weighing: the same passes, another histogram width.
        let (count, pick) = match self.weighed {
            Some(_) => (&k.refit_radix_weigh, &k.refit_radix_pick_weighed),
            None => (&k.refit_radix_count, &k.refit_radix_pick),
        };
        let (key_weight, mut weighed_hist) = match &mut self.weighed {
            Some(wd) => (Some(&wd.key_weight), Some(&mut wd.hist.buf)),
            None => (None, None),
        };
        for shift in [24u32, 16, 8, 0] {
            let mut launch = dev.launcher(count);
            launch.arg(&self.keys).arg(&self.key_leaf);
            if let Some(w) = key_weight {
                launch.arg(w);
            }
            launch.arg(&m).arg(&self.prefix.buf).arg(&shift);
            match weighed_hist.as_deref_mut() {
                Some(h) => launch.arg(h),
                None => launch.arg(&mut self.hist.buf),
            };
            unsafe { launch.launch(dev.grid(m as u64, 256)) }.map_err(device_error)?;
            let mut launch = dev.launcher(pick);
            match weighed_hist.as_deref_mut() {
                Some(h) => launch.arg(h),
                None => launch.arg(&mut self.hist.buf),
            };
            launch.arg(&n_nodes).arg(&shift).arg(&mut self.prefix.buf).arg(&mut self.remaining.buf);
            unsafe { launch.launch(per_node) }.map_err(device_error)?;
        }
        unsafe {
            dev.launcher(&k.refit_values)
                .arg(&self.prefix.buf)
                .arg(&self.remaining.buf)
                .arg(&n_nodes)
                .arg(&mut self.out.buf)
                .launch(per_node)
        }
        .map_err(device_error)?;
        let out = dev.download(self.out.buf.slice(..nodes))?;
        self.lap(dev, 4);
        Ok(out)
    }
}
