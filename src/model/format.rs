//! Saving and loading models. The binary format is a fixed header and a bincode payload:
//!
//! ```text
//! offset  size  field
//! 0       8     magic "PLGBTMDL"
//! 8       4     format version (u32, little-endian)
//! 12      8     payload length in bytes (u64, little-endian)
//! 20      4     CRC-32 of the payload (u32, little-endian)
//! 24      n     payload: the model, bincode with fixed-width integers
//! ```
//!
//! In the payload the training parameters are JSON text (version 2), so that a parameter added
//! later, with its default, leaves older files readable; everything else is positional.
//! Version 1 stored the parameters positionally too; it still loads (format_v1.rs). Version 3
//! appends what an imported model's source states (`Model::imported`); version 2 files, which
//! lack it, load as models trained here.
//!
//! Loading checks, in order: length, magic, version, payload length, checksum; decodes with
//! an allocation limit equal to the payload length (so no count in the payload can make it
//! allocate more than the file's size); then validates every index the predictor will follow.
//! The JSON form holds the same model, readable, under `{"format", "version", "model"}`.

use std::path::Path;

use bincode::Options;
use serde::{Deserialize, Serialize};

use super::format_v1::ConfigV1;
use super::{EvalSeries, FeatureInfo, Imported, Model};
use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::tree::Tree;

/// Version written by this build; loading accepts this and older versions.
/// 2: the parameters as JSON text. 3: what an imported model's source states (`Model::imported`).
pub const FORMAT_VERSION: u32 = 3;

const MAGIC: &[u8; 8] = b"PLGBTMDL";
const HEADER: usize = 24;
const JSON_FORMAT: &str = "polars-gbt";

fn codec(limit: u64) -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().with_little_endian().with_limit(limit)
}

/// The binary payload as written: `Model`'s fields in order, the parameters as JSON text.
#[derive(Serialize)]
struct PayloadOut<'a> {
    config: String,
    n_outputs: usize,
    base_margin: &'a [f32],
    features: &'a [FeatureInfo],
    trees: &'a [Tree],
    best_iteration: Option<usize>,
    evals_result: &'a [EvalSeries],
    imported: &'a Option<Imported>,
}

/// The binary payload as read, with the parameters as JSON text (`C = String`, version 2 on) or
/// positional (`ConfigV1`, version 1), and what an imported model's source states
/// (`I = Option<Imported>`, version 3 on; `()`, which bincode reads from no bytes, before).
#[derive(Deserialize)]
struct PayloadIn<C, I> {
    config: C,
    n_outputs: usize,
    base_margin: Vec<f32>,
    features: Vec<FeatureInfo>,
    trees: Vec<Tree>,
    best_iteration: Option<usize>,
    evals_result: Vec<EvalSeries>,
    imported: I,
}

impl<C, I> PayloadIn<C, I> {
    fn into_model(
        self,
        read_config: impl FnOnce(C) -> Result<TrainConfig>,
        read_imported: impl FnOnce(I) -> Option<Imported>,
    ) -> Result<Model> {
        Ok(Model {
            config: read_config(self.config)?,
            n_outputs: self.n_outputs,
            base_margin: self.base_margin,
            features: self.features,
            trees: self.trees,
            best_iteration: self.best_iteration,
            evals_result: self.evals_result,
            imported: read_imported(self.imported),
        })
    }
}

#[derive(Serialize, Deserialize)]
struct JsonEnvelope<M> {
    format: String,
    version: u32,
    model: M,
}

impl Model {
    /// The model in the versioned, checksummed binary format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let stored = PayloadOut {
            config: serde_json::to_string(&self.config).expect("parameters always serialise"),
            n_outputs: self.n_outputs,
            base_margin: &self.base_margin,
            features: &self.features,
            trees: &self.trees,
            best_iteration: self.best_iteration,
            evals_result: &self.evals_result,
            imported: &self.imported,
        };
        let payload = codec(u64::MAX).serialize(&stored).expect("a model always serialises");
        let mut out = Vec::with_capacity(HEADER + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Reads a model written by [`Model::to_bytes`] (or its JSON form, detected by a leading `{`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.first() == Some(&b'{') {
            let text = std::str::from_utf8(bytes).map_err(|_| Error::model("JSON model is not valid UTF-8"))?;
            return Self::from_json(text);
        }
        if bytes.len() < HEADER {
            return Err(Error::model(format!(
                "{} bytes is too short for a model (the header alone is {HEADER})",
                bytes.len()
            )));
        }
        if &bytes[..8] != MAGIC {
            return Err(Error::model("not a polars-gbt model (bad magic bytes)"));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        check_version(version)?;
        let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
        let payload = &bytes[HEADER..];
        if len != payload.len() as u64 {
            return Err(Error::model(format!(
                "the header announces {len} payload bytes but {} follow (truncated or padded file)",
                payload.len()
            )));
        }
        let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
        if crc32fast::hash(payload) != crc {
            return Err(Error::model("checksum mismatch: the file is corrupt"));
        }
        let cannot = |e: bincode::Error| Error::model(format!("cannot decode: {e}"));
        let json_config =
            |text: String| serde_json::from_str(&text).map_err(|e| Error::model(format!("stored parameters: {e}")));
        let model = match version {
            1 => codec(len)
                .deserialize::<PayloadIn<ConfigV1, ()>>(payload)
                .map_err(cannot)?
                .into_model(ConfigV1::upgrade, |()| None)?,
            2 => codec(len)
                .deserialize::<PayloadIn<String, ()>>(payload)
                .map_err(cannot)?
                .into_model(json_config, |()| None)?,
            _ => codec(len)
                .deserialize::<PayloadIn<String, Option<Imported>>>(payload)
                .map_err(cannot)?
                .into_model(json_config, |i| i)?,
        };
        model.validate()?;
        Ok(model)
    }

    /// A readable JSON dump of the whole model; [`Model::from_json`] reads it back.
    pub fn to_json(&self) -> String {
        let env = JsonEnvelope { format: JSON_FORMAT.to_string(), version: FORMAT_VERSION, model: self };
        serde_json::to_string_pretty(&env).expect("a model always serialises")
    }

    pub fn from_json(text: &str) -> Result<Self> {
        #[derive(Deserialize)]
        struct Header {
            format: String,
            version: u32,
        }
        let header: Header =
            serde_json::from_str(text).map_err(|e| Error::model(format!("not a polars-gbt JSON model: {e}")))?;
        if header.format != JSON_FORMAT {
            return Err(Error::model(format!("JSON format is `{}`, expected `{JSON_FORMAT}`", header.format)));
        }
        check_version(header.version)?;
        let env: JsonEnvelope<Model> =
            serde_json::from_str(text).map_err(|e| Error::model(format!("cannot decode JSON model: {e}")))?;
        env.model.validate()?;
        Ok(env.model)
    }

    /// Writes the binary format to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        std::fs::write(path, self.to_bytes())?;
        Ok(())
    }

    /// Reads a model file (binary or JSON).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        Self::from_bytes(&std::fs::read(path)?)
    }

    /// Checks everything prediction relies on, so a crafted file cannot make it misbehave.
    pub(crate) fn validate(&self) -> Result<()> {
        self.config.validate().map_err(|e| Error::model(format!("stored parameters: {e}")))?;
        if self.n_outputs != self.config.num_outputs() {
            return Err(Error::model(format!(
                "{} outputs stored but the objective has {}",
                self.n_outputs,
                self.config.num_outputs()
            )));
        }
        if self.base_margin.len() != self.n_outputs || self.base_margin.iter().any(|m| !m.is_finite()) {
            return Err(Error::model("base margin is missing, of the wrong length, or not finite"));
        }
        if self.features.is_empty() {
            return Err(Error::model("no features"));
        }
        if self.trees.is_empty() || !self.trees.len().is_multiple_of(self.n_outputs) {
            return Err(Error::model(format!(
                "{} trees do not make whole rounds of {} outputs",
                self.trees.len(),
                self.n_outputs
            )));
        }
        self.check_features()?;
        self.check_trees()?;
        if self.is_vector_leaf() {
            let k = self.n_outputs;
            if let Some(r) = self.trees.chunks(k).position(|round| round.iter().any(|t| !t.same_splits(&round[0]))) {
                return Err(Error::model(format!(
                    "round {r} of the vector-leaf model has trees of different splits for its {k} outputs"
                )));
            }
        }
        self.check_margin_bounds()?;
        if let Some(i) = &self.imported {
            if !matches!(serde_json::from_str(&i.params), Ok(serde_json::Value::Object(_))) {
                return Err(Error::model("the imported model's recorded parameters are not a JSON object"));
            }
        }
        if let Some(b) = self.best_iteration {
            if b >= self.num_rounds() {
                return Err(Error::model("best iteration lies beyond the stored trees"));
            }
        }
        Ok(())
    }

    /// Each feature's bins are consistent: numeric cut points sorted and finite; categorical
    /// ones counting their names (or integer codes, for imported models).
    fn check_features(&self) -> Result<()> {
        for f in &self.features {
            match (&f.cuts, &f.categories) {
                (crate::data::FeatureCuts::Numeric { cuts }, None) => {
                    if cuts.windows(2).any(|w| w[0] >= w[1]) || cuts.iter().any(|c| !c.is_finite()) {
                        return Err(Error::model(format!(
                            "feature `{}` has unsorted or non-finite cut points",
                            f.name
                        )));
                    }
                }
                (crate::data::FeatureCuts::Categorical { n_categories }, Some(names))
                    if *n_categories as usize == names.len() => {}
                // Imported models may take integer category codes instead of names.
                (crate::data::FeatureCuts::Categorical { .. }, None) => {}
                _ => {
                    return Err(Error::model(format!(
                        "feature `{}` has inconsistent cut points and categories",
                        f.name
                    )))
                }
            }
        }
        Ok(())
    }

    /// Each tree is well formed, and each split fits its feature's kind and bins.
    fn check_trees(&self) -> Result<()> {
        for (i, t) in self.trees.iter().enumerate() {
            t.validate(self.features.len()).map_err(|e| Error::model(format!("tree {i}: {e}")))?;
            for n in 0..t.n_nodes() as u32 {
                if t.is_leaf(n) {
                    continue;
                }
                let info = &self.features[t.feature[n as usize] as usize];
                let bins = info.cuts.n_bins();
                if t.is_categorical(n) != info.cuts.is_categorical()
                    || (!t.is_categorical(n) && t.split_bin[n as usize] >= bins)
                {
                    return Err(Error::model(format!("tree {i} node {n}: split does not fit feature `{}`", info.name)));
                }
            }
        }
        Ok(())
    }

    /// Every margin stays finite: the largest leaves of each output's trees cannot sum past
    /// the float range.
    fn check_margin_bounds(&self) -> Result<()> {
        for (k, base) in self.base_margin.iter().enumerate() {
            let bound: f64 = base.abs() as f64
                + self
                    .trees
                    .iter()
                    .skip(k)
                    .step_by(self.n_outputs)
                    .map(|t| t.value.iter().fold(0f64, |m, v| m.max(v.abs() as f64)))
                    .sum::<f64>();
            if bound >= f32::MAX as f64 / 2.0 {
                return Err(Error::model(format!(
                    "the leaf values of output {k} can sum to {bound:e}, beyond the float range"
                )));
            }
        }
        Ok(())
    }
}

fn check_version(version: u32) -> Result<()> {
    if version > FORMAT_VERSION {
        return Err(Error::ModelVersion { found: version, supported: FORMAT_VERSION });
    }
    if version == 0 {
        return Err(Error::model("format version 0 does not exist"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_2_files_still_load() {
        let lgb = "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\nmax_feature_idx=0\n\
                   objective=regression\nfeature_names=x\nfeature_infos=[0:1]\ntree_sizes=1\n\nTree=0\n\
                   num_leaves=2\nnum_cat=0\nsplit_feature=0\nsplit_gain=1\nthreshold=0.5\ndecision_type=2\n\
                   left_child=-1\nright_child=-2\nleaf_value=1 2\nleaf_weight=1 1\nleaf_count=1 1\n\
                   internal_value=0\ninternal_weight=2\ninternal_count=2\nshrinkage=1\n\nend of trees\n";
        let mut model = Model::from_lightgbm(lgb).unwrap();
        assert!(Model::from_bytes(&model.to_bytes()).unwrap().imported.is_some());
        model.imported = None;
        let v3 = model.to_bytes();
        // Version 2's payload is version 3's without the last field (`imported`, here None:
        // bincode's one zero byte).
        assert_eq!(v3.last(), Some(&0));
        let payload = &v3[HEADER..v3.len() - 1];
        let mut v2 = MAGIC.to_vec();
        v2.extend_from_slice(&2u32.to_le_bytes());
        v2.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        v2.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        v2.extend_from_slice(payload);
        assert_eq!(Model::from_bytes(&v2).unwrap(), model);
        // And the JSON form of version 2, without the field.
        let mut json: serde_json::Value = serde_json::from_str(&model.to_json()).unwrap();
        json["version"] = 2.into();
        json["model"].as_object_mut().unwrap().remove("imported");
        assert_eq!(Model::from_json(&json.to_string()).unwrap(), model);
    }
}
