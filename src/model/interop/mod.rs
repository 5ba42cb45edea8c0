//! Model formats of other libraries, in and out: models trained by XGBoost and LightGBM turned
//! into our [`Model`], so they predict with our CPU and GPU predictors; and our models written
//! as XGBoost JSON and as ONNX graphs. Our own format is `model::format`.
//!
//! * `foreign`: what both importers read of a foreign model, assembled into ours.
//! * `xgboost_import`: XGBoost's JSON and UBJSON models (`ubjson` reads the latter).
//! * `lightgbm_import`: LightGBM's text models.
//! * `xgboost_export`: our models as XGBoost JSON.
//! * `onnx_export`: our models as ONNX graphs.

mod foreign;
mod lightgbm_import;
mod onnx_export;
mod ubjson;
mod xgboost_export;
mod xgboost_import;

pub use ubjson::decode as decode_ubjson;

use crate::error::Result;
use crate::model::Model;

impl Model {
    /// A model saved by XGBoost (`Booster.save_model`, JSON or UBJSON).
    pub fn from_xgboost(bytes: &[u8]) -> Result<Model> {
        xgboost_import::import(bytes)
    }

    /// A model saved by LightGBM (`Booster.save_model` / `model_to_string`, text format).
    pub fn from_lightgbm(text: &str) -> Result<Model> {
        lightgbm_import::import(text)
    }
}
