//! Property tests over random datasets (proptest): any size from one row, any mix of column
//! kinds (ordinary, constant, few distinct values, extreme magnitudes with subnormals and
//! -0.0, categorical), any missing rate from none to all, and labels that may hold a single
//! class. For every one: training succeeds without panicking, every prediction is finite,
//! the model survives its binary and JSON forms bit for bit, and neither the columns' order
//! nor their chunking changes anything. Ranking objectives train on query groups of one to four
//! rows, half of them single rows. `PROPTEST_CASES` sets how many datasets (default 24).

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array, StringArray};
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};
use proptest::prelude::*;

/// How one column's values are drawn.
#[derive(Clone, Debug)]
enum Kind {
    Ordinary,
    Constant(f32),
    FewDistinct,
    Extreme,
    Categorical(usize),
}

#[derive(Clone, Debug)]
struct ColumnSpec {
    kind: Kind,
    /// Percent of values that are null.
    missing: u32,
}

fn column_spec() -> impl Strategy<Value = ColumnSpec> {
    let kind = prop_oneof![
        3 => Just(Kind::Ordinary),
        1 => prop_oneof![Just(0.0f32), Just(-0.0f32), Just(7.5f32)].prop_map(Kind::Constant),
        1 => Just(Kind::FewDistinct),
        1 => Just(Kind::Extreme),
        2 => (1usize..7).prop_map(Kind::Categorical),
    ];
    (kind, prop_oneof![Just(0u32), Just(10), Just(50), Just(100)])
        .prop_map(|(kind, missing)| ColumnSpec { kind, missing })
}

/// Values the extreme columns draw from: the largest floats, subnormals, signed zeros.
const EXTREMES: [f32; 8] = [3.4e38, -3.4e38, f32::MIN_POSITIVE / 4.0, -1e-45, 0.0, -0.0, 1.0, f32::MAX];

/// A deterministic stream of numbers for one column.
fn draws(seed: u64, n: usize) -> Vec<u64> {
    (0..n as u64).map(|i| polars_gbt::random::hash64(seed, i)).collect()
}

fn build_column(name: &str, spec: &ColumnSpec, n: usize, seed: u64, chunks: usize) -> FeatureColumn {
    let r = draws(seed, n);
    let present = |i: usize| (r[i] % 100) as u32 >= spec.missing;
    let pieces = |n: usize| -> Vec<std::ops::Range<usize>> {
        let k = chunks.min(n).max(1);
        (0..k).map(|j| j * n / k..(j + 1) * n / k).collect()
    };
    match spec.kind {
        Kind::Categorical(k) => {
            let names: Vec<String> = (0..k).map(|c| format!("cat{c}")).collect();
            let keys: Vec<Option<i32>> = (0..n).map(|i| present(i).then(|| ((r[i] >> 8) % k as u64) as i32)).collect();
            let arrays = pieces(n)
                .into_iter()
                .map(|p| {
                    Arc::new(
                        DictionaryArray::<Int32Type>::try_new(
                            keys[p].to_vec().into(),
                            Arc::new(StringArray::from(names.clone())),
                        )
                        .unwrap(),
                    ) as ArrayRef
                })
                .collect();
            FeatureColumn::new(name, arrays).unwrap()
        }
        ref kind => {
            let value = |i: usize| -> f32 {
                let u = r[i] >> 11;
                match kind {
                    Kind::Constant(c) => *c,
                    Kind::FewDistinct => (u % 3) as f32,
                    Kind::Extreme => EXTREMES[(u % EXTREMES.len() as u64) as usize],
                    _ => (u % 2_000_000) as f32 / 1000.0 - 1000.0,
                }
            };
            let values: Vec<Option<f32>> = (0..n).map(|i| present(i).then(|| value(i))).collect();
            let arrays =
                pieces(n).into_iter().map(|p| Arc::new(Float32Array::from(values[p].to_vec())) as ArrayRef).collect();
            FeatureColumn::new(name, arrays).unwrap()
        }
    }
}

fn frame(specs: &[ColumnSpec], n: usize, seed: u64, chunks: usize, reversed: bool) -> FeatureFrame {
    let mut cols: Vec<FeatureColumn> = specs
        .iter()
        .enumerate()
        .map(|(j, s)| build_column(&format!("c{j}"), s, n, seed ^ (j as u64 * 0x9E37), chunks))
        .collect();
    if reversed {
        cols.reverse();
    }
    FeatureFrame::new(cols).unwrap()
}

fn all_missing(c: &FeatureColumn, n: usize) -> bool {
    let mut buf = vec![0f32; n];
    c.read(0, &mut buf);
    buf.iter().all(|v| v.is_nan())
}

fn floats(p: Predictions) -> Vec<f32> {
    match p {
        Predictions::Float { values, .. } => values,
        Predictions::Index { values, .. } => values.into_iter().map(|v| v as f32).collect(),
    }
}

#[derive(Clone, Debug)]
enum Task {
    Regression,
    Binary,
    Multiclass,
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_dataset_trains_predicts_finitely_and_round_trips(
        n in prop_oneof![Just(1usize), Just(2), 3usize..60, 60usize..1500],
        specs in prop::collection::vec(column_spec(), 1..7),
        task in prop_oneof![Just(Task::Regression), Just(Task::Binary), Just(Task::Multiclass)],
        one_class in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let data_frame = frame(&specs, n, seed, 1, false);
        let r = draws(seed ^ 0x1abe1, n);
        let (json, label): (&str, Vec<f32>) = match task {
            Task::Regression => (r#"{"n_estimators": 4, "max_depth": 3}"#,
                                 r.iter().map(|v| (v % 1000) as f32 / 100.0).collect()),
            Task::Binary => (r#"{"objective": "binary:logistic", "n_estimators": 4, "max_depth": 3}"#,
                             r.iter().map(|v| if one_class { 1.0 } else { (v % 2) as f32 }).collect()),
            Task::Multiclass => (r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 3, "max_depth": 3}"#,
                                 r.iter().map(|v| if one_class { 2.0 } else { (v % 3) as f32 }).collect()),
        };
        let cfg = TrainConfig::from_json(json).unwrap();
        let model = match train(&cfg, &Dataset::new(data_frame.clone(), label.clone()).unwrap(), &[]) {
            Ok(m) => m,
            // The one refusal allowed: nothing at all to split on, said so.
            Err(e) if data_frame.columns().iter().all(|c| all_missing(c, n)) => {
                prop_assert!(e.to_string().contains("entirely missing"), "{e}");
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("training failed: {e}"))),
        };

        // Every output is finite.
        for output in [PredictOutput::Margin, PredictOutput::Value, PredictOutput::Leaf] {
            let p = floats(model.predict(&data_frame, output).unwrap());
            prop_assert!(p.iter().all(|v| v.is_finite()), "{output:?} has a non-finite value");
        }

        // Binary and JSON forms round-trip bit for bit.
        let bytes = model.to_bytes();
        prop_assert_eq!(&Model::from_bytes(&bytes).unwrap().to_bytes(), &bytes);
        prop_assert_eq!(&Model::from_json(&model.to_json()).unwrap().to_bytes(), &bytes);

        // Chunking the columns changes nothing, in training or prediction.
        let chunked = frame(&specs, n, seed, 5, false);
        let again = train(&cfg, &Dataset::new(chunked.clone(), label).unwrap(), &[]).unwrap();
        prop_assert_eq!(&again.to_bytes(), &bytes);
        let margin = floats(model.predict(&data_frame, PredictOutput::Margin).unwrap());
        prop_assert_eq!(&floats(model.predict(&chunked, PredictOutput::Margin).unwrap()), &margin);

        // Columns are matched by name: their order does not matter.
        let reversed = frame(&specs, n, seed, 3, true);
        prop_assert_eq!(&floats(model.predict(&reversed, PredictOutput::Margin).unwrap()), &margin);
    }

    #[test]
    fn ranking_with_single_row_query_groups_trains(
        n in 1usize..400,
        specs in prop::collection::vec(column_spec(), 1..4),
        which in 0usize..3,
        seed in any::<u64>(),
    ) {
        // Query groups of 1 to 4 rows, half of them single rows.
        let r = draws(seed ^ 0x9e3779b9, n);
        let mut ids = Vec::with_capacity(n);
        let (mut group, mut left) = (0i64, 0u64);
        for v in &r {
            if left == 0 {
                group += 1;
                left = if v % 2 == 0 { 1 } else { 1 + v % 4 };
            }
            ids.push(group);
            left -= 1;
        }
        let objective = ["rank:pairwise", "rank:ndcg", "rank:map"][which];
        // rank:map takes binary relevance.
        let levels = if objective == "rank:map" { 2 } else { 5 };
        let label: Vec<f32> = r.iter().map(|v| ((v >> 8) % levels) as f32).collect();
        let frame = frame(&specs, n, seed, 1, false);
        let cfg = TrainConfig::from_json(&format!(r#"{{"objective": "{objective}", "n_estimators": 3, "max_depth": 3}}"#)).unwrap();
        let data = Dataset::new(frame.clone(), label).unwrap().with_group_ids(&ids).unwrap();
        match train(&cfg, &data, &[]) {
            Ok(model) => {
                let p = floats(model.predict(&frame, PredictOutput::Margin).unwrap());
                prop_assert!(p.iter().all(|v| v.is_finite()));
                prop_assert_eq!(&Model::from_bytes(&model.to_bytes()).unwrap().to_bytes(), &model.to_bytes());
            }
            Err(e) if frame.columns().iter().all(|c| all_missing(c, n)) => {
                prop_assert!(e.to_string().contains("entirely missing"), "{e}");
            }
            Err(e) => return Err(TestCaseError::fail(format!("ranking fit failed: {e}"))),
        }
    }

    #[test]
    fn unseen_categories_at_prediction_are_scored(k in 2usize..6, seed in any::<u64>()) {
        let spec = ColumnSpec { kind: Kind::Categorical(k), missing: 10 };
        let train_frame = frame(std::slice::from_ref(&spec), 300, seed, 1, false);
        let label: Vec<f32> = draws(seed, 300).iter().map(|v| (v % 5) as f32).collect();
        let model = train(&TrainConfig::from_json(r#"{"n_estimators": 3}"#).unwrap(),
                          &Dataset::new(train_frame, label).unwrap(), &[]).unwrap();
        // Prediction sees categories training never did, beside known ones and nulls.
        let names = StringArray::from(vec!["cat0", "never-seen", "cat1", "another"]);
        let keys = vec![Some(1), Some(3), None, Some(0)];
        let dict = DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(names)).unwrap();
        let unseen = FeatureFrame::new(vec![FeatureColumn::new("c0", vec![Arc::new(dict) as ArrayRef]).unwrap()]).unwrap();
        let p = floats(model.predict(&unseen, PredictOutput::Value).unwrap());
        prop_assert_eq!(p.len(), 4);
        prop_assert!(p.iter().all(|v| v.is_finite()));
    }
}
