//! Vector-leaf trees (`multi_strategy="multi_output_tree"`): one tree a round whose leaves
//! hold every output's value. The oracles: with one output the vector-leaf search is the
//! scalar one (the same trees); a round's trees share their splits; the model keeps that
//! through saving, slicing and XGBoost export/import; SHAP values add up to the margins.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array};
use polars_gbt::random::Rng;
use polars_gbt::{
    train, Dataset, FeatureColumn, FeatureFrame, ImportanceType, Model, PredictOutput, Predictions, TrainConfig,
    Training,
};

/// Three numeric columns (one with missing values) and a categorical one of 12 categories
/// (with nulls), and two targets that depend on different columns.
fn frame(n: usize, seed: u64) -> (FeatureFrame, Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed, 7);
    let mut cols: Vec<Vec<f32>> = (0..3).map(|_| Vec::with_capacity(n)).collect();
    let mut keys = Vec::with_capacity(n);
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let x: Vec<f32> = (0..3).map(|_| (rng.below(20_000) as f32 - 10_000.0) / 4000.0).collect();
        let key = (rng.below(13) as i32).checked_sub(1).filter(|&k| k >= 0);
        let cat_effect = key.map_or(0.5, |k| if k % 3 == 0 { 1.5 } else { -0.5 });
        let noise = (rng.below(1000) as f32 - 500.0) / 2000.0;
        a.push(x[0] * 2.0 + cat_effect + noise);
        b.push(if x[1] > 0.3 { 1.0 } else { -1.0 } + x[2] * 0.5 - cat_effect + noise);
        for (j, v) in x.into_iter().enumerate() {
            cols[j].push(if j == 2 && rng.below(6) == 0 { f32::NAN } else { v });
        }
        keys.push(key);
    }
    let mut columns: Vec<FeatureColumn> = cols
        .into_iter()
        .enumerate()
        .map(|(j, c)| FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap())
        .collect();
    let names: Vec<String> = (0..12).map(|c| format!("c{c:02}")).collect();
    let dict: ArrayRef = Arc::new(
        DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(arrow_array::StringArray::from(names))).unwrap(),
    );
    columns.push(FeatureColumn::new("cat".to_string(), vec![dict]).unwrap());
    (FeatureFrame::new(columns).unwrap(), a, b)
}

fn two_targets(n: usize, seed: u64) -> (FeatureFrame, Dataset) {
    let (f, a, b) = frame(n, seed);
    let labels: Vec<f32> = a.into_iter().chain(b).collect();
    (f.clone(), Dataset::with_labels(f, labels.into(), 2).unwrap())
}

fn cfg(json: &str) -> TrainConfig {
    TrainConfig::from_json(json).unwrap()
}

fn floats(p: Predictions) -> Vec<f32> {
    match p {
        Predictions::Float { values, .. } => values,
        other => panic!("{other:?}"),
    }
}

const VECTOR: &str = r#""multi_strategy": "multi_output_tree""#;

#[test]
fn one_output_grows_the_scalar_trees() {
    let (f, a, _) = frame(3000, 1);
    let data = Dataset::new(f, a).unwrap();
    for params in [
        r#""max_depth": 5, "n_estimators": 8"#,
        r#""max_depth": 4, "n_estimators": 6, "subsample": 0.7, "colsample_bynode": 0.6, "reg_alpha": 0.5"#,
        r#""max_depth": 3, "n_estimators": 5, "max_cat_to_onehot": 1, "min_child_weight": 20, "gamma": 0.1"#,
        r#""max_depth": 4, "n_estimators": 4, "objective": "reg:absoluteerror", "max_delta_step": 0.4"#,
        r#""grow_policy": "lossguide", "max_depth": 0, "max_leaves": 12, "n_estimators": 5"#,
        r#""max_depth": 5, "n_estimators": 6, "monotone_constraints": {"x0": 1, "x2": -1}"#,
        r#""grow_policy": "lossguide", "max_depth": 5, "max_leaves": 40, "n_estimators": 3, "colsample_bynode": 0.7"#,
    ] {
        let scalar = train(&cfg(&format!("{{{params}}}")), &data, &[]).unwrap();
        let vector = train(&cfg(&format!("{{{params}, {VECTOR}}}")), &data, &[]).unwrap();
        assert_eq!(scalar.trees(), vector.trees(), "{params}");
        assert!(vector.trees().iter().any(|t| (0..t.n_nodes() as u32).any(|n| !t.is_leaf(n) && t.is_categorical(n))));
    }
}

#[test]
fn a_round_is_one_tree_whose_leaves_fit_every_target() {
    let (f, data) = two_targets(4000, 2);
    let (test_f, test) = two_targets(2000, 3);
    let params = r#""max_depth": 4, "n_estimators": 40, "learning_rate": 0.2"#;
    let vector = train(&cfg(&format!("{{{params}, {VECTOR}}}")), &data, &[]).unwrap();
    let scalar = train(&cfg(&format!("{{{params}}}")), &data, &[]).unwrap();
    assert!(vector.is_vector_leaf() && !scalar.is_vector_leaf());
    assert_eq!(vector.num_trees(), 80);
    for round in vector.trees().chunks(2) {
        assert!(round[0].same_splits(&round[1]));
        assert_eq!(round[0].cover, round[1].cover);
        assert_eq!(round[0].gain, round[1].gain);
        assert_ne!(round[0].value, round[1].value);
    }
    // One structure for both targets fits worse than a tree each on training rows, but still
    // fits both targets far better than their means.
    let rmse = |m: &Model, f: &FeatureFrame, d: &Dataset| {
        let p = floats(m.predict(f, PredictOutput::Value).unwrap());
        let n = d.n_rows();
        let labels = d.targets().label.to_vec();
        (0..2)
            .map(|t| ((0..n).map(|i| (p[i * 2 + t] - labels[t * n + i]).powi(2)).sum::<f32>() / n as f32).sqrt())
            .collect::<Vec<f32>>()
    };
    let (v, s) = (rmse(&vector, &test_f, &test), rmse(&scalar, &test_f, &test));
    for t in 0..2 {
        assert!(v[t] < 0.45 && v[t] < s[t] * 1.5, "target {t}: vector {v:?} scalar {s:?}");
    }
    let _ = f;
}

#[test]
fn leaves_importance_and_slices_count_a_round_once() {
    let (f, data) = two_targets(1500, 4);
    let m = train(&cfg(&format!(r#"{{"max_depth": 3, "n_estimators": 7, {VECTOR}}}"#)), &data, &[]).unwrap();
    let Predictions::Index { values, width } = m.predict(&f, PredictOutput::Leaf).unwrap() else { panic!() };
    assert_eq!(width, 7);
    for (r, tree) in m.trees().chunks(2).map(|c| &c[0]).enumerate() {
        let leaf = values[5 * width + r];
        assert!(tree.is_leaf(leaf), "round {r}: node {leaf}");
    }
    // Weight: splits of the round's one tree, as XGBoost counts them.
    let splits: usize =
        m.trees().iter().step_by(2).map(|t| (0..t.n_nodes() as u32).filter(|&n| !t.is_leaf(n)).count()).sum();
    let weight: f64 = m.feature_importance(ImportanceType::Weight).iter().map(|(_, w)| w).sum();
    assert_eq!(weight as usize, splits);
    // A slice of rounds is a vector-leaf model whose margins add up to the whole's.
    let (head, tail) = (m.slice(0, 3, 1).unwrap(), m.slice(3, 7, 1).unwrap());
    let whole = floats(m.predict(&f, PredictOutput::Margin).unwrap());
    let (h, t) = (
        floats(head.predict(&f, PredictOutput::Margin).unwrap()),
        floats(tail.predict(&f, PredictOutput::Margin).unwrap()),
    );
    for i in 0..whole.len() {
        let base = m.base_margin()[i % 2];
        assert!((h[i] + t[i] - base - whole[i]).abs() < 1e-4, "{i}");
    }
}

#[test]
fn saved_and_xgboost_round_tripped_models_predict_the_same() {
    let (f, data) = two_targets(1500, 5);
    let m = train(&cfg(&format!(r#"{{"max_depth": 4, "n_estimators": 10, {VECTOR}}}"#)), &data, &[]).unwrap();
    let want = floats(m.predict(&f, PredictOutput::Margin).unwrap());
    for loaded in [Model::from_bytes(&m.to_bytes()).unwrap(), Model::from_json(&m.to_json()).unwrap()] {
        assert_eq!(loaded, m);
    }
    let back = Model::from_xgboost(m.to_xgboost_json().as_bytes()).unwrap();
    assert!(back.is_vector_leaf());
    assert_eq!(back.num_trees(), m.num_trees());
    let got = floats(back.predict(&f, PredictOutput::Margin).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} {w}");
    }
    // A file whose round's trees disagree in their splits is refused.
    let mut json: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
    let t1 = &mut json["model"]["trees"][1]["threshold"][0];
    *t1 = serde_json::json!(t1.as_f64().unwrap() + 0.25);
    let e = Model::from_json(&json.to_string()).unwrap_err().to_string();
    assert!(e.contains("round 0 of the vector-leaf model has trees of different splits"), "{e}");
}

#[test]
fn contributions_add_up_to_each_outputs_margin() {
    let (f, data) = two_targets(800, 6);
    let m = train(&cfg(&format!(r#"{{"max_depth": 4, "n_estimators": 6, {VECTOR}}}"#)), &data, &[]).unwrap();
    let margin = floats(m.predict(&f, PredictOutput::Margin).unwrap());
    let contrib = floats(m.predict(&f, PredictOutput::Contrib).unwrap());
    let width = f.n_features() + 1;
    for i in 0..f.n_rows() {
        for k in 0..2 {
            let row = &contrib[(i * 2 + k) * width..][..width];
            let sum: f32 = row.iter().sum();
            assert!((sum - margin[i * 2 + k]).abs() < 1e-4, "row {i} output {k}: {sum} {}", margin[i * 2 + k]);
        }
    }
}

#[test]
fn loss_guided_vector_leaves_share_their_splits_within_max_leaves() {
    let (f, data) = two_targets(3000, 10);
    let json =
        format!(r#"{{"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 9, "n_estimators": 6, {VECTOR}}}"#);
    let m = train(&cfg(&json), &data, &[]).unwrap();
    for round in m.trees().chunks(2) {
        assert!(round[0].same_splits(&round[1]) && round[0].cover == round[1].cover);
        let leaves = (0..round[0].n_nodes() as u32).filter(|&n| round[0].is_leaf(n)).count();
        assert_eq!(leaves, 9);
    }
    // The model scores as the sum of its leaves: its training margins are its predictions.
    let back = Model::from_xgboost(m.to_xgboost_json().as_bytes()).unwrap();
    assert_eq!(
        floats(back.predict(&f, PredictOutput::Margin).unwrap()),
        floats(m.predict(&f, PredictOutput::Margin).unwrap())
    );
}

#[test]
fn monotone_constraints_hold_for_every_output() {
    // Target 0 rises with x0, target 1 falls with it: constrained increasing, both outputs
    // must rise (or stay flat) along x0, as XGBoost 3.4 makes them.
    let (f, a, b) = frame(3000, 12);
    let labels: Vec<f32> = a.iter().copied().chain(b.iter().zip(&a).map(|(b, a)| b - a)).collect();
    let data = Dataset::with_labels(f, labels.into(), 2).unwrap();
    let json = format!(r#"{{"max_depth": 5, "n_estimators": 20, "monotone_constraints": {{"x0": 1}}, {VECTOR}}}"#);
    let m = train(&cfg(&json), &data, &[]).unwrap();
    let free = train(&cfg(&format!(r#"{{"max_depth": 5, "n_estimators": 20, {VECTOR}}}"#)), &data, &[]).unwrap();
    // x0 along a grid, every other feature held at one value.
    let numeric = |name: &str, v: Vec<f32>| {
        FeatureColumn::new(name.to_string(), vec![Arc::new(Float32Array::from(v)) as ArrayRef]).unwrap()
    };
    let names: Vec<String> = (0..12).map(|c| format!("c{c:02}")).collect();
    let dict: ArrayRef = Arc::new(
        DictionaryArray::<Int32Type>::try_new(
            vec![Some(4); 200].into(),
            Arc::new(arrow_array::StringArray::from(names)),
        )
        .unwrap(),
    );
    let along = FeatureFrame::new(vec![
        numeric("x0", (0..200).map(|i| -2.5 + i as f32 * 0.025).collect()),
        numeric("x1", vec![0.4; 200]),
        numeric("x2", vec![-0.2; 200]),
        FeatureColumn::new("cat".to_string(), vec![dict]).unwrap(),
    ])
    .unwrap();
    let rises = |m: &Model, k: usize| {
        let p = floats(m.predict(&along, PredictOutput::Margin).unwrap());
        (1..200).all(|i| p[i * 2 + k] >= p[(i - 1) * 2 + k])
    };
    assert!(rises(&m, 0) && rises(&m, 1));
    assert!(!rises(&free, 1), "unconstrained, target 1 falls along x0");
}

#[test]
fn multiclass_vector_leaves_classify() {
    let (f, a, b) = frame(3000, 8);
    let classes: Vec<f32> = a.iter().zip(&b).map(|(&a, &b)| ((a > 0.0) as u8 + (b > 0.0) as u8) as f32).collect();
    let data = Dataset::new(f.clone(), classes.clone()).unwrap();
    let params = r#""objective": "multi:softprob", "num_class": 3, "max_depth": 4, "n_estimators": 30"#;
    let m = train(&cfg(&format!("{{{params}, {VECTOR}}}")), &data, &[]).unwrap();
    assert_eq!(m.num_trees(), 90);
    let Predictions::Index { values, .. } = m.predict(&f, PredictOutput::Class).unwrap() else { panic!() };
    let right = values.iter().zip(&classes).filter(|(&p, &c)| p as f32 == c).count();
    assert!(right as f64 > 0.85 * classes.len() as f64, "{right} of {}", classes.len());
}

#[test]
fn combinations_it_cannot_keep_are_named() {
    let (_, data) = two_targets(300, 9);
    let e = TrainConfig::from_json(r#"{"multi_strategy": "one_tree"}"#).unwrap_err().to_string();
    assert!(e.contains("multi_strategy"), "{e}");
    // Continued training keeps the model's strategy; 3 rounds and 3 more are the 6-round fit.
    let six = train(&cfg(&format!(r#"{{"n_estimators": 6, {VECTOR}}}"#)), &data, &[]).unwrap();
    let three = train(&cfg(&format!(r#"{{"n_estimators": 3, {VECTOR}}}"#)), &data, &[]).unwrap();
    let more = Training::new(&cfg(&format!(r#"{{"n_estimators": 3, {VECTOR}}}"#)), &data).init_model(&three).run();
    assert_eq!(more.unwrap().trees(), six.trees());
    let first = train(&cfg(r#"{"n_estimators": 2}"#), &data, &[]).unwrap();
    let e = Training::new(&cfg(&format!(r#"{{"n_estimators": 2, {VECTOR}}}"#)), &data)
        .init_model(&first)
        .run()
        .unwrap_err()
        .to_string();
    assert!(e.contains("multi_strategy"), "{e}");
}

#[cfg(feature = "cuda")]
#[test]
fn the_cuda_trainer_grows_vector_leaves_on_one_gpu() {
    use polars_gbt::backend::Backend;
    let engine = Backend::Cuda.engine();
    assert!(engine.unsupported(&cfg(&format!("{{{VECTOR}}}"))).is_none());
    let why = engine.unsupported(&cfg(&format!(r#"{{"n_gpus": 2, "device": "cuda", {VECTOR}}}"#))).expect("refused");
    assert!(why.contains("multi_output_tree") && why.contains("not over several GPUs"), "{why}");
    assert!(engine.unsupported(&cfg(r#"{"n_gpus": 2, "device": "cuda"}"#)).is_none());
}
