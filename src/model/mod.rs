//! The trained model: trees, the features they expect (names, dtypes, cut points and
//! categories), the base margin, and the evaluation log. Prediction maps input columns by
//! name, so columns may come in any order and extra ones are ignored.

mod format;
mod import;
mod importance;

use std::sync::Arc;

use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, UInt32Array};
use arrow_schema::{DataType, Field};
use serde::{Deserialize, Serialize};

pub use format::FORMAT_VERSION;
pub use import::decode_ubjson;
pub use importance::ImportanceType;

use crate::backend::cpu::predict::FlatForest;
use crate::config::{Objective, TrainConfig};
use crate::data::{FeatureColumn, FeatureCuts, FeatureFrame};
use crate::error::{Error, Result};
use crate::objective::transform_row;
use crate::tree::Tree;

/// What a feature was in training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureInfo {
    pub name: String,
    /// The Arrow data type seen in training, for messages.
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

/// What `predict` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictOutput {
    /// Raw scores before the link function.
    Margin,
    /// Probabilities, means or scores in the objective's output space.
    Value,
    /// Class index (binary: probability > 0.5).
    Class,
    /// The leaf each row reaches in each tree.
    Leaf,
}

impl std::str::FromStr for PredictOutput {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|_| {
            Error::param("output", format!("`{s}` is not one of \"value\", \"margin\", \"class\", \"leaf\""))
        })
    }
}

/// Predictions, row-major with `width` values per row.
#[derive(Clone, Debug, PartialEq)]
pub enum Predictions {
    Float { values: Vec<f32>, width: usize },
    Index { values: Vec<u32>, width: usize },
}

impl Predictions {
    /// As an Arrow array: one value per row, or a fixed-size list of `width` per row.
    pub fn to_arrow(&self) -> ArrayRef {
        fn wrap(values: ArrayRef, width: usize, dtype: DataType) -> ArrayRef {
            if width == 1 {
                values
            } else {
                let field = Arc::new(Field::new("item", dtype, false));
                Arc::new(FixedSizeListArray::new(field, width as i32, values, None))
            }
        }
        match self {
            Predictions::Float { values, width } => {
                wrap(Arc::new(Float32Array::from(values.clone())), *width, DataType::Float32)
            }
            Predictions::Index { values, width } => {
                wrap(Arc::new(UInt32Array::from(values.clone())), *width, DataType::UInt32)
            }
        }
    }
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
}

impl Model {
    pub fn objective(&self) -> Objective {
        self.config.objective
    }

    /// The parameters the model was trained with.
    pub fn config(&self) -> &TrainConfig {
        &self.config
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
    pub fn bind(&self, frame: &FeatureFrame) -> Result<Vec<FeatureColumn>> {
        bind_columns(&self.features, frame)
    }

    /// Predicts every row of `frame` on the CPU.
    pub fn predict(&self, frame: &FeatureFrame, output: PredictOutput) -> Result<Predictions> {
        self.predict_with(&self.cpu_forest(), frame, output)
    }

    /// The trees laid out for the CPU predictor. Building it costs about as much as scoring a
    /// few thousand rows, so callers that score many batches build it once and use
    /// [`Model::predict_with`].
    pub fn cpu_forest(&self) -> FlatForest {
        FlatForest::new(&self.trees, self.features.len())
    }

    /// [`Model::predict`] with a forest from [`Model::cpu_forest`] of this model.
    pub fn predict_with(
        &self,
        forest: &FlatForest,
        frame: &FeatureFrame,
        output: PredictOutput,
    ) -> Result<Predictions> {
        self.check_output(output)?;
        if output == PredictOutput::Leaf {
            let columns = self.bind(frame)?;
            let mut leaves = vec![0u32; frame.n_rows() * self.trees.len()];
            forest.predict_leaf(&columns, &mut leaves);
            return Ok(Predictions::Index { values: leaves, width: self.trees.len() });
        }
        let start: Vec<f32> = (0..frame.n_rows()).flat_map(|_| self.base_margin.iter().copied()).collect();
        self.score(forest, frame, start, output)
    }

    /// Like [`Model::predict`], with a per-row starting margin in place of the base score.
    pub fn predict_with_base_margin(
        &self,
        frame: &FeatureFrame,
        base_margin: &[f32],
        output: PredictOutput,
    ) -> Result<Predictions> {
        if output == PredictOutput::Leaf {
            return self.predict(frame, output);
        }
        self.check_output(output)?;
        let n = frame.n_rows();
        if base_margin.len() != n * self.n_outputs {
            return Err(Error::column(
                "base_margin",
                format!("has {} values; expected {}", base_margin.len(), n * self.n_outputs),
            ));
        }
        self.score(&self.cpu_forest(), frame, base_margin.to_vec(), output)
    }

    /// Predicts every row of `frame` on the GPU with `forest` (built by [`GpuForest::new`] from
    /// this model), starting from `base_margin` (row-major) when given. Equals [`Model::predict`]
    /// up to float rounding in the link function.
    #[cfg(feature = "cuda")]
    pub fn predict_gpu(
        &self,
        forest: &crate::backend::cuda::GpuForest,
        frame: &FeatureFrame,
        output: PredictOutput,
        base_margin: Option<&[f32]>,
    ) -> Result<Predictions> {
        self.check_output(output)?;
        let n = frame.n_rows();
        if let Some(b) = base_margin {
            if b.len() != n * self.n_outputs {
                return Err(Error::column(
                    "base_margin",
                    format!("has {} values; expected {}", b.len(), n * self.n_outputs),
                ));
            }
        }
        let columns = self.bind(frame)?;
        crate::backend::cuda::predict::predict(forest, &columns, n, base_margin, output)
    }

    /// Adds every tree to the starting margins (row-major) and applies `output`.
    fn score(
        &self,
        forest: &FlatForest,
        frame: &FeatureFrame,
        mut margin: Vec<f32>,
        output: PredictOutput,
    ) -> Result<Predictions> {
        let columns = self.bind(frame)?;
        forest.predict_margin(&columns, self.n_outputs, &mut margin);
        Ok(self.finish(margin, output))
    }

    /// Class output only means something for classifiers.
    fn check_output(&self, output: PredictOutput) -> Result<()> {
        let classifier = self.objective() == Objective::BinaryLogistic || self.objective().is_multiclass();
        if output == PredictOutput::Class && !classifier {
            return Err(Error::param(
                "output",
                format!("\"class\" needs a classification objective, not {}", self.objective().name()),
            ));
        }
        Ok(())
    }

    fn finish(&self, mut margin: Vec<f32>, output: PredictOutput) -> Predictions {
        let k = self.n_outputs;
        match output {
            PredictOutput::Margin => Predictions::Float { values: margin, width: k },
            PredictOutput::Value => {
                if self.objective() == Objective::MultiSoftmax {
                    return self.finish(margin, PredictOutput::Class);
                }
                margin.chunks_mut(k).for_each(|row| transform_row(self.objective(), row));
                Predictions::Float { values: margin, width: k }
            }
            PredictOutput::Class => {
                let classes = if k == 1 {
                    margin.iter().map(|&m| (m > 0.0) as u32).collect()
                } else {
                    margin
                        .chunks(k)
                        .map(|row| (0..k).fold(0, |b, c| if row[c] > row[b] { c } else { b }) as u32)
                        .collect()
                };
                Predictions::Index { values: classes, width: 1 }
            }
            PredictOutput::Leaf => unreachable!("leaf output is handled before margins"),
        }
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
                format!("was categorical in training ({}) but is {} here", info.dtype, col.data_type()),
            )),
            (None, true) if info.cuts.is_categorical() => Err(Error::column(
                &info.name,
                format!(
                    "takes integer category codes (the model has no category names) but is categorical ({}) here",
                    col.data_type()
                ),
            )),
            (None, true) => Err(Error::column(
                &info.name,
                format!("was numeric in training ({}) but is categorical ({}) here", info.dtype, col.data_type()),
            )),
        })
        .collect()
}
