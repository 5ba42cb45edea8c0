//! The CUDA backend against the CPU oracle. With integer-quantised gradients both backends
//! sum the same integers, so they must grow the same trees: the same splits and bitwise the
//! same leaf values. These tests need a GPU (`scripts/gpu-build.sh` builds them as
//! `.gpu/cuda_tests` to run on one: docs/benchmarks.md); without one, only the checks that
//! `device="cuda"` fails cleanly and `"auto"` falls back run.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array};
use polars_gbt::backend::cpu::predict::FlatForest;
use polars_gbt::backend::cuda;
use polars_gbt::backend::cuda::GpuForest;
use polars_gbt::backend::StartMargin;
use polars_gbt::collective::Solo;
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, Error, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};

/// Whether a GPU is usable. On the GPU machine `POLARS_GBT_REQUIRE_GPU=1` turns "not usable"
/// into a failure, so that a broken runtime cannot pass as a skipped test.
fn gpu() -> bool {
    match cuda::availability() {
        Ok(()) => true,
        Err(why) => {
            assert!(std::env::var_os("POLARS_GBT_REQUIRE_GPU").is_none(), "the GPU is required here: {why}");
            eprintln!("no usable GPU, GPU checks skipped: {why}");
            false
        }
    }
}

fn column(name: &str, values: Vec<f32>) -> FeatureColumn {
    FeatureColumn::new(name, vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
}

/// Random data with missing values in two columns, a few duplicated values and a constant
/// column; the label mixes a threshold, an interaction and noise.
fn random_data(n: usize, nf: usize, seed: u64) -> (FeatureFrame, Vec<f32>) {
    let mut rng = Rng::new(seed, 11);
    let mut cols = vec![vec![0f32; n]; nf];
    for (j, col) in cols.iter_mut().enumerate() {
        for v in col.iter_mut() {
            *v = match j % 4 {
                0 => (rng.below(1_000_000) as f32 - 500_000.0) / 1e5,
                1 => rng.below(17) as f32,
                2 => ((rng.below(1 << 20) as f32) / 1e3).exp2() - 1.0,
                _ => (rng.below(100) as f32).sqrt(),
            };
        }
    }
    for v in cols[1].iter_mut() {
        if rng.below(5) == 0 {
            *v = f32::NAN;
        }
    }
    for v in cols[nf - 1].iter_mut() {
        if rng.below(2) == 0 {
            *v = f32::NAN;
        }
    }
    cols[2].iter_mut().for_each(|v| *v = 3.0);
    let y = (0..n)
        .map(|i| {
            let a = cols[0][i];
            let b = if cols[1][i].is_nan() { 8.0 } else { cols[1][i] };
            let noise = (rng.below(1000) as f32 - 500.0) / 500.0;
            (a > 1.0) as u8 as f32 * 2.0 + 0.3 * a * b.sqrt() + noise
        })
        .collect();
    let frame =
        FeatureFrame::new(cols.into_iter().enumerate().map(|(j, c)| column(&format!("x{j}"), c)).collect()).unwrap();
    (frame, y)
}

fn fit(json: &str, data: &Dataset, device: &str) -> Model {
    let mut cfg = TrainConfig::from_json(json).unwrap();
    cfg.device = serde_json::from_value(serde_json::Value::String(device.into())).unwrap();
    train(&cfg, data, &[]).unwrap_or_else(|e| panic!("{device} fit of {json} failed: {e}"))
}

fn assert_same_trees(cpu: &Model, gpu: &Model, what: &str) {
    assert_eq!(cpu.trees().len(), gpu.trees().len(), "{what}: tree counts");
    for (i, (a, b)) in cpu.trees().iter().zip(gpu.trees()).enumerate() {
        assert_eq!(a, b, "{what}: tree {i} differs between the CPU and the GPU");
    }
}

/// Predictions as floats (classes and leaf indices too, which are small integers).
fn values(p: Predictions) -> Vec<f32> {
    match p {
        Predictions::Float { values, .. } => values,
        Predictions::Index { values, .. } => values.into_iter().map(|v| v as f32).collect(),
    }
}

#[test]
fn gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(60_000, 9, 1);
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    let weighted = Dataset::new(frame, y)
        .unwrap()
        .with_weight((0..60_000).map(|i| 0.25 + (i % 7) as f32 * 0.5).collect())
        .unwrap();
    let configs = [
        r#"{"n_estimators": 12, "max_depth": 6}"#,
        r#"{"n_estimators": 8, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 31}"#,
        r#"{"n_estimators": 8, "max_depth": 5, "max_leaves": 12}"#,
        r#"{"n_estimators": 10, "max_depth": 6, "subsample": 0.7, "colsample_bytree": 0.8,
            "colsample_bylevel": 0.8, "colsample_bynode": 0.6, "seed": 5}"#,
        r#"{"n_estimators": 10, "max_depth": 7, "min_child_weight": 30, "gamma": 0.5, "reg_alpha": 2,
            "reg_lambda": 3, "max_delta_step": 0.7}"#,
        r#"{"n_estimators": 6, "max_depth": 6, "max_bin": 1024}"#,
        r#"{"n_estimators": 6, "max_depth": 4, "objective": "reg:pseudohubererror", "huber_slope": 0.7}"#,
        r#"{"n_estimators": 6, "max_depth": 5, "objective": "reg:expectileerror", "expectile_alpha": 0.8}"#,
    ];
    for json in configs {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
    for json in [
        r#"{"n_estimators": 10, "max_depth": 6}"#,
        r#"{"n_estimators": 6, "max_depth": 5, "objective": "reg:expectileerror", "expectile_alpha": 0.3}"#,
    ] {
        assert_same_trees(&fit(json, &weighted, "cpu"), &fit(json, &weighted, "cuda"), json);
    }
}

#[test]
fn objectives_with_an_exp_fit_the_same_trees_on_the_gpu_as_on_the_cpu() {
    if !gpu() {
        return;
    }
    // The softmax, Poisson, Tweedie and logistic gradients go through exp, computed by
    // src/objective/math.rs and its twin kernels/math.cuh identically: the same trees, bit for bit,
    // and predictions through the links bit for bit.
    let (frame, y) = random_data(40_000, 6, 2);
    let classes: Vec<f32> = y.iter().map(|v| (v.max(0.0) as u32 % 3) as f32).collect();
    let counts: Vec<f32> = y.iter().map(|v| v.max(0.0).floor()).collect();
    let positive: Vec<f32> = y.iter().map(|v| v.abs() + 0.1).collect();
    let binary: Vec<f32> = y.iter().map(|&v| (v > 1.5) as u8 as f32).collect();
    // Times, every third one censored (negative).
    let times: Vec<f32> = positive.iter().enumerate().map(|(i, &v)| if i % 3 == 0 { -v } else { v }).collect();
    for (json, labels) in [
        (r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 12, "max_depth": 5}"#, &classes),
        (r#"{"objective": "multi:softmax", "num_class": 3, "n_estimators": 6, "max_depth": 5}"#, &classes),
        (r#"{"objective": "count:poisson", "n_estimators": 12, "max_depth": 5}"#, &counts),
        (r#"{"objective": "reg:tweedie", "tweedie_variance_power": 1.3, "n_estimators": 12, "max_depth": 5}"#, &counts),
        (r#"{"objective": "reg:gamma", "n_estimators": 12, "max_depth": 5}"#, &positive),
        // Gradients from the host (log1p has no device twin): the same trees all the same.
        (r#"{"objective": "reg:squaredlogerror", "n_estimators": 12, "max_depth": 5}"#, &positive),
        (r#"{"objective": "survival:cox", "n_estimators": 12, "max_depth": 5}"#, &times),
        (r#"{"objective": "binary:hinge", "n_estimators": 12, "max_depth": 5}"#, &binary),
        (r#"{"objective": "binary:logistic", "n_estimators": 30, "max_depth": 6}"#, &binary),
        (r#"{"objective": "binary:logistic", "scale_pos_weight": 4.5, "n_estimators": 20, "max_depth": 6}"#, &binary),
    ] {
        let data = Dataset::new(frame.clone(), labels.clone()).unwrap();
        let (cpu, gpu) = (fit(json, &data, "cpu"), fit(json, &data, "cuda"));
        assert_same_trees(&cpu, &gpu, json);
        assert_gpu_predicts_as_cpu(&gpu, &frame, json);
    }
    // Interval labels (survival:aft), observed, right-, interval- and left-censored in turn:
    // gradients from the host, the same trees.
    let lower: Vec<f32> = positive.iter().enumerate().map(|(i, &v)| if i % 4 == 3 { 0.0 } else { v }).collect();
    let upper: Vec<f32> = positive
        .iter()
        .enumerate()
        .map(|(i, &v)| match i % 4 {
            1 => f32::INFINITY,
            2 => v * 1.5,
            _ => v,
        })
        .collect();
    let data = Dataset::new(frame.clone(), lower).unwrap().with_label_upper_bound(upper.into()).unwrap();
    // Several targets (target-major): the pointwise kernels read output c's own label.
    let targets: Vec<f32> = positive.iter().chain(&binary).chain(&y).copied().collect();
    let multi = Dataset::with_labels(frame.clone(), targets.into(), 3).unwrap();
    let json = r#"{"n_estimators": 8, "max_depth": 5}"#;
    let (cpu, gpu) = (fit(json, &multi, "cpu"), fit(json, &multi, "cuda"));
    assert_same_trees(&cpu, &gpu, "three targets");
    assert_gpu_predicts_as_cpu(&gpu, &frame, "three targets");
    let labels: Vec<f32> = binary.iter().chain(binary.iter().rev()).copied().collect();
    let multi = Dataset::with_labels(frame.clone(), labels.into(), 2).unwrap();
    let json = r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 5}"#;
    let (cpu, gpu) = (fit(json, &multi, "cpu"), fit(json, &multi, "cuda"));
    assert_same_trees(&cpu, &gpu, "two labels");
    assert_gpu_predicts_as_cpu(&gpu, &frame, "two labels");
    for json in [
        r#"{"objective": "survival:aft", "n_estimators": 12, "max_depth": 5}"#,
        r#"{"objective": "survival:aft", "aft_loss_distribution": "extreme", "aft_loss_distribution_scale": 0.6,
            "n_estimators": 12, "max_depth": 5}"#,
    ] {
        let (cpu, gpu) = (fit(json, &data, "cpu"), fit(json, &data, "cuda"));
        assert_same_trees(&cpu, &gpu, json);
        assert_gpu_predicts_as_cpu(&gpu, &frame, json);
    }
}

#[test]
fn whole_weights_fit_the_same_trees_on_the_gpu_as_on_the_cpu() {
    if !gpu() {
        return;
    }
    // Whole weights multiply the rounded pairs (Weighting::Repeats) in every gradient path:
    // the objective kernels, host-computed gradients (reg:squaredlogerror), the ranking
    // kernel; the L1 refits weigh their rows on the device; weights up to 32 shrink the
    // histogram blocks to 1,024 rows.
    let n = 60_000;
    let (frame, y) = random_data(n, 7, 31);
    let w: Vec<f32> = (0..n).map(|i| if i % 101 == 0 { 32.0 } else { ((i * 7) % 5) as f32 }).collect();
    let weighted = |label: Vec<f32>| Dataset::new(frame.clone(), label).unwrap().with_weight(w.clone()).unwrap();
    let binary = weighted(y.iter().map(|&v| (v > 1.5) as u8 as f32).collect());
    let classes = weighted(y.iter().map(|&v| v.clamp(0.0, 3.0).floor()).collect());
    let positive = weighted(y.iter().map(|&v| v.abs() + 1.0).collect());
    let plain = weighted(y.clone());
    // Rows of weight 0 where x3 is large: with min_child_weight 0 a leaf may hold only those,
    // whose weighted quantile is their largest residual (the device counts them 1 each there).
    let mut x3 = vec![0f32; n];
    frame.find("x3").unwrap().read(0, &mut x3);
    let zero_w: Vec<f32> = (0..n).map(|i| if x3[i] > 8.0 { 0.0 } else { w[i].max(1.0) }).collect();
    let zero_region = Dataset::new(frame.clone(), y.clone()).unwrap().with_weight(zero_w).unwrap();
    let sizes: Vec<usize> = std::iter::repeat_n(60, n / 60).collect();
    let per_query: Vec<f32> = (0..n).map(|i| ((i / 60) % 4) as f32).collect();
    let ranked = Dataset::new(frame.clone(), y.iter().map(|v| v.clamp(0.0, 4.0).floor()).collect())
        .unwrap()
        .with_group_sizes(&sizes)
        .unwrap()
        .with_weight(per_query)
        .unwrap();
    for (json, data) in [
        (r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 6}"#, &binary),
        (r#"{"objective": "multi:softprob", "num_class": 4, "n_estimators": 4, "max_depth": 5}"#, &classes),
        (r#"{"objective": "reg:squaredlogerror", "n_estimators": 6, "max_depth": 5, "learning_rate": 0.1}"#, &positive),
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 6, "max_depth": 5}"#, &plain),
        (
            r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9], "n_estimators": 4,
                "max_depth": 6, "subsample": 0.7, "seed": 4}"#,
            &plain,
        ),
        (
            r#"{"objective": "reg:absoluteerror", "n_estimators": 4, "max_depth": 7, "min_child_weight": 0}"#,
            &zero_region,
        ),
        (r#"{"objective": "rank:ndcg", "n_estimators": 4, "max_depth": 5}"#, &ranked),
        (
            r#"{"n_estimators": 6, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 40, "subsample": 0.8,
                "seed": 2}"#,
            &plain,
        ),
    ] {
        assert_same_trees(&fit(json, data, "cpu"), &fit(json, data, "cuda"), json);
    }
}

#[test]
fn leaf_refits_fit_the_same_trees_on_the_gpu_as_on_the_cpu() {
    if !gpu() {
        return;
    }
    // L1-type losses: the sign gradients from the kernel, each leaf refit to its rows'
    // residual quantile: selected on the device with unit weights, on the host (from the rows
    // the device places in each leaf) with weights; the CPU's values either way.
    let (frame, y) = random_data(40_000, 6, 21);
    let weighted = Dataset::new(frame.clone(), y.clone())
        .unwrap()
        .with_weight((0..40_000).map(|i| 0.5 + (i % 5) as f32 * 0.25).collect())
        .unwrap();
    let plain = Dataset::new(frame.clone(), y.clone()).unwrap();
    let shifted: Vec<f32> =
        y.iter().chain(y.iter().map(|v| v * 0.5 - 1.0).collect::<Vec<_>>().iter()).copied().collect();
    let two_targets = Dataset::with_labels(frame.clone(), shifted.into(), 2).unwrap();
    for (json, data) in [
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 10, "max_depth": 6}"#, &plain),
        (
            r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.05, 0.3, 0.97], "n_estimators": 6,
                "max_depth": 7, "subsample": 0.6, "seed": 8}"#,
            &plain,
        ),
        (r#"{"objective": "reg:quantileerror", "quantile_alpha": 0.8, "n_estimators": 10, "max_depth": 5}"#, &weighted),
        (
            r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9], "n_estimators": 6,
                "max_depth": 5, "subsample": 0.7, "seed": 3}"#,
            &weighted,
        ),
        (
            r#"{"objective": "reg:absoluteerror", "n_estimators": 6, "max_depth": 0, "grow_policy": "lossguide",
                "max_leaves": 40}"#,
            &two_targets,
        ),
    ] {
        let (cpu, gpu) = (fit(json, data, "cpu"), fit(json, data, "cuda"));
        assert_same_trees(&cpu, &gpu, json);
        assert_gpu_predicts_as_cpu(&gpu, &frame, json);
    }
    // Trees too big for per-node counters in shared memory count in global memory.
    std::env::set_var("POLARS_GBT_REFIT_SHARED_NODES", "0");
    let json = r#"{"objective": "reg:quantileerror", "quantile_alpha": 0.7, "n_estimators": 4, "max_depth": 6}"#;
    let (cpu, gpu) = (fit(json, &plain, "cpu"), fit(json, &plain, "cuda"));
    std::env::remove_var("POLARS_GBT_REFIT_SHARED_NODES");
    assert_same_trees(&cpu, &gpu, "refit counters in global memory");
}

#[test]
fn ranking_fits_the_same_trees_on_the_gpu_as_on_the_cpu() {
    if !gpu() {
        return;
    }
    // Query groups of uneven sizes, from single rows to 3,000 (ranked by counting up to 128
    // rows, by a sort beyond), with ties in relevance and, in the first round, in every
    // score; the GPU's ranking kernel must give the CPU's gradients bit for bit under every
    // setting.
    let (frame, y) = random_data(40_000, 6, 12);
    let mut sizes = vec![1, 2, 3, 3000, 7];
    let mut left = 40_000 - sizes.iter().sum::<usize>();
    let mut i = 0usize;
    while left > 0 {
        let s = (5 + (i * 37) % 180).min(left);
        sizes.push(s);
        left -= s;
        i += 1;
    }
    let relevance: Vec<f32> = y.iter().map(|v| v.clamp(0.0, 4.0).floor()).collect();
    let ranked = Dataset::new(frame.clone(), relevance.clone()).unwrap().with_group_sizes(&sizes).unwrap();
    // Queries sorted in shared memory (15,000 and 4,999 rows) and one too long for it (20,000
    // rows: ranked by counting).
    let long =
        Dataset::new(frame.clone(), relevance.clone()).unwrap().with_group_sizes(&[20_000, 15_000, 4_999, 1]).unwrap();
    let mut per_query = Vec::with_capacity(40_000);
    for (q, &s) in sizes.iter().enumerate() {
        per_query.extend(std::iter::repeat_n(0.5 + (q % 5) as f32 * 0.25, s));
    }
    let weighted = Dataset::new(frame.clone(), relevance)
        .unwrap()
        .with_group_sizes(&sizes)
        .unwrap()
        .with_weight(per_query)
        .unwrap();
    // rank:map takes binary relevance.
    let relevant: Vec<f32> = y.iter().map(|&v| (v > 1.5) as u8 as f32).collect();
    let binary = Dataset::new(frame.clone(), relevant.clone()).unwrap().with_group_sizes(&sizes).unwrap();
    let binary_long =
        Dataset::new(frame.clone(), relevant).unwrap().with_group_sizes(&[20_000, 15_000, 4_999, 1]).unwrap();
    let graded: Vec<f32> = y.iter().map(|v| v.clamp(0.0, 4.0) * 0.7).collect();
    let linear = Dataset::new(frame, graded).unwrap().with_group_sizes(&sizes).unwrap();
    for (json, data) in [
        (r#"{"objective": "rank:ndcg", "n_estimators": 6, "max_depth": 5}"#, &ranked),
        (r#"{"objective": "rank:pairwise", "n_estimators": 6, "max_depth": 5}"#, &ranked),
        (
            r#"{"objective": "rank:ndcg", "n_estimators": 4, "max_depth": 5, "lambdarank_num_pair_per_sample": 3}"#,
            &ranked,
        ),
        (
            r#"{"objective": "rank:ndcg", "n_estimators": 4, "max_depth": 5, "lambdarank_num_pair_per_sample": 5000,
             "lambdarank_normalization": false, "lambdarank_score_normalization": false}"#,
            &ranked,
        ),
        (r#"{"objective": "rank:ndcg", "n_estimators": 4, "max_depth": 5}"#, &weighted),
        (r#"{"objective": "rank:ndcg", "n_estimators": 4, "max_depth": 5, "ndcg_exp_gain": false}"#, &linear),
        (r#"{"objective": "rank:ndcg", "n_estimators": 4, "max_depth": 5}"#, &long),
        (r#"{"objective": "rank:map", "n_estimators": 6, "max_depth": 5}"#, &binary),
        (
            r#"{"objective": "rank:map", "n_estimators": 3, "max_depth": 5, "lambdarank_num_pair_per_sample": 5000}"#,
            &binary_long,
        ),
    ] {
        assert_same_trees(&fit(json, data, "cpu"), &fit(json, data, "cuda"), json);
    }
}

#[test]
fn gpu_training_is_deterministic() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(100_000, 8, 3);
    let data = Dataset::new(frame, y).unwrap();
    let json = r#"{"n_estimators": 5, "max_depth": 8}"#;
    let first = fit(json, &data, "cuda").to_bytes();
    for i in 0..15 {
        assert_eq!(fit(json, &data, "cuda").to_bytes(), first, "rebuild {i} differs");
    }
}

#[test]
fn concurrent_gpu_fits_match_sequential_ones() {
    if !gpu() {
        return;
    }
    // Small fits share the GPU, each on its own stream (dense, categorical and compressed
    // rows, logistic and squared error); the large one (over 4M values) has it to itself.
    let (frame, y) = random_data(20_000, 5, 4);
    let binary = Dataset::new(frame.clone(), y.iter().map(|v| (*v > 0.5) as u8 as f32).collect()).unwrap();
    let dense = Dataset::new(frame, y).unwrap();
    let (categorical, sparse) = (categorical_data(30_000, 3), sparse_data(20_000, 5));
    let (frame, y) = random_data(800_000, 6, 5);
    let large = Dataset::new(frame, y).unwrap();
    let mut fits: Vec<(String, &Dataset)> = (0..12)
        .map(|i| {
            let json = format!(r#"{{"n_estimators": 5, "max_depth": {}, "seed": {i}}}"#, 3 + i % 4);
            let data = [&dense, &categorical, &sparse][i % 3];
            (json, data)
        })
        .collect();
    fits.push((r#"{"n_estimators": 6, "max_depth": 5, "objective": "binary:logistic"}"#.into(), &binary));
    fits.push((r#"{"n_estimators": 3, "max_depth": 6}"#.into(), &large));
    let sequential: Vec<Model> = fits.iter().map(|(j, d)| fit(j, d, "cuda")).collect();
    for round in 0..2 {
        let parallel: Vec<Model> = std::thread::scope(|s| {
            let handles: Vec<_> = fits.iter().map(|(j, d)| s.spawn(move || fit(j, d, "cuda"))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for ((a, b), (json, _)) in sequential.iter().zip(&parallel).zip(&fits) {
            assert_same_trees(a, b, &format!("concurrent fit {json}, round {round}"));
        }
    }
}

/// A categorical column: codes (None: null) into `values`.
fn dictionary(keys: Vec<Option<i32>>, values: Vec<String>) -> ArrayRef {
    Arc::new(
        DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(arrow_array::StringArray::from(values))).unwrap(),
    )
}

/// Two categorical columns (40 categories with nulls, and 3) and a numeric one; the label
/// depends on category groups, so both split kinds (sorted partition, one-vs-rest) win.
fn categorical_data(n: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 5);
    let names: Vec<String> = (0..40).map(|c| format!("c{c:02}")).collect();
    let big: Vec<Option<i32>> = (0..n).map(|_| (rng.below(12) != 0).then(|| rng.below(40) as i32)).collect();
    let small: Vec<i32> = (0..n).map(|_| rng.below(3) as i32).collect();
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let y: Vec<f32> = (0..n)
        .map(|i| {
            let b = big[i].map_or(2.0, |c| {
                if c % 5 == 0 {
                    4.0
                } else if c % 3 == 0 {
                    -1.0
                } else {
                    0.5
                }
            });
            b + small[i] as f32 * 0.7 + 0.2 * x[i] + (rng.below(100) as f32 - 50.0) / 100.0
        })
        .collect();
    let frame = FeatureFrame::new(vec![
        FeatureColumn::new("big", vec![dictionary(big, names)]).unwrap(),
        FeatureColumn::new(
            "small",
            vec![dictionary(small.into_iter().map(Some).collect(), vec!["a".into(), "b".into(), "c".into()])],
        )
        .unwrap(),
        column("x", x),
    ])
    .unwrap();
    Dataset::new(frame, y).unwrap()
}

#[test]
fn categorical_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let data = categorical_data(30_000, 6);
    for json in [
        r#"{"n_estimators": 8, "max_depth": 6}"#,
        r#"{"n_estimators": 6, "max_depth": 5, "max_cat_to_onehot": 64}"#,
        r#"{"n_estimators": 6, "max_depth": 5, "max_cat_threshold": 4, "colsample_bynode": 0.7}"#,
        r#"{"n_estimators": 6, "grow_policy": "lossguide", "max_leaves": 20, "max_depth": 0}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
}

/// Two high-cardinality categorical columns: `k` categories of skewed frequency (many rare,
/// so `cat_smooth` leaves some out of the order) and 3,000 with nulls, whose orders are
/// longer than the search's shared-memory chunk; plus a numeric column.
fn wide_categorical_data(n: usize, k: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 9);
    let skewed = |rng: &mut Rng, k: usize| (rng.below(k) * rng.below(k) / k) as i32;
    let wide: Vec<Option<i32>> = (0..n).map(|_| Some(skewed(&mut rng, k))).collect();
    let mid: Vec<Option<i32>> = (0..n).map(|_| (rng.below(10) != 0).then(|| rng.below(3_000) as i32)).collect();
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let effect = |c: i32, salt: i32| ((c.wrapping_mul(2_654_435_761u32 as i32) ^ salt) % 7) as f32 / 3.0 - 1.0;
    let y: Vec<f32> = (0..n)
        .map(|i| {
            effect(wide[i].unwrap(), 11)
                + mid[i].map_or(0.8, |c| effect(c, 5))
                + 0.1 * x[i]
                + (rng.below(100) as f32 - 50.0) / 100.0
        })
        .collect();
    let dict = |keys: Vec<Option<i32>>, k: usize| dictionary(keys, (0..k).map(|c| format!("v{c}")).collect());
    let frame = FeatureFrame::new(vec![
        FeatureColumn::new("wide", vec![dict(wide, k)]).unwrap(),
        FeatureColumn::new("mid", vec![dict(mid, 3_000)]).unwrap(),
        column("x", x),
    ])
    .unwrap();
    Dataset::new(frame, y).unwrap()
}

#[test]
fn high_cardinality_categorical_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let data = wide_categorical_data(400_000, 60_000, 12);
    for json in [
        r#"{"n_estimators": 4, "max_depth": 6}"#,
        r#"{"n_estimators": 4, "max_depth": 6, "cat_smooth": 10, "cat_l2": 10, "min_data_per_group": 100}"#,
        r#"{"n_estimators": 4, "max_depth": 5, "max_cat_threshold": 16, "reg_alpha": 1, "max_delta_step": 0.7}"#,
        r#"{"n_estimators": 3, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0, "subsample": 0.6}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
    // 100,000 categories: past 16-bit bins, the device stores every bin in 32 bits.
    let data = wide_categorical_data(400_000, 100_000, 13);
    for json in [
        r#"{"n_estimators": 4, "max_depth": 6}"#,
        r#"{"n_estimators": 3, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0, "max_cat_threshold": 5000}"#,
    ] {
        let (cpu, gpu) = (fit(json, &data, "cpu"), fit(json, &data, "cuda"));
        assert_same_trees(&cpu, &gpu, json);
        assert_gpu_predicts_as_cpu(&gpu, data.features(), json);
    }
}

#[test]
fn constrained_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(40_000, 9, 4);
    let data = Dataset::new(frame, y).unwrap();
    for json in [
        r#"{"n_estimators": 10, "max_depth": 6, "monotone_constraints": {"x0": 1, "x3": -1, "x5": 1}}"#,
        r#"{"n_estimators": 8, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 31,
            "monotone_constraints": {"x0": -1, "x1": 1}}"#,
        r#"{"n_estimators": 8, "max_depth": 6, "reg_alpha": 2, "max_delta_step": 0.5,
            "monotone_constraints": "(1,1,0,-1,0,0,0,0,0)"}"#,
        r#"{"n_estimators": 8, "max_depth": 6, "interaction_constraints": [["x0", "x1"], ["x1", "x3", "x4"], ["x6"]]}"#,
        r#"{"n_estimators": 8, "max_depth": 6, "colsample_bynode": 0.7, "seed": 3,
            "interaction_constraints": [[0, 1, 3], [4, 5]], "monotone_constraints": {"x0": 1}}"#,
        r#"{"n_estimators": 8, "max_depth": 6, "colsample_bytree": 0.8, "colsample_bylevel": 0.8,
            "colsample_bynode": 0.6, "seed": 9, "feature_weights": {"x0": 3, "x2": 0, "x7": 0.5}}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
    // Categorical splits in bounded nodes: the device search clamps weights as the CPU does.
    let json = r#"{"n_estimators": 6, "max_depth": 5, "monotone_constraints": {"x": 1},
                   "interaction_constraints": [["big", "x"], ["small", "x"]]}"#;
    let cat = categorical_data(20_000, 8);
    assert_same_trees(&fit(json, &cat, "cpu"), &fit(json, &cat, "cuda"), json);
}

/// LibSVM-like data: 100 features of 50 values, each present in about 3% of rows (nulls elsewhere).
fn sparse_data(n: usize, seed: u64) -> Dataset {
    sparse_data_of(n, 100, 50, seed)
}

/// Mostly-null data too wide for one histogram block's shared memory: `nf` features of up
/// to 255 bins (2 KB of shared sums each a node), so the histograms run in several feature
/// groups and each group reads only its part of a compressed row. Up to 255 features keep
/// every histogram slot below 2^16 (16-bit entries); more take 32-bit entries.
fn wide_sparse_data(n: usize, nf: usize, seed: u64) -> Dataset {
    sparse_data_of(n, nf, 100_000, seed)
}

/// `nf` features, each present in about 3% of rows with one of `levels` values.
fn sparse_data_of(n: usize, nf: usize, levels: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 9);
    let cols: Vec<Vec<Option<f32>>> = (0..nf)
        .map(|_| (0..n).map(|_| (rng.below(100) < 3).then(|| rng.below(levels) as f32 / 10.0)).collect())
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|i| cols[0][i].unwrap_or(-1.0) + cols[1][i].map_or(0.0, |v| 2.0 * v) - cols[7][i].unwrap_or(0.5))
        .collect();
    let frame = FeatureFrame::new(
        cols.into_iter()
            .enumerate()
            .map(|(j, c)| {
                FeatureColumn::new(format!("s{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap()
            })
            .collect(),
    )
    .unwrap();
    Dataset::new(frame, y).unwrap()
}

/// The layout a GPU fit plans for `frame`, each row's present values counted here as the
/// device counts them (`count_present`).
fn planned(frame: &FeatureFrame, cuts: &[polars_gbt::data::FeatureCuts]) -> polars_gbt::backend::cuda::data::Layout {
    use polars_gbt::backend::cuda::data::DeviceMatrix;
    let present = DeviceMatrix::may_compress(frame).then(|| {
        let mut present = vec![0u32; frame.n_rows()];
        for col in frame.columns() {
            col.for_each_present(0, frame.n_rows(), |row, _| present[row] += 1);
        }
        present
    });
    DeviceMatrix::plan(frame, cuts, present.as_deref())
}

#[test]
fn mostly_null_data_is_stored_as_compressed_rows() {
    use polars_gbt::backend::cuda::data::Layout;
    use polars_gbt::data::cuts::compute_cuts;
    let sparse = sparse_data(5_000, 1);
    let cuts = compute_cuts(sparse.features(), None, 256, 0).unwrap();
    match planned(sparse.features(), &cuts) {
        Layout::Sparse(rows) => {
            // 100 features of 50 values: 16-bit entries, eight a word.
            assert_eq!(rows.entry_bytes, 2);
            assert!((8..=24).contains(&rows.longest_row()), "longest row {}", rows.longest_row());
            assert_eq!(rows.row_words.len(), 5_001);
        }
        other => panic!("expected compressed rows, got {other:?}"),
    }
    for (nf, entry_bytes) in [(250, 2), (300, 4)] {
        let wide = wide_sparse_data(20_000, nf, 1);
        let cuts = compute_cuts(wide.features(), None, 256, 0).unwrap();
        let slots: u32 = cuts.iter().map(|c| c.n_bins() + 1).sum();
        assert!(slots * 8 > 256 << 10, "{slots} histogram slots fit one block's shared memory");
        match planned(wide.features(), &cuts) {
            Layout::Sparse(rows) => assert_eq!(rows.entry_bytes, entry_bytes, "{nf} features, {slots} slots"),
            other => panic!("expected compressed rows, got {other:?}"),
        }
    }
    let (frame, y) = random_data(1_000, 6, 1);
    let dense = Dataset::new(frame, y).unwrap();
    let cuts = compute_cuts(dense.features(), None, 256, 0).unwrap();
    assert_eq!(planned(dense.features(), &cuts), Layout::Dense { width: 1, stride: 8 });
}

/// The partition's blocks learn their place in a node from the blocks before it, 32 at a time:
/// nodes of hundreds of blocks (4,096 rows each) take several windows, and trees that are
/// the CPU's show every row reached its child. Dense bins (column-major copy), row-major
/// bins (too many features for the copy) and compressed rows, depth-wise and loss-guided.
#[test]
fn levels_of_hundreds_of_partition_blocks_fit_the_cpus_trees() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(1_100_000, 5, 31);
    let dense = Dataset::new(frame, y).unwrap();
    let (frame, y) = random_data(300_000, 300, 32);
    let wide = Dataset::new(frame, y).unwrap();
    let sparse = sparse_data(600_000, 33);
    for (data, what) in [(&dense, "dense"), (&wide, "row-major"), (&sparse, "compressed rows")] {
        for json in [
            r#"{"n_estimators": 4, "max_depth": 7}"#,
            r#"{"n_estimators": 3, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0}"#,
        ] {
            assert_same_trees(&fit(json, data, "cpu"), &fit(json, data, "cuda"), &format!("{what}: {json}"));
        }
    }
}

#[test]
fn sparse_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let data = sparse_data(40_000, 2);
    for json in [
        r#"{"n_estimators": 8, "max_depth": 6}"#,
        r#"{"n_estimators": 5, "grow_policy": "lossguide", "max_leaves": 16, "max_depth": 0, "colsample_bynode": 0.5}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
    let json = r#"{"n_estimators": 6, "max_depth": 7}"#;
    for nf in [250, 300] {
        let wide = wide_sparse_data(30_000, nf, 4);
        assert_same_trees(&fit(json, &wide, "cpu"), &fit(json, &wide, "cuda"), &format!("{nf} mostly-null features"));
    }
    // Mostly-null categorical columns among them (30 and 3,000 categories, 4% present), and
    // objectives that walk the compressed rows for more than the margins: leaf refits (each
    // row's leaf) and several outputs.
    let mut rng = Rng::new(6, 1);
    let n = 40_000;
    let mut columns = data.features().columns().to_vec();
    for (name, k) in [("c30", 30usize), ("c3000", 3000)] {
        let keys = (0..n).map(|_| (rng.below(100) < 4).then(|| rng.below(k) as i32)).collect();
        let values = (0..k).map(|c| format!("{name}_{c}")).collect();
        columns.push(FeatureColumn::new(name, vec![dictionary(keys, values)]).unwrap());
    }
    let frame = FeatureFrame::new(columns).unwrap();
    let cuts = polars_gbt::data::cuts::compute_cuts(&frame, None, 256, 0).unwrap();
    use polars_gbt::backend::cuda::data::Layout;
    assert!(matches!(planned(&frame, &cuts), Layout::Sparse(_)), "the mixed frame is compressed rows");
    let y: Vec<f32> = data.label().to_vec();
    let classes: Vec<f32> = y.iter().map(|v| (v.abs() as u32 % 3) as f32).collect();
    for (json, labels) in [
        (r#"{"n_estimators": 6, "max_depth": 6}"#, &y),
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 5, "max_depth": 6}"#, &y),
        (r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 4, "max_depth": 5}"#, &classes),
    ] {
        let mixed = Dataset::new(frame.clone(), labels.clone()).unwrap();
        assert_same_trees(
            &fit(json, &mixed, "cpu"),
            &fit(json, &mixed, "cuda"),
            &format!("mostly-null categoricals {json}"),
        );
    }
}

/// Grows one tree of `json` on `data` with the GPU's steps and the CPU's in lockstep, `repeats`
/// times: every partition (a node's rows), histogram and split search of the GPU, and the
/// tree's gradient scales and root sum, equal the CPU's, on every rebuild.
fn assert_steps_equal_cpu(json: &str, data: &Dataset, rows: Option<&[u32]>, features: &[u32], repeats: usize) {
    use common::lockstep::{grow_in_lockstep, Lockstep, Setup};
    use polars_gbt::backend::Learner;
    let setup = Setup::new(json, data);
    let mut cpu = setup.cpu_learner(data);
    let rt = cuda::runtime().unwrap();
    let _turn = rt.take_turn(true);
    let mut gpu = cuda::GpuLearner::new(
        &rt,
        data,
        &setup.cuts,
        setup.grow.clone(),
        &setup.cfg,
        &StartMargin::Rows(setup.margin.clone()),
        None,
        &Solo,
    )
    .unwrap_or_else(|e| panic!("{json}: {e}"));
    gpu.compute_gradients(&*setup.loss, &common::lockstep::targets(data)).unwrap();
    let mut first = None;
    for repeat in 0..repeats {
        // The CPU quantises a round's gradients in place: each rebuild starts from fresh ones.
        cpu.compute_gradients(&*setup.loss, &common::lockstep::targets(data)).unwrap();
        let (steps, q, total) = cpu.begin_tree(0, rows).unwrap();
        let started = gpu.begin_tree(0, rows).unwrap();
        assert_eq!((q, total), started, "{json}, rebuild {repeat}: gradient scales or the root's sum");
        let mut both = Lockstep::new(steps, &mut gpu, &setup.cuts);
        let tree = grow_in_lockstep(&mut both, &setup, started, features, 11)
            .unwrap_or_else(|d| panic!("{json}, rebuild {repeat}: GPU and CPU steps differ: {d}"));
        assert!(both.checked.2 >= 3, "{json}: only {:?} steps compared", both.checked);
        assert_eq!(first.get_or_insert_with(|| tree.clone()), &tree, "{json}: rebuild {repeat} grew another tree");
    }
}

#[test]
fn gpu_partition_histograms_and_split_search_equal_the_cpus_step_by_step() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(50_000, 9, 7);
    let dense = Dataset::new(frame, y).unwrap();
    let all: Vec<u32> = (0..9).collect();
    // Each component 16 times over (the determinism check), then the other shapes once or twice.
    assert_steps_equal_cpu(r#"{"max_depth": 7}"#, &dense, None, &all, 16);
    assert_steps_equal_cpu(r#"{"max_depth": 6, "max_bin": 1024}"#, &dense, None, &all, 2);
    assert_steps_equal_cpu(r#"{"max_depth": 0, "grow_policy": "lossguide", "max_leaves": 40}"#, &dense, None, &all, 2);
    let sampled: Vec<u32> = (0..50_000).filter(|r| r % 3 != 1).collect();
    assert_steps_equal_cpu(
        r#"{"max_depth": 6, "colsample_bylevel": 0.8, "colsample_bynode": 0.6, "seed": 4}"#,
        &dense,
        Some(&sampled),
        &[0, 1, 3, 4, 6, 8],
        2,
    );
    assert_steps_equal_cpu(r#"{"max_depth": 6}"#, &categorical_data(30_000, 8), None, &[0, 1, 2], 2);
    let sparse = sparse_data(40_000, 3);
    assert_steps_equal_cpu(r#"{"max_depth": 6}"#, &sparse, None, &(0..100).collect::<Vec<_>>(), 2);
    for nf in [250, 300] {
        let wide = wide_sparse_data(30_000, nf, 5);
        assert_steps_equal_cpu(r#"{"max_depth": 6}"#, &wide, None, &(0..nf as u32).collect::<Vec<_>>(), 1);
    }
}

#[test]
fn cuda_without_support_is_a_clear_error_and_auto_falls_back() {
    let data = categorical_data(300, 7);
    let mut cfg = TrainConfig::from_json(r#"{"n_estimators": 3, "device": "cuda", "max_bin": 10000}"#).unwrap();
    match train(&cfg, &data, &[]) {
        Err(Error::Device(msg)) => {
            assert!(msg.contains("device=\"cuda\" cannot be used"), "{msg}");
            if gpu() {
                assert!(msg.contains("max_bin=10000"), "{msg}");
            }
        }
        other => panic!("expected a device error, got {other:?}"),
    }
    cfg.device = polars_gbt::Device::Auto;
    let model = train(&cfg, &data, &[]).expect("auto falls back to the CPU");
    assert_eq!(model.trees().len(), 3);
    let (engine, note) = polars_gbt::backend::select(&cfg).unwrap();
    assert_eq!(engine.backend(), polars_gbt::backend::Backend::Cpu);
    assert!(note.unwrap().contains("trains on the CPU"));
}

/// GPU prediction against the CPU predictor, the oracle: margins bit for bit (both sum each
/// output's trees in model order in float32), values bit for bit (both links use the same exp),
/// classes and leaves equal.
fn assert_gpu_predicts_as_cpu(model: &Model, frame: &FeatureFrame, what: &str) {
    for quantised in [true, false] {
        let forest = cuda::GpuForest::with_quantisation(&model.forest_spec(), quantised).unwrap();
        eprintln!("{what}: {}", forest.description);
        assert_forest_predicts_as_cpu(model, &forest, frame, what);
    }
}

fn assert_forest_predicts_as_cpu(model: &Model, forest: &cuda::GpuForest, frame: &FeatureFrame, what: &str) {
    let n = frame.n_rows();
    let cpu_margin = values(model.predict(frame, PredictOutput::Margin).unwrap());
    let gpu_margin = values(model.predict_with(forest, frame, PredictOutput::Margin, None).unwrap());
    assert_eq!(cpu_margin.len(), gpu_margin.len());
    for (i, (a, b)) in cpu_margin.iter().zip(&gpu_margin).enumerate() {
        assert_eq!(a.to_bits(), b.to_bits(), "{what}: margin {i}: CPU {a} GPU {b}");
    }
    let cpu_value = model.predict(frame, PredictOutput::Value).unwrap();
    let gpu_value = model.predict_with(forest, frame, PredictOutput::Value, None).unwrap();
    match (cpu_value, gpu_value) {
        (Predictions::Float { values: a, .. }, Predictions::Float { values: b, .. }) => {
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "{what}: value {i}: CPU {x} GPU {y}");
            }
        }
        (a, b) => assert_eq!(a, b, "{what}: class values"),
    }
    assert_eq!(
        model.predict(frame, PredictOutput::Leaf).unwrap(),
        model.predict_with(forest, frame, PredictOutput::Leaf, None).unwrap(),
        "{what}: leaves"
    );
    if model.objective() == polars_gbt::Objective::BinaryLogistic || model.objective().is_multiclass() {
        assert_eq!(
            model.predict(frame, PredictOutput::Class).unwrap(),
            model.predict_with(forest, frame, PredictOutput::Class, None).unwrap(),
            "{what}: classes"
        );
    }
    // A per-row starting margin; then one from -100 to 90, which takes the links through exp's
    // whole range, subnormal results and overflow included.
    let start: Vec<f32> = (0..n * model.n_outputs()).map(|i| (i % 13) as f32 * 0.1 - 0.6).collect();
    let cpu = values(model.predict_with_base_margin(frame, &start, PredictOutput::Margin).unwrap());
    let gpu = values(model.predict_with(forest, frame, PredictOutput::Margin, Some(&start)).unwrap());
    assert_eq!(cpu, gpu, "{what}: margins from a base margin");
    let wide: Vec<f32> = (0..n * model.n_outputs()).map(|i| (i % 1999) as f32 * 0.095 - 100.0).collect();
    let cpu = values(model.predict_with_base_margin(frame, &wide, PredictOutput::Value).unwrap());
    let gpu = values(model.predict_with(forest, frame, PredictOutput::Value, Some(&wide)).unwrap());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&cpu) == bits(&gpu), "{what}: values from a wide base margin differ");
}

#[test]
fn gpu_predictions_equal_cpu_predictions() {
    if !gpu() {
        return;
    }
    // 600k rows: several streamed chunks, the last one partial.
    let (frame, y) = random_data(600_001, 9, 21);
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    for json in [
        r#"{"n_estimators": 30, "max_depth": 6}"#,
        r#"{"n_estimators": 12, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 63}"#,
        r#"{"n_estimators": 5, "max_depth": 12}"#,
        // Over 254 distinct thresholds on a feature: u16 bins.
        r#"{"n_estimators": 40, "max_depth": 8, "max_bin": 1024}"#,
    ] {
        let model = fit(json, &data, "cuda");
        assert_gpu_predicts_as_cpu(&model, &frame, json);
        if json.contains("1024") {
            assert!(GpuForest::new(&model.forest_spec()).unwrap().description.contains("u16 bins"));
        }
    }
    let labels: Vec<f32> = y.iter().map(|v| (v.abs() as usize % 4) as f32).collect();
    let multi = Dataset::new(frame.clone(), labels).unwrap();
    let model =
        fit(r#"{"n_estimators": 8, "max_depth": 5, "objective": "multi:softprob", "num_class": 4}"#, &multi, "cuda");
    assert_gpu_predicts_as_cpu(&model, &frame, "multiclass");
    let binary = Dataset::new(frame.clone(), y.iter().map(|v| (*v > 1.0) as u8 as f32).collect()).unwrap();
    let model = fit(r#"{"n_estimators": 8, "max_depth": 5, "objective": "binary:logistic"}"#, &binary, "cuda");
    assert_gpu_predicts_as_cpu(&model, &frame, "binary");
}

/// The batches of a streaming query: requests of many sizes from many threads at once, each
/// lent a streamer from the pool (grown, or rebuilt larger, as requests come), still score as
/// the CPU does.
#[test]
fn concurrent_requests_of_every_size_score_as_the_cpu() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(600_001, 9, 22);
    let model = fit(r#"{"n_estimators": 30, "max_depth": 6}"#, &Dataset::new(frame.clone(), y).unwrap(), "cuda");
    let forest = GpuForest::new(&model.forest_spec()).unwrap();
    let cpu = values(model.predict(&frame, PredictOutput::Margin).unwrap());
    let sizes = [1, 999, 32_768, 40_000, 100_001, 262_145, 600_001];
    std::thread::scope(|s| {
        for t in 0..12 {
            let (frame, model, forest, cpu) = (&frame, &model, &forest, &cpu);
            s.spawn(move || {
                for round in 0..6 {
                    let len = sizes[(t + round * 5) % sizes.len()];
                    let start = (t * 7_919 + round * 104_729) % (frame.n_rows() - len + 1);
                    let part = frame.row_range(start, len);
                    let got = values(model.predict_with(forest, &part, PredictOutput::Margin, None).unwrap());
                    let want = &cpu[start..start + len];
                    assert!(
                        got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "thread {t}, rows {start}..{}: GPU margins differ from the CPU's",
                        start + len
                    );
                }
            });
        }
    });
}

#[test]
fn gpu_predictions_with_categorical_splits_equal_cpu_predictions() {
    if !gpu() {
        return;
    }
    let data = categorical_data(50_000, 3);
    for json in [
        r#"{"n_estimators": 10, "max_depth": 5, "max_cat_to_onehot": 1}"#,
        r#"{"n_estimators": 10, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 40}"#,
    ] {
        let model = fit(json, &data, "cuda");
        assert_gpu_predicts_as_cpu(&model, data.features(), json);
    }
}

#[test]
fn wide_models_read_rows_from_global_memory() {
    if !gpu() {
        return;
    }
    // 1500 features: two rows per thread of every feature no longer fit in shared memory.
    let (frame, y) = random_data(4_000, 1500, 4);
    let model = fit(r#"{"n_estimators": 6, "max_depth": 6}"#, &Dataset::new(frame.clone(), y).unwrap(), "cpu");
    assert!(cuda::GpuForest::with_quantisation(&model.forest_spec(), false)
        .unwrap()
        .description
        .contains("outside shared memory"));
    // 3,000 features of u8 bins do not fit either: the forest is scored on floats.
    let (frame, y) = random_data(2_000, 3000, 5);
    let wide = fit(r#"{"n_estimators": 3, "max_depth": 4}"#, &Dataset::new(frame.clone(), y).unwrap(), "cpu");
    assert!(GpuForest::new(&wide.forest_spec()).unwrap().description.contains("on floats"));
    assert_gpu_predicts_as_cpu(&wide, &frame, "3000 features");
    assert_gpu_predicts_as_cpu(&model, &frame, "1500 features");
}

#[test]
fn continued_training_on_the_gpu_is_the_whole_fit() {
    if !gpu() {
        return;
    }
    // The second fit starts every row from the first model's margins (computed on the CPU),
    // as a base margin: 8 + 8 rounds on the GPU are the 16-round GPU fit, and the CPU's.
    let (frame, y) = random_data(30_000, 6, 21);
    let binary: Vec<f32> = y.iter().map(|&v| (v > 1.5) as u8 as f32).collect();
    let data = Dataset::new(frame, binary).unwrap();
    let json = |n: usize| format!(r#"{{"objective": "binary:logistic", "n_estimators": {n}, "max_depth": 6}}"#);
    let first = fit(&json(8), &data, "cuda");
    let mut more = TrainConfig::from_json(&json(8)).unwrap();
    more.device = serde_json::from_value(serde_json::Value::String("cuda".into())).unwrap();
    let joined = polars_gbt::Training::new(&more, &data).init_model(&first).run().unwrap();
    assert_same_trees(&fit(&json(16), &data, "cuda"), &joined, "continued on the GPU");
    assert_same_trees(&fit(&json(16), &data, "cpu"), &joined, "continued on the GPU against the CPU");
}

/// SHAP values (or interaction values) of `frame` through `forest`, with an optional per-row
/// starting margin.
fn shap(
    model: &Model,
    forest: &dyn polars_gbt::backend::Predictor,
    frame: &FeatureFrame,
    output: PredictOutput,
    base: Option<&[f32]>,
) -> Vec<f32> {
    values(model.predict_with(forest, frame, output, base).unwrap())
}

/// `got` against `want` within `rel` of the largest value (the GPU sums floats in no fixed
/// order; the CPU sums in f64).
fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale + rel * w.abs(),
            "{what}: value {i}: GPU {g}, expected {w} (scale {scale})"
        );
    }
}

/// The GPU's SHAP values against the CPU's exact TreeSHAP (the oracle, itself checked against
/// enumeration and against XGBoost and LightGBM): equal within float rounding, the bias bit
/// for bit, and each row's values summing to its margin. Interaction values on the first
/// `interaction_rows` rows.
fn assert_gpu_shap_as_cpu(model: &Model, frame: &FeatureFrame, small: &FeatureFrame, what: &str) {
    let forest = GpuForest::new(&model.forest_spec()).unwrap();
    let cpu_forest = FlatForest::new(&model.forest_spec());
    let (k, m) = (model.n_outputs(), model.features().len() + 1);
    let start: Vec<f32> = (0..frame.n_rows() * k).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
    for base in [None, Some(&start[..])] {
        let gpu = shap(model, &forest, frame, PredictOutput::Contrib, base);
        let cpu = shap(model, &cpu_forest, frame, PredictOutput::Contrib, base);
        assert_close(&gpu, &cpu, 1e-5, &format!("{what}: SHAP values"));
        for (g, c) in gpu.chunks(m).zip(cpu.chunks(m)) {
            assert_eq!(g[m - 1].to_bits(), c[m - 1].to_bits(), "{what}: the bias");
        }
        let margin = values(match base {
            Some(b) => model.predict_with_base_margin(frame, b, PredictOutput::Margin).unwrap(),
            None => model.predict(frame, PredictOutput::Margin).unwrap(),
        });
        let sums: Vec<f32> = gpu.chunks(m).map(|c| c.iter().map(|&v| v as f64).sum::<f64>() as f32).collect();
        assert_close(&sums, &margin, 1e-5, &format!("{what}: sums against margins"));
    }
    let gpu = shap(model, &forest, small, PredictOutput::Interaction, None);
    let cpu = shap(model, &cpu_forest, small, PredictOutput::Interaction, None);
    assert_close(&gpu, &cpu, 1e-5, &format!("{what}: interaction values"));
}

#[test]
fn gpu_shap_values_equal_cpu_shap_values() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(100_003, 9, 31);
    let (small, _) = random_data(2_001, 9, 32);
    let data = Dataset::new(frame.clone(), y.clone()).unwrap();
    for json in [
        r#"{"n_estimators": 30, "max_depth": 6}"#,
        // Deep, uneven trees that split features again below themselves.
        r#"{"n_estimators": 6, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 255}"#,
    ] {
        let model = fit(json, &data, "cuda");
        assert_gpu_shap_as_cpu(&model, &frame, &small, json);
    }
    let labels: Vec<f32> = y.iter().map(|v| (v.abs() as usize % 4) as f32).collect();
    let multi = Dataset::new(frame.clone(), labels).unwrap();
    let model =
        fit(r#"{"n_estimators": 6, "max_depth": 5, "objective": "multi:softprob", "num_class": 4}"#, &multi, "cuda");
    assert_gpu_shap_as_cpu(&model, &frame, &small, "multiclass");
    let cats = categorical_data(50_000, 7);
    let model = fit(r#"{"n_estimators": 20, "max_depth": 6, "max_cat_to_onehot": 1}"#, &cats, "cuda");
    assert_gpu_shap_as_cpu(&model, cats.features(), cats.features(), "categorical");
    // Values gathered straight in global memory (as for models too wide for a tile in shared
    // memory), and rows streamed in several chunks.
    let model = fit(r#"{"n_estimators": 10, "max_depth": 6}"#, &data, "cuda");
    std::env::set_var("POLARS_GBT_SHAP_MODE", "global");
    std::env::set_var("POLARS_GBT_SHAP_CHUNK_ROWS", "30001");
    assert_gpu_shap_as_cpu(&model, &frame, &small, "global memory, chunks");
    std::env::remove_var("POLARS_GBT_SHAP_MODE");
    std::env::remove_var("POLARS_GBT_SHAP_CHUNK_ROWS");
}

/// Imported models and their own libraries' SHAP values (tests/fixtures/shap/make.py):
/// XGBoost multiclass with partition splits on a categorical feature, LightGBM regression with
/// a categorical feature; missing values in every column.
fn imported_shap_fixtures() -> Vec<(&'static str, Model, FeatureFrame, Vec<f32>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/shap");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let numbers = |text: String| -> Vec<Vec<f32>> {
        text.lines()
            .map(|l| l.split(',').map(|v| if v.is_empty() { f32::NAN } else { v.parse().unwrap() }).collect())
            .collect()
    };
    let rows = numbers(read("rows.csv"));
    let frame = FeatureFrame::new(
        (0..rows[0].len()).map(|j| column(&format!("f{j}"), rows.iter().map(|r| r[j]).collect())).collect(),
    )
    .unwrap();
    let flat = |name| numbers(read(name)).concat();
    vec![
        (
            "XGBoost",
            Model::from_xgboost(read("xgboost.json").as_bytes()).unwrap(),
            frame.clone(),
            flat("xgboost-contribs.csv"),
        ),
        ("LightGBM", Model::from_lightgbm(&read("lightgbm.txt")).unwrap(), frame, flat("lightgbm-contribs.csv")),
    ]
}

#[test]
fn shap_values_of_imported_models_equal_their_libraries_on_the_cpu_and_the_gpu() {
    for (what, model, frame, theirs) in imported_shap_fixtures() {
        let ours = values(model.predict(&frame, PredictOutput::Contrib).unwrap());
        assert_close(&ours, &theirs, 1e-5, &format!("{what} on the CPU"));
        if gpu() {
            let ours =
                shap(&model, &GpuForest::new(&model.forest_spec()).unwrap(), &frame, PredictOutput::Contrib, None);
            assert_close(&ours, &theirs, 1e-5, &format!("{what} on the GPU"));
        }
    }
}

/// Rows `rows` of a wide, mostly-null problem (the GPU lays it out as compressed rows):
/// 40 features, each present in 1 row in 12, the label from the first few.
fn mostly_null(rows: &[usize]) -> Dataset {
    let value = |f: usize, r: usize| {
        let h = polars_gbt::random::hash64(f as u64, r as u64);
        h.is_multiple_of(12).then(|| ((h >> 20) % 1000) as f32 / 100.0)
    };
    let columns = (0..40)
        .map(|f| {
            let values: Vec<Option<f32>> = rows.iter().map(|&r| value(f, r)).collect();
            FeatureColumn::new(format!("f{f}"), vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
        })
        .collect();
    let label = rows
        .iter()
        .map(|&r| {
            let s: f32 = (0..4).map(|f| value(f, r).unwrap_or(-2.0)).sum();
            (s > 0.0) as u8 as f32
        })
        .collect();
    Dataset::new(FeatureFrame::new(columns).unwrap(), label).unwrap()
}

/// GPU workers of a distributed fit (threads sharing this GPU, joined by the TCP ring on
/// localhost) give, every one of them, the model of one GPU fit on all rows, byte for byte.
#[test]
fn distributed_gpu_fits_give_one_gpus_bytes() {
    use common::distributed::{dataset, rows, train_shards};

    if !gpu() {
        return;
    }
    let n = 6000;
    let all = Arc::new(rows(n, 21));
    let cases = [
        // (parameters, mostly-null data, sample weights)
        (r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 5, "seed": 2}"#, false, true),
        (
            r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 6, "subsample": 0.7,
                "colsample_bynode": 0.7, "max_cat_to_onehot": 1, "seed": 4}"#,
            false,
            true,
        ),
        (
            r#"{"objective": "reg:squarederror", "n_estimators": 5, "grow_policy": "lossguide", "max_leaves": 16}"#,
            false,
            true,
        ),
        (r#"{"objective": "multi:softprob", "num_class": 2, "n_estimators": 3, "max_depth": 4}"#, false, true),
        (r#"{"objective": "binary:logistic", "n_estimators": 5, "max_depth": 6}"#, true, true),
        // Leaves refit to quantiles of every worker's residuals (read back from each GPU).
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 4, "max_depth": 5, "subsample": 0.8}"#, false, false),
        (r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.3, 0.8], "n_estimators": 3}"#, false, false),
    ];
    // Uneven shards: one of 13 rows, one worker holding two runs that are not adjacent.
    let shards = vec![vec![(0u64, 2500u64), (5990, 10)], vec![(2500, 13)], vec![(2513, 3477)]];
    for (json, sparse, weighted) in cases {
        let mut cfg = TrainConfig::from_json(json).unwrap();
        cfg.device = polars_gbt::Device::Cuda;
        let make = {
            let all = all.clone();
            move |rows: &[usize]| if sparse { mostly_null(rows) } else { dataset(&all, rows, weighted) }
        };
        let want = train(&cfg, &make(&(0..n).collect::<Vec<_>>()), &[]).unwrap().to_bytes();
        let models = train_shards(n, shards.clone(), cfg, make);
        let errors: Vec<String> = models.iter().filter_map(|m| m.as_ref().err().map(|e| e.to_string())).collect();
        assert!(errors.is_empty(), "{json}: {errors:?}");
        for m in models {
            assert!(m.unwrap().to_bytes() == want, "a GPU worker's model differs from one GPU's for {json}");
        }
    }
}

/// How many GPUs the driver sees, for the tests over several. On the two-GPU machine
/// `POLARS_GBT_REQUIRE_GPUS=2` turns fewer into a failure rather than a skip.
fn gpus(needed: usize) -> bool {
    let seen = if gpu() { polars_gbt::backend::cuda::runtime::device_count().unwrap_or(0) } else { 0 };
    let required = std::env::var("POLARS_GBT_REQUIRE_GPUS").ok().and_then(|v| v.parse::<usize>().ok());
    if seen < needed {
        assert!(required.is_none_or(|r| r < needed), "{needed} GPUs are required here, the driver sees {seen}");
        eprintln!("{seen} GPU(s), the checks over {needed} skipped");
    }
    seen >= needed
}

/// Binary fits of up to 200 rounds on the GPU that stop 3 rounds after the best validation
/// logloss: the n_gpus tests' early-stopping configuration.
fn early_stopping_on_the_gpu() -> TrainConfig {
    let mut cfg = TrainConfig::from_json(
        r#"{"objective": "binary:logistic", "n_estimators": 200, "max_depth": 8, "learning_rate": 0.5,
            "early_stopping_rounds": 3, "eval_metric": ["logloss"]}"#,
    )
    .unwrap();
    cfg.device = polars_gbt::Device::Cuda;
    cfg
}

/// A model's JSON without the recorded GPU count (which must be `n`), for comparing a fit
/// over several GPUs with one GPU's.
fn json_without_gpu_count(model: &Model, n: usize) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&model.to_json()).unwrap();
    let config = v["model"]["config"].as_object_mut().unwrap();
    assert_eq!(config.remove("n_gpus").and_then(|g| g.as_u64()), (n > 1).then_some(n as u64));
    serde_json::to_string(&v).unwrap()
}

/// `n_gpus=2`: each GPU of the process bins and grows on its half of the rows, histograms
/// summed in place through NCCL; the model is one GPU's, byte for byte (the GPU count aside).
#[test]
fn several_gpus_of_one_process_give_one_gpus_model() {
    use common::distributed::{dataset, rows};

    if !gpus(2) {
        return;
    }
    let n = 20_000;
    let all = rows(n, 33);
    let every: Vec<usize> = (0..n).collect();
    let weighted = dataset(&all, &every, true);
    let plain = dataset(&all, &every, false);
    let sparse = mostly_null(&every);
    // Query groups of uneven sizes: no shard may cut one.
    let mut sizes = vec![1, 2, 3, 2500];
    while sizes.iter().sum::<usize>() < n {
        let s = (7 + sizes.len() * 13 % 90).min(n - sizes.iter().sum::<usize>());
        sizes.push(s);
    }
    let (frame, y) = random_data(n, 6, 8);
    let relevance: Vec<f32> = y.iter().map(|v| v.clamp(0.0, 4.0).floor()).collect();
    let ranked = Dataset::new(frame, relevance).unwrap().with_group_sizes(&sizes).unwrap();
    let categorical = categorical_data(n, 9);
    let cases: Vec<(&str, &Dataset)> = vec![
        (r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 6, "seed": 2}"#, &weighted),
        (
            r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 7, "subsample": 0.7,
                "colsample_bynode": 0.7, "max_cat_to_onehot": 1, "seed": 4}"#,
            &weighted,
        ),
        (r#"{"objective": "reg:squarederror", "n_estimators": 5, "max_depth": 6}"#, &categorical),
        (
            r#"{"objective": "reg:squarederror", "n_estimators": 5, "grow_policy": "lossguide", "max_leaves": 24}"#,
            &plain,
        ),
        (r#"{"objective": "multi:softprob", "num_class": 2, "n_estimators": 3, "max_depth": 4}"#, &weighted),
        (r#"{"objective": "binary:logistic", "n_estimators": 5, "max_depth": 6}"#, &sparse),
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 4, "max_depth": 5, "subsample": 0.8}"#, &plain),
        (r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.3, 0.8], "n_estimators": 3}"#, &plain),
        (r#"{"objective": "rank:ndcg", "n_estimators": 5, "max_depth": 5}"#, &ranked),
    ];
    for (json, data) in cases {
        let one = fit(json, data, "cuda");
        let mut cfg = TrainConfig::from_json(json).unwrap();
        cfg.device = polars_gbt::Device::Cuda;
        cfg.n_gpus = 2;
        let two = train(&cfg, data, &[]).unwrap_or_else(|e| panic!("n_gpus=2 fit of {json} failed: {e}"));
        assert!(
            json_without_gpu_count(&two, 2) == json_without_gpu_count(&one, 1),
            "n_gpus=2 differs from one GPU for {json}"
        );
    }
    // Evaluation sets are shared out too; early stopping stops every GPU in the same round.
    // Rows of their own (the training rows' generator with another seed).
    let valid = dataset(&rows(3000, 34), &(0..3000).collect::<Vec<_>>(), false);
    let mut cfg = early_stopping_on_the_gpu();
    let one = train(&cfg, &plain, &[("valid", &valid)]).unwrap();
    cfg.n_gpus = 2;
    let mut rounds = 0;
    let two = polars_gbt::Training::new(&cfg, &plain)
        .evals(&[("valid", &valid)])
        .callback(&mut |_| {
            rounds += 1;
            Ok(true)
        })
        .run()
        .unwrap();
    assert!(one.best_iteration().is_some_and(|b| b + 3 < 199), "early stopping should stop early");
    // The callback ran on GPU 0 once a round: to the best round and the 3 after it.
    assert_eq!(rounds, one.best_iteration().unwrap() + 4);
    assert!(json_without_gpu_count(&two, 2) == json_without_gpu_count(&one, 1), "early-stopped fit differs");
    // A callback that stops the fit stops every GPU.
    let mut seen = 0;
    let stopped = polars_gbt::Training::new(&cfg, &plain)
        .evals(&[("valid", &valid)])
        .callback(&mut |_| {
            seen += 1;
            Ok(seen < 2)
        })
        .run()
        .unwrap();
    assert_eq!(stopped.num_rounds(), 2);
    // More GPUs than the driver sees is an error naming the parameter.
    cfg.early_stopping_rounds = None;
    cfg.n_gpus = 64;
    let err = train(&cfg, &plain, &[]).unwrap_err().to_string();
    assert!(err.contains("n_gpus") && err.contains("64"), "{err}");
}

/// A GPU whose share of the fit fails (here: a bad label in its rows only) ends the fit with
/// its own error, at once: the other GPU, waiting at an exchange, stops instead of hanging.
#[test]
fn a_gpu_whose_fit_fails_ends_the_fit_with_its_error() {
    use common::distributed::{dataset, rows};

    if !gpus(2) {
        return;
    }
    let n = 20_000;
    let good = dataset(&rows(n, 35), &(0..n).collect::<Vec<_>>(), false);
    let mut label = good.label().to_vec();
    label[n - 1] = 3.0;
    let bad = Dataset::new(good.features().clone(), label).unwrap();
    let mut cfg =
        TrainConfig::from_json(r#"{"objective": "binary:logistic", "n_estimators": 5, "max_depth": 5}"#).unwrap();
    cfg.device = polars_gbt::Device::Cuda;
    cfg.n_gpus = 2;
    let clock = std::time::Instant::now();
    let err = train(&cfg, &bad, &[]).unwrap_err().to_string();
    assert!(err.contains("needs labels in [0, 1]"), "{err}");
    assert!(clock.elapsed() < std::time::Duration::from_secs(60), "took {:?}", clock.elapsed());
    // Both GPUs are usable afterwards.
    let model = train(&cfg, &good, &[]).unwrap();
    assert_eq!(model.num_trees(), 5);
}

/// Workers of a distributed fit in processes of their own (Dask GPU workers), each on one GPU:
/// their TCP ring starts an NCCL communicator over their GPUs (`device_collective`), which
/// then carries every sum, and the model is one GPU's, byte for byte. Here two threads stand
/// for the two processes, on GPUs 0 and 1.
#[test]
fn workers_on_a_ring_sum_through_nccl_and_give_one_gpus_model() {
    use common::distributed::{dataset, on_ring, rows, rows_of};
    use polars_gbt::collective::{Collective, RowSpans, Shard};

    if !gpus(2) {
        return;
    }
    let n = 20_000;
    let all = Arc::new(rows(n, 35));
    let json = r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 6, "device": "cuda", "seed": 5}"#;
    let cfg = TrainConfig::from_json(json).unwrap();
    let want = json_without_gpu_count(&train(&cfg, &dataset(&all, &(0..n).collect::<Vec<_>>(), true), &[]).unwrap(), 1);
    let shards = [vec![(0u64, 12_000u64)], vec![(12_000, 8_000)]];
    let worker_all = all.clone();
    // Twice: the second fit uses the communicators the first left (kept by each worker for the
    // same workers), and gives the same model.
    let models = on_ring(2, move |ring| {
        let spans = shards[ring.rank()].clone();
        let data = dataset(&worker_all, &rows_of(&spans), true);
        let mut fits = Vec::new();
        for _ in 0..2 {
            let devices =
                polars_gbt::backend::device_collective(&cfg, ring, ring.rank(), std::time::Duration::from_secs(60))?
                    .expect("both workers train on a GPU with NCCL");
            assert!(devices.device_sums().is_some(), "the workers' collective sums on the devices");
            let shard = Shard { comm: &*devices, rows: RowSpans::new(spans.clone(), n as u64)?, evals: Vec::new() };
            fits.push(polars_gbt::Training::new(&cfg, &data).shard(&shard).run()?);
        }
        Ok(fits)
    });
    for m in models.into_iter().flat_map(|m| m.unwrap()) {
        assert_eq!(json_without_gpu_count(&m, 1), want, "a GPU worker's model differs from one GPU's");
    }
}

/// Rows the caller holds in GPU memory (`Model::predict_device`, what `Model.predict` does
/// with a cupy array): in C order as float64 and in Fortran order as float32, chunked
/// (`POLARS_GBT_DEVICE_CHUNK_ROWS` is not set: 2^20 rows a chunk, so 1.2M rows take two), they
/// score as the same rows from Arrow columns on the GPU, bit for bit; and pointers that are not
/// the caller's GPU memory are clear errors.
#[test]
fn device_rows_score_as_the_same_rows_from_columns() {
    use cudarc::driver::DevicePtr;
    use polars_gbt::prediction::{DeviceBinding, DeviceFloat, DeviceOut, DeviceRows};
    if !gpu() {
        return;
    }
    let n = 1_200_003;
    let (frame, y) = random_data(n, 7, 23);
    let nf = frame.n_features();
    let model = fit(r#"{"n_estimators": 20, "max_depth": 7}"#, &Dataset::new(frame.clone(), y).unwrap(), "cuda");
    let forest = GpuForest::new(&model.forest_spec()).unwrap();
    // The columns as FeatureColumn::read gives them, with infinities to be clamped.
    let mut columns = vec![vec![0f32; n]; nf];
    for (c, col) in frame.columns().iter().zip(columns.iter_mut()) {
        c.read(0, col);
    }
    let rt = cuda::runtime().unwrap();
    let stream = &rt.stream;
    // Float64 rows, the clamped extremes as the infinities they were (the kernel clamps them).
    let limit = f32::from_bits(f32::MAX.to_bits() - 1);
    let unclamped = |v: f32| if v.abs() == limit { f64::INFINITY.copysign(v as f64) } else { v as f64 };
    let c_order: Vec<f64> = (0..n * nf).map(|i| unclamped(columns[i % nf][i / nf])).collect();
    assert!(c_order.iter().any(|v| v.is_infinite()), "the data has no infinities to clamp");
    let f_order: Vec<f32> = columns.concat();
    let rows64 = stream.clone_htod(&c_order).unwrap();
    let rows32 = stream.clone_htod(&f_order).unwrap();
    let out = stream.alloc_zeros::<f32>(n * model.num_trees()).unwrap();
    stream.synchronize().unwrap();
    let (p64, p32, pout) = (rows64.device_ptr(stream).0, rows32.device_ptr(stream).0, out.device_ptr(stream).0);
    let c_rows =
        DeviceRows { ptr: p64, rows: n, cols: nf, row_stride: nf as i64, col_stride: 1, dtype: DeviceFloat::F64 };
    let f_rows =
        DeviceRows { ptr: p32, rows: n, cols: nf, row_stride: 1, col_stride: n as i64, dtype: DeviceFloat::F32 };
    let score = |rows: DeviceRows, output: PredictOutput, len: usize, index: bool| {
        let mut export = |_| Ok(DeviceBinding { rows, out: DeviceOut { ptr: pout, len, index }, wait_for: Vec::new() });
        model.predict_device(&forest, output, &mut export)
    };
    for (rows, what) in [(c_rows, "C order, f64"), (f_rows, "Fortran order, f32")] {
        score(rows, PredictOutput::Margin, n, false).unwrap();
        let got = stream.clone_dtoh(&out.slice(..n)).unwrap();
        let want = values(model.predict_with(&forest, &frame, PredictOutput::Margin, None).unwrap());
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}: margins differ");
        let trees = model.num_trees();
        score(rows, PredictOutput::Leaf, n * trees, true).unwrap();
        let got: Vec<u32> = stream.clone_dtoh(&out).unwrap().iter().map(|v| v.to_bits()).collect();
        match model.predict_with(&forest, &frame, PredictOutput::Leaf, None).unwrap() {
            Predictions::Index { values, .. } => assert!(got == values, "{what}: leaves differ"),
            other => panic!("leaves came as {other:?}"),
        }
    }
    // The wrong width or kind of output, the wrong number of columns: data errors.
    let e = score(c_rows, PredictOutput::Margin, n - 1, false).unwrap_err().to_string();
    assert!(e.contains("the output array holds"), "{e}");
    let e = score(DeviceRows { cols: nf - 1, ..c_rows }, PredictOutput::Margin, n, false).unwrap_err().to_string();
    assert!(e.contains(&format!("has {} columns but the model has {nf} features", nf - 1)), "{e}");
    // Host memory, memory past the allocation, and an address CUDA never gave out.
    let e = score(DeviceRows { ptr: c_order.as_ptr() as u64, ..c_rows }, PredictOutput::Margin, n, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not memory CUDA knows") || e.contains("host memory"), "{e}");
    let e = score(DeviceRows { rows: 40 * n, ..c_rows }, PredictOutput::Margin, 40 * n, false).unwrap_err().to_string();
    assert!(e.contains("past its allocation"), "{e}");
    let e = score(DeviceRows { ptr: 0x1000, ..f_rows }, PredictOutput::Margin, n, false).unwrap_err().to_string();
    assert!(e.starts_with("invalid data: ") && e.contains("not memory CUDA knows"), "{e}");
}

/// A dataset's rows handed out in batches of `size` (`Dataset::row_range`): a re-readable
/// source for `data::stream`.
struct RowBatches {
    data: Dataset,
    size: usize,
}

impl polars_gbt::data::BatchSource for RowBatches {
    fn n_rows(&mut self) -> polars_gbt::Result<Option<usize>> {
        Ok(Some(self.data.n_rows()))
    }

    fn pass(
        &mut self,
        each: &mut dyn FnMut(polars_gbt::data::Batch) -> polars_gbt::Result<()>,
    ) -> polars_gbt::Result<()> {
        let n = self.data.n_rows();
        for a in (0..n).step_by(self.size) {
            each(polars_gbt::data::Batch::new(self.data.row_range(a, self.size.min(n - a))?))?;
        }
        Ok(())
    }
}

/// A streamed fit (rows binned on the host as they stream, `data::stream`, no float column
/// ever whole) trains on the GPU from its bins: the GPU fit of the collected rows' model bytes,
/// and the CPU's trees. Seven features (rows re-pitched to whole words on the device) and eight
/// (uploaded as they are); 300k rows, so the cut points come from a sample by global row.
#[test]
fn streamed_fits_train_on_the_gpu_as_the_collected_rows() {
    if !gpu() {
        return;
    }
    for nf in [7, 8] {
        let (frame, y) = random_data(300_000, nf, 21 + nf as u64);
        let data = Dataset::new(frame, y).unwrap();
        let json = r#"{"n_estimators": 6, "max_depth": 6, "max_bin": 64, "seed": 3, "objective": "reg:squarederror"}"#;
        let collected = fit(json, &data, "cuda");
        let mut cfg = TrainConfig::from_json(json).unwrap();
        cfg.device = serde_json::from_value(serde_json::Value::String("cuda".into())).unwrap();
        let params = polars_gbt::data::StreamParams {
            max_bin: cfg.max_bin,
            seed: cfg.seed,
            missing: None,
            scale_pos_weight: 1.0,
        };
        let streamed_data =
            polars_gbt::data::stream_dataset(&mut RowBatches { data: data.clone(), size: 65_537 }, &params).unwrap();
        let streamed = train(&cfg, &streamed_data, &[]).unwrap();
        assert!(streamed.to_bytes() == collected.to_bytes(), "{nf} features: the streamed GPU fit differs");
        assert_same_trees(&fit(json, &streamed_data, "cpu"), &streamed, &format!("{nf} features, streamed"));
    }
}

/// A streamed fit on one GPU whose bins fit there bins each batch on the GPU as it streams
/// (`stream_bins.rs`: the batch's columns uploaded in Arrow's layout, binned into their rows,
/// freed), never holding the bins on the host: the model bytes of the collected GPU fit, for
/// bins of one byte (rows of 7 features padded to words, 8 not), two bytes (`max_bin` 1024),
/// categorical and mostly-null data. The bins belong to the fit that takes them; with
/// `max_device_memory` below them, the host bins the rows (to be paged) instead.
#[test]
fn streamed_batches_binned_on_the_gpu_train_as_the_collected_rows() {
    use polars_gbt::backend::Backend;
    use polars_gbt::data::FeatureCuts;

    if !gpu() {
        return;
    }
    let engine = Backend::Cuda.engine();
    let dense = |nf: usize| {
        let (frame, y) = random_data(300_000, nf, 50 + nf as u64);
        Dataset::new(frame, y).unwrap()
    };
    let cases: Vec<(&str, Dataset)> = vec![
        (r#"{"n_estimators": 6, "max_depth": 6, "max_bin": 64, "seed": 3}"#, dense(7)),
        (r#"{"n_estimators": 5, "max_depth": 6, "subsample": 0.8, "seed": 5}"#, dense(8)),
        (r#"{"n_estimators": 4, "max_depth": 5, "max_bin": 1024}"#, dense(8)),
        (r#"{"n_estimators": 5, "max_depth": 6, "max_cat_to_onehot": 1}"#, categorical_data(200_000, 11)),
        (
            r#"{"n_estimators": 5, "max_depth": 6, "objective": "binary:logistic"}"#,
            mostly_null(&(0..200_000).collect::<Vec<_>>()),
        ),
    ];
    for (json, data) in cases {
        let collected = fit(json, &data, "cuda");
        let mut cfg = TrainConfig::from_json(json).unwrap();
        cfg.device = polars_gbt::Device::Cuda;
        let params = polars_gbt::data::StreamParams {
            max_bin: cfg.max_bin,
            seed: cfg.seed,
            missing: None,
            scale_pos_weight: 1.0,
        };
        let stream = |cfg: &TrainConfig| {
            let mut sink_for = |n: usize, cuts: &[FeatureCuts]| engine.stream_bins(cfg, n, cuts);
            let mut source = RowBatches { data: data.clone(), size: 65_537 };
            polars_gbt::data::stream_dataset_into(&mut source, &params, &mut sink_for, &mut |_| {}).unwrap()
        };
        let streamed = stream(&cfg);
        assert!(streamed.binned().unwrap().all.elsewhere.is_some(), "{json}: not binned on the GPU");
        let model = train(&cfg, &streamed, &[]).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert!(model.to_bytes() == collected.to_bytes(), "{json}: the fit of bins made on the GPU differs");
        let err = train(&cfg, &streamed, &[]).unwrap_err().to_string();
        assert!(err.contains("stream the data again"), "{err}");
        // Bins beyond max_device_memory are the host's, to be paged.
        cfg.max_device_memory = Some(40 << 20);
        let host = stream(&cfg);
        assert!(host.binned().unwrap().all.elsewhere.is_none(), "{json}: binned on the GPU beyond the limit");
    }
}

/// Bins that do not fit the GPU within `max_device_memory` stay in host memory and go to the
/// device a page of rows at a time, each pass over the rows (partition, histograms, margin
/// update, leaf refits) reading every page in turn: the model bytes are the in-core fit's,
/// from a stream (rows binned on the host as they come) and from collected columns (binned on
/// the host when they do not fit), for bins of one byte a row uploaded as they are (32
/// features) or re-pitched to whole words on the device (31), and of two bytes (15 features,
/// `max_bin` 1024); regression, L1 refits, binary with row sampling and loss-guided growth,
/// and vector leaves.
#[test]
fn paged_fits_train_as_in_core_fits() {
    if !gpu() {
        return;
    }
    use polars_gbt::backend::cuda::learner::GpuLearner;
    use polars_gbt::backend::cuda::placement::besides_bins_at_most;
    let n = 400_000;
    for (nf, max_bin) in [(32usize, 64usize), (31, 64), (15, 1024)] {
        let (frame, y) = random_data(n, nf, 40 + nf as u64);
        let mean = y.iter().sum::<f32>() / n as f32;
        let binary: Vec<f32> = y.iter().map(|&v| (v > mean) as u8 as f32).collect();
        let classes: Vec<f32> = y.iter().map(|&v| ((v > mean) as u8 + (v > mean + 0.5) as u8) as f32).collect();
        let cases = [
            (y.clone(), r#""objective": "reg:squarederror", "max_depth": 6"#),
            (y, r#""objective": "reg:absoluteerror", "max_depth": 5"#),
            (
                binary,
                r#""objective": "binary:logistic", "subsample": 0.7, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0"#,
            ),
            (
                classes,
                r#""objective": "multi:softprob", "num_class": 3, "multi_strategy": "multi_output_tree", "max_depth": 4"#,
            ),
        ];
        for (label, params) in cases {
            let data = Dataset::new(frame.clone(), label).unwrap();
            let json = format!(r#"{{"n_estimators": 3, "max_bin": {max_bin}, "seed": 5, {params}}}"#);
            let what = format!("{nf} features, {params}");
            let in_core = fit(&json, &data, "cuda");
            let mut cfg = TrainConfig::from_json(&json).unwrap();
            cfg.device = serde_json::from_value(serde_json::Value::String("cuda".into())).unwrap();
            let cuts = polars_gbt::data::cuts::compute_cuts(data.features(), None, max_bin, cfg.seed).unwrap();
            let width = if max_bin > 255 { 2 } else { 1 };
            let bins = n * nf.next_multiple_of(4 / width) * width;
            // A third of the bins fit beside the fit's other buffers.
            cfg.max_device_memory = Some((besides_bins_at_most(n, &cuts, &cfg) + bins / 3) as u64);
            let collected = train(&cfg, &data, &[]).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(collected.to_bytes() == in_core.to_bytes(), "{what}: the paged fit of collected columns differs");
            let stream =
                polars_gbt::data::StreamParams { max_bin, seed: cfg.seed, missing: None, scale_pos_weight: 1.0 };
            let streamed_data =
                polars_gbt::data::stream_dataset(&mut RowBatches { data: data.clone(), size: 100_003 }, &stream)
                    .unwrap();
            let streamed = train(&cfg, &streamed_data, &[]).unwrap();
            assert!(streamed.to_bytes() == in_core.to_bytes(), "{what}: the paged streamed fit differs");
            if json.contains("reg:squarederror") {
                // The learner did page: several pages, fewer kept on the device.
                let setup = common::lockstep::Setup::new(&json, &data);
                let rt = cuda::runtime().unwrap();
                let rows = streamed_data.binned().unwrap();
                let learner = GpuLearner::from_binned(
                    &rt,
                    &streamed_data,
                    rows,
                    setup.grow.clone(),
                    &cfg,
                    &StartMargin::Rows(setup.margin.clone()),
                    None,
                    &Solo,
                )
                .unwrap();
                let (pages, slots) = learner.paging().unwrap_or_else(|| panic!("{what}: not paged"));
                assert!(pages >= 3 && slots >= 2 && slots < pages, "{what}: {pages} pages, {slots} slots");
            }
        }
    }
}

/// A streamed fit over two GPUs of the process: the rows are binned on the host as they
/// stream, and each GPU uploads its share of them where they lie (no copy of the bins); the
/// model is one GPU's of the collected rows, with streamed evaluation sets and early stopping.
#[test]
fn streamed_fits_over_several_gpus_give_one_gpus_model() {
    use common::distributed::{dataset, rows};

    if !gpus(2) {
        return;
    }
    // Past 2^18 rows: the cut points come from a sample drawn by global row.
    let n = 300_000;
    let every: Vec<usize> = (0..n).collect();
    let all = rows(n, 35);
    let weighted = dataset(&all, &every, true);
    let categorical = categorical_data(n, 10);
    let sparse = mostly_null(&every);
    let cases: Vec<(&str, &Dataset)> = vec![
        (
            r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 7, "subsample": 0.7,
                "colsample_bynode": 0.7, "max_cat_to_onehot": 1, "seed": 4}"#,
            &weighted,
        ),
        (r#"{"objective": "reg:squarederror", "n_estimators": 5, "max_depth": 6}"#, &categorical),
        (r#"{"objective": "binary:logistic", "n_estimators": 5, "max_depth": 6}"#, &sparse),
        // Leaves refit over both GPUs' residuals (unit weights: fractional ones are not
        // distributed yet).
        (r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.3, 0.8], "n_estimators": 3}"#, &categorical),
    ];
    for (json, data) in cases {
        let one = fit(json, data, "cuda");
        let mut cfg = TrainConfig::from_json(json).unwrap();
        cfg.device = polars_gbt::Device::Cuda;
        cfg.n_gpus = 2;
        let stream = polars_gbt::data::StreamParams {
            max_bin: cfg.max_bin,
            seed: cfg.seed,
            missing: None,
            scale_pos_weight: 1.0,
        };
        let streamed =
            polars_gbt::data::stream_dataset(&mut RowBatches { data: data.clone(), size: 65_537 }, &stream).unwrap();
        let two = train(&cfg, &streamed, &[]).unwrap_or_else(|e| panic!("streamed n_gpus=2 fit of {json} failed: {e}"));
        assert!(
            json_without_gpu_count(&two, 2) == json_without_gpu_count(&one, 1),
            "the streamed n_gpus=2 fit differs from one GPU's for {json}"
        );
    }
    let valid = dataset(&rows(5000, 36), &(0..5000).collect::<Vec<_>>(), true);
    let mut cfg = early_stopping_on_the_gpu();
    let one = train(&cfg, &weighted, &[("valid", &valid)]).unwrap();
    assert!(one.best_iteration().is_some_and(|b| b + 3 < 199), "early stopping should stop early");
    let stream =
        polars_gbt::data::StreamParams { max_bin: cfg.max_bin, seed: cfg.seed, missing: None, scale_pos_weight: 1.0 };
    let streamed =
        polars_gbt::data::stream_dataset(&mut RowBatches { data: weighted.clone(), size: 100_000 }, &stream).unwrap();
    let mut source = RowBatches { data: valid.clone(), size: 1_111 };
    let streamed_valid = polars_gbt::data::stream_eval_set(&mut source, &streamed, None, "valid", &mut |_| {}).unwrap();
    cfg.n_gpus = 2;
    let two = train(&cfg, &streamed, &[("valid", &streamed_valid)]).unwrap();
    assert!(json_without_gpu_count(&two, 2) == json_without_gpu_count(&one, 1), "the early-stopped fit differs");
}

/// Vector-leaf trees (`multi_strategy="multi_output_tree"`): each output's histograms are built
/// on the GPU and each level's splits searched there with the CPU's arithmetic (on the host,
/// as the CPU searches them, with categorical features), so the GPU grows the CPU's trees:
/// several targets, multiclass, categorical and mostly-null data, loss-guided growth,
/// sampling, regularisation, constraints and leaf refits. The GPU scores them and explains
/// them (SHAP) as the CPU. A fit over several GPUs says it cannot grow them.
#[test]
fn vector_leaf_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let vector = |json: &str| format!(r#"{{"multi_strategy": "multi_output_tree", {json}}}"#);
    let (frame, y) = random_data(40_000, 8, 31);
    let second: Vec<f32> = y.iter().map(|v| (v * 1.7).sin()).collect();
    let third: Vec<f32> = y.iter().enumerate().map(|(i, v)| v * 0.5 - (i % 3) as f32).collect();
    let labels: Vec<f32> = y.iter().chain(&second).chain(&third).copied().collect();
    let targets = Dataset::with_labels(frame.clone(), labels.into(), 3).unwrap();
    let weighted = targets.clone().with_weight((0..40_000).map(|i| 0.5 + (i % 5) as f32 * 0.25).collect()).unwrap();
    let classes = |label: &[f32]| -> Vec<f32> {
        let mut sorted = label.to_vec();
        sorted.sort_by(f32::total_cmp);
        let edges = [sorted.len() / 4, sorted.len() / 2, 3 * sorted.len() / 4].map(|i| sorted[i]);
        label.iter().map(|v| edges.iter().filter(|&&e| *v > e).count() as f32).collect()
    };
    let multiclass = Dataset::new(frame.clone(), classes(&y)).unwrap();
    let cat = categorical_data(30_000, 12);
    let cat = Dataset::new(cat.features().clone(), classes(cat.label())).unwrap();
    let sparse = sparse_data(30_000, 13);
    // With a categorical column the search runs on the host, compressed rows' missing slots
    // filled on the device first.
    let mut with_category = sparse.features().columns().to_vec();
    let codes = (0..30_000i32).map(|i| (i % 9 != 0).then_some(i % 5)).collect();
    with_category
        .push(FeatureColumn::new("c", vec![dictionary(codes, (0..5).map(|c| format!("k{c}")).collect())]).unwrap());
    let sparse_cat = Dataset::new(FeatureFrame::new(with_category).unwrap(), classes(sparse.label())).unwrap();
    let sparse = Dataset::new(sparse.features().clone(), classes(sparse.label())).unwrap();
    let softprob = r#""objective": "multi:softprob", "num_class": 4"#;
    let cases: Vec<(String, &Dataset)> = vec![
        (vector(r#""n_estimators": 8, "max_depth": 6"#), &targets),
        (vector(r#""n_estimators": 6, "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 31"#), &targets),
        (
            vector(
                r#""n_estimators": 6, "max_depth": 6, "subsample": 0.7, "colsample_bytree": 0.8,
                   "colsample_bynode": 0.6, "seed": 5"#,
            ),
            &targets,
        ),
        (
            vector(
                r#""n_estimators": 6, "max_depth": 7, "min_child_weight": 20, "gamma": 0.3, "reg_alpha": 1,
                   "reg_lambda": 3, "max_delta_step": 0.7, "monotone_constraints": {"x0": 1}"#,
            ),
            &targets,
        ),
        (vector(r#""n_estimators": 6, "max_depth": 5"#), &weighted),
        (vector(r#""n_estimators": 5, "max_depth": 5, "objective": "reg:absoluteerror""#), &targets),
        (vector(&format!(r#""n_estimators": 6, "max_depth": 6, {softprob}"#)), &multiclass),
        (vector(&format!(r#""n_estimators": 6, "max_depth": 6, {softprob}"#)), &cat),
        (vector(&format!(r#""n_estimators": 6, "max_depth": 6, "max_cat_to_onehot": 64, {softprob}"#)), &cat),
        (vector(&format!(r#""n_estimators": 6, "max_depth": 6, {softprob}"#)), &sparse),
        (vector(&format!(r#""n_estimators": 4, "max_depth": 6, {softprob}"#)), &sparse_cat),
    ];
    let mut first = None;
    for (json, data) in &cases {
        let cpu = fit(json, data, "cpu");
        assert_same_trees(&cpu, &fit(json, data, "cuda"), json);
        first.get_or_insert(cpu);
    }
    let model = first.unwrap();
    assert_gpu_predicts_as_cpu(&model, &frame, "vector leaves");
    let (small, _) = random_data(500, 8, 33);
    assert_gpu_shap_as_cpu(&model, &frame, &small, "vector leaves");
    let cfg = TrainConfig::from_json(&vector(r#""n_estimators": 2, "n_gpus": 2, "device": "cuda""#)).unwrap();
    let e = train(&cfg, &targets, &[]).unwrap_err().to_string();
    assert!(e.contains("multi_output_tree") && e.contains("not over several GPUs"), "{e}");
}

/// Wide dense data (more features than a batch of columns on the device, 256) is binned a
/// batch of features at a time, each batch's cut points computed on the device: the CPU's
/// trees, with and without sample weights (which weigh the cut points' sample).
#[test]
fn wide_fits_bin_their_columns_in_batches_as_the_cpu_bins_them() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(30_000, 600, 41);
    let weights: Vec<f32> = (0..y.len()).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
    let json = r#"{"n_estimators": 5, "max_depth": 6, "objective": "reg:squarederror"}"#;
    let plain = Dataset::new(frame.clone(), y.clone()).unwrap();
    assert_same_trees(&fit(json, &plain, "cpu"), &fit(json, &plain, "cuda"), "600 features");
    let weighted = Dataset::new(frame, y).unwrap().with_weight(weights).unwrap();
    assert_same_trees(&fit(json, &weighted, "cpu"), &fit(json, &weighted, "cuda"), "600 features, weighted");
}
