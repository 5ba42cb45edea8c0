//! Streamed and paged bins on the GPU: a streamed fit (bins made on the host or, batch by
//! batch, on the GPU) and a fit whose bins are paged from host memory past `max_device_memory`
//! give the model bytes of the in-core GPU fit of the collected rows. These tests need a GPU
//! (`scripts/gpu-build.sh` builds them as `.gpu/cuda_stream_tests` to run on one:
//! docs/benchmarks.md); without one they skip.
#![cfg(feature = "cuda")]

mod common;

use common::gpu::{assert_same_trees, categorical_data, fit, gpu, mostly_null, random_data, RowBatches};
use polars_gbt::backend::cuda;
use polars_gbt::backend::StartMargin;
use polars_gbt::collective::Solo;
use polars_gbt::{train, Dataset, TrainConfig};

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
