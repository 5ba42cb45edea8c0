//! The Rust side of `bench/cpu_bench.py`: trains on column-major f32 files written by the
//! harness and prints one JSON line of timings. Not a test; see docs/benchmarks.md.
//!
//! Usage: bench_cpu DIR [--rounds N] [--max-depth N] [--max-bin N] [--threads N] [--learning-rate X]

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::data::cuts::compute_cuts;
use polars_gbt::data::BinnedMatrix;
use polars_gbt::metric::Metric;
use polars_gbt::objective::Targets;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, PredictOutput, Predictions, TrainConfig};

fn read_f32(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn frame(columns: Vec<f32>, n: usize, f: usize) -> FeatureFrame {
    let cols = (0..f)
        .map(|j| {
            let a: ArrayRef = Arc::new(Float32Array::from(columns[j * n..(j + 1) * n].to_vec()));
            FeatureColumn::new(format!("f{j}"), vec![a]).unwrap()
        })
        .collect();
    FeatureFrame::new(cols).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(&args[1]);
    let opt = |name: &str, default: &str| -> String {
        args.iter().position(|a| a == name).map(|i| args[i + 1].clone()).unwrap_or_else(|| default.to_string())
    };
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let (n_train, n_test, nf) = (
        meta["n_train"].as_u64().unwrap() as usize,
        meta["n_test"].as_u64().unwrap() as usize,
        meta["n_features"].as_u64().unwrap() as usize,
    );
    let x_train = read_f32(&dir.join("X_train.f32"));
    let y_train = read_f32(&dir.join("y_train.f32"));
    let x_test = read_f32(&dir.join("X_test.f32"));
    let y_test = read_f32(&dir.join("y_test.f32"));
    let train_frame = frame(x_train, n_train, nf);
    let test_frame = frame(x_test, n_test, nf);

    let cfg = TrainConfig::from_json(&format!(
        r#"{{"objective": "binary:logistic", "n_estimators": {}, "max_depth": {}, "max_bin": {}, "n_jobs": {}, "learning_rate": {}}}"#,
        opt("--rounds", "100"),
        opt("--max-depth", "8"),
        opt("--max-bin", "256"),
        opt("--threads", "2"),
        opt("--learning-rate", "0.1"),
    ))
    .unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(cfg.n_jobs).build().unwrap();

    // Ingest: Arrow columns to cut points and the bin matrix (what `train` does first).
    let t = Instant::now();
    let data = Dataset::new(train_frame, y_train).unwrap();
    pool.install(|| {
        let cuts = compute_cuts(data.features(), None, cfg.max_bin, cfg.seed).unwrap();
        std::hint::black_box(BinnedMatrix::new(data.features(), &cuts));
    });
    let ingest_s = t.elapsed().as_secs_f64();

    // Training (includes its own ingest; subtract the ingest measured above).
    let t = Instant::now();
    let model = train(&cfg, &data, &[]).unwrap();
    let train_s = t.elapsed().as_secs_f64() - ingest_s;

    let t = Instant::now();
    let pred = pool.install(|| model.predict(&test_frame, PredictOutput::Value).unwrap());
    let predict_s = t.elapsed().as_secs_f64();
    let Predictions::Float { values, .. } = pred else { unreachable!() };
    let auc = Metric::Auc.evaluate(&values, 1, &Targets { label: &y_test, weight: None, groups: None });
    let out = dir.join("ours_predictions.f32");
    std::fs::write(&out, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    println!(
        "{}",
        serde_json::json!({"ingest_s": ingest_s, "train_s": train_s, "predict_s": predict_s, "auc": auc, "predictions": out})
    );
}
