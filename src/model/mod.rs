//! The trained model: trees, the features they expect (names, dtypes, cut points and
//! categories), the base margin, and the evaluation log. Prediction maps input columns by
//! name, so columns may come in any order and extra ones are ignored.

mod continued;
pub(crate) use continued::check_start;
mod format;
mod format_v1;
mod importance;
mod interop;
mod slice;
mod table;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::prediction::{PredictOutput, Predictions};
pub use format::FORMAT_VERSION;
pub use importance::ImportanceType;
pub use interop::decode_ubjson;
pub use table::TreeTable;

use crate::backend::{Backend, Predictor};
use crate::config::{MultiStrategy, Objective, TrainConfig};
use crate::data::{FeatureColumn, FeatureCuts, FeatureFrame};
use crate::error::{Error, Result};
use crate::params::TaskKind;
use crate::prediction::ForestSpec;
use crate::tree::Tree;

/// What a feature was in training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureInfo {
    pub name: String,
    /// The data type seen in training: Polars' name through the plugin ("Int8",
    /// "Datetime(us, UTC)", "String"), which the plugin also reads back at scoring to convert
    /// a temporal column to the training unit; Arrow's name through the Rust API.
    pub dtype: String,
    pub cuts: FeatureCuts,
    /// Category names, for categorical features (codes index this list).
    pub categories: Option<Vec<String>>,
}

/// One metric on one evaluation set, per boosting round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalSeries {
    pub dataset: String,
    pub metric: String,
    pub values: Vec<f64>,
}

/// What a model imported from another library records about its training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// The library that trained it: "XGBoost" or "LightGBM".
    pub source: String,
    /// The training parameters the source model states, under our names, as a JSON object.
    /// Every other parameter is unknown: the model's `config` holds working values for them
    /// (what prediction needs), not what the source was trained with.
    pub params: String,
}

/// A trained gradient-boosted tree ensemble.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub(crate) config: TrainConfig,
    pub(crate) n_outputs: usize,
    /// Starting margin of each output.
    pub(crate) base_margin: Vec<f32>,
    pub(crate) features: Vec<FeatureInfo>,
    /// Round-major: tree `t` adds to output `t % n_outputs`.
    pub(crate) trees: Vec<Tree>,
    pub(crate) best_iteration: Option<usize>,
    pub(crate) evals_result: Vec<EvalSeries>,
    /// Set for models imported from XGBoost or LightGBM (format version 2 on).
    #[serde(default)]
    pub(crate) imported: Option<Imported>,
}

impl Model {
    pub fn objective(&self) -> Objective {
        self.config.objective
    }

    /// The parameters the model was trained with. For an imported model only those in
    /// [`Model::params`] are known; the rest are working values, not the source's.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Every training parameter by name: the configuration of a model trained here; for an
    /// imported one, what the source model states, and `null` for every parameter it does
    /// not (XGBoost's model files keep no learning rate or depth, for instance).
    pub fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        let serde_json::Value::Object(all) = serde_json::to_value(&self.config).expect("a config serialises") else {
            unreachable!("a config serialises to an object")
        };
        match &self.imported {
            None => all,
            Some(i) => {
                let known: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&i.params).unwrap_or_default();
                all.into_iter().map(|(k, _)| (k.clone(), known.get(&k).cloned().unwrap_or_default())).collect()
            }
        }
    }

    /// Where an imported model came from and what it states; None for models trained here.
    pub fn imported(&self) -> Option<&Imported> {
        self.imported.as_ref()
    }

    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }

    pub fn base_margin(&self) -> &[f32] {
        &self.base_margin
    }

    pub fn features(&self) -> &[FeatureInfo] {
        &self.features
    }

    pub fn feature_names(&self) -> Vec<String> {
        self.features.iter().map(|f| f.name.clone()).collect()
    }

    pub fn trees(&self) -> &[Tree] {
        &self.trees
    }

    pub fn num_trees(&self) -> usize {
        self.trees.len()
    }

    /// Whether each round is one vector-leaf tree (`multi_strategy="multi_output_tree"`),
    /// stored as one tree per output that share the round's structure.
    pub fn is_vector_leaf(&self) -> bool {
        self.config.multi_strategy == MultiStrategy::MultiOutputTree
    }

    /// The trees as the model's rounds grew them: every tree, or one per round of a
    /// vector-leaf model (whose outputs' trees share its splits, gains and covers).
    pub(crate) fn distinct_trees(&self) -> impl Iterator<Item = &Tree> {
        let step = if self.is_vector_leaf() { self.n_outputs } else { 1 };
        self.trees.iter().step_by(step)
    }

    /// Boosting rounds in the model (trees per output).
    pub fn num_rounds(&self) -> usize {
        self.trees.len() / self.n_outputs
    }

    /// The round with the best validation score when early stopping was used; the model
    /// keeps trees up to and including it.
    pub fn best_iteration(&self) -> Option<usize> {
        self.best_iteration
    }

    /// Per-round metric values on each evaluation set.
    pub fn evals_result(&self) -> &[EvalSeries] {
        &self.evals_result
    }

    /// The model's feature columns taken from `frame`: by name, or by position when the
    /// frame's columns are unnamed. Categorical columns are recoded to the training codes.
    /// A `missing` sentinel the model was trained with reads as missing here too.
    pub fn bind(&self, frame: &FeatureFrame) -> Result<Vec<FeatureColumn>> {
        let columns = bind_columns(&self.features, frame)?;
        Ok(match self.config.missing {
            Some(m) => columns.into_iter().map(|c| c.with_missing_value(m as f32)).collect(),
            None => columns,
        })
    }

    /// Predicts every row of `frame` on the CPU.
    pub fn predict(&self, frame: &FeatureFrame, output: PredictOutput) -> Result<Predictions> {
        self.predict_with(&*self.predictor(Backend::Cpu)?, frame, output, None)
    }

    /// What a backend builds its predictor from: the trees, the outputs and their base
    /// margins, each feature's category count, and the objective (for its link function).
    pub fn forest_spec(&self) -> ForestSpec<'_> {
        ForestSpec {
            trees: &self.trees,
            n_outputs: self.n_outputs,
            base_margin: &self.base_margin,
            n_categories: self
                .features
                .iter()
                .map(|f| match f.cuts {
                    FeatureCuts::Categorical { n_categories } => Some(n_categories),
                    FeatureCuts::Numeric { .. } => None,
                })
                .collect(),
            objective: self.objective(),
        }
    }

    /// The trees laid out for `backend`'s predictor ([`Backend::engine`]); the error says
    /// why that backend cannot score here (a build without CUDA, no usable GPU). Building it
    /// costs about as much as scoring a few thousand rows on the CPU (an upload on the GPU), so
    /// callers that score many batches build it once and use [`Model::predict_with`].
    pub fn predictor(&self, backend: Backend) -> Result<Arc<dyn Predictor + Send + Sync>> {
        backend.engine().predictor(&self.forest_spec())
    }

    /// [`Model::predict`] with a predictor built from this model ([`Model::predictor`]), starting from `base_margin` (row-major, `n_outputs` per row) in
    /// place of the base score when given. The GPU's predictions equal the CPU's up to float
    /// rounding in the link function.
    pub fn predict_with(
        &self,
        forest: &dyn Predictor,
        frame: &FeatureFrame,
        output: PredictOutput,
        base_margin: Option<&[f32]>,
    ) -> Result<Predictions> {
        self.check_output(output)?;
        let n = frame.n_rows();
        if let Some(b) = base_margin.filter(|_| output != PredictOutput::Leaf) {
            if b.len() != n * self.n_outputs {
                return Err(Error::column(
                    "base_margin",
                    format!("has {} values; expected {}", b.len(), n * self.n_outputs),
                ));
            }
            if let Some(i) = b.iter().position(|m| !m.is_finite()) {
                return Err(Error::column("base_margin", format!("value {i} is {} (must be finite)", b[i])));
            }
        }
        let columns = self.bind(frame)?;
        let predictions = forest.predict(&columns, n, base_margin, output)?;
        Ok(match predictions {
            // A vector-leaf round is one tree: one leaf a round, as XGBoost reports it.
            Predictions::Index { values, width } if output == PredictOutput::Leaf && self.is_vector_leaf() => {
                let k = self.n_outputs;
                let values = values.chunks(width).flat_map(|row| row.iter().step_by(k).copied()).collect();
                Predictions::Index { values, width: width / k }
            }
            p => p,
        })
    }

    /// Like [`Model::predict`], with a per-row starting margin in place of the base score.
    pub fn predict_with_base_margin(
        &self,
        frame: &FeatureFrame,
        base_margin: &[f32],
        output: PredictOutput,
    ) -> Result<Predictions> {
        self.predict_with(&*self.predictor(Backend::Cpu)?, frame, output, Some(base_margin))
    }

    /// What `output` gives per row: its shape (empty: one value) and whether the values are
    /// indices (u32: leaves and classes) rather than floats. The layouts of `predict`'s.
    pub fn output_shape(&self, output: PredictOutput) -> (Vec<usize>, bool) {
        let (k, m) = (self.n_outputs, self.features.len() + 1);
        let per_output = |shape: Vec<usize>| if k > 1 { [vec![k], shape].concat() } else { shape };
        match output {
            PredictOutput::Leaf => (vec![self.trees.len()], true),
            PredictOutput::Class => (vec![], true),
            PredictOutput::Value if self.objective().predicts_classes() => (vec![], true),
            PredictOutput::Value | PredictOutput::Margin => (per_output(vec![]), false),
            PredictOutput::Contrib => (per_output(vec![m]), false),
            PredictOutput::Interaction => (per_output(vec![m, m]), false),
        }
    }

    /// Scores rows the caller holds in GPU memory into GPU memory it holds, with a predictor
    /// built from this model ([`Model::predict_with`] for device arrays; see
    /// [`Predictor::predict_device`]). The rows' columns are the model's features by position,
    /// categorical ones holding the model's category codes; the output is laid out as
    /// [`Model::output_shape`] says, row after row. The model's `missing` sentinel reads as
    /// missing in every column.
    pub fn predict_device(
        &self,
        forest: &dyn Predictor,
        output: PredictOutput,
        export: &mut crate::prediction::ExportArrays<'_>,
    ) -> Result<()> {
        self.check_output(output)?;
        let nf = self.features.len();
        let (shape, index) = self.output_shape(output);
        let per_row: usize = shape.iter().product();
        let mut checked = |stream: u64| {
            let b = export(stream)?;
            if b.rows.cols != nf {
                return Err(Error::data(format!(
                    "the array has {} columns but the model has {nf} features ({}); columns are the features by position",
                    b.rows.cols,
                    self.feature_names().join(", ")
                )));
            }
            if b.out.len != b.rows.rows * per_row || b.out.index != index {
                return Err(Error::data(format!(
                    "the output array holds {} {} values; {} rows of {output:?} need {} {}",
                    b.out.len,
                    if b.out.index { "index" } else { "float" },
                    b.rows.rows,
                    b.rows.rows * per_row,
                    if index { "index" } else { "float" },
                )));
            }
            Ok(b)
        };
        forest.predict_device(output, self.config.missing.map(|m| m as f32), &mut checked)
    }

    /// Class output only means something for classifiers.
    fn check_output(&self, output: PredictOutput) -> Result<()> {
        let classifier = matches!(self.objective().task(), TaskKind::Binary | TaskKind::Multiclass);
        if output == PredictOutput::Class && !classifier {
            return Err(Error::param(
                "output",
                format!("\"class\" needs a classification objective, not {}", self.objective().name()),
            ));
        }
        Ok(())
    }
}

/// The columns of `frame` for `features`: by name, or by position when the frame's columns
/// are unnamed. Categorical columns are recoded to the training codes.
pub(crate) fn bind_columns(features: &[FeatureInfo], frame: &FeatureFrame) -> Result<Vec<FeatureColumn>> {
    let columns: Vec<&FeatureColumn> = if frame.is_unnamed() {
        if frame.n_features() != features.len() {
            return Err(Error::data(format!(
                "the model has {} features but {} unnamed columns were given",
                features.len(),
                frame.n_features()
            )));
        }
        frame.columns().iter().collect()
    } else {
        let missing: Vec<&str> =
            features.iter().filter(|f| frame.find(&f.name).is_none()).map(|f| f.name.as_str()).collect();
        if !missing.is_empty() {
            return Err(Error::data(format!("columns missing for the model's features: {}", missing.join(", "))));
        }
        features.iter().map(|f| frame.find(&f.name).unwrap()).collect()
    };
    columns
        .into_iter()
        .zip(features)
        .map(|(col, info)| match (&info.categories, col.is_categorical()) {
            (Some(cats), true) => col.with_categories(&Arc::new(cats.clone())),
            (None, false) => Ok(col.clone()),
            (Some(_), false) => Err(Error::column(
                &info.name,
                format!("was categorical in training ({}) but is {} here", info.dtype, col.dtype_name()),
            )),
            (None, true) if info.cuts.is_categorical() => Err(Error::column(
                &info.name,
                format!(
                    "takes integer category codes (the model has no category names) but is categorical ({}) here",
                    col.dtype_name()
                ),
            )),
            (None, true) => Err(Error::column(
                &info.name,
                format!("was numeric in training ({}) but is categorical ({}) here", info.dtype, col.dtype_name()),
            )),
        })
        .collect()
}
