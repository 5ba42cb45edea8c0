//! Named feature columns of one length ([`FeatureFrame`]), and a numeric Arrow column read
//! as `f32` ([`column_to_f32`]: labels, weights and margins). What training needs besides the
//! features is the [`Dataset`](super::dataset::Dataset)'s.

use std::collections::HashSet;

use arrow_array::{ArrayRef, Float32Array, RecordBatch};
use arrow_buffer::ScalarBuffer;

use super::column::FeatureColumn;
use crate::error::{Error, Result};

/// Feature columns of equal length. Names are unique; an empty name is allowed only when
/// every name is empty (Polars passes unnamed columns inside `group_by`), and such a frame
/// is matched to a model by position.
#[derive(Clone, Debug)]
pub struct FeatureFrame {
    columns: Vec<FeatureColumn>,
    n_rows: usize,
}

impl FeatureFrame {
    pub fn new(columns: Vec<FeatureColumn>) -> Result<Self> {
        let Some(first) = columns.first() else {
            return Err(Error::data("no feature columns"));
        };
        let n_rows = first.len();
        if let Some(c) = columns.iter().find(|c| c.len() != n_rows) {
            return Err(Error::data(format!(
                "feature columns differ in length: `{}` has {} rows, `{}` has {}",
                first.name(),
                n_rows,
                c.name(),
                c.len()
            )));
        }
        let unnamed = columns.iter().filter(|c| c.name().is_empty()).count();
        if unnamed != 0 && unnamed != columns.len() {
            return Err(Error::data("some feature columns have names and some do not"));
        }
        if unnamed == 0 {
            let mut seen = HashSet::new();
            if let Some(c) = columns.iter().find(|c| !seen.insert(c.name())) {
                return Err(Error::column(c.name(), "appears twice among the features"));
            }
        }
        Ok(FeatureFrame { columns, n_rows })
    }

    /// All columns of a record batch as features.
    pub fn from_record_batch(batch: &RecordBatch) -> Result<Self> {
        Self::from_record_batches(std::slice::from_ref(batch))
    }

    /// All columns of several record batches (one schema) as multi-chunk features.
    pub fn from_record_batches(batches: &[RecordBatch]) -> Result<Self> {
        let Some(first) = batches.first() else {
            return Err(Error::data("no record batches"));
        };
        let schema = first.schema();
        if let Some(b) = batches.iter().find(|b| b.schema().fields() != schema.fields()) {
            return Err(Error::data(format!(
                "record batches have different schemas: {:?} vs {:?}",
                schema,
                b.schema()
            )));
        }
        let columns = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| FeatureColumn::new(f.name().clone(), batches.iter().map(|b| b.column(i).clone()).collect()))
            .collect::<Result<Vec<_>>>()?;
        Self::new(columns)
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    pub fn n_features(&self) -> usize {
        self.columns.len()
    }

    pub fn columns(&self) -> &[FeatureColumn] {
        &self.columns
    }

    pub fn column(&self, i: usize) -> &FeatureColumn {
        &self.columns[i]
    }

    pub fn names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.name().to_string()).collect()
    }

    /// The same frame, values equal to `value` in numeric columns read as missing.
    pub fn with_missing_value(&self, value: f32) -> FeatureFrame {
        FeatureFrame {
            columns: self.columns.iter().map(|c| c.clone().with_missing_value(value)).collect(),
            n_rows: self.n_rows,
        }
    }

    pub fn is_unnamed(&self) -> bool {
        self.columns.iter().all(|c| c.name().is_empty())
    }

    /// This frame without the named columns (for taking the label out of a batch).
    pub fn without(&self, names: &[&str]) -> Result<Self> {
        Self::new(self.columns.iter().filter(|c| !names.contains(&c.name())).cloned().collect())
    }

    /// Rows `start..start + len`, sharing the columns' Arrow buffers.
    pub fn row_range(&self, start: usize, len: usize) -> FeatureFrame {
        FeatureFrame { columns: self.columns.iter().map(|c| c.row_range(start, len)).collect(), n_rows: len }
    }

    /// The named column, if present.
    pub fn find(&self, name: &str) -> Option<&FeatureColumn> {
        self.columns.iter().find(|c| c.name() == name)
    }

    /// This frame's columns as the features of `schema` (a fit's training features): found by
    /// name (by position when `schema` is unnamed), in `schema`'s order, and a categorical
    /// column coded by `schema`'s categories (one they lack reads as unseen, as in scoring).
    /// A missing column, or one numeric where `schema`'s is categorical or the reverse, is an
    /// error. Other columns are left out.
    pub fn bound_to(&self, schema: &FeatureFrame) -> Result<FeatureFrame> {
        let columns: Vec<&FeatureColumn> = if schema.is_unnamed() {
            if self.n_features() != schema.n_features() {
                return Err(Error::data(format!(
                    "the training data has {} features but {} unnamed columns were given",
                    schema.n_features(),
                    self.n_features()
                )));
            }
            self.columns.iter().collect()
        } else {
            let missing: Vec<&str> =
                schema.columns.iter().map(|c| c.name()).filter(|name| self.find(name).is_none()).collect();
            if !missing.is_empty() {
                return Err(Error::data(format!("columns missing for the training features: {}", missing.join(", "))));
            }
            schema.columns.iter().map(|c| self.find(c.name()).expect("checked above")).collect()
        };
        let bound = columns
            .into_iter()
            .zip(&schema.columns)
            .map(|(col, trained)| match (trained.categories(), col.is_categorical()) {
                (Some(names), true) => col.with_categories(names),
                (None, false) => Ok(col.clone()),
                (Some(_), false) => Err(Error::column(
                    trained.name(),
                    format!("was categorical in training ({}) but is {} here", trained.dtype_name(), col.dtype_name()),
                )),
                (None, true) => Err(Error::column(
                    trained.name(),
                    format!(
                        "was numeric in training ({}) but is categorical ({}) here",
                        trained.dtype_name(),
                        col.dtype_name()
                    ),
                )),
            })
            .collect::<Result<_>>()?;
        FeatureFrame::new(bound)
    }
}

/// A numeric Arrow column (one or more chunks) as `f32`, for labels, weights and margins.
/// Nulls are an error naming the column; NaN and infinities are passed through for the
/// caller to judge (labels reject them, margins too).
/// A single `Float32` chunk is shared, not copied (a label is 4 bytes a row of a fit's memory).
pub fn column_to_f32(name: &str, chunks: &[ArrayRef]) -> Result<ScalarBuffer<f32>> {
    let col = FeatureColumn::new(name, chunks.to_vec())?;
    if col.is_categorical() {
        return Err(Error::column(name, "must be numeric, not categorical"));
    }
    let nulls: usize = chunks.iter().map(|c| c.logical_null_count()).sum();
    if nulls > 0 {
        return Err(Error::column(name, format!("has {nulls} null values")));
    }
    if let [chunk] = chunks {
        if let Some(values) = chunk.as_any().downcast_ref::<Float32Array>() {
            return Ok(values.values().clone());
        }
    }
    let mut out = vec![0f32; col.len()];
    col.read(0, &mut out);
    Ok(out.into())
}
