//! The binned feature matrix the CPU trainer reads: bin ids, one byte per value when every
//! feature has fewer than 256 bins (missing included), else two bytes, or four past 65,535
//! bins (a categorical column of that many categories), in one row-major layout. Histograms, the dominant cost, visit a node's rows and add each row's gradient to
//! every feature: one cache line per row instead of one gather per (row, feature).
//! Partitioning reads one feature of a node's rows, a strided read of the same lines; a second,
//! column-major copy would make that read denser but doubled the bins' memory (issue 6 bounds
//! a fit's peak memory), and measured at most a few per cent of a fit's time.
//! Missing values take the bin id `n_bins[f]`.

use rayon::prelude::*;

use super::column::BLOCK;
use super::cuts::FeatureCuts;
use super::frame::FeatureFrame;

/// Bin ids, row-major: `rows[r * n_features + f]`.
#[derive(Clone, Debug)]
pub enum BinData {
    U8 { rows: Vec<u8> },
    U16 { rows: Vec<u16> },
    U32 { rows: Vec<u32> },
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
        let data = match Self::bin_width(&n_bins) {
            1 => BinData::U8 { rows: bin_rows(frame, cuts, |b| b as u8) },
            2 => BinData::U16 { rows: bin_rows(frame, cuts, |b| b as u16) },
            _ => BinData::U32 { rows: bin_rows(frame, cuts, |b| b) },
        };
        BinnedMatrix { data, n_bins, n_rows: frame.n_rows() }
    }

    /// A matrix of `n_rows` rows for features of `cuts`, every bin 0 until filled in parts by
    /// [`BinnedMatrix::fill`] (a stream's batches binned one at a time, each straight into its
    /// rows, so that no float column is ever whole).
    pub fn zeroed(n_rows: usize, cuts: &[FeatureCuts]) -> Self {
        let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
        let cells = n_rows * n_bins.len();
        let data = match Self::bin_width(&n_bins) {
            1 => BinData::U8 { rows: vec![0; cells] },
            2 => BinData::U16 { rows: vec![0; cells] },
            _ => BinData::U32 { rows: vec![0; cells] },
        };
        BinnedMatrix { data, n_bins, n_rows }
    }

    /// A matrix of no rows for features of `cuts`, with room for `rows` rows (0: none; rows
    /// come by [`BinnedMatrix::append`], the vector growing as they do).
    pub fn with_capacity(rows: usize, cuts: &[FeatureCuts]) -> Self {
        let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
        let cells = rows * n_bins.len();
        let data = match Self::bin_width(&n_bins) {
            1 => BinData::U8 { rows: Vec::with_capacity(cells) },
            2 => BinData::U16 { rows: Vec::with_capacity(cells) },
            _ => BinData::U32 { rows: Vec::with_capacity(cells) },
        };
        BinnedMatrix { data, n_bins, n_rows: 0 }
    }

    /// Bins `frame`'s rows with `cuts` (this matrix's) as rows after the last: an evaluation
    /// set streamed in batches of a count not known ahead.
    pub fn append(&mut self, frame: &FeatureFrame, cuts: &[FeatureCuts]) {
        let first = self.n_rows;
        let cells = (first + frame.n_rows()) * self.n_features();
        match &mut self.data {
            BinData::U8 { rows } => rows.resize(cells, 0),
            BinData::U16 { rows } => rows.resize(cells, 0),
            BinData::U32 { rows } => rows.resize(cells, 0),
        }
        self.n_rows += frame.n_rows();
        self.fill(first, frame, cuts);
    }

    /// Bins `frame`'s rows with `cuts` (this matrix's) into rows `first..first + frame.n_rows()`:
    /// the same bins as [`BinnedMatrix::new`] gives those rows of the whole frame.
    pub fn fill(&mut self, first: usize, frame: &FeatureFrame, cuts: &[FeatureCuts]) {
        let nf = self.n_features();
        assert_eq!(frame.n_features(), nf, "one set of cuts per feature");
        assert!(first + frame.n_rows() <= self.n_rows, "rows past the end of the binned matrix");
        let at = first * nf..(first + frame.n_rows()) * nf;
        match &mut self.data {
            BinData::U8 { rows } => bin_rows_into(frame, cuts, &mut rows[at], |b| b as u8),
            BinData::U16 { rows } => bin_rows_into(frame, cuts, &mut rows[at], |b| b as u16),
            BinData::U32 { rows } => bin_rows_into(frame, cuts, &mut rows[at], |b| b),
        }
    }

    /// Bytes per bin id: 1, 2 when some feature has 256 bins or more, 4 past 65,535 (the
    /// missing bin's id is the bin count, so it must fit too).
    pub fn bin_width(n_bins: &[u32]) -> usize {
        match n_bins.iter().copied().max().unwrap_or(0) {
            0..=255 => 1,
            256..=65_535 => 2,
            _ => 4,
        }
    }

    pub fn n_features(&self) -> usize {
        self.n_bins.len()
    }

    /// Histogram slots per feature: the bins plus the missing bin.
    pub fn slots(&self, feature: usize) -> usize {
        self.n_bins[feature] as usize + 1
    }

    /// Rows `first..first + n` as a matrix of their own (a copy).
    pub fn rows(&self, first: usize, n: usize) -> BinnedMatrix {
        let nf = self.n_features();
        let cells = first * nf..(first + n) * nf;
        let data = match &self.data {
            BinData::U8 { rows } => BinData::U8 { rows: rows[cells].to_vec() },
            BinData::U16 { rows } => BinData::U16 { rows: rows[cells].to_vec() },
            BinData::U32 { rows } => BinData::U32 { rows: rows[cells].to_vec() },
        };
        BinnedMatrix { data, n_bins: self.n_bins.clone(), n_rows: n }
    }

    /// The bin of `row` for `feature`.
    #[inline]
    pub fn get(&self, row: usize, feature: usize) -> u32 {
        let at = row * self.n_features() + feature;
        match &self.data {
            BinData::U8 { rows } => rows[at] as u32,
            BinData::U16 { rows } => rows[at] as u32,
            BinData::U32 { rows } => rows[at],
        }
    }
}

/// Row-major bins of `frame`: each block of rows reads every column once.
fn bin_rows<T: Copy + Default + Send>(
    frame: &FeatureFrame,
    cuts: &[FeatureCuts],
    narrow: impl Fn(u32) -> T + Sync,
) -> Vec<T> {
    let (n, nf) = (frame.n_rows(), frame.n_features());
    let mut rows = vec![T::default(); n * nf];
    bin_rows_into(frame, cuts, &mut rows, narrow);
    rows
}

/// [`bin_rows`] into `rows` (`frame.n_rows()` rows of every feature).
fn bin_rows_into<T: Copy + Send>(
    frame: &FeatureFrame,
    cuts: &[FeatureCuts],
    rows: &mut [T],
    narrow: impl Fn(u32) -> T + Sync,
) {
    let nf = frame.n_features();
    if nf == 0 {
        return;
    }
    rows.par_chunks_mut(BLOCK * nf).enumerate().for_each(|(b, row_block)| {
        let start = b * BLOCK;
        let len = row_block.len() / nf;
        let mut buf = vec![0f32; len];
        for (f, (col, cut)) in frame.columns().iter().zip(cuts).enumerate() {
            col.read(start, &mut buf);
            for (r, &x) in buf.iter().enumerate() {
                row_block[r * nf + f] = narrow(cut.bin(x));
            }
        }
    });
}
