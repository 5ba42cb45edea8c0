//! Evaluation sets on the GPU (issue 55): binned there with the fit's cut points, their margins
//! updated there by each tree, and the elementwise metrics computed there. Every fit below runs
//! on both devices; the evaluation logs, the best iteration and the trees must be the CPU's,
//! bit for bit, whether a metric is computed on the device (most of them) or read from the
//! device's margins on the host (weighted AUC, aucpr, rankings, survival, Poisson, several
//! targets); the unweighted AUC is counted on the device (the large set below, 2^20 rows and
//! more, sorted in several stages).

#![cfg(feature = "cuda")]

mod common;

use common::gpu::{assert_same_trees, gpu, random_data};
use polars_gbt::{train, Dataset, Model, TrainConfig};

fn fit(json: &str, data: &Dataset, evals: &[(&str, &Dataset)], device: &str) -> Model {
    let mut cfg = TrainConfig::from_json(json).unwrap();
    cfg.device = serde_json::from_value(serde_json::Value::String(device.into())).unwrap();
    train(&cfg, data, evals).unwrap_or_else(|e| panic!("{device} fit of {json} failed: {e}"))
}

/// The same fit on both devices: the same logs (every value's bits), best iteration and trees.
fn assert_evaluates_as_cpu(json: &str, data: &Dataset, evals: &[(&str, &Dataset)]) {
    let (cpu, gpu) = (fit(json, data, evals, "cpu"), fit(json, data, evals, "cuda"));
    assert_same_trees(&cpu, &gpu, json);
    assert_eq!(cpu.best_iteration(), gpu.best_iteration(), "{json}: best iteration");
    let (a, b) = (cpu.evals_result(), gpu.evals_result());
    assert_eq!(a.len(), b.len(), "{json}: logged series");
    for (a, b) in a.iter().zip(b) {
        assert_eq!((&a.dataset, &a.metric), (&b.dataset, &b.metric), "{json}: series order");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&a.values) == bits(&b.values),
            "{json}: {}-{} differs:\nCPU {:?}\nGPU {:?}",
            a.dataset,
            a.metric,
            a.values,
            b.values
        );
    }
}

/// Random rows with `label(y)` as the label, and every third row's weight 0.5 + (i % 7) / 4
/// when `weighted`.
fn data(n: usize, seed: u64, weighted: bool, label: impl Fn(f32) -> f32) -> Dataset {
    let (frame, y) = random_data(n, 6, seed);
    let d = Dataset::new(frame, y.into_iter().map(label).collect()).unwrap();
    match weighted {
        true => d.with_weight((0..n).map(|i| 0.5 + (i % 7) as f32 / 4.0).collect()).unwrap(),
        false => d,
    }
}

#[test]
fn binary_and_regression_metrics_on_the_gpu_are_the_cpus() {
    if !gpu() {
        return;
    }
    let binary = |y: f32| (y > 1.0) as u8 as f32;
    let train_set = data(30_000, 1, false, binary);
    // Two sets, one weighted, one large enough for three levels of sums (over 2^20 rows).
    let valid = data(20_000, 2, true, binary);
    let large = data((1 << 20) + 4099, 3, false, binary);
    assert_evaluates_as_cpu(
        r#"{"objective": "binary:logistic", "n_estimators": 40, "max_depth": 5,
            "eval_metric": ["error", "auc", "aucpr", "logloss"], "early_stopping_rounds": 4}"#,
        &train_set,
        &[("valid", &valid), ("large", &large)],
    );
    let train_set = data(30_000, 4, true, |y| y);
    let valid = data(25_000, 5, true, |y| y);
    assert_evaluates_as_cpu(
        r#"{"objective": "reg:squarederror", "n_estimators": 30, "max_depth": 6, "eval_metric": ["mae", "rmse"],
            "early_stopping_rounds": 3}"#,
        &train_set,
        &[("valid", &valid)],
    );
    assert_evaluates_as_cpu(
        r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9], "n_estimators": 12,
            "max_depth": 4}"#,
        &train_set,
        &[("valid", &valid)],
    );
    assert_evaluates_as_cpu(
        r#"{"objective": "reg:expectileerror", "expectile_alpha": 0.8, "n_estimators": 12, "max_depth": 4,
            "eval_metric": ["expectile", "rmse"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
    let positive = |y: f32| y.abs() + 0.1;
    let (train_set, valid) = (data(30_000, 6, false, positive), data(20_000, 7, true, positive));
    assert_evaluates_as_cpu(
        r#"{"objective": "reg:gamma", "n_estimators": 15, "max_depth": 5,
            "eval_metric": ["gamma-nloglik", "gamma-deviance", "rmsle"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
    let counts = |y: f32| (y.abs() * 2.0).floor();
    let (train_set, valid) = (data(30_000, 8, false, counts), data(20_000, 9, false, counts));
    assert_evaluates_as_cpu(
        r#"{"objective": "count:poisson", "n_estimators": 15, "max_depth": 5,
            "eval_metric": ["poisson-nloglik", "rmse", "mae"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
    assert_evaluates_as_cpu(
        r#"{"objective": "reg:tweedie", "tweedie_variance_power": 1.3, "n_estimators": 10, "max_depth": 5,
            "eval_metric": ["tweedie-nloglik@1.3", "rmse"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
    // Survival times, every third censored (negative).
    let survival = |seed: u64| {
        let (frame, y) = random_data(20_000, 6, seed);
        let t = y.iter().enumerate().map(|(i, y)| (y.abs() + 0.2) * if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
        Dataset::new(frame, t).unwrap()
    };
    let (train_set, valid) = (survival(18), survival(19));
    assert_evaluates_as_cpu(
        r#"{"objective": "survival:cox", "n_estimators": 8, "max_depth": 4, "eval_metric": ["cox-nloglik"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
}

#[test]
fn multiclass_interval_ranking_and_multi_target_sets_on_the_gpu_are_the_cpus() {
    if !gpu() {
        return;
    }
    let classes = |y: f32| y.clamp(0.0, 3.99).floor();
    let (train_set, valid) = (data(30_000, 10, false, classes), data(20_000, 11, true, classes));
    assert_evaluates_as_cpu(
        r#"{"objective": "multi:softprob", "num_class": 4, "n_estimators": 10, "max_depth": 5,
            "eval_metric": ["merror", "mlogloss"], "early_stopping_rounds": 2}"#,
        &train_set,
        &[("valid", &valid)],
    );
    // Intervals: the label is the lower bound, every other row's upper bound above it.
    let interval = |seed: u64| {
        let (frame, y) = random_data(20_000, 6, seed);
        let lower: Vec<f32> = y.iter().map(|y| y.abs() + 0.5).collect();
        let upper: Vec<f32> = lower.iter().enumerate().map(|(i, &l)| if i % 2 == 0 { l * 1.5 } else { l }).collect();
        Dataset::new(frame, lower).unwrap().with_label_upper_bound(upper.into()).unwrap()
    };
    let (train_set, valid) = (interval(12), interval(13));
    assert_evaluates_as_cpu(
        r#"{"objective": "survival:aft", "n_estimators": 10, "max_depth": 4,
            "eval_metric": ["interval-regression-accuracy", "aft-nloglik"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
    // Query groups: the ranking metrics read the device's margins on the host.
    let ranked = |seed: u64| {
        let d = data(20_000, seed, false, |y| y.clamp(0.0, 4.0).floor());
        d.with_group_sizes(&vec![40; 500]).unwrap()
    };
    let (train_set, valid) = (ranked(14), ranked(15));
    assert_evaluates_as_cpu(
        r#"{"objective": "rank:ndcg", "n_estimators": 10, "max_depth": 5, "eval_metric": ["ndcg@5", "map@5", "pre@5"],
            "early_stopping_rounds": 3}"#,
        &train_set,
        &[("valid", &valid)],
    );
    // Two targets, scored element by element on the host from the device's margins.
    let two = |seed: u64| {
        let (frame, y) = random_data(20_000, 6, seed);
        let both: Vec<f32> = y.iter().copied().chain(y.iter().map(|v| v * 0.5 - 1.0)).collect();
        Dataset::with_labels(frame, both.into(), 2).unwrap()
    };
    let (train_set, valid) = (two(16), two(17));
    assert_evaluates_as_cpu(
        r#"{"objective": "reg:squarederror", "n_estimators": 8, "max_depth": 4, "eval_metric": ["rmse", "mae"]}"#,
        &train_set,
        &[("valid", &valid)],
    );
}
