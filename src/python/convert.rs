//! Polars `Series` to the crate's Arrow columns (zero-copy, through the Arrow C data
//! interface) and predictions back to `Series`.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::types::{ArrowDictionaryKeyType, UInt16Type, UInt32Type, UInt8Type};
// arrow-rs's arrays (the crate's columns) as `RsArray`: Polars' prelude has an `ArrayRef` of its own.
use arrow_array::{Array as _, ArrayRef as RsArray, DictionaryArray, StringArray};
use arrow_buffer::ArrowNativeType;
use polars::prelude::*;
use polars_arrow::array::{Array, FixedSizeListArray, ListArray, PrimitiveArray};
use polars_arrow::datatypes::{ArrowDataType, Field as ArrowField};
use rayon::prelude::*;

use super::to_polars;
use crate::{Error, FeatureColumn, Predictions};

/// One Polars column as a feature column, by the rules of `dtypes` (most dtypes over the
/// same buffers), its dtype named as Polars names it. `display` names the column in errors
/// (columns inside `group_by().agg()` come unnamed).
pub fn feature_column(s: &Series, display: &str) -> PolarsResult<FeatureColumn> {
    let column = match s.dtype() {
        DataType::Categorical(_, mapping) => categorical_column(s, mapping)?,
        _ => arrow_column(&super::dtypes::as_feature(s, display)?)?,
    };
    Ok(column.with_dtype_name(super::dtypes::dtype_name(s.dtype())))
}

/// A Series (of a dtype the crate reads) as a column over the same buffers.
fn arrow_column(s: &Series) -> PolarsResult<FeatureColumn> {
    FeatureColumn::new(s.name().to_string(), arrow_chunks(s)?).map_err(to_polars)
}

/// A `Categorical` Series (Polars 2's categories, global to the process) as a dictionary
/// column over its physical ids, with no per-row work but one pass that finds the ids present
/// (issue 61). Polars' own export to Arrow (`Series::to_arrow`) renumbers the ids row by row
/// through a hash set, to list only the categories present: 20 times an `Enum`'s cost. Here
/// the ids are the keys as they are, and one dictionary shared by every chunk names the
/// present ids (the absent ones null), so the column's categories are the present ones, as
/// with Polars' export: the same model bytes.
fn categorical_column(s: &Series, mapping: &CategoricalMapping) -> PolarsResult<FeatureColumn> {
    ids_column(s.name(), &s.to_physical_repr(), |id| mapping.cat_to_str(id as CatSize))
}

/// A `Categorical` column that reached the plugin as its physical ids (`ids`, UInt8/16/32)
/// with its categories' names in id order (`names`: `polars_gbt.train` sends a frame's
/// `Categorical` columns so, sparing Polars' row-by-row export of them to the plugin): the
/// column [`categorical_column`] reads from the Categorical itself.
pub fn categorical_ids_column(ids: &Series, names: &[String]) -> PolarsResult<FeatureColumn> {
    if !matches!(ids.dtype(), DataType::UInt8 | DataType::UInt16 | DataType::UInt32) {
        return Err(to_polars(Error::column(
            ids.name().as_str(),
            format!("came as {} where its categorical ids were expected", ids.dtype()),
        )));
    }
    let column = ids_column(ids.name(), ids, |id| names.get(id).map(String::as_str))?;
    Ok(column.with_dtype_name("Categorical"))
}

/// The column `name` over the category ids `ids` (UInt8/16/32), each present id named by
/// `name_of`.
fn ids_column<'n>(name: &str, ids: &Series, name_of: impl Fn(usize) -> Option<&'n str>) -> PolarsResult<FeatureColumn> {
    let ids = arrow_chunks(ids)?;
    let present = present_ids(&ids);
    let names: StringArray = present
        .iter()
        .enumerate()
        .map(|(id, &here)| match here {
            true => name_of(id).map(Some).ok_or_else(
                || polars_err!(ComputeError: "column `{}`: category id {} has no name in its categories", name, id),
            ),
            false => Ok(None),
        })
        .collect::<PolarsResult<_>>()?;
    let names: RsArray = Arc::new(names);
    let chunks = ids
        .iter()
        .map(|keys| match keys.data_type() {
            arrow_schema::DataType::UInt8 => Ok(dictionary::<UInt8Type>(keys, &names)),
            arrow_schema::DataType::UInt16 => Ok(dictionary::<UInt16Type>(keys, &names)),
            arrow_schema::DataType::UInt32 => Ok(dictionary::<UInt32Type>(keys, &names)),
            t => Err(polars_err!(ComputeError: "column `{}`: categorical ids of type {} are not supported", name, t)),
        })
        .collect::<PolarsResult<Vec<_>>>()?;
    FeatureColumn::new(name.to_string(), chunks).map_err(to_polars)
}

/// Whether each id up to the largest present is the id of some non-null row of `ids`. Pieces
/// of a million rows are read on the pool, each for its largest id and then its ids (so that
/// the marking has no branch to grow its table), and their sets merged: one serial walk over
/// 98M ids was most of a 16M-row frame's host time on the GPU (issue 61).
fn present_ids(ids: &[RsArray]) -> Vec<bool> {
    const PIECE: usize = 1 << 20;
    fn each_valid<K: arrow_array::ArrowPrimitiveType>(array: &RsArray, mut f: impl FnMut(usize)) {
        let keys = array.as_primitive::<K>();
        match keys.nulls().filter(|n| n.null_count() > 0) {
            None => keys.values().iter().for_each(|&k| f(k.as_usize())),
            Some(nulls) => {
                keys.values().iter().zip(nulls.iter()).filter(|(_, valid)| *valid).for_each(|(&k, _)| f(k.as_usize()))
            }
        }
    }
    fn each(array: &RsArray, f: impl FnMut(usize)) {
        match array.data_type() {
            arrow_schema::DataType::UInt8 => each_valid::<UInt8Type>(array, f),
            arrow_schema::DataType::UInt16 => each_valid::<UInt16Type>(array, f),
            arrow_schema::DataType::UInt32 => each_valid::<UInt32Type>(array, f),
            _ => {}
        }
    }
    let pieces: Vec<RsArray> = ids
        .iter()
        .flat_map(|a| (0..a.len()).step_by(PIECE).map(move |start| a.slice(start, PIECE.min(a.len() - start))))
        .collect();
    let sets: Vec<Vec<bool>> = pieces
        .par_iter()
        .map(|piece| {
            let mut largest = None;
            each(piece, |k| largest = largest.max(Some(k)));
            let mut present = vec![false; largest.map_or(0, |k| k + 1)];
            each(piece, |k| present[k] = true);
            present
        })
        .collect();
    let mut present = vec![false; sets.iter().map(Vec::len).max().unwrap_or(0)];
    for set in &sets {
        present.iter_mut().zip(set).for_each(|(p, &here)| *p |= here);
    }
    present
}

/// `keys` (ids) as a dictionary array of `names`, sharing the keys' buffers. Every non-null
/// key is an index into `names` ([`present_ids`] sized them by the largest).
fn dictionary<K: ArrowDictionaryKeyType>(keys: &RsArray, names: &RsArray) -> RsArray {
    let keys = keys.as_primitive::<K>().clone();
    // SAFETY: `names` has an entry for every id of a non-null key (its length is one past the
    // largest), which is all arrow-rs's checked constructor would check, row by row.
    Arc::new(unsafe { DictionaryArray::<K>::new_unchecked(keys, names.clone()) })
}

/// A Series' chunks as arrow-rs arrays over the same buffers.
fn arrow_chunks(s: &Series) -> PolarsResult<Vec<RsArray>> {
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
    Ok(chunks)
}

/// A numeric or Boolean column as `f32` (labels, weights, margins), sharing a `Float32`
/// column's buffer; nulls are an error. `what` names the column's role in errors.
pub fn f32_column(s: &Series, what: &str) -> PolarsResult<arrow_buffer::ScalarBuffer<f32>> {
    let col = arrow_column(&super::dtypes::as_number(s, what)?)?;
    crate::data::frame::column_to_f32(what, col.chunks()).map_err(to_polars)
}

/// Per-row margins, row-major, with the number per row: a numeric column gives one per row;
/// an `Array` or `List` column gives its width (every row the same length: a multiclass
/// model's `num_class`). Nulls, at either level, are an error naming `what`.
pub fn margin_values(s: &Series, what: &str) -> PolarsResult<(Vec<f32>, usize)> {
    if !matches!(s.dtype(), DataType::Array(..) | DataType::List(_)) {
        return Ok((f32_column(s, what)?.to_vec(), 1));
    }
    let nulls = s.null_count();
    if nulls > 0 {
        return Err(to_polars(Error::column(what, format!("has {nulls} null rows"))));
    }
    let n = s.len();
    if n == 0 {
        return Ok((Vec::new(), 1));
    }
    let s = s.rechunk();
    let array = s.to_arrow(0, CompatLevel::newest());
    let (values, width): (Box<dyn Array>, usize) = if let Some(a) = array.as_any().downcast_ref::<FixedSizeListArray>()
    {
        // A fixed-size list's values are sliced with it.
        (a.values().clone(), a.size())
    } else if let Some(a) = array.as_any().downcast_ref::<ListArray<i64>>() {
        let offsets = a.offsets().as_slice();
        let width = (offsets[1] - offsets[0]) as usize;
        if let Some(i) = offsets.windows(2).position(|w| (w[1] - w[0]) as usize != width) {
            return Err(to_polars(Error::column(
                what,
                format!(
                    "row {i} has {} values but row 0 has {width}: every row needs the same number",
                    offsets[i + 1] - offsets[i]
                ),
            )));
        }
        let start = offsets[0] as usize;
        (a.values().sliced(start, offsets[n] as usize - start), width)
    } else {
        return Err(to_polars(Error::column(what, format!("cannot read a column of {}", s.dtype()))));
    };
    if width == 0 {
        return Err(to_polars(Error::column(what, "has rows of no values")));
    }
    let inner = Series::from_arrow(PlSmallStr::from(what), values)?;
    if !inner.dtype().is_primitive_numeric() {
        return Err(to_polars(Error::column(what, format!("must hold numbers, not {}", inner.dtype()))));
    }
    Ok((f32_column(&inner, what)?.to_vec(), width))
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
