//! The Rust side of `bench/shap_bench.py`: imports an XGBoost model, computes the SHAP values
//! of column-major float32 rows on the GPU, checks them against XGBoost's own, and prints one
//! JSON line. Not a test; see docs/benchmarks.md.
//!
//! Usage: bench_shap MODEL.json X.f32 N_ROWS N_FEATURES XGBOOST_CONTRIBS.f32 [INTERACTION_ROWS]
//!
//! * `host_ms`: SHAP values from Arrow columns in host memory to values in host memory, copies
//!   included (what `gbt.predict(output="contrib", device="cuda")` does), median of 3 after a
//!   warm-up run that also lays the paths out on the device (`first_ms`);
//! * `max_rel_diff_vs_xgboost`: the largest difference from XGBoost's `pred_contribs`
//!   (row-major, `N_FEATURES + 1` per row), relative to the largest value;
//! * `max_rel_diff_vs_cpu`: the same against our CPU TreeSHAP on the first 2,000 rows;
//! * with INTERACTION_ROWS: `interaction_ms` (median of 3) for that many rows, and their
//!   largest difference from the CPU's on the first 200.

use std::time::Instant;

use polars_gbt::backend::cuda::GpuForest;
use polars_gbt::{FeatureFrame, Model, PredictOutput};

#[allow(dead_code)] // the training harness's loaders are not used here
#[path = "common/bench_data.rs"]
mod bench_data;

use bench_data::{floats, median};

/// The largest difference between `a` and `b`, relative to the largest magnitude in `b`.
fn rel_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
    a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max) / scale.max(1e-30)
}

/// The first `rows` rows of a column-major matrix, as a frame.
fn head(values: &[f32], n: usize, nf: usize, rows: usize) -> FeatureFrame {
    let cut: Vec<f32> = (0..nf).flat_map(|f| values[f * n..f * n + rows].iter().copied()).collect();
    bench_data::frame(cut, rows, nf)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = Model::from_xgboost(&std::fs::read(&args[1]).unwrap()).unwrap();
    let (n, nf): (usize, usize) = (args[3].parse().unwrap(), args[4].parse().unwrap());
    let (values, frame) = bench_data::load_columns(std::path::Path::new(&args[2]), n, nf);
    let theirs = bench_data::read_f32(std::path::Path::new(&args[5]));
    let forest = GpuForest::new(&model.forest_spec()).unwrap();

    let clock = Instant::now();
    let mut ours = floats(model.predict_with(&forest, &frame, PredictOutput::Contrib, None).unwrap());
    let first_ms = clock.elapsed().as_secs_f64() * 1e3;
    let mut host = Vec::new();
    for _ in 0..3 {
        let clock = Instant::now();
        ours = floats(model.predict_with(&forest, &frame, PredictOutput::Contrib, None).unwrap());
        host.push(clock.elapsed().as_secs_f64() * 1e3);
    }
    let check = n.min(2000);
    let small = head(&values, n, nf, check);
    let cpu = floats(model.predict(&small, PredictOutput::Contrib).unwrap());
    let mut report = serde_json::json!({
        "first_ms": first_ms,
        "host_ms": median(host),
        "max_rel_diff_vs_xgboost": rel_diff(&ours, &theirs),
        "max_rel_diff_vs_cpu": rel_diff(&ours[..cpu.len()], &cpu),
    });
    if let Some(rows) = args.get(6).map(|r| r.parse::<usize>().unwrap().min(n)) {
        let part = head(&values, n, nf, rows);
        let mut times = Vec::new();
        let mut inter = Vec::new();
        for rep in 0..4 {
            let clock = Instant::now();
            inter = floats(model.predict_with(&forest, &part, PredictOutput::Interaction, None).unwrap());
            if rep > 0 {
                times.push(clock.elapsed().as_secs_f64() * 1e3);
            }
        }
        let few = head(&values, n, nf, rows.min(200));
        let cpu = floats(model.predict(&few, PredictOutput::Interaction).unwrap());
        report["interaction_rows"] = rows.into();
        report["interaction_ms"] = median(times).into();
        report["interaction_max_rel_diff_vs_cpu"] = rel_diff(&inter[..cpu.len()], &cpu).into();
    }
    println!("{report}");
}
