//! The `gbt.fit` expressions: an aggregation returning the model's bytes, and one model per
//! group of a key (`by=`). Scoring is in `predict.rs`.

use polars::prelude::*;

use super::dtypes::broadcast;
use super::inputs::FitInputs;
use super::kwargs::FitKwargs;
use super::progress::round_logger;
use super::to_polars;
use crate::{Dataset, RoundLog, TrainConfig};

fn binary_output(_: &[Field]) -> PolarsResult<Field> {
    Ok(Field::new(PlSmallStr::from_static("model"), DataType::Binary))
}

super::abi::plugin_expression!(_polars_plugin_gbt_fit, _polars_plugin_field_gbt_fit, fit, binary_output, FitKwargs);

fn fit(inputs: &[Series], kwargs: FitKwargs) -> PolarsResult<Series> {
    if crate::profile::on() {
        profile_before_fit(kwargs.profile_built_at);
    }
    let cfg = TrainConfig::from_json(&kwargs.params).map_err(to_polars)?;
    // Literals (`weight=pl.lit(2.0)`) come as one row: repeated to the data's length.
    let inputs = broadcast(inputs);
    let fit = FitInputs::new(&inputs, &kwargs)?;
    let mut log = round_logger(&cfg, &kwargs);
    let _notes = crate::profile::notes(kwargs.verbose > 0);
    let model = match &kwargs.distributed {
        Some(d) => {
            kwargs.check_distributable().map_err(to_polars)?;
            let (data, valid) = fit.split(None, true)?;
            let evals: Vec<(&str, &Dataset)> =
                fit.eval_sets.iter().zip(&valid).map(|((name, _), d)| (name.as_str(), d)).collect();
            d.train(&cfg, &data, &evals, &mut log).map_err(|e| fit.names.polars(e))?
        }
        None => fit.train(&cfg, None, &mut log)?,
    };
    let clock = std::time::Instant::now();
    let bytes = model.to_bytes();
    if crate::profile::on() {
        eprintln!("polars-gbt profile: the model to bytes {:.3} s", clock.elapsed().as_secs_f64());
    }
    Ok(Series::new(PlSmallStr::from_static("model"), [bytes.as_slice()]))
}

/// The profile's lines for what came before the fit's own work: Polars' (from the expression's
/// building to the plugin's call: running the query's inputs and exporting them, which for a
/// `Categorical` column renumbers every row) and the plugin's import of its inputs.
fn profile_before_fit(built_at: Option<f64>) {
    let (called_at, import) = super::abi::last_call();
    if let (Some(built), Ok(called)) = (built_at, called_at.duration_since(std::time::UNIX_EPOCH)) {
        eprintln!(
            "polars-gbt profile: Polars' work from the expression's building to the plugin's call {:.3} s",
            called.as_secs_f64() - built
        );
    }
    eprintln!("polars-gbt profile: the plugin's import of its inputs {:.3} s", import.as_secs_f64());
}

/// `gbt.fit(..., by=key)`'s output: a struct of the key (named and typed as the `by` column,
/// the last input) and the group's model.
fn by_output(fields: &[Field]) -> PolarsResult<Field> {
    let key = fields.last().ok_or_else(|| polars_err!(ComputeError: "gbt.fit(by=...) needs a key column"))?;
    Ok(Field::new(
        PlSmallStr::from_static("model"),
        DataType::Struct(vec![key.clone(), Field::new(PlSmallStr::from_static("model"), DataType::Binary)]),
    ))
}

super::abi::plugin_expression!(
    _polars_plugin_gbt_fit_by,
    _polars_plugin_field_gbt_fit_by,
    fit_by,
    by_output,
    FitKwargs
);

/// One model per distinct value of the last input (the `by` key), the groups trained in
/// parallel on the shared worker pool, in the order of their first rows. Each model equals
/// the one `gbt.fit` gives on the group's rows alone: training is deterministic, and a fit's
/// own loops run on whatever pool they are in.
fn fit_by(inputs: &[Series], kwargs: FitKwargs) -> PolarsResult<Series> {
    use rayon::prelude::*;

    if kwargs.verbose > 0 || kwargs.progress {
        return Err(to_polars(crate::Error::param(
            "by",
            "trains its groups in parallel: verbose and progress are for single fits",
        )));
    }
    let cfg = TrainConfig::from_json(&kwargs.params).map_err(to_polars)?;
    let inputs = broadcast(inputs);
    let (key, rest) =
        inputs.split_last().ok_or_else(|| polars_err!(ComputeError: "gbt.fit(by=...) needs a key column"))?;
    let fit = FitInputs::new(rest, &kwargs)?;
    let groups = key.group_tuples(true, true)?.into_idx();
    let firsts: Vec<IdxSize> = groups.first().to_vec();
    let members: Vec<&[IdxSize]> = groups.all().iter().map(|g| g.as_slice()).collect();
    let keys = key.take_slice(&firsts)?;
    let epoch = super::interrupt::interrupt_epoch();
    let models: Vec<PolarsResult<Vec<u8>>> = members
        .par_iter()
        .enumerate()
        .map(|(g, rows)| {
            let mut log = |_: &RoundLog| {
                if super::interrupt::interrupt_epoch() != epoch {
                    return Err(crate::Error::Interrupted);
                }
                Ok(true)
            };
            fit.train(&cfg, Some(rows), &mut log).map(|m| m.to_bytes()).map_err(|e| {
                let value = keys.get(g).map(|v| v.to_string()).unwrap_or_default();
                polars_err!(ComputeError: "group {}={}: {}", key.name(), value, e)
            })
        })
        .collect();
    let models = models.into_iter().collect::<PolarsResult<Vec<_>>>()?;
    let models = Series::new(PlSmallStr::from_static("model"), models.iter().map(|m| m.as_slice()).collect::<Vec<_>>());
    let keys = keys.with_name(key.name().clone());
    Ok(StructChunked::from_series(PlSmallStr::from_static("model"), firsts.len(), [keys, models].iter())?.into_series())
}
