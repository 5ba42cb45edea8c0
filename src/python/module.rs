//! The Python module `polars_gbt._internal`: model inspection for the `Model` class.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::model::TreeTable;
use crate::{ImportanceType, Model, PredictOutput};

/// The crate's error as a Python ValueError carrying its message (`polars_gbt` maps the
/// message's prefix to its exception class).
fn py_error(e: crate::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn model(bytes: &[u8]) -> PyResult<Model> {
    Model::from_bytes(bytes).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The model as readable JSON.
#[pyfunction]
fn model_to_json(bytes: &[u8]) -> PyResult<String> {
    super::catch_panics_py(|| Ok(model(bytes)?.to_json()))
}

/// A model's bytes from its JSON form.
#[pyfunction]
fn model_from_json(text: &str) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| {
        Model::from_json(text).map(|m| m.to_bytes()).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// Our model's bytes from an XGBoost model file's bytes (JSON or UBJSON).
#[pyfunction]
fn model_from_xgboost(data: &[u8]) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| {
        Model::from_xgboost(data).map(|m| m.to_bytes()).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// Our model's bytes from a LightGBM text model.
#[pyfunction]
fn model_from_lightgbm(text: &str) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| {
        Model::from_lightgbm(text).map(|m| m.to_bytes()).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// The model as XGBoost JSON.
#[pyfunction]
fn model_to_xgboost_json(bytes: &[u8]) -> PyResult<String> {
    super::catch_panics_py(|| Ok(model(bytes)?.to_xgboost_json()))
}

/// The model as an ONNX model's bytes.
#[pyfunction]
fn model_to_onnx(bytes: &[u8]) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| model(bytes)?.to_onnx().map_err(|e| PyValueError::new_err(e.to_string())))
}

/// Validates bytes as a model (raises ValueError naming the problem).
#[pyfunction]
fn model_check(bytes: &[u8]) -> PyResult<()> {
    super::catch_panics_py(|| model(bytes).map(|_| ()))
}

/// Checks training parameters (a JSON object) as a fit would, before any data is read: a
/// hand-written `gbt.fit` expression reports a bad parameter when it is built.
#[pyfunction]
fn check_params(params: &str) -> PyResult<()> {
    super::catch_panics_py(|| {
        crate::TrainConfig::from_json(params)
            .and_then(|cfg| cfg.validate())
            .map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// A summary as JSON: objective, parameters, feature names, tree and round counts, best
/// iteration and the evaluation log.
#[pyfunction]
fn model_summary(bytes: &[u8]) -> PyResult<String> {
    super::catch_panics_py(|| {
        let m = model(bytes)?;
        let log: Vec<_> = m
            .evals_result()
            .iter()
            .map(|s| serde_json::json!({"dataset": s.dataset, "metric": s.metric, "values": s.values}))
            .collect();
        // Per categorical feature, its category names in code order (None: the model takes
        // integer codes, having no names), for scoring arrays of codes (`Model.categories`).
        let categories: serde_json::Map<String, serde_json::Value> = m
            .features()
            .iter()
            .filter(|f| f.cuts.is_categorical())
            .map(|f| (f.name.clone(), serde_json::json!(f.categories)))
            .collect();
        Ok(serde_json::json!({
            "objective": m.objective().name(),
            "categories": categories,
            "params": m.params(),
            "imported_from": m.imported().map(|i| i.source.clone()),
            "feature_names": m.feature_names(),
            // A vector-leaf round is one tree (stored as one per output): counted once, as
            // XGBoost and trees_to_dataframe count it.
            "num_trees": m.distinct_trees().count(),
            "num_rounds": m.num_rounds(),
            "best_iteration": m.best_iteration(),
            "evals_result": log,
        })
        .to_string())
    })
}

/// Whether early stopping looks for larger values of the built-in metric `name`, as the
/// trainer does (`auc`, `ndcg@32`, ...).
#[pyfunction]
fn metric_higher_is_better(name: &str) -> PyResult<bool> {
    super::catch_panics_py(|| {
        name.parse::<crate::Metric>().map(|m| m.higher_is_better()).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// The model of rounds `start`, `start + step`, ... below `end` (0: every round), as bytes.
#[pyfunction]
fn model_slice(bytes: &[u8], start: usize, end: usize, step: usize) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| {
        model(bytes)?.slice(start, end, step).map(|m| m.to_bytes()).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// Feature importance of one kind, as (feature, value) pairs in model order.
#[pyfunction]
fn feature_importance(bytes: &[u8], kind: &str) -> PyResult<Vec<(String, f64)>> {
    super::catch_panics_py(|| {
        let kind: ImportanceType =
            serde_json::from_value(serde_json::Value::String(kind.to_string())).map_err(|_| {
                PyValueError::new_err(format!(
                    "importance type `{kind}` is not one of weight, gain, cover, total_gain, total_cover"
                ))
            })?;
        Ok(model(bytes)?.feature_importance(kind))
    })
}

/// Every node of every tree: a dict of columns in `TreeTable::COLUMNS` order (Python adds
/// the dtypes).
#[pyfunction]
fn trees_table<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    super::catch_panics_py(|| {
        let TreeTable { tree, target, node, id, feature, split, yes, no, missing, gain, cover, category } =
            model(bytes)?.trees_table();
        let columns = PyDict::new(py);
        let [c_tree, c_target, c_node, c_id, c_feature, c_split, c_yes, c_no, c_missing, c_gain, c_cover, c_category] =
            TreeTable::COLUMNS;
        columns.set_item(c_tree, tree)?;
        columns.set_item(c_target, target)?;
        columns.set_item(c_node, node)?;
        columns.set_item(c_id, id)?;
        columns.set_item(c_feature, feature)?;
        columns.set_item(c_split, split)?;
        columns.set_item(c_yes, yes)?;
        columns.set_item(c_no, no)?;
        columns.set_item(c_missing, missing)?;
        columns.set_item(c_gain, gain)?;
        columns.set_item(c_cover, cover)?;
        columns.set_item(c_category, category)?;
        Ok(columns)
    })
}

/// None when training can use a GPU here, else why not.
#[pyfunction]
fn cuda_unavailable_reason() -> PyResult<Option<String>> {
    super::catch_panics_py(|| Ok(crate::backend::Backend::Cuda.engine().availability().err()))
}

/// Starts the rendezvous of a distributed fit's `world` workers on `host` (a background
/// thread that ends once every worker has the others' addresses, or at `timeout_s`), and
/// returns its `host:port`.
#[pyfunction]
fn start_tracker(host: &str, world: usize, token: &str, timeout_s: f64) -> PyResult<String> {
    super::catch_panics_py(|| {
        let timeout = crate::collective::timeout_from_secs(timeout_s).map_err(py_error)?;
        let listener = std::net::TcpListener::bind((host, 0))
            .map_err(|e| py_error(crate::Error::Collective(format!("the tracker cannot listen on {host}: {e}"))))?;
        let port = listener.local_addr().map_err(|e| py_error(crate::Error::Io(e)))?.port();
        let token = token.to_string();
        // The workers report a failed rendezvous themselves, naming what they waited for.
        std::thread::spawn(move || crate::collective::serve_tracker(listener, world, &token, timeout));
        Ok(format!("{host}:{port}"))
    })
}

/// The objectives' descriptors, as far as the Python side reads them: by XGBoost name, the
/// scikit-learn estimator that fits it, whether it is multiclass and whether its predicted
/// values are classes (`_internal.pyi`'s `OBJECTIVES`).
fn objectives(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let table = PyDict::new(py);
    for o in crate::Objective::ALL {
        let d = o.descriptor();
        let facts = PyDict::new(py);
        facts.set_item("estimator", d.estimator())?;
        facts.set_item("multiclass", o.is_multiclass())?;
        facts.set_item("predicts_classes", d.predicts_classes)?;
        table.set_item(d.name, facts)?;
    }
    Ok(table)
}

#[pymodule]
fn _internal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(model_to_json, m)?)?;
    m.add_function(wrap_pyfunction!(model_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(model_check, m)?)?;
    m.add_function(wrap_pyfunction!(check_params, m)?)?;
    m.add_function(wrap_pyfunction!(model_from_xgboost, m)?)?;
    m.add_function(wrap_pyfunction!(model_from_lightgbm, m)?)?;
    m.add_function(wrap_pyfunction!(model_to_xgboost_json, m)?)?;
    m.add_function(wrap_pyfunction!(model_to_onnx, m)?)?;
    m.add_function(wrap_pyfunction!(model_summary, m)?)?;
    m.add_function(wrap_pyfunction!(feature_importance, m)?)?;
    m.add_function(wrap_pyfunction!(model_slice, m)?)?;
    m.add_function(wrap_pyfunction!(metric_higher_is_better, m)?)?;
    m.add_function(wrap_pyfunction!(super::interrupt::interrupt_fits, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(trees_table, m)?)?;
    m.add_function(wrap_pyfunction!(start_tracker, m)?)?;
    m.add_function(wrap_pyfunction!(super::stream::train_stream, m)?)?;
    m.add_function(wrap_pyfunction!(super::device::predict_device, m)?)?;
    m.add_function(wrap_pyfunction!(super::device::output_shape, m)?)?;
    // The names `output=` takes, from the one list (`gbt.predict` checks against it).
    m.add("PREDICT_OUTPUTS", PredictOutput::ALL.map(PredictOutput::name).to_vec())?;
    // What the scikit-learn estimators and cv need to know of each objective, from the descriptors.
    m.add("OBJECTIVES", objectives(m.py())?)?;
    Ok(())
}
