//! Training data streamed in batches, never whole (issue 36): a [`BatchSource`] read twice.
//!
//! * Pass 1: what does not depend on the rows' order: the cut points' sample, batch by batch,
//!   through the one [`CutSketch`] every fit uses (a row is sampled by a hash of the seed and
//!   its global row, so the sketch of the batches is the sketch of all rows, whatever the
//!   batching: the cuts are the same bit for bit); the union of each categorical column's
//!   categories (coded, as a collected column's are, by their sorted names); the row count and
//!   an order-free digest of the rows' per-row inputs (`RowDigest`).
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
//!
//! * `source`: the [`BatchSource`] read on every pass, one [`Batch`] at a time.
//! * `cut_points_pass`: pass 1, ending in the stream's cut points.
//! * `binning_pass`: pass 2, the bins (into the host matrix or a [`BinSink`]).
//! * `per_row`: the per-row vectors kept beside the bins.
//! * `row_digest`: the digest that tells the two passes read the same rows.
//! * `schema`: the features every batch must give, coded with the stream's categories.
//! * `share`: one worker's share of a distributed fit ([`StreamShare`]).
//! * `eval_set`: an evaluation set, streamed in one pass.
//! * `progress`: how far each pass has come.
//!
//! [`CutSketch`]: crate::data::cuts::CutSketch
//! [`BinnedMatrix::fill`]: crate::data::binned::BinnedMatrix::fill
//! [`BinnedRows`]: crate::data::BinnedRows

mod binning_pass;
mod cut_points_pass;
mod eval_set;
mod per_row;
mod progress;
mod row_digest;
mod schema;
mod share;
mod source;

pub use binning_pass::{BinSink, SinkFor};
pub use eval_set::{stream_eval_set, stream_eval_set_sharded};
pub use progress::{Pass, PassProgress, Progress};
pub use share::{AllGather, StreamShare};
pub use source::{Batch, BatchSource, RecordBatches};

use binning_pass::BinningPass;
use cut_points_pass::FirstPass;
use progress::profile;
use source::count_rows;

use crate::data::dataset::Dataset;
use crate::error::{Error, Result};

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

/// The two passes (see the module's notes) over this worker's rows, `share` placing them among
/// a distributed fit's, pass 2 binning into the sink `sink_for` chooses, if any.
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
    let n_local = rows_to_stream(source, share, progress)?;
    let clock = std::time::Instant::now();
    let first = FirstPass::read(source, p, n_local, share, progress)?;
    profile("pass 1 (cut points' sample, categories, rows' digest)", clock);
    let cut_points = first.cut_points()?;
    let second = BinningPass::read(source, p.missing, n_local, cut_points, sink_for, progress)?;
    profile("pass 2 (bins)", clock);
    second.into_dataset()
}

/// This worker's rows (all rows, on one worker): as its share or the source tells them, else
/// counted by one more pass; none is an error.
fn rows_to_stream(source: &mut dyn BatchSource, share: Option<&StreamShare>, progress: &mut Progress) -> Result<usize> {
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
    Ok(n_local)
}
