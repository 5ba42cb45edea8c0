//! Importing XGBoost and LightGBM models: hand-written model files whose predictions are
//! computed by hand from the two libraries' documented rules (XGBoost: `x < threshold` goes
//! left, listed categories go right, invalid codes left; LightGBM: `x <= threshold` goes left,
//! listed categories go left, NaN and negative codes right), plus the export round trip and
//! malformed files. Models trained by the libraries themselves are compared in
//! tests/python/test_import.py.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::{FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions};

fn frame(columns: &[(&str, Vec<f32>)]) -> FeatureFrame {
    FeatureFrame::new(
        columns
            .iter()
            .map(|(name, v)| {
                FeatureColumn::new(*name, vec![Arc::new(Float32Array::from(v.clone())) as ArrayRef]).unwrap()
            })
            .collect(),
    )
    .unwrap()
}

fn margins(model: &Model, frame: &FeatureFrame) -> Vec<f32> {
    match model.predict(frame, PredictOutput::Margin).unwrap() {
        Predictions::Float { values, .. } => values,
        other => panic!("{other:?}"),
    }
}

/// Two trees over `a` (numeric) and `b` (categorical, integer codes): tree 0 splits `a < 1`
/// (missing left), then `b` in {2} (right in XGBoost's convention, missing right); tree 1
/// splits `a < -Infinity` (every present value right, missing left), as XGBoost writes
/// splits that only separate missing values.
const XGB: &str = r#"{"learner": {
  "attributes": {}, "feature_names": ["a", "b"], "feature_types": ["float", "c"],
  "gradient_booster": {"name": "gbtree", "model": {
    "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": "2"},
    "iteration_indptr": [0, 1, 2], "tree_info": [0, 0],
    "trees": [
      {"id": 0, "left_children": [1, -1, 3, -1, -1], "right_children": [2, -1, 4, -1, -1],
       "split_indices": [0, 0, 1, 0, 0], "split_conditions": [1.0, 0.5, 0.0, -0.25, 0.75],
       "default_left": [1, 0, 0, 0, 0], "split_type": [0, 0, 1, 0, 0],
       "categories": [2], "categories_nodes": [2], "categories_segments": [0], "categories_sizes": [1],
       "base_weights": [0, 0, 0, 0, 0], "loss_changes": [1, 0, 1, 0, 0], "sum_hessian": [4, 1, 3, 1, 2],
       "parents": [2147483647, 0, 0, 2, 2],
       "tree_param": {"num_deleted": "0", "num_feature": "2", "num_nodes": "5", "size_leaf_vector": "1"}},
      {"id": 1, "left_children": [1, -1, -1], "right_children": [2, -1, -1],
       "split_indices": [0, 0, 0], "split_conditions": [-Infinity, 1.0, 0.1],
       "default_left": [1, 0, 0], "split_type": [0, 0, 0],
       "categories": [], "categories_nodes": [], "categories_segments": [], "categories_sizes": [],
       "base_weights": [0, 0, 0], "loss_changes": [1, 0, 0], "sum_hessian": [4, 1, 3],
       "parents": [2147483647, 0, 0],
       "tree_param": {"num_deleted": "0", "num_feature": "2", "num_nodes": "3", "size_leaf_vector": "1"}}
    ]}},
  "learner_model_param": {"base_score": "[5E-1]", "boost_from_average": "1", "num_class": "0",
                          "num_feature": "2", "num_target": "1"},
  "objective": {"name": "binary:logistic", "reg_loss_param": {"scale_pos_weight": "1"}}},
 "version": [3, 2, 0]}"#;

#[test]
fn xgboost_splits_follow_xgboost_rules() {
    let model = Model::from_xgboost(XGB.as_bytes()).unwrap();
    let nan = f32::NAN;
    let f = frame(&[("a", vec![0.5, nan, 3.0, 3.0, 3.0, 3.0]), ("b", vec![2.0, 2.0, 2.0, 5.0, -1.0, nan])]);
    // base_score 0.5 is margin 0.
    assert_eq!(margins(&model, &f), vec![0.5 + 0.1, 0.5 + 1.0, 0.75 + 0.1, -0.25 + 0.1, -0.25 + 0.1, 0.75 + 0.1]);
    // Leaf ids are XGBoost's node ids.
    match model.predict(&f, PredictOutput::Leaf).unwrap() {
        Predictions::Index { values, width: 2 } => assert_eq!(values, vec![1, 2, 1, 1, 4, 2, 3, 2, 3, 2, 4, 2]),
        other => panic!("{other:?}"),
    }
    // Exported and imported again: the same predictions.
    let again = Model::from_xgboost(model.to_xgboost_json().as_bytes()).unwrap();
    assert_eq!(margins(&again, &f), margins(&model, &f));
    // And our own JSON form round-trips (every threshold is finite).
    assert_eq!(Model::from_json(&model.to_json()).unwrap(), model);
}

/// A LightGBM regression tree: `x0 <= 1.5` (missing type NaN, default left), then `x1` in
/// {1, 3} (a categorical bitset, 0b1010).
const LGB: &str = "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\nmax_feature_idx=1\n\
objective=regression\nfeature_names=x0 x1\nfeature_infos=[0:3] 0:1:2:3\ntree_sizes=1\n\n\
Tree=0\nnum_leaves=3\nnum_cat=1\nsplit_feature=0 1\nsplit_gain=1 1\nthreshold=1.5 0\ndecision_type=10 1\n\
left_child=-1 -2\nright_child=1 -3\nleaf_value=0.5 1.25 -2\nleaf_weight=1 1 1\nleaf_count=1 1 1\n\
internal_value=0 0\ninternal_weight=2 2\ninternal_count=2 2\ncat_boundaries=0 1\ncat_threshold=10\n\
is_linear=0\nshrinkage=1\n\n\nend of trees\n";

#[test]
fn lightgbm_splits_follow_lightgbm_rules() {
    let model = Model::from_lightgbm(LGB).unwrap();
    let nan = f32::NAN;
    let just_above = f32::from_bits(1.5f32.to_bits() + 1);
    let f = frame(&[
        ("x0", vec![1.0, 1.5, just_above, just_above, just_above, just_above, nan]),
        ("x1", vec![3.0, 3.0, 3.0, 2.0, nan, -1.0, 2.0]),
    ]);
    assert_eq!(margins(&model, &f), vec![0.5, 0.5, 1.25, -2.0, -2.0, -2.0, 0.5]);
}

#[test]
fn malformed_foreign_models_are_errors() {
    let cases: Vec<(String, &str)> = vec![
        (
            XGB.replace("\"left_children\": [1, -1, 3, -1, -1]", "\"left_children\": [1, -1, 0, -1, -1]"),
            "reached twice",
        ),
        (XGB.replace("\"split_indices\": [0, 0, 1, 0, 0]", "\"split_indices\": [0, 0, 7, 0, 0]"), "feature 7"),
        (
            XGB.replace("\"num_feature\": \"2\", \"num_target\"", "\"num_feature\": \"1000000000000\", \"num_target\""),
            "num_feature",
        ),
        (XGB.replace("binary:logistic\", \"reg_loss_param", "rank:cox\", \"reg_loss_param"), "rank:cox"),
        (XGB.replace("\"categories_segments\": [0]", "\"categories_segments\": [5]"), "segment"),
        (XGB[..XGB.len() / 2].to_string(), "not JSON"),
    ];
    for (text, needle) in cases {
        let e = Model::from_xgboost(text.as_bytes()).expect_err(needle).to_string();
        assert!(e.contains(needle) && e.starts_with("invalid model: XGBoost model"), "{needle}: {e}");
    }
    let cases: Vec<(String, &str)> = vec![
        (LGB.replace("left_child=-1 -2", "left_child=-1 0"), "reached twice"),
        (LGB.replace("split_feature=0 1", "split_feature=0 9"), "feature 9"),
        (LGB.replace("objective=regression", "objective=huber"), "huber"),
        (LGB.replace("decision_type=10 1", "decision_type=4 1"), "zero_as_missing"),
        (LGB.replace("num_leaves=3", "num_leaves=300000000"), "num_leaves"),
        (LGB.replace("cat_boundaries=0 1", "cat_boundaries=0 9"), "cat_threshold"),
        (LGB.replace("threshold=1.5 0\n", "threshold=1.5 4\n"), "category set"),
        (LGB.replace("is_linear=0", "is_linear=1"), "linear"),
        // Found by the fuzzer: a count whose `+ 1` overflowed.
        (LGB.replace("num_cat=1", "num_cat=18446744073709551615"), "num_cat"),
    ];
    for (text, needle) in cases {
        let e = Model::from_lightgbm(&text).expect_err(needle).to_string();
        assert!(e.contains(needle) && e.starts_with("invalid model: LightGBM model"), "{needle}: {e}");
    }
}
