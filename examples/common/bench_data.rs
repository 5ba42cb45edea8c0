//! What the benchmark examples share: the files the Python harnesses write (column-major
//! float32 features, labels, `meta.json`) and the command line's `--name value` options.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::{FeatureColumn, FeatureFrame, Predictions};

/// The median of timings.
#[allow(dead_code)] // the training benchmarks time one run
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Float predictions' values (a benchmark asks only for those).
pub fn floats(p: Predictions) -> Vec<f32> {
    match p {
        Predictions::Float { values, .. } => values,
        _ => panic!("expected float predictions"),
    }
}

pub fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// Arrow columns over the file's values (one buffer per column, as a DataFrame holds them).
pub fn frame(columns: Vec<f32>, n: usize, f: usize) -> FeatureFrame {
    let cols = (0..f)
        .map(|j| {
            let a: ArrayRef = Arc::new(Float32Array::from(columns[j * n..(j + 1) * n].to_vec()));
            FeatureColumn::new(format!("f{j}"), vec![a]).unwrap()
        })
        .collect();
    FeatureFrame::new(cols).unwrap()
}

/// The training and test data in a harness's directory.
pub struct BenchData {
    pub train: FeatureFrame,
    pub y_train: Vec<f32>,
    pub test: FeatureFrame,
    pub y_test: Vec<f32>,
}

impl BenchData {
    pub fn load(dir: &Path) -> Self {
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
        let size = |k: &str| meta[k].as_u64().unwrap() as usize;
        let (n_train, n_test, nf) = (size("n_train"), size("n_test"), size("n_features"));
        BenchData {
            train: frame(read_f32(&dir.join("X_train.f32")), n_train, nf),
            y_train: read_f32(&dir.join("y_train.f32")),
            test: frame(read_f32(&dir.join("X_test.f32")), n_test, nf),
            y_test: read_f32(&dir.join("y_test.f32")),
        }
    }
}

/// The value after `--name` on the command line, or `default`.
pub fn option(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).map(|i| args[i + 1].clone()).unwrap_or_else(|| default.to_string())
}

/// Column-major float32 features from `path` (`n` rows, `f` columns named f0..), as Arrow
/// columns, with the raw values.
#[allow(dead_code)] // used by bench_predict only
pub fn load_columns(path: &Path, n: usize, f: usize) -> (Vec<f32>, FeatureFrame) {
    let values = read_f32(path);
    assert_eq!(values.len(), n * f, "{} holds {} values, not {n} x {f}", path.display(), values.len());
    let frame = frame(values.clone(), n, f);
    (values, frame)
}

/// Higgs-like columns, generated here (no files): `f` features of a bell-ish shape, a few
/// nonlinear in the label, and a label drawn from a logistic of them. Columns in parallel.
#[allow(dead_code)] // the benchmarks that read the harness's files do not generate data
pub fn higgs_like(n: usize, f: usize) -> (Vec<ArrayRef>, Vec<f32>) {
    use polars_gbt::random::hash64;
    use rayon::prelude::*;
    let u = |k: u64, i: usize| (hash64(k, i as u64) >> 11) as f64 / (1u64 << 53) as f64;
    let cols: Vec<Vec<f32>> = (0..f as u64)
        .into_par_iter()
        .map(|j| (0..n).map(|i| ((u(j, i) + u(j + 1000, i) + u(j + 2000, i)) * 2.0 - 3.0) as f32).collect())
        .collect();
    let label = (0..n)
        .into_par_iter()
        .map(|i| {
            let z = cols[0][i] as f64 * 1.5 - (cols[1][i] as f64).powi(2) + (cols[2][i] * cols[3 % f][i]) as f64;
            (u(99_999, i) < 1.0 / (1.0 + (-z).exp())) as u8 as f32
        })
        .collect();
    (cols.into_iter().map(|c| Arc::new(Float32Array::from(c)) as ArrayRef).collect(), label)
}
