//! Continued training (`Training::init_model`): rounds added to an existing model. Without row or
//! column sampling, 10 rounds and then 10 more must be exactly the 20-round fit: the same cut
//! points (the same data), and every row starting the second fit from the first's margins,
//! summed tree by tree in the order the booster added them.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::random::Rng;
use polars_gbt::{
    train, Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig, Training,
};

fn frame(n: usize, seed: u64) -> (FeatureFrame, Vec<f32>) {
    let mut rng = Rng::new(seed, 3);
    let cols: Vec<Vec<f32>> = (0..4)
        .map(|j| {
            (0..n)
                .map(|_| {
                    if j == 3 && rng.below(8) == 0 {
                        f32::NAN
                    } else {
                        (rng.below(20_000) as f32 - 10_000.0) / 4000.0
                    }
                })
                .collect()
        })
        .collect();
    let y = (0..n).map(|i| cols[0][i] * 1.5 - cols[1][i] * cols[2][i] + (rng.below(100) as f32) / 200.0).collect();
    let columns = cols
        .into_iter()
        .enumerate()
        .map(|(j, c)| FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap())
        .collect();
    (FeatureFrame::new(columns).unwrap(), y)
}

fn cfg(json: &str) -> TrainConfig {
    TrainConfig::from_json(json).unwrap()
}

fn margins(m: &Model, f: &FeatureFrame) -> Vec<f32> {
    match m.predict(f, PredictOutput::Margin).unwrap() {
        Predictions::Float { values, .. } => values,
        other => panic!("{other:?}"),
    }
}

fn continued(json_first: &str, json_more: &str, data: &Dataset, evals: &[(&str, &Dataset)]) -> Model {
    let first = train(&cfg(json_first), data, evals).unwrap();
    Training::new(&cfg(json_more), data).evals(evals).init_model(&first).run().unwrap()
}

#[test]
fn ten_rounds_then_ten_more_are_the_twenty_round_fit() {
    let (f, y) = frame(4000, 1);
    let labels: Vec<f32> = y.iter().map(|&v| (v > 0.3) as u8 as f32).collect();
    let classes: Vec<f32> = y.iter().map(|&v| (v.clamp(-1.0, 1.9) + 1.0).floor()).collect();
    for (objective, labels) in [
        (r#""objective": "reg:squarederror""#, &y),
        (r#""objective": "binary:logistic""#, &labels),
        (r#""objective": "multi:softprob", "num_class": 3"#, &classes),
    ] {
        let data = Dataset::new(f.clone(), labels.clone()).unwrap();
        let json = |n: usize| format!(r#"{{{objective}, "n_estimators": {n}, "max_depth": 4}}"#);
        let whole = train(&cfg(&json(20)), &data, &[]).unwrap();
        let joined = continued(&json(10), &json(10), &data, &[]);
        assert_eq!(joined.num_trees(), whole.num_trees(), "{objective}");
        assert_eq!(joined.trees_table(), whole.trees_table(), "{objective}");
        assert_eq!(margins(&joined, &f), margins(&whole, &f), "{objective}");
    }
}

#[test]
fn evaluation_and_early_stopping_continue_from_the_first_model() {
    let (f, y) = frame(4000, 2);
    let (fv, yv) = frame(1000, 3);
    let (data, valid) = (Dataset::new(f, y).unwrap(), Dataset::new(fv, yv).unwrap());
    let json = |n: usize| {
        format!(r#"{{"n_estimators": {n}, "max_depth": 3, "learning_rate": 0.5, "early_stopping_rounds": 4}}"#)
    };
    let whole = train(&cfg(&json(200)), &data, &[("valid", &valid)]).unwrap();
    let first = train(&cfg(&json(5)), &data, &[("valid", &valid)]).unwrap();
    let joined = Training::new(&cfg(&json(200)), &data).evals(&[("valid", &valid)]).init_model(&first).run().unwrap();
    // The continued log starts where the first left off: its first value is the whole fit's
    // sixth.
    let (w, j) = (&whole.evals_result()[0].values, &joined.evals_result()[0].values);
    assert_eq!(j[0], w[5]);
    assert_eq!(joined.best_iteration(), whole.best_iteration());
    assert_eq!(joined.num_trees(), whole.num_trees());
}

#[test]
fn continuing_needs_the_same_columns_and_no_base_score_or_margins() {
    let (f, y) = frame(500, 4);
    let data = Dataset::new(f.clone(), y.clone()).unwrap();
    let first = train(&cfg(r#"{"n_estimators": 3}"#), &data, &[]).unwrap();
    let fewer = Dataset::new(f.without(&["x3"]).unwrap(), y.clone()).unwrap();
    let e = Training::new(&cfg(r#"{"n_estimators": 3}"#), &fewer).init_model(&first).run().unwrap_err();
    assert!(e.to_string().contains("same columns"), "{e}");
    let e =
        Training::new(&cfg(r#"{"n_estimators": 3, "base_score": 0.5}"#), &data).init_model(&first).run().unwrap_err();
    assert!(e.to_string().contains("`base_score`"), "{e}");
    let with_margin = data.clone().with_base_margin(vec![0.0; 500]).unwrap();
    let e = Training::new(&cfg(r#"{"n_estimators": 3}"#), &with_margin).init_model(&first).run().unwrap_err();
    assert!(e.to_string().contains("base_margin"), "{e}");
    let other = train(
        &cfg(r#"{"objective": "binary:logistic", "n_estimators": 3}"#),
        &Dataset::new(f, y.iter().map(|&v| (v > 0.0) as u8 as f32).collect()).unwrap(),
        &[],
    )
    .unwrap();
    let e = Training::new(&cfg(r#"{"n_estimators": 3}"#), &data).init_model(&other).run().unwrap_err();
    assert!(e.to_string().contains("binary:logistic"), "{e}");
}
