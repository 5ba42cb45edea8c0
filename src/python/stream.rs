//! `polars_gbt.train` on a lazy query (or a re-openable Arrow source), on the CPU: the rows
//! arrive in batches, read twice by `data::stream` (cut points, then bins), so the float
//! columns never exist whole. Each batch's columns go through the same conversions as
//! `gbt.fit`'s inputs (`FitInputs`: every Polars dtype, the user's column names in errors).

use polars::prelude::*;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_polars::PySeries;

use super::convert::f32_column;
use super::expressions::{group_ids, round_logger, FitInputs, FitKwargs};
use crate::data::{stream_dataset, Batch, BatchSource, StreamParams};
use crate::{Dataset, TrainConfig};

/// A Python callable `open_pass()` returning an iterator of batches, each a list of Series
/// laid out as `gbt.fit`'s inputs (features, target, then the optional inputs `kwargs` says).
struct PySource<'py, 'k> {
    open_pass: Bound<'py, PyAny>,
    n_rows: Option<usize>,
    kwargs: &'k FitKwargs,
    /// The inputs with no rows (dtypes and names), kept from the first batch.
    schema: Option<Vec<Series>>,
    /// A Python or Polars error that stopped a pass, raised as it is.
    error: Option<PyErr>,
}

impl PySource<'_, '_> {
    /// Stops the pass with `e`, which reaches the caller as it is.
    fn fail(&mut self, e: PyErr) -> crate::Error {
        let message = e.to_string();
        self.error = Some(e);
        crate::Error::data(message)
    }

    fn batch(&mut self, columns: Vec<Series>) -> PyResult<Batch> {
        let to_py = |e: PolarsError| PyValueError::new_err(e.to_string());
        let mut inputs = FitInputs::new(&columns, self.kwargs).map_err(to_py)?;
        // Query ids may run on across batches: they are joined into groups once all are read.
        let group = inputs.group.take();
        // A batch's weights may all be zero; the whole stream's are checked once assembled.
        let weight = inputs.weight.take();
        let mut data = inputs.dataset_or_empty(None, true).map_err(to_py)?;
        if let Some(w) = weight {
            let names = &inputs.names;
            let w = f32_column(w, &names.weight).map_err(to_py)?;
            data = data.with_part_weight(w).map_err(|e| to_py(names.polars(e)))?;
        }
        let group_ids = group.map(|g| group_ids(g, &inputs.names.group)).transpose().map_err(to_py)?;
        if self.schema.is_none() {
            self.schema = Some(columns.iter().map(Series::clear).collect());
        }
        Ok(Batch { data, group_ids })
    }
}

impl BatchSource for PySource<'_, '_> {
    fn n_rows(&mut self) -> crate::Result<Option<usize>> {
        Ok(self.n_rows)
    }

    fn pass(&mut self, each: &mut dyn FnMut(Batch) -> crate::Result<()>) -> crate::Result<()> {
        let batches = match self.open_pass.call0().and_then(|it| it.try_iter()) {
            Ok(it) => it,
            Err(e) => return Err(self.fail(e)),
        };
        for item in batches {
            let columns = item.and_then(|cols| cols.extract::<Vec<PySeries>>());
            let batch = columns.and_then(|cols| self.batch(cols.into_iter().map(|s| s.0).collect()));
            match batch {
                Ok(b) if b.data.n_rows() > 0 => each(b)?,
                Ok(_) => {}
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(())
    }
}

/// Trains on the batches `open_pass()` gives (`n_rows` of them in all when known, else a
/// pass counts them), evaluating `evals` (collected frames' columns, laid out as the batches)
/// every round; returns the model's bytes.
#[pyfunction]
#[pyo3(signature = (kwargs, n_rows, open_pass, evals))]
pub(super) fn train_stream(
    py: Python<'_>,
    kwargs: &str,
    n_rows: Option<usize>,
    open_pass: Bound<'_, PyAny>,
    evals: Vec<(String, Vec<PySeries>)>,
) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| {
        let error = |e: crate::Error| PyValueError::new_err(e.to_string());
        let kwargs: FitKwargs = serde_json::from_str(kwargs)
            .map_err(|e| error(crate::Error::param("kwargs", format!("of a streamed fit are malformed: {e}"))))?;
        if kwargs.has_eval_set || !kwargs.init_model.is_empty() || kwargs.distributed.is_some() {
            return Err(error(crate::Error::param(
                "init_model",
                "a streamed fit takes evaluation sets as frames of their own, and no init_model or distributed \
                 workers yet: collect the data for those",
            )));
        }
        let cfg = TrainConfig::from_json(&kwargs.params).map_err(error)?;
        cfg.validate().map_err(error)?;
        let names = kwargs.input_names.clone();
        let params = StreamParams {
            max_bin: cfg.max_bin,
            seed: cfg.seed,
            missing: cfg.missing.map(|m| m as f32),
            scale_pos_weight: cfg.scale_pos_weight as f32,
        };
        let mut source = PySource { open_pass, n_rows, kwargs: &kwargs, schema: None, error: None };
        let data = match stream_dataset(&mut source, &params) {
            Ok(d) => d,
            Err(e) => return Err(source.error.take().unwrap_or_else(|| error(names.rename(e)))),
        };
        let schema = source.schema.take().expect("a stream with rows had a first batch");
        let eval_columns: Vec<(String, Vec<Series>)> =
            evals.into_iter().map(|(name, cols)| (name, cols.into_iter().map(|s| s.0).collect())).collect();
        let eval_data = eval_columns
            .iter()
            .map(|(_, cols)| FitInputs::new(cols, &kwargs).and_then(|f| f.dataset(None)))
            .collect::<PolarsResult<Vec<Dataset>>>()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let evals: Vec<(&str, &Dataset)> =
            eval_columns.iter().zip(&eval_data).map(|((name, _), d)| (name.as_str(), d)).collect();
        let fit = FitInputs::new(&schema, &kwargs).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut log = round_logger(&cfg, &kwargs);
        // Without the GIL: a Python objective or metric takes it for each call.
        let model = py
            .detach(|| fit.run(&cfg, &data, &evals, &mut log).map(|m| m.to_bytes()).map_err(|e| e.to_string()))
            .map_err(PyValueError::new_err)?;
        Ok(model)
    })
}
