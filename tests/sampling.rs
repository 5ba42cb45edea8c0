//! Column sampling weighted by `feature_weights`: a feature's chance to be drawn follows its
//! weight, weight 0 keeps it out of every tree, and bad weights are errors naming the problem.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, Model, TrainConfig};

/// Five equally informative features (the label sums a step of each) and noise.
fn data(n: usize) -> Dataset {
    let mut rng = Rng::new(2, 3);
    let cols: Vec<Vec<f32>> = (0..5).map(|_| (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect()).collect();
    let y = (0..n).map(|i| cols.iter().map(|c| (c[i] > 5.0) as u8 as f32).sum::<f32>() + rng.below(100) as f32 / 200.0);
    let y: Vec<f32> = y.collect();
    let columns = cols
        .into_iter()
        .enumerate()
        .map(|(j, c)| FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap())
        .collect();
    Dataset::new(FeatureFrame::new(columns).unwrap(), y).unwrap()
}

fn fit(json: &str, d: &Dataset) -> Model {
    train(&TrainConfig::from_json(json).unwrap(), d, &[]).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// How many trees split on each feature.
fn trees_using(model: &Model) -> Vec<usize> {
    let mut counts = vec![0; 5];
    for t in model.trees() {
        let mut used: Vec<u32> = (0..t.left.len()).filter(|&n| t.left[n] != u32::MAX).map(|n| t.feature[n]).collect();
        used.dedup();
        used.sort_unstable();
        used.dedup();
        used.iter().for_each(|&f| counts[f as usize] += 1);
    }
    counts
}

#[test]
fn each_tree_draws_its_feature_in_proportion_to_the_weights() {
    let d = data(2000);
    // One feature per tree (a fifth of five), drawn with chances 0, 1/8, 1/8, 2/8, 4/8.
    let json = r#"{"n_estimators": 400, "max_depth": 2, "learning_rate": 0.05, "colsample_bytree": 0.2,
                   "feature_weights": [0, 1, 1, 2, 4]}"#;
    let counts = trees_using(&fit(json, &d));
    assert_eq!(counts[0], 0, "weight 0: never drawn, {counts:?}");
    for (f, share) in [(1, 0.125), (2, 0.125), (3, 0.25), (4, 0.5)] {
        let got = counts[f] as f64 / 400.0;
        assert!((got - share).abs() < 0.06, "x{f}: in {got} of the trees, against {share}; {counts:?}");
    }
    // By name, the others weighing 1: the same draws as the list.
    let by_name = r#"{"n_estimators": 400, "max_depth": 2, "learning_rate": 0.05, "colsample_bytree": 0.2,
                      "feature_weights": {"x0": 0, "x3": 2, "x4": 4}}"#;
    assert_eq!(fit(by_name, &d).trees(), fit(json, &d).trees());
}

#[test]
fn node_sampling_never_draws_a_weightless_feature() {
    let d = data(2000);
    for json in [
        r#"{"n_estimators": 30, "max_depth": 4, "colsample_bynode": 0.6, "feature_weights": {"x2": 0}}"#,
        r#"{"n_estimators": 30, "max_depth": 4, "colsample_bylevel": 0.6, "feature_weights": {"x2": 0}}"#,
    ] {
        let counts = trees_using(&fit(json, &d));
        assert_eq!(counts[2], 0, "{json}: {counts:?}");
        assert!(counts.iter().enumerate().all(|(f, &c)| f == 2 || c > 0), "{json}: {counts:?}");
    }
}

#[test]
fn bad_feature_weights_are_errors_that_say_why() {
    let d = data(100);
    for (json, words) in [
        (r#"{"feature_weights": [1, 1, 1, 1, 1]}"#, "no colsample"),
        (r#"{"colsample_bytree": 0.5, "feature_weights": [1, 1]}"#, "2 weights for 5 features"),
        (r#"{"colsample_bytree": 0.5, "feature_weights": {"price": 2}}"#, "`price`"),
        (r#"{"colsample_bytree": 0.5, "feature_weights": [1, -1, 1, 1, 1]}"#, "`x1` -1"),
        (r#"{"colsample_bytree": 0.5, "feature_weights": [0, 0, 0, 0, 0]}"#, "all 0"),
    ] {
        // Checked when parsed where the features are not needed, else when the fit starts.
        let e = TrainConfig::from_json(json).and_then(|cfg| train(&cfg, &d, &[])).unwrap_err().to_string();
        assert!(e.contains("feature_weights") && e.contains(words), "{json}: {e}");
    }
}
