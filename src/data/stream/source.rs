//! Where a stream's rows come from: a [`BatchSource`] that gives the same rows on every pass,
//! one [`Batch`] at a time (Arrow record batches re-opened for each pass: [`RecordBatches`]),
//! and the error of a source that did not.

use arrow_array::RecordBatch;

use super::progress::{Pass, PassProgress, Progress};
use crate::data::dataset::Dataset;
use crate::error::{Error, Result};

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

/// One pass that counts `source`'s rows.
pub(super) fn count_rows(source: &mut dyn BatchSource, progress: &mut Progress) -> Result<usize> {
    let mut n = 0;
    source.pass(&mut |b| {
        n += b.data.n_rows();
        progress(&PassProgress { pass: Pass::Count, rows: n, total: None, done: false });
        Ok(())
    })?;
    progress(&PassProgress { pass: Pass::Count, rows: n, total: None, done: true });
    Ok(n)
}

/// The error of a source that gave other rows on a later pass.
pub(super) fn changed(pass: &str, got: usize, expected: usize) -> Error {
    Error::data(format!(
        "the data gave {got} rows when read again ({pass}) but {expected} before: a streamed fit reads its data twice \
         (cut points, then bins), so the source must give the same rows each time (a lazy query or files, \
         not a one-shot stream)"
    ))
}
