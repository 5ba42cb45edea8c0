//! Prints a hash of the model bytes for several configurations at 1 and 2 threads, so that a
//! speed change can be checked to leave every model byte as it was (run the old and the new
//! build, diff the output). Not a test. Usage: model_bytes DIR (a `bench_cpu` data directory,
//! as `bench/cpu_bench.py` writes it, of at least 200,000 training rows).

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array, Int32Array, StringArray};
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, TrainConfig};

#[path = "common/bench_data.rs"]
#[allow(dead_code)] // only its file reader
mod bench_data;

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// Three classes from the label and one feature.
fn three_classes(label: &[f32], f0: &[f32]) -> Vec<f32> {
    label
        .iter()
        .zip(f0)
        .map(|(&y, &x)| {
            if y > 0.5 {
                2.0
            } else if x.is_nan() || x < 0.0 {
                0.0
            } else {
                1.0
            }
        })
        .collect()
}

/// A categorical column of 40 levels (some missing) from a feature.
fn forty_levels(f1: &[f32]) -> DictionaryArray<Int32Type> {
    let codes: Vec<Option<i32>> = f1
        .iter()
        .enumerate()
        .map(|(i, &v)| (i % 17 != 0).then(|| ((v.abs() * 13.0) as i32 + (i as i32 % 3)) % 40))
        .collect();
    let levels: Vec<String> = (0..40).map(|c| format!("c{c}")).collect();
    DictionaryArray::<Int32Type>::try_new(Int32Array::from(codes), Arc::new(StringArray::from(levels))).unwrap()
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let n_all = meta["n_train"].as_u64().unwrap() as usize;
    let nf = 28;
    let x = bench_data::read_f32(&dir.join("X_train.f32"));
    let y = bench_data::read_f32(&dir.join("y_train.f32"));
    let n = 200_000.min(n_all);
    let col = |j: usize| x[j * n_all..j * n_all + n].to_vec();
    let numeric = |cols: usize| -> Vec<FeatureColumn> {
        (0..cols)
            .map(|j| {
                FeatureColumn::new(format!("f{j}"), vec![Arc::new(Float32Array::from(col(j))) as ArrayRef]).unwrap()
            })
            .collect()
    };
    let label: Vec<f32> = y[..n].to_vec();
    let classes = three_classes(&label, &col(0));
    let dict = forty_levels(&col(1));
    let weight: Vec<f32> = (0..n).map(|i| 0.5 + ((i * 7919) % 100) as f32 / 50.0).collect();

    let frame = |cat: bool| {
        let mut cols = numeric(nf);
        if cat {
            cols.push(FeatureColumn::new("cat", vec![Arc::new(dict.clone()) as ArrayRef]).unwrap());
        }
        FeatureFrame::new(cols).unwrap()
    };
    let cases: Vec<(&str, &str, bool, bool, bool)> = vec![
        ("binary d8", r#""objective": "binary:logistic", "max_depth": 8"#, false, false, false),
        ("binary d6 weights", r#""objective": "binary:logistic", "max_depth": 6"#, false, true, false),
        ("multiclass d6", r#""objective": "multi:softprob", "num_class": 3, "max_depth": 6"#, false, false, true),
        ("categorical d7", r#""objective": "binary:logistic", "max_depth": 7"#, true, false, false),
        (
            "lossguide",
            r#""objective": "binary:logistic", "max_depth": 0, "grow_policy": "lossguide", "max_leaves": 63"#,
            true,
            true,
            false,
        ),
        (
            "regression subsample",
            r#""objective": "reg:squarederror", "max_depth": 8, "subsample": 0.7, "colsample_bytree": 0.8"#,
            false,
            false,
            false,
        ),
    ];
    for threads in [1, 2] {
        for (name, params, cat, weighted, multi) in &cases {
            let cfg = TrainConfig::from_json(&format!(
                r#"{{{params}, "n_estimators": 12, "max_bin": 256, "n_jobs": {threads}, "learning_rate": 0.3}}"#
            ))
            .unwrap();
            let lab = if *multi { classes.clone() } else { label.clone() };
            let mut d = Dataset::new(frame(*cat), lab).unwrap();
            if *weighted {
                d = d.with_weight(weight.clone()).unwrap();
            }
            let model = train(&cfg, &d, &[]).unwrap();
            println!("{threads} threads {name:24} {:016x}", fnv(&model.to_bytes()));
        }
    }
}
