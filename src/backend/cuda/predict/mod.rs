//! Scoring on the GPU: a model's forest uploaded once ([`GpuForest`], `upload.rs`), and the
//! launches that score rows with it. Rows come from the host's Arrow columns, streamed through
//! pinned slots (`host_rows.rs`), or from another library's arrays already on the GPU
//! (`device_rows.rs`).

mod device_rows;
mod host_rows;
mod upload;

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};

use super::forest::ForestLayout;
use super::launch::{kernel_args, launch, DevPtr, DevPtrMut, Pins};
use super::layout::{LinkedNode, PredNode, PredTile, PredTree};
use super::runtime::Runtime;
use super::shap::ShapPaths;
use crate::backend::Predictor;
use crate::config::Objective;
use crate::data::FeatureColumn;
use crate::error::{Error, Result};
use crate::objective::Link;
use crate::prediction::{ExportArrays, PredictOutput, Predictions};
use crate::tree::Tree;

pub use device_rows::GatherRowsArgs;

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
    /// feature has, up to `STAGED_CUTS_MAX` (`upload.rs`; features with more are searched in
    /// global memory).
    staged_cuts: u32,
    /// u16 bins, else u8.
    wide: bool,
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
    fn scores(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        output: PredictOutput,
    ) -> Result<Predictions> {
        host_rows::stream_rows(self, columns, n_rows, base_margin, output)
    }

    /// The forest's SHAP paths (uploaded on the first request) over the streamed rows.
    fn contributions(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        interactions: bool,
    ) -> Result<Predictions> {
        let values = self.shap_paths()?.values(columns, n_rows, base_margin, &self.base_host, interactions)?;
        let m = self.n_features as usize + 1;
        let width = self.n_outputs as usize * if interactions { m * m } else { m };
        Ok(Predictions::Float { values, width })
    }

    /// Rows in the caller's GPU memory, scored there (see [`GpuForest::score_device`]).
    fn predict_device(&self, output: PredictOutput, missing: Option<f32>, export: &mut ExportArrays<'_>) -> Result<()> {
        self.score_device(output, missing, export)
    }
}
