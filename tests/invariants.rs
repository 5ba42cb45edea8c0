//! Exact invariants of the trainer: a split computed by hand, leaf values from the rows they
//! receive, histogram subtraction,
//! determinism, serialisation round trips, missing-value directions, categorical splits,
//! growth limits and early stopping. Every fit runs on every backend here, each against the
//! CPU's trees (`common::backends`).

mod common;

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, DictionaryArray, Float32Array, Float64Array, Int64Array, LargeStringArray, StringArray, StringViewArray,
};
use polars_gbt::backend::cpu::histogram::{build_histograms, subtract_in_place, HistLayout, HistTask};
use polars_gbt::data::cuts::compute_cuts;
use polars_gbt::data::BinnedMatrix;
use polars_gbt::random::Rng;
use polars_gbt::tree::{GradPair, GradSum, Quantiser};
use polars_gbt::{
    Dataset, FeatureColumn, FeatureFrame, GrowPolicy, Model, PredictOutput, Predictions, TrainConfig, Training,
};

// Every scenario trains on the CPU and on every other backend here, against the CPU.
use common::backends::train;

fn float_column(name: &str, values: Vec<f32>) -> FeatureColumn {
    FeatureColumn::new(name, vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
}

fn config(json: &str) -> TrainConfig {
    TrainConfig::from_json(json).unwrap()
}

fn values(p: Predictions) -> Vec<f32> {
    match p {
        Predictions::Float { values, .. } => values,
        other => panic!("expected float predictions, got {other:?}"),
    }
}

/// Random data: `nf` features (some missing), a label that depends on the first three.
fn random_data(n: usize, nf: usize, seed: u64) -> (FeatureFrame, Vec<f32>) {
    let mut rng = Rng::new(seed, 7);
    let mut cols = vec![vec![0f32; n]; nf];
    for col in cols.iter_mut() {
        for v in col.iter_mut() {
            *v = (rng.below(10_000) as f32 - 5_000.0) / 1_000.0;
        }
    }
    for v in cols[nf - 1].iter_mut() {
        if rng.below(10) == 0 {
            *v = f32::NAN;
        }
    }
    let y = (0..n)
        .map(|i| {
            let z = cols[0][i] + 0.5 * cols[1][i] * cols[2][i];
            let noise = (rng.below(1000) as f32 - 500.0) / 1000.0;
            ((z + noise) > 0.0) as u8 as f32
        })
        .collect();
    let frame =
        FeatureFrame::new(cols.into_iter().enumerate().map(|(j, c)| float_column(&format!("x{j}"), c)).collect())
            .unwrap();
    (frame, y)
}

#[test]
fn one_split_computed_by_hand() {
    // Squared error from a zero base: g = -y, h = 1. The best split separates {1, 1} from
    // {3, 3}: G_L = -2, G_R = -6, H = 2 each; with lambda 0, gain = 4/2 + 36/2 - 64/4 = 4
    // and leaf weights are -G/H = 1 and 3.
    let frame = FeatureFrame::new(vec![float_column("x", vec![1.0, 2.0, 3.0, 4.0])]).unwrap();
    let data = Dataset::new(frame.clone(), vec![1.0, 1.0, 3.0, 3.0]).unwrap();
    let cfg = config(
        r#"{"n_estimators": 1, "max_depth": 1, "learning_rate": 1.0, "reg_lambda": 0.0,
            "min_child_weight": 0.0, "base_score": 0.0}"#,
    );
    let model = train(&cfg, &data, &[]).unwrap();
    let tree = &model.trees()[0];
    assert_eq!(tree.n_nodes(), 3);
    assert_eq!(tree.feature[0], 0);
    assert_eq!(tree.threshold[0], 2.5);
    assert!((tree.gain[0] - 4.0).abs() < 1e-6, "gain {}", tree.gain[0]);
    let (l, r) = (tree.left[0] as usize, tree.right[0] as usize);
    assert!((tree.value[l] - 1.0).abs() < 1e-6 && (tree.value[r] - 3.0).abs() < 1e-6);
    assert_eq!(tree.cover[0], 4.0);
    let p = values(model.predict(&frame, PredictOutput::Value).unwrap());
    for (got, want) in p.iter().zip([1.0, 1.0, 3.0, 3.0]) {
        assert!((got - want).abs() < 1e-6);
    }
}

#[test]
fn whole_sample_weights_give_the_trees_of_repeated_rows() {
    // Integer weights from 0 to 32 (scikit-learn's sample-weight equivalence, at a size where
    // the heaviest weights shrink histogram chunks to 1,024 rows): a fit with the weights, on
    // the rows in another order, grows the trees of a fit on each row repeated that often.
    let (n, nf) = (2_500, 5);
    let mut rng = Rng::new(17, 3);
    let mut cols = vec![vec![0f32; n]; nf];
    for (j, col) in cols.iter_mut().enumerate() {
        for v in col.iter_mut() {
            *v = if j == nf - 1 && rng.below(8) == 0 { f32::NAN } else { rng.below(2_000) as f32 / 100.0 - 10.0 };
        }
    }
    let y: Vec<f32> =
        (0..n).map(|i| ((cols[0][i] + cols[1][i] * 0.3 + rng.below(300) as f32 / 100.0) > 1.0) as u8 as f32).collect();
    let classes: Vec<f32> = (0..n).map(|i| ((cols[2][i] + 10.0) / 7.0).floor().min(2.0)).collect();
    let w: Vec<f32> = (0..n).map(|i| if i % 97 == 0 { 32.0 } else { rng.below(5) as f32 }).collect();
    let frame = |rows: &[usize]| {
        FeatureFrame::new(
            (0..nf).map(|j| float_column(&format!("x{j}"), rows.iter().map(|&i| cols[j][i]).collect())).collect(),
        )
        .unwrap()
    };
    let reversed: Vec<usize> = (0..n).rev().collect();
    let repeated: Vec<usize> = (0..n).flat_map(|i| std::iter::repeat_n(i, w[i] as usize)).collect();
    for (objective, extra, label) in [
        ("binary:logistic", "", &y),
        ("reg:squarederror", "", &cols[3]),
        ("multi:softprob", r#", "num_class": 3"#, &classes),
        ("reg:absoluteerror", "", &cols[3]),
    ] {
        let cfg = config(&format!(
            r#"{{"objective": "{objective}", "n_estimators": 12, "max_depth": 5, "learning_rate": 0.3{extra}}}"#
        ));
        let weighted = Dataset::new(frame(&reversed), reversed.iter().map(|&i| label[i]).collect())
            .unwrap()
            .with_weight(reversed.iter().map(|&i| w[i]).collect())
            .unwrap();
        let copies = Dataset::new(frame(&repeated), repeated.iter().map(|&i| label[i]).collect()).unwrap();
        let (a, b) = (train(&cfg, &weighted, &[]).unwrap(), train(&cfg, &copies, &[]).unwrap());
        assert_eq!(a.base_margin(), b.base_margin(), "{objective}");
        assert_eq!(a.trees(), b.trees(), "{objective}: the weighted fit's trees are not the repeated rows'");
    }
}

#[test]
fn histogram_subtraction_equals_direct_construction() {
    let (frame, _) = random_data(5_000, 6, 1);
    let cuts = compute_cuts(&frame, None, 64, 0).unwrap();
    let binned = BinnedMatrix::new(&frame, &cuts);
    let layout = HistLayout::new(&binned);
    let mut rng = Rng::new(3, 0);
    let pairs: Vec<GradPair> = (0..5_000)
        .map(|_| GradPair { g: rng.below(2001) as f32 / 1000.0 - 1.0, h: rng.below(1000) as f32 / 999.0 })
        .collect();
    let q = Quantiser::fit(&pairs);
    let grads: Vec<_> = pairs.iter().map(|&p| q.quantise(p)).collect();
    let features: Vec<u32> = (0..6).collect();
    let parent: Vec<u32> = (0..5_000).filter(|r| r % 7 != 3).collect();
    let (left, right): (Vec<u32>, Vec<u32>) = parent.iter().partition(|_| rng.below(3) == 0);
    let build = |rows: &[u32]| {
        let mut hist = vec![GradSum::default(); layout.total_slots()];
        build_histograms(&binned, &layout, &grads, &features, vec![HistTask { rows, hist: &mut hist }]);
        hist
    };
    let (hp, hl, hr) = (build(&parent), build(&left), build(&right));
    let mut sibling = hp.clone();
    subtract_in_place(&mut sibling, &hl);
    assert_eq!(sibling, hr);
    // And building the same histogram again gives the same bits.
    for _ in 0..16 {
        assert_eq!(build(&parent), hp);
    }
}

#[test]
fn training_is_deterministic_across_runs_and_thread_counts() {
    let (frame, y) = random_data(3_000, 8, 2);
    let data = Dataset::new(frame, y).unwrap();
    let fit = |threads: usize| {
        let cfg = config(&format!(
            r#"{{"objective": "binary:logistic", "n_estimators": 15, "max_depth": 5, "subsample": 0.8,
                "colsample_bytree": 0.8, "colsample_bynode": 0.7, "seed": 11, "n_jobs": {threads}}}"#
        ));
        train(&cfg, &data, &[]).unwrap()
    };
    let one = fit(1);
    assert_eq!(one.to_bytes(), fit(1).to_bytes(), "two fits with the same seed differ");
    // The stored parameters record n_jobs, so compare everything but them.
    for threads in [2, 4] {
        let other = fit(threads);
        assert_eq!(one.trees(), other.trees(), "1 and {threads} threads grow different trees");
        assert_eq!(one.base_margin(), other.base_margin());
        assert_eq!(one.features(), other.features());
    }
}

#[test]
fn margins_kept_through_the_partition_of_millions_of_rows_are_the_trees_predictions() {
    // A node of more than a million rows is partitioned in pieces whose rows are gathered by
    // rotations split across threads. The margins a fit keeps come from those rows, so two
    // rounds at once must equal one round continued by another, which starts from margins
    // predicted by walking the first tree.
    let (frame, y) = random_data(2_300_000, 3, 5);
    let data = Dataset::new(frame, y).unwrap();
    let cfg = |rounds: usize| {
        config(&format!(
            r#"{{"objective": "reg:squarederror", "n_estimators": {rounds}, "max_depth": 2, "max_bin": 32, "n_jobs": 2}}"#
        ))
    };
    let two = train(&cfg(2), &data, &[]).unwrap();
    let one = train(&cfg(1), &data, &[]).unwrap();
    let continued = Training::new(&cfg(1), &data).init_model(&one).run().unwrap();
    assert_eq!(two.trees(), continued.trees());
}

#[test]
fn models_round_trip_through_bytes_files_and_json() {
    let (frame, y) = random_data(2_000, 5, 3);
    let data = Dataset::new(frame.clone(), y).unwrap();
    let cfg = config(r#"{"objective": "binary:logistic", "n_estimators": 10, "max_depth": 4}"#);
    let model = train(&cfg, &data, &[]).unwrap();
    let want = values(model.predict(&frame, PredictOutput::Margin).unwrap());

    let from_bytes = Model::from_bytes(&model.to_bytes()).unwrap();
    assert_eq!(from_bytes, model);
    let from_json = Model::from_json(&model.to_json()).unwrap();
    assert_eq!(from_json, model);
    let dir = std::env::temp_dir().join(format!("polars-gbt-roundtrip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.pgbt");
    model.save(&path).unwrap();
    let from_file = Model::load(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    for m in [from_bytes, from_json, from_file] {
        assert_eq!(values(m.predict(&frame, PredictOutput::Margin).unwrap()), want);
    }
}

#[test]
fn missing_values_learn_their_direction() {
    // Rows with a missing x behave like large x: the split must send missing right.
    let n = 400;
    let x: Vec<f32> = (0..n).map(|i| if i % 4 == 0 { f32::NAN } else { i as f32 }).collect();
    let y: Vec<f32> = (0..n).map(|i| if i % 4 == 0 || i >= 200 { 10.0 } else { 0.0 }).collect();
    let frame = FeatureFrame::new(vec![float_column("x", x)]).unwrap();
    let data = Dataset::new(frame, y).unwrap();
    let model = train(&config(r#"{"n_estimators": 1, "max_depth": 1, "learning_rate": 1.0}"#), &data, &[]).unwrap();
    let tree = &model.trees()[0];
    assert!(!tree.default_left[0], "missing should go right with the large values");
    // Nulls are missing values too, and give the same model as NaN.
    let nulls: ArrayRef = Arc::new(Float64Array::from_iter((0..n).map(|i| (i % 4 != 0).then_some(i as f64))));
    let y2: Vec<f32> = (0..n).map(|i| if i % 4 == 0 || i >= 200 { 10.0 } else { 0.0 }).collect();
    let data2 =
        Dataset::new(FeatureFrame::new(vec![FeatureColumn::new("x", vec![nulls]).unwrap()]).unwrap(), y2).unwrap();
    let model2 = train(&config(r#"{"n_estimators": 1, "max_depth": 1, "learning_rate": 1.0}"#), &data2, &[]).unwrap();
    assert_eq!(model2.trees(), model.trees());
}

#[test]
fn a_column_of_100_000_categories_trains_on_32_bit_bins() {
    // More categories than 16-bit bins hold: every category keeps its own bin (a code past
    // 65,535 truncated to 16 bits would share one with another category). The label is 1 on
    // the categories whose code is odd, which one partition split can separate.
    let (n, k) = (200_000usize, 100_000usize);
    let mut rng = Rng::new(4, 1);
    let codes: Vec<i32> = (0..n).map(|i| if i < k { i as i32 } else { rng.below(k) as i32 }).collect();
    let y: Vec<f32> = codes.iter().map(|&c| (c % 2) as f32).collect();
    let keys = arrow_array::Int32Array::from(codes.clone());
    let names: ArrayRef = Arc::new(StringArray::from((0..k).map(|c| format!("v{c}")).collect::<Vec<_>>()));
    let dict: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::try_new(keys, names).unwrap());
    let frame = FeatureFrame::new(vec![FeatureColumn::new("c", vec![dict]).unwrap()]).unwrap();
    let cuts = compute_cuts(&frame, None, 256, 0).unwrap();
    let binned = BinnedMatrix::new(&frame, &cuts);
    assert!(matches!(binned.data, polars_gbt::data::binned::BinData::U32 { .. }));
    assert_eq!(binned.get(99_999, 0), 99_999);
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    let cfg = config(
        r#"{"objective": "binary:logistic", "n_estimators": 3, "max_depth": 1, "learning_rate": 1.0,
            "max_cat_threshold": 100000, "cat_smooth": 0, "cat_l2": 0, "min_data_per_group": 0}"#,
    );
    let model = train(&cfg, &data, &[]).unwrap();
    assert!(model.trees()[0].is_categorical(0));
    let p = values(model.predict(&frame, PredictOutput::Value).unwrap());
    let wrong = p.iter().zip(&y).filter(|(p, y)| (*p - *y).abs() > 0.1).count();
    assert_eq!(wrong, 0, "{wrong} rows on the wrong side");
}

#[test]
fn categorical_splits_separate_categories() {
    // Categories b and d have label 1, the others 0: one partition split separates them.
    let cats = ["a", "b", "c", "d", "e", "f"];
    let n = 600;
    let names: Vec<&str> = (0..n).map(|i| cats[i % 6]).collect();
    let y: Vec<f32> = names.iter().map(|c| (*c == "b" || *c == "d") as u8 as f32).collect();
    let dict: ArrayRef = Arc::new(names.iter().copied().collect::<DictionaryArray<Int32Type>>());
    let frame = FeatureFrame::new(vec![FeatureColumn::new("c", vec![dict]).unwrap()]).unwrap();
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    let cfg = config(r#"{"objective": "binary:logistic", "n_estimators": 5, "max_depth": 1, "learning_rate": 1.0}"#);
    let model = train(&cfg, &data, &[]).unwrap();
    assert!(model.trees()[0].is_categorical(0));
    let p = values(model.predict(&frame, PredictOutput::Value).unwrap());
    for (p, y) in p.iter().zip(&y) {
        assert!((p - y).abs() < 0.1, "p={p} y={y}");
    }
    // At prediction, categories are matched by name whatever the dictionary order, and an
    // unseen category is in no split's set.
    let other: ArrayRef = Arc::new(["d", "zzz", "a"].into_iter().collect::<DictionaryArray<Int32Type>>());
    let p = values(
        model
            .predict(
                &FeatureFrame::new(vec![FeatureColumn::new("c", vec![other]).unwrap()]).unwrap(),
                PredictOutput::Value,
            )
            .unwrap(),
    );
    assert!(p[0] > 0.9 && p[2] < 0.1, "{p:?}");
    assert!(p[1].is_finite());
}

#[test]
fn string_columns_are_categorical_like_their_dictionary_columns() {
    // Nulls among the strings, and chunks of all three Arrow string types: the model must be
    // the dictionary column's (categories by name, nulls missing).
    let cats = [Some("a"), Some("b"), None, Some("d"), Some("c"), Some("b")];
    let n = 600;
    let names: Vec<Option<&str>> = (0..n).map(|i| cats[(i * 7 + i / 5) % 6]).collect();
    let y: Vec<f32> = names.iter().map(|c| matches!(c, Some("b") | Some("d") | None) as u8 as f32).collect();
    let dict: ArrayRef = Arc::new(names.iter().copied().collect::<DictionaryArray<Int32Type>>());
    let half = n / 2;
    let strings: Vec<ArrayRef> =
        vec![Arc::new(StringArray::from(names[..half].to_vec())), Arc::new(StringArray::from(names[half..].to_vec()))];
    let large: ArrayRef = Arc::new(LargeStringArray::from(names.clone()));
    let view: ArrayRef = Arc::new(StringViewArray::from(names.clone()));
    let cfg = config(r#"{"objective": "binary:logistic", "n_estimators": 4, "max_depth": 2}"#);
    let fit = |chunks: Vec<ArrayRef>| {
        let frame = FeatureFrame::new(vec![FeatureColumn::new("c", chunks).unwrap()]).unwrap();
        train(&cfg, &Dataset::new(frame, y.clone()).unwrap(), &[]).unwrap()
    };
    let want = fit(vec![dict.clone()]);
    assert!(want.trees()[0].is_categorical(0));
    for chunks in [strings.clone(), vec![large], vec![view]] {
        let got = fit(chunks);
        assert_eq!(got.trees(), want.trees());
        assert_eq!(got.features()[0].categories, want.features()[0].categories);
    }
    // A string column scores a dictionary-trained model, and the other way round, alike.
    let by_strings = FeatureFrame::new(vec![FeatureColumn::new("c", strings.clone()).unwrap()]).unwrap();
    let by_dict = FeatureFrame::new(vec![FeatureColumn::new("c", vec![dict]).unwrap()]).unwrap();
    let p = values(want.predict(&by_dict, PredictOutput::Value).unwrap());
    assert_eq!(values(want.predict(&by_strings, PredictOutput::Value).unwrap()), p);
    assert_eq!(values(fit(strings).predict(&by_dict, PredictOutput::Value).unwrap()), p);
}

#[test]
fn every_leaf_holds_the_newton_step_of_the_rows_it_receives() {
    // Squared error from base 0 (g = -y, h = 1): each leaf's value must be
    // -eta * G / (H + lambda) over the rows that prediction sends to it. This ties the
    // histograms the splits were chosen from to the partition that routed the rows (missing
    // values and their learned directions included), in deep loss-guided and depth-wise trees.
    let (frame, _) = random_data(6_000, 6, 12);
    let mut xs = vec![vec![0f32; 6_000]; 3];
    for (j, x) in xs.iter_mut().enumerate() {
        frame.find(&format!("x{j}")).unwrap().read(0, x);
    }
    let y: Vec<f32> = (0..6_000).map(|i| xs[0][i] * xs[1][i] + (3.0 * xs[2][i]).sin()).collect();
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    for json in [
        r#"{"n_estimators": 1, "grow_policy": "lossguide", "max_depth": 0, "max_leaves": 63, "learning_rate": 0.3,
            "base_score": 0.0}"#,
        r#"{"n_estimators": 1, "max_depth": 6, "learning_rate": 0.3, "base_score": 0.0, "reg_lambda": 2.5}"#,
    ] {
        let cfg = config(json);
        let model = train(&cfg, &data, &[]).unwrap();
        let Predictions::Index { values: leaf, .. } = model.predict(&frame, PredictOutput::Leaf).unwrap() else {
            panic!("leaf ids expected")
        };
        let tree = &model.trees()[0];
        let mut sums = vec![(0f64, 0f64); tree.n_nodes()];
        for (&l, &yi) in leaf.iter().zip(&y) {
            sums[l as usize].0 -= yi as f64;
            sums[l as usize].1 += 1.0;
        }
        let mut leaves = 0;
        for (n, &(g, h)) in sums.iter().enumerate().filter(|(_, s)| s.1 > 0.0) {
            assert!(tree.is_leaf(n as u32), "{json}: rows reach inner node {n}");
            let want = -cfg.learning_rate * g / (h + cfg.reg_lambda);
            let got = tree.value[n] as f64;
            // The gradients are rounded to 15 bits of their largest magnitude before summing.
            assert!(
                (got - want).abs() <= 1e-3 * want.abs() + 1e-4,
                "{json}: leaf {n} holds {got}, its rows' step is {want}"
            );
            leaves += 1;
        }
        assert!(leaves > 30, "{json}: only {leaves} leaves reached");
    }
}

#[test]
fn growth_respects_depth_and_leaf_limits() {
    let (frame, y) = random_data(4_000, 6, 4);
    let data = Dataset::new(frame, y).unwrap();
    let depthwise =
        train(&config(r#"{"objective": "binary:logistic", "n_estimators": 5, "max_depth": 3}"#), &data, &[]).unwrap();
    assert!(depthwise.trees().iter().all(|t| t.depth() <= 3));
    let lossguide = train(
        &config(r#"{"objective": "binary:logistic", "n_estimators": 5, "grow_policy": "lossguide", "max_depth": 0, "max_leaves": 7}"#),
        &data,
        &[],
    )
    .unwrap();
    for t in lossguide.trees() {
        let leaves = (0..t.n_nodes() as u32).filter(|&n| t.is_leaf(n)).count();
        assert!(leaves <= 7, "{leaves} leaves");
    }
    assert!(lossguide.trees().iter().any(|t| t.depth() > 3), "lossguide should grow unbalanced trees here");
    assert_eq!(lossguide.config().grow_policy, GrowPolicy::Lossguide);
}

#[test]
fn early_stopping_keeps_the_best_round() {
    let (frame, y) = random_data(3_000, 6, 5);
    let (vframe, vy) = random_data(1_000, 6, 6);
    let data = Dataset::new(frame, y).unwrap();
    let valid = Dataset::new(vframe, vy).unwrap();
    let cfg = config(
        r#"{"objective": "binary:logistic", "n_estimators": 500, "max_depth": 6, "learning_rate": 0.5,
            "eval_metric": ["auc", "logloss"], "early_stopping_rounds": 5}"#,
    );
    let model = train(&cfg, &data, &[("valid", &valid)]).unwrap();
    let best = model.best_iteration().expect("early stopping sets the best round");
    assert_eq!(model.num_rounds(), best + 1);
    let log = model.evals_result();
    assert_eq!(log.len(), 2);
    assert_eq!((log[1].dataset.as_str(), log[1].metric.as_str()), ("valid", "logloss"));
    let losses = &log[1].values;
    assert!(losses.len() < 500, "should have stopped early");
    assert_eq!(losses.len(), best + 6);
    let min = losses.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(losses[best], min);
}

#[test]
fn chunking_and_column_order_do_not_change_anything() {
    let (frame, y) = random_data(2_500, 4, 7);
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    let cfg = config(r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 4}"#);
    let model = train(&cfg, &data, &[]).unwrap();
    // The same columns cut into uneven chunks.
    let mut buf = vec![0f32; 2_500];
    let chunked: Vec<FeatureColumn> = frame
        .columns()
        .iter()
        .map(|c| {
            c.read(0, &mut buf);
            let pieces = [0..1, 1..700, 700..701, 701..2_500]
                .into_iter()
                .map(|r| Arc::new(Float32Array::from(buf[r].to_vec())) as ArrayRef)
                .collect();
            FeatureColumn::new(c.name(), pieces).unwrap()
        })
        .collect();
    let chunked = FeatureFrame::new(chunked).unwrap();
    let model2 = train(&cfg, &Dataset::new(chunked.clone(), y).unwrap(), &[]).unwrap();
    assert_eq!(model.to_bytes(), model2.to_bytes());
    // Reordered and extra columns at prediction.
    let mut cols: Vec<FeatureColumn> = chunked.columns().iter().rev().cloned().collect();
    cols.push(FeatureColumn::new("extra", vec![Arc::new(Int64Array::from(vec![1i64; 2_500])) as ArrayRef]).unwrap());
    let reordered = FeatureFrame::new(cols).unwrap();
    assert_eq!(
        values(model.predict(&reordered, PredictOutput::Margin).unwrap()),
        values(model.predict(&frame, PredictOutput::Margin).unwrap())
    );
}

#[test]
fn outputs_agree_with_each_other() {
    let (frame, y) = random_data(1_000, 4, 8);
    let labels: Vec<f32> = y.iter().enumerate().map(|(i, &v)| v + (i % 2) as f32).collect();
    let data = Dataset::new(frame.clone(), labels).unwrap();
    let cfg = config(r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 6, "max_depth": 3}"#);
    let model = train(&cfg, &data, &[]).unwrap();
    assert_eq!(model.num_trees(), 18);
    let probs = values(model.predict(&frame, PredictOutput::Value).unwrap());
    for row in probs.chunks(3) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
    let Predictions::Index { values: classes, width: 1 } = model.predict(&frame, PredictOutput::Class).unwrap() else {
        panic!("class output is one index per row")
    };
    for (row, &c) in probs.chunks(3).zip(&classes) {
        let argmax = (0..3).fold(0, |b, k| if row[k] > row[b] { k } else { b });
        assert_eq!(argmax as u32, c);
    }
    let Predictions::Index { values: leaves, width } = model.predict(&frame, PredictOutput::Leaf).unwrap() else {
        panic!("leaf output is indices")
    };
    assert_eq!(width, 18);
    // Summing the leaves' values reproduces the margins.
    let margins = values(model.predict(&frame, PredictOutput::Margin).unwrap());
    for r in 0..10 {
        for k in 0..3 {
            let mut m = model.base_margin()[k];
            for t in (k..18).step_by(3) {
                m += model.trees()[t].value[leaves[r * 18 + t] as usize];
            }
            assert!((m - margins[r * 3 + k]).abs() < 1e-5);
        }
    }
}

#[test]
fn fast_prediction_equals_a_plain_tree_walk() {
    // Shallow trees take the complete layout (vectorised where the CPU allows), deep
    // lossguide trees the linked one; both must agree with walking the stored trees.
    let (frame, y) = random_data(3_000, 6, 9);
    let data = Dataset::new(frame.clone(), y).unwrap();
    let mut columns = vec![vec![0f32; 3_000]; 6];
    for (f, c) in columns.iter_mut().enumerate() {
        frame.column(f).read(0, c);
    }
    for params in [
        r#"{"objective": "binary:logistic", "n_estimators": 20, "max_depth": 6}"#,
        r#"{"objective": "binary:logistic", "n_estimators": 10, "grow_policy": "lossguide", "max_depth": 0,
            "max_leaves": 200, "min_child_weight": 0}"#,
    ] {
        let model = train(&config(params), &data, &[]).unwrap();
        let fast = values(model.predict(&frame, PredictOutput::Margin).unwrap());
        for (row, got) in fast.iter().enumerate() {
            let want: f32 = model.base_margin()[0]
                + model.trees().iter().map(|t| t.value[t.leaf_of(|f| columns[f][row]) as usize]).sum::<f32>();
            assert!((got - want).abs() < 1e-4, "row {row}: {got} vs {want}");
        }
    }
}

#[test]
fn shap_values_and_the_bias_sum_to_the_margin_for_every_output() {
    // TreeSHAP itself is checked against Shapley values by enumeration (backend::cpu::shap);
    // here, through Model::predict on trained models: binary with missing values, and
    // multiclass (one block of n_features + 1 per class), with per-row starting margins too.
    let (frame, y) = random_data(3_000, 5, 41);
    let classes: Vec<f32> = y.iter().enumerate().map(|(i, v)| v + (i % 3 == 0) as u8 as f32).collect();
    for (json, labels, k) in [
        (r#"{"objective": "binary:logistic", "n_estimators": 20, "max_depth": 5}"#, &y, 1),
        (r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 8, "max_depth": 4}"#, &classes, 3),
    ] {
        let model = train(&config(json), &Dataset::new(frame.clone(), labels.clone()).unwrap(), &[]).unwrap();
        let width = k * (5 + 1);
        let contrib = model.predict(&frame, PredictOutput::Contrib).unwrap();
        assert!(matches!(contrib, Predictions::Float { width: w, .. } if w == width));
        let (contrib, margin) = (values(contrib), values(model.predict(&frame, PredictOutput::Margin).unwrap()));
        for (i, row) in contrib.chunks(width).enumerate() {
            for c in 0..k {
                let sum: f32 = row[c * 6..(c + 1) * 6].iter().sum();
                let m = margin[i * k + c];
                assert!((sum - m).abs() <= 1e-4 * m.abs().max(1.0), "{json}: row {i} class {c}: {sum} against {m}");
            }
        }
        // A per-row starting margin moves only the bias.
        let start: Vec<f32> = (0..3_000 * k).map(|i| (i % 7) as f32 * 0.25).collect();
        let shifted = values(model.predict_with_base_margin(&frame, &start, PredictOutput::Contrib).unwrap());
        for (i, (a, b)) in contrib.chunks(width).zip(shifted.chunks(width)).enumerate() {
            for c in 0..k {
                assert_eq!(a[c * 6..c * 6 + 5], b[c * 6..c * 6 + 5], "{json}: row {i}: feature values moved");
                let moved = b[c * 6 + 5] - a[c * 6 + 5];
                let want = start[i * k + c] - model.base_margin()[c];
                assert!((moved - want).abs() < 1e-4, "{json}: row {i} class {c}: bias moved by {moved}, not {want}");
            }
        }
    }
}
