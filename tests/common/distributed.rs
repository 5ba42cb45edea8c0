//! Distributed fits in tests: a tracker and a ring of worker threads on localhost, and a
//! small mixed problem to shard among them.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array, Int32Array, StringArray};
use polars_gbt::collective::{serve_tracker, RingConfig, TcpRing};
use polars_gbt::random::hash64;
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame};

/// Starts a tracker for `world` workers and returns its address.
pub fn tracker(
    world: usize,
    token: &str,
    timeout: Duration,
) -> (String, std::thread::JoinHandle<polars_gbt::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let token = token.to_string();
    (address, std::thread::spawn(move || serve_tracker(listener, world, &token, timeout)))
}

pub fn ring_config(rank: usize, world: usize, tracker: &str, token: &str, timeout: Duration) -> RingConfig {
    RingConfig {
        rank,
        world,
        tracker: tracker.to_string(),
        token: token.to_string(),
        host: "127.0.0.1".to_string(),
        timeout,
    }
}

/// Runs `work` on `world` workers joined in one ring, one thread each; results by rank.
pub fn on_ring<T: Send + 'static>(
    world: usize,
    work: impl Fn(&TcpRing) -> polars_gbt::Result<T> + Send + Sync + 'static,
) -> Vec<polars_gbt::Result<T>> {
    let (address, tracker) = tracker(world, "job-1", Duration::from_secs(30));
    let work = Arc::new(work);
    let workers: Vec<_> = (0..world)
        .map(|rank| {
            let (address, work) = (address.clone(), work.clone());
            std::thread::spawn(move || {
                let ring = TcpRing::join(&ring_config(rank, world, &address, "job-1", Duration::from_secs(30)))?;
                work(&ring)
            })
        })
        .collect();
    let out = workers.into_iter().map(|w| w.join().unwrap()).collect();
    tracker.join().unwrap().unwrap();
    out
}

/// Rows of a small mixed problem: two numeric features with nulls, one categorical feature
/// (strings), a label and weights.
pub struct Rows {
    pub x0: Vec<f32>,
    pub x1: Vec<f32>,
    pub cat: Vec<Option<String>>,
    pub label: Vec<f32>,
    pub weight: Vec<f32>,
}

pub fn rows(n: usize, seed: u64) -> Rows {
    let u = |k: u64, i: usize| (hash64(seed ^ k, i as u64) >> 11) as f64 / (1u64 << 53) as f64;
    let x0: Vec<f32> = (0..n).map(|i| if u(1, i) < 0.15 { f32::NAN } else { (u(2, i) * 4.0 - 2.0) as f32 }).collect();
    let x1: Vec<f32> = (0..n).map(|i| if u(3, i) < 0.3 { f32::NAN } else { (u(4, i) * 10.0) as f32 }).collect();
    let cat: Vec<Option<String>> =
        (0..n).map(|i| (u(5, i) >= 0.1).then(|| format!("c{}", (u(6, i) * 12.0) as usize))).collect();
    let label: Vec<f32> = (0..n)
        .map(|i| {
            let c = cat[i].as_ref().map_or(0.0, |c| if c.ends_with('3') || c.ends_with('7') { 1.5 } else { -0.5 });
            let x = if x0[i].is_nan() { -1.0 } else { x0[i].clamp(-1.0, 1.0) };
            let s = x + c + if x1[i].is_nan() { 0.7 } else { x1[i] / 10.0 } + u(7, i) as f32;
            (s > 1.2) as u8 as f32
        })
        .collect();
    let weight = (0..n).map(|i| 0.5 + u(8, i) as f32).collect();
    Rows { x0, x1, cat, label, weight }
}

/// The dataset of `rows` (in that order), its categorical column dictionary-coded in order
/// of first appearance, as a worker holding only those rows would code it.
pub fn dataset(all: &Rows, rows: &[usize], weights: bool) -> Dataset {
    let mut levels: Vec<String> = Vec::new();
    let codes: Vec<Option<i32>> = rows
        .iter()
        .map(|&r| {
            all.cat[r].as_ref().map(|c| match levels.iter().position(|l| l == c) {
                Some(p) => p as i32,
                None => {
                    levels.push(c.clone());
                    levels.len() as i32 - 1
                }
            })
        })
        .collect();
    let dict =
        DictionaryArray::<Int32Type>::try_new(Int32Array::from(codes), Arc::new(StringArray::from(levels))).unwrap();
    let numeric =
        |v: &[f32]| -> ArrayRef { Arc::new(Float32Array::from(rows.iter().map(|&r| v[r]).collect::<Vec<_>>())) };
    let frame = FeatureFrame::new(vec![
        FeatureColumn::new("x0", vec![numeric(&all.x0)]).unwrap(),
        FeatureColumn::new("x1", vec![numeric(&all.x1)]).unwrap(),
        FeatureColumn::new("cat", vec![Arc::new(dict) as ArrayRef]).unwrap(),
    ])
    .unwrap();
    let label: Vec<f32> = rows.iter().map(|&r| all.label[r]).collect();
    let d = Dataset::with_labels_or_empty(frame, label.into(), 1).unwrap();
    if weights {
        d.with_weight(rows.iter().map(|&r| all.weight[r]).collect()).unwrap()
    } else {
        d
    }
}

/// `rows` as a dataset with query groups of 10 consecutive global rows (rows must hold whole
/// groups).
pub fn ranked(all: &Rows, rows: &[usize]) -> Dataset {
    let ids: Vec<i64> = rows.iter().map(|&r| (r / 10) as i64).collect();
    dataset(all, rows, false).with_group_ids(&ids).unwrap()
}

/// The global rows of `spans` (runs of `(first row, length)`), in order.
pub fn rows_of(spans: &[(u64, u64)]) -> Vec<usize> {
    spans.iter().flat_map(|&(s, l)| s as usize..(s + l) as usize).collect()
}

/// Trains `cfg` with one worker per entry of `shards` (the worker's runs of global rows, out
/// of `n`), each on the dataset `make` builds from its rows; every worker's result, by rank.
pub fn train_shards(
    n: usize,
    shards: Vec<Vec<(u64, u64)>>,
    cfg: polars_gbt::TrainConfig,
    make: impl Fn(&[usize]) -> Dataset + Send + Sync + 'static,
) -> Vec<polars_gbt::Result<polars_gbt::Model>> {
    use polars_gbt::collective::{Collective, RowSpans, Shard};

    let world = shards.len();
    on_ring(world, move |ring| {
        let spans = shards[ring.rank()].clone();
        let data = make(&rows_of(&spans));
        let shard = Shard { comm: ring, rows: RowSpans::new(spans, n as u64)?, evals: Vec::new() };
        polars_gbt::Training::new(&cfg, &data).shard(&shard).run()
    })
}
