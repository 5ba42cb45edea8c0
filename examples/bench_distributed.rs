//! Distributed CPU fits on one machine, a benchmark (not a test; see docs/benchmarks.md): one
//! worker with all the threads against W workers (threads of this process joined by the TCP
//! ring on localhost), the threads shared out among them. Prints a table: seconds per tree,
//! the ring's share of the fit's time, the bytes each worker sends per tree, and whether
//! every worker's model is the one worker's, byte for byte.
//!
//! Usage: bench_distributed [--rows N] [--features F] [--rounds R] [--max-depth D]
//!                          [--threads T] [--workers 2,4] [--device cpu|cuda]
//!
//! With `--device cuda` every worker trains on this machine's one GPU (their histograms
//! summed through the host and the ring): a measure of that exchange, not of speed-up.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use arrow_array::ArrayRef;
use polars_gbt::collective::{serve_tracker, RingConfig, RowSpans, Shard, TcpRing};
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame, TrainConfig};

#[path = "common/bench_data.rs"]
#[allow(dead_code)]
mod bench_data;
use bench_data::{higgs_like as columns, option};

fn dataset(cols: &[ArrayRef], label: Vec<f32>) -> Dataset {
    let frame = FeatureFrame::new(
        cols.iter().enumerate().map(|(j, c)| FeatureColumn::new(format!("f{j}"), vec![c.clone()]).unwrap()).collect(),
    )
    .unwrap();
    Dataset::new(frame, label).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: &str| option(&args, name, default);
    let n: usize = opt("--rows", "1000000").parse().unwrap();
    let f: usize = opt("--features", "28").parse().unwrap();
    let rounds: usize = opt("--rounds", "20").parse().unwrap();
    let threads: usize = opt("--threads", "2").parse().unwrap();
    let worker_counts: Vec<usize> = opt("--workers", "2").split(',').map(|w| w.parse().unwrap()).collect();
    let cfg = TrainConfig::from_json(&format!(
        r#"{{"objective": "binary:logistic", "n_estimators": {rounds}, "max_depth": {}, "device": "{}"}}"#,
        opt("--max-depth", "8"),
        opt("--device", "cpu")
    ))
    .unwrap();
    let (cols, label) = columns(n, f);
    let pool = |t: usize| rayon::ThreadPoolBuilder::new().num_threads(t.max(1)).build().unwrap();

    let clock = Instant::now();
    let whole = dataset(&cols, label);
    let want = pool(threads).install(|| polars_gbt::train(&cfg, &whole, &[])).unwrap().to_bytes();
    let one = clock.elapsed().as_secs_f64();
    println!(
        "{n} rows x {f} features, depth {}, {rounds} trees, {threads} threads in all, device {:?}",
        cfg.max_depth, cfg.device
    );
    println!(
        "| workers | threads each | s per tree | vs 1 worker | ring share | MB sent per tree, each | same bytes |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!("| 1 | {threads} | {:.4} | 1.00 | - | - | - |", one / rounds as f64);
    for &w in &worker_counts {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let tracker = listener.local_addr().unwrap().to_string();
        let serve = std::thread::spawn(move || serve_tracker(listener, w, "bench", Duration::from_secs(60)));
        let clock = Instant::now();
        let results: Vec<_> = (0..w)
            .map(|rank| {
                let (cfg, tracker) = (cfg.clone(), tracker.clone());
                let each = threads / w;
                let (start, end) = (rank * n / w, (rank + 1) * n / w);
                // The worker's rows share the whole frame's Arrow buffers.
                let data = whole.row_range(start, end - start).unwrap();
                std::thread::spawn(move || {
                    let ring = TcpRing::join(&RingConfig {
                        rank,
                        world: w,
                        tracker,
                        token: "bench".into(),
                        host: "127.0.0.1".into(),
                        timeout: Duration::from_secs(600),
                    })
                    .unwrap();
                    let shard = Shard {
                        comm: &ring,
                        rows: RowSpans::new(vec![(start as u64, data.n_rows() as u64)], n as u64).unwrap(),
                        evals: Vec::new(),
                    };
                    let model =
                        pool(each).install(|| polars_gbt::Training::new(&cfg, &data).shard(&shard).run()).unwrap();
                    (model.to_bytes(), ring.usage())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let took = clock.elapsed().as_secs_f64();
        serve.join().unwrap().unwrap();
        let busy = results.iter().map(|r| r.1 .0).fold(0.0, f64::max);
        let sent = results.iter().map(|r| r.1 .1).max().unwrap();
        let same = results.iter().all(|r| r.0 == want);
        println!(
            "| {w} | {} | {:.4} | {:.2} | {:.1}% | {:.2} | {} |",
            threads / w,
            took / rounds as f64,
            one / took,
            100.0 * busy / took,
            sent as f64 / rounds as f64 / 1e6,
            if same { "yes" } else { "NO" }
        );
    }
}
