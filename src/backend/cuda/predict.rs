//! Scoring on the GPU: a model's forest uploaded once ([`GpuForest`]), and batches of rows
//! streamed through it. Rows go from the Arrow columns into pinned buffers, column-major as the
//! kernel reads them; slots (four, or two for wide rows) take turns, each on its own stream, so
//! the host fills one slot while another's rows cross the link and a third's are scored.

use std::sync::{Arc, Condvar, Mutex, OnceLock};

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice};
use rayon::prelude::*;

use super::forest::{ForestLayout, HostForest, QuantisedForest};
use super::launch::{kernel_args, launch, DevPtr, DevPtrMut, Pins};
use super::layout::{LinkedNode, PredNode, PredTile, PredTree};
use super::runtime::{runtime, Runtime};
use super::shap::ShapPaths;
use super::{device_error, knob, DeviceMemory};
use crate::backend::Predictor;
use crate::config::Objective;
use crate::data::FeatureColumn;
use crate::error::{Error, Result};
use crate::objective::Link;
use crate::prediction::{DeviceBinding, DeviceFloat, DeviceRows, ExportArrays, ForestSpec, PredictOutput, Predictions};
use crate::profile::StageTimes;
use crate::tree::Tree;

/// Rows per streamed chunk, at most.
const CHUNK_ROWS: usize = 1 << 18;
/// A streamer has four slots when a slot's rows take at most this many bytes, else two.
const FOUR_SLOTS_MAX_BYTES: usize = 64 << 20;
/// The smallest chunk a request is split into (fewer rows leave the GPU mostly idle).
const MIN_CHUNK_ROWS: usize = 1 << 15;
/// Threads per block (each scores ROWS_PER_THREAD rows); `POLARS_GBT_PREDICT_THREADS` overrides.
const THREADS: u32 = 256;

/// Rows each thread scores (`PRED_ROWS_PER_THREAD` in kernels/predict.cu).
const ROWS_PER_THREAD: usize = 4;

/// The forest as both kernel families read it after their nodes and leaves (`PredForest` in
/// kernels/predict.cu).
#[repr(C)]
pub struct PredForest<'a> {
    pub trees: DevPtr<'a, PredTree>,
    pub n_trees: u32,
    pub tiles: DevPtr<'a, PredTile>,
    pub n_tiles: u32,
    pub tile_nodes: u32,
    /// (first word, words) pairs: `uint2` on the CUDA side.
    pub sets: DevPtr<'a, u32>,
    pub words: DevPtr<'a, u32>,
    pub base: DevPtr<'a, f32>,
}

/// Where scores go: margins into `out` (from `row_base`, null: the model's base), or leaf ids
/// into `leaf_out` when it is not null.
#[repr(C)]
pub struct PredOutputs<'a> {
    pub row_base: DevPtr<'a, f32>,
    pub n_outputs: u32,
    pub out: DevPtrMut<'a, f32>,
    pub leaf_out: DevPtrMut<'a, u32>,
}

/// `predict_complete*`, `predict_linked*`: raw values, `n` rows column-major.
#[repr(C)]
pub struct PredictArgs<'a> {
    pub x: DevPtr<'a, f32>,
    pub n: u32,
    pub n_features: u32,
    pub nodes: DevPtr<'a, PredNode>,
    pub leaf_values: DevPtr<'a, f32>,
    pub leaf_ids: DevPtr<'a, u32>,
    pub linked: DevPtr<'a, LinkedNode>,
    pub linked_ids: DevPtr<'a, u32>,
    pub forest: PredForest<'a>,
    pub outputs: PredOutputs<'a>,
}

/// `predict_binned*`: u8 or u16 bins, quantised nodes.
#[repr(C)]
pub struct PredictBinnedArgs<'a, B> {
    pub bins: DevPtr<'a, B>,
    pub n: u32,
    pub n_features: u32,
    pub nodes: DevPtr<'a, u32>,
    pub leaf_values: DevPtr<'a, f32>,
    pub leaf_ids: DevPtr<'a, u32>,
    pub forest: PredForest<'a>,
    pub outputs: PredOutputs<'a>,
}

/// `bin_rows_u8`, `_u16`.
#[repr(C)]
pub struct BinRowsArgs<'a, B> {
    pub x: DevPtr<'a, f32>,
    pub n: u32,
    pub cuts: DevPtr<'a, f32>,
    pub cut_offsets: DevPtr<'a, u32>,
    pub n_categories: DevPtr<'a, u32>,
    pub staged_cap: u32,
    pub bins: DevPtrMut<'a, B>,
}

/// `finish_predictions`: `link` a checked code ([`link_code`]); null `classes`: apply the link.
#[repr(C)]
pub struct FinishPredictionsArgs<'a> {
    pub margin: DevPtrMut<'a, f32>,
    pub n: u32,
    pub k: u32,
    pub link: u32,
    pub classes: DevPtrMut<'a, u32>,
}

impl<'a> PredictBinnedArgs<'a, u8> {
    /// The same launch reading the byte scratch as 16-bit bins.
    fn widen(self) -> PredictBinnedArgs<'a, u16> {
        let PredictBinnedArgs { bins, n, n_features, nodes, leaf_values, leaf_ids, forest, outputs } = self;
        PredictBinnedArgs { bins: bins.cast(), n, n_features, nodes, leaf_values, leaf_ids, forest, outputs }
    }
}

impl<'a> BinRowsArgs<'a, u8> {
    /// The same launch writing the byte scratch as 16-bit bins.
    fn widen(self) -> BinRowsArgs<'a, u16> {
        let BinRowsArgs { x, n, cuts, cut_offsets, n_categories, staged_cap, bins } = self;
        BinRowsArgs { x, n, cuts, cut_offsets, n_categories, staged_cap, bins: bins.cast() }
    }
}

kernel_args!(PredForest, PredOutputs, PredictArgs, PredictBinnedArgs<B>, BinRowsArgs<B>, FinishPredictionsArgs);

/// `link`'s code for `finish_predictions`, checked before launching: every code has its own
/// case there (a code without one traps, which poisons the context, so this is the error
/// path), and the hinge's case writes output 0 only.
fn link_code(link: Link, n_outputs: u32) -> Result<u32> {
    match link {
        Link::Identity | Link::Logistic | Link::Exp | Link::Softmax => Ok(link as u32),
        Link::Hinge if n_outputs == 1 => Ok(link as u32),
        Link::Hinge => Err(Error::Device(format!("the hinge link takes one output, not {n_outputs}"))),
    }
}

/// A model's forest on the device, with the launch shape chosen for it.
pub struct GpuForest {
    rt: Arc<Runtime>,
    pub layout: ForestLayout,
    has_categorical: bool,
    n_trees: u32,
    n_outputs: u32,
    n_features: u32,
    objective: Objective,
    nodes: CudaSlice<PredNode>,
    leaf_values: CudaSlice<f32>,
    leaf_ids: CudaSlice<u32>,
    linked: CudaSlice<LinkedNode>,
    linked_ids: CudaSlice<u32>,
    trees: CudaSlice<PredTree>,
    tiles: CudaSlice<PredTile>,
    n_tiles: u32,
    tile_nodes: u32,
    sets: CudaSlice<u32>,
    words: CudaSlice<u32>,
    base: CudaSlice<f32>,
    /// The binned (u8 or u16) form of a complete layout, when every feature fits (see
    /// QuantisedForest).
    quantised: Option<Quantised>,
    /// Threads per block and dynamic shared memory; rows staged in shared memory or not.
    threads: u32,
    shared_bytes: u32,
    shared_rows: bool,
    /// One line for logs: the layout and its size.
    pub description: String,
    /// The trees and base margins again, for SHAP values: their paths go to the device on the
    /// first request (`shap.rs`), not with every forest.
    model_trees: Vec<Tree>,
    base_host: Vec<f32>,
    shap: Mutex<Option<Arc<ShapPaths>>>,
}

impl GpuForest {
    /// A model's forest (`Model::forest_spec`) on the device, in the fastest layout that fits it.
    pub fn new(spec: &ForestSpec) -> Result<Self> {
        Self::with_quantisation(spec, knob::<usize>("POLARS_GBT_PREDICT_QUANTISED").unwrap_or(1) == 1)
    }

    /// As [`GpuForest::new`]; `allow_quantised: false` keeps complete layouts on floats (for
    /// tests that cover both kernels).
    pub fn with_quantisation(spec: &ForestSpec, allow_quantised: bool) -> Result<Self> {
        let rt = runtime()?;
        let trees = spec.trees;
        let layout = HostForest::choose(trees);
        let host = HostForest::build(trees, spec.n_outputs, layout);
        let n_features = spec.n_features();
        let max = rt.max_shared_per_block as usize;
        let mut quantised = match layout {
            ForestLayout::Complete if allow_quantised => QuantisedForest::new(&host, &spec.n_categories),
            _ => None,
        };
        // Quantised: rows of ROWS_PER_THREAD * threads bins per feature (stride + 4) and two
        // tile buffers (8 KiB of nodes each by default, `POLARS_GBT_PREDICT_TILE_KB`), with the
        // block size that keeps the most warps resident on an SM (more warps fill the cycles in
        // which none is ready to issue: docs/gpu-notes.md). A quantised forest whose rows do not
        // fit in shared memory is scored on floats.
        let mut plan = None;
        if let Some(q) = &quantised {
            let bin_bytes = if q.wide { 2 } else { 1 };
            let budget = knob::<usize>("POLARS_GBT_PREDICT_TILE_KB").unwrap_or(8).saturating_mul(1024);
            // Tiles hold nodes only: the kernel reads leaves from global memory.
            let (tiles, nodes, _) = host.tiles(budget, 4, 0);
            let nodes = nodes.next_multiple_of(4);
            let tile_bytes = 2 * nodes * 4;
            // On a tie, the first: 256 threads measured best (docs/gpu-notes.md).
            let candidates = match knob::<usize>("POLARS_GBT_PREDICT_THREADS").unwrap_or(0) {
                0 => vec![256u32, 512, 128],
                t => vec![t as u32],
            };
            let mut best: Option<(usize, u32, usize)> = None;
            for threads in candidates {
                let rows = (n_features * (ROWS_PER_THREAD * threads as usize + 4) * bin_bytes).next_multiple_of(16);
                let shared = rows + tile_bytes;
                if shared > max {
                    continue;
                }
                let blocks = (rt.max_shared_per_sm as usize / (shared + 1024)).min(2048 / threads as usize);
                let warps = blocks * threads as usize / 32;
                if best.is_none_or(|(w, _, _)| warps > w) {
                    best = Some((warps, threads, shared));
                }
            }
            match best {
                Some((_, threads, shared)) => plan = Some((tiles, nodes, threads, shared)),
                None => quantised = None,
            }
        }
        // Floats: every feature of ROWS_PER_THREAD rows per thread in shared memory, with fewer
        // threads per block when that does not fit beside a tile of the largest tree, else
        // read from global memory; the rest of the shared memory holds one tile of trees.
        let (tiles, tile_nodes, threads, shared_bytes, shared_rows) = match plan {
            Some((tiles, nodes, threads, shared)) => (tiles, nodes, threads, shared, true),
            None => {
                let largest_tree = match layout {
                    ForestLayout::Complete => {
                        host.trees.iter().map(|t| (8usize << (t.depth + 1)) + (4usize << t.depth)).max().unwrap_or(0)
                    }
                    ForestLayout::Linked => 0,
                };
                let rows_bytes =
                    |threads: u32| (n_features * ROWS_PER_THREAD * threads as usize * 4).next_multiple_of(16);
                let mut threads = THREADS;
                while threads > 32 && largest_tree + rows_bytes(threads) > max {
                    threads /= 2;
                }
                let shared_rows = largest_tree + rows_bytes(threads) <= max;
                let rows_bytes = if shared_rows { rows_bytes(threads) } else { 0 };
                if !shared_rows {
                    threads = THREADS;
                }
                let (tiles, nodes, leaves) = match layout {
                    ForestLayout::Complete => host.tiles(max - rows_bytes, 8, 4),
                    ForestLayout::Linked => (vec![PredTile::default()], 0, 0),
                };
                (tiles, nodes, threads, rows_bytes + nodes * 8 + leaves * 4, shared_rows)
            }
        };
        if shared_bytes > max {
            return Err(Error::Device(format!(
                "a tile of trees needs {shared_bytes} bytes of shared memory, more than the GPU's {max}"
            )));
        }
        let stream = &rt.stream;
        let mut memory = DeviceMemory::default();
        let flat_sets: Vec<u32> = host.sets.iter().flatten().copied().collect();
        let nonempty = |v: &[u32]| if v.is_empty() { vec![0] } else { v.to_vec() };
        let forest = GpuForest {
            layout,
            has_categorical: host.has_categorical,
            n_trees: trees.len() as u32,
            n_outputs: spec.n_outputs as u32,
            n_features: n_features as u32,
            objective: spec.objective,
            nodes: memory.upload(stream, if host.nodes.is_empty() { &[PredNode { word: 0, threshold: 0.0 }] } else { &host.nodes })?,
            leaf_values: memory.upload(stream, if host.leaf_values.is_empty() { &[0.0] } else { &host.leaf_values })?,
            leaf_ids: memory.upload(stream, &nonempty(&host.leaf_ids))?,
            linked: memory.upload(
                stream,
                if host.linked.is_empty() { &[LinkedNode { word: 0, threshold: 0.0, left: 0, value: 0.0 }] } else { &host.linked },
            )?,
            linked_ids: memory.upload(stream, &nonempty(&host.linked_ids))?,
            trees: memory.upload(stream, &host.trees)?,
            n_tiles: tiles.len() as u32,
            tiles: memory.upload(stream, &tiles)?,
            tile_nodes: tile_nodes as u32,
            sets: memory.upload(stream, &flat_sets)?,
            words: memory.upload(stream, &host.words)?,
            base: memory.upload(stream, spec.base_margin)?,
            quantised: match &quantised {
                Some(q) => Some(Quantised {
                    nodes: memory.upload(stream, &q.nodes)?,
                    cuts: memory.upload(stream, if q.cuts.is_empty() { &[0.0] } else { &q.cuts })?,
                    cut_offsets: memory.upload(stream, &q.cut_offsets)?,
                    n_categories: memory.upload(stream, &q.n_categories)?,
                    staged_cuts: q
                        .cut_offsets
                        .windows(2)
                        .map(|w| w[1] - w[0])
                        .max()
                        .unwrap_or(0)
                        .min(STAGED_CUTS_MAX),
                    wide: q.wide,
                }),
                None => None,
            },
            threads,
            shared_bytes: shared_bytes as u32,
            shared_rows,
            description: format!(
                "{}, {} trees of depth up to {}, {:.1} MiB on the GPU; rows {} shared memory, {} threads per block of {} rows each",
                match (layout, &quantised) {
                    (ForestLayout::Complete, Some(q)) if q.wide => "complete-tree layout on u16 bins",
                    (ForestLayout::Complete, Some(_)) => "complete-tree layout on u8 bins",
                    (ForestLayout::Complete, None) => "complete-tree layout on floats",
                    (ForestLayout::Linked, _) => "linked (breadth-first) layout on floats",
                },
                trees.len(),
                host.max_depth,
                memory.allocated as f64 / (1 << 20) as f64,
                if shared_rows { "in" } else { "outside" },
                threads,
                ROWS_PER_THREAD,
            ),
            rt: rt.clone(),
            model_trees: trees.to_vec(),
            base_host: spec.base_margin.to_vec(),
            shap: Mutex::new(None),
        };
        stream.synchronize().map_err(device_error)?;
        if crate::profile::on() {
            eprintln!("polars-gbt: GPU forest: {}", forest.description);
        }
        Ok(forest)
    }

    /// Bytes of scratch `launch` needs for `n` rows (their bins, for quantised forests).
    pub fn scratch_bytes(&self, n: usize) -> usize {
        match &self.quantised {
            Some(q) => n * self.n_features as usize * if q.wide { 2 } else { 1 },
            None => 1,
        }
    }

    /// The forest as both kernel families take it after their nodes and leaves.
    fn forest_args<'a>(&'a self, p: &mut Pins<'a>) -> PredForest<'a> {
        PredForest {
            trees: p.read(&self.trees),
            n_trees: self.n_trees,
            tiles: p.read(&self.tiles),
            n_tiles: self.n_tiles,
            tile_nodes: self.tile_nodes,
            sets: p.read(&self.sets),
            words: p.read(&self.words),
            base: p.read(&self.base),
        }
    }

    /// Queues the scoring of `n` rows of `x` (column-major, feature f at `f * n`) on `stream`:
    /// margins into `out` (`n * n_outputs`, starting from `row_base` when given), or leaf ids
    /// into `leaf_out` (`n * n_trees`). `scratch` holds [`GpuForest::scratch_bytes`] bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        stream: &Arc<CudaStream>,
        x: &CudaSlice<f32>,
        n: usize,
        row_base: Option<&CudaSlice<f32>>,
        out: &mut CudaSlice<f32>,
        leaf_out: Option<&mut CudaSlice<u32>>,
        scratch: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let mut p = Pins::new(stream);
        let out = p.write(out);
        let leaf_out = leaf_out.map_or(DevPtrMut::NULL, |l| p.write(l));
        self.launch_to(stream, x, n, p.read_opt(row_base), out, leaf_out, scratch)
    }

    /// [`GpuForest::launch`] into outputs given by address: margins into `out`, or leaf ids
    /// into `leaf_out` when it is not null (`out` is then not written).
    #[allow(clippy::too_many_arguments)]
    fn launch_to(
        &self,
        stream: &Arc<CudaStream>,
        x: &CudaSlice<f32>,
        n: usize,
        row_base: DevPtr<'_, f32>,
        out: DevPtrMut<'_, f32>,
        leaf_out: DevPtrMut<'_, u32>,
        scratch: &mut CudaSlice<u8>,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        assert!(scratch.len() >= self.scratch_bytes(n), "prediction scratch is too small");
        let k = &self.rt.kernels;
        let rows_per_block = ROWS_PER_THREAD * self.threads as usize;
        let blocks = n.div_ceil(rows_per_block).min(1 << 30) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (self.threads, 1, 1),
            shared_mem_bytes: self.shared_bytes,
        };
        let n32 = n as u32;
        if let Some(q) = &self.quantised {
            self.bin_rows(stream, q, x, n32, scratch)?;
        }
        let mut p = Pins::new(stream);
        let forest = self.forest_args(&mut p);
        let outputs = PredOutputs { row_base, n_outputs: self.n_outputs, out, leaf_out };
        // SAFETY: the structs mirror kernels/predict.cu (checked by the layout probe); every
        // index the kernel follows was built by HostForest (and QuantisedForest) from a
        // validated model; `x` holds n_features * n values (the bins in `scratch` as many),
        // `out` n * n_outputs and `leaf_out` n * n_trees; `cfg`'s shared memory is the plan's.
        unsafe {
            if let Some(q) = &self.quantised {
                let (bins, n_features, nodes) = (p.read(&*scratch), self.n_features, p.read(&q.nodes));
                let (leaf_values, leaf_ids) = (p.read(&self.leaf_values), p.read(&self.leaf_ids));
                let args =
                    PredictBinnedArgs { bins, n: n32, n_features, nodes, leaf_values, leaf_ids, forest, outputs };
                return match (self.has_categorical, q.wide) {
                    (false, false) => launch(stream, &k.predict_binned, &args, cfg),
                    (true, false) => launch(stream, &k.predict_binned_cat, &args, cfg),
                    (wide_cat, true) => {
                        let args = args.widen();
                        let f = if wide_cat { &k.predict_binned_cat_u16 } else { &k.predict_binned_u16 };
                        launch(stream, f, &args, cfg)
                    }
                };
            }
            let f = match (self.layout, self.has_categorical, self.shared_rows) {
                (ForestLayout::Complete, false, true) => &k.predict_complete,
                (ForestLayout::Complete, true, true) => &k.predict_complete_cat,
                (ForestLayout::Complete, false, false) => &k.predict_complete_global_rows,
                (ForestLayout::Complete, true, false) => &k.predict_complete_cat_global_rows,
                (ForestLayout::Linked, false, true) => &k.predict_linked,
                (ForestLayout::Linked, true, true) => &k.predict_linked_cat,
                (ForestLayout::Linked, false, false) => &k.predict_linked_global_rows,
                (ForestLayout::Linked, true, false) => &k.predict_linked_cat_global_rows,
            };
            let args = PredictArgs {
                x: p.read(x),
                n: n32,
                n_features: self.n_features,
                nodes: p.read(&self.nodes),
                leaf_values: p.read(&self.leaf_values),
                leaf_ids: p.read(&self.leaf_ids),
                linked: p.read(&self.linked),
                linked_ids: p.read(&self.linked_ids),
                forest,
                outputs,
            };
            launch(stream, f, &args, cfg)
        }
    }

    /// Queues the binning of `n` rows of `x` against the quantised forest's thresholds into
    /// `scratch` (u8 or u16 bins, column-major).
    fn bin_rows(
        &self,
        stream: &Arc<CudaStream>,
        q: &Quantised,
        x: &CudaSlice<f32>,
        n: u32,
        scratch: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let k = &self.rt.kernels;
        let mut p = Pins::new(stream);
        let args = BinRowsArgs {
            x: p.read(x),
            n,
            cuts: p.read(&q.cuts),
            cut_offsets: p.read(&q.cut_offsets),
            n_categories: p.read(&q.n_categories),
            staged_cap: q.staged_cuts,
            bins: p.write(scratch),
        };
        // Blocks of one feature each: about 8 per SM in all, at least one per feature.
        let per_feature = (self.rt.sm_count as u64 * 8 / self.n_features.max(1) as u64).max(1);
        let row_blocks = (n as u64).div_ceil(256).clamp(1, per_feature) as u32;
        let grid_dim = (row_blocks, self.n_features, 1);
        let cfg = LaunchConfig { grid_dim, block_dim: (256, 1, 1), shared_mem_bytes: q.staged_cuts * 4 };
        // SAFETY: `x` holds n * n_features values and `scratch` as many bins; the offsets
        // index `cuts` (built by QuantisedForest); a feature's thresholds are staged only when
        // they fit the `staged_cuts` floats of shared memory the launch provides.
        unsafe {
            if q.wide {
                launch(stream, &k.bin_rows_u16, &args.widen(), cfg)
            } else {
                launch(stream, &k.bin_rows_u8, &args, cfg)
            }
        }
    }

    /// Queues the objective's link (or the class choice) on `n` rows of margins.
    pub fn finish(
        &self,
        stream: &Arc<CudaStream>,
        out: &mut CudaSlice<f32>,
        n: usize,
        classes: Option<&mut CudaSlice<u32>>,
    ) -> Result<()> {
        let mut p = Pins::new(stream);
        let margin = p.write(out);
        let classes = classes.map_or(DevPtrMut::NULL, |c| p.write(c));
        self.finish_to(stream, margin, n, classes)
    }

    /// [`GpuForest::finish`] on margins and classes given by address (null `classes`: the
    /// link on the margins in place).
    fn finish_to(
        &self,
        stream: &Arc<CudaStream>,
        margin: DevPtrMut<'_, f32>,
        n: usize,
        classes: DevPtrMut<'_, u32>,
    ) -> Result<()> {
        let link = self.objective.link();
        let to_classes = !classes.is_null();
        if (link == Link::Identity && !to_classes) || n == 0 {
            return Ok(());
        }
        let link = link_code(link, self.n_outputs)?;
        let args = FinishPredictionsArgs { margin, n: n as u32, k: self.n_outputs, link, classes };
        let blocks = n.div_ceil(256).clamp(1, self.rt.sm_count as usize * 16) as u32;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: `out` holds n * n_outputs margins and `classes` n values.
        unsafe { launch(stream, &self.rt.kernels.finish_predictions, &args, cfg) }
    }
}

/// A quantised forest on the device.
struct Quantised {
    nodes: CudaSlice<u32>,
    cuts: CudaSlice<f32>,
    cut_offsets: CudaSlice<u32>,
    n_categories: CudaSlice<u32>,
    /// Thresholds of one feature the binning kernel stages in shared memory: the most any
    /// feature has, up to [`STAGED_CUTS_MAX`] (features with more are searched in global memory).
    staged_cuts: u32,
    /// u16 bins, else u8.
    wide: bool,
}

/// Thresholds the binning kernel may stage per block: 48 KiB, what any device gives a block
/// without opting in.
const STAGED_CUTS_MAX: u32 = 12 * 1024;

/// One half of the double buffer: pinned host memory and device memory for a chunk.
struct Slot {
    stream: Arc<CudaStream>,
    x_host: PinnedHostSlice<f32>,
    x_dev: CudaSlice<f32>,
    base_host: PinnedHostSlice<f32>,
    base_dev: CudaSlice<f32>,
    out_dev: CudaSlice<f32>,
    out_host: PinnedHostSlice<f32>,
    scratch: CudaSlice<u8>,
    index_dev: CudaSlice<u32>,
    index_host: PinnedHostSlice<u32>,
    done: CudaEvent,
    /// The chunk in flight: (first row, rows).
    pending: Option<(usize, usize)>,
}

/// What a streamer's slots hold: per row, features, outputs, leaf or class values and bytes of
/// scratch; and rows.
type Shape = (usize, usize, usize, usize, usize);

fn holds(have: Shape, need: Shape) -> bool {
    have.0 >= need.0 && have.1 >= need.1 && have.2 >= need.2 && have.3 >= need.3 && have.4 >= need.4
}

/// One set of streaming buffers (four or two slots, each with its own stream), sized for the largest
/// request it served so far and shared by every model.
struct Streamer {
    slots: Vec<Slot>,
    /// What the slots were made for.
    shape: Shape,
}

/// Streamers at most: concurrent callers (the batches of a streaming query, on the engine's
/// threads) each take one, so one batch's host work overlaps another's copies and kernels.
/// Four left batches of Polars' default size (100,000 rows) waiting for a streamer, a third
/// slower than eager scoring on an H100; eight kept up (docs/benchmarks.md). Slots are sized
/// to the chunks of the requests they serve, so a streaming batch's streamer is small.
/// `POLARS_GBT_STREAMERS` overrides.
const MAX_STREAMERS: usize = 8;

/// The idle streamers, and how many exist.
struct StreamerPool {
    idle: Mutex<(Vec<Streamer>, usize)>,
    returned: Condvar,
}

fn pool() -> &'static StreamerPool {
    static POOL: OnceLock<StreamerPool> = OnceLock::new();
    POOL.get_or_init(|| StreamerPool { idle: Mutex::new((Vec::new(), 0)), returned: Condvar::new() })
}

/// A streamer lent to one call, handed back to the pool when dropped; `None` while the call
/// (re)builds it.
struct Lent(Option<Streamer>);

impl Drop for Lent {
    fn drop(&mut self) {
        let pool = pool();
        let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        match self.0.take() {
            Some(s) => idle.0.push(s),
            None => idle.1 -= 1, // lost to an error: another may be made
        }
        pool.returned.notify_one();
    }
}

/// Takes an idle streamer (one already big enough when there is one), or makes room for a new
/// one, or waits for one to come back.
fn lend(need: Shape) -> Lent {
    let fits = |s: &Streamer| holds(s.shape, need);
    let pool = pool();
    let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(i) = idle.0.iter().position(fits) {
            return Lent(Some(idle.0.swap_remove(i)));
        }
        if idle.1 < knob::<usize>("POLARS_GBT_STREAMERS").unwrap_or(MAX_STREAMERS).max(1) {
            idle.1 += 1;
            return Lent(None);
        }
        if let Some(s) = idle.0.pop() {
            return Lent(Some(s)); // too small: the caller rebuilds it
        }
        idle = pool.returned.wait(idle).unwrap_or_else(|p| p.into_inner());
    }
}

impl Streamer {
    fn new(rt: &Runtime, shape: Shape) -> Result<Self> {
        let ctx = rt.stream.context();
        let (nf, k, idx, scratch, rows) = shape;
        let mut memory = DeviceMemory::default();
        let mut slots = Vec::new();
        // Four slots keep the host filling one, the link copying another and the kernels
        // scoring a third (two left each stage waiting on the others: 4M x 28 rows took 22-29
        // ms with two, 15-18 with four, on an H100); wide rows' slots are large, and keep two.
        let n_slots = if rows * nf * 4 <= FOUR_SLOTS_MAX_BYTES { 4 } else { 2 };
        for _ in 0..knob::<usize>("POLARS_GBT_STREAM_SLOTS").unwrap_or(n_slots).max(1) {
            let stream = ctx.new_stream().map_err(device_error)?;
            // SAFETY: pinned buffers are only read or written after their last copy finished
            // (`done`, or PinnedHostSlice's own event).
            let pinned_f32 = |len: usize| unsafe { ctx.alloc_pinned::<f32>(len.max(1)) }.map_err(device_error);
            slots.push(Slot {
                x_host: pinned_f32(rows * nf)?,
                x_dev: memory.zeros(&stream, rows * nf)?,
                base_host: pinned_f32(rows * k)?,
                base_dev: memory.zeros(&stream, rows * k)?,
                out_dev: memory.zeros(&stream, rows * k)?,
                out_host: pinned_f32(rows * k)?,
                scratch: memory.zeros(&stream, rows * scratch)?,
                index_dev: memory.zeros(&stream, rows * idx)?,
                index_host: unsafe { ctx.alloc_pinned::<u32>((rows * idx).max(1)) }.map_err(device_error)?,
                done: ctx.new_event(None).map_err(device_error)?,
                pending: None,
                stream,
            });
        }
        Ok(Streamer { slots, shape })
    }
}

impl GpuForest {
    /// The forest's SHAP paths on the device, laid out on first use.
    fn shap_paths(&self) -> Result<Arc<ShapPaths>> {
        let mut paths = self.shap.lock().unwrap_or_else(|p| p.into_inner());
        if paths.is_none() {
            let built = ShapPaths::new(&self.rt, &self.model_trees, self.n_outputs as usize, self.n_features as usize)?;
            *paths = Some(Arc::new(built));
        }
        Ok(paths.as_ref().unwrap().clone())
    }
}

impl Predictor for GpuForest {
    /// Streams the rows through the device; equals the CPU predictor up to float rounding in
    /// the link function.
    fn predict(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        output: PredictOutput,
    ) -> Result<Predictions> {
        if matches!(output, PredictOutput::Contrib | PredictOutput::Interaction) {
            let interactions = output == PredictOutput::Interaction;
            let values = self.shap_paths()?.values(columns, n_rows, base_margin, &self.base_host, interactions)?;
            let m = self.n_features as usize + 1;
            let width = self.n_outputs as usize * if interactions { m * m } else { m };
            return Ok(Predictions::Float { values, width });
        }
        stream_rows(self, columns, n_rows, base_margin, output)
    }

    /// Rows in the caller's GPU memory, scored there (see [`GpuForest::score_device`]).
    fn predict_device(&self, output: PredictOutput, missing: Option<f32>, export: &mut ExportArrays<'_>) -> Result<()> {
        self.score_device(output, missing, export)
    }
}

/// Scores `columns` (bound to the model's features) on the GPU.
fn stream_rows(
    forest: &GpuForest,
    columns: &[FeatureColumn],
    n_rows: usize,
    row_base: Option<&[f32]>,
    output: PredictOutput,
) -> Result<Predictions> {
    let nf = forest.n_features as usize;
    let k = forest.n_outputs as usize;
    let n_trees = forest.n_trees as usize;
    let per_row_index = match output {
        PredictOutput::Leaf => n_trees,
        PredictOutput::Class => 1,
        PredictOutput::Value if forest.objective.predicts_classes() => 1,
        _ => 0,
    };
    let leaf = output == PredictOutput::Leaf;
    let mut floats = if per_row_index == 0 { vec![0f32; n_rows * k] } else { Vec::new() };
    let mut indices = vec![0u32; n_rows * per_row_index];
    // A short request (a batch of a streaming query) still goes in two chunks or more, so that
    // filling one overlaps the other's copies and kernels.
    // (`POLARS_GBT_REQUEST_CHUNKS`, `POLARS_GBT_MIN_CHUNK_ROWS` and `POLARS_GBT_CHUNK_ROWS`
    // override the two, the floor and the largest chunk, and `POLARS_GBT_STREAM_SLOTS` the
    // slots, for measuring.)
    let parts = knob::<usize>("POLARS_GBT_REQUEST_CHUNKS").unwrap_or(2).max(1);
    let most = knob::<usize>("POLARS_GBT_CHUNK_ROWS").unwrap_or(CHUNK_ROWS).max(1);
    let floor = knob::<usize>("POLARS_GBT_MIN_CHUNK_ROWS").unwrap_or(MIN_CHUNK_ROWS).clamp(1, most);
    let chunk_rows = n_rows.div_ceil(parts).clamp(floor, most);
    let need = (nf, k, per_row_index, forest.scratch_bytes(most).div_ceil(most), chunk_rows);
    let mut lent = lend(need);
    let have = lent.0.as_ref().map_or((0, 0, 0, 0, 0), |s| s.shape);
    if lent.0.is_none() || !holds(have, need) {
        lent.0 = None; // free the old buffers first
        let shape =
            (need.0.max(have.0), need.1.max(have.1), need.2.max(have.2), need.3.max(have.3), need.4.max(have.4));
        lent.0 = Some(Streamer::new(&forest.rt, shape)?);
    }
    let streamer = lent.0.as_mut().unwrap();
    // Under POLARS_GBT_PROFILE=1: filling the pinned buffers, queueing the copies and kernels,
    // and waiting for slots.
    const FILL: usize = 0;
    const QUEUE: usize = 1;
    const WAIT: usize = 2;
    let mut times = StageTimes::<3>::default();
    let whole = times.start();
    // Collect a finished slot's results into the output.
    let collect = |slot: &mut Slot, floats: &mut Vec<f32>, indices: &mut Vec<u32>, times: &mut StageTimes<3>| {
        let Some((start, rows)) = slot.pending.take() else { return Ok(()) };
        let started = times.start();
        slot.done.synchronize().map_err(device_error)?;
        times.stop(WAIT, started);
        if per_row_index > 0 {
            let src = slot.index_host.as_slice().map_err(device_error)?;
            indices[start * per_row_index..(start + rows) * per_row_index]
                .copy_from_slice(&src[..rows * per_row_index]);
        } else {
            let src = slot.out_host.as_slice().map_err(device_error)?;
            floats[start * k..(start + rows) * k].copy_from_slice(&src[..rows * k]);
        }
        Ok::<(), Error>(())
    };
    for (i, start) in (0..n_rows).step_by(chunk_rows).enumerate() {
        let rows = chunk_rows.min(n_rows - start);
        let n_slots = streamer.slots.len();
        let slot = &mut streamer.slots[i % n_slots];
        collect(slot, &mut floats, &mut indices, &mut times)?;
        let stream = slot.stream.clone();
        let started = times.start();
        // Column-major chunk: feature f's rows at f * rows.
        let x = slot.x_host.as_mut_slice().map_err(device_error)?;
        x[..rows * nf].par_chunks_mut(rows).zip(columns.par_iter()).for_each(|(dst, col)| col.read(start, dst));
        times.stop(FILL, started);
        let started = times.start();
        // Only the chunk's rows travel: the slot may have been made for a longer request's
        // chunks. (A plain slice of pinned memory still copies asynchronously; the slot is
        // not written again before `collect` has waited for its `done` event.)
        let x = slot.x_host.as_slice().map_err(device_error)?;
        stream.memcpy_htod(&x[..rows * nf], &mut slot.x_dev).map_err(device_error)?;
        let base_dev = match row_base {
            Some(b) if !leaf => {
                slot.base_host.as_mut_slice().map_err(device_error)?[..rows * k]
                    .copy_from_slice(&b[start * k..(start + rows) * k]);
                let base = slot.base_host.as_slice().map_err(device_error)?;
                stream.memcpy_htod(&base[..rows * k], &mut slot.base_dev).map_err(device_error)?;
                Some(&slot.base_dev)
            }
            _ => None,
        };
        forest.launch(
            &stream,
            &slot.x_dev,
            rows,
            base_dev,
            &mut slot.out_dev,
            leaf.then_some(&mut slot.index_dev),
            &mut slot.scratch,
        )?;
        if leaf {
            stream.memcpy_dtoh(&slot.index_dev.slice(..rows * n_trees), &mut slot.index_host).map_err(device_error)?;
        } else if per_row_index == 1 {
            forest.finish(&stream, &mut slot.out_dev, rows, Some(&mut slot.index_dev))?;
            stream.memcpy_dtoh(&slot.index_dev.slice(..rows), &mut slot.index_host).map_err(device_error)?;
        } else {
            if output == PredictOutput::Value {
                forest.finish(&stream, &mut slot.out_dev, rows, None)?;
            }
            stream.memcpy_dtoh(&slot.out_dev.slice(..rows * k), &mut slot.out_host).map_err(device_error)?;
        }
        slot.done.record(&stream).map_err(device_error)?;
        slot.pending = Some((start, rows));
        times.stop(QUEUE, started);
    }
    for slot in streamer.slots.iter_mut() {
        collect(slot, &mut floats, &mut indices, &mut times)?;
    }
    if let Some(whole) = whole {
        let [fill, queue, wait] = times.seconds.map(|s| s * 1e3);
        eprintln!(
            "polars-gbt profile: scoring {n_rows} rows from host columns {:.2} ms: filling pinned buffers {fill:.2}, \
             queueing copies and kernels {queue:.2}, waiting for slots {wait:.2}",
            whole.elapsed().as_secs_f64() * 1e3,
        );
    }
    Ok(if per_row_index > 0 {
        Predictions::Index { values: indices, width: if leaf { n_trees } else { 1 } }
    } else {
        Predictions::Float { values: floats, width: k }
    })
}

/// `gather_rows` (kernels/predict.cu): `n` rows of the caller's float32 or float64 array
/// (element (r, f) at `x + (r * row_stride + f * col_stride) * 4 or 8`) into `out`,
/// column-major f32, read as `FeatureColumn::read` reads host columns.
#[repr(C)]
pub struct GatherRowsArgs<'a> {
    pub x: DevPtr<'a, u8>,
    pub row_stride: i64,
    pub col_stride: i64,
    pub n: u32,
    pub n_features: u32,
    pub is_f64: u32,
    pub has_missing: u32,
    pub missing: f32,
    pub out: DevPtrMut<'a, f32>,
}

kernel_args!(GatherRowsArgs);

/// Rows of a caller's device array converted and scored at once, at most, and the most
/// bytes their column-major f32 scratch may take (28 features: 2^20 rows in 112 MiB; 10,000
/// features: 3,355 rows).
const DEVICE_CHUNK_ROWS: usize = 1 << 20;
const DEVICE_CHUNK_BYTES: usize = 128 << 20;

/// Checks that the bytes `[first, end)` of `what` lie in one allocation of device memory that
/// the GPU of `stream` can read: not host memory, not memory CUDA does not know (a pointer
/// from nowhere), not another GPU's, and not past the allocation's end. With this, a kernel
/// never reads or writes outside memory the caller's array owns.
fn check_device_memory(stream: &CudaStream, what: &str, first: u64, end: u64) -> Result<()> {
    use cudarc::driver::sys::{self, CUmemorytype, CUpointer_attribute as A, CUresult};
    let ctx = stream.context();
    ctx.bind_to_thread().map_err(device_error)?;
    fn attribute<T: Default>(attr: A, ptr: u64) -> std::result::Result<T, CUresult> {
        let mut value = T::default();
        // SAFETY: `value` has the size the attribute's documentation gives (u32 for the
        // memory type and the managed flag, i32 for the ordinal, u64 for the range).
        let r = unsafe { sys::cuPointerGetAttribute(&mut value as *mut T as *mut std::ffi::c_void, attr, ptr) };
        match r {
            CUresult::CUDA_SUCCESS => Ok(value),
            e => Err(e),
        }
    }
    let memory_type = attribute::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, first).map_err(|e| {
        Error::data(format!(
            "{what} is not memory CUDA knows (its address {first:#x} gave {e:?}): pass an array in GPU memory \
             (cupy, torch on \"cuda\", JAX on a GPU)"
        ))
    })?;
    if memory_type == CUmemorytype::CU_MEMORYTYPE_HOST as u32 {
        return Err(Error::data(format!(
            "{what} is in host memory (pinned), not on the GPU; score a Polars frame for data on the host"
        )));
    }
    let managed = attribute::<u32>(A::CU_POINTER_ATTRIBUTE_IS_MANAGED, first).unwrap_or(0) != 0;
    if !managed {
        let ordinal = attribute::<i32>(A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, first)
            .map_err(|e| Error::data(format!("{what}: CUDA could not tell its GPU ({e:?})")))?;
        if ordinal as usize != ctx.ordinal() {
            return Err(Error::data(format!(
                "{what} is on GPU {ordinal}, and polars-gbt scores on GPU {}: move the array there \
                 (or make that GPU the first visible one with CUDA_VISIBLE_DEVICES)",
                ctx.ordinal()
            )));
        }
    }
    let start = attribute::<u64>(A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, first)
        .map_err(|e| Error::data(format!("{what}: CUDA could not tell its allocation ({e:?})")))?;
    let size = attribute::<u64>(A::CU_POINTER_ATTRIBUTE_RANGE_SIZE, first)
        .map_err(|e| Error::data(format!("{what}: CUDA could not tell its allocation's size ({e:?})")))?;
    if first < start || end > start.saturating_add(size) {
        return Err(Error::data(format!(
            "{what}'s shape and strides reach bytes {first:#x}..{end:#x}, past its allocation \
             ({start:#x}..{:#x})",
            start.saturating_add(size)
        )));
    }
    Ok(())
}

impl GpuForest {
    /// Queues the conversion of rows `start..start + n` of `rows` into `x` (column-major f32,
    /// as the kernels read it).
    fn gather_rows(
        &self,
        stream: &Arc<CudaStream>,
        rows: &DeviceRows,
        start: usize,
        n: usize,
        missing: Option<f32>,
        x: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let item = rows.dtype.bytes() as i64;
        // The first row's address: the strides may be negative, the span was checked whole.
        let first = (rows.ptr as i64).wrapping_add(start as i64 * rows.row_stride * item) as u64;
        let mut p = Pins::new(stream);
        let args = GatherRowsArgs {
            // SAFETY: `check_device_memory` found every element of `rows` in the caller's
            // allocation on this GPU; the caller keeps it alive until the call returns, which
            // waits for this launch.
            x: unsafe { DevPtr::foreign(first) },
            row_stride: rows.row_stride,
            col_stride: rows.col_stride,
            n: n as u32,
            n_features: self.n_features,
            is_f64: (rows.dtype == DeviceFloat::F64) as u32,
            has_missing: missing.is_some() as u32,
            missing: missing.unwrap_or(0.0),
            out: p.write(x),
        };
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(32) as u32, self.n_features.div_ceil(32), 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the struct mirrors kernels/predict.cu (the layout probe); the kernel reads
        // element (r, f) for r < n, f < n_features, all within the checked span, and writes
        // `x`'s first n * n_features values (it holds DEVICE_CHUNK_ROWS rows of each).
        unsafe { launch(stream, &self.rt.kernels.gather_rows, &args, cfg) }
    }

    /// [`Predictor::predict_device`] for this forest: the rows chunk by chunk through
    /// `gather_rows` into a scratch, then the same kernels as rows from the host, writing
    /// straight into the caller's output.
    fn score_device(&self, output: PredictOutput, missing: Option<f32>, export: &mut ExportArrays<'_>) -> Result<()> {
        let ctx = self.rt.stream.context();
        let stream = ctx.new_stream().map_err(device_error)?;
        let DeviceBinding { rows, out, wait_for } = export(stream.cu_stream() as u64)?;
        let n = rows.rows;
        let nf = self.n_features as usize;
        if rows.cols != nf {
            return Err(Error::data(format!("the array has {} columns; the model has {nf} features", rows.cols)));
        }
        if nf > 65535 * 32 {
            return Err(Error::data(format!("{nf} features are more than device arrays take (2,097,120)")));
        }
        if n == 0 {
            return Ok(());
        }
        let (first, end) =
            rows.byte_span().ok_or_else(|| Error::data("the array's shape and strides overflow its address space"))?;
        check_device_memory(&stream, "the array", first, end)?;
        if rows.ptr % rows.dtype.bytes() as u64 != 0 {
            return Err(Error::data("the array's data is not aligned to its element size"));
        }
        let out_end = out.ptr.checked_add(out.len as u64 * 4).ok_or_else(|| Error::data("the output overflows"))?;
        if out.len > 0 {
            // (None for the leaves of a forest without trees.)
            check_device_memory(&stream, "the output array", out.ptr, out_end)?;
        }
        if out.ptr % 4 != 0 {
            return Err(Error::data("the output array is not aligned to four bytes"));
        }
        // The caller's queued work on its arrays first (CUDA Array Interface's `stream`).
        for handle in wait_for {
            let event = ctx.new_event(None).map_err(device_error)?;
            ctx.bind_to_thread().map_err(device_error)?;
            // SAFETY: the handle is a stream of this context (or 1, 2: CUDA's default streams),
            // as the array's producer states; the event is ours.
            let r = unsafe {
                cudarc::driver::sys::cuEventRecord(event.cu_event(), handle as cudarc::driver::sys::CUstream)
            };
            if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
                return Err(Error::data(format!(
                    "the array's stream {handle:#x} (its __cuda_array_interface__'s) is not a stream of this GPU: {r:?}"
                )));
            }
            stream.wait(&event).map_err(device_error)?;
        }
        let k = self.n_outputs as usize;
        let chunk = knob::<usize>("POLARS_GBT_DEVICE_CHUNK_ROWS")
            .unwrap_or(DEVICE_CHUNK_ROWS.min(DEVICE_CHUNK_BYTES / (nf.max(1) * 4)))
            .clamp(1, n);
        let mut memory = DeviceMemory::default();
        let mut x = memory.zeros::<f32>(&stream, chunk * nf)?;
        let shap = match output {
            PredictOutput::Contrib | PredictOutput::Interaction => Some(self.shap_paths()?),
            _ => None,
        };
        let classes =
            output == PredictOutput::Class || (output == PredictOutput::Value && self.objective.predicts_classes());
        let (mut scratch, mut margins) = match shap {
            Some(_) => (memory.zeros::<u8>(&stream, 1)?, memory.zeros::<f32>(&stream, 1)?),
            None => (
                memory.zeros::<u8>(&stream, self.scratch_bytes(chunk).max(1))?,
                // Margins of class and leaf outputs (the leaf kernels write none).
                memory.zeros::<f32>(&stream, if classes || output == PredictOutput::Leaf { chunk * k } else { 1 })?,
            ),
        };
        let raw = stream.cu_stream();
        let mut queue = || -> Result<()> {
            for start in (0..n).step_by(chunk) {
                let rows_c = chunk.min(n - start);
                self.gather_rows(&stream, &rows, start, rows_c, missing, &mut x)?;
                // SAFETY (every `foreign` below): the output was checked to lie in the caller's
                // allocation on this GPU, `out.len` values of four bytes, and `Model::predict_device`
                // checked that it holds the rows' values of this output; each chunk writes its own
                // rows' values only, and this call waits for them before it returns.
                match (&shap, output) {
                    (Some(paths), _) => {
                        let interactions = output == PredictOutput::Interaction;
                        let m = nf + 1;
                        let block = if interactions { m * m } else { m };
                        let width = k * block;
                        let at = out.ptr + (start * width * 4) as u64;
                        // SAFETY: as above; `rows_c * width` values from `at`.
                        let r = unsafe { cudarc::driver::sys::cuMemsetD32Async(at, 0, rows_c * width, raw) };
                        if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
                            return Err(Error::Device(format!("CUDA error: zeroing the output: {r:?}")));
                        }
                        paths
                            .launch_rows(&stream, &x, rows_c, interactions, width, unsafe { DevPtrMut::foreign(at) })?;
                        // The bias elements, one column of the row-major output per output.
                        let corner = if interactions { nf * m + nf } else { nf };
                        for (o, bias) in paths.bias_values(&self.base_host).into_iter().enumerate() {
                            let column = at + ((o * block + corner) * 4) as u64;
                            // SAFETY: `rows_c` values `width * 4` bytes apart from `column`, all
                            // within this chunk's rows.
                            let r = unsafe {
                                cudarc::driver::sys::cuMemsetD2D32Async(
                                    column,
                                    width * 4,
                                    bias.to_bits(),
                                    1,
                                    rows_c,
                                    raw,
                                )
                            };
                            if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
                                return Err(Error::Device(format!("CUDA error: writing the SHAP bias: {r:?}")));
                            }
                        }
                    }
                    (None, PredictOutput::Leaf) => {
                        let at = out.ptr + (start * self.n_trees as usize * 4) as u64;
                        let mut p = Pins::new(&stream);
                        let margin = p.write(&mut margins);
                        let leaf = unsafe { DevPtrMut::foreign(at) };
                        self.launch_to(&stream, &x, rows_c, DevPtr::NULL, margin, leaf, &mut scratch)?;
                    }
                    (None, _) if classes => {
                        let at = out.ptr + (start * 4) as u64;
                        {
                            let mut p = Pins::new(&stream);
                            let margin = p.write(&mut margins);
                            self.launch_to(&stream, &x, rows_c, DevPtr::NULL, margin, DevPtrMut::NULL, &mut scratch)?;
                        }
                        let mut p = Pins::new(&stream);
                        let margin = p.write(&mut margins);
                        self.finish_to(&stream, margin, rows_c, unsafe { DevPtrMut::foreign(at) })?;
                    }
                    (None, _) => {
                        let at = out.ptr + (start * k * 4) as u64;
                        let margin = unsafe { DevPtrMut::foreign(at) };
                        self.launch_to(&stream, &x, rows_c, DevPtr::NULL, margin, DevPtrMut::NULL, &mut scratch)?;
                        if output == PredictOutput::Value {
                            self.finish_to(&stream, unsafe { DevPtrMut::foreign(at) }, rows_c, DevPtrMut::NULL)?;
                        }
                    }
                }
            }
            Ok(())
        };
        // Also after an error: nothing queued may outlive the scratch or the caller's arrays.
        let queued = queue();
        let done = stream.synchronize().map_err(device_error);
        queued.and(done)
    }
}
