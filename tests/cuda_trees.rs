//! The CUDA backend's training against the CPU oracle. With integer-quantised gradients both
//! backends sum the same integers, so they must grow the same trees: the same splits and
//! bitwise the same leaf values, for every objective, weights, leaf refits, ranking,
//! constraints and vector leaves; continued training; 16 rebuilds and concurrent fits giving
//! the same bytes. These tests need a GPU (`scripts/gpu-build.sh` builds them as
//! `.gpu/cuda_trees_tests` to run on one: docs/benchmarks.md); without one they skip, but for
//! the check that `device="cuda"` fails cleanly and `"auto"` falls back, which runs everywhere.
#![cfg(feature = "cuda")]

mod common;

use common::gpu::{
    assert_gpu_predicts_as_cpu, assert_gpu_shap_as_cpu, assert_same_trees, categorical_data, dictionary, fit, gpu,
    random_data, sparse_data,
};
use polars_gbt::{train, Dataset, Error, FeatureColumn, FeatureFrame, Model, TrainConfig};

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
    // src/math.rs and its twin kernels/math.cuh identically: the same trees, bit for bit,
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
