//! Polars `Series` to the crate's Arrow columns (zero-copy, through the Arrow C data
//! interface) and predictions back to `Series`.

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use polars::prelude::*;
use polars_arrow::array::{FixedSizeListArray, PrimitiveArray};
use polars_arrow::datatypes::{ArrowDataType, Field as ArrowField};

use crate::{Error, FeatureColumn, Predictions};

/// The crate's error as a Polars error: Python sees `polars.exceptions.ComputeError` with
/// the message, which names the parameter or column at fault.
pub fn to_polars(e: Error) -> PolarsError {
    PolarsError::ComputeError(e.to_string().into())
}

/// One Polars column as a feature column, by the rules of `dtypes` (most dtypes over the
/// same buffers), its dtype named as Polars names it. `display` names the column in errors
/// (columns inside `group_by().agg()` come unnamed).
pub fn feature_column(s: &Series, display: &str) -> PolarsResult<FeatureColumn> {
    let readable = super::dtypes::as_feature(s, display)?;
    Ok(arrow_column(&readable)?.with_dtype_name(super::dtypes::dtype_name(s.dtype())))
}

/// A Series (of a dtype the crate reads) as a column over the same buffers.
fn arrow_column(s: &Series) -> PolarsResult<FeatureColumn> {
    let name = s.name().to_string();
    let chunks = (0..s.n_chunks())
        .map(|i| {
            let array = s.to_arrow(i, CompatLevel::newest());
            let field = ArrowField::new(PlSmallStr::EMPTY, array.dtype().clone(), true);
            let c_array = polars_arrow::ffi::export_array_to_c(array);
            let c_schema = polars_arrow::ffi::export_field_to_c(&field);
            // SAFETY: polars-arrow's ArrowArray/ArrowSchema and arrow-rs's FFI_ArrowArray/
            // FFI_ArrowSchema are both the `#[repr(C)]` structs of the Arrow C data
            // interface (transmute checks the sizes), and ownership (the release callbacks)
            // moves with them.
            let (c_array, c_schema) = unsafe {
                (
                    std::mem::transmute::<polars_arrow::ffi::ArrowArray, FFI_ArrowArray>(c_array),
                    std::mem::transmute::<polars_arrow::ffi::ArrowSchema, FFI_ArrowSchema>(c_schema),
                )
            };
            // SAFETY: the structs were just exported by polars-arrow, so they are valid.
            let data = unsafe { from_ffi(c_array, &c_schema) }
                .map_err(|e| polars_err!(ComputeError: "column `{}`: cannot read its Arrow data: {}", name, e))?;
            Ok(arrow_array::make_array(data))
        })
        .collect::<PolarsResult<Vec<_>>>()?;
    if chunks.is_empty() {
        polars_bail!(ComputeError: "column `{}` has no data", name);
    }
    FeatureColumn::new(name, chunks).map_err(to_polars)
}

/// A numeric or Boolean column as `f32` (labels, weights, margins), sharing a `Float32`
/// column's buffer; nulls are an error. `what` names the column's role in errors.
pub fn f32_column(s: &Series, what: &str) -> PolarsResult<arrow_buffer::ScalarBuffer<f32>> {
    let col = arrow_column(&super::dtypes::as_number(s, what)?)?;
    crate::data::frame::column_to_f32(what, col.chunks()).map_err(to_polars)
}

/// Predictions as a Series: `Float32`/`UInt32`, or a fixed-size `Array` of `width` per row.
pub fn predictions_series(name: PlSmallStr, p: Predictions) -> PolarsResult<Series> {
    let (values, width, dtype): (Box<dyn polars_arrow::array::Array>, usize, ArrowDataType) = match p {
        Predictions::Float { values, width } => {
            (Box::new(PrimitiveArray::from_vec(values)), width, ArrowDataType::Float32)
        }
        Predictions::Index { values, width } => {
            (Box::new(PrimitiveArray::from_vec(values)), width, ArrowDataType::UInt32)
        }
    };
    if width == 1 {
        return Series::from_arrow(name, values);
    }
    let rows = values.len() / width;
    let field = ArrowField::new(PlSmallStr::from_static("item"), dtype, true);
    let list = FixedSizeListArray::new(ArrowDataType::FixedSizeList(Box::new(field), width), rows, values, None);
    Series::from_arrow(name, Box::new(list))
}
