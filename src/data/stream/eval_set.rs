//! An evaluation set streamed in one pass: its batches binned with the training cut points as
//! they come, as the trainer bins a collected evaluation set.

use super::per_row::PerRow;
use super::progress::{Pass, PassProgress, Progress};
use super::schema::check_schema;
use super::source::BatchSource;
use crate::data::binned::BinnedMatrix;
use crate::data::binned_rows::BinnedRows;
use crate::data::dataset::Dataset;
use crate::data::frame::FeatureFrame;
use crate::error::{Error, Result};

/// Reads `source` once into evaluation set `name` of a streamed fit on `train` (what
/// [`stream_dataset`](super::stream_dataset) gave): each batch's features bound to the
/// training features by name (categories coded by the training categories; `missing` read as
/// missing) and binned with the training cut points, as the trainer bins a collected
/// evaluation set, so the fit evaluates the same bins. Only the bins and the per-row vectors
/// are kept. The source need not know its row count, nor be read again: a one-shot stream
/// will do.
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
