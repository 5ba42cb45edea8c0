//! The main job: generate Higgs-like data (the recipe of bench/higgs_like.py), train a
//! binary classifier from Arrow columns, score held-out rows, and print time, accuracy and
//! the device that ran it.
//!
//! Usage: cargo run --release --example demo [-- ROWS]

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::metric::Metric;
use polars_gbt::objective::Targets;
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, PredictOutput, Predictions, TrainConfig};

const FEATURES: usize = 28;

/// Standard normal draws by Box-Muller from the crate's deterministic generator.
fn normal(rng: &mut Rng) -> f32 {
    let u1 = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

/// Columns and labels: label ~ Bernoulli(sigmoid(z)) with the generator's z; 5% of the
/// values of the last four columns are missing (null-free NaN, as numpy writes them).
fn higgs_like(n: usize, seed: u64) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut rng = Rng::new(seed, 0);
    let mut cols = vec![vec![0f32; n]; FEATURES];
    let w: Vec<f32> = (0..FEATURES).map(|j| -1.0 + 2.0 * j as f32 / (FEATURES - 1) as f32).collect();
    let mut y = vec![0f32; n];
    for i in 0..n {
        let x: Vec<f32> = (0..FEATURES).map(|_| normal(&mut rng)).collect();
        let lin: f32 = x.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() * 0.5;
        let z = lin + (x[0] * x[1]).sin() + if x[2] > 0.3 { x[3] } else { 0.0 } - 0.5 * x[4].abs() + 0.3 * x[5] * x[6];
        let u = (rng.next_u64() >> 11) as f32 / (1u64 << 53) as f32;
        y[i] = (u < 1.0 / (1.0 + (-z).exp())) as u8 as f32;
        for j in 0..FEATURES {
            let missing = j >= 24 && rng.below(100) < 5;
            cols[j][i] = if missing { f32::NAN } else { x[j] };
        }
    }
    (cols, y)
}

fn frame(cols: &[Vec<f32>], range: std::ops::Range<usize>) -> FeatureFrame {
    let columns = cols
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let a: ArrayRef = Arc::new(Float32Array::from(c[range.clone()].to_vec()));
            FeatureColumn::new(format!("f{j}"), vec![a]).expect("float columns are valid features")
        })
        .collect();
    FeatureFrame::new(columns).expect("columns share one length")
}

fn main() -> polars_gbt::Result<()> {
    let n_train: usize = std::env::args().nth(1).map(|a| a.parse().expect("ROWS must be a number")).unwrap_or(500_000);
    let n_test = n_train / 5;
    let t = Instant::now();
    let (cols, y) = higgs_like(n_train + n_test, 0);
    println!("generated {} x {FEATURES} Higgs-like rows in {:.2} s", n_train + n_test, t.elapsed().as_secs_f64());

    let train_frame = frame(&cols, 0..n_train);
    let test_frame = frame(&cols, n_train..n_train + n_test);
    let data = Dataset::new(train_frame, y[..n_train].to_vec())?;
    let cfg = TrainConfig::from_json(
        r#"{"objective": "binary:logistic", "n_estimators": 100, "max_depth": 8, "learning_rate": 0.1, "max_bin": 256, "device": "auto"}"#,
    )?;
    // The CUDA backend is not in this build yet: "auto" trains on the CPU.
    let device = "cpu (rayon, all cores)";

    let t = Instant::now();
    let model = train(&cfg, &data, &[])?;
    let train_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let Predictions::Float { values, .. } = model.predict(&test_frame, PredictOutput::Value)? else {
        unreachable!("value output is float")
    };
    let predict_s = t.elapsed().as_secs_f64();
    let targets = Targets { label: &y[n_train..], weight: None, groups: None };
    println!("device:        {device}");
    println!("train:         {n_train} rows, {} trees of depth <= 8 in {train_s:.2} s", model.num_trees());
    println!("predict:       {n_test} rows in {:.1} ms", predict_s * 1e3);
    println!("test AUC:      {:.4}", Metric::Auc.evaluate(&values, 1, &targets));
    println!("test logloss:  {:.4}", Metric::Logloss.evaluate(&values, 1, &targets));
    println!("test error:    {:.4}", Metric::Error.evaluate(&values, 1, &targets));
    Ok(())
}
