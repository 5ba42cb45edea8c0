//! A CPU fit that cannot fit in memory fails before it allocates, naming the sizes. Its own
//! test binary: it sets `POLARS_GBT_MEMORY_LIMIT` for the whole process.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, TrainConfig};

#[test]
fn a_fit_beyond_the_memory_limit_fails_early_and_clearly() {
    let n = 200_000;
    let columns = (0..8)
        .map(|j| {
            let v: Vec<f32> = (0..n).map(|i| ((i * (j + 3)) % 1013) as f32).collect();
            FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(v)) as ArrayRef]).unwrap()
        })
        .collect();
    let data = Dataset::new(FeatureFrame::new(columns).unwrap(), (0..n).map(|i| (i % 5) as f32).collect()).unwrap();
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 2, "max_depth": 3}"#).unwrap();
    // About 4.8 MB are needed (bins and per-row state): 1 MB is not enough.
    std::env::set_var("POLARS_GBT_MEMORY_LIMIT", "1000000");
    let clock = std::time::Instant::now();
    let e = train(&cfg, &data, &[]).expect_err("the limit is too small").to_string();
    assert!(e.contains("200000 rows x 8 features needs about") && e.contains("GiB are available"), "{e}");
    assert!(clock.elapsed().as_secs_f64() < 5.0);
    // With room, the same fit runs.
    std::env::set_var("POLARS_GBT_MEMORY_LIMIT", "100000000");
    assert!(train(&cfg, &data, &[]).is_ok());
}
