//! A model's forest onto the device ([`GpuForest::new`]): its layout built on the host
//! (`forest.rs`), quantised when every feature's thresholds fit 8 or 16-bit bins, the launch
//! shape chosen for it (threads per block, shared memory for rows and tiles of trees), and its
//! buffers uploaded once.

use std::sync::{Arc, Mutex};

use super::{GpuForest, Quantised, ROWS_PER_THREAD};
use crate::backend::cuda::forest::{ForestLayout, HostForest, QuantisedForest};
use crate::backend::cuda::layout::{LinkedNode, PredNode, PredTile};
use crate::backend::cuda::runtime::{runtime, Runtime};
use crate::backend::cuda::{device_error, knob, DeviceMemory};
use crate::error::{Error, Result};
use crate::prediction::ForestSpec;

/// Threads per block (each scores ROWS_PER_THREAD rows); `POLARS_GBT_PREDICT_THREADS` overrides.
const THREADS: u32 = 256;

/// Thresholds the binning kernel may stage per block: 48 KiB, what any device gives a block
/// without opting in.
const STAGED_CUTS_MAX: u32 = 12 * 1024;

/// How a forest's kernels are launched: the tiles of trees staged in shared memory, threads
/// per block, and the dynamic shared memory, with the rows staged in it or not.
struct LaunchShape {
    tiles: Vec<PredTile>,
    tile_nodes: usize,
    threads: u32,
    shared_bytes: usize,
    shared_rows: bool,
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
        let layout = HostForest::choose(spec.trees);
        let host = HostForest::build(spec.trees, spec.n_outputs, layout);
        let n_features = spec.n_features();
        let quantised = match layout {
            ForestLayout::Complete if allow_quantised => QuantisedForest::new(&host, &spec.n_categories),
            _ => None,
        };
        // A quantised forest whose rows do not fit in shared memory is scored on floats.
        let planned = quantised.and_then(|q| quantised_shape(&rt, &host, &q, n_features).map(|shape| (shape, q)));
        let (shape, quantised) = match planned {
            Some((shape, q)) => (shape, Some(q)),
            None => (float_shape(&rt, &host, layout, n_features), None),
        };
        let max = rt.max_shared_per_block as usize;
        if shape.shared_bytes > max {
            return Err(Error::Device(format!(
                "a tile of trees needs {} bytes of shared memory, more than the GPU's {max}",
                shape.shared_bytes
            )));
        }
        let forest = Self::upload(rt, spec, &host, layout, quantised.as_ref(), shape)?;
        if crate::profile::on() {
            eprintln!("polars-gbt: GPU forest: {}", forest.description);
        }
        Ok(forest)
    }

    /// The forest of `spec`, laid out as `host` (and `quantised`), on the device with its
    /// launch shape.
    fn upload(
        rt: Arc<Runtime>,
        spec: &ForestSpec,
        host: &HostForest,
        layout: ForestLayout,
        quantised: Option<&QuantisedForest>,
        shape: LaunchShape,
    ) -> Result<Self> {
        let stream = &rt.stream;
        let mut memory = DeviceMemory::default();
        let flat_sets: Vec<u32> = host.sets.iter().flatten().copied().collect();
        let nonempty = |v: &[u32]| if v.is_empty() { vec![0] } else { v.to_vec() };
        let no_node = [PredNode { word: 0, threshold: 0.0 }];
        let no_linked = [LinkedNode { word: 0, threshold: 0.0, left: 0, value: 0.0 }];
        let forest = GpuForest {
            layout,
            has_categorical: host.has_categorical,
            n_trees: spec.trees.len() as u32,
            n_outputs: spec.n_outputs as u32,
            n_features: spec.n_features() as u32,
            objective: spec.objective,
            nodes: memory.upload(stream, if host.nodes.is_empty() { &no_node } else { &host.nodes })?,
            leaf_values: memory.upload(stream, if host.leaf_values.is_empty() { &[0.0] } else { &host.leaf_values })?,
            leaf_ids: memory.upload(stream, &nonempty(&host.leaf_ids))?,
            linked: memory.upload(stream, if host.linked.is_empty() { &no_linked } else { &host.linked })?,
            linked_ids: memory.upload(stream, &nonempty(&host.linked_ids))?,
            trees: memory.upload(stream, &host.trees)?,
            n_tiles: shape.tiles.len() as u32,
            tiles: memory.upload(stream, &shape.tiles)?,
            tile_nodes: shape.tile_nodes as u32,
            sets: memory.upload(stream, &flat_sets)?,
            words: memory.upload(stream, &host.words)?,
            base: memory.upload(stream, spec.base_margin)?,
            quantised: quantised.map(|q| Quantised::upload(stream, &mut memory, q)).transpose()?,
            threads: shape.threads,
            shared_bytes: shape.shared_bytes as u32,
            shared_rows: shape.shared_rows,
            description: describe(layout, quantised, spec.trees.len(), host.max_depth, memory.allocated, &shape),
            rt: rt.clone(),
            model_trees: spec.trees.to_vec(),
            base_host: spec.base_margin.to_vec(),
            shap: Mutex::new(None),
        };
        stream.synchronize().map_err(device_error)?;
        Ok(forest)
    }
}

impl Quantised {
    /// `q`'s nodes and thresholds on the device.
    fn upload(
        stream: &Arc<cudarc::driver::CudaStream>,
        memory: &mut DeviceMemory,
        q: &QuantisedForest,
    ) -> Result<Self> {
        Ok(Quantised {
            nodes: memory.upload(stream, &q.nodes)?,
            cuts: memory.upload(stream, if q.cuts.is_empty() { &[0.0] } else { &q.cuts })?,
            cut_offsets: memory.upload(stream, &q.cut_offsets)?,
            n_categories: memory.upload(stream, &q.n_categories)?,
            staged_cuts: q.cut_offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0).min(STAGED_CUTS_MAX),
            wide: q.wide,
        })
    }
}

/// The shape of a quantised forest's launches, if its rows fit in shared memory: rows of
/// ROWS_PER_THREAD * threads bins per feature (stride + 4) and two tile buffers (8 KiB of nodes
/// each by default, `POLARS_GBT_PREDICT_TILE_KB`), with the block size that keeps the most
/// warps resident on an SM (more warps fill the cycles in which none is ready to issue:
/// docs/gpu-notes.md).
fn quantised_shape(rt: &Runtime, host: &HostForest, q: &QuantisedForest, n_features: usize) -> Option<LaunchShape> {
    let max = rt.max_shared_per_block as usize;
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
    let (_, threads, shared_bytes) = best?;
    Some(LaunchShape { tiles, tile_nodes: nodes, threads, shared_bytes, shared_rows: true })
}

/// The shape of a forest's launches on floats: every feature of ROWS_PER_THREAD rows per
/// thread in shared memory, with fewer threads per block when that does not fit beside a tile
/// of the largest tree, else read from global memory; the rest of the shared memory holds one
/// tile of trees.
fn float_shape(rt: &Runtime, host: &HostForest, layout: ForestLayout, n_features: usize) -> LaunchShape {
    let max = rt.max_shared_per_block as usize;
    let largest_tree = match layout {
        ForestLayout::Complete => {
            host.trees.iter().map(|t| (8usize << (t.depth + 1)) + (4usize << t.depth)).max().unwrap_or(0)
        }
        ForestLayout::Linked => 0,
    };
    let rows_bytes = |threads: u32| (n_features * ROWS_PER_THREAD * threads as usize * 4).next_multiple_of(16);
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
    LaunchShape { tiles, tile_nodes: nodes, threads, shared_bytes: rows_bytes + nodes * 8 + leaves * 4, shared_rows }
}

/// One line for logs: the forest's layout, its size on the device (`bytes`), and its launch
/// shape.
fn describe(
    layout: ForestLayout,
    quantised: Option<&QuantisedForest>,
    n_trees: usize,
    max_depth: usize,
    bytes: usize,
    shape: &LaunchShape,
) -> String {
    format!(
        "{}, {} trees of depth up to {}, {:.1} MiB on the GPU; rows {} shared memory, {} threads per block of {} rows each",
        match (layout, quantised) {
            (ForestLayout::Complete, Some(q)) if q.wide => "complete-tree layout on u16 bins",
            (ForestLayout::Complete, Some(_)) => "complete-tree layout on u8 bins",
            (ForestLayout::Complete, None) => "complete-tree layout on floats",
            (ForestLayout::Linked, _) => "linked (breadth-first) layout on floats",
        },
        n_trees,
        max_depth,
        bytes as f64 / (1 << 20) as f64,
        if shape.shared_rows { "in" } else { "outside" },
        shape.threads,
        ROWS_PER_THREAD,
    )
}
