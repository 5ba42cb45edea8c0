//! The Rust side of `bench/gpu_bench.py`: trains on the GPU from column-major f32 files
//! written by the harness and prints one JSON line. Not a test; see docs/benchmarks.md.
//!
//! Usage: bench_gpu DIR [--rounds N] [--max-depth N] [--max-bin N] [--learning-rate X] [--device D]
//!        [--save MODEL.json] (the model as XGBoost JSON, for bench_predict)

use std::time::Instant;

use polars_gbt::metric::Metric;
use polars_gbt::objective::Targets;
use polars_gbt::{Dataset, PredictOutput, TrainConfig, Training};

#[path = "common/bench_data.rs"]
mod bench_data;
use bench_data::{option, BenchData};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: &str| option(&args, name, default);
    let BenchData { train: train_frame, y_train, test: test_frame, y_test, .. } =
        BenchData::load(std::path::Path::new(&args[1]));
    let cfg = TrainConfig::from_json(&format!(
        r#"{{"objective": "binary:logistic", "n_estimators": {}, "max_depth": {}, "max_bin": {}, "learning_rate": {}, "device": "{}"}}"#,
        opt("--rounds", "500"),
        opt("--max-depth", "8"),
        opt("--max-bin", "256"),
        opt("--learning-rate", "0.1"),
        opt("--device", "cuda"),
    ))
    .unwrap();
    let data = Dataset::new(train_frame, y_train).unwrap();
    // The first round ends after ingest, quantisation and one tree: the clock at each round
    // separates the set-up from the steady state.
    let t = Instant::now();
    let mut first_round_s = 0.0;
    let model = Training::new(&cfg, &data)
        .callback(&mut |log| {
            if log.round == 0 {
                first_round_s = t.elapsed().as_secs_f64();
            }
            Ok(true)
        })
        .run()
        .unwrap();
    let total_s = t.elapsed().as_secs_f64();
    let per_tree_s = (total_s - first_round_s) / (cfg.n_estimators.max(2) - 1) as f64;

    let t = Instant::now();
    let pred = model.predict(&test_frame, PredictOutput::Value).unwrap();
    let predict_s = t.elapsed().as_secs_f64();
    let values = bench_data::floats(pred);
    let auc = Metric::Auc.evaluate(
        &values,
        1,
        &Targets { label: &y_test, label_upper: None, weight: None, groups: None },
        &Default::default(),
    );
    let save = opt("--save", "");
    if !save.is_empty() {
        std::fs::write(&save, model.to_xgboost_json()).unwrap();
    }
    println!(
        "{}",
        serde_json::json!({
            "total_s": total_s, "first_round_s": first_round_s, "per_tree_s": per_tree_s,
            "predict_cpu_s": predict_s, "auc": auc, "trees": model.trees().len(),
        })
    );
}
