//! A stream's features as every batch must give them: the first batch's columns (names,
//! kinds, data types) checked against each later one, and coded with the whole stream's
//! categories.

use std::sync::Arc;

use arrow_array::new_empty_array;

use crate::data::column::FeatureColumn;
use crate::data::frame::FeatureFrame;
use crate::error::{Error, Result};

/// `features`' columns with no rows: what the first batch tells of every batch's schema, with
/// no rows of it kept alive.
pub(super) fn empty_schema(features: &FeatureFrame) -> Result<FeatureFrame> {
    let empty = features
        .columns()
        .iter()
        .map(|c| {
            let col = FeatureColumn::new(c.name(), vec![new_empty_array(c.data_type())])?;
            Ok(col.with_dtype_name(c.dtype_name()))
        })
        .collect::<Result<Vec<_>>>()?;
    FeatureFrame::new(empty)
}

/// Whether `frame` (a batch starting at global row `at`) has `schema`'s features: names,
/// kinds and data types.
pub(super) fn check_schema(schema: &FeatureFrame, frame: &FeatureFrame, at: usize) -> Result<()> {
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
pub(super) fn schema_frame(schema: &FeatureFrame, categories: &[Option<Arc<Vec<String>>>]) -> Result<FeatureFrame> {
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
pub(super) fn coded(
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
