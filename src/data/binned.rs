//! The binned feature matrix the CPU trainer reads: bin ids, one byte per value when every
//! feature has fewer than 256 bins (missing included), else two bytes, kept in two layouts.
//! Row-major for histograms, which visit a node's rows and add each row's gradient to every
//! feature (one cache line per row instead of one gather per (row, feature)); column-major
//! for partitioning, which reads one feature of a node's rows in ascending order.
//! Missing values take the bin id `n_bins[f]`.

use rayon::prelude::*;

use super::cuts::{FeatureCuts, BLOCK};
use super::frame::FeatureFrame;

/// Bin ids, row-major `rows[r * n_features + f]` and column-major `columns[f][r]`.
#[derive(Clone, Debug)]
pub enum BinData {
    U8 { rows: Vec<u8>, columns: Vec<Vec<u8>> },
    U16 { rows: Vec<u16>, columns: Vec<Vec<u16>> },
}

/// One feature's bins, by row.
#[derive(Clone, Copy, Debug)]
pub enum ColumnRef<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
}

impl ColumnRef<'_> {
    #[inline]
    pub fn get(&self, row: usize) -> u32 {
        match self {
            ColumnRef::U8(c) => c[row] as u32,
            ColumnRef::U16(c) => c[row] as u32,
        }
    }

    /// Address of `row`'s bin, for prefetching.
    #[inline]
    pub fn address(&self, row: usize) -> *const u8 {
        match self {
            ColumnRef::U8(c) => c[row..].as_ptr(),
            ColumnRef::U16(c) => c[row..].as_ptr() as *const u8,
        }
    }
}

/// Bin ids of every feature, plus each feature's bin count.
#[derive(Clone, Debug)]
pub struct BinnedMatrix {
    pub data: BinData,
    /// Bins per feature, not counting the missing bin (whose id is this number).
    pub n_bins: Vec<u32>,
    pub n_rows: usize,
}

impl BinnedMatrix {
    /// Bins every column of `frame` with `cuts`, in parallel over blocks of rows.
    pub fn new(frame: &FeatureFrame, cuts: &[FeatureCuts]) -> Self {
        assert_eq!(frame.n_features(), cuts.len(), "one set of cuts per feature");
        let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
        let data = if n_bins.iter().all(|&b| b < 256) {
            let (rows, columns) = bin_both(frame, cuts, |b| b as u8);
            BinData::U8 { rows, columns }
        } else {
            let (rows, columns) = bin_both(frame, cuts, |b| b as u16);
            BinData::U16 { rows, columns }
        };
        BinnedMatrix { data, n_bins, n_rows: frame.n_rows() }
    }

    pub fn n_features(&self) -> usize {
        self.n_bins.len()
    }

    /// Histogram slots per feature: the bins plus the missing bin.
    pub fn slots(&self, feature: usize) -> usize {
        self.n_bins[feature] as usize + 1
    }

    /// The bins of one feature, by row.
    #[inline]
    pub fn column(&self, feature: usize) -> ColumnRef<'_> {
        match &self.data {
            BinData::U8 { columns, .. } => ColumnRef::U8(&columns[feature]),
            BinData::U16 { columns, .. } => ColumnRef::U16(&columns[feature]),
        }
    }

    /// The bin of `row` for `feature`.
    #[inline]
    pub fn get(&self, row: usize, feature: usize) -> u32 {
        match &self.data {
            BinData::U8 { columns, .. } => columns[feature][row] as u32,
            BinData::U16 { columns, .. } => columns[feature][row] as u32,
        }
    }
}

/// Row-major and column-major bins of `frame`: each block of rows reads every column once
/// and writes both layouts.
fn bin_both<T: Copy + Default + Send>(
    frame: &FeatureFrame,
    cuts: &[FeatureCuts],
    narrow: impl Fn(u32) -> T + Sync,
) -> (Vec<T>, Vec<Vec<T>>) {
    let (n, nf) = (frame.n_rows(), frame.n_features());
    let mut rows = vec![T::default(); n * nf];
    let mut columns = vec![vec![T::default(); n]; nf];
    // blocks[b][f]: block b of column f.
    let mut blocks: Vec<Vec<&mut [T]>> = (0..n.div_ceil(BLOCK)).map(|_| Vec::with_capacity(nf)).collect();
    for col in columns.iter_mut() {
        for (b, chunk) in col.chunks_mut(BLOCK).enumerate() {
            blocks[b].push(chunk);
        }
    }
    rows.par_chunks_mut(BLOCK * nf).zip(blocks.into_par_iter()).enumerate().for_each(
        |(b, (row_block, mut col_block))| {
            let start = b * BLOCK;
            let len = row_block.len() / nf;
            let mut buf = vec![0f32; len];
            for (f, (col, cut)) in frame.columns().iter().zip(cuts).enumerate() {
                col.read(start, &mut buf);
                let column = &mut col_block[f];
                for (r, &x) in buf.iter().enumerate() {
                    let bin = narrow(cut.bin(x));
                    row_block[r * nf + f] = bin;
                    column[r] = bin;
                }
            }
        },
    );
    (rows, columns)
}
