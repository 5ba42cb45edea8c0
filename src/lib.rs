//! # polars-gbt
//!
//! Gradient-boosted decision trees over Arrow columns. Columns are read in place from their
//! Arrow buffers (nulls and NaN are missing values, dictionary columns are categorical),
//! quantised into bins, and trees are grown from integer-quantised gradient histograms, so
//! training is bitwise deterministic. Parameters and objectives use XGBoost's names.
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{ArrayRef, Float32Array};
//! use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, PredictOutput, TrainConfig};
//!
//! let x: Vec<f32> = (0..200).map(|i| i as f32 / 10.0).collect();
//! let y: Vec<f32> = x.iter().map(|v| if *v > 10.0 { 1.0 } else { 0.0 }).collect();
//! let column: ArrayRef = Arc::new(Float32Array::from(x));
//! let frame = FeatureFrame::new(vec![FeatureColumn::new("x", vec![column])?])?;
//! let data = Dataset::new(frame.clone(), y)?;
//! let cfg = TrainConfig::from_json(r#"{"objective": "binary:logistic", "n_estimators": 10}"#)?;
//! let model = train(&cfg, &data, &[])?;
//! let p = model.predict(&frame, PredictOutput::Value)?;
//! # Ok::<(), polars_gbt::Error>(())
//! ```
//!
//! The data flow and the file behind each step are described in `docs/architecture.md`.

pub mod backend;
pub mod booster;
pub mod collective;
pub mod config;
pub mod data;
pub mod error;
pub mod math;
pub mod metric;
pub mod model;
pub mod objective;
pub mod params;
pub mod prediction;
pub mod profile;
#[cfg(feature = "python")]
mod python;
pub mod random;
pub mod simd;
pub mod tree;

pub use booster::{train, RoundCallback, RoundLog, Training, UserFunctions};
pub use config::{Device, GrowPolicy, MultiStrategy, Objective, TrainConfig};
pub use data::{Dataset, FeatureColumn, FeatureFrame};
pub use error::{Error, Result};
pub use metric::Metric;
pub use model::{ImportanceType, Model, PredictOutput, Predictions, FORMAT_VERSION};
