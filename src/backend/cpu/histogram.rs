//! Gradient histograms: per feature, the exact integer sum of the quantised gradients of a
//! node's rows in each bin, the last slot holding the missing values. Work is split by
//! (node, feature), so each task owns its slice and no atomics or reductions are needed.

use rayon::prelude::*;

use crate::data::{BinColumn, BinnedMatrix};
use crate::tree::gradient::QuantGrad;
use crate::tree::GradSum;

/// Where each feature's slots start in a node's histogram.
#[derive(Clone, Debug)]
pub struct HistLayout {
    pub offsets: Vec<usize>,
}

impl HistLayout {
    pub fn new(binned: &BinnedMatrix) -> Self {
        let mut offsets = Vec::with_capacity(binned.n_features() + 1);
        offsets.push(0);
        for f in 0..binned.n_features() {
            offsets.push(offsets[f] + binned.slots(f));
        }
        HistLayout { offsets }
    }

    pub fn total_slots(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    pub fn feature<'h>(&self, hist: &'h [GradSum], f: usize) -> &'h [GradSum] {
        &hist[self.offsets[f]..self.offsets[f + 1]]
    }
}

/// One node's histogram to build: its rows and the features to fill.
pub struct HistTask<'a> {
    pub rows: &'a [u32],
    pub hist: &'a mut [GradSum],
}

/// Fills the histograms of several nodes over `features`, in parallel over (node, feature).
pub fn build_histograms(
    binned: &BinnedMatrix,
    layout: &HistLayout,
    grads: &[QuantGrad],
    features: &[u32],
    tasks: Vec<HistTask>,
) {
    // The node's gradients in row order, gathered once and then read sequentially per feature.
    let gathered: Vec<Vec<QuantGrad>> =
        tasks.par_iter().map(|t| t.rows.iter().map(|&r| grads[r as usize]).collect()).collect();
    // (rows, their gradients, feature, the feature's slots)
    type Job<'j> = (&'j [u32], &'j [QuantGrad], usize, &'j mut [GradSum]);
    let mut jobs: Vec<Job> = Vec::new();
    for (task, g) in tasks.into_iter().zip(&gathered) {
        let mut rest = task.hist;
        let mut consumed = 0;
        let mut slices: Vec<(usize, &mut [GradSum])> = Vec::with_capacity(features.len());
        // Features are sorted, so the node's histogram can be carved front to back.
        for &f in features {
            let f = f as usize;
            let (start, end) = (layout.offsets[f], layout.offsets[f + 1]);
            let (_, tail) = rest.split_at_mut(start - consumed);
            let (mine, tail) = tail.split_at_mut(end - start);
            slices.push((f, mine));
            rest = tail;
            consumed = end;
        }
        for (f, slice) in slices {
            jobs.push((task.rows, g.as_slice(), f, slice));
        }
    }
    jobs.into_par_iter().for_each(|(rows, g, f, hist)| {
        hist.fill(GradSum::default());
        match &binned.columns[f] {
            BinColumn::U8(bins) => accumulate(bins, rows, g, hist),
            BinColumn::U16(bins) => accumulate(bins, rows, g, hist),
        }
    });
}

#[inline]
fn accumulate<B: Copy + Into<u32>>(bins: &[B], rows: &[u32], g: &[QuantGrad], hist: &mut [GradSum]) {
    for (&r, &q) in rows.iter().zip(g) {
        let b: u32 = bins[r as usize].into();
        hist[b as usize] += q;
    }
}

/// `parent - child` slot by slot: the sibling's histogram without touching its rows.
pub fn subtract(parent: &[GradSum], child: &[GradSum], out: &mut [GradSum]) {
    out.par_iter_mut().zip(parent.par_iter().zip(child)).for_each(|(o, (&p, &c))| *o = p - c);
}
