//! Monotone and interaction constraints, checked where they matter: predictions are monotone
//! along every constrained feature for every row (over random data and parameters), every
//! root-to-leaf path of every tree stays within one interaction set, and constraints that
//! allow everything leave the trees as they were.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::random::Rng;
use polars_gbt::tree::{Tree, NO_CHILD};
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};
use proptest::prelude::*;

// Every scenario trains on the CPU and on every other backend here, against the CPU.
use common::backends::train;

const NF: usize = 5;

/// `NF` columns (the second with 15% nulls), and a label that rises with x0, falls with x1,
/// bends along x2 and mixes x3 and x4 with an interaction and noise.
fn columns(n: usize, seed: u64) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut rng = Rng::new(seed, 21);
    let mut cols = vec![vec![0f32; n]; NF];
    for col in cols.iter_mut() {
        for v in col.iter_mut() {
            *v = rng.below(10_000) as f32 / 1000.0 - 5.0;
        }
    }
    for v in cols[1].iter_mut() {
        if rng.below(100) < 15 {
            *v = f32::NAN;
        }
    }
    let y = (0..n)
        .map(|i| {
            let x1 = if cols[1][i].is_nan() { 0.0 } else { cols[1][i] };
            let noise = (rng.below(1000) as f32 - 500.0) / 250.0;
            cols[0][i] - 0.8 * x1 + (cols[2][i] * 1.3).sin() * 2.0 + cols[3][i] * cols[4][i] * 0.3 + noise
        })
        .collect();
    (cols, y)
}

fn frame(cols: &[Vec<f32>]) -> FeatureFrame {
    FeatureFrame::new(
        cols.iter()
            .enumerate()
            .map(|(j, c)| {
                FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(c.clone())) as ArrayRef]).unwrap()
            })
            .collect(),
    )
    .unwrap()
}

fn fit(json: &str, cols: &[Vec<f32>], y: &[f32]) -> Model {
    let cfg = TrainConfig::from_json(json).unwrap();
    train(&cfg, &Dataset::new(frame(cols), y.to_vec()).unwrap(), &[]).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn margins(model: &Model, cols: &[Vec<f32>]) -> Vec<f32> {
    match model.predict(&frame(cols), PredictOutput::Margin).unwrap() {
        Predictions::Float { values, .. } => values,
        other => panic!("expected floats, got {other:?}"),
    }
}

/// For `rows` rows of `cols`, the margins as feature `f` sweeps `grid`: one Vec per row.
fn sweeps(model: &Model, cols: &[Vec<f32>], rows: &[usize], f: usize, grid: &[f32]) -> Vec<Vec<f32>> {
    let mut probe: Vec<Vec<f32>> = vec![Vec::new(); NF];
    for &r in rows {
        for &x in grid {
            for (j, p) in probe.iter_mut().enumerate() {
                p.push(if j == f { x } else { cols[j][r] });
            }
        }
    }
    margins(model, &probe).chunks(grid.len()).map(<[f32]>::to_vec).collect()
}

/// Every distinct value of the features and points between and beyond them.
fn grid() -> Vec<f32> {
    (-60..=60).map(|i| i as f32 / 10.0).collect()
}

fn assert_monotone(model: &Model, cols: &[Vec<f32>], directions: &[i8], what: &str) {
    let rows: Vec<usize> = (0..cols[0].len()).step_by(37).take(40).collect();
    let grid = grid();
    for (f, &d) in directions.iter().enumerate().filter(|(_, &d)| d != 0) {
        for (r, sweep) in rows.iter().zip(sweeps(model, cols, &rows, f, &grid)) {
            for (i, w) in sweep.windows(2).enumerate() {
                let ok = if d > 0 { w[1] >= w[0] } else { w[1] <= w[0] };
                assert!(
                    ok,
                    "{what}: row {r}, x{f} {} -> {}: margin {} -> {} breaks direction {d}",
                    grid[i],
                    grid[i + 1],
                    w[0],
                    w[1]
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12)))]

    #[test]
    fn predictions_are_monotone_along_every_constrained_feature(
        seed in 0u64..1000,
        directions in proptest::collection::vec(-1i8..=1, NF),
        depth in 2usize..8,
        lossguide in any::<bool>(),
        reg_alpha in prop_oneof![Just(0.0), Just(1.5)],
        max_delta_step in prop_oneof![Just(0.0), Just(0.4)],
        objective in prop_oneof![Just("reg:squarederror"), Just("reg:pseudohubererror")],
    ) {
        let (cols, y) = columns(1500, seed);
        let growth = if lossguide {
            format!(r#""grow_policy": "lossguide", "max_leaves": {}, "max_depth": 0"#, 1 << depth)
        } else {
            format!(r#""max_depth": {depth}"#)
        };
        let json = format!(
            r#"{{"n_estimators": 15, "learning_rate": 0.4, {growth}, "reg_alpha": {reg_alpha},
                "max_delta_step": {max_delta_step}, "objective": "{objective}", "seed": {seed},
                "monotone_constraints": {directions:?}}}"#
        );
        let model = fit(&json, &cols, &y);
        assert_monotone(&model, &cols, &directions, &json);
    }
}

#[test]
fn a_constraint_against_the_data_keeps_the_feature_out() {
    // The label rises with x0; constrained decreasing, the model cannot use x0 at all (every
    // split on it would run against the constraint), so predictions are flat along it.
    let (cols, y) = columns(3000, 7);
    let free = fit(r#"{"n_estimators": 20, "max_depth": 4}"#, &cols, &y);
    let against = fit(r#"{"n_estimators": 20, "max_depth": 4, "monotone_constraints": {"x0": -1}}"#, &cols, &y);
    let rows: Vec<usize> = (0..40).collect();
    let rising = sweeps(&free, &cols, &rows, 0, &grid());
    assert!(rising.iter().all(|s| s.last().unwrap() - s[0] > 3.0), "unconstrained, the model follows x0 up");
    for s in sweeps(&against, &cols, &rows, 0, &grid()) {
        assert!(s.iter().all(|&m| m == s[0]), "constrained against the data: flat along x0, got {s:?}");
    }
    // With the data's direction the constraint costs little: the fit's error stays close.
    let along = fit(r#"{"n_estimators": 20, "max_depth": 4, "monotone_constraints": {"x0": 1}}"#, &cols, &y);
    let mse = |m: &Model| margins(m, &cols).iter().zip(&y).map(|(p, t)| (p - t).powi(2) as f64).sum::<f64>() / 3000.0;
    assert!(mse(&along) < mse(&free) * 1.15, "along {} free {}", mse(&along), mse(&free));
    assert!(mse(&against) > mse(&along) * 1.3, "against {} along {}", mse(&against), mse(&along));
    assert_monotone(&along, &cols, &[1, 0, 0, 0, 0], "x0 increasing");
}

/// The distinct features of every root-to-leaf path of `tree`.
fn paths(tree: &Tree) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut stack = vec![(0u32, Vec::new())];
    while let Some((node, mut used)) = stack.pop() {
        let n = node as usize;
        if tree.left[n] == NO_CHILD {
            out.push(used);
            continue;
        }
        if !used.contains(&tree.feature[n]) {
            used.push(tree.feature[n]);
        }
        stack.push((tree.left[n], used.clone()));
        stack.push((tree.right[n], used));
    }
    out
}

#[test]
fn every_path_stays_within_one_interaction_set() {
    let (cols, y) = columns(4000, 3);
    let sets: Vec<Vec<u32>> = vec![vec![0, 1], vec![1, 2, 3], vec![4]];
    for growth in [r#""max_depth": 6"#, r#""grow_policy": "lossguide", "max_leaves": 40, "max_depth": 0"#] {
        let json = format!(
            r#"{{"n_estimators": 25, {growth}, "colsample_bynode": 0.8, "interaction_constraints": [["x0", "x1"], [1, 2, 3], ["x4"]]}}"#
        );
        let model = fit(&json, &cols, &y);
        let (mut deep, mut across) = (0, 0);
        for (t, tree) in model.trees().iter().enumerate() {
            for path in paths(tree) {
                let within = path.len() <= 1 || sets.iter().any(|s| path.iter().all(|f| s.contains(f)));
                assert!(within, "{json}: tree {t} has a path over features {path:?}");
                deep += (path.len() >= 2) as usize;
                across += path.contains(&1) as usize;
            }
        }
        // The constraints shaped the trees without emptying them: paths join several features,
        // and the feature two sets share appears.
        assert!(deep > 50 && across > 10, "{json}: {deep} paths of 2+ features, {across} through x1");
    }
}

#[test]
fn constraints_that_allow_everything_change_nothing() {
    let (cols, y) = columns(2000, 5);
    let plain = fit(r#"{"n_estimators": 8, "max_depth": 5}"#, &cols, &y);
    for json in [
        r#"{"n_estimators": 8, "max_depth": 5, "monotone_constraints": [0, 0, 0, 0, 0]}"#,
        r#"{"n_estimators": 8, "max_depth": 5, "monotone_constraints": {}}"#,
        r#"{"n_estimators": 8, "max_depth": 5, "interaction_constraints": [["x0", "x1", "x2", "x3", "x4"]]}"#,
    ] {
        assert_eq!(fit(json, &cols, &y).trees(), plain.trees(), "{json}");
    }
}

#[test]
fn constraints_are_refused_where_they_cannot_hold() {
    let (cols, y) = columns(200, 1);
    let data = Dataset::new(frame(&cols), y).unwrap();
    for (json, words) in [
        (r#"{"objective": "reg:absoluteerror", "monotone_constraints": {"x0": 1}}"#, "refitted"),
        (r#"{"objective": "reg:quantileerror", "monotone_constraints": [1, 0, 0, 0, 0]}"#, "refitted"),
        (r#"{"monotone_constraints": {"price": 1}}"#, "`price`"),
        (r#"{"monotone_constraints": [1, 0]}"#, "2 directions for 5 features"),
        (r#"{"interaction_constraints": [["x0", "nope"]]}"#, "`nope`"),
    ] {
        let e = train(&TrainConfig::from_json(json).unwrap(), &data, &[]).unwrap_err().to_string();
        assert!(e.contains(words), "{json}: {e}");
    }
}
