//! Prediction and SHAP on the GPU against the CPU oracle: margins, values, leaves and classes
//! bit for bit (streamed chunks, concurrent requests, categorical splits, wide models, rows
//! already in GPU memory), SHAP and interaction values within float rounding, and imported
//! models' SHAP values equal to their own libraries'. These tests need a GPU
//! (`scripts/gpu-build.sh` builds them as `.gpu/cuda_predict_tests` to run on one:
//! docs/benchmarks.md); without one they skip (the imported models' CPU check runs everywhere).
#![cfg(feature = "cuda")]

mod common;

use common::gpu::{
    assert_close, assert_gpu_predicts_as_cpu, assert_gpu_shap_as_cpu, categorical_data, column, fit, gpu, random_data,
    shap, values,
};
use polars_gbt::backend::cuda;
use polars_gbt::backend::cuda::GpuForest;
use polars_gbt::{Dataset, FeatureFrame, Model, PredictOutput, Predictions};

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
