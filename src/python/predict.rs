//! The `gbt.predict` expression: elementwise, so it runs batch by batch in lazy and streaming
//! queries. The model is a constant (its bytes travel in the keyword arguments) or a column of
//! model bytes, each row scored by its own row's model; either way each distinct model is
//! parsed and laid out once per process (`model_cache`).

use std::collections::HashMap;
use std::sync::Arc;

use polars::prelude::*;
use polars_arrow::array::{FixedSizeListArray, ListArray, PrimitiveArray};
use polars_arrow::bitmap::MutableBitmap;
use polars_arrow::offset::OffsetsBuffer;
use serde::Deserialize;

use super::convert::{categorical_ids_column, feature_column, margin_values, predictions_series};
use super::dtypes::{as_in_training, broadcast, dtype_name};
use super::inputs::display_name;
use super::model_cache::{self, CachedModel};
use super::to_polars;
use crate::backend::Backend;
use crate::config::Device;
use crate::{FeatureFrame, Model, PredictOutput, Predictions};

/// `predict`'s keyword arguments. Inputs: the features, then the per-row base margin when
/// `has_base_margin`, then the model column when `model_column`.
#[derive(Deserialize)]
pub(super) struct PredictKwargs {
    /// A constant model's bytes (a `bytearray` on the Python side); empty with a model column.
    #[serde(with = "serde_bytes", default)]
    pub(super) model: Vec<u8>,
    /// The constant model's digest, computed once by the Python package (`model_cache`).
    #[serde(default)]
    model_digest: Option<String>,
    output: String,
    /// "cpu", "cuda" or "auto".
    #[serde(default = "cpu")]
    device: String,
    #[serde(default)]
    has_base_margin: bool,
    /// The models come per row, as the last input: a Binary column of model bytes.
    #[serde(default)]
    model_column: bool,
    /// With a model column: how many outputs its models have when more than one (multiclass),
    /// which the output's dtype needs before any model is seen.
    #[serde(default)]
    num_class: Option<usize>,
    /// Score with the trees of rounds `[start, end)` only (`end` 0: to the last round).
    #[serde(default)]
    iteration_range: model_cache::Rounds,
    /// Features that come as a `Categorical` column's physical ids, with the names of its
    /// categories in id order (`Model.predict` on a frame: Polars' export of a `Categorical`
    /// to a plugin renumbers every row, its ids do not).
    #[serde(default)]
    categorical_names: HashMap<String, Vec<String>>,
}

fn cpu() -> String {
    "cpu".into()
}

/// The constant model of a `gbt.predict` call, whose bytes are `bytes` (the kwargs' own, or
/// the same bytes read in place by `predict_abi`).
fn constant_model(kwargs: &PredictKwargs, bytes: &[u8]) -> PolarsResult<Arc<CachedModel>> {
    match &kwargs.model_digest {
        Some(digest) => model_cache::by_digest(digest, bytes, kwargs.iteration_range),
        None => model_cache::by_content(bytes, kwargs.iteration_range).map_err(to_polars),
    }
}

/// The output field of `gbt.predict`; a constant model's bytes are `model_bytes`.
pub(super) fn predict_field(fields: &[Field], kwargs: &PredictKwargs, model_bytes: &[u8]) -> PolarsResult<Field> {
    let output: PredictOutput = kwargs.output.parse().map_err(to_polars)?;
    let name = fields.first().map(|f| f.name().clone()).unwrap_or_else(|| PlSmallStr::from_static("prediction"));
    let dtype = if kwargs.model_column {
        row_models_dtype(output, kwargs.num_class)
    } else {
        let model = constant_model(kwargs, model_bytes)?.model.clone();
        let array = |inner: DataType, width: usize| DataType::Array(Box::new(inner), width);
        match output {
            // One leaf a tree; a vector-leaf round is one tree (`Model::predict_with` gives one
            // leaf a round for those, as XGBoost does), so the field's width is its rounds.
            PredictOutput::Leaf => array(DataType::UInt32, model.distinct_trees().count()),
            // Per output, a value per feature and the bias (XGBoost's pred_contribs, flattened).
            // XGBoost's pred_contribs: a value per feature and the bias last; per class for
            // multiclass models (classes x (features + 1)).
            PredictOutput::Contrib => {
                let per_output = array(DataType::Float32, model.features().len() + 1);
                match model.n_outputs() {
                    1 => per_output,
                    k => array(per_output, k),
                }
            }
            // XGBoost's pred_interactions: a (features + 1) square per output.
            PredictOutput::Interaction => {
                let m = model.features().len() + 1;
                let per_output = array(array(DataType::Float32, m), m);
                match model.n_outputs() {
                    1 => per_output,
                    k => array(per_output, k),
                }
            }
            PredictOutput::Class => DataType::UInt32,
            PredictOutput::Value if model.objective().predicts_classes() => DataType::UInt32,
            PredictOutput::Value | PredictOutput::Margin if model.n_outputs() > 1 => {
                array(DataType::Float32, model.n_outputs())
            }
            _ => DataType::Float32,
        }
    };
    Ok(Field::new(name, dtype))
}

/// The output's dtype with a model column, fixed before any model is seen: a list where models
/// may differ in width (leaves), an array of `num_class` for multiclass values.
fn row_models_dtype(output: PredictOutput, num_class: Option<usize>) -> DataType {
    match (output, num_class) {
        (PredictOutput::Leaf, _) => DataType::List(Box::new(DataType::UInt32)),
        (PredictOutput::Contrib | PredictOutput::Interaction, _) => DataType::List(Box::new(DataType::Float32)),
        (PredictOutput::Class, _) => DataType::UInt32,
        (_, Some(k)) if k > 1 => DataType::Array(Box::new(DataType::Float32), k),
        _ => DataType::Float32,
    }
}

/// Where to score: "cuda" requires a usable GPU, "auto" takes one when there is one.
fn scoring_backend(device: &str) -> PolarsResult<Backend> {
    let device = match device {
        "cpu" => Device::Cpu,
        "cuda" => Device::Cuda,
        "auto" => Device::Auto,
        other => {
            return Err(to_polars(crate::Error::param(
                "device",
                format!("`{other}` is not one of \"cpu\", \"cuda\", \"auto\""),
            )))
        }
    };
    crate::backend::for_scoring(device).map(|engine| engine.backend()).map_err(to_polars)
}

/// Scores the rows of `inputs`; a constant model's bytes are `model_bytes`.
pub(super) fn predict(inputs: &[Series], kwargs: &PredictKwargs, model_bytes: &[u8]) -> PolarsResult<Series> {
    let output: PredictOutput = kwargs.output.parse().map_err(to_polars)?;
    let backend = scoring_backend(&kwargs.device)?;
    // Literals broadcast to the longest column, as everywhere else in Polars.
    let inputs = &broadcast(inputs)[..];
    let (inputs, models) = match (kwargs.model_column, inputs.split_last()) {
        (true, Some((m, rest))) => (rest, Some(m)),
        (true, None) => return Err(to_polars(crate::Error::data("gbt.predict needs a model column"))),
        (false, _) => (inputs, None),
    };
    let (features, margin) = match (kwargs.has_base_margin, inputs.split_last()) {
        (true, Some((m, features))) => (features, Some(m)),
        _ => (inputs, None),
    };
    if features.is_empty() {
        return Err(to_polars(crate::Error::data("gbt.predict needs at least one feature column")));
    }
    let name = features[0].name().clone();
    match models {
        None => {
            let cached = constant_model(kwargs, model_bytes)?;
            let p = score(&cached, features, &kwargs.categorical_names, margin, output, backend)?;
            let (k, m) = (cached.model.n_outputs(), cached.model.features().len() + 1);
            match output {
                PredictOutput::Contrib if k > 1 => nested_f32(name, p, &[k, m]),
                PredictOutput::Interaction if k > 1 => nested_f32(name, p, &[k, m, m]),
                PredictOutput::Interaction => nested_f32(name, p, &[m, m]),
                _ => predictions_series(name, p),
            }
        }
        Some(models) => {
            let dtype = row_models_dtype(output, kwargs.num_class);
            let features = Features { columns: features, categorical_names: &kwargs.categorical_names };
            score_row_models(name, features, margin, models, kwargs.iteration_range, output, backend, &dtype)
        }
    }
}

/// Per-row values as nested fixed-size arrays of the `shape` given (outermost first): SHAP
/// values per class, interaction matrices.
fn nested_f32(name: PlSmallStr, p: Predictions, shape: &[usize]) -> PolarsResult<Series> {
    let Predictions::Float { values, width } = p else {
        return Err(polars_err!(ComputeError: "{}: SHAP values came back as indices", super::BUG));
    };
    let rows = values.len() / width.max(1);
    let item = |dtype: ArrowDataType| ArrowField::new(PlSmallStr::from_static("item"), dtype, true);
    let (mut array, mut dtype): (Box<dyn polars_arrow::array::Array>, ArrowDataType) =
        (Box::new(PrimitiveArray::from_vec(values)), ArrowDataType::Float32);
    // Innermost first: each level groups `size` items of the level below.
    let mut items = rows * shape.iter().product::<usize>();
    for &size in shape.iter().rev() {
        items /= size;
        dtype = ArrowDataType::FixedSizeList(Box::new(item(dtype)), size);
        array = Box::new(FixedSizeListArray::new(dtype.clone(), items, array, None));
    }
    Series::from_arrow(name, array)
}

/// Scores `features` with one model; `margin` (per-row base margins) replaces its base score,
/// as XGBoost's `base_margin` at prediction.
fn score(
    cached: &CachedModel,
    features: &[Series],
    categorical_names: &HashMap<String, Vec<String>>,
    margin: Option<&Series>,
    output: PredictOutput,
    backend: Backend,
) -> PolarsResult<Predictions> {
    let model = &cached.model;
    let base_margin = match margin {
        Some(m) => {
            let (values, width) = margin_values(m, "base_margin")?;
            if width != model.n_outputs() && output != PredictOutput::Leaf {
                return Err(to_polars(crate::Error::column(
                    "base_margin",
                    format!(
                        "has {width} values per row; the model has {} outputs ({})",
                        model.n_outputs(),
                        if model.n_outputs() > 1 {
                            "an Array or List column of that width"
                        } else {
                            "one number per row"
                        }
                    ),
                )));
            }
            Some(values)
        }
        None => None,
    };
    let frame = FeatureFrame::new(scoring_columns(model, features, categorical_names)?).map_err(to_polars)?;
    let forest = cached.predictor(backend).map_err(|e| polars_err!(ComputeError: "{}", e))?;
    model.predict_with(&*forest, &frame, output, base_margin.as_deref()).map_err(to_polars)
}

/// Scores each row with its own row's model (`models`, a Binary column; a null model gives a
/// null prediction). Rows are grouped by model, each group scored at once, and the results put
/// back in row order as `dtype`.
/// The feature columns of a call, and which of them are categorical ids (`PredictKwargs`).
struct Features<'a> {
    columns: &'a [Series],
    categorical_names: &'a HashMap<String, Vec<String>>,
}

#[allow(clippy::too_many_arguments)]
fn score_row_models(
    name: PlSmallStr,
    features: Features,
    margin: Option<&Series>,
    models: &Series,
    rounds: model_cache::Rounds,
    output: PredictOutput,
    backend: Backend,
    dtype: &DataType,
) -> PolarsResult<Series> {
    if models.dtype() != &DataType::Binary {
        return Err(to_polars(crate::Error::column(
            "model",
            format!("must hold model bytes (Binary), not {}", dtype_name(models.dtype())),
        )));
    }
    let (names, features) = (features.categorical_names, features.columns);
    let n = features[0].len();
    // The rows of each distinct model. A join repeats one value's bytes in place, so rows are
    // first told apart by where their bytes lie, and only new places are looked up.
    let mut by_place: HashMap<(usize, usize), usize> = HashMap::new();
    let mut by_model: HashMap<*const CachedModel, usize> = HashMap::new();
    let mut groups: Vec<(Arc<CachedModel>, Vec<IdxSize>)> = Vec::new();
    // Each row's group and position in it; u32::MAX for rows without a model.
    let mut slot = vec![(u32::MAX, 0u32); n];
    for (row, bytes) in models.binary()?.iter().enumerate() {
        let Some(bytes) = bytes else { continue };
        let place = (bytes.as_ptr() as usize, bytes.len());
        let g = match by_place.get(&place) {
            Some(&g) => g,
            None => {
                let cached = model_cache::by_content(bytes, rounds).map_err(|e| match e {
                    crate::Error::Param { name, reason } => {
                        to_polars(crate::Error::param(&name, format!("{reason} (the model of row {row})")))
                    }
                    e => to_polars(crate::Error::column("model", format!("row {row} does not hold a model: {e}"))),
                })?;
                let g = *by_model.entry(Arc::as_ptr(&cached)).or_insert_with(|| {
                    groups.push((cached.clone(), Vec::new()));
                    groups.len() - 1
                });
                by_place.insert(place, g);
                g
            }
        };
        slot[row] = (g as u32, groups[g].1.len() as u32);
        groups[g].1.push(row as IdxSize);
    }
    let mut scored = Vec::with_capacity(groups.len());
    for (g, (cached, rows)) in groups.iter().enumerate() {
        let first = rows[0] as usize;
        check_row_model(&cached.model, output, dtype, first)?;
        let p = if rows.len() == n {
            score(cached, features, names, margin, output, backend)?
        } else {
            let idx = IdxCa::from_vec(PlSmallStr::EMPTY, rows.clone());
            let picked: Vec<Series> = features.iter().map(|s| s.take(&idx)).collect::<PolarsResult<_>>()?;
            let margin = margin.map(|m| m.take(&idx)).transpose()?;
            score(cached, &picked, names, margin.as_ref(), output, backend)?
        };
        debug_assert!(g == scored.len());
        scored.push(p);
    }
    gather_rows(name, &slot, &scored, dtype)
}

/// A row's model must give what the output's dtype promised.
fn check_row_model(model: &Model, output: PredictOutput, dtype: &DataType, row: usize) -> PolarsResult<()> {
    let k = model.n_outputs();
    let fail = |why: String| Err(to_polars(crate::Error::column("model", format!("row {row}'s model {why}"))));
    match (output, dtype) {
        (PredictOutput::Value, _) if model.objective().predicts_classes() => {
            fail(format!("is {}, whose values are classes: score it with output=\"class\"", model.objective().name()))
        }
        (PredictOutput::Value | PredictOutput::Margin, DataType::Array(_, width)) if *width != k => {
            fail(format!("has {k} outputs, not num_class={width}"))
        }
        (PredictOutput::Value | PredictOutput::Margin, DataType::Float32) if k > 1 => {
            fail(format!("has {k} outputs: pass num_class={k} to gbt.predict for a column of multiclass models"))
        }
        _ => Ok(()),
    }
}

/// The rows' predictions from their groups' (`slot[row]` = (group, position)), as `dtype`:
/// a number, a fixed-size array or a list per row; null where a row had no model.
fn gather_rows(
    name: PlSmallStr,
    slot: &[(u32, u32)],
    scored: &[Predictions],
    dtype: &DataType,
) -> PolarsResult<Series> {
    let leaf = match dtype {
        DataType::List(inner) | DataType::Array(inner, _) => inner.as_ref(),
        other => other,
    };
    let array = if leaf == &DataType::UInt32 {
        let parts = scored
            .iter()
            .map(|p| match p {
                Predictions::Index { values, width } => Ok((values.as_slice(), *width)),
                Predictions::Float { .. } => Err(polars_err!(ComputeError: "{}: expected indices", super::BUG)),
            })
            .collect::<PolarsResult<Vec<_>>>()?;
        rows_array(slot, &parts, dtype)?
    } else {
        let parts = scored
            .iter()
            .map(|p| match p {
                Predictions::Float { values, width } => Ok((values.as_slice(), *width)),
                Predictions::Index { .. } => Err(polars_err!(ComputeError: "{}: expected numbers", super::BUG)),
            })
            .collect::<PolarsResult<Vec<_>>>()?;
        rows_array(slot, &parts, dtype)?
    };
    Series::from_arrow(name, array)
}

/// The rows' values laid end to end (a missing row: `fixed` defaults, or none), with the
/// list offsets and which rows have a model.
fn gather_values<T: Copy + Default + polars_arrow::types::NativeType>(
    slot: &[(u32, u32)],
    parts: &[(&[T], usize)],
    fixed: Option<usize>,
) -> (Vec<T>, Vec<i64>, MutableBitmap) {
    let (mut values, mut offsets, mut valid) = (Vec::new(), vec![0i64], MutableBitmap::with_capacity(slot.len()));
    for &(g, pos) in slot {
        if g == u32::MAX {
            values.extend(std::iter::repeat_n(T::default(), fixed.unwrap_or(0)));
            valid.push(false);
        } else {
            let (v, w) = parts[g as usize];
            values.extend_from_slice(&v[pos as usize * w..(pos as usize + 1) * w]);
            valid.push(true);
        }
        offsets.push(values.len() as i64);
    }
    (values, offsets, valid)
}

/// The rows' values as an Arrow array of `dtype`: a list, a fixed-size list or one number
/// per row.
fn rows_array<T: polars_arrow::types::NativeType + Default>(
    slot: &[(u32, u32)],
    parts: &[(&[T], usize)],
    dtype: &DataType,
) -> PolarsResult<Box<dyn polars_arrow::array::Array>> {
    let item = |inner: &DataType| {
        ArrowField::new(PlSmallStr::from_static("item"), inner.to_arrow(CompatLevel::newest()), true)
    };
    Ok(match dtype {
        DataType::List(inner) => {
            let (values, offsets, valid) = gather_values(slot, parts, None);
            let offsets = OffsetsBuffer::try_from(offsets)?;
            Box::new(ListArray::<i64>::new(
                ArrowDataType::LargeList(Box::new(item(inner))),
                offsets,
                Box::new(PrimitiveArray::from_vec(values)),
                Some(valid.into()),
            ))
        }
        DataType::Array(inner, width) => {
            let (values, _, valid) = gather_values(slot, parts, Some(*width));
            Box::new(FixedSizeListArray::new(
                ArrowDataType::FixedSizeList(Box::new(item(inner)), *width),
                slot.len(),
                Box::new(PrimitiveArray::from_vec(values)),
                Some(valid.into()),
            ))
        }
        _ => {
            let (values, _, valid) = gather_values(slot, parts, Some(1));
            Box::new(PrimitiveArray::from_vec(values).with_validity(Some(valid.into())))
        }
    })
}

/// The columns to score, each as the model saw it in training (`dtypes::as_in_training`).
/// Named columns the model does not use are left out, whatever their dtype; unnamed ones are
/// the model's features in order.
fn scoring_columns(
    model: &Model,
    inputs: &[Series],
    categorical_names: &HashMap<String, Vec<String>>,
) -> PolarsResult<Vec<crate::FeatureColumn>> {
    let features = model.features();
    let unnamed = inputs.iter().all(|s| s.name().is_empty());
    let mut columns = Vec::with_capacity(features.len());
    for (i, s) in inputs.iter().enumerate() {
        let info = if unnamed { features.get(i) } else { features.iter().find(|f| f.name == s.name().as_str()) };
        let Some(info) = info else {
            if unnamed {
                // Too many unnamed columns: the crate's message says how many the model has.
                columns.push(feature_column(s, &display_name(s, i))?);
            }
            continue;
        };
        let display = display_name(s, i);
        match categorical_names.get(s.name().as_str()) {
            Some(names) => columns.push(categorical_ids_column(s, names)?),
            None => columns.push(feature_column(&as_in_training(s, &display, info)?, &display)?),
        }
    }
    if columns.is_empty() {
        let names: Vec<&str> = features.iter().map(|f| f.name.as_str()).collect();
        return Err(to_polars(crate::Error::data(format!(
            "columns missing for the model's features: {}",
            names.join(", ")
        ))));
    }
    Ok(columns)
}
