//! The TCP ring on localhost threads, and distributed fits through it: every worker's model
//! must be, byte for byte, the model one worker gives on all rows.

mod common;

use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::distributed::{dataset, on_ring, ranked, ring_config, rows, rows_of, tracker, train_shards, Rows};
use polars_gbt::backend::refit::select_over_workers;
use polars_gbt::collective::{Collective, RowSpans, Shard, TcpRing};
use polars_gbt::objective::{quantile, weighted_quantile};
use polars_gbt::random::hash64;
use polars_gbt::{Error, TrainConfig};

#[test]
fn sums_maxima_gathers_and_broadcasts_agree_with_a_serial_computation() {
    for world in 1..=4 {
        for len in [0usize, 1, 3, 1000] {
            let value = |rank: usize, i: usize| (hash64(rank as u64, i as u64) >> 20) as i64 - (1 << 42);
            let results = on_ring(world, move |ring| {
                let r = ring.rank();
                let mut sum: Vec<i64> = (0..len).map(|i| value(r, i)).collect();
                let mut max = sum.clone();
                ring.all_reduce_sum(&mut sum)?;
                ring.all_reduce_max(&mut max)?;
                let gathered = ring.all_gather(&vec![r as u8; r * 3])?;
                let from_last = ring.broadcast(if r == world - 1 { b"last" } else { b"" }, world - 1)?;
                Ok((sum, max, gathered, from_last))
            });
            let want_sum: Vec<i64> = (0..len).map(|i| (0..world).map(|r| value(r, i)).sum()).collect();
            let want_max: Vec<i64> = (0..len).map(|i| (0..world).map(|r| value(r, i)).max().unwrap()).collect();
            let want_gathered: Vec<Vec<u8>> = (0..world).map(|r| vec![r as u8; r * 3]).collect();
            for r in results {
                let (sum, max, gathered, from_last) = r.unwrap();
                assert_eq!((&sum, &max), (&want_sum, &want_max), "world {world}, {len} values");
                assert_eq!(gathered, want_gathered);
                assert_eq!(from_last, b"last");
            }
        }
    }
}

#[test]
fn a_connection_without_the_jobs_token_is_refused() {
    let (address, tracker) = tracker(2, "right", Duration::from_secs(20));
    // A stray client speaks first, with another job's token: the tracker drops it and waits on.
    let stray = ring_config(0, 2, &address, "wrong", Duration::from_secs(2));
    let stray = std::thread::spawn(move || TcpRing::join(&stray).map(|_| ()));
    std::thread::sleep(Duration::from_millis(200));
    let workers: Vec<_> = (0..2)
        .map(|rank| {
            let address = address.clone();
            std::thread::spawn(move || {
                let ring = TcpRing::join(&ring_config(rank, 2, &address, "right", Duration::from_secs(20)))?;
                let mut v = [rank as i64 + 1];
                ring.all_reduce_sum(&mut v)?;
                Ok::<_, Error>(v[0])
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap().unwrap(), 3);
    }
    tracker.join().unwrap().unwrap();
    let err = stray.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("tracker"), "{err}");
    // Junk sent straight to a finished tracker's port finds nothing listening.
    assert!(TcpStream::connect(&address).is_err());
}

#[test]
fn a_worker_that_stops_is_an_error_naming_it_and_no_hang() {
    let results = on_ring(3, |ring| {
        if ring.rank() == 1 {
            // Rank 1 leaves without taking part: its sockets close.
            return Ok(None);
        }
        let start = Instant::now();
        let mut v = vec![1i64; 100];
        let err = ring.all_reduce_sum(&mut v).unwrap_err().to_string();
        // The ring is broken for good afterwards.
        let again = ring.all_gather(b"x").unwrap_err().to_string();
        Ok(Some((err, again, start.elapsed())))
    });
    let mut named = false;
    for r in results.into_iter().flatten().flatten() {
        let (err, again, took) = r;
        assert!(err.starts_with("distributed fit: rank"), "{err}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert!(again.contains("broke"), "{again}");
        named |= err.contains("rank 1 at 127.0.0.1:");
    }
    assert!(named, "some worker's error names rank 1");
}

#[test]
fn a_silent_worker_is_an_error_at_the_deadline() {
    let (address, tracker) = tracker(2, "job", Duration::from_secs(20));
    let timeout = Duration::from_millis(800);
    let workers: Vec<_> = (0..2)
        .map(|rank| {
            let address = address.clone();
            std::thread::spawn(move || {
                let ring = TcpRing::join(&ring_config(rank, 2, &address, "job", timeout))?;
                if rank == 1 {
                    // Alive but silent: holds its sockets open past the other's deadline.
                    std::thread::sleep(Duration::from_secs(3));
                    return Ok(None);
                }
                let start = Instant::now();
                let err = ring.all_reduce_sum(&mut [1, 2, 3]).unwrap_err().to_string();
                Ok::<_, Error>(Some((err, start.elapsed())))
            })
        })
        .collect();
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    tracker.join().unwrap().unwrap();
    let (err, took) = results[0].clone().unwrap();
    assert!(err.contains("within the timeout") && err.contains("rank 1"), "{err}");
    assert!(took >= timeout && took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn a_distributed_fit_gives_the_bytes_of_one_worker() {
    let n = 3000;
    let all = Arc::new(rows(n, 7));
    let cases = [
        (r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 4, "seed": 3}"#, true),
        (
            r#"{"objective": "binary:logistic", "n_estimators": 8, "max_depth": 5, "subsample": 0.7,
                "colsample_bynode": 0.7, "max_cat_to_onehot": 1, "seed": 11}"#,
            true,
        ),
        (
            r#"{"objective": "reg:squarederror", "n_estimators": 6, "grow_policy": "lossguide", "max_leaves": 12}"#,
            false,
        ),
        (r#"{"objective": "multi:softprob", "num_class": 2, "n_estimators": 4, "max_depth": 3}"#, true),
        // Leaves refit to quantiles of every worker's residuals (unit weights).
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 6, "max_depth": 4, "subsample": 0.8}"#, false),
        (r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.93], "n_estimators": 4}"#, false),
        // Vector leaves: every output's histogram summed over the workers.
        (
            r#"{"objective": "multi:softprob", "num_class": 2, "n_estimators": 5, "max_depth": 4, "subsample": 0.8,
                "max_cat_to_onehot": 1, "multi_strategy": "multi_output_tree"}"#,
            true,
        ),
        (
            r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.9], "n_estimators": 4,
                "multi_strategy": "multi_output_tree"}"#,
            false,
        ),
    ];
    // Uneven shards, one nearly empty, one holding two runs that are not adjacent.
    let shards = vec![vec![(0, 1200), (2990, 10)], vec![(1200, 7)], vec![(1207, 1783)]];
    for (json, weights) in cases {
        let cfg = TrainConfig::from_json(json).unwrap();
        let whole = dataset(&all, &(0..n).collect::<Vec<_>>(), weights);
        let want = polars_gbt::train(&cfg, &whole, &[]).unwrap().to_bytes();
        let all = all.clone();
        for got in train_shards(n, shards.clone(), cfg, move |rows| dataset(&all, rows, weights)) {
            assert!(got.unwrap().to_bytes() == want, "a worker's model differs from one worker's for {json}");
        }
    }
}

#[test]
fn whole_weighted_leaf_refits_over_workers_give_the_bytes_of_one_worker() {
    // Whole weights (0 to 4) sum exactly in any order, so L1-type leaves refit over every
    // worker's rows; fractional ones are still refused (the test below).
    let n = 3000;
    let all = Arc::new(rows(n, 21));
    let whole = |rows: &[usize]| -> Vec<f32> { rows.iter().map(|&r| (hash64(77, r as u64) % 5) as f32).collect() };
    let shards = vec![vec![(0, 1200), (2990, 10)], vec![(1200, 7)], vec![(1207, 1783)]];
    for json in [
        r#"{"objective": "reg:absoluteerror", "n_estimators": 6, "max_depth": 4, "subsample": 0.8}"#,
        r#"{"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.93], "n_estimators": 4}"#,
    ] {
        let cfg = TrainConfig::from_json(json).unwrap();
        let every: Vec<usize> = (0..n).collect();
        let one = dataset(&all, &every, false).with_weight(whole(&every)).unwrap();
        let want = polars_gbt::train(&cfg, &one, &[]).unwrap().to_bytes();
        let all = all.clone();
        for got in train_shards(n, shards.clone(), cfg, move |rows| {
            dataset(&all, rows, false).with_weight(whole(rows)).unwrap()
        }) {
            assert!(got.unwrap().to_bytes() == want, "a worker's model differs from one worker's for {json}");
        }
    }
}

#[test]
fn quantiles_over_workers_equal_the_quantile_of_all_values() {
    // Groups of every size from none to many, ties and signed zeros among them, spread over
    // three workers unevenly; each group's selection equals one worker's over all its values.
    let n_groups = 40;
    let values_of = |g: usize| -> Vec<f32> {
        (0..(g * g) % 97)
            .map(|i| match hash64(g as u64, i as u64) % 7 {
                0 => 0.0,
                1 => -0.0,
                2 => f32::MIN_POSITIVE,
                k => (hash64(i as u64, k) % 1000) as f32 / 8.0 - 60.0,
            })
            .collect()
    };
    for alpha in [0.0, 0.1, 0.5, 0.93, 1.0] {
        let results = on_ring(3, move |ring| {
            // Worker r holds the values whose index modulo 5 maps to it (0, 1, 1, 2, 2).
            let mine: Vec<Vec<f32>> = (0..n_groups)
                .map(|g| {
                    let all = values_of(g);
                    all.into_iter()
                        .enumerate()
                        .filter(|(i, _)| [0, 1, 1, 2, 2][i % 5] == ring.rank())
                        .map(|p| p.1)
                        .collect()
                })
                .collect();
            select_over_workers(ring, &mine, None, alpha)
        });
        for got in results {
            let got = got.unwrap();
            for (g, q) in got.iter().enumerate() {
                let mut all = values_of(g);
                let want = if all.is_empty() { 0.0 } else { quantile(&mut all, alpha) };
                assert_eq!(q.to_bits(), want.to_bits(), "group {g} at alpha {alpha}");
            }
        }
    }
}

#[test]
fn whole_weighted_quantiles_over_workers_equal_the_weighted_quantile_of_all_values() {
    // As above with whole weights from 0 to 5 (a group whose weights are all 0 included):
    // each group's selection equals the CPU's weighted quantile of all its values in order.
    let n_groups = 40;
    let values_of = |g: usize| -> Vec<(f32, f32)> {
        (0..(g * g) % 97)
            .map(|i| {
                let v = match hash64(g as u64, i as u64) % 7 {
                    0 => 0.0,
                    1 => -0.0,
                    k => (hash64(i as u64, k) % 1000) as f32 / 8.0 - 60.0,
                };
                let w = if g == 7 { 0.0 } else { (hash64(i as u64, g as u64 + 99) % 6) as f32 };
                (v, w)
            })
            .collect()
    };
    assert!(!values_of(7).is_empty());
    for alpha in [0.0, 0.1, 0.5, 0.93, 1.0] {
        let results = on_ring(3, move |ring| {
            let (mut values, mut weights) = (Vec::new(), Vec::new());
            for g in 0..n_groups {
                let mine: Vec<(f32, f32)> = values_of(g)
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| [0, 1, 1, 2, 2][i % 5] == ring.rank())
                    .map(|p| p.1)
                    .collect();
                values.push(mine.iter().map(|p| p.0).collect());
                weights.push(mine.iter().map(|p| p.1).collect());
            }
            select_over_workers(ring, &values, Some(&weights), alpha)
        });
        for got in results {
            let got = got.unwrap();
            for (g, q) in got.iter().enumerate() {
                let all = values_of(g);
                let values: Vec<f32> = all.iter().map(|p| p.0).collect();
                let want = if all.is_empty() { 0.0 } else { weighted_quantile(&values, |i| all[i].1, alpha) };
                assert_eq!(q.to_bits(), want.to_bits(), "group {g} at alpha {alpha}");
            }
        }
    }
}

#[test]
fn distributed_fits_refuse_what_they_cannot_do_yet_on_every_worker() {
    let n = 400;
    let all = Arc::new(rows(n, 9));
    // A weighted quantile's running sum follows one worker's row order.
    let cfg = TrainConfig::from_json(r#"{"objective": "reg:absoluteerror", "n_estimators": 2}"#).unwrap();
    let results = train_shards(n, vec![vec![(0, 150)], vec![(150, 250)]], cfg, move |rows| dataset(&all, rows, true));
    for r in results {
        let err = r.unwrap_err().to_string();
        assert!(err.contains("cannot be trained distributed yet"), "{err}");
    }
}

#[test]
fn workers_whose_data_differ_are_an_error_naming_the_worker() {
    let n = 300;
    let all = Arc::new(rows(n, 5));
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 2}"#).unwrap();
    // Worker 0 (rows from 0) has weights; worker 1 has none.
    let results =
        train_shards(n, vec![vec![(0, 100)], vec![(100, 200)]], cfg, move |rows| dataset(&all, rows, rows[0] == 0));
    for r in results {
        let err = r.unwrap_err().to_string();
        assert!(err.contains("worker 1's data has") && err.contains("weight"), "{err}");
    }
}

#[test]
fn distributed_evaluation_sets_and_early_stopping_match_one_worker() {
    let (n, n_eval) = (2000, 600);
    let all = Arc::new(rows(n + n_eval, 13));
    let range = |a: usize, b: usize| (a..b).collect::<Vec<_>>();
    let cases = [
        (
            r#"{"objective": "binary:logistic", "n_estimators": 60, "max_depth": 5, "learning_rate": 0.5,
             "eval_metric": ["logloss", "auc"], "early_stopping_rounds": 3, "seed": 1}"#,
            false,
        ),
        (r#"{"objective": "rank:ndcg", "n_estimators": 6, "max_depth": 3, "eval_metric": ["ndcg@5", "map"]}"#, true),
    ];
    for (json, ranking) in cases {
        let cfg = TrainConfig::from_json(json).unwrap();
        let make =
            move |all: &Rows, rows: &[usize]| if ranking { ranked(all, rows) } else { dataset(all, rows, false) };
        let whole = make(&all, &range(0, n));
        let valid = make(&all, &range(n, n + n_eval));
        let want = polars_gbt::train(&cfg, &whole, &[("valid", &valid)]).unwrap();
        // Training rows on three workers; the evaluation rows on two of them, none on the third.
        let train_spans = [vec![(0, 700), (1900, 100)], vec![(700, 500)], vec![(1200, 700)]];
        let eval_spans = [vec![(400, 200)], vec![], vec![(0, 400)]];
        let all = all.clone();
        let models = on_ring(3, move |ring| {
            let r = ring.rank();
            let data = make(&all, &rows_of(&train_spans[r]));
            let valid = make(&all, &rows_of(&eval_spans[r]).iter().map(|i| n + i).collect::<Vec<_>>());
            let shard = Shard {
                comm: ring,
                rows: RowSpans::new(train_spans[r].clone(), n as u64)?,
                evals: vec![RowSpans::new(eval_spans[r].clone(), n_eval as u64)?],
            };
            polars_gbt::Training::new(&cfg, &data).evals(&[("valid", &valid)]).shard(&shard).run()
        });
        for m in models {
            let m = m.unwrap();
            if !ranking {
                assert!(m.best_iteration().is_some() && m.num_trees() < 60, "early stopping took effect");
            }
            assert!(m.to_bytes() == want.to_bytes(), "a worker's model (its log included) differs for {json}");
        }
    }
}

#[test]
fn no_rows_is_an_error_outside_a_workers_share_of_an_evaluation_set() {
    let all = rows(50, 3);
    let empty = dataset(&all, &[], false);
    let full = dataset(&all, &(0..50).collect::<Vec<_>>(), false);
    let cfg = TrainConfig::from_json(r#"{"n_estimators": 2}"#).unwrap();
    let err = polars_gbt::train(&cfg, &empty, &[]).unwrap_err().to_string();
    assert!(err.contains("the data has no rows"), "{err}");
    let err = polars_gbt::train(&cfg, &full, &[("valid", &empty)]).unwrap_err().to_string();
    assert!(err.contains("eval set `valid` has no rows"), "{err}");
}

/// The base score of a weighted mean comes from the workers' partial sums when no addition
/// can round, and from every label gathered when one might: labels from 1e-20 to 1e20. Both
/// give one worker's model.
#[test]
fn base_scores_over_workers_are_one_workers_whether_summed_or_gathered() {
    let n = 2000;
    let shards = vec![vec![(0, 700)], vec![(700, 1300)]];
    let mut fractional = rows(n, 21);
    fractional.label = (0..n).map(|i| (i % 97) as f32 / 7.0).collect();
    let mut wide = rows(n, 22);
    wide.label = (0..n).map(|i| 10f32.powi((i % 41) as i32 - 20) * if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
    for (all, what, summed) in [(fractional, "fractional labels", true), (wide, "labels from 1e-20 to 1e20", false)] {
        // Which way the base score goes: unweighted, the sums are of the labels themselves.
        let labels = |start: usize, out: &mut [[f64; 1]]| {
            out.iter_mut().zip(&all.label[start..]).for_each(|(o, &y)| *o = [y as f64]);
        };
        let exact = polars_gbt::collective::exact_sums(&polars_gbt::collective::Solo, n, labels);
        assert_eq!(exact.unwrap().is_some(), summed, "{what}");
        let all = Arc::new(all);
        for json in [
            r#"{"objective": "reg:squarederror", "n_estimators": 3}"#,
            r#"{"objective": "reg:tweedie", "n_estimators": 3}"#,
        ] {
            if json.contains("tweedie") && what.contains("1e20") {
                continue; // Tweedie needs labels >= 0
            }
            let cfg = TrainConfig::from_json(json).unwrap();
            let want = polars_gbt::train(&cfg, &dataset(&all, &(0..n).collect::<Vec<_>>(), false), &[]).unwrap();
            let all = all.clone();
            for got in train_shards(n, shards.clone(), cfg, move |rows| dataset(&all, rows, false)) {
                let got = got.unwrap();
                assert_eq!(got.base_margin(), want.base_margin(), "{what}, {json}");
                assert!(
                    got.to_bytes() == want.to_bytes(),
                    "{what}, {json}: a worker's model differs from one worker's"
                );
            }
        }
    }
}
