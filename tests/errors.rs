//! Every bad input named in the issue gets a clear error (never a panic, never a silently
//! wrong model), and the error names the parameter, column or problem.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, BinaryArray, DictionaryArray, Float32Array, StringArray};
use polars_gbt::{train, Dataset, Error, FeatureColumn, FeatureFrame, Model, PredictOutput, TrainConfig};

fn column(name: &str, values: Vec<f32>) -> FeatureColumn {
    FeatureColumn::new(name, vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
}

fn frame(n: usize) -> FeatureFrame {
    FeatureFrame::new(vec![
        column("a", (0..n).map(|i| i as f32).collect()),
        column("b", (0..n).map(|i| (i % 7) as f32).collect()),
    ])
    .unwrap()
}

fn data(n: usize) -> Dataset {
    Dataset::new(frame(n), (0..n).map(|i| (i % 2) as f32).collect()).unwrap()
}

/// Asserts `result` failed and its message contains every one of `needles`.
fn assert_err<T: std::fmt::Debug>(result: Result<T, Error>, needles: &[&str]) -> Error {
    let err = result.expect_err("expected an error");
    let msg = err.to_string();
    for n in needles {
        assert!(msg.contains(n), "error `{msg}` does not mention `{n}`");
    }
    err
}

fn cfg(json: &str) -> TrainConfig {
    TrainConfig::from_json(json).unwrap()
}

fn model() -> Model {
    train(&cfg(r#"{"objective": "binary:logistic", "n_estimators": 3}"#), &data(100), &[]).unwrap()
}

#[test]
fn empty_or_mismatched_data() {
    assert_err(Dataset::new(frame(0), vec![]), &["no rows"]);
    assert_err(FeatureFrame::new(vec![]), &["no feature columns"]);
    assert_err(Dataset::new(frame(10), vec![0.0; 9]), &["label has 9 rows", "features have 10"]);
    assert_err(FeatureFrame::new(vec![column("a", vec![1.0; 3]), column("b", vec![1.0; 4])]), &["differ in length"]);
    assert_err(FeatureFrame::new(vec![column("a", vec![1.0; 3]), column("a", vec![1.0; 3])]), &["`a`", "twice"]);
}

#[test]
fn bad_labels() {
    let mut y = vec![0.0; 10];
    y[3] = f32::NAN;
    assert_err(Dataset::new(frame(10), y), &["label", "row 3", "finite"]);
    let mut y = vec![0.0; 10];
    y[4] = f32::INFINITY;
    assert_err(Dataset::new(frame(10), y), &["label", "row 4"]);
    let mut y = vec![0.0; 10];
    y[5] = 2.0;
    let d = Dataset::new(frame(10), y).unwrap();
    assert_err(train(&cfg(r#"{"objective": "binary:logistic"}"#), &d, &[]), &["label", "row 5", "[0, 1]"]);
    let d = Dataset::new(frame(10), (0..10).map(|i| (i % 4) as f32).collect()).unwrap();
    assert_err(
        train(&cfg(r#"{"objective": "multi:softprob", "num_class": 3}"#), &d, &[]),
        &["label", "row 3", "num_class=3"],
    );
    let d = Dataset::new(frame(10), vec![-1.0; 10]).unwrap();
    assert_err(train(&cfg(r#"{"objective": "count:poisson"}"#), &d, &[]), &["label", ">= 0"]);
}

#[test]
fn bad_features() {
    // Strings are categorical features (tests/invariants.rs); bytes are nothing a tree splits.
    let bytes: ArrayRef = Arc::new(BinaryArray::from(vec![b"x".as_slice(), b"y".as_slice()]));
    assert_err(FeatureColumn::new("s", vec![bytes]), &["`s`", "Binary", "numeric"]);
    let strings: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
    let mixed = FeatureColumn::new("m", vec![strings, Arc::new(Float32Array::from(vec![1.0]))]);
    assert_err(mixed, &["`m`", "mix", "Float32"]);
    let all_missing = FeatureFrame::new(vec![column("a", vec![f32::NAN; 5]), column("b", vec![f32::NAN; 5])]).unwrap();
    let d = Dataset::new(all_missing, vec![0.0; 5]).unwrap();
    assert_err(train(&TrainConfig::default(), &d, &[]), &["entirely missing"]);
}

#[test]
fn bad_weights_and_groups() {
    assert_err(data(4).with_weight(vec![1.0, -1.0, 1.0, 1.0]), &["weight", "row 1", ">= 0"]);
    assert_err(data(4).with_weight(vec![0.0; 4]), &["weight", "all weights are zero"]);
    assert_err(data(4).with_weight(vec![1.0; 3]), &["weight has 3 rows"]);
    assert_err(data(10).with_group_sizes(&[3, 3, 3]), &["group", "sum to 9", "10 rows"]);
    assert_err(data(4).with_group_ids(&[1, 2, 1, 2]), &["group", "not contiguous"]);
    let ranked = data(10).with_group_sizes(&[5, 5]).unwrap();
    assert_err(train(&cfg(r#"{"objective": "binary:logistic"}"#), &ranked, &[]), &["group", "only used by rank"]);
    assert_err(train(&cfg(r#"{"objective": "rank:ndcg"}"#), &data(10), &[]), &["group", "needs query groups"]);
    // Ranking weights are per query: one that differs within a group is named, not ignored.
    let mixed = ranked.clone().with_weight(vec![1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 2.0, 2.0]).unwrap();
    assert_err(
        train(&cfg(r#"{"objective": "rank:ndcg"}"#), &mixed, &[]),
        &["weight", "query group 1", "rows 5..10", "row 7 has 3"],
    );
    let per_query = ranked.with_weight(vec![1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0]).unwrap();
    train(&cfg(r#"{"objective": "rank:ndcg", "n_estimators": 2}"#), &per_query, &[]).unwrap();
}

#[test]
fn bad_parameters() {
    assert_err(TrainConfig::from_json(r#"{"max_dpeth": 3}"#), &["max_dpeth", "unknown field"]);
    assert_err(TrainConfig::from_json(r#"{"max_depth": 0}"#), &["max_depth", "at least 1"]);
    assert_err(TrainConfig::from_json(r#"{"learning_rate": 0}"#), &["learning_rate", "> 0"]);
    assert_err(TrainConfig::from_json(r#"{"learning_rate": -0.1}"#), &["learning_rate"]);
    assert_err(TrainConfig::from_json(r#"{"max_depth": "deep"}"#), &["max_depth"]);
    assert_err(TrainConfig::from_json(r#"{"objective": "reg:nonsense"}"#), &["objective"]);
    assert_err(TrainConfig::from_json(r#"{"subsample": 1.5}"#), &["subsample", "(0, 1]"]);
    assert_err(TrainConfig::from_json(r#"{"objective": "multi:softprob"}"#), &["num_class"]);
    assert_err(TrainConfig::from_json(r#"{"eval_metric": "ndcg@zero"}"#), &["eval_metric"]);
    assert_err(
        train(&cfg(r#"{"objective": "reg:squarederror", "eval_metric": "auc"}"#), &data(10), &[("v", &data(10))]),
        &["eval_metric", "auc", "reg:squarederror"],
    );
    assert_err(train(&cfg(r#"{"device": "cuda"}"#), &data(10), &[]), &["device", "cuda"]);
    // Early stopping with nothing to watch would be ignored: an error, as in XGBoost.
    assert_err(
        train(&cfg(r#"{"early_stopping_rounds": 5}"#), &data(10), &[]),
        &["early_stopping_rounds", "evaluation set"],
    );
    // Aliases are the same parameters, not unknown ones.
    assert_eq!(cfg(r#"{"eta": 0.2, "lambda": 2}"#), cfg(r#"{"learning_rate": 0.2, "reg_lambda": 2}"#));
}

#[test]
fn corrupt_truncated_or_newer_model_files() {
    let bytes = model().to_bytes();
    assert_err(Model::from_bytes(&bytes[..10]), &["too short"]);
    assert_err(Model::from_bytes(&bytes[..bytes.len() - 1]), &["truncated"]);
    let mut flipped = bytes.clone();
    let last = flipped.len() - 5;
    flipped[last] ^= 0x40;
    assert_err(Model::from_bytes(&flipped), &["checksum"]);
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_err(Model::from_bytes(&magic), &["magic"]);
    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&99u32.to_le_bytes());
    assert!(matches!(Model::from_bytes(&newer), Err(Error::ModelVersion { found: 99, .. })));
    assert_err(Model::from_bytes(b"{not json"), &["JSON"]);
    assert_err(Model::load("/nonexistent/model.pgbt"), &["i/o"]);
}

#[test]
fn crafted_models_fail_validation_not_prediction() {
    let json = model().to_json();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        f(&mut v);
        Model::from_json(&v.to_string())
    };
    assert_err(edit(&|v| v["model"]["trees"][0]["left"][0] = 10_000.into()), &["tree 0", "outside the tree"]);
    assert_err(edit(&|v| v["model"]["trees"][0]["feature"][0] = 57.into()), &["feature 57"]);
    assert_err(edit(&|v| v["model"]["trees"][0]["right"] = serde_json::json!([])), &["differ in length"]);
    // A node with two parents (found by tests/fuzz_models.rs): not a tree.
    assert_err(
        edit(&|v| {
            let left = v["model"]["trees"][0]["left"][0].clone();
            v["model"]["trees"][0]["right"][0] = left;
        }),
        &["not a tree"],
    );
    assert_err(edit(&|v| v["version"] = 7.into()), &["newer"]);
    assert_err(edit(&|v| v["model"]["base_margin"] = serde_json::json!([])), &["base margin"]);
}

#[test]
fn prediction_inputs_must_match_the_model() {
    let m = model();
    let only_a = FeatureFrame::new(vec![column("a", vec![1.0; 3])]).unwrap();
    assert_err(m.predict(&only_a, PredictOutput::Value), &["missing", "b"]);
    let dict: ArrayRef = Arc::new(["x", "y", "z"].into_iter().collect::<DictionaryArray<Int32Type>>());
    let wrong_type =
        FeatureFrame::new(vec![column("a", vec![1.0; 3]), FeatureColumn::new("b", vec![dict]).unwrap()]).unwrap();
    assert_err(m.predict(&wrong_type, PredictOutput::Value), &["`b`", "numeric in training", "categorical"]);
    assert_err("probability".parse::<PredictOutput>(), &["output", "probability"]);
    let regression = train(&cfg(r#"{"n_estimators": 2}"#), &data(50), &[]).unwrap();
    assert_err(regression.predict(&frame(3), PredictOutput::Class), &["output", "classification", "reg:squarederror"]);
    assert_err(m.predict_with_base_margin(&frame(3), &[0.0; 2], PredictOutput::Value), &["base_margin"]);
}
