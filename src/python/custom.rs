//! A user's objective and metrics: Python callables, called each round from the fit (which
//! runs in Polars' threads, so it takes the GIL for the call). An objective turns predictions
//! and labels into gradients and hessians; a metric into a number. The callables stay in the
//! Python process, in `polars_gbt._custom`'s registry; the fit holds only their numbers, so a
//! plan carrying them cannot run in another process, and says so.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::{Error, Result};
use crate::metric::CustomMetric;
use crate::objective::{loss_for, Loss, Targets};
use crate::tree::GradPair;
use crate::TrainConfig;

pub(super) struct PyObjective {
    /// The callable's number in `polars_gbt._custom`'s registry.
    id: u64,
    k: usize,
    /// The model's link objective: how a `base_score` becomes a margin.
    link: Box<dyn Loss>,
}

impl PyObjective {
    pub(super) fn new(id: u64, cfg: &TrainConfig) -> Self {
        PyObjective { id, k: cfg.num_outputs(), link: loss_for(cfg.objective, &cfg.objective_params()) }
    }
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `polars_gbt._custom.<function>(id, values, labels, n, k)`, with the GIL: how the fit hands
/// a registered callable its float32 inputs, as bytes.
fn call_custom<T>(function: &str, id: u64, values: &[f32], labels: &[f32], n: usize, k: usize) -> PyResult<T>
where
    T: for<'a, 'py> FromPyObject<'a, 'py>,
{
    Python::attach(|py| {
        let custom = py.import("polars_gbt._custom")?;
        let values = PyBytes::new(py, &le_bytes(values));
        let labels = PyBytes::new(py, &le_bytes(labels));
        custom.getattr(function)?.call1((id, values, labels, n, k))?.extract().map_err(Into::into)
    })
}

impl Loss for PyObjective {
    /// The callable sees margins (n,) or (n, k) and labels (n,), float32; `_custom` checks
    /// what it returns and hands back (g, h) pairs class-major. Row weights multiply them here,
    /// as they do the built-in losses' gradients.
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let n = t.label.len();
        let pairs: Vec<u8> = call_custom("objective_gradients", self.id, margin, t.label, n, self.k)
            .map_err(|e| Error::param("objective", e.to_string()))?;
        if pairs.len() != out.len() * 8 {
            return Err(Error::param(
                "objective",
                format!("returned {} bytes for {} gradient pairs", pairs.len(), out.len()),
            ));
        }
        for (j, (o, b)) in out.iter_mut().zip(pairs.chunks_exact(8)).enumerate() {
            let w = t.w(j % n);
            let g = f32::from_le_bytes(b[..4].try_into().unwrap());
            let h = f32::from_le_bytes(b[4..].try_into().unwrap());
            *o = GradPair { g: g * w, h: h * w };
        }
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        crate::objective::check_each(t.label, "labels must be finite", f32::is_finite)
    }

    /// Rows start from margin 0 (a user's objective has no intercept to estimate), unless
    /// `base_score` is given.
    fn estimate_base_margin(&self, _: &Targets) -> Vec<f32> {
        vec![0.0; self.k]
    }

    fn base_score_to_margin(&self, score: f64) -> f32 {
        self.link.base_score_to_margin(score)
    }
}

/// A user's metric: `name` and direction as the Python package found them.
pub(super) struct PyMetric {
    pub(super) id: u64,
    pub(super) name: String,
    pub(super) higher_is_better: bool,
}

impl CustomMetric for PyMetric {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn higher_is_better(&self) -> bool {
        self.higher_is_better
    }

    /// The callable sees the predictions (n,) or (n, k) and the labels (n,), float32.
    fn evaluate(&self, pred: &[f32], n_outputs: usize, t: &Targets) -> Result<f64> {
        call_custom("metric_value", self.id, pred, t.label, t.label.len(), n_outputs)
            .map_err(|e| Error::param("eval_metric", format!("`{}`: {e}", self.name)))
    }
}
