//! Several GPUs of one process against one, a benchmark (not a test; see docs/benchmarks.md):
//! Higgs-like data generated here, trained with `n_gpus=1` and then with each count asked
//! for. Prints a table: seconds to the first tree (ingest, binning, NCCL start-up), seconds
//! per tree after it, the speed-up, and whether the model is one GPU's, byte for byte (the
//! recorded GPU count aside). Peak memory per GPU is read outside (nvidia-smi), as the
//! harness in docs/benchmarks.md does.
//!
//! Usage: bench_gpus [--rows N] [--features F] [--rounds R] [--max-depth D] [--gpus 2]

use std::time::Instant;

use polars_gbt::{Dataset, FeatureColumn, FeatureFrame, Model, TrainConfig, Training};

#[path = "common/bench_data.rs"]
#[allow(dead_code)]
mod bench_data;
use bench_data::{higgs_like, option};

/// The model's JSON without the GPU count, to compare fits over different counts.
fn without_gpu_count(model: &Model) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&model.to_json()).unwrap();
    v["model"]["config"].as_object_mut().unwrap().remove("n_gpus");
    v.to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: &str| option(&args, name, default);
    let n: usize = opt("--rows", "1000000").parse().unwrap();
    let f: usize = opt("--features", "28").parse().unwrap();
    let rounds: usize = opt("--rounds", "20").parse().unwrap();
    let counts: Vec<usize> = opt("--gpus", "2").split(',').map(|g| g.parse().unwrap()).collect();
    let clock = Instant::now();
    let (cols, label) = higgs_like(n, f);
    let frame = FeatureFrame::new(
        cols.into_iter().enumerate().map(|(j, c)| FeatureColumn::new(format!("f{j}"), vec![c]).unwrap()).collect(),
    )
    .unwrap();
    let data = Dataset::new(frame, label).unwrap();
    eprintln!("generated {n} x {f} in {:.1} s", clock.elapsed().as_secs_f64());
    let fit = |gpus: usize| {
        let cfg = TrainConfig::from_json(&format!(
            r#"{{"objective": "binary:logistic", "n_estimators": {rounds}, "max_depth": {}, "learning_rate": 0.1,
                "device": "cuda", "n_gpus": {gpus}}}"#,
            opt("--max-depth", "8"),
        ))
        .unwrap();
        // The clock at the first and last rounds separates the set-up (ingest, binning, NCCL's
        // start) and the end (NCCL's teardown) from the steady state.
        let clock = Instant::now();
        let (mut first, mut last) = (0.0, 0.0);
        let model = Training::new(&cfg, &data)
            .callback(&mut |log| {
                last = clock.elapsed().as_secs_f64();
                if log.round == 0 {
                    first = last;
                }
                Ok(true)
            })
            .run()
            .unwrap();
        let total = clock.elapsed().as_secs_f64();
        eprintln!("n_gpus={gpus}: {total:.2} s in all, {:.2} s after the last tree", total - last);
        (model, first, (last - first) / (rounds.max(2) - 1) as f64, total)
    };
    // Each count fits twice: the first pays the start-up (the GPUs' runtimes, NCCL's
    // communicator), the second is what a process that fits again sees.
    let twice = |g: usize| {
        let (_, _, _, first_fit) = fit(g);
        let (model, first, per_tree, total) = fit(g);
        (model, first_fit, first, per_tree, total)
    };
    let (one, first_fit_one, first_one, per_tree_one, total_one) = twice(1);
    let want = without_gpu_count(&one);
    println!("{n} rows x {f} features, depth {}, {rounds} trees", opt("--max-depth", "8"));
    println!(
        "| GPUs | first fit s | second fit s | its s to the first tree | s per tree | speed-up per tree | \
         speed-up, second fit | same trees as 1 GPU |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!("| 1 | {first_fit_one:.2} | {total_one:.2} | {first_one:.2} | {per_tree_one:.4} | 1.00 | 1.00 | - |");
    for g in counts {
        let (model, first_fit, first, per_tree, total) = twice(g);
        let same = without_gpu_count(&model) == want;
        println!(
            "| {g} | {first_fit:.2} | {total:.2} | {first:.2} | {per_tree:.4} | {:.2} | {:.2} | {} |",
            per_tree_one / per_tree,
            total_one / total,
            if same { "yes" } else { "NO" }
        );
    }
}
