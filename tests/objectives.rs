//! Each objective does what its loss promises, on data where the answer is known: L1 and
//! quantile leaves land on the residuals' median and quantile, count models match the mean,
//! ranking objectives order documents by relevance, softmax returns classes.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::metric::Metric;
use polars_gbt::objective::Targets;
use polars_gbt::random::Rng;
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};

// Every scenario trains on the CPU and on every other backend here, against the CPU.
use common::backends::train;

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
        let t = Targets { label: &y, label_upper: None, weight: None, groups: None };
        let constant = vec![mean; n];
        assert!(
            Metric::Rmse.evaluate(&p, 1, &t, &Default::default())
                < Metric::Rmse.evaluate(&constant, 1, &t, &Default::default()) * 0.95,
            "{objective}"
        );
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
    let t = Targets { label: &clean, label_upper: None, weight: None, groups: None };
    let mae_huber = Metric::Mae.evaluate(&predict(&huber, &f, PredictOutput::Value), 1, &t, &Default::default());
    let mae_squared = Metric::Mae.evaluate(&predict(&squared, &f, PredictOutput::Value), 1, &t, &Default::default());
    assert!(mae_huber < mae_squared / 2.0, "huber {mae_huber} vs squared {mae_squared} on the clean target");
}

/// `groups` queries of `per` documents: a relevant feature and a noise feature, both uniform
/// in [0, 1), the relevance `relevance(x)`; the frame, labels and query offsets.
fn ranked(seed: u64, groups: usize, per: usize, relevance: fn(f32) -> f32) -> (FeatureFrame, Vec<f32>, Vec<usize>) {
    let mut rng = Rng::new(seed, 0);
    let n = groups * per;
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 1000.0).collect();
    let noise: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 1000.0).collect();
    let y: Vec<f32> = x.iter().map(|&v| relevance(v)).collect();
    let offsets = (0..=groups).map(|g| g * per).collect();
    (frame(vec![x, noise]), y, offsets)
}

#[test]
fn ranking_objectives_order_documents_by_relevance() {
    let (groups, per) = (100, 10);
    let (f, y, offsets) = ranked(4, groups, per, |v| (v * 4.0).floor());
    let data = Dataset::new(f.clone(), y.clone()).unwrap().with_group_sizes(&vec![per; groups]).unwrap();
    let t = Targets { label: &y, label_upper: None, weight: None, groups: Some(&offsets) };
    for objective in ["rank:ndcg", "rank:pairwise"] {
        let model = fit(&format!(r#"{{"objective": "{objective}", "n_estimators": 30, "max_depth": 3}}"#), &data);
        let ndcg =
            Metric::Ndcg(Some(5)).evaluate(&predict(&model, &f, PredictOutput::Value), 1, &t, &Default::default());
        assert!(ndcg > 0.97, "{objective}: ndcg@5 {ndcg}");
        let map = Metric::Map(Some(5)).evaluate(&predict(&model, &f, PredictOutput::Value), 1, &t, &Default::default());
        assert!(map > 0.9, "{objective}: map@5 {map}");
    }
}

#[test]
fn rank_map_orders_relevant_documents_first() {
    let (groups, per) = (100, 12);
    let (f, y, offsets) = ranked(5, groups, per, |v| (v > 0.7) as u8 as f32);
    let data = Dataset::new(f.clone(), y.clone()).unwrap().with_group_sizes(&vec![per; groups]).unwrap();
    let t = Targets { label: &y, label_upper: None, weight: None, groups: Some(&offsets) };
    let model = fit(r#"{"objective": "rank:map", "n_estimators": 20, "max_depth": 3}"#, &data);
    let map = Metric::Map(None).evaluate(&predict(&model, &f, PredictOutput::Value), 1, &t, &Default::default());
    assert!(map > 0.99, "map {map}");
    // Graded relevance is refused, naming the objective.
    let graded =
        Dataset::new(f, y.iter().map(|v| v * 2.0).collect()).unwrap().with_group_sizes(&vec![per; groups]).unwrap();
    let config = TrainConfig::from_json(r#"{"objective": "rank:map"}"#).unwrap();
    let err = train(&config, &graded, &[]).unwrap_err().to_string();
    assert!(err.contains("rank:map labels must be 0 or 1"), "{err}");
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
    let t = Targets { label: &y, label_upper: None, weight: None, groups: None };
    assert_eq!(Metric::Merror.evaluate(&p, 3, &t, &Default::default()), 0.0);
    assert!(Metric::Mlogloss.evaluate(&p, 3, &t, &Default::default()) < 0.1);
}

/// Skewed data where the median and the 0.9 quantile lie far apart: `y = x + e`, e
/// exponential, so the 0.9 quantile is `x + ln 10` and the median `x + ln 2`.
fn skewed(n: usize, seed: u64) -> (FeatureFrame, Vec<f32>) {
    let mut rng = Rng::new(seed, 0);
    let mut unit = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let x: Vec<f32> = (0..n).map(|_| unit() as f32 * 4.0).collect();
    let y = x.iter().map(|&x| x - (1.0 - unit()).ln() as f32).collect();
    (frame(vec![x]), y)
}

/// The pinball loss at `alpha`, written out here as the oracle.
fn pinball(pred: &[f32], y: &[f32], alpha: f64) -> f64 {
    let total: f64 = pred
        .iter()
        .zip(y)
        .map(|(&p, &y)| {
            let d = y as f64 - p as f64;
            if d >= 0.0 {
                alpha * d
            } else {
                (1.0 - alpha) * -d
            }
        })
        .sum();
    total / y.len() as f64
}

#[test]
fn quantile_objective_evaluates_and_early_stops_on_the_pinball_loss_at_its_alpha() {
    let (f, y) = skewed(3000, 1);
    let (vf, vy) = skewed(1000, 2);
    let data = Dataset::new(f, y).unwrap();
    let valid = Dataset::new(vf.clone(), vy.clone()).unwrap();
    let cfg = TrainConfig::from_json(
        r#"{"objective": "reg:quantileerror", "quantile_alpha": 0.9, "n_estimators": 60, "max_depth": 3,
            "learning_rate": 0.3, "early_stopping_rounds": 5}"#,
    )
    .unwrap();
    let model = train(&cfg, &data, &[("valid", &valid)]).unwrap();
    let log = model.evals_result();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].metric, "quantile", "the default metric of reg:quantileerror");
    // The logged value of the best round is the pinball loss at 0.9 of the kept model.
    let best = model.best_iteration().expect("early stopping ran");
    let p = predict(&model, &vf, PredictOutput::Value);
    let want = pinball(&p, &vy, 0.9);
    assert!((log[0].values[best] - want).abs() < 1e-6 * want.max(1.0), "{} vs {want}", log[0].values[best]);
    // Early stopping kept the round of the lowest pinball loss, not of the lowest MAE.
    let lowest = log[0].values.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    assert_eq!(best, lowest);
    // And the model found the 0.9 quantile: about 90% of validation labels lie below it.
    let below = p.iter().zip(&vy).filter(|(p, y)| y <= p).count() as f64 / vy.len() as f64;
    assert!((below - 0.9).abs() < 0.04, "{below}");
}

#[test]
fn quantile_metric_by_name_uses_quantile_alpha() {
    let (f, y) = skewed(500, 3);
    let data = Dataset::new(f.clone(), y.clone()).unwrap();
    for name in ["quantile", "pinball"] {
        let cfg = TrainConfig::from_json(&format!(
            r#"{{"objective": "reg:squarederror", "quantile_alpha": 0.25, "n_estimators": 3, "eval_metric": ["{name}", "mae"]}}"#
        ))
        .unwrap();
        let model = train(&cfg, &data, &[("train", &data)]).unwrap();
        let p = predict(&model, &f, PredictOutput::Value);
        let log = model.evals_result();
        assert_eq!((log[0].metric.as_str(), log[1].metric.as_str()), ("quantile", "mae"));
        let want = pinball(&p, &y, 0.25);
        assert!((log[0].values[2] - want).abs() < 1e-9 * want.max(1.0), "{} vs {want}", log[0].values[2]);
    }
    let cfg = TrainConfig::from_json(r#"{"objective": "multi:softprob", "num_class": 2, "eval_metric": "quantile"}"#);
    let d = Dataset::new(frame(vec![vec![0.0, 1.0]]), vec![0.0, 1.0]).unwrap();
    let msg = train(&cfg.unwrap(), &d, &[("train", &d)]).unwrap_err().to_string();
    assert!(msg.contains("`quantile` does not apply to objective multi:softprob"), "{msg}");
}

#[test]
fn scale_pos_weight_trains_as_weighting_the_positive_rows() {
    // Few distinct values per feature, so the cut points do not depend on weights: the
    // weighted fit must then be the scaled fit exactly.
    let mut rng = Rng::new(31, 0);
    let mut uniform = move || (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    let n = 3000;
    let columns: Vec<Vec<f32>> =
        (0..4).map(|_| (0..n).map(|_| (uniform() * 100.0).floor() / 100.0).collect()).collect();
    let y: Vec<f32> = (0..n)
        .map(|i| (columns[0][i] + 0.5 * columns[1][i] * columns[2][i] + 0.3 * uniform() > 0.95) as u8 as f32)
        .collect();
    let positives = y.iter().filter(|&&v| v == 1.0).count();
    assert!(positives > n / 10 && positives < n / 3, "{positives} positives");
    let f = frame(columns);
    let scaled = fit(
        r#"{"objective": "binary:logistic", "scale_pos_weight": 4.0, "n_estimators": 15, "max_depth": 4}"#,
        &Dataset::new(f.clone(), y.clone()).unwrap(),
    );
    let weights: Vec<f32> = y.iter().map(|&v| if v == 1.0 { 4.0 } else { 1.0 }).collect();
    let weighted = fit(
        r#"{"objective": "binary:logistic", "n_estimators": 15, "max_depth": 4}"#,
        &Dataset::new(f.clone(), y.clone()).unwrap().with_weight(weights).unwrap(),
    );
    let plain = fit(
        r#"{"objective": "binary:logistic", "n_estimators": 15, "max_depth": 4}"#,
        &Dataset::new(f.clone(), y.clone()).unwrap(),
    );
    let margin = |m: &Model| predict(m, &f, PredictOutput::Margin);
    assert_eq!(margin(&scaled), margin(&weighted));
    // And it moves the probabilities up: the positives count 4 times.
    let mean = |m: &Model| predict(m, &f, PredictOutput::Value).iter().map(|&p| p as f64).sum::<f64>() / n as f64;
    assert!(mean(&scaled) > mean(&plain) + 0.03, "{} against {}", mean(&scaled), mean(&plain));
}

/// A user's squared error and RMSE, written against the traits the plugin's Python callables
/// implement: the built-in objective's trees and metric values, exactly.
#[test]
fn user_functions_reproduce_the_builtin_squared_error_and_rmse() {
    use polars_gbt::metric::CustomMetric;
    use polars_gbt::objective::Loss;
    use polars_gbt::tree::GradPair;
    use polars_gbt::{Training, UserFunctions};

    struct MySquared;
    impl Loss for MySquared {
        fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> polars_gbt::Result<()> {
            for (i, o) in out.iter_mut().enumerate() {
                *o = GradPair { g: (margin[i] - t.label[i]) * t.w(i), h: t.w(i) };
            }
            Ok(())
        }
        fn check_labels(&self, _: &Targets) -> polars_gbt::Result<()> {
            Ok(())
        }
        fn estimate_base_margin(&self, _: &Targets) -> Vec<f32> {
            vec![0.0]
        }
    }
    struct MyRmse;
    impl CustomMetric for MyRmse {
        fn name(&self) -> String {
            "my_rmse".into()
        }
        fn higher_is_better(&self) -> bool {
            false
        }
        fn evaluate(&self, pred: &[f32], _: usize, t: &Targets) -> polars_gbt::Result<f64> {
            let s: f64 = pred.iter().zip(t.label).map(|(p, y)| ((p - y) as f64).powi(2)).sum();
            Ok((s / pred.len() as f64).sqrt())
        }
    }

    let mut rng = Rng::new(4, 4);
    let x: Vec<f32> = (0..3000).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let y: Vec<f32> = x.iter().map(|v| (v * 0.8).sin() * 3.0 + rng.below(100) as f32 / 100.0).collect();
    let data = Dataset::new(frame(vec![x[..2000].to_vec()]), y[..2000].to_vec()).unwrap();
    let valid = Dataset::new(frame(vec![x[2000..].to_vec()]), y[2000..].to_vec()).unwrap();
    let json = r#"{"n_estimators": 12, "max_depth": 4, "base_score": 0.0, "eval_metric": "rmse"}"#;
    let builtin = polars_gbt::train(&TrainConfig::from_json(json).unwrap(), &data, &[("v", &valid)]);
    let mut cfg = TrainConfig::from_json(json).unwrap();
    cfg.custom_objective = Some("my_squared".into());
    let user = UserFunctions { objective: Some(Box::new(MySquared)), metrics: vec![Box::new(MyRmse)] };
    let mine = Training::new(&cfg, &data).evals(&[("v", &valid)]).user_functions(user).run().unwrap();
    let builtin = builtin.unwrap();
    assert_eq!(mine.trees(), builtin.trees());
    let (log, want) = (mine.evals_result(), builtin.evals_result());
    assert_eq!((log[0].metric.as_str(), log[1].metric.as_str()), ("rmse", "my_rmse"));
    for (a, b) in log[1].values.iter().zip(&want[0].values) {
        assert!((a - b).abs() <= 1e-6 * b.abs(), "{a} against {b}");
    }
    // Without the loss, a custom objective's name is an error, not a silent built-in fit.
    let e = train(&cfg, &data, &[]).unwrap_err().to_string();
    assert!(e.contains("custom_objective"), "{e}");
}

/// Several targets (issue 17): output j of a multi-target fit is the fit of target j alone,
/// tree for tree, for every kind of row-wise loss (Newton leaves, refit leaves, log links),
/// with weights; and the evaluation log scores every (row, target) element.
#[test]
fn each_output_of_a_multi_target_fit_is_its_targets_own_fit() {
    let mut rng = Rng::new(61, 0);
    let n = 1500;
    let x: Vec<Vec<f32>> = (0..3).map(|_| (0..n).map(|_| rng.unit() as f32 * 4.0 - 2.0).collect()).collect();
    let f = frame(x.clone());
    let weight: Vec<f32> = (0..n).map(|i| 0.5 + (i % 4) as f32 * 0.5).collect();
    let real = |i: usize| x[0][i] * 2.0 + x[1][i] * x[2][i] + noise(i);
    let cases: Vec<(&str, [Vec<f32>; 2])> = vec![
        (r#"{"n_estimators": 6, "max_depth": 3}"#, [(0..n).map(real).collect(), x[1].clone()]),
        (
            r#"{"objective": "reg:absoluteerror", "n_estimators": 6, "max_depth": 3}"#,
            [(0..n).map(real).collect(), x[2].clone()],
        ),
        (
            r#"{"objective": "reg:quantileerror", "quantile_alpha": 0.8, "n_estimators": 6, "max_depth": 3}"#,
            [(0..n).map(real).collect(), x[0].clone()],
        ),
        (
            r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 3}"#,
            [
                (0..n).map(|i| (real(i) > 0.0) as u8 as f32).collect(),
                (0..n).map(|i| (x[2][i] > 0.5) as u8 as f32).collect(),
            ],
        ),
        (
            r#"{"objective": "count:poisson", "n_estimators": 6, "max_depth": 3}"#,
            [(0..n).map(|i| real(i).abs().floor()).collect(), (0..n).map(|i| (x[1][i] * 3.0).abs().round()).collect()],
        ),
    ];
    for (json, [a, b]) in cases {
        let labels: Vec<f32> = a.iter().chain(&b).copied().collect();
        let both = Dataset::with_labels(f.clone(), labels.into(), 2).unwrap().with_weight(weight.clone()).unwrap();
        let model = fit(json, &both);
        assert_eq!(model.n_outputs(), 2, "{json}");
        let joint = predict(&model, &f, PredictOutput::Margin);
        for (j, label) in [a, b].into_iter().enumerate() {
            let alone = fit(json, &Dataset::new(f.clone(), label).unwrap().with_weight(weight.clone()).unwrap());
            let own = predict(&alone, &f, PredictOutput::Margin);
            let column: Vec<f32> = (0..n).map(|i| joint[i * 2 + j]).collect();
            assert_eq!(own, column, "{json}: target {j}");
        }
    }
    // rmse over both targets' elements: the root of the mean of every squared error.
    let (a, b): (Vec<f32>, Vec<f32>) = ((0..n).map(real).collect(), x[1].clone());
    let labels: Vec<f32> = a.iter().chain(&b).copied().collect();
    let both = Dataset::with_labels(f.clone(), labels.into(), 2).unwrap();
    let model = train(&TrainConfig::from_json(r#"{"n_estimators": 4}"#).unwrap(), &both, &[("valid", &both)]).unwrap();
    let p = predict(&model, &f, PredictOutput::Value);
    let sq: f64 = (0..n).map(|i| (p[2 * i] - a[i]).powi(2) as f64 + (p[2 * i + 1] - b[i]).powi(2) as f64).sum();
    let logged = *model.evals_result()[0].values.last().unwrap();
    assert!((logged - (sq / (2 * n) as f64).sqrt()).abs() < 1e-6, "{logged}");
}

/// Fixed noise per row, so that every fit sees the same labels.
fn noise(i: usize) -> f32 {
    ((i * 7919) % 101) as f32 / 101.0 - 0.5
}
