//! The Rust side of `bench/cpu_bench.py`: trains on column-major f32 files written by the
//! harness and prints one JSON line of timings. Not a test; see docs/benchmarks.md.
//!
//! Usage: bench_cpu DIR [--rounds N] [--max-depth N] [--max-bin N] [--threads N] [--learning-rate X]

use std::time::Instant;

use polars_gbt::data::cuts::compute_cuts;
use polars_gbt::data::BinnedMatrix;
use polars_gbt::metric::Metric;
use polars_gbt::objective::Targets;
use polars_gbt::{train, Dataset, PredictOutput, TrainConfig};

#[path = "common/bench_data.rs"]
mod bench_data;
use bench_data::{option, BenchData};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: &str| option(&args, name, default);
    let dir = std::path::PathBuf::from(&args[1]);
    let BenchData { train: train_frame, y_train, test: test_frame, y_test } = BenchData::load(&dir);

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
    let values = bench_data::floats(pred);
    let auc = Metric::Auc.evaluate(
        &values,
        1,
        &Targets { label: &y_test, label_upper: None, weight: None, groups: None },
        &Default::default(),
    );
    let out = dir.join("ours_predictions.f32");
    std::fs::write(&out, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    println!(
        "{}",
        serde_json::json!({"ingest_s": ingest_s, "train_s": train_s, "predict_s": predict_s, "auc": auc, "predictions": out})
    );
}
