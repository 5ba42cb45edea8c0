//! A fit streamed in batches (`data::stream`: cut points and categories in pass 1, bins and
//! their rows' targets in pass 2) is byte-identical to the fit on the collected rows, whatever
//! the batching, and so is a distributed fit whose workers each stream their own rows. A
//! source that gives its rows in another order on each pass trains on each row's own label.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use polars_gbt::data::{
    stream_dataset, stream_dataset_sharded, stream_dataset_with_progress, stream_eval_set, stream_eval_set_sharded,
    Batch, BatchSource, Pass, RecordBatches, StreamParams,
};
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
    batch_of(&(start..end).collect::<Vec<_>>(), late)
}

/// The rows `rows` (in that order) as a record batch, as [`batch`] makes them.
fn batch_of(rows: &[usize], late: usize) -> RecordBatch {
    let r = rows.iter().copied();
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
    collected_rows(0, n, late)
}

/// Rows `start..end` collected (in three chunks).
fn collected_rows(start: usize, end: usize, late: usize) -> Dataset {
    let n = end - start;
    let parts: Vec<RecordBatch> =
        cut(n, &[n / 3 + 1]).into_iter().map(|(a, b)| batch(start + a, start + b, late)).collect();
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
    // Streamed rows split as windows on the one matrix (a fit over several GPUs), never
    // copied; continued training takes columns.
    let s = stream_dataset(&mut slices(&d, None, &[300]), &params(&cfg)).unwrap();
    let window = s.row_range(100, 20).unwrap();
    let (whole, part) = (s.binned().unwrap(), window.binned().unwrap());
    assert!(std::ptr::eq(whole.all, part.all) && (part.first, part.n_rows) == (100, 20));
    assert_eq!(window.n_rows(), 20);
    assert_eq!(window.label(), &s.label()[100..120]);
    assert!((0..20).all(|r| (0..4).all(|f| part.matrix().get(r, f) == whole.all.matrix.get(100 + r, f))));
    let init = train(&cfg, &d, &[]).unwrap();
    let err = polars_gbt::Training::new(&cfg, &s).init_model(&init).run().unwrap_err().to_string();
    assert!(err.contains("streamed"), "{err}");
}

/// Rows `0..n` given in another order on every pass (shuffled, then cut into batches of
/// `size`), as an unordered join of Polars' streaming engine gives them; on the passes listed
/// in `relabel`, one row's label is changed (a source whose files changed between passes).
struct Reordered {
    n: usize,
    late: usize,
    size: usize,
    passes: u64,
    relabel: Vec<u64>,
}

impl BatchSource for Reordered {
    fn n_rows(&mut self) -> Result<Option<usize>> {
        Ok(Some(self.n))
    }

    fn pass(&mut self, each: &mut dyn FnMut(Batch) -> Result<()>) -> Result<()> {
        self.passes += 1;
        let mut rows: Vec<usize> = (0..self.n).collect();
        let mut rng = polars_gbt::random::Rng::new(self.passes, 11);
        for i in (1..rows.len()).rev() {
            rows.swap(i, rng.below(i + 1));
        }
        for chunk in rows.chunks(self.size) {
            let mut b = batch_of(chunk, self.late);
            if self.relabel.contains(&self.passes) && chunk.contains(&17) {
                b = relabelled(b, chunk.iter().position(|&r| r == 17).unwrap());
            }
            each(Batch::new(Dataset::from_record_batch(&b, "y")?))?;
        }
        Ok(())
    }
}

/// `b` with row `i`'s label (the last column) raised by one.
fn relabelled(b: RecordBatch, i: usize) -> RecordBatch {
    let mut cols = b.columns().to_vec();
    let y = cols[4].as_any().downcast_ref::<Float32Array>().unwrap();
    let y: Vec<f32> = y.values().iter().enumerate().map(|(r, &v)| if r == i { v + 1.0 } else { v }).collect();
    cols[4] = Arc::new(Float32Array::from(y));
    RecordBatch::try_new(b.schema(), cols).unwrap()
}

#[test]
fn a_source_that_reorders_its_rows_on_every_pass_trains_on_each_rows_own_label() {
    // Below 2^18 rows every row is in the cut points' sample, so the cuts, and with them the
    // model, are those of the collected rows whatever order the passes give (issue 52: pass 1
    // once kept the labels and pass 2 the bins, each in its own order).
    let (n, late) = (20_000, 15_000);
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 4, "max_depth": 4, "max_bin": 64}"#).unwrap();
    let whole = train(&cfg, &collected(n, late), &[]).unwrap();
    let mut source = Reordered { n, late, size: 3_001, passes: 0, relabel: vec![] };
    let streamed = stream_dataset(&mut source, &params(&cfg)).unwrap();
    assert_eq!(source.passes, 2);
    let model = train(&cfg, &streamed, &[]).unwrap();
    assert!(model.to_bytes() == whole.to_bytes(), "a reordering source gives another model");
    // Past 2^18 rows the sample depends on the order (issue 57): another model, as good.
    let (n, late) = (300_000, 290_000);
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 6, "max_depth": 5, "max_bin": 64, "seed": 3}"#).unwrap();
    let data = collected(n, late);
    let rmse = |m: &polars_gbt::Model| {
        let polars_gbt::Predictions::Float { values: p, .. } =
            m.predict(data.features(), polars_gbt::PredictOutput::Value).unwrap()
        else {
            panic!("a regression's values are floats")
        };
        let se: f64 = p.iter().zip(data.label()).map(|(p, y)| (*p as f64 - *y as f64).powi(2)).sum();
        (se / n as f64).sqrt()
    };
    let want = rmse(&train(&cfg, &data, &[]).unwrap());
    let mut source = Reordered { n, late, size: 65_536, passes: 0, relabel: vec![] };
    let got = rmse(&train(&cfg, &stream_dataset(&mut source, &params(&cfg)).unwrap(), &[]).unwrap());
    assert!((got - want).abs() < 0.01 * want, "rmse {got} streamed reordered, {want} collected");
}

#[test]
fn a_source_whose_rows_change_between_passes_but_not_their_number_is_an_error() {
    let cfg = TrainConfig::default();
    for relabel in [1, 2] {
        let mut source = Reordered { n: 5_000, late: 4_000, size: 999, passes: 0, relabel: vec![relabel] };
        let err = stream_dataset(&mut source, &params(&cfg)).unwrap_err().to_string();
        assert!(err.starts_with("invalid data: the data gave other rows when read again"), "{err}");
        assert!(err.contains("the same number (5000) but other labels"), "{err}");
    }
    // The same change on both passes is the same rows.
    let mut source = Reordered { n: 5_000, late: 4_000, size: 999, passes: 0, relabel: vec![1, 2] };
    assert_eq!(stream_dataset(&mut source, &params(&cfg)).unwrap().n_rows(), 5_000);
}

/// Record batches of rows `start..end` cut at `sizes`, as a source that does not know its
/// row count (an Arrow stream from a callable, a one-shot reader).
fn record_source(start: usize, end: usize, late: usize, sizes: &[usize]) -> impl BatchSource {
    let spans: Vec<(usize, usize)> = cut(end - start, sizes).into_iter().map(|(a, b)| (a + start, b + start)).collect();
    RecordBatches::new(move || Ok(spans.clone().into_iter().map(move |(a, b)| Ok(batch(a, b, late)))), "y")
}

#[test]
fn streamed_evaluation_sets_give_the_collected_fit_and_early_stopping() {
    // Training rows 0..3,000; evaluation rows 3,000..4,000, whose category "late" (from row
    // 3,500) the training rows never saw: it reads as unseen, as a collected set's does.
    let (n, late) = (4_000, 3_500);
    let cfg = TrainConfig::from_json(
        r#"{"n_estimators": 40, "max_depth": 3, "eta": 0.3, "early_stopping_rounds": 2, "eval_metric": ["rmse", "mae"]}"#,
    )
    .unwrap();
    let (train_rows, valid_rows) = (collected_rows(0, 3_000, late), collected_rows(3_000, n, late));
    let whole = train(&cfg, &train_rows, &[("valid", &valid_rows)]).unwrap();
    assert!(whole.best_iteration().is_some_and(|b| b + 1 < 40), "early stopping stopped the collected fit");
    let streamed_train = stream_dataset(&mut record_source(0, 3_000, late, &[999]), &params(&cfg)).unwrap();
    for sizes in [&[1_000][..], &[1, 333, 77]] {
        let valid =
            stream_eval_set(&mut record_source(3_000, n, late, sizes), &streamed_train, None, "valid", &mut |_| {})
                .unwrap();
        assert_eq!(valid.n_rows(), 1_000);
        let model = train(&cfg, &streamed_train, &[("valid", &valid)]).unwrap();
        assert!(model.to_bytes() == whole.to_bytes(), "evaluation batches of {sizes:?} give another model");
        assert_eq!(model.evals_result(), whole.evals_result());
    }
}

#[test]
fn a_streamed_evaluation_set_is_checked_against_the_training_features() {
    let cfg = TrainConfig::default();
    let data = stream_dataset(&mut record_source(0, 2_000, 1_500, &[500]), &params(&cfg)).unwrap();
    // A collected training set has no cut points to bin with yet.
    let collected_train = collected(2_000, 1_500);
    let err = stream_eval_set(&mut record_source(0, 100, 50, &[50]), &collected_train, None, "valid", &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("eval set `valid` streams with a streamed training set"), "{err}");
    // A feature missing, or numeric where the training column was categorical.
    let drop_x1 = |b: RecordBatch| b.project(&[0, 2, 3, 4]).unwrap();
    let mut missing = RecordBatches::new(|| Ok((0..2).map(move |i| Ok(drop_x1(batch(i * 50, i * 50 + 50, 60))))), "y");
    let err = stream_eval_set(&mut missing, &data, None, "valid", &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("eval set `valid`: columns missing for the training features: x1"), "{err}");
    let mut numeric = RecordBatches::new(|| Ok(std::iter::once(Ok(numeric_c(batch(0, 50, 60))))), "y");
    let err = stream_eval_set(&mut numeric, &data, None, "test", &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("column `c of eval set `test``: was categorical in training"), "{err}");
    // A null label names the evaluation set.
    let null_y = |b: RecordBatch| {
        let mut cols = b.columns().to_vec();
        cols[4] = Arc::new(Float32Array::from(vec![None; b.num_rows()]));
        let fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
    };
    let mut nulls = RecordBatches::new(|| Ok(std::iter::once(Ok(null_y(batch(0, 50, 60))))), "y");
    let err = stream_eval_set(&mut nulls, &data, None, "valid", &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("column `y of eval set `valid``: has 50 null values"), "{err}");
    let mut empty = RecordBatches::new(|| Ok(std::iter::empty::<Result<RecordBatch>>()), "y");
    let err = stream_eval_set(&mut empty, &data, None, "valid", &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("eval set `valid` has no rows"), "{err}");
}

#[test]
fn every_pass_reports_its_rows() {
    let cfg = TrainConfig::default();
    let mut seen: Vec<(String, usize, Option<usize>, bool)> = Vec::new();
    let mut note = |p: &polars_gbt::data::PassProgress| seen.push((format!("{:?}", p.pass), p.rows, p.total, p.done));
    // A source that does not know its rows: a pass counts them first.
    let data =
        stream_dataset_with_progress(&mut record_source(0, 1_000, 900, &[400]), &params(&cfg), &mut note).unwrap();
    stream_eval_set(&mut record_source(1_000, 1_100, 900, &[60]), &data, None, "valid", &mut note).unwrap();
    let expected = [
        ("Count", 400, None, false),
        ("Count", 800, None, false),
        ("Count", 1_000, None, false),
        ("Count", 1_000, None, true),
        ("CutPoints", 400, Some(1_000), false),
        ("CutPoints", 800, Some(1_000), false),
        ("CutPoints", 1_000, Some(1_000), false),
        ("CutPoints", 1_000, Some(1_000), true),
        ("Binning", 400, Some(1_000), false),
        ("Binning", 800, Some(1_000), false),
        ("Binning", 1_000, Some(1_000), false),
        ("Binning", 1_000, Some(1_000), true),
        ("Eval(\"valid\")", 60, None, false),
        ("Eval(\"valid\")", 100, None, false),
        ("Eval(\"valid\")", 100, None, true),
    ];
    let expected: Vec<(String, usize, Option<usize>, bool)> =
        expected.iter().map(|&(p, r, t, d)| (p.to_string(), r, t, d)).collect();
    assert_eq!(seen, expected);
    assert_eq!(Pass::Eval("valid"), Pass::Eval("valid"));
}

/// Rows of `spans` (runs of `start..end`) collected, as one worker holding them would have
/// them (its categorical column coded by the categories of its own rows).
fn collected_spans(spans: &[(usize, usize)], late: usize) -> Dataset {
    let parts: Vec<RecordBatch> = spans.iter().map(|&(a, b)| batch(a, b, late)).collect();
    let frame = FeatureFrame::from_record_batches(&parts).unwrap();
    let n = frame.n_rows();
    let mut label = vec![0f32; n];
    frame.find("y").unwrap().read(0, &mut label);
    Dataset::new(frame.without(&["y"]).unwrap(), label).unwrap()
}

/// A source of no batches: a worker that holds none of an evaluation set's rows.
struct Nothing;

impl BatchSource for Nothing {
    fn pass(&mut self, _: &mut dyn FnMut(Batch) -> Result<()>) -> Result<()> {
        Ok(())
    }
}

#[test]
fn workers_that_each_stream_their_own_rows_give_one_process_model() {
    use common::distributed::on_ring;
    use polars_gbt::collective::{Collective, RowSpans, Shard};

    // Past 2^18 rows (the cut points' sample is drawn by global row). The category "late"
    // (from row 290,000) is on worker 0 only; worker 0's rows are two runs, and its batches
    // cross from one to the other; worker 1 holds 7 rows.
    let (n, late) = (300_000, 290_000);
    let shards: Vec<Vec<(usize, usize)>> =
        vec![vec![(0, 60_000), (250_000, 300_000)], vec![(60_000, 60_007)], vec![(60_007, 250_000)]];
    // The evaluation rows: none on worker 0.
    let (v0, v1) = (n, n + 4_000);
    let eval_shards: Vec<Vec<(usize, usize)>> = vec![vec![], vec![(v0 + 3_000, v1)], vec![(v0, v0 + 3_000)]];
    let cfg = TrainConfig::from_json(
        r#"{"n_estimators": 6, "max_depth": 4, "max_bin": 64, "seed": 3, "subsample": 0.8, "max_cat_to_onehot": 1,
            "eval_metric": ["rmse"]}"#,
    )
    .unwrap();
    let valid = collected_rows(v0, v1, late);
    let want = train(&cfg, &collected(n, late), &[("valid", &valid)]).unwrap();
    let (want_bytes, want_log) = (want.to_bytes(), want.evals_result().to_vec());
    let runs = |spans: &[(usize, usize)], base: usize| {
        spans.iter().map(|&(a, b)| ((a - base) as u64, (b - a) as u64)).collect()
    };
    let models = on_ring(3, move |ring| {
        let rank = ring.rank();
        let shard = Shard {
            comm: ring,
            rows: RowSpans::new(runs(&shards[rank], 0), n as u64)?,
            evals: vec![RowSpans::new(runs(&eval_shards[rank], v0), (v1 - v0) as u64)?],
        };
        let stream = params(&cfg);
        let share = shard.stream_share();
        let mut source = slices(&collected_spans(&shards[rank], late), None, &[45_000, 20_000]);
        let data = stream_dataset_sharded(&mut source, &stream, &share, &mut |_| {})?;
        let valid = match eval_shards[rank].as_slice() {
            [] => stream_eval_set_sharded(&mut Nothing, &data, None, "valid", &mut |_| {})?,
            spans => {
                let mut rows = slices(&collected_spans(spans, late), None, &[999]);
                stream_eval_set_sharded(&mut rows, &data, None, "valid", &mut |_| {})?
            }
        };
        let model = polars_gbt::Training::new(&cfg, &data).evals(&[("valid", &valid)]).shard(&shard).run()?;
        Ok((model.to_bytes(), model.evals_result().to_vec()))
    });
    for (rank, got) in models.into_iter().enumerate() {
        let (bytes, log) = got.unwrap_or_else(|e| panic!("worker {rank}: {e}"));
        assert!(bytes == want_bytes, "worker {rank}'s streamed model differs from one process's");
        assert_eq!(log, want_log, "worker {rank}'s evaluation log");
    }
}

#[test]
fn a_workers_stream_must_hold_the_rows_its_spans_say() {
    use polars_gbt::collective::{RowSpans, Shard, Solo};

    let cfg = TrainConfig::default();
    let shard = Shard { comm: &Solo, rows: RowSpans::new(vec![(0, 150)], 300).unwrap(), evals: Vec::new() };
    let share = shard.stream_share();
    let mut source = slices(&collected(200, 150), None, &[64]);
    let err = stream_dataset_sharded(&mut source, &params(&cfg), &share, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("this worker's data has 200 rows but its row spans count 150"), "{err}");
}

/// Two workers on a ring, each streaming its 500 rows of 1,000 (batches of 250), worker r's
/// batches changed by `alter(r, batch)`: each worker's result.
fn two_workers_streaming(alter: fn(usize, RecordBatch) -> RecordBatch) -> Vec<Result<()>> {
    use common::distributed::on_ring;
    use polars_gbt::collective::{Collective, RowSpans, Shard};

    on_ring(2, move |ring| {
        let rank = ring.rank();
        let shard =
            Shard { comm: ring, rows: RowSpans::new(vec![(rank as u64 * 500, 500)], 1_000)?, evals: Vec::new() };
        let share = shard.stream_share();
        let start = rank * 500;
        let mut source = RecordBatches::new(
            move || Ok((0..2).map(move |i| Ok(alter(rank, batch(start + i * 250, start + i * 250 + 250, 900))))),
            "y",
        );
        stream_dataset_sharded(&mut source, &params(&TrainConfig::default()), &share, &mut |_| {}).map(|_| ())
    })
}

/// `b` with its categorical column `c` (the fourth) replaced by a numeric one.
fn numeric_c(b: RecordBatch) -> RecordBatch {
    let mut cols = b.columns().to_vec();
    cols[3] = Arc::new(Float32Array::from(vec![1.0f32; b.num_rows()]));
    let mut fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[3] = Field::new("c", DataType::Float32, true);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

#[test]
fn workers_whose_streams_disagree_on_a_features_kind_each_say_so() {
    // Column `c` is categorical on worker 0 and numeric on worker 1: each worker's pass 1 is
    // fine alone, and both stop at the exchange that ends it, neither waiting for the other.
    let results = two_workers_streaming(|rank, b| if rank == 1 { numeric_c(b) } else { b });
    for (rank, r) in results.into_iter().enumerate() {
        let err = r.expect_err("the workers disagree").to_string();
        assert!(err.contains("disagree on which features are categorical"), "worker {rank}: {err}");
    }
}

#[test]
fn workers_whose_streams_have_other_features_each_say_so() {
    // Worker 1's batches lack `x1`.
    let results = two_workers_streaming(|rank, b| if rank == 1 { b.project(&[0, 2, 3, 4]).unwrap() } else { b });
    for (rank, r) in results.into_iter().enumerate() {
        let err = r.expect_err("the workers disagree").to_string();
        assert!(
            err.contains(r#"has the features ["x0", "x2", "c"], this worker's ["x0", "x1", "x2", "c"]"#)
                || err.contains(r#"has the features ["x0", "x1", "x2", "c"], this worker's ["x0", "x2", "c"]"#),
            "worker {rank}: {err}"
        );
    }
}

/// A sink that bins on the host, taking at most `most` rows at a time: what it is handed.
struct HostSink {
    matrix: polars_gbt::data::BinnedMatrix,
    most: usize,
    pieces: std::sync::Arc<std::sync::Mutex<Vec<(usize, usize)>>>,
}

impl polars_gbt::data::BinSink for HostSink {
    fn max_rows(&self, _: &FeatureFrame) -> usize {
        self.most
    }

    fn fill(&mut self, at: usize, frame: &FeatureFrame, cuts: &[polars_gbt::data::FeatureCuts]) -> Result<()> {
        self.pieces.lock().unwrap().push((at, frame.n_rows()));
        self.matrix.fill(at, frame, cuts);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Box<dyn std::any::Any + Send>> {
        Ok(Box::new(self.matrix))
    }
}

#[test]
fn a_sink_gets_large_batches_in_pieces_and_bins_as_the_host() {
    use polars_gbt::data::{stream_dataset_into, BinSink, BinnedMatrix, FeatureCuts};

    let (n, late) = (5_000, 4_000);
    let cfg = TrainConfig::default();
    let host = streamed(&cfg, n, late, &[3_000]);
    let pieces = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut sink_for = |rows: usize, cuts: &[FeatureCuts]| -> Result<Option<Box<dyn BinSink>>> {
        let matrix = BinnedMatrix::zeroed(rows, cuts);
        Ok(Some(Box::new(HostSink { matrix, most: 700, pieces: pieces.clone() })))
    };
    let spans = cut(n, &[3_000]);
    let mut source = RecordBatches::new(|| Ok(spans.iter().map(|&(a, b)| Ok(batch(a, b, late)))), "y");
    let sunk = stream_dataset_into(&mut source, &params(&cfg), &mut sink_for, &mut |_| {}).unwrap();
    // Batches of 3,000 and 2,000 rows, in pieces of at most 700, in order.
    let got = pieces.lock().unwrap().clone();
    let want: Vec<(usize, usize)> = [(0, 3_000), (3_000, 2_000)]
        .iter()
        .flat_map(|&(start, len)| (0..len).step_by(700).map(move |a| (start + a, 700.min(len - a))))
        .collect();
    assert_eq!(got, want);
    let binned = sunk.binned().unwrap();
    let elsewhere = binned.all.elsewhere.as_ref().unwrap().take().unwrap();
    let matrix = elsewhere.downcast::<BinnedMatrix>().unwrap();
    let expected = &host.binned().unwrap().all.matrix;
    assert!((0..n).all(|r| (0..4).all(|f| matrix.get(r, f) == expected.get(r, f))), "the sink's bins differ");
}
