//! The Rust side of `bench/predict_bench.py`: imports an XGBoost model, scores column-major
//! float32 rows on the GPU and prints one JSON line of timings. Not a test; see
//! docs/benchmarks.md.
//!
//! Usage: bench_predict MODEL.json X.f32 N_ROWS N_FEATURES
//!
//! * `device_ms`: rows already on the GPU (as XGBoost's `inplace_predict` on a cupy array):
//!   the prediction kernel and the link function, timed with events, median of 10 after warm-up;
//! * `host_ms`: from Arrow columns in host memory to probabilities in host memory, copies
//!   included (the streaming path `gbt.predict(device="cuda")` takes), median of 5;
//! * `cpu_ms`: the CPU predictor once, which is also the oracle the GPU output is checked against.

use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use polars_gbt::backend::cuda::{runtime, GpuForest};
use polars_gbt::{Model, PredictOutput};

#[allow(dead_code)] // the training harness's loaders are not used here
#[path = "common/bench_data.rs"]
mod bench_data;

use bench_data::{floats, median};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = Model::from_xgboost(&std::fs::read(&args[1]).unwrap()).unwrap();
    let (n, nf): (usize, usize) = (args[3].parse().unwrap(), args[4].parse().unwrap());
    let (values, frame) = bench_data::load_columns(std::path::Path::new(&args[2]), n, nf);

    let clock = Instant::now();
    let forest = GpuForest::new(&model.forest_spec()).unwrap();
    let build_ms = clock.elapsed().as_secs_f64() * 1e3;

    // Rows on the device.
    let rt = runtime().unwrap();
    let stream = &rt.stream;
    let x = stream.clone_htod(&values).unwrap();
    let mut out = stream.alloc_zeros::<f32>(n * model.n_outputs()).unwrap();
    let mut scratch = stream.alloc_zeros::<u8>(forest.scratch_bytes(n)).unwrap();
    let ctx = stream.context();
    let (start, end) = (
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap(),
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap(),
    );
    let mut device = Vec::new();
    for rep in 0..13 {
        start.record(stream).unwrap();
        forest.launch(stream, &x, n, None, &mut out, None, &mut scratch).unwrap();
        forest.finish(stream, &mut out, n, None).unwrap();
        end.record(stream).unwrap();
        end.synchronize().unwrap();
        if rep >= 3 {
            device.push(start.elapsed_ms(&end).unwrap() as f64);
        }
    }
    let on_device = stream.clone_dtoh(&out).unwrap();

    // From host memory, copies included.
    let mut host = Vec::new();
    let mut streamed = Vec::new();
    for rep in 0..7 {
        let clock = Instant::now();
        streamed = floats(model.predict_with(&forest, &frame, PredictOutput::Value, None).unwrap());
        if rep >= 2 {
            host.push(clock.elapsed().as_secs_f64() * 1e3);
        }
    }

    let clock = Instant::now();
    let cpu = floats(model.predict(&frame, PredictOutput::Value).unwrap());
    let cpu_ms = clock.elapsed().as_secs_f64() * 1e3;
    let max_diff = |a: &[f32]| a.iter().zip(&cpu).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    println!(
        "{}",
        serde_json::json!({
            "forest": forest.description,
            "forest_build_ms": build_ms,
            "device_ms": median(device),
            "host_ms": median(host),
            "cpu_ms": cpu_ms,
            "max_abs_diff_device_vs_cpu": max_diff(&on_device),
            "max_abs_diff_host_vs_cpu": max_diff(&streamed),
        })
    );
}
