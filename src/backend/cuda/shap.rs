//! SHAP values on the GPU (`kernels/shap.cu`): exact TreeSHAP, path by path, after the idea of
//! GPUTreeShap (Mitchell, Frank, Wang and Coleman, 2022).
//!
//! [`ShapLayout`] is built on the host once per model: every root-to-leaf path becomes a list
//! of elements, one per distinct feature it splits on (repeated splits merged: their cover
//! shares multiplied, their tests all required), behind a bias element; the paths are packed
//! into warps of 32 lanes, best fit, longest first. [`ShapPaths`] is that layout on the device,
//! and [`ShapPaths::values`] streams rows through it. The bias (the row's base margin plus each
//! tree's cover-weighted mean) is added on the host, in the CPU's order, so it equals the CPU's
//! bias exactly; the rest equals the CPU's values up to float rounding.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use rayon::prelude::*;

use super::forest::split_test;
use super::launch::{kernel_args, launch, DevPtr, DevPtrMut, Pins};
use super::layout::{ShapElement, ShapSplit};
use super::runtime::Runtime;
use super::{device_error, knob, DeviceMemory};
use crate::data::FeatureColumn;
use crate::error::{Error, Result};
use crate::tree::shap::{cover_share, expected_value};
use crate::tree::Tree;

/// The feature of a bias element or a padding lane.
pub const NO_FEATURE: u32 = u32::MAX;
/// In a split's word: the path takes the left child.
pub const TAKES_LEFT: u32 = 1 << 29;
/// Lanes of a warp: the longest path has one bias element and 31 features.
const LANES: usize = 32;
/// Threads per block of the SHAP kernels.
const THREADS: u32 = 256;
/// Host and device memory one streamed chunk of rows may take (inputs and values).
const CHUNK_BYTES: usize = 512 << 20;

/// `shap_contrib_shared`, `shap_contrib_global`, `shap_interactions` (`ShapArgs` in
/// kernels/shap.cu): `n` rows of `x` column-major through the warps of paths
/// `[blockIdx.y * bins_per_group, ...)`, `out_width` values a row into `out`.
#[repr(C)]
pub struct ShapArgs<'a> {
    pub x: DevPtr<'a, f32>,
    pub n: u32,
    pub elements: DevPtr<'a, ShapElement>,
    pub n_bins: u32,
    pub bins_per_group: u32,
    pub more: DevPtr<'a, ShapSplit>,
    /// (first word, words) pairs: `uint2` on the CUDA side.
    pub sets: DevPtr<'a, u32>,
    pub words: DevPtr<'a, u32>,
    pub n_features: u32,
    pub out_width: u32,
    pub out: DevPtrMut<'a, f32>,
    pub tile_rows: u32,
    pub staged: u32,
}

kernel_args!(ShapArgs);

/// The split tests the GPU layout holds at most, summed over every root-to-leaf path of a
/// forest (8 bytes each, and the paths' copies on the host): a chain of depth d holds d²/2, so
/// this admits chains of about 5,000 and refuses deeper ones with an error, before any is built.
pub const MAX_PATH_TESTS: usize = 1 << 24;

/// The split tests on all of a tree's root-to-leaf paths: the sum of its leaves' depths.
fn path_tests(tree: &Tree) -> usize {
    tree.leaf_depths().sum()
}

/// One feature of a path, while the path is walked.
#[derive(Clone)]
struct OpenFeature {
    feature: u32,
    zero: f64,
    splits: Vec<ShapSplit>,
}

/// A root-to-leaf path: its features (in the order the path first meets them) and its leaf.
struct Path {
    features: Vec<OpenFeature>,
    value: f32,
    output: u32,
}

/// A forest's paths packed into warps, on the host.
#[derive(Debug, Default)]
pub struct ShapLayout {
    /// `LANES` per warp.
    pub elements: Vec<ShapElement>,
    /// The second and later splits of an element on its feature.
    pub more: Vec<ShapSplit>,
    /// Categorical sets: (first word, words) into `words`.
    pub sets: Vec<[u32; 2]>,
    pub words: Vec<u32>,
    /// Per output: the sum of its trees' expected values, in model order (the CPU's sum).
    pub bias: Vec<f64>,
}

impl ShapLayout {
    /// The paths of `trees` (tree `t` adds to output `t % n_outputs`). A path of more than 31
    /// distinct features does not fit a warp: an error that says so.
    pub fn build(trees: &[Tree], n_outputs: usize) -> Result<Self> {
        let mut layout = ShapLayout { bias: vec![0.0; n_outputs], ..Default::default() };
        let mut paths = Vec::new();
        let mut tests = 0usize;
        for (t, tree) in trees.iter().enumerate() {
            // Every path holds each split test above its leaf: checked before any is built.
            tests += path_tests(tree);
            if tests > MAX_PATH_TESTS {
                // The model's trees are too deep for this layout: a ModelError, as for any
                // model a scorer cannot take, saying where to score it instead.
                return Err(Error::model(format!(
                    "tree {t} is {} deep: SHAP values on the GPU lay out every root-to-leaf path, at most \
                     {MAX_PATH_TESTS} split tests in all, and the paths up to this tree hold {tests}; \
                     predict with device=\"cpu\"",
                    tree.depth()
                )));
            }
            layout.bias[t % n_outputs] += expected_value(tree);
            let output = (t % n_outputs) as u32;
            layout.walk(tree, output, &mut paths);
        }
        if let Some(long) = paths.iter().find(|p| p.features.len() >= LANES) {
            return Err(Error::param(
                "output",
                format!(
                    "SHAP values on the GPU take paths of at most {} distinct features, and a path of this model splits on {}; \
                     predict with device=\"cpu\"",
                    LANES - 1,
                    long.features.len()
                ),
            ));
        }
        layout.pack(&paths);
        if layout.sets.is_empty() {
            // Never an empty upload.
            layout.sets.push([0, 0]);
            layout.words.push(0);
        }
        if layout.more.is_empty() {
            layout.more.push(ShapSplit::default());
        }
        Ok(layout)
    }

    /// Warps of paths.
    pub fn n_bins(&self) -> usize {
        self.elements.len() / LANES
    }

    /// Walks `tree` depth first with the features of the path so far open; a leaf ends a
    /// path (a tree that is one leaf has none: it adds only to the bias). An explicit stack,
    /// not recursion, so any depth walks; each frame holds how to undo its entry.
    fn walk(&mut self, tree: &Tree, output: u32, paths: &mut Vec<Path>) {
        /// How a child's entry changed the open features.
        enum Undo {
            /// The child's split opened a new feature.
            Close,
            /// The child's split joined feature `i`, whose share was `zero`.
            Restore { i: usize, zero: f64 },
        }
        /// A node on the walk: its split's test, the children entered so far, its entry's undo.
        struct Frame {
            node: u32,
            test: (u32, f32),
            entered: u8,
            undo: Option<Undo>,
        }
        let mut open: Vec<OpenFeature> = Vec::new();
        let mut frames = vec![Frame { node: 0, test: (0, 0.0), entered: 0, undo: None }];
        while let Some(top) = frames.last_mut() {
            let n = top.node as usize;
            let done = tree.is_leaf(top.node) || top.entered == 2;
            if done {
                if tree.is_leaf(top.node) && !open.is_empty() {
                    paths.push(Path { features: open.clone(), value: tree.value[n], output });
                }
                match frames.pop().and_then(|f| f.undo) {
                    Some(Undo::Close) => {
                        open.pop();
                    }
                    Some(Undo::Restore { i, zero }) => {
                        open[i].splits.pop();
                        open[i].zero = zero;
                    }
                    None => {}
                }
                continue;
            }
            if top.entered == 0 {
                top.test = split_test(tree, n, &mut self.sets, &mut self.words);
            }
            let (word, threshold) = top.test;
            let (child, takes_left) = if top.entered == 0 { (tree.left[n], true) } else { (tree.right[n], false) };
            top.entered += 1;
            let split = ShapSplit { word: word | if takes_left { TAKES_LEFT } else { 0 }, threshold };
            let share = cover_share(tree, top.node, child);
            let feature = tree.feature[n];
            let undo = match open.iter().position(|o| o.feature == feature) {
                Some(i) => {
                    let zero = open[i].zero;
                    open[i].zero *= share;
                    open[i].splits.push(split);
                    Undo::Restore { i, zero }
                }
                None => {
                    open.push(OpenFeature { feature, zero: share, splits: vec![split] });
                    Undo::Close
                }
            };
            frames.push(Frame { node: child, test: (0, 0.0), entered: 0, undo: Some(undo) });
        }
    }

    /// Packs the paths into warps: longest first, each into the warp it fills best.
    fn pack(&mut self, paths: &[Path]) {
        let mut order: Vec<usize> = (0..paths.len()).collect();
        order.sort_by_key(|&p| std::cmp::Reverse(paths[p].features.len()));
        let mut bins: Vec<Vec<usize>> = Vec::new();
        // Warps by the lanes they have left (1..LANES).
        let mut with_room: Vec<Vec<usize>> = vec![Vec::new(); LANES];
        for p in order {
            let len = paths[p].features.len() + 1;
            let (bin, room) = match (len..LANES).find(|&r| !with_room[r].is_empty()) {
                Some(r) => (with_room[r].pop().unwrap(), r),
                None => {
                    bins.push(Vec::new());
                    (bins.len() - 1, LANES)
                }
            };
            bins[bin].push(p);
            if room > len {
                with_room[room - len].push(bin);
            }
        }
        for bin in &bins {
            let mut lane = 0;
            for &p in bin {
                let path = &paths[p];
                let shape = lane as u32 | ((path.features.len() as u32 + 1) << 8);
                let element = |feature, zero: f64| ShapElement {
                    feature,
                    zero: zero as f32,
                    value: path.value,
                    output: path.output,
                    shape,
                    ..Default::default()
                };
                self.elements.push(element(NO_FEATURE, 1.0));
                for f in &path.features {
                    let mut e = element(f.feature, f.zero);
                    e.word = f.splits[0].word;
                    e.threshold = f.splits[0].threshold;
                    e.more_begin = self.more.len() as u32;
                    self.more.extend_from_slice(&f.splits[1..]);
                    e.more_end = self.more.len() as u32;
                    self.elements.push(e);
                }
                lane += path.features.len() + 1;
            }
            for pad in lane..LANES {
                self.elements.push(ShapElement { feature: NO_FEATURE, shape: pad as u32, ..Default::default() });
            }
        }
    }
}

/// How a launch uses shared memory: rows per tile, whether a tile's SHAP values gather there
/// (else they go to global memory at once) and whether its rows are staged there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TilePlan {
    tile_rows: u32,
    shared_values: bool,
    staged: bool,
    shared_bytes: u32,
}

impl TilePlan {
    /// The first plan that fits, values in shared memory before staged rows, more rows before
    /// fewer; first in 24 KiB (so that several blocks share an SM), then in all of `budget`.
    /// `width` is 0 when the values cannot gather in shared memory (interactions).
    /// `POLARS_GBT_SHAP_MODE=global` keeps everything in global memory (for tests).
    fn choose(budget: u32, width: usize, nf: usize) -> TilePlan {
        let (value_bytes, row_bytes) = (width as u32 * 4, nf as u32 * 4);
        let forced = knob::<u32>("POLARS_GBT_SHAP_TILE_ROWS");
        if std::env::var("POLARS_GBT_SHAP_MODE").is_ok_and(|m| m == "global") {
            let tile_rows = forced.unwrap_or(32);
            return TilePlan { tile_rows, shared_values: false, staged: false, shared_bytes: 0 };
        }
        for limit in [budget.min(24 << 10), budget] {
            for (shared_values, staged) in [(true, true), (true, false), (false, true)] {
                if shared_values && width == 0 {
                    continue;
                }
                for tile_rows in forced.map_or(vec![64, 32, 16, 8], |t| vec![t]) {
                    let bytes = tile_rows * (shared_values as u32 * value_bytes + staged as u32 * row_bytes);
                    if bytes <= limit {
                        return TilePlan { tile_rows, shared_values, staged, shared_bytes: bytes };
                    }
                }
            }
        }
        TilePlan { tile_rows: forced.unwrap_or(32), shared_values: false, staged: false, shared_bytes: 0 }
    }
}

/// A model's SHAP paths on the device.
pub struct ShapPaths {
    rt: Arc<Runtime>,
    elements: CudaSlice<ShapElement>,
    more: CudaSlice<ShapSplit>,
    sets: CudaSlice<u32>,
    words: CudaSlice<u32>,
    n_bins: u32,
    bias: Vec<f64>,
    n_features: usize,
}

impl ShapPaths {
    pub fn new(rt: &Arc<Runtime>, trees: &[Tree], n_outputs: usize, n_features: usize) -> Result<Self> {
        let layout = ShapLayout::build(trees, n_outputs)?;
        let stream = &rt.stream;
        let mut memory = DeviceMemory::default();
        let flat_sets: Vec<u32> = layout.sets.iter().flatten().copied().collect();
        let n_bins = layout.n_bins() as u32;
        let elements = if layout.elements.is_empty() { vec![ShapElement::default()] } else { layout.elements };
        let paths = ShapPaths {
            rt: rt.clone(),
            elements: memory.upload(stream, &elements)?,
            more: memory.upload(stream, &layout.more)?,
            sets: memory.upload(stream, &flat_sets)?,
            words: memory.upload(stream, &layout.words)?,
            n_bins,
            bias: layout.bias,
            n_features,
        };
        stream.synchronize().map_err(device_error)?;
        Ok(paths)
    }

    /// SHAP values (or, with `interactions`, SHAP interaction values) of `n_rows` rows of
    /// `columns`, in the CPU predictor's layout; the bias from `base_margin` (row-major, one
    /// per output) or else the model's `base`.
    pub fn values(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        base_margin: Option<&[f32]>,
        base: &[f32],
        interactions: bool,
    ) -> Result<Vec<f32>> {
        let (nf, k) = (self.n_features, self.bias.len());
        let m = nf + 1;
        let block = if interactions { m * m } else { m };
        let width = k * block;
        let mut out = vec![0f32; n_rows * width];
        if n_rows > 0 && self.n_bins > 0 {
            self.stream_rows(columns, n_rows, interactions, width, &mut out)?;
        }
        // The bias: the row's margin and then each tree's expected value, as the CPU sums it.
        let corner = if interactions { nf * m + nf } else { nf };
        out.par_chunks_mut(width.max(1)).enumerate().for_each(|(r, row)| {
            for o in 0..k {
                let start = base_margin.map_or(base[o], |b| b[r * k + o]);
                row[o * block + corner] = (self.bias[o] + start as f64) as f32;
            }
        });
        Ok(out)
    }

    fn stream_rows(
        &self,
        columns: &[FeatureColumn],
        n_rows: usize,
        interactions: bool,
        width: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let nf = self.n_features;
        let rt = &self.rt;
        let stream = rt.stream.context().new_stream().map_err(device_error)?;
        let chunk =
            knob::<usize>("POLARS_GBT_SHAP_CHUNK_ROWS").unwrap_or(CHUNK_BYTES / ((width + nf) * 4)).clamp(1, n_rows);
        let mut memory = DeviceMemory::default();
        let mut x_dev = memory.zeros::<f32>(&stream, chunk * nf)?;
        let mut out_dev = memory.zeros::<f32>(&stream, chunk * width)?;
        let mut x = vec![0f32; chunk * nf];
        for start in (0..n_rows).step_by(chunk) {
            let rows = chunk.min(n_rows - start);
            x[..rows * nf].par_chunks_mut(rows).zip(columns.par_iter()).for_each(|(dst, col)| col.read(start, dst));
            stream.memcpy_htod(&x[..rows * nf], &mut x_dev.slice_mut(..rows * nf)).map_err(device_error)?;
            stream.memset_zeros(&mut out_dev.slice_mut(..rows * width)).map_err(device_error)?;
            let mut p = Pins::new(&stream);
            let values = p.write(&mut out_dev);
            self.launch_rows(&stream, &x_dev, rows, interactions, width, values)?;
            drop(p);
            stream
                .memcpy_dtoh(&out_dev.slice(..rows * width), &mut out[start * width..(start + rows) * width])
                .map_err(device_error)?;
        }
        stream.synchronize().map_err(device_error)?;
        Ok(())
    }

    /// Whether the forest has paths at all (a forest of single leaves has only its bias).
    pub fn has_paths(&self) -> bool {
        self.n_bins > 0
    }

    /// Per output, the bias element of every row without its own base margin: the sum of the
    /// trees' expected values after `base[o]`, as [`ShapPaths::values`] writes it.
    pub fn bias_values(&self, base: &[f32]) -> Vec<f32> {
        self.bias.iter().zip(base).map(|(b, &start)| (b + start as f64) as f32).collect()
    }

    /// Queues the SHAP values (`interactions`: interaction values) of `rows` rows of `x`
    /// (column-major) on `stream`, added into `out` (`rows * width` values, zeroed by the
    /// caller; the bias elements are the caller's to write).
    pub fn launch_rows(
        &self,
        stream: &Arc<cudarc::driver::CudaStream>,
        x_dev: &CudaSlice<f32>,
        rows: usize,
        interactions: bool,
        width: usize,
        out: DevPtrMut<'_, f32>,
    ) -> Result<()> {
        let rt = &self.rt;
        let nf = self.n_features;
        if rows == 0 || self.n_bins == 0 {
            return Ok(());
        }
        let (kernel, plan) = if interactions {
            (&rt.kernels.shap_interactions, TilePlan::choose(rt.shap_shared_budget, 0, nf))
        } else {
            let plan = TilePlan::choose(rt.shap_shared_budget, width, nf);
            let kernel =
                if plan.shared_values { &rt.kernels.shap_contrib_shared } else { &rt.kernels.shap_contrib_global };
            (kernel, plan)
        };
        let TilePlan { tile_rows, staged, shared_bytes, .. } = plan;
        let staged = staged as u32;
        let n_bins = self.n_bins;
        let (nf32, width32) = (nf as u32, width as u32);
        // Blocks: tiles of rows, times groups of warps of paths when there are too few
        // tiles to fill the GPU (each group adds its tile's values to global memory).
        let tiles = rows.div_ceil(tile_rows as usize) as u32;
        let target = rt.sm_count * knob::<u32>("POLARS_GBT_SHAP_BLOCKS_PER_SM").unwrap_or(8);
        let groups = (target / tiles).clamp(1, n_bins.div_ceil(THREADS / 32).max(1));
        let bins_per_group = n_bins.div_ceil(groups);
        let groups = n_bins.div_ceil(bins_per_group);
        let cfg = LaunchConfig {
            grid_dim: (tiles.min(1 << 30), groups, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: shared_bytes,
        };
        let mut p = Pins::new(stream);
        let args = ShapArgs {
            x: p.read(x_dev),
            n: rows as u32,
            elements: p.read(&self.elements),
            n_bins,
            bins_per_group,
            more: p.read(&self.more),
            sets: p.read(&self.sets),
            words: p.read(&self.words),
            n_features: nf32,
            out_width: width32,
            out,
            tile_rows,
            staged,
        };
        // SAFETY: `x_dev` holds `rows` rows of every feature column-major and `out`
        // `rows * width` values; the elements index `more`, `sets` and `words` as built by
        // ShapLayout, and their features are below `nf`; the shared memory holds a tile.
        unsafe { launch(stream, kernel, &args, cfg) }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::shap::TreeShap;
    use crate::backend::cuda::forest::goes_left;
    use crate::random::Rng;
    use crate::tree::model::SplitSpec;

    /// A random tree over `nf` features: uneven covers, missing directions, category sets on
    /// feature 0, and features split again below themselves.
    fn random_tree(rng: &mut Rng, nf: u32, splits: usize) -> Tree {
        let mut t = Tree::leaf(0.0, 1000.0);
        let mut leaves = vec![0u32];
        for _ in 0..splits {
            let node = leaves.swap_remove(rng.next_u64() as usize % leaves.len());
            let feature = (rng.next_u64() % nf as u64) as u32;
            let cats: Vec<u32> =
                if feature == 0 { (0..6).filter(|_| rng.next_u64().is_multiple_of(2)).collect() } else { vec![] };
            let spec = SplitSpec {
                feature,
                threshold: (rng.next_u64() % 20) as f32 / 10.0 - 1.0,
                split_bin: 0,
                default_left: rng.next_u64().is_multiple_of(2),
                left_categories: &cats,
                gain: 1.0,
            };
            let cover = t.cover[node as usize];
            let share = 0.1 + (rng.next_u64() % 80) as f32 / 100.0;
            let value = |rng: &mut Rng| (rng.next_u64() % 200) as f32 / 100.0 - 1.0;
            let (l, r) = t.split(node, &spec, (value(rng), cover * share), (value(rng), cover * (1.0 - share)));
            leaves.extend([l, r]);
        }
        t
    }

    fn follows(layout: &ShapLayout, s: &ShapSplit, x: f32) -> bool {
        goes_left(s.word, s.threshold, x, &layout.sets, &layout.words) == (s.word & TAKES_LEFT != 0)
    }

    /// The kernel's arithmetic, in f64, one path at a time as the lanes hold them.
    fn emulate(layout: &ShapLayout, row: &[f32], n_outputs: usize) -> Vec<f64> {
        let m = row.len() + 1;
        let mut phi = vec![0f64; n_outputs * m];
        for (o, b) in layout.bias.iter().enumerate() {
            phi[o * m + row.len()] = *b;
        }
        for warp in layout.elements.chunks(LANES) {
            let mut lane = 0;
            while lane < LANES {
                let len = (warp[lane].shape >> 8 & 0xff) as usize;
                if len == 0 {
                    break; // padding to the end of the warp
                }
                assert_eq!(warp[lane].shape & 0xff, lane as u32);
                let path = &warp[lane..lane + len];
                assert_eq!(path[0].feature, NO_FEATURE);
                let one: Vec<f64> = path
                    .iter()
                    .map(|e| {
                        if e.feature == NO_FEATURE {
                            return 1.0;
                        }
                        let x = row[e.feature as usize];
                        let first = ShapSplit { word: e.word, threshold: e.threshold };
                        let more = &layout.more[e.more_begin as usize..e.more_end as usize];
                        (std::iter::once(&first).chain(more).all(|s| follows(layout, s, x))) as u8 as f64
                    })
                    .collect();
                let zero: Vec<f64> = path.iter().map(|e| e.zero as f64).collect();
                let mut w = vec![0f64; len];
                w[0] = 1.0;
                for i in 1..len {
                    for j in (0..i).rev() {
                        w[j + 1] += one[i] * w[j] * (j + 1) as f64 / (i + 1) as f64;
                        w[j] = zero[i] * w[j] * (i - j) as f64 / (i + 1) as f64;
                    }
                }
                let l = len - 1;
                for e in 1..len {
                    let mut next = w[l];
                    let mut total = 0.0;
                    for j in (0..l).rev() {
                        if one[e] != 0.0 {
                            let t = next * (l + 1) as f64 / ((j + 1) as f64 * one[e]);
                            total += t;
                            next = w[j] - t * zero[e] * (l - j) as f64 / (l + 1) as f64;
                        } else if zero[e] != 0.0 {
                            total += w[j] / zero[e] * (l + 1) as f64 / (l - j) as f64;
                        }
                    }
                    let at = path[e].output as usize * m + path[e].feature as usize;
                    phi[at] += total * (one[e] - zero[e]) * path[e].value as f64;
                }
                lane += len;
            }
        }
        phi
    }

    #[test]
    fn packed_paths_give_the_cpu_tree_shap_values() {
        let mut rng = Rng::new(17, 0);
        let nf = 5;
        for (n_outputs, splits) in [(1, 1), (1, 12), (2, 30), (3, 7)] {
            let trees: Vec<Tree> = (0..6).map(|i| random_tree(&mut rng, nf, splits + i)).collect();
            let layout = ShapLayout::build(&trees, n_outputs).unwrap();
            // Every lane is used or padding, and every leaf is one path.
            assert_eq!(layout.elements.len() % LANES, 0);
            let paths = layout.elements.iter().filter(|e| e.shape >> 8 != 0 && e.feature == NO_FEATURE).count();
            let leaves: usize = trees.iter().map(|t| (0..t.n_nodes() as u32).filter(|&n| t.is_leaf(n)).count()).sum();
            assert_eq!(paths, leaves);
            let shap = TreeShap::new(&trees, n_outputs, nf as usize);
            for _ in 0..50 {
                let row: Vec<f32> = (0..nf)
                    .map(|_| match rng.next_u64() % 6 {
                        0 => f32::NAN,
                        1 => -1.0,
                        _ => (rng.next_u64() % 22) as f32 / 10.0 - 1.1,
                    })
                    .collect();
                let got = emulate(&layout, &row, n_outputs);
                let mut want = vec![0f32; shap.width()];
                shap.row(&row, &vec![0.0; n_outputs], &mut want);
                for (g, w) in got.iter().zip(&want) {
                    assert!((*g - *w as f64).abs() < 1e-5 * (1.0 + w.abs() as f64), "{got:?} against {want:?}");
                }
            }
        }
    }

    #[test]
    fn best_fit_packs_paths_without_splitting_one() {
        let mut rng = Rng::new(3, 0);
        let trees: Vec<Tree> = (0..40).map(|i| random_tree(&mut rng, 20, 5 + i % 17)).collect();
        let layout = ShapLayout::build(&trees, 1).unwrap();
        let used = layout.elements.iter().filter(|e| e.shape >> 8 != 0).count();
        // Paths of a few lanes each fill warps nearly whole.
        assert!(used * 10 >= layout.elements.len() * 9, "{used} of {} lanes used", layout.elements.len());
    }

    #[test]
    fn tiles_gather_values_and_stage_rows_in_shared_memory_while_they_fit() {
        let plan = |width, nf| TilePlan::choose(227 << 10, width, nf);
        // 28 features: 64 rows of values and inputs in 14.5 KiB.
        assert_eq!(
            plan(29, 28),
            TilePlan { tile_rows: 64, shared_values: true, staged: true, shared_bytes: 64 * 57 * 4 }
        );
        // Interactions gather in global memory; their rows are staged.
        assert_eq!(
            plan(0, 28),
            TilePlan { tile_rows: 64, shared_values: false, staged: true, shared_bytes: 64 * 28 * 4 }
        );
        // 3,000 features: only 8 rows, in most of the block's shared memory.
        assert_eq!(plan(3001, 3000).tile_rows, 8);
        assert!(plan(3001, 3000).shared_values && plan(3001, 3000).staged);
        // Wider: values alone, then rows alone, then nothing in shared memory.
        assert!(plan(6001, 6000).shared_values && !plan(6001, 6000).staged);
        assert!(!plan(20001, 6000).shared_values && plan(20001, 6000).staged);
        assert_eq!(
            plan(20001, 20000),
            TilePlan { tile_rows: 32, shared_values: false, staged: false, shared_bytes: 0 }
        );
    }

    #[test]
    fn a_path_longer_than_a_warp_is_a_clear_error() {
        // A chain of 32 splits on 32 features.
        let mut t = Tree::leaf(0.0, 100.0);
        let mut node = 0;
        for f in 0..32 {
            let spec = SplitSpec {
                feature: f,
                threshold: 0.0,
                split_bin: 0,
                default_left: true,
                left_categories: &[],
                gain: 1.0,
            };
            node = t.split(node, &spec, (0.0, 50.0), (1.0, 50.0)).0;
        }
        let e = ShapLayout::build(&[t], 1).unwrap_err().to_string();
        assert!(e.contains("at most 31 distinct features") && e.contains("splits on 32"), "{e}");
    }
}
