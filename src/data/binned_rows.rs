//! Rows already binned ([`BinnedRows`]): a streamed fit's, binned batch by batch as they came
//! (`data::stream`), with the cut points that binned them; and a dataset's window on them
//! ([`BinnedView`]), all of the rows or one device's share.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Mutex;

use super::binned::BinnedMatrix;
use super::cuts::FeatureCuts;

/// Rows already binned, with the cut points that binned them: in `matrix` on the host, or,
/// when the engine that trains on them binned them where it trains (a GPU's memory:
/// `data::stream::BinSink`), held there (`elsewhere`), `matrix` then having no rows.
#[derive(Debug)]
pub struct BinnedRows {
    pub matrix: BinnedMatrix,
    pub cuts: Vec<FeatureCuts>,
    pub elsewhere: Option<ElsewhereBins>,
}

impl BinnedRows {
    /// Bins on the host.
    pub fn new(matrix: BinnedMatrix, cuts: Vec<FeatureCuts>) -> Self {
        BinnedRows { matrix, cuts, elsewhere: None }
    }

    /// All the rows.
    pub fn view(&self) -> BinnedView<'_> {
        BinnedView { all: self, first: 0, n_rows: self.matrix.n_rows }
    }
}

/// Bins that a `data::stream::BinSink` keeps where its engine trains, for that engine's fit
/// to take (once: the fit owns them from then on).
pub struct ElsewhereBins(Mutex<Option<Box<dyn Any + Send>>>);

impl ElsewhereBins {
    /// Bins a sink finished with, held for the fit to take.
    pub(crate) fn new(bins: Box<dyn Any + Send>) -> Self {
        ElsewhereBins(Mutex::new(Some(bins)))
    }

    /// The bins, to the first fit that asks; None after.
    pub fn take(&self) -> Option<Box<dyn Any + Send>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl std::fmt::Debug for ElsewhereBins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ElsewhereBins")
    }
}

/// A dataset's rows of a [`BinnedRows`]: all of them, or one device's share of a fit over
/// several GPUs (`Dataset::row_range`), which reads its rows where they lie, with no copy.
#[derive(Clone, Copy, Debug)]
pub struct BinnedView<'a> {
    /// The matrix these rows are part of, and its cut points.
    pub all: &'a BinnedRows,
    /// The first of them, in `all`'s rows.
    pub first: usize,
    pub n_rows: usize,
}

impl<'a> BinnedView<'a> {
    pub fn cuts(&self) -> &'a [FeatureCuts] {
        &self.all.cuts
    }

    /// Whether these are all of the matrix's rows.
    pub fn is_whole(&self) -> bool {
        self.first == 0 && self.n_rows == self.all.matrix.n_rows
    }

    /// These rows as a matrix of their own: the matrix itself when they are all of it, else
    /// a copy of them. Not for bins held elsewhere (a GPU's), which have no rows here: the
    /// engines that read host bins refuse those first.
    pub fn matrix(&self) -> Cow<'a, BinnedMatrix> {
        assert!(self.all.elsewhere.is_none(), "the bins of these rows are on a device, not the host");
        match self.is_whole() {
            true => Cow::Borrowed(&self.all.matrix),
            false => Cow::Owned(self.all.matrix.rows(self.first, self.n_rows)),
        }
    }
}
