//! Gradient histograms: per feature, the exact integer sum of the quantised gradients of a
//! node's rows in each bin, the last slot of each feature holding the missing values.
//!
//! Rows are visited once each and add their gradient to every feature (the bin matrix is
//! row-major). Rows are accumulated in chunks of at most 2^15 (fewer under whole sample
//! weights) into 8-byte `i32` slots (exact: see `tree::gradient`), half the size of the `i64` node histograms, so the working set
//! stays near L1; chunks of a large node run in parallel and are summed into `i64`. Integer
//! sums make the result independent of the chunking.

use rayon::prelude::*;

use super::prefetch_read;
use crate::data::binned::BinData;
use crate::data::BinnedMatrix;
use crate::tree::gradient::{QuantGrad, I32_SUM_ROWS};
use crate::tree::GradSum;

/// A chunk's exact sum of quantised gradients.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct ChunkSum {
    g: i32,
    h: i32,
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
        HistLayout { offsets, chunk_rows: I32_SUM_ROWS }
    }

    /// The same layout summing `rows` rows a chunk (at most 2^15).
    pub fn with_chunk_rows(self, rows: usize) -> Self {
        HistLayout { chunk_rows: rows.clamp(1, I32_SUM_ROWS), ..self }
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
        for (out, s) in t.hist.iter_mut().zip(chunk_sums(binned, layout, grads, features, t.rows)) {
            *out = s.widen();
        }
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

/// One chunk (at most `layout.chunk_rows` rows) into a fresh `i32` histogram.
fn chunk_sums(
    binned: &BinnedMatrix,
    layout: &HistLayout,
    grads: &[QuantGrad],
    features: &[u32],
    rows: &[u32],
) -> Vec<ChunkSum> {
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
    acc
}

/// Adds the histogram of `rows` (any number, in chunks of at most `layout.chunk_rows`) to `hist`, on the
/// calling thread: for rows whose bins were just read (by the partition) and are in cache.
pub fn add_histogram(
    binned: &BinnedMatrix,
    layout: &HistLayout,
    grads: &[QuantGrad],
    features: &[u32],
    rows: &[u32],
    hist: &mut [GradSum],
) {
    for part in rows.chunks(layout.chunk_rows) {
        for (out, s) in hist.iter_mut().zip(chunk_sums(binned, layout, grads, features, part)) {
            *out += s.widen();
        }
    }
}

#[inline]
fn accumulate<B: Copy + Into<u32>>(
    bins: &[B],
    nf: usize,
    rows: &[u32],
    grads: &[QuantGrad],
    features: &[u32],
    offsets: &[usize],
    hist: &mut [ChunkSum],
) {
    debug_assert!(rows.len() <= I32_SUM_ROWS, "more rows than sum exactly in i32");
    // A deep node's rows are scattered over the matrix: fetch rows a little ahead, since the
    // hardware prefetcher cannot guess them.
    let prefetch = |i: usize| {
        if let Some(&r) = rows.get(i + PREFETCH_DISTANCE) {
            prefetch_read(bins[r as usize * nf..].as_ptr());
            prefetch_read(grads[r as usize..].as_ptr());
        }
    };
    // Every bin id is at most its feature's missing bin, the last of the feature's slots, so
    // `offsets[f] + bin` is inside `hist` (checked once here, relied on below).
    assert!(offsets.len() == nf + 1 && hist.len() == offsets[nf] && bins.len() % nf.max(1) == 0);
    let mut add = |slot: usize, q: QuantGrad| {
        debug_assert!(slot < hist.len());
        // SAFETY: slot = offsets[f] + bin with bin < slots(f) = offsets[f + 1] - offsets[f],
        // by construction of the bin matrix and the layout (see above).
        let h = unsafe { hist.get_unchecked_mut(slot) };
        h.g += q.g;
        h.h += q.h;
    };
    for (i, &r) in rows.iter().enumerate() {
        prefetch(i);
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

/// Rows ahead of the current one whose data is fetched into cache.
const PREFETCH_DISTANCE: usize = 16;

/// `parent -= child` slot by slot: the sibling's histogram, without touching its rows, in
/// the parent's place.
pub fn subtract_in_place(parent: &mut [GradSum], child: &[GradSum]) {
    parent.iter_mut().zip(child).for_each(|(p, &c)| *p = *p - c);
}
