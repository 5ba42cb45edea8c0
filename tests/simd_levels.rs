//! Every vector level this machine can run (src/simd.rs: baseline, AVX2, AVX-512) trains the
//! same model, byte for byte: the hot loops are one portable body compiled for each level,
//! with no fused or reassociated arithmetic. The level is process-wide, so this binary holds
//! one test, which runs the levels one after another.

mod common;

use polars_gbt::simd::{self, Level};
use polars_gbt::{train, Dataset, TrainConfig};

fn fit_bytes(json: &str, data: &Dataset) -> Vec<u8> {
    let cfg = TrainConfig::from_json(json).unwrap();
    train(&cfg, data, &[]).unwrap_or_else(|e| panic!("fit of {json}: {e}")).to_bytes()
}

#[test]
fn every_level_the_cpu_has_trains_the_same_model_bytes() {
    let levels: Vec<Level> =
        [Level::Baseline, Level::Avx2, Level::Avx512].into_iter().filter(|&l| l <= simd::available()).collect();
    eprintln!("vector levels run here: {levels:?}");
    // Weighted Higgs rows (logistic gradients, histograms, subtraction, the split search),
    // the categorical file (category listings), the multiclass file, and an L1 loss.
    let binary = common::binary().train.dataset();
    let categorical = common::categorical().train.dataset();
    let multiclass = common::multiclass().train.dataset();
    let fits: [(&str, &Dataset); 5] = [
        (r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 6, "n_jobs": 2}"#, &binary),
        (
            r#"{"objective": "binary:logistic", "n_estimators": 6, "max_depth": 0, "grow_policy": "lossguide",
                "max_leaves": 63, "colsample_bynode": 0.7, "subsample": 0.8, "n_jobs": 2}"#,
            &binary,
        ),
        (r#"{"objective": "reg:squarederror", "n_estimators": 8, "max_depth": 5, "n_jobs": 2}"#, &categorical),
        (
            r#"{"objective": "multi:softprob", "num_class": 5, "n_estimators": 4, "max_depth": 5, "n_jobs": 2}"#,
            &multiclass,
        ),
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 6, "max_depth": 5, "n_jobs": 2}"#, &binary),
    ];
    for (json, data) in fits {
        simd::force(Some(Level::Baseline));
        let want = fit_bytes(json, data);
        for &level in &levels[1..] {
            simd::force(Some(level));
            assert!(fit_bytes(json, data) == want, "{json}: {level:?} trains other bytes than the baseline");
        }
    }
    simd::force(None);
}
