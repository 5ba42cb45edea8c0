//! Ingest on the GPU against the CPU: the columns go to the device as Arrow lays them out, and
//! the cut points and the training matrix are computed there. The cut points must be the
//! CPU's bit for bit (`compute_cuts`), and the trees grown from the device's matrix the CPU's
//! byte for byte, whatever the data type, chunking, slicing, nulls, weights and width.
//! These tests need a GPU (`scripts/gpu-build.sh` builds them as `.gpu/device_ingest_tests`).
#![cfg(feature = "cuda")]

use std::sync::Arc;

use arrow_array::types::Int16Type;
use arrow_array::*;
use polars_gbt::backend::cuda;
use polars_gbt::data::cuts::compute_cuts;
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, TrainConfig};

fn gpu() -> bool {
    match cuda::availability() {
        Ok(()) => true,
        Err(why) => {
            assert!(std::env::var_os("POLARS_GBT_REQUIRE_GPU").is_none(), "the GPU is required here: {why}");
            eprintln!("no usable GPU, GPU checks skipped: {why}");
            false
        }
    }
}

/// A value with heavy ties, extremes and signed zeros now and then: what quantiles trip on.
fn awkward(rng: &mut Rng) -> f32 {
    match rng.below(40) {
        0 => f32::INFINITY,
        1 => f32::NEG_INFINITY,
        2 => -0.0,
        3 => 0.0,
        4 => f32::MAX,
        5 => f32::MIN_POSITIVE / 4.0,
        6..=15 => rng.below(9) as f32 - 4.0,
        _ => (rng.below(1 << 24) as f32 - 8e6) / 3e3,
    }
}

/// `n` rows of every type a column may hold, each in two or three chunks of other lengths,
/// some sliced (so bitmaps start mid-byte), with nulls, NaN and a missing-value sentinel.
fn every_type(n: usize, seed: u64) -> FeatureFrame {
    let mut rng = Rng::new(seed, 5);
    let splits = [0, (n / 3 + 1).min(n), (n / 3 + 7).min(n), n];
    let mut chunked = |name: &str, make: &mut dyn FnMut(&mut Rng, usize) -> ArrayRef| {
        let chunks = splits
            .windows(2)
            .map(|w| {
                // Each chunk is the middle of a longer array: offsets that are not byte-aligned.
                let skip = 3 + (w[0] % 5);
                let whole = make(&mut rng, w[1] - w[0] + skip + 2);
                whole.slice(skip, w[1] - w[0])
            })
            .collect();
        FeatureColumn::new(name, chunks).unwrap()
    };
    let null = |rng: &mut Rng, pct: usize| rng.below(100) < pct;
    let mut cols = vec![
        chunked("f32", &mut |r, m| {
            Arc::new(Float32Array::from_iter((0..m).map(|_| (!null(r, 10)).then(|| awkward(r)))))
        }),
        chunked("f32_nan", &mut |r, m| {
            Arc::new(Float32Array::from_iter_values((0..m).map(|_| if null(r, 30) { f32::NAN } else { awkward(r) })))
        }),
        chunked("f64", &mut |r, m| {
            Arc::new(Float64Array::from_iter(
                (0..m).map(|_| (!null(r, 5)).then(|| awkward(r) as f64 * 1.000_000_1 + 1e-12)),
            ))
        }),
        chunked("i8", &mut |r, m| {
            Arc::new(Int8Array::from_iter((0..m).map(|_| (!null(r, 5)).then(|| r.below(256) as i8))))
        }),
        chunked("i16", &mut |r, m| {
            Arc::new(Int16Array::from_iter_values((0..m).map(|_| r.below(65536) as u16 as i16)))
        }),
        chunked("i32", &mut |r, m| {
            Arc::new(Int32Array::from_iter((0..m).map(|_| (!null(r, 50)).then(|| r.below(1 << 30) as i32 - (1 << 29)))))
        }),
        chunked("i64", &mut |r, m| {
            Arc::new(Int64Array::from_iter_values((0..m).map(|_| ((r.next_u64() >> 24) as i64 - (1 << 39)) << 20)))
        }),
        chunked("u8", &mut |r, m| {
            Arc::new(UInt8Array::from_iter((0..m).map(|_| (!null(r, 2)).then(|| r.below(7) as u8))))
        }),
        chunked("u16", &mut |r, m| Arc::new(UInt16Array::from_iter_values((0..m).map(|_| r.below(60_000) as u16)))),
        chunked("u32", &mut |r, m| {
            Arc::new(UInt32Array::from_iter((0..m).map(|_| (!null(r, 20)).then(|| r.next_u64() as u32))))
        }),
        chunked("u64", &mut |r, m| Arc::new(UInt64Array::from_iter_values((0..m).map(|_| r.next_u64() << 3)))),
        chunked("bool", &mut |r, m| {
            Arc::new(BooleanArray::from_iter((0..m).map(|_| (!null(r, 15)).then(|| r.below(3) == 0))))
        }),
        chunked("cat", &mut |r, m| {
            let keys = Int16Array::from_iter((0..m).map(|_| (!null(r, 10)).then(|| r.below(6) as i16)));
            let values = StringArray::from(vec!["a", "b", "c", "d", "e", "f"]);
            Arc::new(DictionaryArray::<Int16Type>::try_new(keys, Arc::new(values)).unwrap())
        }),
        chunked("all_null", &mut |_, m| Arc::new(Float32Array::from(vec![None::<f32>; m]))),
    ];
    // XGBoost's `missing`: the sentinel 0 reads as missing.
    let sentinel = chunked("with_missing", &mut |r, m| {
        Arc::new(Float32Array::from_iter_values((0..m).map(|_| r.below(5) as f32)))
    });
    cols.push(sentinel.with_missing_value(0.0));
    FeatureFrame::new(cols).unwrap()
}

fn config(json: &str, device: &str) -> TrainConfig {
    let mut cfg = TrainConfig::from_json(json).unwrap();
    cfg.device = serde_json::from_value(serde_json::Value::String(device.into())).unwrap();
    cfg
}

fn weights(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed, 9);
    (0..n).map(|_| if rng.below(10) == 0 { 0.0 } else { rng.below(1000) as f32 / 97.0 }).collect()
}

/// Weights from 1e-20 to 1e20: their f64 sums round, so the device walks the samples in order
/// as the CPU does (`sequential_cuts`) rather than summing in parallel.
fn extreme_weights(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed, 10);
    (0..n).map(|_| 10f32.powi(rng.below(41) as i32 - 20) * (1.0 + rng.below(100) as f32 / 7.0)).collect()
}

fn assert_cuts_equal(data: &Dataset, max_bin: usize, seed: u64, what: &str) {
    let cpu = compute_cuts(data.features(), data.weight(), max_bin, seed).unwrap();
    let gpu = cuda::cut_points(data, max_bin, seed).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(gpu.len(), cpu.len());
    for (f, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
        // Bit for bit: -0.0 and 0.0 differ here, as they would in a saved model.
        let bits = |cuts: &polars_gbt::data::FeatureCuts| match cuts {
            polars_gbt::data::FeatureCuts::Numeric { cuts } => cuts.iter().map(|x| x.to_bits() as u64).collect(),
            polars_gbt::data::FeatureCuts::Categorical { n_categories } => vec![u64::MAX, *n_categories as u64],
        };
        assert_eq!(bits(g), bits(c), "{what}: feature {} ({})", f, data.features().columns()[f].name());
    }
}

#[test]
fn device_cut_points_equal_the_cpus_bit_for_bit() {
    if !gpu() {
        return;
    }
    // Weights: 0 none, 1 fractional (sums still exact in f64), 2 from 1e-20 to 1e20 (sums round).
    for (n, max_bin, weighted, seed) in [
        (1, 256, 0, 1),
        (37, 256, 1, 2),
        (5_000, 256, 0, 3),
        (5_000, 16, 1, 4),
        (5_000, 64, 2, 12),
        (60_000, 1024, 1, 5),
        // Past the sample's 2^18 rows: rows are drawn by their hash.
        (300_000, 256, 0, 6),
        (300_000, 64, 1, 7),
        (300_000, 256, 2, 13),
    ] {
        let frame = every_type(n, seed);
        let y = vec![0f32; n];
        let mut data = Dataset::new(frame, y).unwrap();
        match weighted {
            1 => data = data.with_weight(weights(n, seed)).unwrap(),
            2 => data = data.with_weight(extreme_weights(n, seed)).unwrap(),
            _ => {}
        }
        assert_cuts_equal(&data, max_bin, seed, &format!("{n} rows, max_bin {max_bin}, weights {weighted}"));
    }
}

#[test]
fn wide_data_cut_points_come_a_batch_of_features_at_a_time() {
    if !gpu() {
        return;
    }
    // 300,000 rows sample about 2^18: 64 features a batch, so 150 features take three.
    let (n, nf) = (300_000, 150);
    let mut rng = Rng::new(3, 3);
    let cols = (0..nf)
        .map(|j| {
            let values: Vec<Option<f32>> = (0..n)
                .map(|_| (rng.below(100) >= j % 60).then(|| (rng.below(1 << 20) as f32) / (j + 1) as f32))
                .collect();
            FeatureColumn::new(format!("w{j}"), vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
        })
        .collect();
    let data = Dataset::new(FeatureFrame::new(cols).unwrap(), vec![0f32; n]).unwrap();
    assert_cuts_equal(&data, 256, 11, "150 features");
}

#[test]
fn trees_from_the_devices_matrix_equal_the_cpus() {
    if !gpu() {
        return;
    }
    let n = 20_000;
    let frame = every_type(n, 8);
    let mut rng = Rng::new(8, 2);
    let first = frame.columns()[0].clone();
    let mut x = vec![0f32; n];
    first.read(0, &mut x);
    let y: Vec<f32> =
        x.iter().map(|v| (if v.is_nan() { 0.5 } else { (v / 1e3).tanh() }) + (rng.below(100) as f32) / 200.0).collect();
    let data = Dataset::new(frame, y).unwrap().with_weight(weights(n, 8)).unwrap();
    for json in [r#"{"n_estimators": 6, "max_depth": 6}"#, r#"{"n_estimators": 4, "max_depth": 5, "max_bin": 1024}"#] {
        let fit = |device: &str| train(&config(json, device), &data, &[]).unwrap();
        let (cpu, gpu) = (fit("cpu"), fit("cuda"));
        assert_eq!(cpu.features(), gpu.features(), "{json}: the cut points in the models");
        assert_eq!(cpu.trees(), gpu.trees(), "{json}: the trees");
    }
}

#[test]
fn every_feature_missing_is_the_same_error_on_the_device() {
    if !gpu() {
        return;
    }
    let col = FeatureColumn::new("empty", vec![Arc::new(Float32Array::from(vec![None::<f32>; 100])) as ArrayRef]);
    let data = Dataset::new(FeatureFrame::new(vec![col.unwrap()]).unwrap(), vec![1f32; 100]).unwrap();
    let cpu = train(&config("{}", "cpu"), &data, &[]).unwrap_err().to_string();
    let gpu = train(&config("{}", "cuda"), &data, &[]).unwrap_err().to_string();
    assert!(cpu.contains("entirely missing"), "{cpu}");
    assert_eq!(gpu, cpu);
}

/// `n_gpus=2`: each GPU samples its half of the rows by their global index and the samples
/// are gathered, so the cut points are still the CPU's. Past 2^18 rows, where rows are drawn.
#[test]
fn several_gpus_gather_the_cpus_cut_points() {
    if !gpu() || cuda::runtime::device_count().unwrap_or(0) < 2 {
        let required = std::env::var("POLARS_GBT_REQUIRE_GPUS").ok().and_then(|v| v.parse::<usize>().ok());
        assert!(required.is_none_or(|r| r < 2), "2 GPUs are required here");
        return;
    }
    let n = 300_000;
    let mut rng = Rng::new(14, 1);
    let y: Vec<f32> = (0..n).map(|_| rng.below(2) as f32).collect();
    let data = Dataset::new(every_type(n, 14), y).unwrap().with_weight(weights(n, 14)).unwrap();
    let json = r#"{"objective": "binary:logistic", "n_estimators": 2, "max_depth": 4}"#;
    let cpu = train(&config(json, "cpu"), &data, &[]).unwrap();
    let mut cfg = config(json, "cuda");
    cfg.n_gpus = 2;
    let gpus = train(&cfg, &data, &[]).unwrap();
    assert_eq!(gpus.features(), cpu.features(), "the cut points of a fit over two GPUs");
    assert_eq!(gpus.trees(), cpu.trees(), "the trees of a fit over two GPUs");
}
