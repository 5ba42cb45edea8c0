//! Fits over several GPUs: distributed GPU workers on a TCP ring, `n_gpus` GPUs of one process
//! summing through NCCL (in-core and streamed, with early stopping), ring workers that start an
//! NCCL communicator, and a GPU whose share fails: every one gives one GPU's model, byte for
//! byte, or its error at once. These tests need a GPU (`scripts/gpu-build.sh` builds them as
//! `.gpu/cuda_gpus_tests` to run on one: docs/benchmarks.md); without one they skip; the tests
//! over several GPUs skip with fewer than two (`POLARS_GBT_REQUIRE_GPUS=2` makes that a
//! failure).
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use common::gpu::{categorical_data, fit, gpu, mostly_null, random_data, RowBatches};
use polars_gbt::{train, Dataset, Model, TrainConfig};

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
