//! What prediction takes and gives, shared by the model and the backends: the output kinds
//! ([`PredictOutput`], the one list of their names), the predictions ([`Predictions`]), what a
//! model hands a backend to lay its trees out ([`ForestSpec`]), and the last step from margins
//! to an output ([`finish`]). It sits below both `model` and `backend`, so a backend's
//! predictor needs nothing from the model.

use std::sync::Arc;

use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, UInt32Array};
use arrow_schema::{DataType, Field};
use serde::{Deserialize, Serialize};

use crate::config::Objective;
use crate::error::{Error, Result};
use crate::objective::transform_row;
use crate::tree::Tree;

/// What `predict` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictOutput {
    /// Raw scores before the link function.
    Margin,
    /// Probabilities, means or scores in the objective's output space.
    Value,
    /// Class index (binary: probability > 0.5).
    Class,
    /// The leaf each row reaches in each tree.
    Leaf,
    /// SHAP values (exact TreeSHAP), XGBoost's `pred_contribs` layout: per output, one value
    /// per feature and the bias last; they sum to the margin.
    Contrib,
    /// SHAP interaction values, XGBoost's `pred_interactions` layout: per output, a matrix of
    /// (features + 1) squared, main effects on the diagonal, the bias at the last corner.
    Interaction,
}

impl PredictOutput {
    /// Every output, in the order messages and the Python package list them.
    pub const ALL: [PredictOutput; 6] = [
        PredictOutput::Value,
        PredictOutput::Margin,
        PredictOutput::Class,
        PredictOutput::Leaf,
        PredictOutput::Contrib,
        PredictOutput::Interaction,
    ];

    /// The name `output=` takes.
    pub fn name(self) -> &'static str {
        match self {
            PredictOutput::Margin => "margin",
            PredictOutput::Value => "value",
            PredictOutput::Class => "class",
            PredictOutput::Leaf => "leaf",
            PredictOutput::Contrib => "contrib",
            PredictOutput::Interaction => "interaction",
        }
    }
}

impl std::str::FromStr for PredictOutput {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        PredictOutput::ALL.into_iter().find(|o| o.name() == s).ok_or_else(|| {
            let names: Vec<String> = PredictOutput::ALL.iter().map(|o| format!("\"{}\"", o.name())).collect();
            Error::param("output", format!("`{s}` is not one of {}", names.join(", ")))
        })
    }
}

/// Predictions, row-major with `width` values per row.
#[derive(Clone, Debug, PartialEq)]
pub enum Predictions {
    Float { values: Vec<f32>, width: usize },
    Index { values: Vec<u32>, width: usize },
}

impl Predictions {
    /// As an Arrow array: one value per row, or a fixed-size list of `width` per row.
    pub fn to_arrow(&self) -> ArrayRef {
        fn wrap(values: ArrayRef, width: usize, dtype: DataType) -> ArrayRef {
            if width == 1 {
                values
            } else {
                let field = Arc::new(Field::new("item", dtype, false));
                Arc::new(FixedSizeListArray::new(field, width as i32, values, None))
            }
        }
        match self {
            Predictions::Float { values, width } => {
                wrap(Arc::new(Float32Array::from(values.clone())), *width, DataType::Float32)
            }
            Predictions::Index { values, width } => {
                wrap(Arc::new(UInt32Array::from(values.clone())), *width, DataType::UInt32)
            }
        }
    }
}

/// What a backend's predictor is built from: a model's trees and what scoring them needs.
#[derive(Clone, Debug)]
pub struct ForestSpec<'a> {
    /// Round-major: tree `t` adds to output `t % n_outputs`.
    pub trees: &'a [Tree],
    pub n_outputs: usize,
    /// Starting margin of each output, when no per-row margins are given.
    pub base_margin: &'a [f32],
    /// One entry per feature: its category count when categorical (codes are bins), else None.
    pub n_categories: Vec<Option<u32>>,
    /// The objective, for its link function (and multi:softmax's class values).
    pub objective: Objective,
}

impl ForestSpec<'_> {
    pub fn n_features(&self) -> usize {
        self.n_categories.len()
    }
}

/// The element type of rows in device memory ([`DeviceRows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceFloat {
    F32,
    F64,
}

impl DeviceFloat {
    pub fn bytes(self) -> usize {
        match self {
            DeviceFloat::F32 => 4,
            DeviceFloat::F64 => 8,
        }
    }
}

/// Rows to score that lie in GPU memory the caller owns (another library's array, borrowed
/// for one call): element (r, f) at `ptr + (r * row_stride + f * col_stride) * dtype.bytes()`,
/// strides in elements and of any sign (C order, Fortran order, slices). Columns are the
/// model's features by position; categorical features hold the model's category codes.
#[derive(Clone, Copy, Debug)]
pub struct DeviceRows {
    pub ptr: u64,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: i64,
    pub col_stride: i64,
    pub dtype: DeviceFloat,
}

impl DeviceRows {
    /// The bytes `[first, end)` the rows' elements span (None for no elements, or strides
    /// whose offsets overflow).
    pub fn byte_span(&self) -> Option<(u64, u64)> {
        byte_span(self.ptr, &[(self.rows, self.row_stride), (self.cols, self.col_stride)], self.dtype.bytes())
    }
}

/// Where scores of device rows go: `len` four-byte values (f32, or u32 for leaves and
/// classes: `index`), row-major and contiguous, in GPU memory the caller owns.
#[derive(Clone, Copy, Debug)]
pub struct DeviceOut {
    pub ptr: u64,
    pub len: usize,
    pub index: bool,
}

/// The caller's arrays for one call of `Predictor::predict_device`, once exported to the
/// stream that call queues its work on, with the caller's streams (CUstream handles; 1 and 2
/// are CUDA's legacy and per-thread default streams) whose queued work must finish before
/// the rows are read or the output written.
#[derive(Clone, Debug)]
pub struct DeviceBinding {
    pub rows: DeviceRows,
    pub out: DeviceOut,
    pub wait_for: Vec<u64>,
}

/// Exports the caller's arrays to the stream whose CUstream handle it is given (DLPack's
/// `__dlpack__(stream=...)`), before anything reads them.
pub type ExportArrays<'a> = dyn FnMut(u64) -> Result<DeviceBinding> + 'a;

/// The bytes `[first, end)` spanned by an array at `ptr` of `(extent, stride)` dimensions
/// (strides in elements of `item` bytes); None when it has no elements or overflows.
pub fn byte_span(ptr: u64, dims: &[(usize, i64)], item: usize) -> Option<(u64, u64)> {
    if dims.iter().any(|&(n, _)| n == 0) {
        return None;
    }
    let (mut low, mut high) = (0i128, 0i128);
    for &(n, stride) in dims {
        let reach = (n as i128 - 1) * stride as i128;
        if reach < 0 {
            low += reach;
        } else {
            high += reach;
        }
    }
    let first = ptr as i128 + low * item as i128;
    let end = ptr as i128 + (high + 1) * item as i128;
    (first >= 0 && end <= u64::MAX as i128).then_some((first as u64, end as u64))
}

/// Row-major margins (`k` per row) as `output` (not leaves): the link function for values,
/// the largest margin's index for classes (binary: margin above 0).
pub fn finish(objective: Objective, k: usize, mut margin: Vec<f32>, output: PredictOutput) -> Predictions {
    match output {
        PredictOutput::Margin => Predictions::Float { values: margin, width: k },
        PredictOutput::Value if objective.predicts_classes() => finish(objective, k, margin, PredictOutput::Class),
        PredictOutput::Value => {
            margin.chunks_mut(k).for_each(|row| transform_row(objective, row));
            Predictions::Float { values: margin, width: k }
        }
        PredictOutput::Class => {
            let classes = if k == 1 {
                margin.iter().map(|&m| (m > 0.0) as u32).collect()
            } else {
                margin.chunks(k).map(|row| (0..k).fold(0, |b, c| if row[c] > row[b] { c } else { b }) as u32).collect()
            };
            Predictions::Index { values: classes, width: 1 }
        }
        PredictOutput::Leaf | PredictOutput::Contrib | PredictOutput::Interaction => {
            unreachable!("leaves and SHAP values are not made from margins")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_spans_cover_every_element_for_any_strides() {
        // 3 x 2 float32 at 1000, C order, Fortran order, and rows reversed (a view starting
        // at the last row): the same 24 bytes.
        assert_eq!(byte_span(1000, &[(3, 2), (2, 1)], 4), Some((1000, 1024)));
        assert_eq!(byte_span(1000, &[(3, 1), (2, 3)], 4), Some((1000, 1024)));
        assert_eq!(byte_span(1016, &[(3, -2), (2, 1)], 4), Some((1000, 1024)));
        // Every other column of a wider array: the last element ends the span.
        assert_eq!(byte_span(1000, &[(3, 4), (2, 2)], 8), Some((1000, 1000 + 11 * 8)));
        // No elements; a span before address 0.
        assert_eq!(byte_span(1000, &[(0, 2), (2, 1)], 4), None);
        assert_eq!(byte_span(4, &[(3, -1)], 4), None);
    }

    #[test]
    fn output_names_parse_back_and_match_serde() {
        for o in PredictOutput::ALL {
            assert_eq!(o.name().parse::<PredictOutput>().unwrap(), o);
            assert_eq!(serde_json::to_value(o).unwrap(), serde_json::Value::String(o.name().into()));
        }
        let e = "probability".parse::<PredictOutput>().unwrap_err().to_string();
        assert!(e.contains(r#"`probability` is not one of "value", "margin", "class", "leaf""#), "{e}");
    }
}
