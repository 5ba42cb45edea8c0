//! Saved models stay loadable: a file written by version 1 of the format (parameters stored
//! positionally) loads, predicts as it did when it was written, and saves again in the current version
//! (parameters as JSON text, so that parameters added later keep today's files readable).

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array, StringArray};
use polars_gbt::{FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, FORMAT_VERSION};

const V1: &[u8] = include_bytes!("fixtures/model-format-v1.plgbt");
/// Rows `a,b,c,y,margin` and the margins the model gave when it was saved (from Polars).
const V1_MARGINS: &str = include_str!("fixtures/model-format-v1-margins.csv");

fn version_of(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}

#[test]
fn a_version_1_file_loads_and_predicts_as_when_it_was_written() {
    assert_eq!(version_of(V1), 1);
    let model = Model::from_bytes(V1).unwrap();
    let cfg = model.config();
    assert_eq!(cfg.objective, polars_gbt::Objective::BinaryLogistic);
    assert_eq!((cfg.n_estimators, cfg.max_depth, cfg.seed), (3, 3, 1));
    assert_eq!(model.trees().len(), 3);
    // Parameters added since version 1 say what version-1 builds did.
    assert_eq!((cfg.cat_smooth, cfg.cat_l2, cfg.min_data_per_group), (0.0, 0.0, 0));
    assert!(!cfg.lambdarank_score_normalization);

    let (mut a, mut b, mut c, mut want) = (vec![], vec![], vec![], vec![]);
    for line in V1_MARGINS.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        a.push(f[0].parse::<f32>().ok());
        b.push(f[1].parse::<f32>().unwrap());
        c.push(f[2].to_string());
        want.push(f[4].parse::<f32>().unwrap());
    }
    let names = model.features()[2].categories.clone().expect("c is categorical");
    let keys: Vec<i32> = c.iter().map(|v| names.iter().position(|n| n == v).unwrap() as i32).collect();
    let dict = DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(StringArray::from(names))).unwrap();
    let frame = FeatureFrame::new(vec![
        FeatureColumn::new("a", vec![Arc::new(Float32Array::from(a)) as ArrayRef]).unwrap(),
        FeatureColumn::new("b", vec![Arc::new(Float32Array::from(b)) as ArrayRef]).unwrap(),
        FeatureColumn::new("c", vec![Arc::new(dict) as ArrayRef]).unwrap(),
    ])
    .unwrap();
    match model.predict(&frame, PredictOutput::Margin).unwrap() {
        Predictions::Float { values, .. } => assert_eq!(values, want),
        other => panic!("expected margins, got {other:?}"),
    }

    // Saved again, it is a file of the current version (3: imported models record their source) of the same model.
    let again = model.to_bytes();
    assert_eq!(version_of(&again), FORMAT_VERSION);
    assert_eq!(FORMAT_VERSION, 3);
    assert_eq!(Model::from_bytes(&again).unwrap(), model);
}

#[test]
fn the_parameters_are_stored_by_name() {
    let model = Model::from_bytes(V1).unwrap();
    let bytes = model.to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    // The parameters travel as JSON inside the binary payload, each under its name.
    for name in ["\"objective\":\"binary:logistic\"", "\"n_estimators\":3", "\"max_depth\":3"] {
        assert!(text.contains(name), "{name} not found in the payload");
    }
}
