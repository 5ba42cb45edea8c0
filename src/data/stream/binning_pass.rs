//! Pass 2 of a streamed fit: each batch binned with pass 1's cut points straight into its rows
//! of the compact training matrix ([`BinnedMatrix::fill`]), or of an engine's own memory (a
//! [`BinSink`]), so no float column ever exists whole; its per-row vectors kept beside them,
//! from the same batch, so a row's label always travels with its bins whatever order the
//! source gives (issue 52); and the rows' digest checked against pass 1's.

use std::any::Any;

use super::cut_points_pass::CutPoints;
use super::per_row::PerRow;
use super::progress::{Pass, PassProgress, Progress};
use super::row_digest::RowDigest;
use super::schema::{check_schema, coded};
use super::source::{changed, Batch, BatchSource};
use crate::data::binned::BinnedMatrix;
use crate::data::binned_rows::{BinnedRows, ElsewhereBins};
use crate::data::cuts::FeatureCuts;
use crate::data::dataset::Dataset;
use crate::data::frame::FeatureFrame;
use crate::error::{Error, Result};

/// Where pass 2 bins a stream's rows when not into the host matrix: an engine's own memory
/// (the GPU's, `Engine::stream_bins`), so that the bins never exist on the host.
pub trait BinSink: Send {
    /// The most rows of `frame` it takes at once: a larger batch (a frame in memory read as
    /// one, a stream's own large batches) comes in pieces of at most this many rows.
    fn max_rows(&self, _frame: &FeatureFrame) -> usize {
        usize::MAX
    }
    /// Bins `frame`, rows `at..at + frame.n_rows()` of the stream (categories coded by the
    /// stream's, the missing value read as missing), with `cuts`.
    fn fill(&mut self, at: usize, frame: &FeatureFrame, cuts: &[FeatureCuts]) -> Result<()>;
    /// The bins, once every row is filled, for the engine that made the sink.
    fn finish(self: Box<Self>) -> Result<Box<dyn Any + Send>>;
}

/// Chooses where a stream's `n` rows, binned with `cuts`, go in pass 2: a sink, or None for
/// the host matrix.
pub type SinkFor<'a> = dyn FnMut(usize, &[FeatureCuts]) -> Result<Option<Box<dyn BinSink>>> + 'a;

/// What pass 2 gathers, batch by batch.
pub(super) struct BinningPass {
    /// The value read as missing.
    missing: Option<f32>,
    /// This worker's rows (all rows, on one worker).
    n_local: usize,
    /// Pass 1's cut points, categories and digest.
    cut_points: CutPoints,
    /// Where the bins go when not into `matrix` (which then has no rows).
    sink: Option<Box<dyn BinSink>>,
    matrix: BinnedMatrix,
    /// The per-row vectors, read with the bins (so in their order).
    rows: PerRow,
    /// The rows' digest, which must equal pass 1's.
    digest: RowDigest,
    /// The rows binned so far.
    at: usize,
}

impl BinningPass {
    /// Pass 2 over `source`, its `n_local` rows binned with `cut_points` into the sink that
    /// `sink_for` chooses (or the host matrix), telling `progress` after every batch.
    pub(super) fn read(
        source: &mut dyn BatchSource,
        missing: Option<f32>,
        n_local: usize,
        cut_points: CutPoints,
        sink_for: &mut SinkFor,
        progress: &mut Progress,
    ) -> Result<Self> {
        let sink = sink_for(n_local, &cut_points.cuts)?;
        let matrix = BinnedMatrix::zeroed(if sink.is_some() { 0 } else { n_local }, &cut_points.cuts);
        let (rows, digest) = (PerRow::default(), RowDigest::default());
        let mut second = BinningPass { missing, n_local, cut_points, sink, matrix, rows, digest, at: 0 };
        let total = Some(n_local);
        source.pass(&mut |b| {
            if b.data.n_rows() == 0 {
                return Ok(());
            }
            second.add(&b)?;
            progress(&PassProgress { pass: Pass::Binning, rows: second.at, total, done: false });
            Ok(())
        })?;
        second.check_same_rows()?;
        progress(&PassProgress { pass: Pass::Binning, rows: second.at, total, done: true });
        Ok(second)
    }

    /// Bins `b` (some rows) into its rows, its per-row vectors beside them.
    fn add(&mut self, b: &Batch) -> Result<()> {
        let (n, at) = (b.data.n_rows(), self.at);
        check_schema(&self.cut_points.schema, b.data.features(), at)?;
        if at + n > self.n_local {
            return Err(changed("pass 2", at + n, self.n_local));
        }
        if at == 0 {
            self.rows.reserve(self.n_local, b);
        }
        self.rows.add(b)?;
        self.digest.add(b);
        let frame = coded(b.data.features(), &self.cut_points.categories, self.missing)?;
        let cuts = &self.cut_points.cuts;
        match &mut self.sink {
            Some(sink) => fill_sink(sink.as_mut(), at, &frame, cuts)?,
            None => self.matrix.fill(at, &frame, cuts),
        }
        self.at += n;
        Ok(())
    }

    /// Whether the pass read the rows pass 1 did: as many, with the same per-row inputs.
    fn check_same_rows(&self) -> Result<()> {
        let (at, n_local) = (self.at, self.n_local);
        if at != n_local {
            return Err(changed("pass 2", at, n_local));
        }
        if self.digest != self.cut_points.digest {
            return Err(Error::data(format!(
                "the data gave other rows when read again (pass 2): the same number ({n_local}) but other labels, \
                 weights, query ids or base margins. A streamed fit reads its data twice (cut points, then bins), so \
                 the source must give the same rows each time, in any order: were its files changed between the passes?"
            )));
        }
        Ok(())
    }

    /// The dataset of the binned rows, their per-row vectors, and the schema.
    pub(super) fn into_dataset(self) -> Result<Dataset> {
        let elsewhere = match self.sink {
            Some(sink) => Some(ElsewhereBins::new(sink.finish()?)),
            None => None,
        };
        let CutPoints { schema, cuts, .. } = self.cut_points;
        self.rows.into_dataset(schema, BinnedRows { matrix: self.matrix, cuts, elsewhere })
    }
}

/// Bins `frame`, rows `at..` of the stream, into `sink`, in pieces of at most the rows it
/// takes at once.
fn fill_sink(sink: &mut dyn BinSink, at: usize, frame: &FeatureFrame, cuts: &[FeatureCuts]) -> Result<()> {
    let n = frame.n_rows();
    let most = sink.max_rows(frame).max(1);
    for a in (0..n).step_by(most) {
        let len = most.min(n - a);
        match len == n {
            true => sink.fill(at, frame, cuts)?,
            false => sink.fill(at + a, &frame.row_range(a, len), cuts)?,
        }
    }
    Ok(())
}
