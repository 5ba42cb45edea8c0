//! Each objective does what its loss promises, on data where the answer is known: L1 and
//! quantile leaves land on the residuals' median and quantile, count models match the mean,
//! ranking objectives order documents by relevance, softmax returns classes.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::metric::Metric;
use polars_gbt::objective::Targets;
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};

fn frame(columns: Vec<Vec<f32>>) -> FeatureFrame {
    FeatureFrame::new(
        columns
            .into_iter()
            .enumerate()
            .map(|(j, c)| {
                FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap()
            })
            .collect(),
    )
    .unwrap()
}

fn fit(json: &str, data: &Dataset) -> Model {
    train(&TrainConfig::from_json(json).unwrap(), data, &[]).unwrap()
}

fn predict(model: &Model, f: &FeatureFrame, output: PredictOutput) -> Vec<f32> {
    match model.predict(f, output).unwrap() {
        Predictions::Float { values, .. } => values,
        Predictions::Index { values, .. } => values.into_iter().map(|v| v as f32).collect(),
    }
}

/// One feature splitting rows into two groups with skewed label distributions.
fn two_groups() -> (FeatureFrame, Vec<f32>) {
    // Group x=0: labels 1, 2, 3, 100 (median 2.5, mean 26.5); group x=1: labels 10, 11, 12, 13, 200.
    let x = vec![0., 0., 0., 0., 1., 1., 1., 1., 1.];
    let y = vec![1., 2., 3., 100., 10., 11., 12., 13., 200.];
    (frame(vec![x]), y)
}

#[test]
fn absolute_error_leaves_are_medians() {
    let (f, y) = two_groups();
    let data = Dataset::new(f.clone(), y).unwrap();
    let model = fit(
        r#"{"objective": "reg:absoluteerror", "n_estimators": 1, "max_depth": 1, "learning_rate": 1.0,
            "min_child_weight": 0, "base_score": 5}"#,
        &data,
    );
    let p = predict(&model, &f, PredictOutput::Value);
    // From 5, the gradient signs separate the groups; each leaf then moves to its residuals'
    // median, the lower middle value at ties: 5 + (-3) for {-4, -3, -2, 95}, 5 + 7 for
    // {5, 6, 7, 8, 195}.
    assert_eq!(p[0], 2.0);
    assert_eq!(p[4], 12.0);
}

#[test]
fn quantile_predictions_cover_the_requested_share() {
    let mut rng = Rng::new(1, 0);
    let n = 4_000;
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let y: Vec<f32> = x.iter().map(|&v| v + (rng.below(1000) as f32 / 100.0)).collect();
    let f = frame(vec![x]);
    let data = Dataset::new(f.clone(), y.clone()).unwrap();
    for alpha in [0.1, 0.5, 0.9] {
        let model = fit(
            &format!(r#"{{"objective": "reg:quantileerror", "quantile_alpha": {alpha}, "n_estimators": 30}}"#),
            &data,
        );
        let p = predict(&model, &f, PredictOutput::Value);
        let below = y.iter().zip(&p).filter(|(y, p)| y <= p).count() as f64 / n as f64;
        assert!((below - alpha).abs() < 0.04, "alpha {alpha}: {below} of labels are below the prediction");
    }
}

#[test]
fn count_models_are_positive_and_match_the_mean() {
    let mut rng = Rng::new(2, 0);
    let n = 3_000;
    let x: Vec<f32> = (0..n).map(|_| rng.below(100) as f32).collect();
    // Counts with a mean rising with x.
    let y: Vec<f32> = x.iter().map(|&v| (rng.below(1 + v as usize / 10) as f32).floor()).collect();
    let f = frame(vec![x]);
    let data = Dataset::new(f.clone(), y.clone()).unwrap();
    let mean = y.iter().sum::<f32>() / n as f32;
    for objective in ["count:poisson", "reg:tweedie"] {
        let model = fit(&format!(r#"{{"objective": "{objective}", "n_estimators": 50, "max_depth": 3}}"#), &data);
        let p = predict(&model, &f, PredictOutput::Value);
        assert!(p.iter().all(|&v| v > 0.0 && v.is_finite()), "{objective}");
        let pm = p.iter().sum::<f32>() / n as f32;
        assert!((pm - mean).abs() / mean < 0.05, "{objective}: mean prediction {pm} vs mean label {mean}");
        // The model explains more than the constant.
        let t = Targets { label: &y, weight: None, groups: None };
        let constant = vec![mean; n];
        assert!(Metric::Rmse.evaluate(&p, 1, &t) < Metric::Rmse.evaluate(&constant, 1, &t) * 0.95, "{objective}");
    }
}

#[test]
fn pseudo_huber_resists_outliers() {
    let mut rng = Rng::new(3, 0);
    let n = 2_000;
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let mut y: Vec<f32> = x.iter().map(|&v| 2.0 * v).collect();
    for v in y.iter_mut().step_by(50) {
        *v += 1000.0;
    }
    let f = frame(vec![x.clone()]);
    let data = Dataset::new(f.clone(), y).unwrap();
    let huber = fit(r#"{"objective": "reg:pseudohubererror", "n_estimators": 200, "learning_rate": 0.3}"#, &data);
    let squared = fit(r#"{"objective": "reg:squarederror", "n_estimators": 200, "learning_rate": 0.3}"#, &data);
    let clean: Vec<f32> = x.iter().map(|&v| 2.0 * v).collect();
    let t = Targets { label: &clean, weight: None, groups: None };
    let mae_huber = Metric::Mae.evaluate(&predict(&huber, &f, PredictOutput::Value), 1, &t);
    let mae_squared = Metric::Mae.evaluate(&predict(&squared, &f, PredictOutput::Value), 1, &t);
    assert!(mae_huber < mae_squared / 2.0, "huber {mae_huber} vs squared {mae_squared} on the clean target");
}

#[test]
fn ranking_objectives_order_documents_by_relevance() {
    let mut rng = Rng::new(4, 0);
    let (groups, per) = (100, 10);
    let n = groups * per;
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 1000.0).collect();
    let noise: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 1000.0).collect();
    let y: Vec<f32> = x.iter().map(|&v| (v * 4.0).floor()).collect();
    let f = frame(vec![x, noise]);
    let sizes = vec![per; groups];
    let data = Dataset::new(f.clone(), y.clone()).unwrap().with_group_sizes(&sizes).unwrap();
    let offsets: Vec<usize> = (0..=groups).map(|g| g * per).collect();
    let t = Targets { label: &y, weight: None, groups: Some(&offsets) };
    for objective in ["rank:ndcg", "rank:pairwise"] {
        let model = fit(&format!(r#"{{"objective": "{objective}", "n_estimators": 30, "max_depth": 3}}"#), &data);
        let ndcg = Metric::Ndcg(Some(5)).evaluate(&predict(&model, &f, PredictOutput::Value), 1, &t);
        assert!(ndcg > 0.97, "{objective}: ndcg@5 {ndcg}");
        let map = Metric::Map(Some(5)).evaluate(&predict(&model, &f, PredictOutput::Value), 1, &t);
        assert!(map > 0.9, "{objective}: map@5 {map}");
    }
}

#[test]
fn softmax_predicts_classes_and_softprob_probabilities() {
    let n = 900;
    let x: Vec<f32> = (0..n).map(|i| (i % 3) as f32 + 0.1 * (i % 7) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
    let f = frame(vec![x]);
    let data = Dataset::new(f.clone(), y.clone()).unwrap();
    let softmax = fit(r#"{"objective": "multi:softmax", "num_class": 3, "n_estimators": 10}"#, &data);
    assert_eq!(predict(&softmax, &f, PredictOutput::Value), y);
    let softprob = fit(r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 10}"#, &data);
    let p = predict(&softprob, &f, PredictOutput::Value);
    assert_eq!(p.len(), 3 * n);
    let t = Targets { label: &y, weight: None, groups: None };
    assert_eq!(Metric::Merror.evaluate(&p, 3, &t), 0.0);
    assert!(Metric::Mlogloss.evaluate(&p, 3, &t) < 0.1);
}
