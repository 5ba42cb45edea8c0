//! What the GPU test files (`tests/cuda_*.rs`) share: whether a GPU is usable, the data they
//! train on (random, categorical, mostly-null, streamed in batches), fits on either device, and
//! the checks that the GPU's trees, predictions and SHAP values are the CPU's.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array};
use polars_gbt::backend::cpu::predict::FlatForest;
use polars_gbt::backend::cuda;
use polars_gbt::backend::cuda::GpuForest;
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};

/// Whether a GPU is usable. On the GPU machine `POLARS_GBT_REQUIRE_GPU=1` turns "not usable"
/// into a failure, so that a broken runtime cannot pass as a skipped test.
pub fn gpu() -> bool {
    match cuda::availability() {
        Ok(()) => true,
        Err(why) => {
            assert!(std::env::var_os("POLARS_GBT_REQUIRE_GPU").is_none(), "the GPU is required here: {why}");
            eprintln!("no usable GPU, GPU checks skipped: {why}");
            false
        }
    }
}

pub fn column(name: &str, values: Vec<f32>) -> FeatureColumn {
    FeatureColumn::new(name, vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
}

/// Random data with missing values in two columns, a few duplicated values and a constant
/// column; the label mixes a threshold, an interaction and noise.
pub fn random_data(n: usize, nf: usize, seed: u64) -> (FeatureFrame, Vec<f32>) {
    let mut rng = Rng::new(seed, 11);
    let mut cols = vec![vec![0f32; n]; nf];
    for (j, col) in cols.iter_mut().enumerate() {
        for v in col.iter_mut() {
            *v = match j % 4 {
                0 => (rng.below(1_000_000) as f32 - 500_000.0) / 1e5,
                1 => rng.below(17) as f32,
                2 => ((rng.below(1 << 20) as f32) / 1e3).exp2() - 1.0,
                _ => (rng.below(100) as f32).sqrt(),
            };
        }
    }
    for v in cols[1].iter_mut() {
        if rng.below(5) == 0 {
            *v = f32::NAN;
        }
    }
    for v in cols[nf - 1].iter_mut() {
        if rng.below(2) == 0 {
            *v = f32::NAN;
        }
    }
    cols[2].iter_mut().for_each(|v| *v = 3.0);
    let y = (0..n)
        .map(|i| {
            let a = cols[0][i];
            let b = if cols[1][i].is_nan() { 8.0 } else { cols[1][i] };
            let noise = (rng.below(1000) as f32 - 500.0) / 500.0;
            (a > 1.0) as u8 as f32 * 2.0 + 0.3 * a * b.sqrt() + noise
        })
        .collect();
    let frame =
        FeatureFrame::new(cols.into_iter().enumerate().map(|(j, c)| column(&format!("x{j}"), c)).collect()).unwrap();
    (frame, y)
}

pub fn fit(json: &str, data: &Dataset, device: &str) -> Model {
    let mut cfg = TrainConfig::from_json(json).unwrap();
    cfg.device = serde_json::from_value(serde_json::Value::String(device.into())).unwrap();
    train(&cfg, data, &[]).unwrap_or_else(|e| panic!("{device} fit of {json} failed: {e}"))
}

pub fn assert_same_trees(cpu: &Model, gpu: &Model, what: &str) {
    assert_eq!(cpu.trees().len(), gpu.trees().len(), "{what}: tree counts");
    for (i, (a, b)) in cpu.trees().iter().zip(gpu.trees()).enumerate() {
        assert_eq!(a, b, "{what}: tree {i} differs between the CPU and the GPU");
    }
}

/// Predictions as floats (classes and leaf indices too, which are small integers).
pub fn values(p: Predictions) -> Vec<f32> {
    match p {
        Predictions::Float { values, .. } => values,
        Predictions::Index { values, .. } => values.into_iter().map(|v| v as f32).collect(),
    }
}

/// A categorical column: codes (None: null) into `values`.
pub fn dictionary(keys: Vec<Option<i32>>, values: Vec<String>) -> ArrayRef {
    Arc::new(
        DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(arrow_array::StringArray::from(values))).unwrap(),
    )
}

/// Two categorical columns (40 categories with nulls, and 3) and a numeric one; the label
/// depends on category groups, so both split kinds (sorted partition, one-vs-rest) win.
pub fn categorical_data(n: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 5);
    let names: Vec<String> = (0..40).map(|c| format!("c{c:02}")).collect();
    let big: Vec<Option<i32>> = (0..n).map(|_| (rng.below(12) != 0).then(|| rng.below(40) as i32)).collect();
    let small: Vec<i32> = (0..n).map(|_| rng.below(3) as i32).collect();
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let y: Vec<f32> = (0..n)
        .map(|i| {
            let b = big[i].map_or(2.0, |c| {
                if c % 5 == 0 {
                    4.0
                } else if c % 3 == 0 {
                    -1.0
                } else {
                    0.5
                }
            });
            b + small[i] as f32 * 0.7 + 0.2 * x[i] + (rng.below(100) as f32 - 50.0) / 100.0
        })
        .collect();
    let frame = FeatureFrame::new(vec![
        FeatureColumn::new("big", vec![dictionary(big, names)]).unwrap(),
        FeatureColumn::new(
            "small",
            vec![dictionary(small.into_iter().map(Some).collect(), vec!["a".into(), "b".into(), "c".into()])],
        )
        .unwrap(),
        column("x", x),
    ])
    .unwrap();
    Dataset::new(frame, y).unwrap()
}

/// LibSVM-like data: 100 features of 50 values, each present in about 3% of rows (nulls elsewhere).
pub fn sparse_data(n: usize, seed: u64) -> Dataset {
    sparse_data_of(n, 100, 50, seed)
}

/// `nf` features, each present in about 3% of rows with one of `levels` values.
pub fn sparse_data_of(n: usize, nf: usize, levels: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 9);
    let cols: Vec<Vec<Option<f32>>> = (0..nf)
        .map(|_| (0..n).map(|_| (rng.below(100) < 3).then(|| rng.below(levels) as f32 / 10.0)).collect())
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|i| cols[0][i].unwrap_or(-1.0) + cols[1][i].map_or(0.0, |v| 2.0 * v) - cols[7][i].unwrap_or(0.5))
        .collect();
    let frame = FeatureFrame::new(
        cols.into_iter()
            .enumerate()
            .map(|(j, c)| {
                FeatureColumn::new(format!("s{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap()
            })
            .collect(),
    )
    .unwrap();
    Dataset::new(frame, y).unwrap()
}

/// Rows `rows` of a wide, mostly-null problem (the GPU lays it out as compressed rows):
/// 40 features, each present in 1 row in 12, the label from the first few.
pub fn mostly_null(rows: &[usize]) -> Dataset {
    let value = |f: usize, r: usize| {
        let h = polars_gbt::random::hash64(f as u64, r as u64);
        h.is_multiple_of(12).then(|| ((h >> 20) % 1000) as f32 / 100.0)
    };
    let columns = (0..40)
        .map(|f| {
            let values: Vec<Option<f32>> = rows.iter().map(|&r| value(f, r)).collect();
            FeatureColumn::new(format!("f{f}"), vec![Arc::new(Float32Array::from(values)) as ArrayRef]).unwrap()
        })
        .collect();
    let label = rows
        .iter()
        .map(|&r| {
            let s: f32 = (0..4).map(|f| value(f, r).unwrap_or(-2.0)).sum();
            (s > 0.0) as u8 as f32
        })
        .collect();
    Dataset::new(FeatureFrame::new(columns).unwrap(), label).unwrap()
}

/// GPU prediction against the CPU predictor, the oracle: margins bit for bit (both sum each
/// output's trees in model order in float32), values bit for bit (both links use the same exp),
/// classes and leaves equal.
pub fn assert_gpu_predicts_as_cpu(model: &Model, frame: &FeatureFrame, what: &str) {
    for quantised in [true, false] {
        let forest = cuda::GpuForest::with_quantisation(&model.forest_spec(), quantised).unwrap();
        eprintln!("{what}: {}", forest.description);
        assert_forest_predicts_as_cpu(model, &forest, frame, what);
    }
}

fn assert_forest_predicts_as_cpu(model: &Model, forest: &cuda::GpuForest, frame: &FeatureFrame, what: &str) {
    let n = frame.n_rows();
    let cpu_margin = values(model.predict(frame, PredictOutput::Margin).unwrap());
    let gpu_margin = values(model.predict_with(forest, frame, PredictOutput::Margin, None).unwrap());
    assert_eq!(cpu_margin.len(), gpu_margin.len());
    for (i, (a, b)) in cpu_margin.iter().zip(&gpu_margin).enumerate() {
        assert_eq!(a.to_bits(), b.to_bits(), "{what}: margin {i}: CPU {a} GPU {b}");
    }
    let cpu_value = model.predict(frame, PredictOutput::Value).unwrap();
    let gpu_value = model.predict_with(forest, frame, PredictOutput::Value, None).unwrap();
    match (cpu_value, gpu_value) {
        (Predictions::Float { values: a, .. }, Predictions::Float { values: b, .. }) => {
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "{what}: value {i}: CPU {x} GPU {y}");
            }
        }
        (a, b) => assert_eq!(a, b, "{what}: class values"),
    }
    assert_eq!(
        model.predict(frame, PredictOutput::Leaf).unwrap(),
        model.predict_with(forest, frame, PredictOutput::Leaf, None).unwrap(),
        "{what}: leaves"
    );
    if model.objective() == polars_gbt::Objective::BinaryLogistic || model.objective().is_multiclass() {
        assert_eq!(
            model.predict(frame, PredictOutput::Class).unwrap(),
            model.predict_with(forest, frame, PredictOutput::Class, None).unwrap(),
            "{what}: classes"
        );
    }
    // A per-row starting margin; then one from -100 to 90, which takes the links through exp's
    // whole range, subnormal results and overflow included.
    let start: Vec<f32> = (0..n * model.n_outputs()).map(|i| (i % 13) as f32 * 0.1 - 0.6).collect();
    let cpu = values(model.predict_with_base_margin(frame, &start, PredictOutput::Margin).unwrap());
    let gpu = values(model.predict_with(forest, frame, PredictOutput::Margin, Some(&start)).unwrap());
    assert_eq!(cpu, gpu, "{what}: margins from a base margin");
    let wide: Vec<f32> = (0..n * model.n_outputs()).map(|i| (i % 1999) as f32 * 0.095 - 100.0).collect();
    let cpu = values(model.predict_with_base_margin(frame, &wide, PredictOutput::Value).unwrap());
    let gpu = values(model.predict_with(forest, frame, PredictOutput::Value, Some(&wide)).unwrap());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(&cpu) == bits(&gpu), "{what}: values from a wide base margin differ");
}

/// SHAP values (or interaction values) of `frame` through `forest`, with an optional per-row
/// starting margin.
pub fn shap(
    model: &Model,
    forest: &dyn polars_gbt::backend::Predictor,
    frame: &FeatureFrame,
    output: PredictOutput,
    base: Option<&[f32]>,
) -> Vec<f32> {
    values(model.predict_with(forest, frame, output, base).unwrap())
}

/// `got` against `want` within `rel` of the largest value (the GPU sums floats in no fixed
/// order; the CPU sums in f64).
pub fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale + rel * w.abs(),
            "{what}: value {i}: GPU {g}, expected {w} (scale {scale})"
        );
    }
}

/// The GPU's SHAP values against the CPU's exact TreeSHAP (the oracle, itself checked against
/// enumeration and against XGBoost and LightGBM): equal within float rounding, the bias bit
/// for bit, and each row's values summing to its margin. Interaction values on the first
/// `interaction_rows` rows.
pub fn assert_gpu_shap_as_cpu(model: &Model, frame: &FeatureFrame, small: &FeatureFrame, what: &str) {
    let forest = GpuForest::new(&model.forest_spec()).unwrap();
    let cpu_forest = FlatForest::new(&model.forest_spec());
    let (k, m) = (model.n_outputs(), model.features().len() + 1);
    let start: Vec<f32> = (0..frame.n_rows() * k).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
    for base in [None, Some(&start[..])] {
        let gpu = shap(model, &forest, frame, PredictOutput::Contrib, base);
        let cpu = shap(model, &cpu_forest, frame, PredictOutput::Contrib, base);
        assert_close(&gpu, &cpu, 1e-5, &format!("{what}: SHAP values"));
        for (g, c) in gpu.chunks(m).zip(cpu.chunks(m)) {
            assert_eq!(g[m - 1].to_bits(), c[m - 1].to_bits(), "{what}: the bias");
        }
        let margin = values(match base {
            Some(b) => model.predict_with_base_margin(frame, b, PredictOutput::Margin).unwrap(),
            None => model.predict(frame, PredictOutput::Margin).unwrap(),
        });
        let sums: Vec<f32> = gpu.chunks(m).map(|c| c.iter().map(|&v| v as f64).sum::<f64>() as f32).collect();
        assert_close(&sums, &margin, 1e-5, &format!("{what}: sums against margins"));
    }
    let gpu = shap(model, &forest, small, PredictOutput::Interaction, None);
    let cpu = shap(model, &cpu_forest, small, PredictOutput::Interaction, None);
    assert_close(&gpu, &cpu, 1e-5, &format!("{what}: interaction values"));
}

/// A dataset's rows handed out in batches of `size` (`Dataset::row_range`): a re-readable
/// source for `data::stream`.
pub struct RowBatches {
    pub data: Dataset,
    pub size: usize,
}

impl polars_gbt::data::BatchSource for RowBatches {
    fn n_rows(&mut self) -> polars_gbt::Result<Option<usize>> {
        Ok(Some(self.data.n_rows()))
    }

    fn pass(
        &mut self,
        each: &mut dyn FnMut(polars_gbt::data::Batch) -> polars_gbt::Result<()>,
    ) -> polars_gbt::Result<()> {
        let n = self.data.n_rows();
        for a in (0..n).step_by(self.size) {
            each(polars_gbt::data::Batch::new(self.data.row_range(a, self.size.min(n - a))?))?;
        }
        Ok(())
    }
}
