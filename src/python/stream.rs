//! `polars_gbt.train` on a lazy query or a re-openable Arrow source, on the CPU: the rows
//! arrive in batches, read twice by `data::stream` (cut points, then bins), so the float
//! columns never exist whole; each evaluation set is read once, binned with the training cut
//! points as it comes. Each batch's columns go through the same conversions as `gbt.fit`'s
//! inputs (`FitInputs`: every Polars dtype, the user's column names in errors).
//!
//! The passes run without the GIL: it is taken only to pull the next batch from Python (so a
//! query's own threads, and Python's, run while a batch is binned).

use polars::prelude::*;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use pyo3_polars::PySeries;

use super::convert::f32_column;
use super::inputs::{group_ids, FitInputs, Rows};
use super::interrupt::interrupt_epoch;
use super::kwargs::{FitKwargs, Joined};
use super::progress::{round_logger, ProgressLine};
use crate::data::{
    stream_dataset_into, stream_dataset_sharded, stream_eval_set, stream_eval_set_sharded, Batch, BatchSource,
    FeatureCuts, PassProgress, StreamParams,
};
use crate::{Dataset, TrainConfig};

/// A Python callable `open_pass()` returning an iterator of batches, each a list of Series
/// laid out as `gbt.fit`'s inputs (features, target, then the optional inputs `kwargs` says).
struct PySource<'k> {
    open_pass: Py<PyAny>,
    n_rows: Option<usize>,
    kwargs: &'k FitKwargs,
    /// The evaluation set this source is, which errors of its batches name; None: the
    /// training rows.
    eval_set: Option<String>,
    /// The inputs with no rows (dtypes and names), kept from the first batch.
    schema: Option<Vec<Series>>,
    /// The interrupt count when the fit started: a pass stops at the next batch after Ctrl-C.
    epoch: u64,
    /// A Python or Polars error that stopped a pass, raised as it is.
    error: Option<PyErr>,
}

impl<'k> PySource<'k> {
    fn new(open_pass: Py<PyAny>, n_rows: Option<usize>, kwargs: &'k FitKwargs, epoch: u64) -> Self {
        PySource { open_pass, n_rows, kwargs, eval_set: None, schema: None, epoch, error: None }
    }

    /// `e`, an error of a batch's columns, naming the evaluation set this source is.
    fn of_eval_set(&self, e: PyErr) -> PyErr {
        let Some(name) = &self.eval_set else { return e };
        let message = Python::attach(|py| e.value(py).to_string());
        let message = match message.strip_prefix("column `").and_then(|m| m.split_once("`: ")) {
            Some((column, reason)) => format!("column `{column}` of eval set `{name}`: {reason}"),
            None => match message.strip_prefix("invalid data: ") {
                Some(reason) => format!("invalid data: eval set `{name}`: {reason}"),
                None => return e,
            },
        };
        PyValueError::new_err(message)
    }

    /// Stops the pass with `e`, which reaches the caller as it is.
    fn fail(&mut self, e: PyErr) -> crate::Error {
        let message = e.to_string();
        self.error = Some(e);
        crate::Error::data(message)
    }

    /// `e` as the error to raise: the Python error that stopped a pass, else `e` in the
    /// user's names.
    fn raise(&mut self, e: crate::Error) -> PyErr {
        match self.error.take() {
            Some(py) => py,
            None => PyValueError::new_err(self.kwargs.input_names.rename(e).to_string()),
        }
    }

    fn batch(&mut self, columns: Vec<Series>) -> PyResult<Batch> {
        let to_py = |e: PolarsError| PyValueError::new_err(e.to_string());
        let mut inputs = FitInputs::new(&columns, self.kwargs).map_err(to_py)?;
        // Query ids may run on across batches: they are joined into groups once all are read.
        let group = inputs.group.take();
        // A batch's weights may all be zero; the whole stream's are checked once assembled.
        let weight = inputs.weight.take();
        let mut data = inputs.dataset_or_empty(Rows::All, true).map_err(to_py)?;
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

    /// The next batch's columns from `batches` (None at the end), taking the GIL for it.
    fn next_columns(batches: &Py<PyIterator>) -> PyResult<Option<Vec<Series>>> {
        Python::attach(|py| match batches.bind(py).clone().next() {
            None => Ok(None),
            Some(item) => {
                let columns = item?.extract::<Vec<PySeries>>()?;
                Ok(Some(columns.into_iter().map(|s| s.0).collect()))
            }
        })
    }
}

impl BatchSource for PySource<'_> {
    fn n_rows(&mut self) -> crate::Result<Option<usize>> {
        Ok(self.n_rows)
    }

    fn pass(&mut self, each: &mut dyn FnMut(Batch) -> crate::Result<()>) -> crate::Result<()> {
        let opened = Python::attach(|py| self.open_pass.bind(py).call0()?.try_iter().map(Bound::unbind));
        let batches = match opened {
            Ok(it) => it,
            Err(e) => return Err(self.fail(e)),
        };
        let read = self.read(&batches, each);
        // Closed with the GIL, now: a generator's `finally` (which stops a query's thread)
        // runs before the next pass opens another.
        Python::attach(move |_| drop(batches));
        read
    }
}

impl PySource<'_> {
    /// Hands every batch of `batches` to `each`.
    fn read(
        &mut self,
        batches: &Py<PyIterator>,
        each: &mut dyn FnMut(Batch) -> crate::Result<()>,
    ) -> crate::Result<()> {
        loop {
            if interrupt_epoch() != self.epoch {
                return Err(crate::Error::Interrupted);
            }
            let batch = match Self::next_columns(batches) {
                Ok(None) => return Ok(()),
                Ok(Some(columns)) => self.batch(columns).map_err(|e| self.of_eval_set(e)),
                Err(e) => Err(e),
            };
            match batch {
                Ok(b) if b.data.n_rows() > 0 => each(b)?,
                Ok(_) => {}
                Err(e) => return Err(self.fail(e)),
            }
        }
    }
}

/// Trains on the batches `open_pass()` gives (`n_rows` of them in all when known, else a
/// pass counts them), evaluating every round the evaluation sets `evals` (name, rows when
/// known, and their own `open_pass`, read once, laid out as the training batches); returns
/// the model's bytes.
#[pyfunction]
#[pyo3(signature = (kwargs, n_rows, open_pass, evals))]
pub(super) fn train_stream(
    py: Python<'_>,
    kwargs: &str,
    n_rows: Option<usize>,
    open_pass: Py<PyAny>,
    evals: Vec<(String, Option<usize>, Py<PyAny>)>,
) -> PyResult<Vec<u8>> {
    super::catch_panics_py(|| {
        let error = |e: crate::Error| PyValueError::new_err(e.to_string());
        let kwargs: FitKwargs = serde_json::from_str(kwargs)
            .map_err(|e| error(crate::Error::param("kwargs", format!("of a streamed fit are malformed: {e}"))))?;
        if kwargs.has_eval_set || !kwargs.init_model.is_empty() {
            return Err(error(crate::Error::param(
                "init_model",
                "a streamed fit takes evaluation sets as frames of their own, and no init_model yet: collect the \
                 data for that",
            )));
        }
        let cfg = TrainConfig::from_json(&kwargs.params).map_err(error)?;
        cfg.validate().map_err(error)?;
        // A device that cannot train says so before the data is read, twice, for nothing.
        let (engine, _) = crate::backend::select(&cfg).map_err(error)?;
        let params = StreamParams {
            max_bin: cfg.max_bin,
            seed: cfg.seed,
            missing: cfg.missing.map(|m| m as f32),
            scale_pos_weight: cfg.scale_pos_weight as f32,
        };
        // A distributed fit's worker joins the others first: pass 1 ends with their exchange.
        let joined = match &kwargs.distributed {
            Some(d) => {
                kwargs.check_distributable().map_err(error)?;
                Some(py.detach(|| d.join(&cfg)).map_err(|e| error(kwargs.input_names.rename(e)))?)
            }
            None => None,
        };
        let shard = joined.as_ref().map(Joined::shard);
        let share = shard.as_ref().map(|s| s.stream_share());
        let epoch = interrupt_epoch();
        let mut line = kwargs.progress.then(ProgressLine::new);
        let mut progress = |p: &PassProgress| {
            if let Some(line) = &mut line {
                line.pass(p)
            }
        };
        let mut source = PySource::new(open_pass, n_rows, &kwargs, epoch);
        // A fit on one GPU bins its batches there as they stream, when its bins fit the GPU.
        let mut sink_for = |n: usize, cuts: &[FeatureCuts]| engine.stream_bins(&cfg, n, cuts);
        let data = py.detach(|| match &share {
            Some(share) => stream_dataset_sharded(&mut source, &params, share, &mut progress),
            None => stream_dataset_into(&mut source, &params, &mut sink_for, &mut progress),
        });
        let data = data.map_err(|e| source.raise(e))?;
        let schema = source.schema.take().expect("a stream with rows had a first batch");
        let mut eval_data: Vec<(String, Dataset)> = Vec::with_capacity(evals.len());
        for (name, n_rows, open_pass) in evals {
            let mut source = PySource::new(open_pass, n_rows, &kwargs, epoch);
            source.eval_set = Some(name.clone());
            let set = py.detach(|| match &share {
                Some(_) => stream_eval_set_sharded(&mut source, &data, params.missing, &name, &mut progress),
                None => stream_eval_set(&mut source, &data, params.missing, &name, &mut progress),
            });
            eval_data.push((name, set.map_err(|e| source.raise(e))?));
        }
        let evals: Vec<(&str, &Dataset)> = eval_data.iter().map(|(name, d)| (name.as_str(), d)).collect();
        let fit = FitInputs::new(&schema, &kwargs).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut log = round_logger(&cfg, &kwargs);
        // The fit says where its bins live on a GPU (paged or not) when verbose.
        let verbose = kwargs.verbose > 0;
        // Without the GIL: a Python objective or metric takes it for each call.
        let model = py
            .detach(|| {
                let _notes = crate::profile::notes(verbose);
                let model = match &shard {
                    Some(shard) => crate::Training::new(&cfg, &data)
                        .evals(&evals)
                        .callback(&mut log)
                        .shard(shard)
                        .run()
                        .map_err(|e| kwargs.input_names.rename(e).to_string()),
                    None => fit.run(&cfg, &data, &evals, &mut log).map_err(|e| e.to_string()),
                };
                model.map(|m| m.to_bytes())
            })
            .map_err(PyValueError::new_err)?;
        Ok(model)
    })
}
