//! Gradient histograms: per feature, the exact integer sum of the quantised gradients of a
//! node's rows in each bin, the last slot of each feature holding the missing values.
//!
//! Rows are visited once each and add their gradient to every feature (the bin matrix is
//! row-major). Rows are accumulated in chunks of at most 2^15 (fewer under whole sample
//! weights) into 8-byte `i32` slots (exact: see `tree::gradient`), half the size of the `i64`
//! node histograms, so the working set stays near L1; chunks of a large node run in parallel
//! and are summed into `i64`. Integer sums make the result independent of the chunking. With
//! one-byte bins, a chunk pads every feature to the same slot count, so that the loop reads
//! a row's bins as words and steps from feature to feature by a constant. A node of at most a
//! chunk's rows keeps its histogram in `i32` slots too ([`NodeHist`]): the same sums, half the
//! bytes for the passes over its slots.

use std::ops::AddAssign;

use rayon::prelude::*;

use super::prefetch_read;
use crate::data::binned::BinData;
use crate::data::BinnedMatrix;
#[cfg(target_arch = "x86_64")]
use crate::simd::Level;
use crate::tree::gradient::{QuantGrad, I32_SUM_ROWS};
use crate::tree::split::HistSlot;
use crate::tree::GradSum;

/// A chunk's exact sum of quantised gradients, and a small node's histogram slot
/// ([`NodeHist::Narrow`]). Aligned as one 64-bit word, which the empty-slot scan reads it as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct ChunkSum {
    g: i32,
    h: i32,
}

impl AddAssign for ChunkSum {
    #[inline]
    fn add_assign(&mut self, o: ChunkSum) {
        self.g += o.g;
        self.h += o.h;
    }
}

impl AddAssign<ChunkSum> for GradSum {
    #[inline]
    fn add_assign(&mut self, o: ChunkSum) {
        *self += o.widen();
    }
}

impl HistSlot for ChunkSum {
    const WORDS: usize = 1;

    #[inline(always)]
    fn sum(self) -> GradSum {
        self.widen()
    }

    fn words(bins: &[Self]) -> &[u64] {
        // SAFETY: ChunkSum is `#[repr(C, align(8))]` two i32: 8 bytes, no padding, aligned as
        // a u64, every bit pattern a u64; the view borrows `bins` for as long as it lives.
        unsafe { std::slice::from_raw_parts(bins.as_ptr() as *const u64, bins.len()) }
    }
}

/// A slot of a node's histogram: `i64` sums, or `i32` where every sum over the node's rows fits.
pub trait Slot: Copy + Default + Send + Sync + AddAssign<QuantGrad> + AddAssign<ChunkSum> {}
impl Slot for GradSum {}
impl Slot for ChunkSum {}

/// A node's histogram. A node of at most `chunk_rows` rows keeps `i32` sums (every sum over
/// its rows fits, as a chunk's does): half the bytes to clear, to subtract and, in the split
/// search, to read, where a level's histograms outgrow L2 (the flight table's 9,200 slots are
/// 147 KB a node in `i64`).
#[derive(Clone, Debug)]
pub enum NodeHist {
    Wide(Vec<GradSum>),
    Narrow(Vec<ChunkSum>),
}

impl NodeHist {
    /// A histogram of `slots` zero slots, narrow when `narrow`.
    pub fn zeroed(slots: usize, narrow: bool) -> Self {
        match narrow {
            true => NodeHist::Narrow(vec![ChunkSum::default(); slots]),
            false => NodeHist::Wide(vec![GradSum::default(); slots]),
        }
    }

    /// The sums as `i64` (a copy).
    pub fn widened(&self) -> Vec<GradSum> {
        match self {
            NodeHist::Wide(h) => h.clone(),
            NodeHist::Narrow(h) => h.iter().map(|s| s.widen()).collect(),
        }
    }

    /// The `i64` sums of a wide histogram.
    pub fn wide(&self) -> Option<&[GradSum]> {
        match self {
            NodeHist::Wide(h) => Some(h),
            NodeHist::Narrow(_) => None,
        }
    }

    /// The `i64` sums of a wide histogram, to sum over the workers of a distributed fit.
    pub fn wide_mut(&mut self) -> Option<&mut Vec<GradSum>> {
        match self {
            NodeHist::Wide(h) => Some(h),
            NodeHist::Narrow(_) => None,
        }
    }

    /// Adds the histogram of `rows` ([`add_histogram`]) for each output's gradients, each
    /// output's slots in turn (one output but for a vector-leaf tree).
    pub fn add_rows(
        &mut self,
        binned: &BinnedMatrix,
        layout: &HistLayout,
        grads: &[&[QuantGrad]],
        features: &[u32],
        rows: &[u32],
    ) {
        fn each_output<S: Slot>(
            hist: &mut [S],
            binned: &BinnedMatrix,
            layout: &HistLayout,
            grads: &[&[QuantGrad]],
            features: &[u32],
            rows: &[u32],
        ) {
            for (out, g) in hist.chunks_mut(layout.total_slots()).zip(grads) {
                add_histogram(binned, layout, g, features, rows, out);
            }
        }
        match self {
            NodeHist::Wide(h) => each_output(h, binned, layout, grads, features, rows),
            NodeHist::Narrow(h) => each_output(h, binned, layout, grads, features, rows),
        }
    }

    /// Adds another histogram of the same node's rows, slot by slot.
    pub fn add(&mut self, other: &NodeHist) {
        match (self, other) {
            (NodeHist::Wide(a), NodeHist::Wide(b)) => a.iter_mut().zip(b).for_each(|(x, &y)| *x += y),
            (NodeHist::Narrow(a), NodeHist::Narrow(b)) => a.iter_mut().zip(b).for_each(|(x, &y)| *x += y),
            (NodeHist::Wide(a), NodeHist::Narrow(b)) => a.iter_mut().zip(b).for_each(|(x, &y)| *x += y),
            (this, other) => {
                let mut wide = this.widened();
                wide.iter_mut().zip(other.widened()).for_each(|(x, y)| *x += y);
                *this = NodeHist::Wide(wide);
            }
        }
    }

    /// This (a parent's histogram) minus `child`'s: the sibling's, in the parent's buffer where
    /// the kinds agree. A narrow child's sibling is narrow too: both children of a parent are
    /// narrow or neither (the parent's row count decides), and their sums fit.
    pub fn minus(self, child: &NodeHist) -> NodeHist {
        match (self, child) {
            (NodeHist::Wide(mut p), NodeHist::Wide(c)) => {
                subtract_in_place(&mut p, c);
                NodeHist::Wide(p)
            }
            (NodeHist::Narrow(mut p), NodeHist::Narrow(c)) => {
                p.iter_mut().zip(c).for_each(|(x, y)| (x.g, x.h) = (x.g - y.g, x.h - y.h));
                NodeHist::Narrow(p)
            }
            (NodeHist::Wide(p), NodeHist::Narrow(c)) => NodeHist::Narrow(
                p.iter()
                    .zip(c)
                    .map(|(x, y)| {
                        let d = *x - y.widen();
                        debug_assert!(i32::try_from(d.g).is_ok() && i32::try_from(d.h).is_ok());
                        ChunkSum { g: d.g as i32, h: d.h as i32 }
                    })
                    .collect(),
            ),
            (parent, child) => {
                let mut p = parent.widened();
                subtract_in_place(&mut p, &child.widened());
                NodeHist::Wide(p)
            }
        }
    }
}

impl AddAssign<QuantGrad> for ChunkSum {
    #[inline]
    fn add_assign(&mut self, q: QuantGrad) {
        self.g += q.g;
        self.h += q.h;
    }
}

impl ChunkSum {
    #[inline]
    fn widen(self) -> GradSum {
        GradSum { g: self.g as i64, h: self.h as i64 }
    }
}

/// Where each feature's slots start in a node's histogram, and how many rows a chunk sums.
#[derive(Clone, Debug)]
pub struct HistLayout {
    pub offsets: Vec<usize>,
    /// The most slots of any feature: one-byte bins' chunks use `f * stride + bin` when that
    /// wastes little ([`HistLayout::strided`]).
    stride: usize,
    /// Rows per chunk: as many as sum exactly in `i32` ([`Weighting::chunk_rows`](crate::tree::gradient::Weighting::chunk_rows)).
    chunk_rows: usize,
}

impl HistLayout {
    pub fn new(binned: &BinnedMatrix) -> Self {
        let mut offsets = Vec::with_capacity(binned.n_features() + 1);
        offsets.push(0);
        for f in 0..binned.n_features() {
            offsets.push(offsets[f] + binned.slots(f));
        }
        let stride = (0..binned.n_features()).map(|f| binned.slots(f)).max().unwrap_or(0);
        HistLayout { offsets, stride, chunk_rows: I32_SUM_ROWS }
    }

    /// Whether a chunk's slots are at a fixed stride per feature: when padding every feature
    /// to the widest costs at most a quarter more slots.
    fn strided(&self) -> bool {
        let n = self.offsets.len() - 1;
        4 * n * self.stride <= 5 * self.total_slots()
    }

    /// The same layout summing `rows` rows a chunk (at most 2^15).
    pub fn with_chunk_rows(self, rows: usize) -> Self {
        HistLayout { chunk_rows: rows.clamp(1, I32_SUM_ROWS), ..self }
    }

    /// Rows a chunk sums in `i32`: a node of at most this many rows keeps a narrow histogram.
    pub fn chunk_rows(&self) -> usize {
        self.chunk_rows
    }

    pub fn total_slots(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    pub fn feature<'h>(&self, hist: &'h [GradSum], f: usize) -> &'h [GradSum] {
        &hist[self.offsets[f]..self.offsets[f + 1]]
    }
}

/// One node's histogram to build: its rows and where to write.
pub struct HistTask<'a> {
    pub rows: &'a [u32],
    pub hist: &'a mut [GradSum],
}

/// Fills the histograms of several nodes for `features` (other features' slots are left
/// zero). Small nodes are built whole, in parallel with each other; large ones in chunks.
pub fn build_histograms(
    binned: &BinnedMatrix,
    layout: &HistLayout,
    grads: &[QuantGrad],
    features: &[u32],
    tasks: Vec<HistTask>,
) {
    let chunk = layout.chunk_rows;
    let (small, large): (Vec<HistTask>, Vec<HistTask>) = tasks.into_iter().partition(|t| t.rows.len() <= chunk);
    small.into_par_iter().for_each(|t| {
        t.hist.fill(GradSum::default());
        chunk_sums(binned, layout, grads, features, t.rows).add_to(layout, t.hist);
    });
    for t in large {
        // Chunks fold into one i64 histogram per worker, not one partial per chunk kept until
        // the end (a node of 20M rows has 610 chunks: 35 MB at a fit's peak).
        let zero = || vec![GradSum::default(); layout.total_slots()];
        let total = t
            .rows
            .par_chunks(chunk)
            .fold(zero, |mut acc, rows| {
                add_histogram(binned, layout, grads, features, rows, &mut acc);
                acc
            })
            .reduce(zero, |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            });
        t.hist.copy_from_slice(&total);
    }
}

/// One chunk's sums: in the node's layout, or at a fixed stride per feature.
struct Chunk {
    sums: Vec<ChunkSum>,
    /// Feature f's slots start at `f * stride` ([`accumulate_strided`]).
    stride: Option<usize>,
}

impl Chunk {
    /// Adds the sums into a node's histogram (`layout`'s slots), with AVX-512 where the CPU
    /// has it (as [`subtract_in_place`]).
    fn add_to<S: Slot>(&self, layout: &HistLayout, hist: &mut [S]) {
        #[cfg(target_arch = "x86_64")]
        match crate::simd::level() {
            // SAFETY: the CPU has the level's features (`simd::level` detected them).
            Level::Avx512 => return unsafe { self.add_to_avx512(layout, hist) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { self.add_to_avx2(layout, hist) },
            Level::Baseline => {}
        }
        self.add_to_portable(layout, hist)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn add_to_avx512<S: Slot>(&self, layout: &HistLayout, hist: &mut [S]) {
        self.add_to_portable(layout, hist)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn add_to_avx2<S: Slot>(&self, layout: &HistLayout, hist: &mut [S]) {
        self.add_to_portable(layout, hist)
    }

    #[inline(always)]
    fn add_to_portable<S: Slot>(&self, layout: &HistLayout, hist: &mut [S]) {
        let add = |out: &mut [S], sums: &[ChunkSum]| out.iter_mut().zip(sums).for_each(|(o, &s)| *o += s);
        match self.stride {
            None => add(hist, &self.sums),
            Some(stride) => {
                for (f, w) in layout.offsets.windows(2).enumerate() {
                    add(&mut hist[w[0]..w[1]], &self.sums[f * stride..]);
                }
            }
        }
    }
}

/// One chunk (at most `layout.chunk_rows` rows) into a fresh `i32` histogram.
fn chunk_sums(
    binned: &BinnedMatrix,
    layout: &HistLayout,
    grads: &[QuantGrad],
    features: &[u32],
    rows: &[u32],
) -> Chunk {
    let nf = binned.n_features();
    if let (BinData::U8 { rows: bins }, true, true) = (&binned.data, features.len() == nf, layout.strided()) {
        let mut sums = vec![ChunkSum::default(); nf * layout.stride];
        accumulate_strided(bins, nf, rows, grads, layout.stride, &mut sums);
        return Chunk { sums, stride: Some(layout.stride) };
    }
    let mut acc = vec![ChunkSum::default(); layout.total_slots()];
    match &binned.data {
        BinData::U8 { rows: bins } => {
            accumulate(bins, binned.n_features(), rows, grads, features, &layout.offsets, &mut acc)
        }
        BinData::U16 { rows: bins } => {
            accumulate(bins, binned.n_features(), rows, grads, features, &layout.offsets, &mut acc)
        }
        BinData::U32 { rows: bins } => {
            accumulate(bins, binned.n_features(), rows, grads, features, &layout.offsets, &mut acc)
        }
    }
    Chunk { sums: acc, stride: None }
}

/// Adds the histogram of `rows` (any number, in chunks of at most `layout.chunk_rows`) to `hist`, on the
/// calling thread: for rows whose bins were just read (by the partition) and are in cache.
pub fn add_histogram<S: Slot>(
    binned: &BinnedMatrix,
    layout: &HistLayout,
    grads: &[QuantGrad],
    features: &[u32],
    rows: &[u32],
    hist: &mut [S],
) {
    // Few rows for the slots (a deep node of a wide histogram): a chunk's zeroing and its
    // addition into `hist`, both a pass over every slot, would cost more than the rows.
    if rows.len() * features.len() < DIRECT_UPDATES_PER_SLOT * layout.total_slots() {
        let (nf, offsets) = (binned.n_features(), &layout.offsets);
        match &binned.data {
            BinData::U8 { rows: bins } => accumulate(bins, nf, rows, grads, features, offsets, hist),
            BinData::U16 { rows: bins } => accumulate(bins, nf, rows, grads, features, offsets, hist),
            BinData::U32 { rows: bins } => accumulate(bins, nf, rows, grads, features, offsets, hist),
        }
        return;
    }
    for part in rows.chunks(layout.chunk_rows) {
        chunk_sums(binned, layout, grads, features, part).add_to(layout, hist);
    }
}

/// Below this many updates a slot, [`add_histogram`] adds rows straight into the node's
/// `i64` histogram instead of through an `i32` chunk.
const DIRECT_UPDATES_PER_SLOT: usize = 2;

#[inline]
fn accumulate<B: Copy + Into<u32>, S: AddAssign<QuantGrad>>(
    bins: &[B],
    nf: usize,
    rows: &[u32],
    grads: &[QuantGrad],
    features: &[u32],
    offsets: &[usize],
    hist: &mut [S],
) {
    debug_assert!(std::mem::size_of::<S>() > 8 || rows.len() <= I32_SUM_ROWS, "more rows than sum exactly in i32");
    // Every bin id is at most its feature's missing bin, the last of the feature's slots, so
    // `offsets[f] + bin` is inside `hist` (checked once here, relied on below).
    assert!(offsets.len() == nf + 1 && hist.len() == offsets[nf] && bins.len().is_multiple_of(nf.max(1)));
    let mut add = |slot: usize, q: QuantGrad| {
        debug_assert!(slot < hist.len());
        // SAFETY: slot = offsets[f] + bin with bin < slots(f) = offsets[f + 1] - offsets[f],
        // by construction of the bin matrix and the layout (see above).
        *unsafe { hist.get_unchecked_mut(slot) } += q;
    };
    for (i, &r) in rows.iter().enumerate() {
        prefetch_ahead(bins, nf, grads, rows, i);
        let q = grads[r as usize];
        let row = &bins[r as usize * nf..(r as usize + 1) * nf];
        if features.len() == nf {
            for (&b, &off) in row.iter().zip(offsets) {
                let b: u32 = b.into();
                add(off + b as usize, q);
            }
        } else {
            for &f in features {
                let b: u32 = row[f as usize].into();
                add(offsets[f as usize] + b as usize, q);
            }
        }
    }
}

/// [`accumulate`] for one-byte bins and every feature, the chunk's slots at a fixed stride:
/// a row's bins are read eight at a time as one word and each slot's address is the last
/// one's plus the stride, so an update is one load and one store, not four memory operations.
#[inline]
fn accumulate_strided(bins: &[u8], nf: usize, rows: &[u32], grads: &[QuantGrad], stride: usize, hist: &mut [ChunkSum]) {
    debug_assert!(rows.len() <= I32_SUM_ROWS, "more rows than sum exactly in i32");
    // Every bin is below its feature's slot count, at most `stride`: f * stride + bin is
    // inside `hist` (checked once here, relied on below).
    assert!(hist.len() == nf * stride && bins.len().is_multiple_of(nf.max(1)));
    let words = nf / 8;
    let hist = hist.as_mut_ptr();
    for (i, &r) in rows.iter().enumerate() {
        prefetch_ahead(bins, nf, grads, rows, i);
        let q = grads[r as usize];
        let row = &bins[r as usize * nf..(r as usize + 1) * nf];
        let mut at = 0usize;
        let mut add = |bin: usize| {
            debug_assert!(bin < stride);
            // SAFETY: at = f * stride for the row's f-th bin, bin < stride (see above).
            unsafe { *hist.add(at + bin) += q };
            at += stride;
        };
        for w in 0..words {
            let word = u64::from_le_bytes(row[8 * w..8 * w + 8].try_into().unwrap());
            for k in 0..8 {
                add(((word >> (8 * k)) & 0xff) as usize);
            }
        }
        for &b in &row[8 * words..] {
            add(b as usize);
        }
    }
}

/// Rows ahead of the current one whose data is fetched into cache.
const PREFETCH_DISTANCE: usize = 16;

/// Fetches the bins and gradient of the row [`PREFETCH_DISTANCE`] places after `rows[i]`: a
/// deep node's rows are scattered over the matrix, where the hardware prefetcher cannot
/// guess them.
#[inline(always)]
fn prefetch_ahead<B>(bins: &[B], nf: usize, grads: &[QuantGrad], rows: &[u32], i: usize) {
    if let Some(&r) = rows.get(i + PREFETCH_DISTANCE) {
        prefetch_read(bins[r as usize * nf..].as_ptr());
        prefetch_read(grads[r as usize..].as_ptr());
    }
}

/// `parent -= child` slot by slot: the sibling's histogram, without touching its rows, in
/// the parent's place. With AVX-512 where the CPU has it: a wide table's histograms are
/// passes of a hundred kilobytes and more, every node, which the baseline compiles to 16-byte
/// operations.
pub fn subtract_in_place(parent: &mut [GradSum], child: &[GradSum]) {
    #[cfg(target_arch = "x86_64")]
    match crate::simd::level() {
        // SAFETY: the CPU has the level's features (`simd::level` detected them).
        Level::Avx512 => return unsafe { subtract_avx512(parent, child) },
        // SAFETY: as above.
        Level::Avx2 => return unsafe { subtract_avx2(parent, child) },
        Level::Baseline => {}
    }
    subtract_portable(parent, child)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn subtract_avx512(parent: &mut [GradSum], child: &[GradSum]) {
    subtract_portable(parent, child)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn subtract_avx2(parent: &mut [GradSum], child: &[GradSum]) {
    subtract_portable(parent, child)
}

#[inline(always)]
fn subtract_portable(parent: &mut [GradSum], child: &[GradSum]) {
    parent.iter_mut().zip(child).for_each(|(p, &c)| *p = *p - c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;

    /// Narrow slots' present list (vector where the CPU has it) equals the plain filter, and a
    /// narrow sibling taken from a wide or a narrow parent equals the wide subtraction.
    #[test]
    fn narrow_histograms_read_and_subtract_as_wide_ones() {
        let mut rng = Rng::new(13, 1);
        for len in [0usize, 5, 16, 33, 3961] {
            let small: Vec<ChunkSum> = (0..len)
                .map(|_| match rng.below(4) {
                    0 => ChunkSum { g: rng.below(7) as i32 - 3, h: 0 },
                    1 => ChunkSum { g: 0, h: rng.below(5) as i32 },
                    _ => ChunkSum::default(),
                })
                .collect();
            let want: Vec<u32> = (0..len as u32).filter(|&c| small[c as usize] != ChunkSum::default()).collect();
            assert_eq!(crate::tree::split::category_lists::present_slots(&small), want, "{len} slots");
            let parent: Vec<GradSum> = small
                .iter()
                .map(|s| GradSum {
                    g: s.g as i64 + rng.below(1000) as i64 - 500,
                    h: s.h as i64 + rng.below(1000) as i64,
                })
                .collect();
            let mut want = parent.clone();
            subtract_in_place(&mut want, &small.iter().map(|s| s.widen()).collect::<Vec<_>>());
            let narrow_small = NodeHist::Narrow(small.clone());
            let from_wide = NodeHist::Wide(parent.clone()).minus(&narrow_small);
            assert!(matches!(from_wide, NodeHist::Narrow(_)) && from_wide.widened() == want);
            let narrow_parent: Vec<ChunkSum> =
                parent.iter().map(|p| ChunkSum { g: p.g as i32, h: p.h as i32 }).collect();
            let from_narrow = NodeHist::Narrow(narrow_parent).minus(&narrow_small);
            assert!(matches!(from_narrow, NodeHist::Narrow(_)) && from_narrow.widened() == want);
        }
    }

    /// Every path (one-byte bins at a fixed stride, with a tail of fewer than eight features;
    /// the node's layout for a feature subset, for uneven slot counts, and for wider bins)
    /// gives the plain sums of each row's pair into its bins, in chunks and whole.
    #[test]
    fn histograms_equal_the_plain_sums_on_every_path() {
        let mut rng = Rng::new(11, 0);
        let n = 3 * 1000 + 7;
        for (n_bins, wide) in [
            (vec![255u32, 200, 255, 17, 255, 255, 128, 255, 255, 255, 3], false),
            (vec![255, 1, 1, 1, 2, 255, 1, 1, 1, 1], false),
            (vec![255, 300, 255], true),
        ] {
            let nf = n_bins.len();
            let bins: Vec<u32> = (0..n * nf).map(|i| (rng.next_u64() % (n_bins[i % nf] as u64 + 1)) as u32).collect();
            let data = match wide {
                false => BinData::U8 { rows: bins.iter().map(|&b| b as u8).collect() },
                true => BinData::U16 { rows: bins.iter().map(|&b| b as u16).collect() },
            };
            let binned = BinnedMatrix { data, n_bins: n_bins.clone(), n_rows: n };
            let grads: Vec<QuantGrad> = (0..n)
                .map(|_| QuantGrad {
                    g: (rng.next_u64() % 65_537) as i32 - 32_768,
                    h: (rng.next_u64() % 32_769) as i32,
                })
                .collect();
            // Many rows a slot (through chunks), and few (straight into the node's histogram).
            let many: Vec<u32> = (0..n as u32).filter(|r| r % 3 != 1).collect();
            let few: Vec<u32> = (0..n as u32).filter(|r| r % 97 == 5).collect();
            for (rows, chunk_rows) in [(&many, I32_SUM_ROWS), (&many, 100), (&few, I32_SUM_ROWS)] {
                let layout = HistLayout::new(&binned).with_chunk_rows(chunk_rows);
                for features in [(0..nf as u32).collect::<Vec<u32>>(), vec![0, 2]] {
                    let mut want = vec![GradSum::default(); layout.total_slots()];
                    for &r in rows {
                        for &f in &features {
                            let b = bins[r as usize * nf + f as usize] as usize;
                            want[layout.offsets[f as usize] + b] += grads[r as usize];
                        }
                    }
                    let mut got = vec![GradSum::default(); layout.total_slots()];
                    build_histograms(&binned, &layout, &grads, &features, vec![HistTask { rows, hist: &mut got }]);
                    assert!(got == want, "{nf} features, {} used, chunks of {chunk_rows}", features.len());
                    let mut added = vec![GradSum::default(); layout.total_slots()];
                    add_histogram(&binned, &layout, &grads, &features, rows, &mut added);
                    assert!(added == want);
                }
            }
        }
    }
}
