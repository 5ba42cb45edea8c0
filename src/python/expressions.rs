//! The `gbt` expressions: `fit` (an aggregation returning the model's bytes) and `predict`
//! (elementwise, so it runs batch by batch in lazy and streaming queries).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use polars::prelude::*;
use pyo3_polars::derive::polars_expr;
use serde::Deserialize;

use super::convert::{f32_column, feature_column, predictions_series, to_polars};
use crate::{train_with_callback, Dataset, FeatureFrame, Model, PredictOutput, RoundLog, TrainConfig};

/// What `fit` receives besides the inputs: the parameters as JSON (parsed by
/// `TrainConfig::from_json`, which names any bad parameter) and which optional inputs follow
/// the features and the target, in this order: weight, group, base_margin, eval_set.
#[derive(Deserialize)]
struct FitKwargs {
    params: String,
    has_weight: bool,
    has_group: bool,
    has_base_margin: bool,
    has_eval_set: bool,
    /// Print the evaluation log to stderr every this many rounds (0: silent).
    #[serde(default)]
    verbose: usize,
    /// Draw a progress bar on stderr.
    #[serde(default)]
    progress: bool,
}

fn binary_output(_: &[Field]) -> PolarsResult<Field> {
    Ok(Field::new(PlSmallStr::from_static("model"), DataType::Binary))
}

#[polars_expr(output_type_func=binary_output)]
fn gbt_fit(inputs: &[Series], kwargs: FitKwargs) -> PolarsResult<Series> {
    let optional = [kwargs.has_weight, kwargs.has_group, kwargs.has_base_margin, kwargs.has_eval_set];
    let n_other = 1 + optional.iter().filter(|&&x| x).count();
    if inputs.len() <= n_other {
        return Err(to_polars(crate::Error::data("gbt.fit needs at least one feature column")));
    }
    let cfg = TrainConfig::from_json(&kwargs.params).map_err(to_polars)?;
    let (features, rest) = inputs.split_at(inputs.len() - n_other);
    let mut rest = rest.iter();
    let target = rest.next().unwrap();
    let weight = kwargs.has_weight.then(|| rest.next().unwrap());
    let group = kwargs.has_group.then(|| rest.next().unwrap());
    let base_margin = kwargs.has_base_margin.then(|| rest.next().unwrap());
    let eval_set = kwargs.has_eval_set.then(|| rest.next().unwrap());

    // The rows of each dataset: all of them, or split by the eval_set mask.
    let dataset = |rows: Option<&IdxCa>| -> PolarsResult<Dataset> {
        let pick = |s: &Series| match rows {
            Some(idx) => s.take(idx),
            None => Ok(s.clone()),
        };
        let columns = features.iter().map(|s| pick(s).and_then(|s| feature_column(&s))).collect::<PolarsResult<_>>()?;
        let label = pick(target)?;
        if !label.dtype().is_primitive_numeric() && label.dtype() != &DataType::Boolean {
            return Err(to_polars(crate::Error::column(
                "target",
                format!("must be numeric (class indices for classifiers), not {}", label.dtype()),
            )));
        }
        let mut d = Dataset::with_label(FeatureFrame::new(columns).map_err(to_polars)?, f32_column(&label, "target")?)
            .map_err(to_polars)?;
        if let Some(w) = weight {
            d = d.with_weight_buffer(f32_column(&pick(w)?, "weight")?).map_err(to_polars)?;
        }
        if let Some(m) = base_margin {
            d = d.with_base_margin(f32_column(&pick(m)?, "base_margin")?.to_vec()).map_err(to_polars)?;
        }
        if let Some(g) = group {
            d = d.with_group_ids(&group_ids(&pick(g)?)?).map_err(to_polars)?;
        }
        Ok(d)
    };
    // A fit started before an interrupt (`module::interrupt_fits`) stops at its next round.
    let epoch = super::module::interrupt_epoch();
    let every = kwargs.verbose;
    let progress = kwargs.progress.then(|| ProgressBar::new(cfg.n_estimators));
    let mut log = |round: &RoundLog| {
        if every > 0 && !round.values.is_empty() && (round.round % every == 0 || round.round + 1 == cfg.n_estimators) {
            eprintln!("{round}");
        }
        if let Some(bar) = &progress {
            bar.show(round.round + 1);
        }
        if super::module::interrupt_epoch() != epoch {
            return Err(crate::Error::Interrupted);
        }
        Ok(true)
    };
    // With verbose output, say where the fit runs when "auto" chose the CPU (and why).
    if every > 0 {
        if let Ok((_, Some(note))) = crate::backend::select(&cfg) {
            eprintln!("polars-gbt: {note}");
        }
    }
    let model = match eval_set {
        None => train_with_callback(&cfg, &dataset(None)?, &[], &mut log),
        Some(mask) => {
            if mask.dtype() != &DataType::Boolean {
                return Err(to_polars(crate::Error::column(
                    "eval_set",
                    format!("must be a boolean expression marking validation rows, not {}", mask.dtype()),
                )));
            }
            let mask = mask.bool()?;
            if mask.null_count() > 0 {
                return Err(to_polars(crate::Error::column("eval_set", "has null values")));
            }
            let (valid, fit): (Vec<IdxSize>, Vec<IdxSize>) =
                (0..mask.len() as IdxSize).partition(|&i| mask.get(i as usize).unwrap_or(false));
            let fit = dataset(Some(&IdxCa::from_vec(PlSmallStr::EMPTY, fit)))?;
            let valid = dataset(Some(&IdxCa::from_vec(PlSmallStr::EMPTY, valid)))?;
            train_with_callback(&cfg, &fit, &[("valid", &valid)], &mut log)
        }
    }
    .map_err(to_polars)?;
    Ok(Series::new(PlSmallStr::from_static("model"), [model.to_bytes().as_slice()]))
}

/// A one-line progress bar on stderr: `[=========>          ] 120/250 rounds  3.1 s`.
struct ProgressBar {
    total: usize,
    start: std::time::Instant,
}

impl ProgressBar {
    const WIDTH: usize = 30;

    fn new(total: usize) -> Self {
        ProgressBar { total, start: std::time::Instant::now() }
    }

    fn show(&self, done: usize) {
        let filled = Self::WIDTH * done / self.total.max(1);
        let bar: String = (0..Self::WIDTH)
            .map(|i| {
                if i < filled {
                    '='
                } else if i == filled {
                    '>'
                } else {
                    ' '
                }
            })
            .collect();
        let end = if done >= self.total { "\n" } else { "" };
        eprint!("\r[{bar}] {done}/{} rounds {:6.1} s{end}", self.total, self.start.elapsed().as_secs_f64());
    }
}

/// Query ids as integers; nulls are an error.
fn group_ids(s: &Series) -> PolarsResult<Vec<i64>> {
    let ids = s.cast(&DataType::Int64).map_err(|_| {
        to_polars(crate::Error::column("group", format!("must be integer query ids, not {}", s.dtype())))
    })?;
    let ids = ids.i64()?;
    if ids.null_count() > 0 {
        return Err(to_polars(crate::Error::column("group", "has null values")));
    }
    Ok(ids.downcast_iter().flat_map(|a| a.values().iter().copied()).collect())
}

/// `predict`'s keyword arguments: the model's bytes (a `bytearray` on the Python side), the
/// output kind and the device ("cpu", "cuda" or "auto").
#[derive(Deserialize)]
struct PredictKwargs {
    #[serde(with = "serde_bytes")]
    model: Vec<u8>,
    output: String,
    #[serde(default = "cpu")]
    device: String,
}

fn cpu() -> String {
    "cpu".into()
}

/// A parsed model with its CPU forest and, once a batch asks for the GPU, its forest on the
/// device: a stream of batches lays the trees out once.
struct CachedModel {
    bytes: Vec<u8>,
    model: Arc<Model>,
    cpu: OnceLock<crate::backend::cpu::predict::FlatForest>,
    gpu: OnceLock<std::result::Result<Arc<crate::backend::cuda::GpuForest>, String>>,
}

/// Cached models by (length, CRC-32) of their bytes.
type ModelCache = Mutex<HashMap<(usize, u32), Arc<CachedModel>>>;

/// Parsed models by their bytes: a stream of batches parses the model (and uploads it to the
/// GPU) once. Looked up by a CRC of the bytes, then compared in full.
fn cached_model(bytes: &[u8]) -> PolarsResult<Arc<CachedModel>> {
    static CACHE: OnceLock<ModelCache> = OnceLock::new();
    let key = (bytes.len(), crc32fast::hash(bytes));
    let cache = CACHE.get_or_init(Default::default);
    if let Some(m) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        if m.bytes == bytes {
            return Ok(m.clone());
        }
    }
    let model = Arc::new(Model::from_bytes(bytes).map_err(to_polars)?);
    let entry = Arc::new(CachedModel { bytes: bytes.to_vec(), model, cpu: OnceLock::new(), gpu: OnceLock::new() });
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= 16 {
        map.clear();
    }
    map.insert(key, entry.clone());
    Ok(entry)
}

fn predict_output(fields: &[Field], kwargs: PredictKwargs) -> PolarsResult<Field> {
    let model = cached_model(&kwargs.model)?.model.clone();
    let output: PredictOutput = kwargs.output.parse().map_err(to_polars)?;
    let name = fields.first().map(|f| f.name().clone()).unwrap_or_else(|| PlSmallStr::from_static("prediction"));
    let array = |inner: DataType, width: usize| DataType::Array(Box::new(inner), width);
    let dtype = match output {
        PredictOutput::Leaf => array(DataType::UInt32, model.num_trees()),
        // Per output, a value per feature and the bias (XGBoost's pred_contribs, flattened).
        PredictOutput::Contrib => array(DataType::Float32, model.n_outputs() * (model.features().len() + 1)),
        PredictOutput::Class => DataType::UInt32,
        PredictOutput::Value if model.objective() == crate::Objective::MultiSoftmax => DataType::UInt32,
        PredictOutput::Value | PredictOutput::Margin if model.n_outputs() > 1 => {
            array(DataType::Float32, model.n_outputs())
        }
        _ => DataType::Float32,
    };
    Ok(Field::new(name, dtype))
}

/// Whether to score on the GPU: "cuda" requires one, "auto" uses one when it is usable.
fn use_gpu(device: &str) -> PolarsResult<bool> {
    match device {
        "cpu" => Ok(false),
        "cuda" => crate::backend::cuda::availability().map(|_| true).map_err(|e| to_polars(crate::Error::Device(e))),
        "auto" => Ok(crate::backend::cuda::availability().is_ok()),
        other => Err(to_polars(crate::Error::param(
            "device",
            format!("`{other}` is not one of \"cpu\", \"cuda\", \"auto\""),
        ))),
    }
}

#[polars_expr(output_type_func_with_kwargs=predict_output)]
fn gbt_predict(inputs: &[Series], kwargs: PredictKwargs) -> PolarsResult<Series> {
    let cached = cached_model(&kwargs.model)?;
    let model = &cached.model;
    let output: PredictOutput = kwargs.output.parse().map_err(to_polars)?;
    let frame =
        FeatureFrame::new(inputs.iter().map(feature_column).collect::<PolarsResult<_>>()?).map_err(to_polars)?;
    let p = if use_gpu(&kwargs.device)? {
        let forest = cached
            .gpu
            .get_or_init(|| model.gpu_forest().map(Arc::new).map_err(|e| e.to_string()))
            .clone()
            .map_err(|e| polars_err!(ComputeError: "{}", e))?;
        model.predict_with(&*forest, &frame, output, None)
    } else {
        model.predict_with(cached.cpu.get_or_init(|| model.cpu_forest()), &frame, output, None)
    }
    .map_err(to_polars)?;
    let name = inputs[0].name().clone();
    predictions_series(name, p)
}
