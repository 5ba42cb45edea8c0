//! Training data streamed in batches, never whole (issue 36): a [`BatchSource`] read twice.
//!
//! * Pass 1: what does not depend on the rows' order: the cut points' sample, batch by batch,
//!   through the one [`CutSketch`] every fit uses (a row is sampled by a hash of the seed and
//!   its global row, so the sketch of the batches is the sketch of all rows, whatever the
//!   batching: the cuts are the same bit for bit); the union of each categorical column's
//!   categories (coded, as a collected column's are, by their sorted names); the row count and
//!   an order-free digest of the rows' per-row inputs ([`RowDigest`]).
//! * Pass 2: each batch binned with those cuts straight into its rows of the compact training
//!   matrix ([`BinnedMatrix::fill`]), so no float column ever exists whole, and its per-row
//!   vectors (labels, label bounds, weights, query ids, base margins) kept beside them, from
//!   the same batch: a row's label always travels with its bins, so a source that gives its
//!   rows in another order each time (an unordered join of Polars' streaming engine) trains
//!   on the right labels (issue 52). Pass 2's digest must equal pass 1's: a source whose rows
//!   changed between the passes is an error, never a fit on a mixture.
//!
//! The result is a [`Dataset`] whose rows are already binned ([`BinnedRows`]); the CPU engine
//! trains on it as it would on the columns, and the model is byte-identical to the fit on
//! the collected rows when both passes give the rows in that order (another order gives other
//! cut points' samples above 2^18 rows: a model as good, not the same bytes). The row count
//! sets the sample's rate, so it is needed before pass 1: the source tells it
//! ([`BatchSource::n_rows`], a Parquet scan's metadata) or one more pass counts it.
//!
//! An evaluation set streams in one pass ([`stream_eval_set`]): its batches binned with the
//! training cut points as they come, as the trainer bins a collected evaluation set. Each pass
//! tells how far it has come ([`PassProgress`]) to whoever asks
//! ([`stream_dataset_with_progress`]).

use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{new_empty_array, RecordBatch};

use super::binned::BinnedMatrix;
use super::column::FeatureColumn;
use super::cuts::{CutSketch, FeatureCuts, GlobalRows, MAX_CATEGORIES};
use super::frame::{Dataset, FeatureFrame};
use super::row_digest::RowDigest;
use crate::error::{Error, Result};

/// Rows already binned, with the cut points that binned them: in `matrix` on the host, or,
/// when the engine that trains on them binned them where it trains (a GPU's memory:
/// [`BinSink`]), held there (`elsewhere`), `matrix` then having no rows.
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

/// Bins that a [`BinSink`] keeps where its engine trains, for that engine's fit to take
/// (once: the fit owns them from then on).
pub struct ElsewhereBins(std::sync::Mutex<Option<Box<dyn Any + Send>>>);

impl ElsewhereBins {
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

/// One batch of a stream: its rows' features and targets (labels, and optionally label upper
/// bounds, weights and base margins), and their query ids, which may continue a query group
/// of the batch before. A batch's weights may all be zero (`Dataset::with_part_weight`):
/// the whole stream's are checked once assembled.
pub struct Batch {
    pub data: Dataset,
    pub group_ids: Option<Vec<i64>>,
}

impl Batch {
    pub fn new(data: Dataset) -> Self {
        Batch { data, group_ids: None }
    }
}

/// A source of batches that can be read more than once, giving the same rows each time, in any
/// order and batching (a lazy query, files, a re-openable Arrow stream). A one-shot stream
/// cannot be one: a streamed fit reads its data twice.
pub trait BatchSource {
    /// The number of rows a pass gives, when known without reading them; None: a pass counts
    /// them first.
    fn n_rows(&mut self) -> Result<Option<usize>> {
        Ok(None)
    }

    /// One pass over the batches, `each` called on every one in order.
    fn pass(&mut self, each: &mut dyn FnMut(Batch) -> Result<()>) -> Result<()>;
}

/// What the passes take of a fit's parameters: the cut points' `max_bin` and `seed`, the
/// value read as missing, and `scale_pos_weight` (the sample of the cut points is weighted
/// by it, as a collected fit's is).
#[derive(Clone, Copy, Debug)]
pub struct StreamParams {
    pub max_bin: usize,
    pub seed: u64,
    pub missing: Option<f32>,
    pub scale_pos_weight: f32,
}

/// A pass over a stream, as progress reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass<'a> {
    /// Counting the rows of a source that does not know their number.
    Count,
    /// Pass 1: the cut points' sample, the categories and the rows' digest.
    CutPoints,
    /// Pass 2: the rows binned into the training matrix, their per-row vectors beside them.
    Binning,
    /// The one pass over the evaluation set of this name: its rows binned with the training
    /// cut points.
    Eval(&'a str),
}

/// How far a pass has come: `rows` read of `total` (None when not known), and whether the
/// pass is `done`. Reported after every batch and once at the end.
#[derive(Clone, Copy, Debug)]
pub struct PassProgress<'a> {
    pub pass: Pass<'a>,
    pub rows: usize,
    pub total: Option<usize>,
    pub done: bool,
}

/// What [`stream_dataset_with_progress`] and [`stream_eval_set`] tell of their passes to.
pub type Progress<'p> = dyn FnMut(&PassProgress) + 'p;

/// One worker's share of a distributed fit whose workers each stream their own rows: where
/// those rows sit among all the fit's rows, and how the workers exchange what pass 1 gathers
/// (each one's cut points' sample and categories), so that every worker bins its rows with
/// the cut points and category codes of all rows, as one worker streaming them all would.
/// `collective::Shard::stream_share` makes one (this module does not reach other workers).
pub struct StreamShare<'a> {
    /// `(first global row, length)` runs of this worker's rows, in the order it streams them.
    pub spans: &'a [(u64, u64)],
    /// Rows of every worker together.
    pub n_global: usize,
    /// Every worker's bytes, in rank order (each worker calls it at the same point).
    pub all_gather: Box<AllGather<'a>>,
}

/// A collective's gather: every worker's bytes, in rank order.
pub type AllGather<'a> = dyn Fn(&[u8]) -> Result<Vec<Vec<u8>>> + Send + Sync + 'a;

impl StreamShare<'_> {
    fn n_local(&self) -> usize {
        self.spans.iter().map(|s| s.1 as usize).sum()
    }

    /// The global rows of this worker's rows `at..at + n`.
    fn global_rows(&self, at: usize, n: usize) -> BatchRows {
        let mut start = 0;
        for &(first, len) in self.spans {
            let len = len as usize;
            if at < start + len {
                if at + n <= start + len {
                    return BatchRows::From(first + (at - start) as u64);
                }
                break;
            }
            start += len;
        }
        let rows = self.spans.iter().flat_map(|&(first, len)| first..first + len);
        BatchRows::Listed(rows.skip(at).take(n).collect())
    }
}

/// A batch's rows among all the fit's rows: a run (most batches), or listed.
enum BatchRows {
    From(u64),
    Listed(Vec<u64>),
}

impl BatchRows {
    fn global(&self) -> GlobalRows<'_> {
        match self {
            BatchRows::From(first) => GlobalRows::From(*first),
            BatchRows::Listed(rows) => GlobalRows::Listed(rows),
        }
    }
}

/// Reads `source` twice (see the module's notes) into a dataset of binned rows.
pub fn stream_dataset(source: &mut dyn BatchSource, p: &StreamParams) -> Result<Dataset> {
    stream_dataset_with_progress(source, p, &mut |_| {})
}

/// [`stream_dataset`], telling `progress` how far each pass has come.
pub fn stream_dataset_with_progress(
    source: &mut dyn BatchSource,
    p: &StreamParams,
    progress: &mut Progress,
) -> Result<Dataset> {
    stream_rows(source, p, None, &mut |_, _| Ok(None), progress)
}

/// [`stream_dataset_with_progress`], pass 2 binning into the sink `sink_for` chooses once the
/// cut points are known (a GPU's memory), or into the host matrix when it chooses none.
pub fn stream_dataset_into(
    source: &mut dyn BatchSource,
    p: &StreamParams,
    sink_for: &mut SinkFor,
    progress: &mut Progress,
) -> Result<Dataset> {
    stream_rows(source, p, None, sink_for, progress)
}

/// [`stream_dataset_with_progress`] for one worker of a distributed fit: `source` gives this
/// worker's rows, placed among all rows by `share`; the cut points and categories are those
/// of every worker's rows (gathered at the end of pass 1), the bins and per-row vectors this
/// worker's.
pub fn stream_dataset_sharded(
    source: &mut dyn BatchSource,
    p: &StreamParams,
    share: &StreamShare,
    progress: &mut Progress,
) -> Result<Dataset> {
    stream_rows(source, p, Some(share), &mut |_, _| Ok(None), progress)
}

fn stream_rows(
    source: &mut dyn BatchSource,
    p: &StreamParams,
    share: Option<&StreamShare>,
    sink_for: &mut SinkFor,
    progress: &mut Progress,
) -> Result<Dataset> {
    if p.max_bin < 2 {
        return Err(Error::param("max_bin", "must be at least 2 (one value bin and the missing bin)"));
    }
    let n_local = match (share, source.n_rows()?) {
        (Some(share), Some(n)) if n != share.n_local() => {
            return Err(Error::data(format!(
                "this worker's data has {n} rows but its row spans count {}",
                share.n_local()
            )))
        }
        (Some(share), _) => share.n_local(),
        (None, Some(n)) => n,
        (None, None) => count_rows(source, progress)?,
    };
    if n_local == 0 {
        return Err(Error::data("the data has no rows"));
    }
    let clock = std::time::Instant::now();
    let total = Some(n_local);
    let mut first = FirstPass::new(p, n_local, share);
    source.pass(&mut |b| {
        first.add(b)?;
        progress(&PassProgress { pass: Pass::CutPoints, rows: first.digest.rows, total, done: false });
        Ok(())
    })?;
    progress(&PassProgress { pass: Pass::CutPoints, rows: first.digest.rows, total, done: true });
    profile("pass 1 (cut points' sample, categories, rows' digest)", clock);
    let FirstPass { schema, sketch, categories, digest: first_digest, .. } = first;
    let (Some(schema), Some(sketch)) = (schema, sketch) else {
        // The count (or the source) said there were rows: a stream read up already.
        return Err(changed("pass 1", 0, n_local));
    };
    if first_digest.rows != n_local {
        return Err(changed("pass 1", first_digest.rows, n_local));
    }
    let (sketch, categories) = match share {
        None => (sketch, categories),
        Some(share) => every_workers(share, &schema, p.seed, sketch, categories)?,
    };
    let categories: Vec<Option<Arc<Vec<String>>>> =
        categories.into_iter().map(|c| c.map(|set| Arc::new(set.into_iter().collect()))).collect();
    let mut cuts = sketch.cuts(p.max_bin)?;
    for ((cut, names), col) in cuts.iter_mut().zip(&categories).zip(schema.columns()) {
        if let Some(names) = names {
            if names.len() > MAX_CATEGORIES {
                return Err(Error::column(
                    col.name(),
                    format!("has {} categories; at most {MAX_CATEGORIES} are supported", names.len()),
                ));
            }
            *cut = FeatureCuts::Categorical { n_categories: names.len() as u32 };
        }
    }
    let schema = schema_frame(&schema, &categories)?;
    let mut sink = sink_for(n_local, &cuts)?;
    let mut matrix = BinnedMatrix::zeroed(if sink.is_some() { 0 } else { n_local }, &cuts);
    // The per-row vectors, read with the bins (so in their order) and checked against pass 1.
    let mut rows = PerRow::default();
    let mut digest = RowDigest::default();
    let mut at = 0;
    source.pass(&mut |b| {
        let n = b.data.n_rows();
        if n == 0 {
            return Ok(());
        }
        check_schema(&schema, b.data.features(), at)?;
        if at + n > n_local {
            return Err(changed("pass 2", at + n, n_local));
        }
        if at == 0 {
            rows.reserve(n_local, &b);
        }
        rows.add(&b)?;
        digest.add(&b);
        let frame = coded(b.data.features(), &categories, p.missing)?;
        match &mut sink {
            Some(sink) => {
                let most = sink.max_rows(&frame).max(1);
                for a in (0..n).step_by(most) {
                    let len = most.min(n - a);
                    match len == n {
                        true => sink.fill(at, &frame, &cuts)?,
                        false => sink.fill(at + a, &frame.row_range(a, len), &cuts)?,
                    }
                }
            }
            None => matrix.fill(at, &frame, &cuts),
        }
        at += n;
        progress(&PassProgress { pass: Pass::Binning, rows: at, total, done: false });
        Ok(())
    })?;
    if at != n_local {
        return Err(changed("pass 2", at, n_local));
    }
    if digest != first_digest {
        return Err(Error::data(format!(
            "the data gave other rows when read again (pass 2): the same number ({n_local}) but other labels, \
             weights, query ids or base margins. A streamed fit reads its data twice (cut points, then bins), so \
             the source must give the same rows each time, in any order: were its files changed between the passes?"
        )));
    }
    progress(&PassProgress { pass: Pass::Binning, rows: at, total, done: true });
    profile("pass 2 (bins)", clock);
    let elsewhere = match sink {
        Some(sink) => Some(ElsewhereBins(std::sync::Mutex::new(Some(sink.finish()?)))),
        None => None,
    };
    rows.into_dataset(schema, BinnedRows { matrix, cuts, elsewhere })
}

/// Every worker's cut points' sample merged (in rank order, as `collective::cuts` merges a
/// collected fit's) and the union of every worker's categories: what one worker streaming all
/// rows would have gathered.
fn every_workers(
    share: &StreamShare,
    schema: &FeatureFrame,
    seed: u64,
    mine: CutSketch,
    categories: Vec<Option<BTreeSet<String>>>,
) -> Result<(CutSketch, Vec<Option<BTreeSet<String>>>)> {
    // The features and categories first: their exchange tells whether the workers agree on
    // the features and which are categorical, which the sketches' layout depends on.
    type Gathered = (Vec<String>, Vec<Option<BTreeSet<String>>>);
    let features = schema.names();
    let mine_json =
        serde_json::to_vec(&(&features, &categories)).map_err(|e| Error::Collective(format!("categories: {e}")))?;
    let mut union = categories;
    for (rank, block) in (share.all_gather)(&mine_json)?.into_iter().enumerate() {
        let (names, theirs): Gathered = serde_json::from_slice(&block)
            .map_err(|_| Error::Collective("the categories from another worker are malformed".into()))?;
        if names != features {
            return Err(Error::data(format!(
                "worker {rank}'s data has the features {names:?}, this worker's {features:?}"
            )));
        }
        if theirs.iter().zip(&union).any(|(a, b)| a.is_some() != b.is_some()) {
            return Err(Error::data("the workers' data disagree on which features are categorical"));
        }
        for (set, names) in union.iter_mut().zip(theirs) {
            if let (Some(set), Some(names)) = (set, names) {
                set.extend(names);
            }
        }
    }
    let mine = mine.to_bytes();
    let mut sketch = CutSketch::new(schema, seed, share.n_global)?;
    for block in (share.all_gather)(&mine)? {
        sketch.merge_bytes(&block)?;
    }
    Ok((sketch, union))
}

/// One pass that counts `source`'s rows.
fn count_rows(source: &mut dyn BatchSource, progress: &mut Progress) -> Result<usize> {
    let mut n = 0;
    source.pass(&mut |b| {
        n += b.data.n_rows();
        progress(&PassProgress { pass: Pass::Count, rows: n, total: None, done: false });
        Ok(())
    })?;
    progress(&PassProgress { pass: Pass::Count, rows: n, total: None, done: true });
    Ok(n)
}

/// Reads `source` once into evaluation set `name` of a streamed fit on `train` (what
/// [`stream_dataset`] gave): each batch's features bound to the training features by name
/// (categories coded by the training categories; `missing` read as missing) and binned with the
/// training cut points, as the trainer bins a collected evaluation set, so the fit evaluates
/// the same bins. Only the bins and the per-row vectors are kept. The source need not know
/// its row count, nor be read again: a one-shot stream will do.
pub fn stream_eval_set(
    source: &mut dyn BatchSource,
    train: &Dataset,
    missing: Option<f32>,
    name: &str,
    progress: &mut Progress,
) -> Result<Dataset> {
    stream_eval_rows(source, train, missing, name, false, progress)
}

/// [`stream_eval_set`] for one worker of a distributed fit, which may hold none of the set's
/// rows (then an empty set with the training data's inputs: the other workers evaluate it).
pub fn stream_eval_set_sharded(
    source: &mut dyn BatchSource,
    train: &Dataset,
    missing: Option<f32>,
    name: &str,
    progress: &mut Progress,
) -> Result<Dataset> {
    stream_eval_rows(source, train, missing, name, true, progress)
}

fn stream_eval_rows(
    source: &mut dyn BatchSource,
    train: &Dataset,
    missing: Option<f32>,
    name: &str,
    may_be_empty: bool,
    progress: &mut Progress,
) -> Result<Dataset> {
    let Some(trained) = train.binned() else {
        return Err(Error::data(format!(
            "eval set `{name}` streams with a streamed training set (its cut points), not a collected one"
        )));
    };
    let total = source.n_rows()?;
    let schema = train.features();
    let mut matrix = BinnedMatrix::with_capacity(total.unwrap_or(0), trained.cuts());
    let mut rows = PerRow::default();
    let mut first: Option<FeatureFrame> = None;
    source
        .pass(&mut |b| {
            let n = b.data.n_rows();
            if n == 0 {
                return Ok(());
            }
            match &first {
                None => {
                    rows.reserve(total.unwrap_or(0), &b);
                    first = Some(b.data.features().row_range(0, 0));
                }
                Some(f) => check_schema(f, b.data.features(), rows.n)?,
            }
            let mut frame = b.data.features().bound_to(schema)?;
            if let Some(m) = missing {
                frame = frame.with_missing_value(m);
            }
            rows.add(&b)?;
            matrix.append(&frame, trained.cuts());
            progress(&PassProgress { pass: Pass::Eval(name), rows: rows.n, total, done: false });
            Ok(())
        })
        .map_err(|e| of_eval_set(e, name))?;
    progress(&PassProgress { pass: Pass::Eval(name), rows: rows.n, total, done: true });
    if rows.n == 0 && may_be_empty {
        return Ok(train.with_no_rows());
    }
    if rows.n == 0 {
        return Err(Error::data(format!("eval set `{name}` has no rows")));
    }
    if total.is_some_and(|n| n != rows.n) {
        return Err(Error::data(format!(
            "eval set `{name}` gave {} rows but said it had {}",
            rows.n,
            total.unwrap_or_default()
        )));
    }
    let schema = schema.row_range(0, 0);
    let binned = BinnedRows::new(matrix, trained.cuts().to_vec());
    rows.into_dataset(schema, binned).map_err(|e| of_eval_set(e, name))
}

/// `e`, an error of evaluation set `name`'s rows, saying so.
fn of_eval_set(e: Error, name: &str) -> Error {
    match e {
        Error::Column { column, reason } => Error::Column { column: format!("{column} of eval set `{name}`"), reason },
        Error::Data(reason) => Error::Data(format!("eval set `{name}`: {reason}")),
        e => e,
    }
}

/// Under `POLARS_GBT_PROFILE=1`, the seconds since `clock` when a pass ended.
fn profile(what: &str, clock: std::time::Instant) {
    if crate::profile::on() {
        eprintln!("polars-gbt profile: streamed {what} done at {:.3} s", clock.elapsed().as_secs_f64());
    }
}

/// The error of a source that gave other rows on a later pass.
fn changed(pass: &str, got: usize, expected: usize) -> Error {
    Error::data(format!(
        "the data gave {got} rows when read again ({pass}) but {expected} before: a streamed fit reads its data twice \
         (cut points, then bins), so the source must give the same rows each time (a lazy query or files, \
         not a one-shot stream)"
    ))
}

/// What pass 1 gathers: nothing that depends on the rows' order but the cut points' sample
/// (issue 57), so no per-row vector.
struct FirstPass<'p> {
    p: &'p StreamParams,
    /// This worker's rows (all rows, on one worker).
    n_local: usize,
    share: Option<&'p StreamShare<'p>>,
    /// The first batch's features, its columns telling the schema every batch must have.
    schema: Option<FeatureFrame>,
    sketch: Option<CutSketch>,
    /// Each categorical feature's categories so far (None for numeric features).
    categories: Vec<Option<BTreeSet<String>>>,
    /// The rows so far, and their per-row inputs' digest, which pass 2's must equal.
    digest: RowDigest,
}

impl<'p> FirstPass<'p> {
    fn new(p: &'p StreamParams, n_local: usize, share: Option<&'p StreamShare<'p>>) -> Self {
        let (schema, sketch, categories, digest) = (None, None, Vec::new(), RowDigest::default());
        FirstPass { p, n_local, share, schema, sketch, categories, digest }
    }

    fn add(&mut self, b: Batch) -> Result<()> {
        let n = b.data.n_rows();
        if n == 0 {
            return Ok(());
        }
        let features = b.data.features();
        match &self.schema {
            None => {
                // Only the columns' kinds are kept: no rows of the first batch stay alive.
                let empty = features
                    .columns()
                    .iter()
                    .map(|c| {
                        let col = FeatureColumn::new(c.name(), vec![new_empty_array(c.data_type())])?;
                        Ok(col.with_dtype_name(c.dtype_name()))
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.schema = Some(FeatureFrame::new(empty)?);
                let n_global = self.share.map_or(self.n_local, |s| s.n_global);
                let mut sketch = CutSketch::new(features, self.p.seed, n_global)?;
                // A tenth more than this worker's share of the expected sample (its spread is
                // about its square root), weights only where rows have weights of their own.
                let expected = CutSketch::expected_rows(n_global) * self.n_local / n_global;
                let weighted = b.data.weight().is_some() || self.p.scale_pos_weight != 1.0;
                sketch.reserve(expected + expected / 10 + 1024, weighted);
                self.sketch = Some(sketch);
                self.categories = features.columns().iter().map(|c| c.is_categorical().then(BTreeSet::new)).collect();
            }
            Some(schema) => check_schema(schema, features, self.digest.rows)?,
        }
        for (set, col) in self.categories.iter_mut().zip(features.columns()) {
            if let (Some(set), Some(names)) = (set, col.categories()) {
                set.extend(names.iter().cloned());
            }
        }
        let frame = match self.p.missing {
            Some(m) => features.with_missing_value(m),
            None => features.clone(),
        };
        // The sample is weighted as a collected fit's: positives' weights times scale_pos_weight.
        let scaled = (self.p.scale_pos_weight != 1.0).then(|| b.data.with_positive_weight(self.p.scale_pos_weight));
        let weights = match &scaled {
            Some(d) => d.weight(),
            None => b.data.weight(),
        };
        // A batch past the rows expected is an error before its rows are placed.
        let at = self.digest.rows;
        if at + n > self.n_local {
            return Err(changed("pass 1", at + n, self.n_local));
        }
        let global = match self.share {
            Some(share) => share.global_rows(at, n),
            None => BatchRows::From(at as u64),
        };
        self.sketch.as_mut().expect("made with the schema").add(&frame, weights, global.global());
        self.digest.add(&b);
        Ok(())
    }
}

/// Whether `frame` (a batch starting at global row `at`) has `schema`'s features: names,
/// kinds and data types.
fn check_schema(schema: &FeatureFrame, frame: &FeatureFrame, at: usize) -> Result<()> {
    if frame.names() != schema.names() {
        return Err(Error::data(format!(
            "the batch at row {at} has features {:?}, the first batch {:?}",
            frame.names(),
            schema.names()
        )));
    }
    for (a, b) in schema.columns().iter().zip(frame.columns()) {
        if a.is_categorical() != b.is_categorical() || a.dtype_name() != b.dtype_name() {
            return Err(Error::column(
                b.name(),
                format!("is {} in the batch at row {at} but {} in the first batch", b.dtype_name(), a.dtype_name()),
            ));
        }
    }
    Ok(())
}

/// `schema`'s columns with the categories of the whole stream.
fn schema_frame(schema: &FeatureFrame, categories: &[Option<Arc<Vec<String>>>]) -> Result<FeatureFrame> {
    FeatureFrame::new(
        schema
            .columns()
            .iter()
            .zip(categories)
            .map(|(c, names)| match names {
                Some(names) => c.with_categories(names),
                None => Ok(c.clone()),
            })
            .collect::<Result<_>>()?,
    )
}

/// A batch's features as the bins read them: categories coded by the whole stream's sorted
/// names (as the collected column codes them), the missing value read as missing.
fn coded(
    features: &FeatureFrame,
    categories: &[Option<Arc<Vec<String>>>],
    missing: Option<f32>,
) -> Result<FeatureFrame> {
    let columns = features
        .columns()
        .iter()
        .zip(categories)
        .map(|(c, names)| {
            let c = match names {
                Some(names) => c.with_categories(names)?,
                None => c.clone(),
            };
            Ok(match missing {
                Some(m) => c.with_missing_value(m),
                None => c,
            })
        })
        .collect::<Result<_>>()?;
    FeatureFrame::new(columns)
}

/// The per-row vectors of every batch, in the order of the batches whose bins they sit beside.
#[derive(Default)]
struct PerRow {
    n: usize,
    /// One vector per target, each of room for every row when their number is known (pages
    /// reserved take memory only as batches fill them); one target's is the dataset's label
    /// as it is, with no copy.
    label: Vec<Vec<f32>>,
    label_upper: Option<Vec<f32>>,
    weight: Option<Vec<f32>>,
    base_margin: Option<Vec<f32>>,
    group_ids: Option<Vec<i64>>,
}

impl PerRow {
    /// Room for `n` rows of the vectors `b` (the first batch) has.
    fn reserve(&mut self, n: usize, b: &Batch) {
        let d = &b.data;
        self.label = (0..d.n_targets()).map(|_| Vec::with_capacity(n)).collect();
        let room = |given: bool, per_row: usize| given.then(|| Vec::with_capacity(n * per_row));
        self.label_upper = room(d.label_upper().is_some(), 1);
        self.weight = room(d.weight().is_some(), 1);
        let k = d.base_margin().map_or(0, |m| m.len() / d.n_rows().max(1));
        self.base_margin = room(d.base_margin().is_some(), k);
        self.group_ids = b.group_ids.as_ref().map(|_| Vec::with_capacity(n));
    }

    fn add(&mut self, b: &Batch) -> Result<()> {
        let d = &b.data;
        let (n, k) = (d.n_rows(), d.n_targets());
        if k != self.label.len() {
            return Err(Error::column(
                "label",
                format!("has {k} targets in the batch at row {} but {} before", self.n, self.label.len()),
            ));
        }
        for (t, out) in self.label.iter_mut().enumerate() {
            out.extend_from_slice(&d.label()[t * n..(t + 1) * n]);
        }
        let at = self.n;
        let append = |name: &str, mine: &mut Option<Vec<f32>>, theirs: Option<&[f32]>| -> Result<()> {
            match (&mut *mine, theirs) {
                (Some(m), Some(v)) => m.extend_from_slice(v),
                (None, None) => {}
                _ => {
                    return Err(Error::column(name, format!("is given for some batches but not the batch at row {at}")))
                }
            }
            Ok(())
        };
        append("label_upper_bound", &mut self.label_upper, d.label_upper())?;
        append("weight", &mut self.weight, d.weight())?;
        append("base_margin", &mut self.base_margin, d.base_margin())?;
        if d.group_offsets().is_some() {
            return Err(Error::column(
                "group",
                "a batch's query groups come as ids (Batch::group_ids), not in its data",
            ));
        }
        if let Some(ids) = &b.group_ids {
            if ids.len() != n {
                return Err(Error::column("group", format!("has {} ids for a batch of {n} rows", ids.len())));
            }
        }
        match (&mut self.group_ids, &b.group_ids) {
            (Some(mine), Some(ids)) => mine.extend_from_slice(ids),
            (None, None) => {}
            _ => {
                return Err(Error::column("group", format!("is given for some batches but not the batch at row {at}")))
            }
        }
        self.n += n;
        Ok(())
    }

    fn into_dataset(self, schema: FeatureFrame, rows: BinnedRows) -> Result<Dataset> {
        let k = self.label.len();
        let label: Vec<f32> = match self.label.len() {
            1 => self.label.into_iter().next().expect("one target"),
            _ => self.label.concat(),
        };
        let mut d = Dataset::from_binned(schema, rows, self.n, label.into(), k)?;
        if let Some(u) = self.label_upper {
            d = d.with_label_upper_bound(u.into())?;
        }
        if let Some(w) = self.weight {
            d = d.with_weight(w)?;
        }
        if let Some(m) = self.base_margin {
            d = d.with_base_margin(m)?;
        }
        if let Some(ids) = self.group_ids {
            d = d.with_group_ids(&ids)?;
        }
        Ok(d)
    }
}

/// Arrow record batches, re-opened for each pass: `open` gives a fresh iterator of the same
/// batches each time. Every column but `label` is a feature.
pub struct RecordBatches<F> {
    open: F,
    label: String,
}

impl<F, I> RecordBatches<F>
where
    F: FnMut() -> Result<I>,
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    pub fn new(open: F, label: impl Into<String>) -> Self {
        RecordBatches { open, label: label.into() }
    }
}

impl<F, I> BatchSource for RecordBatches<F>
where
    F: FnMut() -> Result<I>,
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    fn pass(&mut self, each: &mut dyn FnMut(Batch) -> Result<()>) -> Result<()> {
        for batch in (self.open)()? {
            let batch = batch?;
            if batch.num_rows() > 0 {
                each(Batch::new(Dataset::from_record_batch(&batch, &self.label)?))?;
            }
        }
        Ok(())
    }
}
