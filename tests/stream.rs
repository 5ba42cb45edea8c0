//! A fit streamed in batches (`data::stream`: cut points, categories and targets in pass 1,
//! bins in pass 2) is byte-identical to the fit on the collected rows, whatever the batching.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, Int32Array, RecordBatch, StringArray};
use polars_gbt::data::{stream_dataset, Batch, BatchSource, RecordBatches, StreamParams};
use polars_gbt::{train, Dataset, FeatureFrame, Result, TrainConfig};

fn params(cfg: &TrainConfig) -> StreamParams {
    StreamParams {
        max_bin: cfg.max_bin,
        seed: cfg.seed,
        missing: cfg.missing.map(|m| m as f32),
        scale_pos_weight: cfg.scale_pos_weight as f32,
    }
}

/// Rows `start..end` as a record batch: floats with nulls, a float64, an integer, a string
/// categorical whose category "late" appears only from row `late` on, and the label.
fn batch(start: usize, end: usize, late: usize) -> RecordBatch {
    let r = start..end;
    let x0: Vec<Option<f32>> = r.clone().map(|i| (i % 13 != 0).then(|| ((i * 7919) % 1000) as f32 / 9.0)).collect();
    let x1: Vec<f64> = r.clone().map(|i| ((i * 104_729) % 997) as f64 - 400.0).collect();
    let x2: Vec<Option<i32>> = r.clone().map(|i| (i % 5 != 1).then_some((i % 37) as i32)).collect();
    let c: Vec<Option<&str>> = r
        .clone()
        .map(|i| match i % 7 {
            0 => None,
            _ if i >= late && i % 3 == 0 => Some("late"),
            k => Some(["a", "b", "c", "d", "e", "f"][k - 1]),
        })
        .collect();
    let y: Vec<f32> = r
        .clone()
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 + if i >= late && i % 3 == 0 { 2.0 } else { (i % 7) as f32 * 0.1 })
        .collect();
    RecordBatch::try_from_iter([
        ("x0", Arc::new(Float32Array::from(x0)) as ArrayRef),
        ("x1", Arc::new(Float64Array::from(x1)) as ArrayRef),
        ("x2", Arc::new(Int32Array::from(x2)) as ArrayRef),
        ("c", Arc::new(StringArray::from(c)) as ArrayRef),
        ("y", Arc::new(Float32Array::from(y)) as ArrayRef),
    ])
    .unwrap()
}

/// The batches of `n` rows cut at `sizes` (cycled), the last taking what is left.
fn cut(n: usize, sizes: &[usize]) -> Vec<(usize, usize)> {
    let (mut out, mut at) = (Vec::new(), 0);
    for &s in sizes.iter().cycle() {
        let end = (at + s).min(n);
        out.push((at, end));
        at = end;
        if at == n {
            return out;
        }
    }
    unreachable!()
}

fn collected(n: usize, late: usize) -> Dataset {
    let parts: Vec<RecordBatch> = cut(n, &[n / 3 + 1]).into_iter().map(|(a, b)| batch(a, b, late)).collect();
    let frame = FeatureFrame::from_record_batches(&parts).unwrap();
    let y = frame.find("y").unwrap();
    let mut label = vec![0f32; n];
    y.read(0, &mut label);
    Dataset::new(frame.without(&["y"]).unwrap(), label).unwrap()
}

fn streamed(cfg: &TrainConfig, n: usize, late: usize, sizes: &[usize]) -> Dataset {
    let spans = cut(n, sizes);
    let mut source = RecordBatches::new(|| Ok(spans.iter().map(|&(a, b)| Ok(batch(a, b, late)))), "y");
    stream_dataset(&mut source, &params(cfg)).unwrap()
}

#[test]
fn record_batches_stream_to_the_collected_model() {
    // Past 2^18 rows, so the cut points come from a sample drawn by global row.
    let (n, late) = (300_000, 290_000);
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 4, "max_depth": 4, "max_bin": 64, "seed": 3}"#).unwrap();
    let whole = train(&cfg, &collected(n, late), &[]).unwrap().to_bytes();
    for sizes in [&[n][..], &[65_536], &[100_003, 7, 1, 49_999]] {
        let model = train(&cfg, &streamed(&cfg, n, late, sizes), &[]).unwrap();
        assert!(model.to_bytes() == whole, "batches of {sizes:?} give another model");
    }
}

#[test]
fn batches_of_one_row_stream_to_the_collected_model() {
    let (n, late) = (700, 650);
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 5, "max_depth": 3, "max_cat_to_onehot": 1}"#).unwrap();
    let whole = train(&cfg, &collected(n, late), &[]).unwrap();
    let one = train(&cfg, &streamed(&cfg, n, late, &[1]), &[]).unwrap();
    assert!(one.to_bytes() == whole.to_bytes());
    let late_codes = one.features().iter().find(|f| f.name == "c").unwrap().categories.clone().unwrap();
    assert_eq!(late_codes, ["a", "b", "c", "d", "e", "f", "late"]);
}

/// A dataset's rows handed out in batches (`Dataset::row_range`), query ids beside them.
struct Slices {
    data: Dataset,
    ids: Option<Vec<i64>>,
    spans: Vec<(usize, usize)>,
    /// Rows dropped from the last batch on every pass after the first (a changing source).
    shrink_after_first: usize,
    passes: usize,
}

impl BatchSource for Slices {
    fn n_rows(&mut self) -> Result<Option<usize>> {
        Ok(Some(self.data.n_rows()))
    }

    fn pass(&mut self, each: &mut dyn FnMut(Batch) -> Result<()>) -> Result<()> {
        self.passes += 1;
        let last = self.spans.len() - 1;
        for (i, &(a, b)) in self.spans.iter().enumerate() {
            let b = if i == last && self.passes > 1 { b - self.shrink_after_first } else { b };
            let data = self.data.row_range(a, b - a)?;
            each(Batch { data, group_ids: self.ids.as_ref().map(|ids| ids[a..b].to_vec()) })?;
        }
        Ok(())
    }
}

fn slices(data: &Dataset, ids: Option<Vec<i64>>, sizes: &[usize]) -> Slices {
    Slices { data: data.clone(), ids, spans: cut(data.n_rows(), sizes), shrink_after_first: 0, passes: 0 }
}

#[test]
fn weights_margins_targets_groups_and_parameters_stream_alike() {
    let n = 3_000;
    let base = collected(n, 2_500);
    let features = base.features().clone();
    let w: Vec<f32> = (0..n).map(|i| [0.5, 1.0, 2.0, 0.0][i % 4]).collect();
    let y: Vec<f32> = base.label().iter().map(|&v| (v > 1.2) as u8 as f32).collect();
    let margin: Vec<f32> = (0..n).map(|i| (i % 10) as f32 * 0.05).collect();
    // Weighted logistic with a base margin, scale_pos_weight and a missing sentinel.
    let d = Dataset::new(features.clone(), y.clone())
        .unwrap()
        .with_weight(w.clone())
        .unwrap()
        .with_base_margin(margin)
        .unwrap();
    let cfg = TrainConfig::from_json(
        r#"{"objective": "binary:logistic", "n_estimators": 4, "max_depth": 3, "scale_pos_weight": 2.5, "missing": 0.0}"#,
    )
    .unwrap();
    let whole = train(&cfg, &d, &[]).unwrap().to_bytes();
    for sizes in [&[1_000][..], &[1, 2, 997]] {
        let s = stream_dataset(&mut slices(&d, None, sizes), &params(&cfg)).unwrap();
        assert!(train(&cfg, &s, &[]).unwrap().to_bytes() == whole, "logistic, batches of {sizes:?}");
    }
    // Two targets.
    let two: Vec<f32> = base.label().iter().chain(y.iter()).copied().collect();
    let d = Dataset::with_labels(features.clone(), two.into(), 2).unwrap().with_weight(w).unwrap();
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 3, "max_depth": 3}"#).unwrap();
    let s = stream_dataset(&mut slices(&d, None, &[333]), &params(&cfg)).unwrap();
    assert!(train(&cfg, &s, &[]).unwrap().to_bytes() == train(&cfg, &d, &[]).unwrap().to_bytes(), "two targets");
    // Ranking: query groups that cross batch boundaries.
    let ids: Vec<i64> = (0..n as i64).map(|i| i / 25).collect();
    let rel: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
    let d = Dataset::new(features, rel).unwrap();
    let cfg = TrainConfig::from_json(r#"{"objective": "rank:ndcg", "n_estimators": 3, "max_depth": 3}"#).unwrap();
    let s = stream_dataset(&mut slices(&d, Some(ids.clone()), &[7, 101]), &params(&cfg)).unwrap();
    let d = d.with_group_ids(&ids).unwrap();
    assert!(train(&cfg, &s, &[]).unwrap().to_bytes() == train(&cfg, &d, &[]).unwrap().to_bytes(), "ranking");
}

#[test]
fn a_source_that_changes_between_passes_is_an_error() {
    let d = collected(1_000, 900);
    let cfg = TrainConfig::default();
    let mut source = slices(&d, None, &[300]);
    source.shrink_after_first = 5;
    let err = stream_dataset(&mut source, &params(&cfg)).unwrap_err().to_string();
    assert!(err.contains("reads its data twice"), "{err}");
    // Streamed rows cannot be split (a distributed fit, continued training take columns).
    let s = stream_dataset(&mut slices(&d, None, &[300]), &params(&cfg)).unwrap();
    assert!(s.row_range(0, 10).is_err());
    let init = train(&cfg, &d, &[]).unwrap();
    let err = polars_gbt::Training::new(&cfg, &s).init_model(&init).run().unwrap_err().to_string();
    assert!(err.contains("streamed"), "{err}");
}
