//! The binned feature matrix: one column of bin ids per feature, column-major, one byte per
//! value where the feature has fewer than 256 bins (missing included), two bytes otherwise.
//! Missing values take the bin id `n_bins[f]`.

use rayon::prelude::*;

use super::cuts::{FeatureCuts, BLOCK};
use super::frame::FeatureFrame;

/// The bin ids of one feature.
#[derive(Clone, Debug)]
pub enum BinColumn {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl BinColumn {
    #[inline]
    pub fn get(&self, row: usize) -> u32 {
        match self {
            BinColumn::U8(v) => v[row] as u32,
            BinColumn::U16(v) => v[row] as u32,
        }
    }
}

/// Bin ids of every feature, plus each feature's bin count.
#[derive(Clone, Debug)]
pub struct BinnedMatrix {
    pub columns: Vec<BinColumn>,
    /// Bins per feature, not counting the missing bin (whose id is this number).
    pub n_bins: Vec<u32>,
    pub n_rows: usize,
}

impl BinnedMatrix {
    /// Bins every column of `frame` with `cuts`, in parallel over features.
    pub fn new(frame: &FeatureFrame, cuts: &[FeatureCuts]) -> Self {
        assert_eq!(frame.n_features(), cuts.len(), "one set of cuts per feature");
        let n_rows = frame.n_rows();
        let columns = frame
            .columns()
            .par_iter()
            .zip(cuts.par_iter())
            .map(|(col, cut)| {
                let mut buf = vec![0f32; BLOCK];
                let mut bins = vec![0u32; n_rows];
                let mut start = 0;
                while start < n_rows {
                    let len = BLOCK.min(n_rows - start);
                    col.read(start, &mut buf[..len]);
                    for (b, &x) in bins[start..start + len].iter_mut().zip(&buf[..len]) {
                        *b = cut.bin(x);
                    }
                    start += len;
                }
                if cut.n_bins() < 256 {
                    BinColumn::U8(bins.into_iter().map(|b| b as u8).collect())
                } else {
                    BinColumn::U16(bins.into_iter().map(|b| b as u16).collect())
                }
            })
            .collect();
        BinnedMatrix { columns, n_bins: cuts.iter().map(FeatureCuts::n_bins).collect(), n_rows }
    }

    pub fn n_features(&self) -> usize {
        self.columns.len()
    }

    /// Histogram slots per feature: the bins plus the missing bin.
    pub fn slots(&self, feature: usize) -> usize {
        self.n_bins[feature] as usize + 1
    }
}
